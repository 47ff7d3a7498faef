"""What the other modules of a project define: the facts one file's lint needs from the rest.

jaxlint lints one file at a time, but the jitted training step often lives in `steps.py` and
the loop that calls it in `train.py`, and a model-surgery helper in `utils.py` may only ever
be called from a jitted function elsewhere. Before linting, `summarize` reads every file of
the run with Python's `ast` (a tenth of the cost of the libcst parse the lint does) and
records, per module:

- `jitted`: its top-level names bound to jit-compiled callables (`@jax.jit def step`,
  `@partial(jax.jit, static_argnums=1)`, `step = eqx.filter_jit(make_step)`), with the API;
- `traced_calls`: the project functions it calls from traced code (the bodies of functions it
  jits, transforms, scans or hands to a transform, and the local functions those call), and
  the project functions it hands to a transform itself (`jax.jit(steps.loss)`);
- `eager_calls`: the project functions it calls anywhere else (module level, functions not
  known to be traced: precision first, a function of unknown mode counts as eager);
- what other modules reach through it: the names its top-level imports bind (`__init__.py`
  re-exports), its `from x import *` and `__all__`, its factories (functions returning a
  jitted callable) and its top-level `step = make_step(...)` calls;
- `forwards`: which parameters its top-level functions hand, unchanged, to a call of a project
  callable (`Project.forwarded` keeps those whose callable is jitted);
- `looped`: the project callables it calls once per iteration of a loop, and where
  (`Project.looped`: a function another module's loop runs many times).
- `holders`: its functions that return an object built from jitted callables alone
  (`Project.holder`: `model = compiled(pair)` makes `model.apply(...)` a jitted call);
- `traceable`: which of its functions would trace under jit as they are, with their static
  parameters and the project functions they call (`_traceable`; `Project.traceable` joins them);
- `light`: its functions whose only device work is light one-pass array operations (a gradient
  norm: `Project.light`), and `copiers`: its functions and methods that copy arrays to the
  host or block on them (`Project.copies`: `engine.sync()` waits for the device).

`Project` joins them: `jitted(name)` for a call of an imported name, and `traced_only(name)`
for a function that other modules call only from traced code and nowhere else, so that its
body runs once per compile, not once per step; `factory(name)` for a call of a function that
returns a jitted callable. Re-exports are followed to where a name is defined (`canonical`).
Each file's cached findings key on `digest_for(file)`: only the facts its findings can read.
Names are absolute dotted names (`pkg.steps.
train_step`); a module's name comes from its path and the `__init__.py` files above it, as
Python would import it (a script beside others is imported by its stem). Folders above that
hold no `__init__.py` are namespace packages to Python: `src/flow/ct.py` is imported as
`flow.ct` run from `src/` and as `src.flow.ct` run from the root, so those names are aliases of
the module `ct` (a name two modules could be imported by is not).
"""

from __future__ import annotations

import ast
import hashlib
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from . import _batches, _jaxapi
from ._device import HOST_ATTRIBUTES
from ._traceable import Traceable, read as _read_traceable

__all__ = ["ModuleFacts", "Project", "absolute_name", "module_name", "summarize"]

@dataclass(frozen=True)
class ModuleFacts:
    """What one module tells the rest of the project (see the module docstring)."""

    module: str
    jitted: tuple[tuple[str, str], ...] = ()  # (top-level name, jit API)
    traced_calls: frozenset[str] = frozenset()
    eager_calls: frozenset[str] = frozenset()
    # Absolute names its import statements name (anywhere in it): the modules it depends on.
    imports: frozenset[str] = frozenset()
    # Top-level names bound by imports (re-exports: `from .steps import train_step` in
    # `pkg/__init__.py`), as (name, absolute name imported).
    aliases: tuple[tuple[str, str], ...] = ()
    stars: tuple[str, ...] = ()  # modules of its top-level `from x import *`
    exports: tuple[str, ...] | None = None  # its `__all__`, when a literal list of strings
    # Top-level functions every `return` of which gives a jitted callable (`return
    # jax.jit(step)`), as (name, jit API), or a tuple holding some (`return train_step,
    # eval_step` of two jitted local defs), as (name, the jit API of each position joined by
    # commas, empty for a position that is not jitted).
    factories: tuple[tuple[str, str], ...] = ()
    # Top-level functions every `return` of which gives an object built from jitted callables
    # alone (`return Transformed(jax.jit(f.init), jax.jit(f.apply))`, `type(f)(...)`), as
    # (name, jit API): every method called on what they return is one of those callables.
    holders: tuple[tuple[str, str], ...] = ()
    # Top-level functions that would trace under jit as they are, as (name, what `_traceable`
    # says of each, encoded): its parameters, those jit must take static, and the project
    # functions it calls or hands on (`Project.traceable` joins them).
    traceable: tuple[tuple[str, str], ...] = ()
    # Top-level `name = f(...)` of a project function `f` (a factory elsewhere), as (name, f).
    assigned: tuple[tuple[str, str], ...] = ()
    # Top-level classes with each base they name, as (class, absolute base name; a class of the
    # module itself as `module.Base`): which are Module classes, the project joins.
    classes: tuple[tuple[str, str], ...] = ()
    # Top-level functions every `return` of which gives the same thing, as (name, what): the
    # absolute name of the class or function whose call it returns (`return Transformer(cfg)`,
    # through a local name bound to one), or what the library table says it is (`=module` for
    # an `eqx.nn` layer, `=state` for an optax `init`, `=pytree` for `TrainState.create`,
    # `=stream` for a data loader or a dataset's batches, `=ragged` for those whose last batch
    # can be smaller and for a generator of such slices: `_batches`); a returned tuple's are
    # joined by commas, an unknown element empty.
    builds: tuple[tuple[str, str], ...] = ()
    # Top-level generator functions that yield in a loop, and classes whose `__iter__` does:
    # a loop over what they give runs over data.
    streams: tuple[str, ...] = ()
    # Top-level functions that hand a positional parameter, never rebound, as it is to a call
    # of a project callable (`def next_token(w, tokens): return argmax(logits(w, tokens))`),
    # as (function, "index:callee"): whether the callee is jitted, the project says.
    forwards: tuple[tuple[str, str], ...] = ()
    # The project callables it calls once per iteration of a loop, as (absolute name, line of
    # the outermost such loop): a top-level function (`pkg.steps.update`), or a method of a
    # class (`pkg.agent.Agent.act`) called on `self` or on a name the function binds to a
    # call of that class (`agent = Agent(...)`). Loops over a short literal table, tests and
    # traced bodies are left out.
    looped: tuple[tuple[str, str], ...] = ()
    # Methods of its top-level classes that are jitted (a jit decorator, or a class-level
    # `step = jax.jit(_step)`), as ("Class.method", jit API): what `trainer.step(batch)`
    # compiles, for an instance of the class or of a subclass; a subclass's other methods
    # with an empty API (they override a base's jitted one).
    methods: tuple[tuple[str, str], ...] = ()
    # What it passes positionally to project functions of other modules, as (absolute callee,
    # "index:ragged" for a data loader or dataset whose last batch can be smaller, `_batches`,
    # bound to the name passed; "index:" for anything else): `fit(train_loader)` in main.py
    # where `train_loader = DataLoader(ds, batch_size=64)`.
    passes: tuple[tuple[str, str], ...] = ()
    # Its top-level functions and methods of top-level classes (as "Class.method") that start
    # device work, wait for none of it and return its results (`_Summary._unwaited`): a call of
    # one returns with the work in flight, as a call of a jitted function does.
    unwaited: tuple[str, ...] = ()
    # Its top-level functions and methods of top-level classes (as "Class.method") every
    # `return` of which gives a value computed on the device (`_DeviceReturns`), waited for or
    # not: `metrics = model.diagnostics(state)` holds device values.
    device_returns: tuple[str, ...] = ()
    # Its top-level functions whose only device work is light array operations
    # (`light_body`: `def tree_norm(t): return jnp.sqrt(sum(jnp.sum(x * x) for x in leaves(t)))`),
    # jitted or not: one pass over their inputs, microseconds on values the host has waited for.
    light: tuple[str, ...] = ()
    # Its top-level functions and methods of its top-level classes (as "Class.method") whose
    # body copies arrays to the host or blocks on them (`float(loss)`, `np.asarray(x)`,
    # `x.item()`, `jax.block_until_ready`: `copies_on_host`): a call of one waits for the device
    # values it reads, whatever the caller can see of its arguments.
    copiers: tuple[str, ...] = ()
    # Its top-level functions and methods of its top-level classes whose every call hands the
    # host a device value they compute themselves, as "samples:NAME" (the body needs the copy at
    # once: `samples_on_host`, a batch sampler drawing offsets with `jax.random`) and
    # "returns:NAME" (it returns the copy: `returns_on_host`, `return int(jnp.argmax(q))`): a
    # call of one waits for all the device work dispatched before it.
    host_needs: tuple[str, ...] = ()
    # The method names it calls on anything (`engine.sample(...)`, `self.sample(...)`), as its
    # text spells them: the evidence that a method of another module is called at all.
    called_methods: tuple[str, ...] = ()
    # The names of the methods (and nested functions) it defines: what `called_methods` of the
    # rest of the project answers for it.
    defined_methods: tuple[str, ...] = ()
    # Whether its tree was read, so every call it makes is in `traced_calls`/`eager_calls`
    # (False: read from its import lines alone; `steps.train_step(...)` is not known).
    parsed: bool = False


