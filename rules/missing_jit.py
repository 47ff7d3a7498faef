"""## What it does

Finds a function that does JAX array work (`jnp`/`lax`/`jax.nn` calls, `model.apply(...)` or a
Flax `TrainState`'s `state.apply_fn(...)`, an equinox Module call, `@`, arithmetic applied to
every leaf of a model by `jax.tree.map` (an EMA of the weights), an optimizer step that updates
every leaf (`state.apply_gradients(grads=...)`, an optax `tx.update(grads, opt_state)`), or a
call of another function of the file that does, a `def` nested in it included, even when other
functions bind the same name: each step's own `loss_fn`) and is called again and again from Python, once per iteration of a
loop over batches or steps (directly, or through the functions that call it per batch), while
nothing in the file jit-compiles it.
It also finds a Flax/haiku `model.apply(variables, x, ...)` called directly in such a loop
(seed 001's decode loops; in a file that imports Flax or haiku, or applies a model imported
from the project to its `params`; with `--preview` also a Flax Linen module that a function of
the project builds, `model = build_model(config)`, whatever the file imports), reported at the call, unless the loop feeds it an input
that grows every iteration without bound (jit would compile once per length; a window of the
last `block_size` tokens is bounded and still reported); and, the same way, a Flax NNX or
equinox Module called directly in such a loop (`noise = model(x, t)` in a sampler's loop over
timesteps: the name holds a Module class's instance, what every caller passes, or a parameter
annotated `nnx.Module`/`eqx.Module`; also `self.model(x, t)`, an attribute its class sets to one,
in a sampler object's method or a Module's method that draws a progress bar or copies to the
host and that something calls), with no fix (a function decorated with `nnx.jit` or
`eqx.filter_jit` that calls the Module compiles it).

The rule wants evidence, all in the same file: a loop that runs many times (not a literal
table, a small constant `range`, or a loop over layers or parameter dicts, and one that shows
it runs over data or steps: a `range` of a count, a loader, a progress bar; not a caller's
`images` or `designs`, whose number the code does not show: `_frequency.streams`) in code that runs
eagerly (module level, `main`, a function called from there, or driver code with `print`,
`.item()`, `tqdm`, timers; with `--preview` also when the file calls it only from code whose
own mode it cannot tell, a dispatcher that another module calls: `CallGraph.driven`, 3 true of 5
new findings when measured on the ecosystem check; or a plain top-level function that the file calls from nowhere but
such functions, hands to nothing and never decorates, whose own loop says it runs over data or
steps in a way no trace would take: a `while` on a flag, a loader, a progress bar, not a
`range`, which a library's algorithm also runs under its caller's jit: a tutorial's rollout
helper, an evaluation loop over a loader that another module calls: `CallGraph.drives_loop`),
calling the function by name, or through a transform that does not compile called at once
(`jax.value_and_grad(loss_fn)(params, batch)`, `jax.vmap(jax.grad(f))(xs)`: the transform
runs the function right there, and its derivative with it, op by op when the loop is eager;
`CallGraph._transformed`), or a function decorated with such transforms only
(`@eqx.filter_value_and_grad`, `@jax.vmap`: called by name; reported without a fix, the jit
goes above the transform). It stays silent when the function
is jitted anywhere in the file (decorated, `f = jax.jit(f)`, `fast = jax.jit(f)`), handed to
`jax.jit`/`vmap`/`grad`/`lax.scan` or any other function and not called there at once
(`grad_fn = jax.grad(loss_fn)`; the caller may jit it: a
function of a library is called from other files; not when a function that is itself traced
hands it to a transform, `jax.value_and_grad(loss_fn)` in the jitted step: that runs under
the step's trace, and the calls by name in an evaluation loop still run eagerly), called only from traced code, decorated,
a method, named like setup code (`init_*`, `make_*`, `create_*`, `build_*`, `load_*`; not a
`*_step`: equinox's examples call their training step `make_step`), or
when its body would not survive jit: host I/O, `print`, `.item()`, `np.asarray`, mutation of
outer objects (an optax optimizer's `update(grads, state)` is a pure function, and an
`nnx.Optimizer` or NNX metric that every caller passes in is updated in place under
`nnx.jit`; a Flax Linen module built in the body from its options, `Model(features)` or a
project function returning one, is a dataclass without arrays that jit takes with those
options static), Python control flow on array values, `while` loops, loops or comprehensions
over data (`[jnp.max(d[i]) for i in range(len(d))]` unrolls per item and retraces per
length), `try`, or calls into code jaxlint cannot see (a function of another module of the
project is seen into through its summary: it traces when its body, and every project
function it calls or hands on, would; what the step passes to its static parameters, a
`range` count or a scan's length, must be a Python value; a callable it cannot see into that
the file itself calls from traced code, in a jitted function or a function it hands to
`jax.grad`, traces too: a loss helper of a star import). A helper of one or two operations (a
batch drawn with `randint` and a slice) in an iteration that also runs a jitted step is
trivial next to it (not when that compiled work is its own: a `lax.scan` over a closure
made on every call is traced and compiled again on every call): silent. So is, unless
`--preview` asks for it, a function of a few plain array operations (three at most: no model
call, transform or `lax` control flow) that a jitted or transformed function of the file also
runs, itself or through the function that calls it from the loop: its compiled use is the
one the code is built around, and eagerly it costs a few dispatches per call. Loops in tests (test files, test functions) are not hot paths,
and loops over epochs, seeds, configurations or plot axes, a count below 100 that
the header spells (a demo's `range(10)`, `tqdm(np.arange(20))`, `zip(prices[:25], ...)`, a
collection made by `make_graphs(..., n_graphs=2)`: it costs less eagerly than the compile
would), loops that sleep every iteration (a paced live demo) or draw a plot on every iteration (a
progress plot every `k` steps does not count) and search loops that `return` at the first hit
run a few times: silent too, and so is a call made only when `step % k == 0` (or on the
few iterations another thinning guard lets through: `_guards.thinning_guard`), or once per
iteration of a loop that also runs a Python loop of device work the call is not in (advantages
computed after a rollout of env steps, each of which dispatches the policy: the call's few
dispatches are paid once per rollout; `DeviceIndex.amortized`; a compiled step that scans many
steps in one call does not count). A `def` nested in a function that itself runs
once per iteration is left alone: jitting it there would compile it again on
every outer call, and so is a function whose static parameters (shapes, `if` tests) the loop
passes a new value each iteration (`for n in sizes: sample(key, n)`, or a loop value passed after
`*args`, where the parameter it lands in cannot be told): jit would compile on every
iteration.

## Why is this bad?

Without jit every `jnp` operation is dispatched from Python one at a time, each with its own
small compiled kernel, and nothing is fused. Seed report 001 found an activation-extraction
forward documented as "JIT compiled" that was not: every batch ran op by op. We measured the
eager forward of a small encoder at 3.2x the jitted one for a batched forward and 15x for a
per-example loop on CPU (`../shared/research/runtime-baseline.md` §8; `python
bench/jit_extraction.py`); the report estimates 5-10x on TPU.

## Example

```python
def predict(params, x):
    hidden = jnp.tanh(x @ params["w1"])
    return jax.nn.softmax(hidden @ params["w2"])

for x in batches:
    print(predict(params, x).argmax(-1))
```

Use instead:

```python
@jax.jit
def predict(params, x):
    hidden = jnp.tanh(x @ params["w1"])
    return jax.nn.softmax(hidden @ params["w2"])

for x in batches:
    print(predict(params, x).argmax(-1))
```

## Fix safety

The fix adds `@jax.jit`, or `@functools.partial(jax.jit, static_argnames=(...))` where some
parameters must be Python values under a trace: a Flax module used as `module.apply`,
keyword options passed to `apply`, parameters read in `if` tests, `range(...)`, `in` tests,
dict keys, f-strings or shape arguments, and flags with string or boolean defaults. In a
file that imports equinox and calls a Module it is given, it adds `@eqx.filter_jit`, which
makes every non-array argument static. In a file that uses Flax NNX, where the function calls
or updates NNX objects every caller passes (a Module, an `nnx.Optimizer`, a metric), it adds
`@nnx.jit`, which carries their in-place updates out of the trace. Imports are added. The fix is **unsafe**: jit changes
behaviour in corner cases the rule cannot see. Static arguments must be hashable (a list of
layer indices passed where a tuple was expected now raises), each new static value compiles
again, Python side effects in code the function calls run once per compile instead of once per
call, and array arguments that were Python scalars become traced (weakly typed) values.
There is no fix when the function takes `*args`/`**kwargs`, when a static parameter is
positional-only, or when a call site passes a list or dict literal to a static parameter.

For an inline `model.apply(...)` in a loop, the fix creates `jitted_model_apply =
jax.jit(model.apply, static_argnames=(...))` before the loop (keywords given literal constants
or named like module options are static) and calls it instead; **unsafe** for the same
reasons. There is no fix when the model is rebound in the loop.

The fix is plain JAX (`jax.jit`, `functools.partial`): `runtime-helpers = false` in
`[tool.jaxlint]` changes nothing.

## Runtime helper

For activation extraction, `jaxlint.runtime.jit_extraction(apply_fn, layers=...)` compiles
the forward once with the layer selection static and returns stacked activations of the
chosen layers only.

## References

- JAX, "Just-in-time compilation": https://docs.jax.dev/en/latest/jit-compilation.html
- `../shared/research/runtime-baseline.md` §8 (eager vs jit forward with activations).
"""