@dataclass
class Project:
    """The facts of every module of a run, joined."""

    modules: dict[str, str] = field(default_factory=dict)  # display path -> module name
    _jitted: dict[str, str] = field(default_factory=dict)  # absolute name -> jit API
    _factories: dict[str, str] = field(default_factory=dict)  # absolute name -> jit API it makes
    _holders: dict[str, str] = field(default_factory=dict)  # absolute name -> jit API of what it holds
    _traceables: dict[str, Traceable] = field(default_factory=dict)  # absolute name -> `_traceable`'s answer
    _traced_joined: dict[str, tuple[tuple[str, ...], frozenset[str]] | None] = field(default_factory=dict)
    _names: frozenset[str] | None = None  # the project's module names
    _heads: frozenset[str] | None = None  # their first parts
    _traced: set[str] = field(default_factory=set)
    _eager: set[str] = field(default_factory=set)
    _calls_jitted: set[str] = field(default_factory=set)  # display paths
    _aliases: dict[str, str] = field(default_factory=dict)  # module.name -> absolute name imported
    _stars: dict[str, tuple[str, ...]] = field(default_factory=dict)  # module -> its star imports
    _exports: dict[str, frozenset[str]] = field(default_factory=dict)  # module -> its __all__
    _digests: dict[str, str] = field(default_factory=dict)  # display path -> digest_for
    _packages: set[str] = field(default_factory=set)  # modules that are a package's __init__.py
    _bases: dict[str, tuple[str, ...]] = field(default_factory=dict)  # class -> its bases
    _modules: set[str] = field(default_factory=set)  # the project's Module classes
    _builds: dict[str, str] = field(default_factory=dict)  # function -> what it returns (`builds`)
    _streams: set[str] = field(default_factory=set)  # generators over data, iterable classes
    _forwards: dict[str, tuple[tuple[int, str], ...]] = field(default_factory=dict)  # function -> (index, callee)
    _looped: dict[str, tuple[str, int]] = field(default_factory=dict)  # callee -> (display path, loop line)
    _methods: dict[str, dict[str, str]] = field(default_factory=dict)  # class -> its methods -> jit API ("": not jitted)
    _class_jit: dict[str, dict[str, str]] = field(default_factory=dict)  # `_jitted_methods`, as asked
    _passes: dict[str, dict[int, set[str]]] = field(default_factory=dict)  # function -> index -> kinds passed
    _unwaited: set[str] = field(default_factory=set)  # functions and methods returning work in flight
    _device_returners: set[str] = field(default_factory=set)  # functions and methods returning device values
    _light: set[str] = field(default_factory=set)  # functions whose device work is light (`ModuleFacts.light`)
    _copiers: set[str] = field(default_factory=set)  # functions and methods that copy to the host (`ModuleFacts.copiers`)
    _samplers: set[str] = field(default_factory=set)  # functions and methods that need their own device values now (`ModuleFacts.host_needs`)
    _host_returners: set[str] = field(default_factory=set)  # functions and methods returning host copies of their own device values
    _called_methods: set[str] = field(default_factory=set)  # method names some module calls (`ModuleFacts.called_methods`)
    _homes: dict[str, Mapping[str, str]] = field(default_factory=dict)  # module -> top name -> module (`_Layout`)
    _canonical: dict[str, str] | None = None  # `canonical`'s answers, kept once what it reads is complete
    digest: str = ""
    library: _jaxapi.Library = field(default_factory=_jaxapi.base_library)  # with `extend-*` names

    @classmethod
    def from_facts(
        cls,
        facts: Iterable[tuple[str, ModuleFacts]],
        *,
        imported_jit: bool = True,
        library: _jaxapi.Library | None = None,
        spellings: Mapping[str, tuple[str, ...]] | None = None,
        homes: Mapping[str, Mapping[str, str]] | None = None,
    ) -> Project:
        """`imported_jit`: also use what other modules jit, directly, through re-exports
        (`__init__.py`, `from x import *`) or as made by their factories (what every run
        does; False leaves only which functions other modules call from traced code).
        `spellings`: display path -> the other names its module can be imported by
        (`_spellings`); a name more than one module could be imported by is not used.
        `homes`: module name -> the top-level names it imports from a root folder of its own
        (`_Layout`), for the names its file asks about."""
        project = cls(library=library or _jaxapi.base_library())
        project._homes = dict(homes or {})
        facts = list(facts)
        for display, module in facts:
            project.modules[display] = module.module
            if display.endswith("__init__.py"):
                project._packages.add(module.module)
        if imported_jit:
            for _, module in facts:
                for name, target in module.aliases:
                    if f"{module.module}.{name}" != target:
                        project._aliases[f"{module.module}.{name}"] = target
                if module.stars:
                    project._stars[module.module] = module.stars
                if module.exports is not None:
                    project._exports[module.module] = frozenset(module.exports)
                for name, api in module.jitted:
                    project._jitted[f"{module.module}.{name}"] = api
                for name, api in module.factories:
                    project._factories[f"{module.module}.{name}"] = api
                for name, api in module.holders:
                    project._holders[f"{module.module}.{name}"] = api
                for name, text in module.traceable:
                    known = Traceable.decode(text)
                    if known is not None:
                        project._traceables[f"{module.module}.{name}"] = known
                for name, base in module.classes:
                    key = f"{module.module}.{name}"
                    project._bases[key] = (*project._bases.get(key, ()), base)
                for name, built in module.builds:
                    project._builds[f"{module.module}.{name}"] = built
                project._streams.update(f"{module.module}.{name}" for name in module.streams)
                project._unwaited.update(f"{module.module}.{name}" for name in module.unwaited)
                project._device_returners.update(f"{module.module}.{name}" for name in module.device_returns)
                project._light.update(f"{module.module}.{name}" for name in module.light)
                project._copiers.update(f"{module.module}.{name}" for name in module.copiers)
                for entry in module.host_needs:
                    kind, _, name = entry.partition(":")
                    (project._samplers if kind == "samples" else project._host_returners).add(f"{module.module}.{name}")
                project._called_methods.update(module.called_methods)
                for name, api in module.methods:
                    owner, _, method = name.rpartition(".")
                    project._methods.setdefault(f"{module.module}.{owner}", {})[method] = api
                for name, passed in module.forwards:
                    index, _, callee = passed.partition(":")
                    key = f"{module.module}.{name}"
                    project._forwards[key] = (*project._forwards.get(key, ()), (int(index), callee))
            project._spell_modules(facts, spellings or {})
            for _, module in facts:  # `step = make_step(cfg)` of a factory elsewhere
                for name, target in module.assigned:
                    api = project._factories.get(project.canonical(target))
                    if api is not None and "," not in api:
                        project._jitted.setdefault(f"{module.module}.{name}", api)
        project._canonical = {}  # what defines names and re-exports them is complete from here
        project._module_classes()
        canonical = project.canonical if imported_jit else (lambda name: name)
        for _, module in facts:
            for callee, passed in module.passes:
                index, _, kind = passed.partition(":")
                project._passes.setdefault(canonical(callee), {}).setdefault(int(index), set()).add(kind)
        for display, module in sorted(facts, key=lambda pair: pair[0]):
            for callee, line in module.looped:
                project._looped.setdefault(canonical(callee), (display, int(line)))
        for _, module in facts:
            project._traced.update(map(canonical, module.traced_calls))
            project._eager.update(map(canonical, module.eager_calls))
        # Modules defining jitted callables: a module read without a parse that imports one
        # (`from pkg import steps`) is known to import it, not which of its names it calls.
        jitting = {name.rpartition(".")[0] for name in (*project._jitted, *project._factories)}
        for display, module in facts:
            if imported_jit and any(
                project._jitted.get(c) or project._factories.get(c) or project._holders.get(c) or project._makes_jitted(c)
                or (not module.parsed and c in jitting)
                for c in map(canonical, module.traced_calls | module.eager_calls)
            ):
                project._calls_jitted.add(display)
        project._key_files(facts, imported_jit)
        return project

    def _spell_modules(self, facts: list[tuple[str, ModuleFacts]], spellings: Mapping[str, tuple[str, ...]]) -> None:
        """Alias each other name a module can be imported by to the module (`src.flow.ct` and
        `flow.ct` to `ct` for `src/flow/ct.py` in folders without `__init__.py`), unless it
        names a module of the run or more than one module could be imported by it."""
        names = {module.module for _, module in facts}
        spelled: dict[str, set[str]] = {}
        for display, module in facts:
            for spelling in spellings.get(display, ()):
                spelled.setdefault(spelling, set()).add(module.module)
        for spelling, modules in spelled.items():
            if len(modules) == 1 and spelling not in names:
                self._aliases.setdefault(spelling, next(iter(modules)))

    def _makes_jitted(self, name: str) -> bool:
        """Whether `name` is a class of the project with a jitted method (its own or a base's):
        a module that makes one calls what the project jits."""
        return bool(self._methods) and (name in self._methods or name in self._bases) and bool(self._jitted_methods(name))

    def _key_files(self, facts: list[tuple[str, ModuleFacts]], imported_jit: bool) -> None:
        """Each file's `digest_for`: the answers its findings can read from the rest of the
        project. That is the library table; which of its own functions other modules call only
        from traced code; and with `imported_jit`, what every name it imports or calls (as its
        imports resolve it) is, followed through re-exports: jitted, a factory, or neither
        (for a module read without a parse, whose calls are not known: of an imported module,
        each of the names it defines or re-exports). Editing a module
        re-lints it and, when one of those answers changes, the modules that read it; nothing
        else."""
        traced_only: dict[str, list[str]] = {}
        for name in sorted(self._traced - self._eager):
            traced_only.setdefault(name.rpartition(".")[0], []).append(name)
        members: dict[str, list[str]] = {}  # module -> its names jitted, factories, re-exported
        if imported_jit:
            for name in (
                *self._jitted, *self._factories, *self._holders, *self._traceables, *self._aliases, *self._bases, *self._builds, *self._streams, *self._forwards,
                *self._methods, *self._unwaited, *self._device_returners, *self._light, *self._copiers,
                *self._samplers, *self._host_returners,
            ):  # fmt: skip
                members.setdefault(name.rpartition(".")[0], []).append(name)
        answers: dict[str, str] = {}
        # What each name's answer lists of the functions and methods returning work in flight,
        # copying to the host or needing their own device values there: those of that name, or
        # of the class so named.
        kinds = {
            "unwaited": self._unwaited, "copiers": self._copiers, "samplers": self._samplers,
            "returners": self._host_returners, "device": self._device_returners,
        }  # fmt: skip
        owned: dict[str, dict[str, list[str]]] = {kind: {} for kind in kinds}
        for kind, names in kinds.items():
            for n in sorted(names):
                owned[kind].setdefault(n, []).append(n)
                owner = n.rpartition(".")[0]
                if owner != n:
                    owned[kind].setdefault(owner, []).append(n)

        def answer(name: str) -> str:
            known = answers.get(name)
            if known is None:
                target = self.canonical(name)
                made = self._built(target, 0) if target in self._bases or target in self._builds or target in self._streams else None
                handed = self._forwarded(target) if target in self._forwards else ()
                bases = " ".join(sorted(self.ancestors(target))) if target in self._bases else ""
                linen = "linen" if self._builds_linen(target, 0) else ""
                methods = self._jitted_methods(target) if target in self._bases or target in self._methods else {}
                unwaited, copiers, samplers, returners, device = (sorted(set(owned[kind].get(target, ()))) for kind in kinds)
                known = answers[name] = (
                    f"{name} {target} {self._jitted.get(target, '')} {self._factories.get(target, '')} {made or ''} {handed} {bases} {linen}"
                    f" {sorted(methods.items())} {self._holders.get(target, '')} {self._joined_text(target) if target in self._traceables else ''}"
                    f" {unwaited} {'light' if target in self._light else ''} {copiers} {samplers} {returners} {device}"
                )
            return known

        looped: dict[str, list[str]] = {}  # module -> its callables other loops call, and where
        module_names = set(self.modules.values())
        for name, (where, line) in sorted(self._looped.items()):
            owner = name
            while "." in owner:
                owner = owner.rpartition(".")[0]
                if owner in module_names:
                    looped.setdefault(owner, []).append(f"looped {name} {where}:{line}")
                    break
        passes: dict[str, list[str]] = {}  # module -> what other modules pass its functions
        for name, indices in sorted(self._passes.items()):
            owner = name.rpartition(".")[0]
            if owner in module_names:
                passes.setdefault(owner, []).append(f"passes {name} {sorted((i, sorted(k)) for i, k in indices.items())}")
        for display, module in facts:
            lines = [self.library.digest, module.module, str(imported_jit), str(display in self._calls_jitted)]
            lines += traced_only.get(module.module, ())
            lines += looped.get(module.module, ())
            lines += passes.get(module.module, ())
            lines.append(f"called {sorted(set(module.defined_methods) & self._called_methods)}")
            if imported_jit:
                read: set[str] = set()
                for name in module.imports | module.traced_calls | module.eager_calls:
                    read.add(answer(name))
                    if self._traceables:  # what the name is as the module imports it: a sibling too
                        function = self._function_of(name, module.module)
                        if function in self._traceables:
                            read.add(f"traceable {function} {self._joined_text(function)}")
                    if module.parsed:
                        continue  # the names it calls are all there; the engine asks of calls
                    modules, seen = [self.canonical(name)], set()
                    while modules:  # a module: what it defines and re-exports
                        inner = modules.pop()
                        if inner not in seen:
                            seen.add(inner)
                            read.update(answer(member) for member in members.get(inner, ()))
                            modules.extend(self._stars.get(inner, ()))
                lines += sorted(read)
            self._digests[display] = hashlib.sha256("\n".join(lines).encode("utf-8", "surrogateescape")).hexdigest()[:16]
        self.digest = hashlib.sha256("\n".join(sorted(self._digests.values())).encode()).hexdigest()[:16]

    def calls_method(self, name: str) -> bool:
        """Whether some module of the project calls a method named `name` (`x.name(...)`, as
        its text spells it: `ModuleFacts.called_methods`)."""
        return name in self._called_methods

    def digest_for(self, display: str) -> str:
        """What the file's findings depend on in the rest of the project (`_key_files`): the
        cache keys each file's findings on it, beside its bytes."""
        return self._digests.get(display, self.digest)

    def canonical(self, name: str) -> str:
        """`name` with re-exports followed to where it is defined: `pkg.train_step`, when
        `pkg/__init__.py` has `from .steps import train_step`, is `pkg.steps.train_step`;
        `pkg.steps.train_step` too when `pkg/steps.py` has `from ._impl import *` and
        `_impl` defines it (and lists it in `__all__`, if it has one)."""
        memo = self._canonical
        if memo is not None:
            known = memo.get(name)
            if known is None:
                known = memo[name] = self._follow(name)
            return known
        return self._follow(name)

    def _follow(self, name: str) -> str:
        for _ in range(32):  # re-exports of re-exports; a cycle ends here
            if self._defines(name):
                return name
            parts = name.split(".")
            for end in range(len(parts), 0, -1):
                target = self._aliases.get(".".join(parts[:end]))
                if target is not None:
                    name = ".".join([target, *parts[end:]])
                    break
            else:
                starred = self._starred(name)
                if starred is None:
                    return name
                name = starred
        return name

    def _defines(self, name: str) -> bool:
        """Whether `name` is a callable of the project that the summaries say something of."""
        return (
            name in self._jitted or name in self._factories or name in self._holders or name in self._traceables
            or name in self._bases or name in self._builds
            or name in self._streams or name in self._forwards or name in self._methods
        )  # fmt: skip

    def _module_classes(self) -> None:
        """The project's Module classes: those subclassing `eqx.Module` or `nnx.Module`, or
        another Module class of the project (wherever it is defined, through re-exports)."""
        changed = True
        while changed:
            changed = False
            for name, bases in self._bases.items():
                if name not in self._modules and any(
                    base in _MODULE_BASES or self.canonical(base) in self._modules for base in bases
                ):
                    self._modules.add(name)
                    changed = True

    def built(self, name: str, module: str | None = None) -> tuple[str, ...] | None:
        """What calling the project callable `name` (as imported into `module`) gives, one
        word per element of a returned tuple (a single one otherwise): `module` (a Module
        class of the project, or a function returning one), `state` (an optimizer state),
        `pytree` (a training state), `stream` (a generator over data, an iterable class, a
        function returning a data loader), `ragged` (a stream whose last batch can be smaller:
        `_batches`), or "" where unknown; None when nothing is known."""
        if not (self._bases or self._builds or self._streams):
            return None
        return self._built(self.canonical(self._absolute(name, module)), 0)

    def _built(self, name: str, depth: int) -> tuple[str, ...] | None:
        if name in self._modules:
            return ("module",)
        built = self._builds.get(name)
        if name in self._streams:
            return ("ragged",) if built == "=ragged" else ("stream",)
        if built is None or depth > 8:
            return None
        kinds = []
        for part in built.split(","):
            if part.startswith("="):
                kinds.append(part[1:])
            elif part:
                inner = self._built(self.canonical(part), depth + 1)
                kinds.append(inner[0] if inner is not None and len(inner) == 1 else "")
            else:
                kinds.append("")
        return tuple(kinds) if any(kinds) else None

    def builds_linen(self, name: str, module: str | None = None) -> bool:
        """Whether calling the project callable `name` (as imported into `module`) builds a
        Flax Linen module: a class of the project subclassing `flax.linen.Module` (directly or
        through classes of the project), or a function every `return` of which gives one
        (`def model(latents): return VAE(latents=latents)`). A Linen module is a dataclass of
        its options, holding no arrays: built under a trace, with its options static, it costs
        nothing at run time."""
        return self._builds_linen(self.canonical(self._absolute(name, module)), 0)

    def _builds_linen(self, name: str, depth: int) -> bool:
        if name in self._bases:
            return bool(self.ancestors(name) & _jaxapi.LINEN_MODULES)
        built = self._builds.get(name)
        if built is None or depth > 8 or "," in built or built.startswith("="):
            return False
        return self._builds_linen(self.canonical(built), depth + 1)

    def ancestors(self, name: str, module: str | None = None) -> set[str]:
        """The classes the class `name` (as imported into `module`) subclasses, directly or
        through classes of the project (followed through re-exports): qualified names, those
        of other libraries as the project imports them."""
        found: set[str] = set()
        stack = [self.canonical(self._absolute(name, module))]
        while stack and len(found) < 64:
            for base in self._bases.get(stack.pop(), ()):
                base = self.canonical(base)
                if base not in found:
                    found.add(base)
                    stack.append(base)
        return found

    def jitted_method(self, cls: str, method: str, module: str | None = None) -> str | None:
        """The jit API compiling `method` of the project class `cls` (as imported into
        `module`): a jitted method of the class, or of a class it subclasses through the
        project, the nearest first; None when it is not known to be jitted."""
        if not self._methods:
            return None
        return self._jitted_methods(self.canonical(self._absolute(cls, module))).get(method)

    def _jitted_methods(self, cls: str) -> dict[str, str]:
        """Every jitted method of the class `cls` (absolute), its own over its bases'."""
        known = self._class_jit.get(cls)
        if known is None:
            found: dict[str, str] = {}
            for owner in (*sorted(self.ancestors(cls)), cls):  # the class's own last: they win
                found.update(self._methods.get(owner, {}))
            known = self._class_jit[cls] = {method: api for method, api in found.items() if api}
        return known

    def returns_unwaited(self, name: str, module: str | None = None) -> bool:
        """Whether the project function `name` (as imported into `module`), or the method
        `Class.method` of a project class so named, starts device work, waits for none of it
        and returns its results (`ModuleFacts.unwaited`)."""
        return self._names_function_or_method(self._unwaited, name, module)

    def returns_device(self, name: str, module: str | None = None) -> bool:
        """Whether every `return` of the project function `name` (as imported into `module`),
        or of the method `Class.method` of a project class so named, gives a value computed on
        the device (`ModuleFacts.device_returns`)."""
        return self._names_function_or_method(self._device_returners, name, module)

    def light(self, name: str, module: str | None = None) -> bool:
        """Whether the project function `name` (as imported into `module`) does only light
        array work (`ModuleFacts.light`)."""
        return bool(self._light) and (name in self._light or self.canonical(self._absolute(name, module)) in self._light)

    def copies(self, name: str, module: str | None = None) -> bool:
        """Whether the project function `name` (as imported into `module`), or the method
        `Class.method` of a project class so named, copies arrays to the host or blocks on them
        (`ModuleFacts.copiers`)."""
        return self._names_function_or_method(self._copiers, name, module)

    def samples(self, name: str, module: str | None = None) -> bool:
        """Whether the project function `name` (as imported into `module`), or the method
        `Class.method` of a project class so named, needs at once a host copy of a device value
        it computes itself (`samples_on_host`): every call waits for the device."""
        return self._names_function_or_method(self._samplers, name, module)

    def returns_host(self, name: str, module: str | None = None) -> bool:
        """Whether the project function or method `name` returns a host copy of a device value
        it computes itself (`returns_on_host`)."""
        return self._names_function_or_method(self._host_returners, name, module)

    def _names_function_or_method(self, names: set[str], name: str, module: str | None) -> bool:
        """Whether `names` (absolute) holds the project function `name` as imported into
        `module`, or the method `Class.method` of the project class its owner names."""
        if not names:
            return False
        if name in names:
            return True
        owner, dot, last = name.rpartition(".")
        if self.canonical(self._absolute(name, module)) in names:
            return True
        return bool(dot) and f"{self.canonical(self._absolute(owner, module))}.{last}" in names

    def passed_ragged(self, function: str, index: int) -> bool:
        """Whether every call of the project function `function` (absolute) from other modules
        passes, as its positional argument `index`, a data loader or dataset whose last batch
        can be smaller (and some module calls it)."""
        return self._passes.get(function, {}).get(index) == {"ragged"}

    def looped(self, name: str) -> tuple[str, int] | None:
        """Where another module calls the project callable `name` (absolute: `pkg.steps.f`,
        `pkg.agent.Agent.act`) once per iteration of a loop: (its display path, the loop's
        line), or None."""
        return self._looped.get(name)

    def module_class(self, name: str, module: str | None = None) -> bool:
        """Whether `name` (as imported into `module`) is a Module class of the project."""
        return bool(self._modules) and self.canonical(self._absolute(name, module)) in self._modules

    def star_imported(self, name: str, module: str | None) -> str | None:
        """What the bare `name`, bound nowhere in `module`, refers to: a callable of the
        project that one of the module's top-level `from x import *` brings in (`from
        jaxdiffusion import *`, then `train_step(...)`: `jaxdiffusion.steps.train_step`),
        followed through re-exports; None when no star import of the module brings in one
        the summaries know."""
        if module is None or module not in self._stars or name.startswith("_"):
            return None
        found = self._starred(f"{module}.{name}")
        if found is None:
            return None
        found = self.canonical(found)
        return found if self._defines(found) else None

    def _starred(self, name: str) -> str | None:
        """`module.attr` as the module's `from x import *` brings it in, if one does."""
        module, _, attribute = name.rpartition(".")
        if not module or attribute.startswith("_"):
            return None
        for base in self._stars.get(module, ()):
            exports = self._exports.get(base)
            if exports is not None and attribute not in exports:
                continue
            candidate = f"{base}.{attribute}"
            if self._defines(candidate) or candidate in self._aliases or base in self._stars:
                return candidate
        return None

    def module_of(self, display: str) -> str | None:
        return self.modules.get(display)

    def calls_jitted(self, display: str) -> bool:
        """Whether the file calls (or hands on) a callable another module jits."""
        return display in self._calls_jitted

    def jitted(self, name: str, module: str | None = None) -> str | None:
        """The jit API compiling the project callable `name` (as imported into `module`)."""
        if not self._jitted:
            return None
        return self._jitted.get(self.canonical(self._absolute(name, module)))

    def factory(self, name: str, module: str | None = None) -> tuple[str | None, ...] | None:
        """The jit API of the callable that the project function `name` (as imported into
        `module`) returns (`def make_step(...): return jax.jit(step)`), one entry; of each
        position of the tuple it returns (`return train_step, eval_step`), None for one that is
        not jitted; None when it is not such a factory."""
        if not self._factories:
            return None
        made = self._factories.get(self.canonical(self._absolute(name, module)))
        return None if made is None else tuple(api or None for api in made.split(","))

    def holder(self, name: str, module: str | None = None) -> str | None:
        """The jit API of the callables held by what the project function `name` (as imported
        into `module`) returns, an object built from jitted callables alone: `def
        jit_pair(f): return type(f)(jax.jit(f.init), jax.jit(f.apply))`, so that `model =
        jit_pair(...)` makes `model.apply(...)` a jitted call."""
        if not self._holders:
            return None
        return self._holders.get(self.canonical(self._absolute(name, module)))

    def traceable(self, name: str, module: str | None = None) -> tuple[tuple[str, ...], frozenset[str]] | None:
        """Whether the project function `name` (as imported into `module`) runs under jit as it
        is, through every project function it calls or hands on (`_traceable`): its parameters
        and those jit must take static (what it reads where Python needs a value, and what it
        passes to a static parameter of a function it calls); None when not known to."""
        if not self._traceables:
            return None
        return self._joined(self._function_of(name, module))

    def _function_of(self, name: str, module: str | None) -> str:
        """`name` as `module` imports it, absolute and followed through re-exports; an import
        of a sibling by its bare name (`from model import f` in `src/train.py`, run as a
        script from `src/`, where `src/__init__.py` makes the module `src.model`) when no
        module of the project has that bare name."""
        target = self.canonical(self._absolute(name, module))
        if self._defines(target) or module is None or name.startswith(".") or "." not in module:
            return target
        package = module.rpartition(".")[0]
        head = name.partition(".")[0]
        names = self._module_names()
        if f"{package}.{head}" not in names or head in self._module_heads():
            return target
        return self.canonical(f"{package}.{name}")

    def _module_names(self) -> frozenset[str]:
        if self._names is None:
            self._names = frozenset(self.modules.values())
        return self._names

    def _module_heads(self) -> frozenset[str]:
        """The first part of every module name: the top-level names the project defines."""
        if self._heads is None:
            self._heads = frozenset(name.partition(".")[0] for name in self._module_names())
        return self._heads

    def _joined_text(self, name: str) -> str:
        """`_joined`'s answer as the same text in every process (a frozenset's order is not:
        it follows the string hash, seeded per process), for `_key_files`' digests."""
        joined = self._joined(name)
        return "?" if joined is None else f"{joined[0]} {sorted(joined[1])}"

    def _joined(self, name: str, depth: int = 0) -> tuple[tuple[str, ...], frozenset[str]] | None:
        if name in self._traced_joined:
            return self._traced_joined[name]
        known = self._traceables.get(name)
        if known is None or depth > 8:
            return None
        self._traced_joined[name] = None  # a cycle: not known
        statics = set(known.statics)
        answer: tuple[tuple[str, ...], frozenset[str]] | None = None
        module = name.rpartition(".")[0]
        for used in known.uses:
            if self._joined(self._function_of(used, module), depth + 1) is None:
                break
        else:
            for callee, reads in known.calls:
                inner = self._joined(self._function_of(callee, module), depth + 1)
                if inner is None:
                    break
                params, inner_statics = inner
                lost = False
                for key, names in reads:
                    param = params[int(key)] if key.isdigit() and int(key) < len(params) else key
                    if param not in params:
                        lost = True  # more arguments than it takes
                    elif param in inner_statics:
                        if "*" in names:
                            lost = True  # a local where a Python value is needed
                        statics.update(names)
                if lost:
                    break
            else:
                answer = (known.params, frozenset(statics))
        self._traced_joined[name] = answer
        return answer

    def _absolute(self, name: str, module: str | None) -> str:
        """`name` as `module` imports it, made absolute (from the package itself in a
        package's `__init__.py`)."""
        remap = self._homes.get(module) if module is not None else None
        if module is not None and module in self._packages:
            module = f"{module}.__init__"
        name = absolute_name(name, module)
        return _placed(name, remap) if remap else name

    def forwarded(self, name: str, module: str | None = None) -> tuple[tuple[int, str, str], ...]:
        """The positional parameters that the project function `name` (as imported into
        `module`) hands, unchanged, to a jitted callable: (index, jit API, the callable's
        absolute name). `from .model import next_token` where `def next_token(w, tokens):
        return argmax(logits(w, tokens))` and `logits` is jitted: ((1, "jax.jit",
        "pkg.model.logits"),). What that callable compiles for, the caller's argument decides."""
        if not self._forwards:
            return ()
        return self._forwarded(self.canonical(self._absolute(name, module)))

    def _forwarded(self, function: str) -> tuple[tuple[int, str, str], ...]:
        found = []
        for index, callee in self._forwards.get(function, ()):
            target = self.canonical(callee)
            api = self._jitted.get(target)
            if api is not None:
                found.append((index, api, target))
        return tuple(sorted(set(found)))

    def traced_only(self, name: str) -> bool:
        """Whether other modules call the function `name` (absolute) only from traced code."""
        return name in self._traced and name not in self._eager


def absolute_name(name: str, module: str | None) -> str:
    """`name` as an import spells it (`.steps.train_step`, `..utils`, `pkg.steps`), made
    absolute from the importing `module`."""
    if not name.startswith(".") or module is None:
        return name
    dots = len(name) - len(name.lstrip("."))
    package = module.split(".")[:-dots] if dots <= module.count(".") + 1 else []
    rest = name[dots:]
    return ".".join([*package, rest]) if rest else ".".join(package)


def module_name(path: Path) -> str:
    """The dotted name Python imports `path` by: its stem, under every package (folder with an
    `__init__.py`) above it."""
    return _module_parts(path)[0]


def _spellings(name: str, folder: Path, *, most: int = 4) -> tuple[str, ...]:
    """The other dotted names the module `name`, whose top package is in `folder`, can be
    imported by: folders without `__init__.py` are namespace packages to Python, so that `ct`
    at `src/flow/ct.py` is also `flow.ct` (run from `src/`) and `src.flow.ct` (run from the
    root). Up to `most` folders, each a Python identifier."""
    spellings = []
    for _ in range(most):
        if not folder.name.isidentifier() or folder.parent == folder:
            break
        name = f"{folder.name}.{name}"
        spellings.append(name)
        folder = folder.parent
    return tuple(spellings)


def _module_parts(path: Path) -> tuple[str, Path]:
    """`module_name(path)`, and the folder above its top package."""
    parts = [path.stem] if path.stem != "__init__" else []
    folder = path.parent
    while (folder / "__init__.py").is_file():
        parts.insert(0, folder.name)
        if folder.parent == folder:
            break
        folder = folder.parent
    return ".".join(parts) or path.stem, folder


# A module without any of these words jits, transforms and traces nothing of its own.
_TRACE_WORDS = re.compile(r"jit|vmap|grad|scan|pmap|shard_map|checkpoint|remat|custom_[jv]jp|fori_loop|while_loop|cond|switch|transform|linearize")
# A module with none of these defines no Module class, model builder or data generator (a class
# subclassing one of another module still names `Module`, or is returned by name).
_SHAPE_WORDS = re.compile(
    r"Module|\byield\b|TrainState|Loader|\.init\(|\.(?:padded_)?batch\(|^[ \t]+return\b[^\n]*\b[A-Z]\w*\(", re.MULTILINE
)
# What a Module class of the project subclasses at its root: a class holding its arrays.
_MODULE_BASES = frozenset({"equinox.Module", "flax.nnx.Module", "flax.experimental.nnx.Module"})
# Returned calls the library table knows: what they build.
_TRAIN_STATES = frozenset({"flax.training.train_state.TrainState.create"})
# Methods of tf.data, Hugging Face datasets and grain datasets that give their batches.
_BATCH_METHODS = frozenset(
    {"as_numpy_iterator", "batch", "padded_batch", "prefetch", "iter_batches", "create_iterator", "to_iter_dataset", "iter"}
)
# Library names a project function's return is not worth recording under (what the table
# does not say they are: arrays, layers' parts, functions).
_LIBRARY_HEADS = frozenset({"jax", "numpy", "equinox", "optax", "flax", "haiku", "torch", "tensorflow", "math", "functools"})
# Libraries no project function is imported from: calls of theirs are not recorded in `passes`.
_NOT_PROJECT = _LIBRARY_HEADS | {
    "os", "sys", "time", "json", "pickle", "logging", "random", "itertools", "collections", "re", "math",
    "matplotlib", "tqdm", "wandb", "absl", "tensorflow_datasets", "jaxlib", "scipy", "pandas", "einops",
    "pathlib", "typing", "dataclasses", "copy", "shutil", "warnings", "subprocess", "argparse", "transformers",
}
_FROM_IMPORT = re.compile(r"^[ \t]*from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#;]+)", re.MULTILINE)
_IMPORT = re.compile(r"^[ \t]*import[ \t]+([^\n#;]+)", re.MULTILINE)


def summarize(module: str, text: str, *, package: bool = False) -> ModuleFacts:
    """The facts of the module `module` whose source is `text` (`_summarize`), with the method
    names its text calls (`ModuleFacts.called_methods`)."""
    facts = _summarize(module, text, package=package)
    return replace(
        facts,
        called_methods=tuple(sorted(set(_METHOD_CALL.findall(text)))),
        defined_methods=tuple(sorted(set(_INDENTED_DEF.findall(text)))),
    )


# `.name(`: a method called (in code, or in a comment or string: a superset is fine for
# "called somewhere").
_METHOD_CALL = re.compile(r"\.[ \t]*([A-Za-z_]\w*)[ \t]*\(")
_INDENTED_DEF = re.compile(r"^[ \t]+(?:async[ \t]+)?def[ \t]+([A-Za-z_]\w*)", re.MULTILINE)