from __future__ import annotations

import re

import libcst as cst

from jaxlint._callgraph import Function, Mode, Repeat, in_test
from jaxlint._guards import thinning_guard
from jaxlint._context import FileContext
from jaxlint._jittability import Jittability, analyze
from jaxlint._nodes import free_names, loop_header
from jaxlint._frequency import call_chain_evidence
from jaxlint._positions import line_of, positions
from jaxlint._rule import Applicability, Edit, Fix, ImportSpec, Rule

from ._apply_in_loop import ApplyCall, apply_finding, is_apply_call, module_file
from ._shapes import growth


__all__ = ["MissingJit"]

_MIN_OPERATIONS = 2
# At most this many operations are trivial next to a compiled call in the same iteration.
_TRIVIAL = 2
# At most this many plain operations are a light function (`_light_and_traced_too`).
_LIGHT = 3
# Names of one-shot setup code: run a few times, not worth a compile each.
_SETUP = re.compile(r"^_*(init|make|create|build|setup|load|save|restore|prepare|plot|log|print|download|test)", re.I)
# ...unless the name says it is a step (`make_step`, equinox's name for a training step).
_STEP = re.compile(r"(^|_)step$", re.I)


class MissingJit(Rule):
    CODE = "JL001"
    SLUG = "missing-jit"
    MESSAGE = "function doing array work is called in a loop but is never jit-compiled"
    FIX = Applicability.UNSAFE
    TOKENS = ("jax", "flax")

    def __init__(self, ctx: FileContext, options: dict[str, object] | None = None) -> None:
        super().__init__(ctx, options)
        self._defined: set[str] = set()
        self._called_in_loops: set[str] = set()
        self._applies: list[ApplyCall] = []
        self._names: set[str] = set()  # names this pass's fixes introduce
        self._modules: bool | None = None  # whether the file imports Flax NNX or equinox

    # Cheap gate: the call graph is built only for files that call one of their own
    # functions by name inside a loop.
    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._defined.add(node.name.value)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        callee = func
        while isinstance(callee, cst.Call) and callee.args:  # `jax.value_and_grad(loss_fn)(...)`
            callee = callee.args[0].value
        if isinstance(callee, cst.Name) and callee.value not in self._called_in_loops and self.ctx.loops(node):
            self._called_in_loops.add(callee.value)
        elif is_apply_call(node):
            loops = self.ctx.loops(node)
            if loops:
                self._applies.append(ApplyCall(node, list(self.ctx.ancestors), loops))
        if (isinstance(func, cst.Name) or _self_attribute(func)) and node.args and self._module_file():
            # `model(x)`, `self.model(x)`: a Flax NNX or equinox Module called directly (`_module_finding`)
            loops = self.ctx.loops(node)
            if loops:
                self._applies.append(ApplyCall(node, list(self.ctx.ancestors), loops, module=True))

    def _module_file(self) -> bool:
        if self._modules is None:
            self._modules = module_file(self.ctx)
        return self._modules

    def finish(self) -> None:
        for found in self._applies:
            inline = apply_finding(self.ctx, found, self._names, preview=self.preview)
            if inline is not None:
                self.report(found.call, inline.message, fix=inline.fix, ancestors=found.ancestors, evidence=inline.evidence)
        if not self._defined & self._called_in_loops or in_test(self.ctx, ()):
            return
        graph = self.ctx.calls
        candidates: dict[int, tuple[str, int, Jittability]] = {}
        for function in graph.functions.values():
            found = self._candidate(function)
            if found is not None:
                candidates[id(function.node)] = found
        for function in graph.functions.values():
            if id(function.node) not in candidates:
                continue
            work, work_count, jittability = candidates[id(function.node)]
            repeat = next(
                (
                    r
                    for r in graph.repeats(function, drivers=True, driven=self.preview)
                    if not any(id(f.node) in candidates for f in r.chain)
                    and thinning_guard(self.ctx, [*r.site.path, r.site.call], r.loop) is None
                    and not self._static_per_iteration(function, jittability, r)
                    and not self._trivial_beside_compiled(work_count, r)
                    and not self._amortized(r)
                ),
                None,
            )
            if repeat is None:
                continue
            if self._rebuilt_per_call(function):
                continue
            if not self.preview and self._light_and_traced_too(function, repeat):
                continue
            self.report(
                function.node.name,
                self._message(function, work, repeat, jittability),
                # jitting a transformed function wants the transform inside the jit, and an
                # equinox transform's results (`None` for non-arrays) want `eqx.filter_jit`
                fix=None if function.node.decorators else self._fix(function, jittability),
                ancestors=[*function.path, function.node],
                evidence=[call_chain_evidence(
                    self.ctx, repeat.site.call, repeat.site.path, repeat.loop, [f.name for f in repeat.chain]
                )],
            )

    def _candidate(self, function: Function) -> tuple[str, int, Jittability] | None:
        node = function.node
        graph = self.ctx.calls
        if node.asynchronous is not None or not function.sites:
            return None
        if node.decorators and graph.transform_decorators(function) is None:
            return None
        if not all(graph.hands_to_transform(name, path) for name, path in function.uses):
            return None  # handed to something that may jit it (a library's caller), or runs it
        if _SETUP.match(function.name) and not _STEP.search(function.name):
            return None
        found = graph.array_work(node)
        if found is None or found[1] < _MIN_OPERATIONS:
            return None  # one operation dispatches once with or without jit
        if graph.mode(node) is Mode.TRACED:
            return None
        jittability = analyze(self.ctx, graph, function)
        if jittability.blockers:
            return None
        return found[0], found[1], jittability

    def _trivial_beside_compiled(self, work_count: int, repeat: Repeat) -> bool:
        """Whether the function does a trivial amount of eager work (`_TRIVIAL` operations or
        fewer: a batch drawn with a `randint` and a slice) in an iteration that also runs
        compiled code (`train_step(...)`, jitted) besides its own call (a `lax.scan` it makes
        is compiled, but eagerly it is traced again on every call): next to the compiled step,
        its dispatches cost nothing worth a compile."""
        if work_count > _TRIVIAL:
            return False
        path = list(repeat.site.path)
        index = next((i for i, n in enumerate(path) if n is repeat.loop), None)
        if index is None:
            return False
        return self.ctx.device.loop_dispatches(repeat.loop, path[:index], compiled=True, besides=None if repeat.chain else repeat.site.call)

    def _amortized(self, repeat: Repeat) -> bool:
        """Whether the loop that repeats the call also runs, on each iteration, a Python loop
        of device work that the call is not in (`DeviceIndex.amortized(spelled=True)`: an
        update after a rollout of env steps, a summary after an epoch's batches): one eager
        call per such iteration dispatches next to all of the inner loop's dispatches. A
        compiled step that scans many steps in one call does not count: next to one dispatch,
        an eager function's many are not small (an EMA tree-mapped over every parameter)."""
        path = [*repeat.site.path, repeat.site.call]
        index = next((i for i, n in enumerate(path) if n is repeat.loop), None)
        return index is not None and self.ctx.device.amortized(repeat.loop, path[:index], path, spelled=True)

    def _light_and_traced_too(self, function: Function, repeat: Repeat) -> bool:
        """Preview only: a function of a few plain array operations (`_LIGHT`, no model
        forward, transform or `lax` control flow: `CallGraph.light_work`) that the file also
        runs under a trace (it, or a function on the call path from the loop, is called in a
        jitted or transformed function: `CallGraph.traced_too`, or from a loss that a transform
        called at once runs, `jax.grad(loss_fn)(params)`, whose own finding the loss or the step
        gets: `CallGraph.transformed_too`). Its compiled use is the one
        the code is built around; the eager calls from the loop cost a few dispatches each,
        and jit saves at most those. On the ecosystem check's dev split no finding of this
        kind was a true positive, in the repositories of earlier batches (0 of 2) or of the
        newest ones (0 of 4)."""
        graph = self.ctx.calls
        if not graph.light_work(function.node, _LIGHT):
            return False
        if any(graph.traced_too(f) for f in (function, *repeat.chain)):
            return True
        # a helper of a loss that a transform runs (not the loss itself: nothing compiles it)
        return graph.transformed_too(function) or any(f.transformed or graph.transformed_too(f) for f in repeat.chain)

    def _static_per_iteration(self, function: Function, jittability: Jittability, repeat: Repeat) -> bool:
        """Whether jit would compile on every iteration, which saves nothing over running
        eagerly: the loop passes an array whose shape changes each time (`forward(params,
        tokens)` with `tokens` grown by `jnp.concatenate` in the loop: `_shapes.growth`), to
        this function or to the caller that runs it; or a value it binds (`for n in sizes:
        sample(key, n)`) to a parameter that jit would make static (a shape, an `if` test)."""
        loop = repeat.loop
        if isinstance(loop, (cst.For, cst.While)):
            path = list(repeat.site.path)
            ancestors = path[: next(i for i, n in enumerate(path) if n is loop)]
            if any(growth(self.ctx, arg.value, loop, ancestors) for arg in repeat.site.call.args):
                return True
        if repeat.chain or not jittability.statics:
            return False
        bound = self.ctx.loop_bindings(repeat.loop)
        positional = [p.name.value for p in (*function.node.params.posonly_params, *function.node.params.params)]
        args = repeat.site.call.args
        if any(arg.star for arg in args):
            # `f(*args, window)`: which parameter a value lands in is unknown; one the loop
            # binds may be static (a new compile per iteration): no evidence for jit.
            return any(free_names(arg.value) & bound for arg in args)
        for index, arg in enumerate(args):
            name = arg.keyword.value if arg.keyword is not None else (positional[index] if index < len(positional) else None)
            if name in jittability.statics and free_names(arg.value) & bound:
                return True
        return False

    def _rebuilt_per_call(self, function: Function) -> bool:
        """Whether `function` is a `def` nested in a function that itself runs many times:
        jitting it there would make a new jitted function, and a compile, per outer call."""
        owner = function.owner
        if not isinstance(owner, cst.FunctionDef):
            return False
        outer = self.ctx.calls.function(owner)
        return outer is not None and bool(self.ctx.calls.repeats(outer))

    def _message(self, function: Function, work: str, repeat: Repeat, jittability: Jittability) -> str:
        loop = repeat.loop
        line = line_of(self.ctx.module, loop, repeat.site.path)
        where = loop_header(loop) + (f" (line {line})" if line else "")
        scope = repeat.site.scope
        if isinstance(scope, cst.FunctionDef):
            where += f" in `{scope.name.value}()`"
        via = ""
        if repeat.chain:
            via = " via " + " → ".join(f"`{f.name}()`" for f in repeat.chain)
        compiled = "is never jit-compiled"
        if self.ctx.calls.traced_too(function):
            compiled = "is compiled only where a trace runs it"
        runs, dispatches = "it runs", "its operations"
        transforms = self.ctx.calls.transform_decorators(function) if function.node.decorators else None
        transform = repeat.site.call.func
        if transforms is None and not repeat.chain and isinstance(transform, cst.Call):  # `jax.grad(f)(...)`
            transforms = [self.ctx.resolve(transform.func, repeat.site.path, anchor=repeat.site.call) or ""]
        if transforms:
            # `jax.value_and_grad(loss_fn)(...)` or `@eqx.filter_value_and_grad`: the body runs
            # eagerly under the transform's tracer, its derivative too
            runs = f"`{'`, `'.join(t.rpartition('.')[2] for t in transforms)}` runs it"
            dispatches = "its operations and their derivatives" if any("grad" in t for t in transforms) else dispatches
        hint = _static_hint(jittability)
        if function.node.decorators:  # only transforms (`_candidate`): the jit goes above them
            jit = "eqx.filter_jit" if jittability.module_calls else "jax.jit"
            hint = f"compile it with `@{jit}` above its decorators"
        return (
            f"`{function.name}()` does array work (`{work}`) but {compiled}, and {runs} "
            f"once per iteration of {where}{via}: every call dispatches {dispatches} one "
            f"by one from Python; " + hint
        )

    def _fix(self, function: Function, jittability: Jittability) -> Fix | None:
        if jittability.undeterminable is not None:
            return None
        statics = tuple(n for n in _parameter_order(function.node) if n in jittability.statics)
        if statics and _list_passed(function, statics):
            return None
        imports: list[ImportSpec] = []
        if jittability.module_calls:
            decorator, spec = _spelling(self.ctx, "equinox", "filter_jit", "eqx")
            imports += spec
            title = "Decorate it with `@eqx.filter_jit`"
        else:
            if jittability.in_place:
                jit, spec = _spelling(self.ctx, "flax.nnx", "jit", "nnx")
            else:
                jit, spec = _spelling(self.ctx, "jax", "jit", "jax")
            imports += spec
            if statics:
                partial, spec = _spelling(self.ctx, "functools", "partial", "functools")
                imports += spec
                names = ", ".join(f'"{n}"' for n in statics) + ("," if len(statics) == 1 else "")
                decorator = f"{partial}({jit}, static_argnames=({names}))"
                title = f"Decorate it with `@partial({'nnx' if jittability.in_place else 'jax'}.jit, static_argnames=({names}))`"
            else:
                decorator = jit
                title = f"Decorate it with `@{'nnx' if jittability.in_place else 'jax'}.jit`"
        new = function.node.with_changes(
            decorators=[cst.Decorator(decorator=cst.parse_expression(decorator))]
        )
        return Fix(Applicability.UNSAFE, (Edit(function.node, replacement=new),), title, tuple(imports))