def _summarize(module: str, text: str, *, package: bool = False) -> ModuleFacts:
    """The facts of the module `module` whose source is `text` (empty facts when it does not
    parse: the lint reports that).

    A module that mentions no tracing API is read from its import lines alone (no parse): it
    traces nothing, and every name it imports counts as called eagerly. `package`: the module
    is a package's `__init__.py` (its relative imports start from the package itself)."""
    anchor = f"{module}.__init__" if package else module  # what relative imports count from
    if not _TRACE_WORDS.search(text) and not _SHAPE_WORDS.search(text):
        names = frozenset(_imported_names(anchor, text))
        aliases, stars = _top_level_imports(anchor, text)
        assigned = _assigned_calls(module, text, dict(aliases))
        return ModuleFacts(
            module, eager_calls=names, imports=names, aliases=aliases, stars=stars, exports=_all_of(text), assigned=assigned,
            **_unparsed_facts(module, anchor, text),
        )
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ModuleFacts(module)
    return _Summary(module, tree, anchor).facts()


def _imported_names(module: str, text: str) -> set[str]:
    """The absolute names a module's import lines bring in (`from .steps import a, b as c`)."""
    found = set()
    for match in _FROM_IMPORT.finditer(text):
        base, names = absolute_name(match.group(1), module), match.group(2).strip("() \t\n")
        for part in names.split(","):
            name = part.split(" as ")[0].strip()
            if name and name != "*" and name.isidentifier():
                found.add(f"{base}.{name}" if base else name)
    for match in _IMPORT.finditer(text):
        for part in match.group(1).split(","):
            name = part.split(" as ")[0].strip()
            if name:
                found.add(name)
    return found


_TOP_FROM_IMPORT = re.compile(r"^from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#;]+)", re.MULTILINE)
_ALL = re.compile(r"^__all__[ \t]*(?::[^=\n]*)?=[ \t]*[\[(]([^\])]*)[\])]", re.MULTILINE)
_STRING = re.compile(r"""^\s*(?:'([^'\\]*)'|"([^"\\]*)")\s*$""")


def _top_level_imports(module: str, text: str) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
    """The names a module's unindented `from x import a as b` lines bind (re-exports), and
    the modules of its unindented `from x import *` lines."""
    aliases, stars = [], []
    for match in _TOP_FROM_IMPORT.finditer(text):
        base, names = absolute_name(match.group(1), module), match.group(2).strip("() \t\n")
        for part in names.split(","):
            name, _, local = (word.strip() for word in part.partition(" as "))
            if name == "*" and base:
                stars.append(base)
            elif name.isidentifier() and base:
                aliases.append((local or name, f"{base}.{name}"))
    return tuple(sorted(set(aliases))), tuple(dict.fromkeys(stars))


_TOP_DEF = re.compile(r"^(?:async[ \t]+)?def[ \t]+([A-Za-z_]\w*)", re.MULTILINE)
_ASSIGNED_CALL = re.compile(r"^([A-Za-z_]\w*)[ \t]*=[ \t]*([A-Za-z_][\w.]*)[ \t]*\(", re.MULTILINE)