def _parameter_order(node: cst.FunctionDef) -> list[str]:
    params = node.params
    return [p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)]


def _list_passed(function: Function, statics: tuple[str, ...]) -> bool:
    """Whether a call site passes an unhashable literal (list, dict, set) to a static parameter."""
    positional = [p.name.value for p in (*function.node.params.posonly_params, *function.node.params.params)]
    unhashable = (cst.List, cst.Dict, cst.Set, cst.ListComp, cst.DictComp, cst.SetComp)
    for site in function.sites:
        for index, arg in enumerate(site.call.args):
            name = arg.keyword.value if arg.keyword is not None else (positional[index] if index < len(positional) else None)
            if name in statics and isinstance(arg.value, unhashable):
                return True
    return False


def _spelling(ctx: FileContext, module: str, name: str, default: str) -> tuple[str, list[ImportSpec]]:
    """How to write `module.name` in this file, and the import it needs (if any)."""
    imports = ctx._module_scope.imports  # noqa: SLF001 - engine-internal
    for local, target in imports.items():
        if target == module:
            return f"{local}.{name}", []
    for local, target in imports.items():
        if target == f"{module}.{name}":
            return local, []
    if default != module:
        return f"{default}.{name}", [ImportSpec(module, alias=default)]
    return f"{module}.{name}", [ImportSpec(module)]


def _static_hint(jittability: Jittability) -> str:
    if jittability.module_calls:
        return "compile it with `eqx.filter_jit` (it calls the Modules it is given)"
    if jittability.in_place and not jittability.statics:
        return "compile it with `nnx.jit` (it calls or updates the Flax NNX objects it is given)"
    if jittability.undeterminable is not None:
        return f"jit-compile it (jaxlint cannot tell which parameters are static: {jittability.undeterminable})"
    if not jittability.statics:
        return "compile it with `@jax.jit`"
    names = ", ".join(f"`{n}`" for n in jittability.statics)
    return f"compile it with `jax.jit`, static: {names}"


def _self_attribute(func: cst.BaseExpression) -> bool:
    """`self.model`: an attribute read through a name (the method's receiver, checked later)."""
    return isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)