def _assigned_calls(module: str, text: str, aliases: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """Top-level `name = f(...)` lines of a module read without a parse, with `f` resolved
    through its imports (or a function of the module): candidates for a factory's result."""
    found = set()
    functions: set[str] | None = None
    for match in _ASSIGNED_CALL.finditer(text):
        head, _, rest = match.group(2).partition(".")
        if head not in aliases and functions is None:
            functions = set(_TOP_DEF.findall(text))
        base = aliases.get(head) or (f"{module}.{head}" if functions is not None and head in functions else None)
        if base is not None:
            found.add((match.group(1), f"{base}.{rest}" if rest else base))
    return tuple(sorted(found))


# A module with none of these calls no array operation of its own.
_ARRAY_WORDS = re.compile(r"\bjnp\.|\bjax\.numpy\b|\blax\.")


def _all_of(text: str) -> tuple[str, ...] | None:
    """A module's `__all__`, when it is one literal list or tuple of strings."""
    match = _ALL.search(text)
    if match is None:
        return None
    names = []
    for part in match.group(1).split(","):
        if not part.strip():
            continue
        string = _STRING.match(part)
        if string is None:
            return None
        names.append(string.group(1) if string.group(1) is not None else string.group(2))
    return tuple(names)


class _Summary:
    """One walk of a module's tree: its imports, its top-level functions, and every call with
    the top-level function it is in (None: module level or a class body)."""

    def __init__(self, module: str, tree: ast.Module, anchor: str) -> None:
        self.module = module
        self.tracing = _jaxapi.TRACING  # what the active library traces
        self.imports: dict[str, str] = {}  # local name -> absolute dotted name
        self.functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        self.calls: list[tuple[str | None, ast.Call]] = []
        self.imported: set[str] = set()  # every absolute name an import names
        self.aliases: set[tuple[str, str]] = set()  # top-level (name, absolute name) of imports
        self.stars: list[str] = []
        self.tree = tree
        self.class_names = {s.name for s in tree.body if isinstance(s, ast.ClassDef)}
        for statement in tree.body:
            if isinstance(statement, ast.ImportFrom):
                base = absolute_name("." * statement.level + (statement.module or ""), anchor)
                for alias in statement.names:
                    if alias.name == "*":
                        if base:
                            self.stars.append(base)
                    elif base:
                        self.aliases.add((alias.asname or alias.name, f"{base}.{alias.name}"))
            elif isinstance(statement, ast.Import):
                self.aliases.update((a.asname, a.name) for a in statement.names if a.asname)
            owner = statement.name if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)) else None
            if owner is not None:
                self.functions[owner] = statement  # type: ignore[assignment]
            for node in ast.walk(statement):
                if isinstance(node, ast.Call):
                    self.calls.append((owner, node))
                elif isinstance(node, ast.Import):
                    for alias in node.names:
                        self.imported.add(alias.name)
                        if alias.asname:
                            self.imports[alias.asname] = alias.name
                        else:
                            head = alias.name.split(".", 1)[0]
                            self.imports[head] = head
                elif isinstance(node, ast.ImportFrom):
                    base = absolute_name("." * node.level + (node.module or ""), anchor)
                    if base:
                        self.imported.add(base)
                    for alias in node.names:
                        if alias.name != "*":
                            self.imports[alias.asname or alias.name] = f"{base}.{alias.name}" if base else alias.name
                            self.imported.add(self.imports[alias.asname or alias.name])
        self.assignments = [s for s in tree.body if isinstance(s, ast.Assign) and isinstance(s.value, ast.Call)]

    def resolve(self, expr: ast.expr) -> str | None:
        dotted = ast_dotted_name(expr)
        if dotted is None:
            return None
        first, dot, rest = dotted.partition(".")
        head = self.imports.get(first)
        if head is None:
            return None
        return f"{head}{dot}{rest}"

    def _wrapper(self, expr: ast.expr) -> str | None:
        """The tracing API `expr` is (`jax.jit`, `partial(jax.jit, ...)`, `jax.jit(...)` used
        as a decorator factory), or None."""
        if isinstance(expr, ast.Call):
            func = self.resolve(expr.func)
            if func in _jaxapi.PARTIAL and expr.args:
                return self._wrapper(expr.args[0])
            if func in self.tracing and not expr.args:
                return func  # `@jax.jit(static_argnums=...)`-style factories
            return None
        name = self.resolve(expr)
        return name if name in self.tracing else None

    def facts(self) -> ModuleFacts:
        jitted: dict[str, str] = {}
        roots: set[str] = set()  # local functions whose bodies are traced
        handed: set[str] = set()  # project functions of other modules handed to a transform
        for name, function in self.functions.items():
            for decorator in function.decorator_list:
                api = self._wrapper(decorator)
                if api is not None:
                    roots.add(name)
                    if api in _jaxapi.JIT_WRAPPERS:
                        jitted[name] = api
        local_callees: dict[str | None, set[str]] = {}
        called: dict[str | None, set[str]] = {}  # owner -> absolute names called or handed on
        for owner, call in self.calls:
            func = call.func
            if isinstance(func, ast.Name) and func.id in self.functions and func.id not in self.imports:
                local_callees.setdefault(owner, set()).add(func.id)
            target = self.resolve(func)
            if target is not None:
                called.setdefault(owner, set()).add(target)
                if target in self.tracing or target in _jaxapi.PARTIAL:
                    api = self._wrapper(func) if target in _jaxapi.PARTIAL else target
                    if api is not None:
                        for arg in call.args[:1]:
                            if isinstance(arg, ast.Name) and arg.id in self.functions:
                                roots.add(arg.id)
                            else:
                                handed_to = self.resolve(arg)
                                if handed_to is not None:
                                    handed.add(handed_to)
            elif isinstance(func, ast.Call):  # `jax.jit(f)(x)`, `partial(jax.jit, ...)(f)`
                api = self._wrapper(func.func) if isinstance(func.func, (ast.Name, ast.Attribute, ast.Call)) else None
                if api is not None:
                    for arg in func.args[:1]:
                        if isinstance(arg, ast.Name) and arg.id in self.functions:
                            roots.add(arg.id)
            for arg in call.args:
                if isinstance(arg, (ast.Name, ast.Attribute)):
                    passed = self.resolve(arg)
                    if passed is not None:
                        called.setdefault(owner, set()).add(passed)  # handed on: runs there, as it runs
        assigned: set[tuple[str, str]] = set()
        for statement in self.assignments:
            func = statement.value.func  # type: ignore[attr-defined]
            api = self._wrapper(func)
            names = [target.id for target in statement.targets if isinstance(target, ast.Name)]
            if api in _jaxapi.JIT_WRAPPERS:
                for name in names:
                    jitted[name] = api
            elif api is None:  # `step = make_step(cfg)`: jitted when `make_step` is a factory
                made = f"{self.module}.{func.id}" if isinstance(func, ast.Name) and func.id in self.functions else self.resolve(func)
                assigned.update((name, made) for name in names if made is not None)
        traced = set(roots)
        stack = list(roots)
        while stack:
            for callee in local_callees.get(stack.pop(), ()):
                if callee not in traced:
                    traced.add(callee)
                    stack.append(callee)
        traced_calls: set[str] = set(handed)
        eager_calls: set[str] = set()
        for owner, names in called.items():
            (traced_calls if owner is not None and owner in traced else eager_calls).update(names)
        copiers = self._copiers()
        return ModuleFacts(
            self.module,
            tuple(sorted(jitted.items())),
            frozenset(traced_calls),
            frozenset(eager_calls),
            imports=frozenset(self.imported),
            aliases=tuple(sorted(self.aliases)),
            stars=tuple(dict.fromkeys(self.stars)),
            exports=self._exports(),
            factories=tuple(sorted(self._factories(jitted).items())),
            holders=tuple(sorted(self._holders().items())),
            traceable=tuple(sorted(self._traceable())),
            assigned=tuple(sorted(assigned)),
            classes=tuple(sorted(self._classes())),
            builds=tuple(sorted(self._builds().items())),
            streams=tuple(sorted(self._streams())),
            forwards=tuple(sorted(self._forwards())),
            looped=_LoopCalls(self, traced).found(self.tree),
            methods=tuple(sorted(self._jitted_methods())),
            passes=tuple(sorted(self._passes())),
            unwaited=tuple(sorted(_Unwaited(self, jitted).found())),
            device_returns=tuple(sorted(_DeviceReturns(self, jitted).found())),
            light=tuple(sorted(n for n, f in self.functions.items() if light_body(f, self.resolve))),
            copiers=tuple(sorted(copiers)),
            host_needs=tuple(sorted(self._host_needs(copiers))),
            parsed=True,
        )

    def _copiers(self) -> set[str]:
        # Only the top-level functions among whose calls (gathered in one pass over the
        # module, lambdas included) one copies are read again, without their lambdas.
        candidates = {owner for owner, call in self.calls if owner is not None and _copying_call(call, self.resolve)}
        found = {name for name in candidates if copies_on_host(self.functions[name], self.resolve)}
        found.update(name for name, method in self._class_methods() if copies_on_host(method, self.resolve))
        return found

    def _class_methods(self) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
        """The methods of the module's top-level classes, as ("Class.method", its def)."""
        for statement in self.tree.body:
            if isinstance(statement, ast.ClassDef):
                for item in statement.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        yield f"{statement.name}.{item.name}", item

    def _host_needs(self, copiers: set[str]) -> set[str]:
        """`ModuleFacts.host_needs`, read only for the functions that copy at all: the
        copiers, and those calling `int`/`float`/`bool` (a check of names, no resolving)."""
        found = set()
        for name, function in (*self.functions.items(), *self._class_methods()):
            if name not in copiers and not _calls_converter(function):
                continue  # no host copy at all: the common case
            if samples_on_host(function, self.resolve):
                found.add(f"samples:{name}")
            if returns_on_host(function, self.resolve):
                found.add(f"returns:{name}")
        return found

    def _classes(self) -> set[tuple[str, str]]:
        found = set()
        for statement in self.tree.body:
            if isinstance(statement, ast.ClassDef):
                for base in statement.bases:
                    if isinstance(base, ast.Subscript):
                        base = base.value  # a generic base, `AbstractModel[StateT]`
                    local = base.id if isinstance(base, ast.Name) and base.id not in self.imports else None
                    name = f"{self.module}.{local}" if local is not None else self.resolve(base)
                    if name is not None:
                        found.add((statement.name, name))
        return found

    def _passes(self) -> set[tuple[str, str]]:
        """`passes`: for each call of an imported function (a function of another module, as
        far as this one knows), what each positional argument is: a ragged stream bound to the
        name passed (its last plain assignment before the call, in the same function or at
        module level), or something else."""
        found = set()
        scopes: list[tuple[list[ast.stmt], list[ast.AST]]] = [(self.tree.body, list(_own_nodes(self.tree)))]
        scopes += [(f.body, list(_own_nodes(f))) for f in self.functions.values()]
        for _, nodes in scopes:
            ordered = [n for n in nodes if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)]
            for node in nodes:
                if not isinstance(node, ast.Call) or not isinstance(node.func, (ast.Name, ast.Attribute)):
                    continue
                callee = self.resolve(node.func)
                if not node.args or callee is None or callee.split(".", 1)[0] in _NOT_PROJECT or not self._imported_function(node.func):
                    continue
                for index, arg in enumerate(node.args):
                    if isinstance(arg, ast.Starred):
                        break
                    found.add((callee, f"{index}:{'ragged' if self._ragged(arg, ordered) else ''}"))
        return found

    def _imported_function(self, func: ast.expr) -> bool:
        """`fit` of `from .train import fit`, `train.fit` of `from . import train`: a name
        brought in by an import, not a local function or class."""
        head = func
        while isinstance(head, ast.Attribute):
            head = head.value
        return isinstance(head, ast.Name) and head.id in self.imports and head.id not in self.functions

    def _ragged(self, arg: ast.expr, ordered: list[ast.Assign]) -> bool:
        """Whether `arg` is a loader or dataset keeping a smaller last batch, spelled there or
        bound to the name passed."""
        value: ast.expr | None = arg
        if isinstance(arg, ast.Name):
            value = _last_value(arg, ordered)
        if value is None:
            return False
        if _batches.pipeline_keeps_last(value, self.resolve, lambda read: _last_value(read, ordered)):
            return True
        if isinstance(value, ast.Call):
            called = self.resolve(value.func)
            return called in _jaxapi.DATA_LOADERS and _batches.loader_keeps_last(value, called)
        return False

    def _jitted_methods(self) -> set[tuple[str, str]]:
        """`methods`: the jit-decorated methods of the top-level classes, and class-level
        `name = jax.jit(...)` assignments; the other methods of a class with bases, with no
        API (what a base's jitted method they override compiles, they do not)."""
        found = set()
        for statement in self.tree.body:
            if not isinstance(statement, ast.ClassDef):
                continue
            for member in statement.body:
                if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    apis = [self._wrapper(d) for d in member.decorator_list]
                    api = next((a for a in apis if a in _jaxapi.JIT_WRAPPERS), None)
                    if api is not None or statement.bases:
                        found.add((f"{statement.name}.{member.name}", api or ""))
                elif isinstance(member, ast.Assign) and isinstance(member.value, ast.Call):
                    api = self._wrapper(member.value.func)
                    if api in _jaxapi.JIT_WRAPPERS:
                        found.update((f"{statement.name}.{t.id}", api) for t in member.targets if isinstance(t, ast.Name))
        return found

    def _streams(self) -> set[str]:
        """Top-level generators that yield in a loop, and classes whose `__iter__` does."""
        found = {name for name, function in self.functions.items() if _yields_in_loop(function.body, False)}
        for statement in self.tree.body:
            if isinstance(statement, ast.ClassDef):
                for method in statement.body:
                    if isinstance(method, ast.FunctionDef) and method.name == "__iter__" and _yields_in_loop(method.body, False):
                        found.add(statement.name)
        return found

    def _forwards(self) -> set[tuple[str, str]]:
        """What each top-level function hands on unchanged (`forwards`)."""
        found = set()
        for name, function in self.functions.items():
            params = [a.arg for a in (*function.args.posonlyargs, *function.args.args)]
            if not params:
                continue
            nodes = list(_own_nodes(function))
            rebound = {n.id for n in nodes if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
            for node in nodes:
                if not isinstance(node, ast.Call):
                    continue
                func = node.func
                if isinstance(func, ast.Name) and func.id not in self.imports:
                    callee: str | None = f"{self.module}.{func.id}"
                else:
                    callee = self.resolve(func)
                    if callee is not None and callee.split(".", 1)[0] in _LIBRARY_HEADS:
                        continue
                if callee is None:
                    continue
                for arg in (*node.args, *(k.value for k in node.keywords if k.arg is not None)):
                    if isinstance(arg, ast.Name) and arg.id in params and arg.id not in rebound:
                        found.add((name, f"{params.index(arg.id)}:{callee}"))
        return found

    def _builds(self) -> dict[str, str]:
        """What each top-level function returns, where every `return` agrees (`builds`)."""
        found = {}
        for name, function in self.functions.items():
            local: dict[str, ast.expr | None] = {}  # name -> the call bound to it (None: several)
            ordered: list[ast.Assign] = []  # every `name = value`, in order
            returned: set[str] = set()
            returns: list[ast.Return] = []
            generator = False
            for node in _own_nodes(function):
                if isinstance(node, (ast.Yield, ast.YieldFrom)):
                    generator = True
                elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                    target = node.targets[0].id
                    local[target] = node.value if target not in local and isinstance(node.value, ast.Call) else None
                    ordered.append(node)
                elif isinstance(node, ast.Return):
                    returns.append(node)
            # Lists filled with one ragged batch a pass, bound once (`batches = []`), and
            # returned as they are: `return batches`, `return tuple(batches), key`.
            lists = set() if generator else _batches.appends_ragged_slices(function, _own_nodes(function))
            lists = {n for n in lists if sum(1 for a in ordered if a.targets[0].id == n) == 1}  # type: ignore[attr-defined]
            for node in returns:
                returned.add(self._returned(node.value, local, ordered, lists))
            if generator and _batches.yields_ragged_slices(function, _own_nodes(function)):
                found[name] = "=ragged"
            if not generator and len(returned) == 1:
                (built,) = returned
                if built.strip(","):
                    found[name] = built
        found.update(self._class_builders())
        return found

    def _class_builders(self) -> dict[str, str]:
        """`Class.method` -> the class, for each `@classmethod` of a top-level class every
        `return` of which gives a new instance: `return cls(config)`, or a local bound once to
        one (`model = cls(config); ...; return model`): `GPT.from_pretrained(path)` builds a
        `GPT`."""
        found = {}
        for statement in self.tree.body:
            if not isinstance(statement, ast.ClassDef):
                continue
            for method in statement.body:
                if not (
                    isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef))
                    and any(isinstance(d, ast.Name) and d.id == "classmethod" for d in method.decorator_list)
                    and method.args.args
                ):
                    continue
                receiver = method.args.args[0].arg
                made: dict[str, int] = {}  # local -> how many times it is bound to `cls(...)`
                bound: dict[str, int] = {}  # local -> how many times it is bound at all
                returns: list[ast.expr | None] = []
                for node in _own_nodes(method):
                    if isinstance(node, ast.Assign):
                        for target in node.targets:
                            if isinstance(target, ast.Name):
                                bound[target.id] = bound.get(target.id, 0) + 1
                                if _calls_name(node.value, receiver):
                                    made[target.id] = made.get(target.id, 0) + 1
                    elif isinstance(node, ast.Return):
                        returns.append(node.value)
                if returns and all(
                    _calls_name(value, receiver)
                    or (isinstance(value, ast.Name) and made.get(value.id) == 1 and bound.get(value.id) == 1)
                    for value in returns
                ):
                    found[f"{statement.name}.{method.name}"] = f"{self.module}.{statement.name}"
        return found

    def _returned(
        self, value: ast.expr | None, local: dict[str, ast.expr | None], ordered: list[ast.Assign] = (), lists: set[str] = frozenset()  # type: ignore[assignment]
    ) -> str:
        if isinstance(value, ast.Tuple):
            return ",".join(self._returned(e, local, ordered, lists).replace(",", "") for e in value.elts)
        if lists and _listed(value, lists):
            return "=ragged"  # a list of slices, the last smaller (`_batches.appends_ragged_slices`)
        if value is not None and _batches.pipeline_keeps_last(value, self.resolve, lambda read: _last_value(read, ordered)):
            return "=ragged"  # `ds = ds.batch(bs); return ds`
        if isinstance(value, ast.Name) and local.get(value.id) is not None:
            value = local[value.id]
        if not isinstance(value, ast.Call):
            return ""
        func = value.func
        if isinstance(func, ast.Attribute) and func.attr in _BATCH_METHODS:
            return "=stream"
        if isinstance(func, ast.Attribute) and func.attr == "init":
            receiver = func.value
            if isinstance(receiver, ast.Name) and isinstance(local.get(receiver.id), ast.Call):
                receiver = local[receiver.id].func  # type: ignore[union-attr]
            elif isinstance(receiver, ast.Call):
                receiver = receiver.func
            made = self.resolve(receiver)
            return "=state" if made is not None and made.startswith("optax.") else ""
        if isinstance(func, ast.Name) and func.id not in self.imports:
            return f"{self.module}.{func.id}" if func.id in self.functions or func.id in self.class_names else ""
        called = self.resolve(func)
        if called is None:
            return ""
        if called.startswith("equinox.nn.") and called.rsplit(".", 1)[-1][:1].isupper():
            return "=pytree" if called == "equinox.nn.State" else "=module"
        if called in _TRAIN_STATES:
            return "=pytree"
        if called in _jaxapi.DATA_LOADERS and _batches.loader_keeps_last(value, called):
            return "=ragged"
        if called in _jaxapi.DATA_LOADERS or called in _jaxapi.OPERATION_LOADERS or called.startswith(_jaxapi.DATASET_MODULES):
            return "=stream"
        return "" if called.split(".", 1)[0] in _LIBRARY_HEADS else called

    def _exports(self) -> tuple[str, ...] | None:
        """`__all__`, when the module assigns it one literal list or tuple of strings."""
        for statement in self.tree.body:
            if (
                isinstance(statement, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "__all__" for t in statement.targets)
                and isinstance(statement.value, (ast.List, ast.Tuple))
                and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in statement.value.elts)
            ):
                return tuple(e.value for e in statement.value.elts)  # type: ignore[attr-defined]
        return None

    def _factories(self, jitted: dict[str, str]) -> dict[str, str]:
        """Top-level functions each `return` of which gives a jitted callable: a jit wrapper's
        call (`return jax.jit(step)`), a name the function binds to one or to a jit-decorated
        nested def, or a jitted top-level function; all of one jit API. Or a tuple of the same
        length each time, of such callables and other values, position by position the same
        (`return train_step, eval_step`), encoded as `ModuleFacts.factories` says."""
        found = {}
        for name, function in self.functions.items():
            local: dict[str, str] = {}
            returned: list[str | None] = []
            for node in _own_nodes(function):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    apis = [self._wrapper(d) for d in node.decorator_list]
                    api = next((a for a in apis if a in _jaxapi.JIT_WRAPPERS), None)
                    if api is not None:
                        local[node.name] = api
                elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                    api = self._wrapper(node.value.func)
                    for target in node.targets:
                        if isinstance(target, ast.Name) and api in _jaxapi.JIT_WRAPPERS:
                            local[target.id] = api
                elif isinstance(node, ast.Return):
                    value = node.value
                    parts = value.elts if isinstance(value, ast.Tuple) else [value]
                    made = [self._made(part, local, jitted) for part in parts]
                    starred = any(isinstance(part, ast.Starred) for part in parts)
                    returned.append(",".join(api or "" for api in made) if any(made) and not starred else None)
            if returned and returned[0] is not None and len(set(returned)) == 1:
                found[name] = returned[0]
        return found

    def _traceable(self) -> Iterable[tuple[str, str]]:
        for name, function in self.functions.items():
            known = _read_traceable(function, self.resolve, self.functions, self.module)
            if known is not None:
                yield name, known.encode()

    def _classes_with_methods(self) -> set[str]:
        return {
            s.name
            for s in self.tree.body
            if isinstance(s, ast.ClassDef) and any(isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) for m in s.body)
        }

    def _holders(self) -> dict[str, str]:
        """Top-level functions each `return` of which gives an object built from jitted
        callables alone (`_holds_jitted`), all of one jit API."""
        found = {}
        for name, function in self.functions.items():
            returned = [self._holds_jitted(node.value) for node in _own_nodes(function) if isinstance(node, ast.Return)]
            if returned and returned[0] is not None and len(set(returned)) == 1:
                found[name] = returned[0]
        return found

    def _holds_jitted(self, value: ast.expr | None) -> str | None:
        """The jit API of `Pair(jax.jit(f), jax.jit(g))`: a call, not itself a transform, of
        something other than a class of this module with methods of its own (which it would
        also have),
        every argument of which is a jit wrapper's call; None otherwise."""
        if not isinstance(value, ast.Call) or not (value.args or value.keywords):
            return None
        func = value.func
        if self._wrapper(func) is not None or (isinstance(func, ast.Name) and func.id in self._classes_with_methods()):
            return None
        apis = set()
        for arg in (*value.args, *(k.value for k in value.keywords)):
            api = self._wrapper(arg.func) if isinstance(arg, ast.Call) and arg.args else None
            if api not in _jaxapi.JIT_WRAPPERS:
                return None
            apis.add(api)
        return apis.pop() if len(apis) == 1 else None

    def _made(self, value: ast.expr | None, local: dict[str, str], jitted: dict[str, str]) -> str | None:
        if isinstance(value, ast.Call) and value.args:
            api = self._wrapper(value.func)
            return api if api in _jaxapi.JIT_WRAPPERS else None
        if isinstance(value, ast.Name):
            return local.get(value.id) or jitted.get(value.id)
        return None



def _listed(value: ast.expr | None, lists: set[str]) -> bool:
    """`batches`, `tuple(batches)` or `list(batches)` for a list of `lists`."""
    if (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Name)
        and value.func.id in ("tuple", "list")
        and len(value.args) == 1
        and not value.keywords
    ):
        value = value.args[0]
    return isinstance(value, ast.Name) and value.id in lists


def _last_value(read: ast.Name, ordered: list[ast.Assign]) -> ast.expr | None:
    """The value of the last `name = value` (of `ordered`, in source order) before `read`."""
    before = [
        a for a in ordered
        if a.targets[0].id == read.id  # type: ignore[attr-defined]
        and (a.end_lineno or a.lineno, a.end_col_offset or 0) <= (read.lineno, read.col_offset)
    ]  # fmt: skip
    return before[-1].value if before else None


# A module without a loop statement calls nothing once per iteration.
_LOOP_WORDS = re.compile(r"^[ \t]*(?:async[ \t]+)?(?:for|while)\b", re.MULTILINE)


# A module with none of these copies nothing to the host (`ModuleFacts.copiers`).
_COPY_WORDS = re.compile(r"\.item\(|\.tolist\(|block_until_ready|device_get|asarray|\.array\(|__array__")


def _unparsed_facts(module: str, anchor: str, text: str) -> dict[str, Any]:
    """`ModuleFacts.looped`, `traceable`, `device_returns`, `copiers` and `host_needs` of a
    module read without a full summary (it traces nothing): the project callables its loops
    call, and which of its functions would trace and which return device values (a module of
    array functions, `jnp.`/`lax.`, whose functions other modules' steps call)."""
    loops, arrays = bool(_LOOP_WORDS.search(text)), bool(_ARRAY_WORDS.search(text))
    copies = bool(_COPY_WORDS.search(text))
    if not (loops or arrays or copies):
        return {}
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    summary = _Summary(module, tree, anchor)
    copiers = summary._copiers() if copies else set()
    return {
        "looped": _LoopCalls(summary, set()).found(tree) if loops else (),
        "traceable": tuple(sorted(summary._traceable())) if arrays else (),
        "device_returns": tuple(sorted(_DeviceReturns(summary, {}).found())) if arrays else (),
        "copiers": tuple(sorted(copiers)),
        "host_needs": tuple(sorted(summary._host_needs(copiers))) if copies else (),
    }


def ast_dotted_name(expr: ast.expr) -> str | None:
    """`a.b.c` for an `ast` name or attribute chain, None for anything else."""
    parts: list[str] = []
    while isinstance(expr, ast.Attribute):
        parts.insert(0, expr.attr)
        expr = expr.value
    return ".".join([expr.id, *parts]) if isinstance(expr, ast.Name) else None


def light_body(function: ast.FunctionDef | ast.AsyncFunctionDef, resolve: Callable[[ast.expr], str | None]) -> bool:
    """Whether `function` (read with Python's `ast`; `resolve` names what a call calls) does
    only light array work: every call in its body, lambdas included, is a light array operation
    (`library.toml`'s `light-array-ops`: `jnp.sum`, `jnp.sqrt`...), a pytree utility, NumPy on
    shapes, or a builtin that gathers (`sum`, `map`, `len`...); no loop statement, no call of
    anything else (a model, a method, a function of the project), and at least one array
    operation. One pass over its inputs: a metric such as a gradient norm."""
    arrays = 0
    for node in (n for statement in function.body for n in ast.walk(statement)):
        if isinstance(node, (ast.For, ast.AsyncFor, ast.While, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return False
        if not isinstance(node, ast.Call):
            continue
        if isinstance(node.func, ast.Name) and node.func.id in _GATHERING and resolve(node.func) is None:
            continue
        name = resolve(node.func)
        if name is None:
            return False
        if name in _jaxapi.LIGHT_ARRAY_OPS:
            arrays += 1
        elif not (_jaxapi.is_tree_util(name) or name.startswith("numpy.")):
            return False
    return arrays > 0


def copies_on_host(function: ast.FunctionDef | ast.AsyncFunctionDef, resolve: Callable[[ast.expr], str | None]) -> bool:
    """Whether `function`'s own body (not its lambdas or nested `def`s, which may never run)
    copies arrays to the host or blocks on them: a host method (`x.item()`,
    `x.block_until_ready()`), a host copy (`np.asarray`, `jax.device_get`) or a blocking call
    (`jax.block_until_ready`) as `library.toml` names them."""
    stack: list[ast.AST] = list(function.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(node, ast.Call) and _copying_call(node, resolve):
            return True
        stack.extend(ast.iter_child_nodes(node))
    return False


def samples_on_host(function: ast.FunctionDef | ast.AsyncFunctionDef, resolve: Callable[[ast.expr], str | None]) -> bool:
    """Whether every call of `function` waits for the device because its own body needs, at
    once, a device value it computes itself: it copies to the host (`np.asarray`, `int(...)`,
    `.item()`, `jax.device_get`) the result of a JAX call of its body (`jax.random.randint`,
    `jnp.argmax`, a module's `apply`), or a name bound to one, and loops over the copy, tests
    it or indexes with it, on a path that every call runs (not under an `if`, a `while` or a
    `try`): a batch sampler that draws offsets with JAX's generator and slices a NumPy array
    with them (`for start in np.asarray(starts): rows.append(data[start:start + n])`). JAX
    runs device work in order, so that copy also waits for all the work dispatched before the
    call: a loop that calls it once per iteration waits for the device on every iteration,
    whatever else it copies. A copy of the function's arguments is not one (they may be host
    data: a loader's `np.asarray(batch)`)."""
    return _OwnDeviceValues(resolve).needed_now(function)


def returns_on_host(function: ast.FunctionDef | ast.AsyncFunctionDef, resolve: Callable[[ast.expr], str | None]) -> bool:
    """Whether `function` returns, on every path that returns a value, a host copy of a device
    value it computes itself (`return int(jnp.argmax(q))`, `a = jax.random.categorical(k,
    logits); return np.asarray(a)`): its caller gets a Python or NumPy value made after the
    device finished everything dispatched before the call, as from a copy written in the
    caller (`samples_on_host` reads device values the same way)."""
    return _OwnDeviceValues(resolve).returned(function)


class _OwnDeviceValues:
    """The device values a function's body computes itself, read with Python's `ast` in
    statement order on the paths every call runs, and the host copies made of them
    (`samples_on_host`, `returns_on_host`)."""

    _CONVERTERS = frozenset({"int", "float", "bool"})

    def __init__(self, resolve: Callable[[ast.expr], str | None]) -> None:
        self.resolve = resolve
        self.device: set[str] = set()  # names bound to device values the body computed
        self.host: set[str] = set()  # names bound to host copies of those

    def _device_call(self, call: ast.Call) -> bool:
        if isinstance(call.func, ast.Attribute) and call.func.attr == "apply":
            return True  # `model.apply(params, x)`: a module's forward
        name = self.resolve(call.func)
        return (
            name is not None
            and name.startswith("jax.")
            and not _jaxapi.is_host_copy(name)
            and name not in _jaxapi.BLOCKING
            and not _jaxapi.is_tree_util(name)
        )

    def _reads_device(self, expr: ast.AST) -> bool:
        for node in ast.walk(expr):
            if isinstance(node, ast.Name) and node.id in self.device:
                return True
            if isinstance(node, ast.Call) and self._device_call(node):
                return True
        return False

    def _converted(self, call: ast.Call) -> ast.AST | None:
        """What `call` copies to the host, if it is a host copy (None otherwise)."""
        if isinstance(call.func, ast.Attribute) and call.func.attr in _jaxapi.HOST_METHODS:
            return call.func.value
        if isinstance(call.func, ast.Name) and call.func.id in self._CONVERTERS and self.resolve(call.func) is None:
            return call.args[0] if call.args else None
        name = self.resolve(call.func)
        if name is not None and _jaxapi.is_host_copy(name):
            return call.args[0] if call.args else None
        return None

    def _copies_device(self, expr: ast.AST | None) -> bool:
        """Whether `expr` is, or holds, a host copy of a device value of the body."""
        if expr is None:
            return False
        for node in ast.walk(expr):
            if isinstance(node, ast.Name) and node.id in self.host:
                return True
            if isinstance(node, ast.Call):
                copied = self._converted(node)
                if copied is not None and self._reads_device(copied):
                    return True
        return False

    def _bind(self, statement: ast.stmt) -> None:
        """Note what an assignment statement binds: a host copy, a device value, or neither."""
        if isinstance(statement, ast.Assign):
            targets, value = statement.targets, statement.value
        elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
            targets, value = [statement.target], statement.value
        else:
            return
        names = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        self.device -= names
        self.host -= names
        if self._copies_device(value):
            self.host |= names
        elif self._reads_device(value):
            self.device |= names

    def _statements(self, body: list[ast.stmt]) -> Iterable[ast.stmt]:
        """The statements of `body` that every call runs, in order, with those of the `for`
        and `with` blocks among them (not the branches of an `if`, a `while` or a `try`)."""
        for statement in body:
            yield statement
            if isinstance(statement, (ast.For, ast.AsyncFor, ast.With, ast.AsyncWith)):
                yield from self._statements(statement.body)

    def needed_now(self, function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
        for statement in self._statements(function.body):
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                continue
            if isinstance(statement, (ast.For, ast.AsyncFor)) and self._copies_device(statement.iter):
                return True
            if isinstance(statement, (ast.If, ast.While)) and self._copies_device(statement.test):
                return True
            for node in ast.walk(statement):
                if isinstance(node, ast.comprehension) and self._copies_device(node.iter):
                    return True
                if isinstance(node, ast.Subscript) and self._copies_device(node.slice):
                    return True
            self._bind(statement)
        return False

    def returned(self, function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
        returns = [n for n in _own_nodes(function) if isinstance(n, ast.Return) and n.value is not None]
        if not returns or any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in _own_nodes(function)):
            return False
        for statement in self._statements(function.body):
            self._bind(statement)
        return all(self._copies_device(r.value) for r in returns)


def _calls_converter(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether `function`'s own body calls `int`, `float` or `bool` by name."""
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in _OwnDeviceValues._CONVERTERS
        for n in _own_nodes(function)
    )


def _copying_call(call: ast.Call, resolve: Callable[[ast.expr], str | None]) -> bool:
    if isinstance(call.func, ast.Attribute) and call.func.attr in _jaxapi.HOST_METHODS:
        return True
    name = resolve(call.func)
    return name is not None and (_jaxapi.is_host_copy(name) or name in _jaxapi.BLOCKING)


# Builtins that gather or count what they are given.
_GATHERING = frozenset({"sum", "map", "len", "zip", "list", "tuple", "abs", "max", "min"})


def _found_in_rounds(
    summary: _Summary,
    jitted: dict[str, str],
    holds: Callable[[ast.FunctionDef, str | None, set[str]], bool],
) -> set[str]:
    """The module's top-level functions (not those it jits) and methods of its top-level
    classes (not dunders), as "name" and "Class.method", with no decorator (but a method's
    `staticmethod`: any other may convert or replace what it returns), for which `holds(def,
    owning class or None, found so far)`: read in rounds until none is added, so that one
    calling another found one is found in a later round."""
    candidates: dict[str, tuple[ast.FunctionDef, str | None]] = {}
    for statement in summary.tree.body:
        if isinstance(statement, ast.FunctionDef) and statement.name not in jitted:
            candidates[statement.name] = (statement, None)
        elif isinstance(statement, ast.ClassDef):
            for item in statement.body:
                if isinstance(item, ast.FunctionDef) and not item.name.startswith("__"):
                    candidates[f"{statement.name}.{item.name}"] = (item, statement.name)
    candidates = {
        name: (function, owner)
        for name, (function, owner) in candidates.items()
        if all(owner and isinstance(d, ast.Name) and d.id == "staticmethod" for d in function.decorator_list)
    }
    found: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, (function, owner) in candidates.items():
            if name not in found and holds(function, owner, found):
                found.add(name)
                changed = True
    return found


class _Unwaited:
    """The module's top-level functions and methods of its top-level classes that start device
    work, wait for none of it and return its results (`ModuleFacts.unwaited`), read from the
    tree alone, so only the plainest: no decorator (but `staticmethod`), the body ends in a
    `return` of a value, no generator, `while`, `try`, `with`, `assert`, f-string or nested
    `def`; every call is a JAX array operation, pytree plumbing or a tree map, a function the
    module jits, one of these functions (or `self.method` of one), a neutral builtin, or a
    method of a value it computed on the device (`x.reshape(...)`; not `.item()` and the like);
    no `if`, conditional expression or loop header reads such a value (a conversion to
    `bool` waits); it starts work other than set-up (`jnp.zeros`, a key split); and every
    `return` gives a value it computed on the device. Anything else may wait: precision
    first."""

    _NEUTRAL = frozenset({"len", "isinstance", "range", "zip", "enumerate", "tuple", "list", "dict", "getattr", "hasattr", "reversed", "iter", "type", "callable"})
    _BARRED = (
        ast.While, ast.Try, ast.With, ast.AsyncWith, ast.Assert, ast.JoinedStr, ast.Yield, ast.YieldFrom,
        ast.Await, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Global, ast.Nonlocal, ast.Delete,
    )  # fmt: skip

    def __init__(self, summary: _Summary, jitted: dict[str, str]) -> None:
        self.summary = summary
        self.jitted = jitted

    def found(self) -> set[str]:
        return _found_in_rounds(self.summary, self.jitted, self._returns_unwaited)

    def _returns_unwaited(self, function: ast.FunctionDef, owner: str | None, found: set[str]) -> bool:
        body = function.body
        if not body or not isinstance(body[-1], ast.Return) or body[-1].value is None:
            return False
        nodes = [node for statement in body for node in ast.walk(statement)]
        if any(isinstance(node, self._BARRED) for node in nodes):
            return False

        device: set[str] = set()  # local names holding values computed on the device
        started = False
        for _ in range(3):  # names assigned from names: a few rounds reach a fixed point
            known = len(device)
            for node in nodes:
                if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and node.value is not None:
                    if self._device_value(node.value, device, owner, found):
                        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                        for target in targets:
                            device.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
                elif isinstance(node, ast.For) and self._device_value(node.iter, device, owner, found):
                    device.update(n.id for n in ast.walk(node.target) if isinstance(n, ast.Name))
            if len(device) == known:
                break
        for node in nodes:
            if isinstance(node, ast.Call):
                kind = self._call(node, device, owner, found)
                if kind is None:
                    return False
                started = started or kind == "work"
            elif isinstance(node, (ast.If, ast.IfExp)) and _reads(node.test, device):
                return False
            elif isinstance(node, ast.comprehension) and any(_reads(test, device) for test in node.ifs):
                return False
            elif isinstance(node, ast.Return) and not (node.value is not None and self._device_value(node.value, device, owner, found)):
                return False
        return started

    def _device_value(self, expr: ast.expr, device: set[str], owner: str | None, found: set[str]) -> bool:
        return _reads(expr, device) or any(
            isinstance(n, ast.Call) and self._call(n, device, owner, found) in ("work", "setup") for n in ast.walk(expr)
        )

    def _call(self, call: ast.Call, device: set[str], owner: str | None, found: set[str]) -> str | None:
        """"work" (starts device work), "setup" (a set-up array), "plain" (neither, no wait),
        None (unknown: it may wait)."""
        func = call.func
        name = self.summary.resolve(func)
        if name is not None:
            if name in _jaxapi.SETUP_ARRAY_OPS:
                return "setup"
            if name in _jaxapi.PASS_THROUGH or _jaxapi.is_tree_util(name):
                return "plain" if not call.args or isinstance(call.args[0], ast.Lambda) or name in _jaxapi.PASS_THROUGH else None
            if _jaxapi.is_array_op(name) and not _jaxapi.is_host_copy(name) and name not in _jaxapi.BLOCKING:
                return "work"
            return None
        if isinstance(func, ast.Name) and func.id not in self.summary.imports:
            if func.id in self.jitted or func.id in found:
                return "work"
            return "plain" if func.id in self._NEUTRAL and func.id not in self.summary.functions else None
        if isinstance(func, ast.Attribute):
            holder = func.value
            if isinstance(holder, ast.Name) and holder.id == "self" and owner is not None:
                return "work" if f"{owner}.{func.attr}" in found else None
            if func.attr not in _jaxapi.HOST_METHODS and func.attr != "block_until_ready" and _reads(holder, device):
                return "work"  # an array method of a device value
        return None


class _DeviceReturns:
    """The module's top-level functions and methods of its top-level classes every `return` of
    which gives a value computed on the device (`ModuleFacts.device_returns`), read from the
    tree alone: the result of a JAX array operation, of a function the module jits, or of one
    of these functions (`self.method` of one); a local name every assignment of which binds
    such a value; arithmetic, an item or an attribute of one (not `.shape`, `.dtype`, a host
    method's result); a tuple, list or dict holding one, as `DeviceIndex.holds` reads a
    container. A host copy (`float(x)`, `np.asarray(x)`, `x.item()`) is not one; an unknown
    call is not known to give one. Unlike `_Unwaited`, the body may wait and call anything:
    this says what the caller holds, not whether its work is still in flight. No decorator
    (but `staticmethod`), no generator."""

    def __init__(self, summary: _Summary, jitted: dict[str, str]) -> None:
        self.summary = summary
        self.jitted = jitted

    def found(self) -> set[str]:
        return _found_in_rounds(self.summary, self.jitted, self._returns_device)

    def _returns_device(self, function: ast.FunctionDef, owner: str | None, found: set[str]) -> bool:
        nodes = list(_own_nodes(function))
        if any(isinstance(node, (ast.Yield, ast.YieldFrom, ast.Await)) for node in nodes):
            return False
        returns = [node for node in nodes if isinstance(node, ast.Return)]
        if not returns or any(r.value is None for r in returns):
            return False
        bindings: dict[str, list[ast.expr | None]] = {}
        for node in nodes:
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    value = node.value if isinstance(target, ast.Name) else None  # unpacked: not known
                    for name in _bound_names(target):
                        bindings.setdefault(name, []).append(value)
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                for name in _bound_names(node.target):
                    bindings.setdefault(name, []).append(node.value)
            elif isinstance(node, (ast.AugAssign, ast.For, ast.AsyncFor, ast.comprehension, ast.NamedExpr)):
                for name in _bound_names(node.target):
                    bindings.setdefault(name, []).append(None)  # `x += 1` may make a host value
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                for item in node.items:
                    for name in _bound_names(item.optional_vars) if item.optional_vars is not None else ():
                        bindings.setdefault(name, []).append(None)
            elif isinstance(node, ast.ExceptHandler) and node.name:
                bindings.setdefault(node.name, []).append(None)
        device: set[str] = set()
        for _ in range(4):  # names bound from names: a few rounds reach a fixed point
            known = len(device)
            for name, values in bindings.items():
                if name not in device and all(v is not None and self._device(v, device, owner, found) for v in values):
                    device.add(name)
            if len(device) == known:
                break
        return all(self._device(r.value, device, owner, found) for r in returns)  # type: ignore[arg-type]

    def _device(self, expr: ast.expr, device: set[str], owner: str | None, found: set[str]) -> bool:
        if isinstance(expr, ast.Name):
            return expr.id in device
        if isinstance(expr, ast.Attribute):
            return expr.attr not in HOST_ATTRIBUTES and self._device(expr.value, device, owner, found)
        if isinstance(expr, ast.Subscript):
            return self._device(expr.value, device, owner, found)
        if isinstance(expr, ast.BinOp):
            return self._device(expr.left, device, owner, found) or self._device(expr.right, device, owner, found)
        if isinstance(expr, ast.UnaryOp):
            return not isinstance(expr.op, ast.Not) and self._device(expr.operand, device, owner, found)
        if isinstance(expr, ast.IfExp):
            return self._device(expr.body, device, owner, found) and self._device(expr.orelse, device, owner, found)
        if isinstance(expr, (ast.Tuple, ast.List)):
            return any(self._device(e, device, owner, found) for e in expr.elts if not isinstance(e, ast.Starred))
        if isinstance(expr, ast.Dict):
            return any(self._device(v, device, owner, found) for v in expr.values)
        if isinstance(expr, ast.Call):
            return self._call(expr, device, owner, found)
        return False

    def _call(self, call: ast.Call, device: set[str], owner: str | None, found: set[str]) -> bool:
        func = call.func
        name = self.summary.resolve(func)
        if name is not None:
            return (
                _jaxapi.is_array_op(name)
                and not _jaxapi.is_host_copy(name)
                and name not in _jaxapi.BLOCKING
                and name not in _jaxapi.SETUP_ARRAY_OPS
                and not name.rsplit(".", 1)[-1][:1].isupper()  # classes: lax.Precision, ...
            )
        if isinstance(func, ast.Name) and func.id not in self.summary.imports:
            return func.id in self.jitted or func.id in found
        if isinstance(func, ast.Attribute):
            holder = func.value
            if isinstance(holder, ast.Name) and holder.id == "self" and owner is not None:
                return f"{owner}.{func.attr}" in found
            # an array method of a device value (`x.reshape(...)`; not `.item()` and the like)
            return func.attr not in _jaxapi.HOST_METHODS and func.attr != "block_until_ready" and self._device(holder, device, owner, found)
        return False


def _bound_names(target: ast.expr) -> Iterator[str]:
    """The local names an assignment to `target` binds: `x`, `a, (b, *c)`; not `x[i]` or
    `self.x`, which change an object the name already holds."""
    if isinstance(target, ast.Name):
        yield target.id
    elif isinstance(target, (ast.Tuple, ast.List)):
        for element in target.elts:
            yield from _bound_names(element)
    elif isinstance(target, ast.Starred):
        yield from _bound_names(target.value)


def _reads(expr: ast.AST, names: set[str]) -> bool:
    return bool(names) and any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(expr))


class _LoopCalls:
    """The project callables a module calls once per iteration of a loop (`ModuleFacts.looped`):
    one walk over its statements, reading the expressions of loop bodies only."""

    def __init__(self, summary: _Summary, traced: set[str]) -> None:
        self.module = summary.module
        self.imports = summary.imports
        self.functions = summary.functions
        self.classes = summary.class_names
        self._resolve = summary.resolve  # its import table, read the way the summary reads it
        self.traced = traced  # top-level functions whose bodies run traced
        self.calls: dict[str, int] = {}

    def found(self, tree: ast.Module) -> tuple[tuple[str, str], ...]:
        self._walk(tree.body, None, {}, None, {})
        return tuple(sorted((name, str(line)) for name, line in self.calls.items()))

    def _walk(
        self, body: list[ast.stmt], cls: str | None, bound: dict[str, str | None], loop: int | None, tables: dict[str, int]
    ) -> None:
        for statement in body:
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if not _test_name(statement.name) and not (cls is None and statement.name in self.traced) and not any(
                    self._resolve(d.func if isinstance(d, ast.Call) else d) in _jaxapi.TRACING for d in statement.decorator_list
                ):
                    self._walk(statement.body, cls, {}, None, {})  # its body runs when it is called
                continue
            if isinstance(statement, ast.ClassDef):
                if not _test_name(statement.name):
                    self._walk(statement.body, statement.name if cls is None else "", {}, None, {})
                continue
            if isinstance(statement, ast.Assign):
                self._bind(statement, bound)
                _bind_table(statement, tables)
            inner = guarded = loop
            if isinstance(statement, (ast.For, ast.AsyncFor, ast.While)) and loop is None and not _few_items(statement, tables):
                inner = guarded = statement.lineno
            elif isinstance(statement, ast.If) and any(
                isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) for node in ast.walk(statement.test)
            ):
                guarded = None  # `if step % every == 0:`: once in a while, not per iteration
            if loop is not None:
                for node in _own_expressions(statement):
                    if isinstance(node, ast.Call):
                        callee = self._callee(node.func, cls, bound)
                        if callee is not None:
                            self.calls.setdefault(callee, loop)
            elif isinstance(statement, ast.While) and inner is not None:
                for node in ast.walk(statement.test):
                    if isinstance(node, ast.Call):
                        callee = self._callee(node.func, cls, bound)
                        if callee is not None:
                            self.calls.setdefault(callee, inner)
            for name in ("body", "orelse", "finalbody"):
                block = getattr(statement, name, None)
                if isinstance(block, list):
                    self._walk(
                        [s for s in block if isinstance(s, ast.stmt)], cls, bound, guarded if name == "body" else inner, tables
                    )
            for handler in getattr(statement, "handlers", ()):
                self._walk(handler.body, cls, bound, inner, tables)
            if isinstance(statement, ast.Match):
                for case in statement.cases:
                    self._walk(case.body, cls, bound, inner, tables)

    def _bind(self, statement: ast.Assign, bound: dict[str, str | None]) -> None:
        """`agent = Agent(...)`: the name holds an instance of that class (None: bound to
        something else too)."""
        made = None
        if isinstance(statement.value, ast.Call):
            func = statement.value.func
            if isinstance(func, ast.Name) and func.id in self.classes and func.id not in self.imports:
                made = f"{self.module}.{func.id}"
            else:
                name = self._resolve(func)
                if name is not None and name.rpartition(".")[2][:1].isupper():
                    made = name
        for target in statement.targets:
            if isinstance(target, ast.Name):
                bound[target.id] = made if target.id not in bound else None

    def _callee(self, func: ast.expr, cls: str | None, bound: dict[str, str | None]) -> str | None:
        if isinstance(func, ast.Name):
            if func.id in bound:
                return None
            if func.id in self.functions and func.id not in self.imports:
                return None  # the module's own call graph follows its functions
            return self.imports.get(func.id)
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            receiver = func.value.id
            if receiver == "self" and cls:
                return f"{self.module}.{cls}.{func.attr}"
            if receiver in bound:
                made = bound[receiver]
                return f"{made}.{func.attr}" if made is not None else None
        return self._resolve(func) if isinstance(func, ast.Attribute) else None


def _test_name(name: str) -> bool:
    return name.startswith(("test", "Test")) or name.endswith(("Test", "Tests", "TestCase"))


def _few_items(loop: ast.For | ast.AsyncFor | ast.While, tables: Mapping[str, int] | None = None) -> bool:
    """A loop over a literal table of at most four entries (spelled in the header, or a name
    the code before it assigned one: `prompts = ["a", "b", "c"]`, `for p in prompts`), or
    `range` of at most four; or a loop whose header names things there are few of, or a
    model's parts, as a file's own reading of a loop that compiles per iteration does
    (`_callgraph.names_few_things`: `for level in levels`, `for seed in seeds`, `for name,
    fn in configs`; not layers or blocks, which a real model has dozens of)."""
    if isinstance(loop, ast.While):
        return False
    iterable = loop.iter
    if isinstance(iterable, ast.Name) and tables and iterable.id in tables:
        return tables[iterable.id] <= 4
    entries = _literal_table(iterable)
    if entries is not None:
        return entries <= 4
    if isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Name) and iterable.func.id == "range":
        args = iterable.args
        if len(args) == 1 and isinstance(args[0], ast.Constant) and isinstance(args[0].value, int) and args[0].value <= 4:
            return True
    return _header_names_few(loop.target, iterable)


def _header_names_few(target: ast.expr, iterable: ast.expr) -> bool:
    """Whether a loop's target or iterable names things there are few of or a model's parts
    (read as `_callgraph._iterates_data` reads a header: an attribute by its own name, not its
    owner's; a call by its function and what it is given to iterate, not its options). Not
    when the header also names what runs many times (`_callgraph.names_many_things`): the
    target names a batch, step or example (`for params, batch in zip(...)`), or a call in the
    iterable is named for data or a model's layers (`self.get_ds_iter(eval_split)`,
    `range(cfg.get_num_layers(parallel_config))`): what the call yields is named by the call,
    whatever its arguments are named."""
    from ._callgraph import names_few_things, names_many_things

    names: list[str] = [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]
    # What a call yields is named by the call, outermost first: `epochs(steps, ...)` yields
    # epochs whatever the target is named; `range(cfg.get_num_layers(parallel_config))`
    # counts layers whatever its argument is named.
    for node in _calls_outermost_first(iterable):
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
        if called is None or called in _WRAPPING_BUILTINS or _dict_view(node):
            continue
        if names_many_things(called, streams=True):
            return False
        if names_few_things(called):
            return True
    if not _dict_view(iterable) and any(names_many_things(name) for name in names):
        return False  # `for params, batch in zip(...)`; not `for name, batch in batches.items()`
    stack: list[ast.expr] = [iterable]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Name):
            names.append(node.id)
        elif isinstance(node, ast.Attribute):
            names.append(node.attr)
        elif isinstance(node, ast.Call):
            func = node.func
            stack.append(func)
            stack.extend(a for a in node.args if not isinstance(a, ast.Starred))
        elif isinstance(node, (ast.Subscript, ast.Starred)):
            stack.append(node.value)
        elif isinstance(node, (ast.BinOp,)):
            stack.extend((node.left, node.right))
    return any(names_few_things(name) for name in names)


_WRAPPING_BUILTINS = frozenset({"range", "enumerate", "zip", "sorted", "list", "reversed", "tuple", "iter", "len", "min", "max", "int"})


def _calls_outermost_first(iterable: ast.expr) -> list[ast.Call]:
    """The calls in a loop's iterable, each before the calls in its arguments (not in its
    keyword options)."""
    found: list[ast.Call] = []
    queue: list[ast.expr] = [iterable]
    while queue:
        node = queue.pop(0)
        if isinstance(node, ast.Call):
            found.append(node)
            queue.extend(a for a in node.args if not isinstance(a, ast.Starred))
            if isinstance(node.func, ast.Attribute):
                queue.append(node.func.value)
        elif isinstance(node, ast.Attribute):
            queue.append(node.value)
        elif isinstance(node, (ast.Subscript, ast.Starred)):
            queue.append(node.value)
        elif isinstance(node, ast.BinOp):
            queue.extend((node.left, node.right))
    return found


def _dict_view(iterable: ast.expr) -> bool:
    """`table.items()` (`.keys()`, `.values()`), also through `enumerate`, `sorted`, `list`,
    `reversed`: the entries of a table of named things."""
    while (
        isinstance(iterable, ast.Call)
        and isinstance(iterable.func, ast.Name)
        and iterable.func.id in ("enumerate", "sorted", "list", "reversed", "tuple")
        and iterable.args
    ):
        iterable = iterable.args[0]
    return (
        isinstance(iterable, ast.Call)
        and isinstance(iterable.func, ast.Attribute)
        and iterable.func.attr in ("items", "keys", "values")
        and not iterable.args
    )


def _literal_table(iterable: ast.expr) -> int | None:
    """The number of entries of a literal table a loop iterates, also through `enumerate`,
    `sorted`, `list`, `reversed` (`enumerate([10, 20])`), or None."""
    while (
        isinstance(iterable, ast.Call)
        and isinstance(iterable.func, ast.Name)
        and iterable.func.id in ("enumerate", "sorted", "list", "reversed", "tuple")
        and len(iterable.args) == 1
    ):
        iterable = iterable.args[0]
    if isinstance(iterable, (ast.List, ast.Tuple, ast.Set)):
        return len(iterable.elts)
    if isinstance(iterable, ast.Dict):
        return len(iterable.keys)
    return None


def _bind_table(statement: ast.Assign, tables: dict[str, int]) -> None:
    """`prompts = ["a", "b"]`: the name holds a literal table of that many entries (a name bound
    to anything else holds an unknown count from there on)."""
    value = statement.value
    size = len(value.elts) if isinstance(value, (ast.List, ast.Tuple, ast.Set)) else None
    for target in statement.targets:
        if isinstance(target, ast.Name):
            if size is None:
                tables.pop(target.id, None)
            else:
                tables[target.id] = size


def _yields_in_loop(body: list[ast.stmt], in_loop: bool) -> bool:
    """Whether the statements `body` yield inside a loop (not in nested functions or classes)."""
    for statement in body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        looping = in_loop or isinstance(statement, (ast.For, ast.AsyncFor, ast.While))
        if looping and any(
            isinstance(node, (ast.Yield, ast.YieldFrom)) for node in _own_expressions(statement)
        ):
            return True
        for field_name in ("body", "orelse", "finalbody", "handlers"):
            inner = getattr(statement, field_name, None)
            if isinstance(inner, list) and inner and _yields_in_loop(
                [s for s in inner if isinstance(s, ast.stmt)] + [s for h in inner if isinstance(h, ast.ExceptHandler) for s in h.body],
                looping,
            ):
                return True
        if isinstance(statement, ast.Match) and any(_yields_in_loop(case.body, looping) for case in statement.cases):
            return True
    return False


def _own_expressions(statement: ast.stmt) -> Iterable[ast.AST]:
    """The nodes of `statement` outside its nested statements and scopes (its own expressions)."""
    stack: list[ast.AST] = [c for c in ast.iter_child_nodes(statement) if not isinstance(c, (ast.stmt, ast.excepthandler, ast.match_case))]
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, ast.Lambda):
            stack.extend(ast.iter_child_nodes(node))


def _own_nodes(function: ast.FunctionDef | ast.AsyncFunctionDef | ast.Module) -> Iterable[ast.AST]:
    """The nodes of `function`'s body (or of a module's top-level code) in order, not inside
    its nested functions, classes and lambdas (whose returns are theirs), but with those nested
    definitions themselves."""
    stack: list[ast.AST] = list(reversed(function.body))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            stack.extend(reversed(list(ast.iter_child_nodes(node))))


def project_for(
    files: Iterable[tuple[str, Path, bytes]],
    store: MutableMapping[str, Any] | None = None,
    *,
    library: _jaxapi.Library | None = None,
    unsaved: Iterable[tuple[str, Path, bytes]] = (),
) -> Project:
    """The project of a run: `files` are (display path, path, bytes) of its Python files.
    `store` (the lint cache's entries) keeps each module's facts by content hash, so a warm
    run reads no file's tree again. `unsaved`: more files, whose text is not what their path
    holds on disk (standard input, an editor's buffer): summarized, never stored.
    `library`: the library table with the user's `extend-*` names (default: as shipped)."""
    library = library or _jaxapi.base_library()
    files, unsaved = list(files), list(unsaved)
    layout = _Layout.of((display, path) for display, path, _ in [*files, *unsaved])
    with _jaxapi.using(library):
        facts = _module_facts(files, store, library, layout) + _module_facts(unsaved, None, library, layout)
    return Project.from_facts(facts, library=library, spellings=layout.spellings, homes=layout.homes)


def _absolute_path(path: Path) -> Path:
    return path if path.is_absolute() else path.resolve()


@dataclass
class _Layout:
    """Where each file of a run is imported from: its module name, the other names it can be
    imported by (`_spellings`), and which module a top-level name defined under more than one
    root folder is, as each file imports it.

    Two scripts' folders each with a `utils.py` (`examples/mnist/utils.py`,
    `examples/rl/utils.py`) are both `utils` to Python, each to the scripts beside it: the
    first folder on `sys.path` wins, and a script's own folder is first. Their modules are
    named apart (`examples/mnist/utils`), and `utils` in a file under one of those folders
    is that folder's; elsewhere it is no module of the project (which one Python finds
    depends on how the program is run)."""

    names: dict[str, str] = field(default_factory=dict)  # display path -> module name
    spellings: dict[str, tuple[str, ...]] = field(default_factory=dict)  # display path -> other names
    remaps: dict[str, dict[str, str]] = field(default_factory=dict)  # display path -> top name -> module name
    homes: dict[str, dict[str, str]] = field(default_factory=dict)  # module name -> its `remaps`

    @classmethod
    def of(cls, displays: Iterable[tuple[str, Path]]) -> _Layout:
        layout = cls()
        placed: dict[str, tuple[str, Path]] = {}  # display -> (module name as Python has it, root folder)
        roots: dict[str, dict[Path, str]] = {}  # top-level name -> root folder -> root's tag
        for display, path in displays:
            if path.suffix not in (".py", ".ipynb"):
                continue
            module, root = _module_parts(_absolute_path(path))
            placed[display] = (module, root)
            layout.spellings[display] = _spellings(module, root)
            if path.suffix == ".py":  # a notebook is imported by nobody
                depth = module.count(".") + 1 + (path.stem == "__init__")
                tag = "/".join(Path(display).parts[:-depth]).replace(".", "_") or "_"
                roots.setdefault(module.partition(".")[0], {})[root] = tag
        shared = {top: tags for top, tags in roots.items() if len(tags) > 1}
        by_root: dict[Path, dict[str, str]] = {}  # what each root folder's files import
        for display, (module, root) in placed.items():
            tags = shared.get(module.partition(".")[0])
            name = f"{tags[root]}/{module}" if tags is not None and root in tags else module
            layout.names[display] = name
            if shared:
                remap = by_root.get(root)
                if remap is None:
                    remap = by_root[root] = {top: f"{tags[root]}/{top}" if root in tags else f"?/{top}" for top, tags in shared.items()}
                layout.remaps[display] = remap
                layout.homes[name] = remap
        return layout


def _module_facts(
    files: Iterable[tuple[str, Path, bytes]],
    store: MutableMapping[str, Any] | None,
    library: _jaxapi.Library,
    layout: _Layout,
) -> list[tuple[str, ModuleFacts]]:
    """Each file's facts, from `store` where its bytes are known, with the names it imports
    as `layout` places them."""
    facts = []
    for display, path, data in files:
        notebook = path.suffix == ".ipynb"
        if path.suffix != ".py" and not notebook:
            continue
        module = layout.names[display]
        # surrogateescape: a file name that is not UTF-8 keeps its bytes in the module name.
        named = f"{module}\0{path.stem == '__init__'}\0{library.digest}".encode("utf-8", "surrogateescape")
        key = "facts:" + hashlib.sha256(named + b"\0" + data).hexdigest()
        known = _stored_facts(store.get(key)) if store is not None else None
        if known is None:
            text = _notebook_code(data) if notebook else _utf8(data)
            if text is None:
                continue
            known = summarize(module, text, package=path.stem == "__init__")
            if notebook:
                known = _unimportable(known)
            elif known.looped and _test_path(display, path):
                known = replace(known, looped=())  # a test's loops check, they do not run steps
            if store is not None:
                store[key] = _stored(known)
        remap = layout.remaps.get(display)
        facts.append((display, _rehomed(known, remap) if remap else known))
    return facts


def _rehomed(facts: ModuleFacts, remap: dict[str, str]) -> ModuleFacts:
    """`facts` with every name it imports or calls placed by `remap` (`_Layout`): `utils.f`
    as `examples/mnist/utils.f`. Its own names keep its module's name."""

    def home(name: str) -> str:
        return _placed(name, remap)

    def homes(pairs: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
        return tuple((own, home(name)) for own, name in pairs)

    def home_forward(passed: str) -> str:  # "index:callee"
        index, _, callee = passed.partition(":")
        return f"{index}:{home(callee)}"

    def home_built(built: str) -> str:
        return ",".join(part if part.startswith("=") or not part else home(part) for part in built.split(","))

    return replace(
        facts,
        traced_calls=frozenset(map(home, facts.traced_calls)),
        eager_calls=frozenset(map(home, facts.eager_calls)),
        imports=frozenset(map(home, facts.imports)),
        aliases=homes(facts.aliases),
        stars=tuple(map(home, facts.stars)),
        assigned=homes(facts.assigned),
        classes=homes(facts.classes),
        builds=tuple((own, home_built(built)) for own, built in facts.builds),
        forwards=tuple((own, home_forward(passed)) for own, passed in facts.forwards),
        looped=tuple((home(callee), line) for callee, line in facts.looped),
        passes=tuple((home(callee), passed) for callee, passed in facts.passes),
    )


def _placed(name: str, remap: Mapping[str, str]) -> str:
    """The absolute name `name` with its top-level part placed by `remap` (`_Layout`)."""
    top, dot, rest = name.partition(".")
    placed = remap.get(top)
    return f"{placed}{dot}{rest}" if placed is not None else name


def _test_path(display: str, path: Path) -> bool:
    from ._callgraph import is_test_file

    return is_test_file(display) or is_test_file(str(path))


def _utf8(data: bytes) -> str | None:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _notebook_code(data: bytes) -> str | None:
    """The code cells of a notebook as the lint reads them, None when it cannot be read."""
    from ._notebook import NotebookError, read_notebook

    try:
        return read_notebook(data).text
    except NotebookError:
        return None


def _unimportable(facts: ModuleFacts) -> ModuleFacts:
    """A notebook's facts: what it calls and imports (a notebook that calls what the project
    jits is JAX code), but nothing other modules could import from it."""
    return ModuleFacts(
        facts.module,
        traced_calls=facts.traced_calls,
        eager_calls=facts.eager_calls,
        imports=facts.imports,
        parsed=facts.parsed,
    )


def _stored(facts: ModuleFacts) -> dict[str, Any]:
    """`facts` as the lint cache stores them (JSON)."""
    return {
        "module": facts.module,
        "jitted": [list(pair) for pair in facts.jitted],
        "traced": sorted(facts.traced_calls),
        "eager": sorted(facts.eager_calls),
        "imports": sorted(facts.imports),
        "aliases": [list(pair) for pair in facts.aliases],
        "stars": list(facts.stars),
        "exports": list(facts.exports) if facts.exports is not None else None,
        "factories": [list(pair) for pair in facts.factories],
        "holders": [list(pair) for pair in facts.holders],
        "traceable": [list(pair) for pair in facts.traceable],
        "assigned": [list(pair) for pair in facts.assigned],
        "classes": [list(pair) for pair in facts.classes],
        "builds": [list(pair) for pair in facts.builds],
        "streams": list(facts.streams),
        "forwards": [list(pair) for pair in facts.forwards],
        "looped": [list(pair) for pair in facts.looped],
        "methods": [list(pair) for pair in facts.methods],
        "passes": [list(pair) for pair in facts.passes],
        "unwaited": list(facts.unwaited),
        "device_returns": list(facts.device_returns),
        "light": list(facts.light),
        "copiers": list(facts.copiers),
        "host_needs": list(facts.host_needs),
        "called_methods": list(facts.called_methods),
        "defined_methods": list(facts.defined_methods),
        "parsed": facts.parsed,
    }


_PAIRS = ("jitted", "aliases", "factories", "holders", "traceable", "assigned", "classes", "builds", "forwards", "looped", "methods", "passes")
_NAMES = ("traced", "eager", "imports", "stars", "streams", "unwaited", "device_returns", "light", "copiers", "host_needs", "called_methods", "defined_methods")


def _stored_facts(entry: object) -> ModuleFacts | None:
    """The facts a cache entry holds, or None unless it has exactly the shape `_stored` writes."""
    if not isinstance(entry, dict) or set(entry) != {"module", "exports", "parsed", *_PAIRS, *_NAMES}:
        return None
    if not isinstance(entry["parsed"], bool):
        return None
    if not isinstance(entry["module"], str) or not all(isinstance(entry[k], list) for k in (*_PAIRS, *_NAMES)):
        return None
    pairs = [p for k in _PAIRS for p in entry[k]]
    if not all(isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p) for p in pairs):
        return None
    exports = entry["exports"]
    if not all(isinstance(x, str) for k in _NAMES for x in entry[k]) or not (
        exports is None or (isinstance(exports, list) and all(isinstance(x, str) for x in exports))
    ):
        return None
    pair = lambda k: tuple((a, b) for a, b in entry[k])  # noqa: E731
    return ModuleFacts(
        entry["module"],
        pair("jitted"),
        frozenset(entry["traced"]),
        frozenset(entry["eager"]),
        imports=frozenset(entry["imports"]),
        aliases=pair("aliases"),
        stars=tuple(entry["stars"]),
        exports=tuple(exports) if exports is not None else None,
        factories=pair("factories"),
        holders=pair("holders"),
        traceable=pair("traceable"),
        assigned=pair("assigned"),
        classes=pair("classes"),
        builds=pair("builds"),
        streams=tuple(entry["streams"]),
        forwards=pair("forwards"),
        looped=pair("looped"),
        methods=pair("methods"),
        passes=pair("passes"),
        unwaited=tuple(entry["unwaited"]),
        device_returns=tuple(entry["device_returns"]),
        light=tuple(entry["light"]),
        copiers=tuple(entry["copiers"]),
        host_needs=tuple(entry["host_needs"]),
        called_methods=tuple(entry["called_methods"]),
        defined_methods=tuple(entry["defined_methods"]),
        parsed=entry["parsed"],
    )


def _calls_name(value: ast.expr | None, name: str) -> bool:
    """`name(...)`: a call of the name itself."""
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == name
