"""Which functions of a file call which, from where, and whether their code runs eagerly.

Built once per file on the first question a rule asks (`FileContext.calls`), by one walk
that records every `def`, every call and every other reference to a function's name. A
function is known by its simple name when the file binds that name exactly once, by its
`def`; calls are attributed to it only where that `def` is the binding Python would use.

The questions it answers:

- `mode(def)`: does the function's body run eagerly (op by op, from Python), under a trace
  (jitted, handed to `jax.jit`/`vmap`/`grad`/`lax.scan`..., a method of a `Module`, only
  called from traced code), or is that unknown (its callers are in other files, or it is
  handed to an unknown higher-order function, or a test, whose loops are checks, not hot
  paths)? Precision first: a body is eager only on evidence: a call from eager code, `main`,
  or host-side driver code in the body itself (`print`, `.item()`, `np.asarray`, `tqdm`,
  timers, file I/O, `int(jnp...)`).
- `array_work(def)`: does it run JAX array computations (`jnp`/`lax`/`nn`/`random` calls,
  `model.apply(...)`, a Module call in an equinox file, `@`), directly or through another
  function of the file?
- `repeats(def)`: the eager call paths that run it once per iteration of a loop that runs
  many times (directly, or through the functions that call it, a few levels up).
"""

from __future__ import annotations

import enum
import functools as ft
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import libcst as cst

from . import _jaxapi
from ._bindings import Kind
from ._frequency import integer_value, iteration_count, leaves_block, streams
from ._guards import periodic_test
from ._jaxapi import HOST_METHODS, is_host_copy
from ._scope import dotted_name, target_names
from ._walk import iter_children


if TYPE_CHECKING:
    from ._context import FileContext, Loop


__all__ = [
    "HOST_METHODS",
    "CallGraph",
    "Function",
    "Mode",
    "Repeat",
    "Site",
    "counts_few_things",
    "names_few_things",
    "names_many_things",
    "call_arguments",
    "method_call_arguments",
    "parameter_calls",
    "passed_argument",
    "positional_params",
    "in_test",
    "is_test_file",
    "is_host_copy",
    "runs_many_times",
]

_LOOPS = (cst.For, cst.While, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)
_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)
_MAX_DEPTH = 3
_DEF_NAME = re.compile(r"^[ \t]*(?:async[ \t]+)?def[ \t]+(\w+)", re.MULTILINE)

# Functions that run the callable they are given eagerly, from Python (entry points).
_EAGER_RUNNERS = frozenset({"absl.app.run", "fire.Fire", "typer.run", "click.command"})
# Base classes whose methods run under a trace (Flax `apply`, haiku transforms, eqx jit).
_MODULE_BASES = ("flax.", "equinox.", "haiku.", "jax.")
# Host-side driver code: an eager Python loop is the only place these make sense.
_DRIVER_CALLS = frozenset(
    {"print", "open", "input", "time.time", "time.perf_counter", "time.monotonic", "jax.block_until_ready"}
)
_DRIVER_PREFIXES = ("tqdm.", "logging.", "absl.logging.", "wandb.", "jax.profiler.", "jax.device_get")
# ...of which these also run under a trace (a debugging `print` in a forward).
_DEBUG_OUTPUT = frozenset({"print", "open", "input"})
_DEBUG_PREFIXES = ("logging.", "absl.logging.")
# Iterables whose items are a model's parts, not data: loops over them run a fixed, small
# number of times (a layer stack, a parameter dict).
_STRUCTURE_WORDS = (
    "layer", "block", "head", "stage", "depth", "leaf", "leaves", "param", "weight", "shard",
    "device", "module", "kernel", "level", "scale", "field", "spec", "dim", "axis", "axes",
)  # fmt: skip
# The model parts there are few of even for a compile per iteration: a real model has dozens
# of layers and blocks (`runs_many_times(compiles=True)`).
_PARTS_FEW_PER_COMPILE = tuple(w for w in _STRUCTURE_WORDS if w not in ("layer", "block"))
# Whole words (in `snake_case` names, singular or plural) for things there are few of.
_FEW_TOKENS = frozenset(
    {
        "epoch", "fold", "seed", "trial", "run", "config", "cfg", "experiment", "split",
        "metric", "tag", "ax", "axs", "axi", "axarr", "fig", "subplot", "plot", "panel",
        "hparam", "hyperparam", "sweep", "variant", "setting", "benchmark", "dtype",
        # `for ds_name in valid_iters`, `for name in names`: the keys of a table of named
        # things (datasets, metrics, layers), as many as somebody wrote down.
        "name",
    }
)  # fmt: skip
_TOKEN = re.compile(r"[a-z]+")
_STRUCTURE_CALLS = frozenset(
    {
        "jax.tree.leaves",
        "jax.tree_util.tree_leaves",
        "jax.tree_util.tree_leaves_with_path",
        "jax.tree.leaves_with_path",
        "jax.tree_util.tree_flatten_with_path",
        "jax.devices",
        "jax.local_devices",
        "zip",
        "enumerate",
        "reversed",
        "sorted",
        "list",
        "tuple",
        "tqdm.tqdm",
        "tqdm.auto.tqdm",
        "tqdm.trange",
    }
)
_FEW_ITERATIONS = 8  # a literal `range(n)` below this is setup, a sweep or a test table
# For per-call costs (eager dispatch, filter_jit's flatten) rather than compiles: a literal
# `range(n)` below this (a docs demo's `range(10)`) costs less than the compile that would
# save it, or too little to matter.
FEW_CALLS = 100
_TEST_DIRS = frozenset({"test", "tests", "testing"})
_TEST_FILE = re.compile(r"^(test_.*|.*_tests?|conftest)\.(py|ipynb)$")
# Methods of containers and files, not calls of a Module.
_CONTAINER_METHODS = frozenset(
    {
        "append", "extend", "insert", "update", "setdefault", "pop", "popitem", "add", "clear",
        "remove", "discard", "get", "items", "keys", "values", "copy", "index", "count",
        "format", "join", "split", "startswith", "endswith", "write", "read", "close",
    }
)  # fmt: skip
# Pytree maps that run their function once per leaf, eagerly when called eagerly.
_TREE_MAPS = frozenset(
    {"jax.tree.map", "jax.tree_util.tree_map", "jax.tree_map", "jax.tree.map_with_path", "jax.tree_util.tree_map_with_path"}
)  # fmt: skip
# What an operation applied to every leaf counts: one dispatch per leaf, a dozen or more in a
# model (more than a trivial helper's few).
_PER_LEAF = 4
_ARITHMETIC = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide, cst.Power, cst.FloorDivide)
# Array functions that only reshape, convert, create or describe: a function doing nothing
# else gains nothing from jit.
_NOT_COMPUTE = frozenset(
    {
        "reshape", "broadcast_to", "expand_dims", "squeeze", "transpose", "asarray", "array",
        "astype", "ravel", "atleast_1d", "atleast_2d", "atleast_3d", "moveaxis", "swapaxes",
        "dtype", "finfo", "iinfo", "issubdtype", "result_type", "promote_types", "can_cast",
        "shape", "ndim", "size", "isdtype", "zeros", "ones", "empty", "full", "zeros_like",
        "ones_like", "empty_like", "full_like", "PRNGKey", "key", "key_data", "wrap_key_data",
        "convert_element_type", "stop_gradient", "device_put",
    }
)  # fmt: skip


class Mode(enum.Enum):
    """How a function's body runs when it is called."""

    EAGER = "eager"
    TRACED = "traced"
    UNKNOWN = "unknown"


@dataclass(frozen=True, eq=False)
class Site:
    """A call in the file: the call, its ancestors, and the innermost def/lambda/class
    (or the module) whose code runs it."""

    call: cst.Call
    path: tuple[cst.CSTNode, ...]
    scope: cst.CSTNode


@dataclass
class Function:
    """A `def` of the file and what is known about it."""

    node: cst.FunctionDef
    path: tuple[cst.CSTNode, ...]  # its ancestors
    owner: cst.CSTNode  # the module, def or class whose body defines it
    trusted: bool = False  # its name is bound by this def alone, so calls by name reach it
    sites: list[Site] = field(default_factory=list)  # calls of it by name (trusted only)
    uses: list[tuple[cst.Name, tuple[cst.CSTNode, ...]]] = field(default_factory=list)  # other references
    body: list[Site] = field(default_factory=list)  # calls its body makes (lambdas included)
    transformed: list[Site] = field(default_factory=list)  # `jax.grad(it)(...)`: sites run under a transform's tracer
    matmul: bool = False  # its body uses `@`

    @property
    def name(self) -> str:
        return self.node.name.value

    @property
    def method(self) -> bool:
        return isinstance(self.owner, cst.ClassDef)


@dataclass(frozen=True)
class Repeat:
    """How a function is run repeatedly: `site` (an eager call of `chain[0]`, or of the
    function itself when `chain` is empty) sits in `loop`; `chain` lists the functions
    between, innermost caller last... outermost first: `loop` calls `chain[0]`, which calls
    `chain[1]`, ..., which calls the function."""

    loop: Loop
    site: Site
    chain: tuple[Function, ...]


class CallGraph:
    """The functions of one file, who calls them from where, and how their code runs."""

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.functions: dict[str, Function] = {}  # trusted functions by name
        self._defs: dict[int, Function] = {}  # every def, by id of its node
        self._calls: list[Site] = []
        self._reads: list[tuple[cst.Name, tuple[cst.CSTNode, ...]]] = []
        self._bound: dict[str, int] = {}  # bindings other than a def, per name
        self._mode: dict[int, Mode] = {}
        self._work: dict[int, str | None] = {}
        # `attribute_sites`: the calls `x.attr(...)` by attr, and the attrs read without a call
        self._attribute_index: tuple[dict[str, list[Site]], set[str]] | None = None
        self._uses_flax = False
        self._uses_equinox = False
        self._uses_nnx = False
        self._def_names: frozenset[str] = frozenset()
        self._dead = False  # walking statements that never run (after a `raise`)
        self._traced_callees: set[str] | None = None  # `calls_traced`

    # -- building ------------------------------------------------------------------------

    @classmethod
    def build(cls, ctx: FileContext) -> CallGraph:
        graph = cls(ctx)
        # References matter only for names some `def` binds: a superset read from the text
        # spares recording every other name.
        graph._def_names = frozenset(_DEF_NAME.findall(ctx.source))
        graph._walk(ctx.module, [])
        imports = ctx._module_scope.imports.values()  # noqa: SLF001 - engine-internal
        heads = {(target or "").split(".", 1)[0] for target in imports}
        graph._uses_flax = bool(heads & {"flax", "haiku"})
        graph._uses_equinox = "equinox" in heads
        graph._uses_nnx = any(t == "flax.nnx" or t.startswith("flax.nnx.") for t in imports if t)
        defs_by_name: dict[str, list[Function]] = {}
        for function in graph._defs.values():
            if not function.method:  # a method binds no name outside its class
                defs_by_name.setdefault(function.name, []).append(function)
        for name, functions in defs_by_name.items():
            if len(functions) == 1 and not graph._bound.get(name):
                functions[0].trusted = True
                graph.functions[name] = functions[0]
        invoked: set[int] = set()  # names read only to be transformed and called at once
        for site in graph._calls:
            func = site.call.func
            transformed = isinstance(func, cst.Call)
            if transformed:
                func = graph._transformed(func, site.path, site.call)  # type: ignore[arg-type]
                if func is not None:
                    invoked.add(id(func))
            if isinstance(func, cst.Name):
                target = graph.functions.get(func.value)
                if target is not None and graph._binds(func.value, site.path, site.call, target):
                    target.sites.append(site)
                    if transformed:
                        target.transformed.append(site)
            owner = graph._defs.get(id(site.scope)) or graph._enclosing_def(site.path)
            if owner is not None:
                owner.body.append(site)
        for name_node, path in graph._reads:
            if id(name_node) in invoked:
                continue
            target = graph.functions.get(name_node.value)
            if target is not None and graph._binds(name_node.value, path, name_node, target):
                target.uses.append((name_node, path))
        return graph

    def _transformed(self, func: cst.Call, path: tuple[cst.CSTNode, ...], call: cst.Call) -> cst.Name | None:
        """`loss_fn` of `jax.value_and_grad(loss_fn)(params, batch)` (also `jax.vmap(jax.grad(f))`
        and `partial`s of the function): a transform that does not compile, called at once.
        The call runs the function's body right there, op by op under the transform's tracer
        when the code around it runs eagerly: it is a call of the function, as `loss_fn(params,
        batch)` would be. A transform whose result is kept (`grad_fn = jax.grad(loss_fn)`) or
        handed on is a use (`_escape`)."""
        node: cst.BaseExpression = func
        while isinstance(node, cst.Call):
            resolved = self.ctx.resolve(node.func, path, anchor=call)
            if resolved not in _jaxapi.TRANSFORMS or resolved in _jaxapi.JIT_WRAPPERS:
                if resolved in _jaxapi.PARTIAL and node is not func:
                    pass  # `jax.grad(partial(loss_fn, model))`
                else:
                    return None
            positional = [a for a in node.args if a.keyword is None and not a.star]
            if not positional:
                return None
            node = positional[0].value
        return node if isinstance(node, cst.Name) else None

    def _walk(self, node: cst.CSTNode, path: list[cst.CSTNode]) -> None:
        if isinstance(node, cst.FunctionDef):
            owner = next(
                (p for p in reversed(path) if isinstance(p, (cst.FunctionDef, cst.ClassDef, cst.Module))),
                self.ctx.module,
            )
            self._defs[id(node)] = Function(node, tuple(path), owner)
        elif isinstance(node, cst.IndentedBlock):
            # Statements after a `raise`/`return`/`sys.exit()` never run: calls there are
            # no calls (`_frequency.never_runs`).
            path.append(node)
            dead = self._dead
            for child in iter_children(node):
                self._walk(child, path)
                if leaves_block(child):
                    self._dead = True
            self._dead = dead
            path.pop()
            return
        elif isinstance(node, cst.Call):
            if not self._dead:
                self._calls.append(Site(node, tuple(path), _innermost_scope([*path, node], self.ctx.module)))
            if isinstance(node.func, cst.Name):
                # The callee is a call, not a reference; walk the arguments only.
                path.append(node)
                for child in iter_children(node):
                    if child is not node.func:
                        self._walk(child, path)
                path.pop()
                return
        elif isinstance(node, cst.Name):
            if node.value in self._def_names and not self._dead:
                self._reads.append((node, tuple(path)))
            return
        elif isinstance(node, cst.Attribute):
            path.append(node)
            self._walk(node.value, path)
            path.pop()
            return
        elif isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.MatrixMultiply):
            function = self._enclosing_def(path)
            if function is not None:
                function.matmul = True
        elif isinstance(node, (cst.Assign, cst.AugAssign, cst.AnnAssign, cst.For, cst.CompFor)):
            targets = node.targets if isinstance(node, cst.Assign) else [node]
            for target in targets:
                for name in target_names(target.target):
                    self._bound[name] = self._bound.get(name, 0) + 1
        elif isinstance(node, (cst.Import, cst.ImportFrom, cst.ClassDef)):
            for name in _imported_or_class_names(node):
                self._bound[name] = self._bound.get(name, 0) + 1
        path.append(node)
        for child in iter_children(node):
            if isinstance(node, (cst.FunctionDef, cst.ClassDef)) and child is node.name:
                continue
            if isinstance(node, cst.Param) and child is node.name:
                continue
            if isinstance(node, cst.Arg) and child is node.keyword:
                continue
            self._walk(child, path)
        path.pop()

    def _enclosing_def(self, path: Sequence[cst.CSTNode]) -> Function | None:
        for index in range(len(path) - 1, -1, -1):
            node = path[index]
            if isinstance(node, cst.FunctionDef):
                child = path[index + 1] if index + 1 < len(path) else None
                if child is node.body:
                    return self._defs.get(id(node))
            elif isinstance(node, cst.ClassDef):
                return None
        return None

    def _binds(
        self, name: str, path: Sequence[cst.CSTNode], anchor: cst.CSTNode, target: Function
    ) -> bool:
        """Whether `name`, read at `anchor`, refers to `target`'s def (it is not shadowed by
        a parameter or local of a function in between)."""
        return self.ctx.binding_owner(name, [*path, anchor]) is target.owner

    # -- questions -----------------------------------------------------------------------

    def function(self, node: cst.FunctionDef) -> Function | None:
        """The facts about `node` (any def of the file)."""
        return self._defs.get(id(node))

    def attribute_sites(self, attr: str) -> list[Site] | None:
        """The calls `x.attr(...)` of the file (on any object), or None when the file also
        reads `x.attr` without calling it there (a bound method handed on may be called from
        anywhere)."""
        index = self._attribute_index
        if index is None:
            called = {id(site.call.func) for site in self._calls}
            from ._nodes import iter_subtree

            handed: set[str] = set()
            for node in iter_subtree(self.ctx.module):
                if isinstance(node, cst.Attribute) and id(node) not in called:
                    handed.add(node.attr.value)
            by_attr: dict[str, list[Site]] = {}
            for site in self._calls:
                if isinstance(site.call.func, cst.Attribute):
                    by_attr.setdefault(site.call.func.attr.value, []).append(site)
            index = self._attribute_index = (by_attr, handed)
        by_attr, handed = index
        if attr in handed:
            return None
        return by_attr.get(attr, [])

    def mode(self, node: cst.FunctionDef) -> Mode:
        """How the body of `node` runs when called (see the module docstring)."""
        key = id(node)
        cached = self._mode.get(key)
        if cached is not None:
            return cached
        self._mode[key] = Mode.UNKNOWN  # recursion: a cycle alone proves nothing
        result = self._compute_mode(self._defs[key])
        self._mode[key] = result
        return result

    def _compute_mode(self, function: Function) -> Mode:
        jit = self.ctx.jit
        name = function.name
        if _is_test(function):
            return Mode.UNKNOWN  # a test runs once; its loops are checks, not hot paths
        if function.trusted and (name in jit.traced or jit.jitted_def(function.node, function.owner)):
            return Mode.TRACED
        decorated = self._decorator_mode(function)
        if decorated is not None:
            return decorated
        if function.method:
            return self._method_mode(function)
        if isinstance(function.owner, cst.FunctionDef):
            outer = self.mode(function.owner)
            if outer is Mode.TRACED:
                return Mode.TRACED
        escapes = [self._escape(name_node, path) for name_node, path in function.uses]
        site_modes = [self.scope_mode(site.scope, site.path) for site in function.sites]
        # Handed to a transform and also called by name from eager code, it runs both ways: the
        # eager calls are the ones that cost (`traced_too` says it is also traced).
        if Mode.TRACED in escapes and Mode.EAGER not in site_modes:
            return Mode.TRACED
        if site_modes and all(m is Mode.TRACED for m in site_modes) and not escapes:
            return Mode.TRACED
        if Mode.EAGER in site_modes or Mode.EAGER in escapes:
            return Mode.EAGER
        if escapes or site_modes:
            return Mode.UNKNOWN
        if self.traced_elsewhere(function):
            return Mode.TRACED  # other modules call it only from jitted or transformed code
        if name == "main" or self.drives(function):
            return Mode.EAGER
        return Mode.UNKNOWN

    def _decorator_mode(self, function: Function) -> Mode | None:
        """What the function's decorators say of how its body runs: traced under a jit
        wrapper or a library's Module decorator, unknown under one jaxlint does not know,
        None when they are all plain (`functools.wraps`...) or there are none."""
        for decorator in self._decorator_names(function):
            if decorator in _jaxapi.TRANSFORMS and decorator not in _jaxapi.JIT_WRAPPERS:
                continue  # `@eqx.filter_value_and_grad`: the body runs where the function is called
            if decorator in _jaxapi.JIT_WRAPPERS or (decorator or "").startswith(_MODULE_BASES):
                return Mode.TRACED
            if decorator not in _jaxapi.PLAIN_DECORATORS:
                return Mode.UNKNOWN
        return None

    def driven_at(self, call: cst.Call, path: Sequence[cst.CSTNode]) -> bool:
        """`driven` for the function around `call` (whose ancestors are `path`)."""
        return self.driven(_innermost_scope([*path, call], self.ctx.module))

    def driven(self, node: cst.CSTNode) -> bool:
        """Whether the body of the function `node`, whose mode is unknown only because every
        caller in the file is of unknown mode itself (`run(config)` calling
        `run_single_host(config)`, `run` called from another module), runs eagerly on its own
        evidence: host-side driver code (`drives`), what makes an uncalled function eager.
        Not for a function one caller runs traced, a method, a test, or one behind a
        decorator jaxlint does not know. Preview (missing-jit): measured at 3 true of 5 new
        findings, below the rule's precision target."""
        function = self._defs.get(id(node))
        if function is None or not isinstance(node, cst.FunctionDef) or self.mode(node) is not Mode.UNKNOWN:
            return False
        if _is_test(function) or function.method or self._decorator_mode(function) is not None:
            return False
        escapes = [self._escape(name_node, path) for name_node, path in function.uses]
        site_modes = [self.scope_mode(site.scope, site.path) for site in function.sites]
        if Mode.TRACED in escapes or Mode.TRACED in site_modes:
            return False
        return self.drives(function)

    def traced_elsewhere(self, function: Function) -> bool:
        """Whether the project's other modules call this top-level function only from traced
        code (`_project`)."""
        ctx = self.ctx
        if ctx.project is None or ctx.module_name is None or function.owner is not ctx.module:
            return False
        return ctx.project.traced_only(f"{ctx.module_name}.{function.name}")

    def _method_mode(self, function: Function) -> Mode:
        owner = function.owner
        assert isinstance(owner, cst.ClassDef)
        path = [*function.path]
        cut = next(i for i, n in enumerate(path) if n is owner)
        outer = path[:cut]
        for base in owner.bases:
            resolved = self.ctx.resolve(base.value, outer, anchor=owner)
            if resolved is None:
                name = dotted_name(base.value)
                if name not in ("object", "ABC", "abc.ABC"):
                    return Mode.UNKNOWN  # a base class of this file or unknown: maybe a Module
            elif resolved.startswith(_MODULE_BASES):
                # A Module's methods run under its caller's trace, unless the body does what
                # no trace can: copies a value to the host, waits, reads a clock, draws a
                # progress bar (a sampler's `for t in tqdm(steps)`; not a `print` or a log
                # line, which a traced forward may hold for debugging).
                # It must be called somewhere (`engine.sample(...)` in this file or another
                # module): a driver method nothing calls runs when a user asks, if ever.
                if not function.name.startswith("__") and self.drives(function, debug_output=False):
                    return Mode.EAGER if self._method_called(function.name) else Mode.UNKNOWN
                return Mode.TRACED
        return Mode.EAGER if self.drives(function) else Mode.UNKNOWN

    def _method_called(self, name: str) -> bool:
        """Whether a method named `name` is called (`x.name(...)`) in the file or, through the
        summaries, anywhere in the project."""
        if self.ctx.project is not None and self.ctx.project.calls_method(name):
            return True
        return bool(self.attribute_sites(name))

    def _escape(self, name: cst.Name, path: tuple[cst.CSTNode, ...]) -> Mode:
        """What handing the function to whatever receives it means for its body."""
        index = len(path) - 1
        while index >= 0 and isinstance(path[index], cst.Arg):
            call = path[index - 1] if index >= 1 else None
            if not isinstance(call, cst.Call):
                break
            resolved = self.ctx.resolve(call.func, path[: index - 1], anchor=call)
            if resolved in _jaxapi.PARTIAL:
                index -= 2  # `partial(f, ...)` handed on: look at what receives the partial
                continue
            if resolved is None:
                return Mode.UNKNOWN
            if resolved in _EAGER_RUNNERS or resolved.startswith(("jax.tree.", "jax.tree_util.")):
                # Runs it right there, once or per leaf: as the code around the call runs.
                return self.scope_mode(_innermost_scope([*path[: index - 1], call], self.ctx.module), path)
            if resolved.startswith(("jax.", "equinox.", "flax.", "haiku.")):
                return Mode.TRACED  # jit, vmap, grad, lax.scan, checkpoint, custom_vjp...
            return Mode.UNKNOWN
        return Mode.UNKNOWN

    def transform_decorators(self, function: Function) -> list[str] | None:
        """The transforms that decorate the function when every decorator is one that does
        not compile (`@eqx.filter_value_and_grad`, `@jax.vmap`): its body runs where it is
        called, eagerly from eager code. None when it has another decorator or none."""
        found = []
        for decorator in self._decorator_names(function):
            if decorator not in _jaxapi.TRANSFORMS or decorator in _jaxapi.JIT_WRAPPERS:
                return None
            found.append(decorator)
        return found or None

    def _decorator_names(self, function: Function) -> Iterator[str | None]:
        """What each decorator of the function applies: its resolved name, the API a
        module-level alias binds, or the name as written."""
        info = self.ctx.function_info(function.node, function.path)
        for resolved, written in zip(info.decorators, function.node.decorators):
            yield resolved or self._decorator_alias(written.decorator) or dotted_name(written.decorator)

    def _decorator_alias(self, expr: cst.BaseExpression) -> str | None:
        """The API a decorator named by a module-level alias applies: `@typecheck` where the
        module binds `typecheck = jaxtyped(typechecker=beartype)` once, at its top level."""
        if not isinstance(expr, cst.Name):
            return None
        module = self.ctx.module
        bindings = self.ctx.bindings.of(expr.value, [module])
        if len(bindings) != 1 or bindings[0].kind is not Kind.ASSIGN or len(bindings[0].path) != 2:
            return None
        value = bindings[0].value
        if value is None:
            return None
        return _jaxapi.decorator_target(value, lambda e: self.ctx.resolve(e, [module], anchor=value))

    def scope_mode(self, scope: cst.CSTNode, path: Sequence[cst.CSTNode] = ()) -> Mode:
        """How code whose innermost scope is `scope` runs (`path`: a path through `scope`,
        needed to tell what a lambda is handed to)."""
        if isinstance(scope, (cst.Module, cst.ClassDef)):
            return Mode.EAGER if isinstance(scope, cst.Module) or scope in self.ctx.module.body else Mode.UNKNOWN
        if isinstance(scope, cst.FunctionDef) and id(scope) in self._defs:
            return self.mode(scope)
        if isinstance(scope, cst.Lambda):
            index = next((i for i, n in enumerate(path) if n is scope), None)
            if index is not None and index >= 2 and isinstance(path[index - 1], cst.Arg):
                call = path[index - 2]
                if isinstance(call, cst.Call):
                    resolved = self.ctx.resolve(call.func, path[: index - 2], anchor=call) or ""
                    if resolved.startswith(("jax.tree.", "jax.tree_util.")):
                        outer = _innermost_scope([*path[: index - 2], call], self.ctx.module)
                        return self.scope_mode(outer, path[: index - 2])
                    if resolved in _jaxapi.JIT_WRAPPERS or resolved.startswith(_MODULE_BASES):
                        return Mode.TRACED
        return Mode.UNKNOWN  # a lambda handed to something else

    def drives_loop(self, call: cst.Call, path: Sequence[cst.CSTNode], loop: Loop) -> bool:
        """Whether the code around `call` runs eagerly by its own evidence though `mode` cannot
        tell for want of callers: `call` sits in `loop`, a loop over data or steps (the caller
        judged it so: `runs_many_times`) in the body of a plain top-level function (not a
        method, not decorated, not handed to anything, not a test) that nothing in the file
        runs traced, and that the file calls from no other code than more such functions, or
        not at all (a notebook's rollout helper, an extraction loop another module calls); and
        the loop says so itself (`_driver_loop`: a `while`, a loader, a progress bar, not a
        `range`). A loop
        over a data loader or a run's steps is host-side driver code: under jit it would unroll
        the run into one trace. Read by missing-jit only."""
        scope = _innermost_scope([*path, call], self.ctx.module)
        if not isinstance(scope, cst.FunctionDef) or not _driver_loop(loop):
            return False
        index = next((i for i, n in enumerate(path) if n is scope), None)
        if index is None or not any(n is loop for n in path[index + 1 :]):
            return False
        function = self._defs.get(id(scope))
        return function is not None and self._plain_driver(function, 0)

    def _plain_driver(self, function: Function, depth: int) -> bool:
        if (
            depth > 2
            or function.method
            or function.owner is not self.ctx.module
            or function.node.decorators
            or function.uses
            or _is_test(function)
            or self.mode(function.node) is not Mode.UNKNOWN
        ):
            return False
        for site in function.sites:
            caller = self._defs.get(id(site.scope))
            if caller is None or caller is function or not self._plain_driver(caller, depth + 1):
                return False
        return True

    def calls_traced(self, callee: str) -> bool:
        """Whether the file calls the module-level callable `callee` from code that runs under
        a trace: a jitted function, or a function it hands to `jax.grad`, `vmap`, `lax.scan`...
        (`mode`). `callee` is what the call resolves to (`metrics.accuracy`), or, for a name
        jaxlint cannot resolve (from a star import, a module not in the project), the name as
        spelled. Such a callable is traceable by the file's own evidence, though jaxlint cannot
        see its body: an eager function calling it can be jitted as well as the traced one."""
        cache = self._traced_callees
        if cache is None:
            cache = self._traced_callees = set()
            module = self.ctx.module
            for site in self._calls:
                func = site.call.func
                if not isinstance(func, (cst.Name, cst.Attribute)):
                    continue
                root = func
                while isinstance(root, cst.Attribute):
                    root = root.value
                if not isinstance(root, cst.Name):
                    continue
                owner = self.ctx.binding_owner(root.value, [*site.path, site.call])
                if owner is not None and owner is not module:
                    continue  # a local or a parameter: not the module-level callable
                if (
                    self.scope_mode(site.scope, site.path) is not Mode.TRACED
                    and not self._handed_to_trace(site.scope)
                    and not self._run_transformed(site.scope)
                ):
                    continue
                resolved = self.ctx.resolve(func, site.path, anchor=site.call)
                cache.add(resolved or dotted_name(func) or "")
        return callee in cache

    def _run_transformed(self, scope: cst.CSTNode) -> bool:
        """Whether `scope` is a def that the file runs under a transform's tracer
        (`jax.grad(loss_fn)(params)`): what it calls takes tracers, eager or not."""
        function = self._defs.get(id(scope)) if isinstance(scope, cst.FunctionDef) else None
        return function is not None and bool(function.transformed)

    def _handed_to_trace(self, scope: cst.CSTNode) -> bool:
        """Whether `scope` is a nested `def` that the function defining it hands to a JAX
        transform (`grads = jax.grad(loss_fn)(params)`), though its name is bound by other
        defs elsewhere in the file too (a `loss_fn` in each step), so `mode` cannot tell."""
        function = self._defs.get(id(scope)) if isinstance(scope, cst.FunctionDef) else None
        if function is None or function.trusted or not isinstance(function.owner, cst.FunctionDef):
            return False
        name = function.name
        owner = function.owner
        twins = [f for f in self._defs.values() if f.owner is owner and f.name == name]
        if len(twins) != 1:
            return False
        for read, path in self._reads:
            if read.value == name and self.ctx.binding_owner(name, [*path, read]) is owner:
                if self._escape(read, path) is Mode.TRACED:
                    return True
        return False

    def site_mode(self, call: cst.Call, path: Sequence[cst.CSTNode]) -> Mode:
        """How the code around `call` (whose ancestors are `path`) runs."""
        return self.scope_mode(_innermost_scope([*path, call], self.ctx.module), path)

    def drives(self, function: Function, *, debug_output: bool = True) -> bool:
        """Whether the body has host-side driver code (`print`, `.item()`, `np.asarray`,
        timers, `tqdm`, file I/O): code that only makes sense run eagerly. `debug_output`:
        count `print`, logging, `open` and `input` too (a traced function may print)."""
        for site in function.body:
            func = site.call.func
            if isinstance(func, cst.Attribute) and func.attr.value in HOST_METHODS:
                return True
            resolved = self.ctx.resolve(func, site.path, anchor=site.call)
            if resolved is None and isinstance(func, cst.Name) and func.value in ("print", "open", "input"):
                resolved = func.value
            if resolved is None and isinstance(func, cst.Name) and func.value in ("int", "float", "bool"):
                # `int(jnp.argmax(logits))`: a device value converted on the host.
                if any(self._is_array_call(inner, site.path, site.call) for inner in _calls_under(site.call)):
                    return True
            if resolved is None:
                continue
            if not debug_output and (resolved in _DEBUG_OUTPUT or resolved.startswith(_DEBUG_PREFIXES)):
                continue
            if resolved in _DRIVER_CALLS or resolved.startswith(_DRIVER_PREFIXES) or is_host_copy(resolved):
                return True
        return False

    def _is_array_call(self, call: cst.Call, path: Sequence[cst.CSTNode], anchor: cst.CSTNode) -> bool:
        resolved = self.ctx.resolve(call.func, path, anchor=anchor)
        return resolved is not None and _jaxapi.is_array_op(resolved)

    def array_work(self, node: cst.FunctionDef) -> tuple[str, int] | None:
        """What array work `node` does when called eagerly: the first operation (`jnp.dot`,
        `model.apply`, `encode`) and a rough count of the operations it dispatches (a Flax
        `apply`, a Module call or a transform counts 2, an operation in a loop or a lambda
        twice; layout and dtype helpers like `jnp.reshape` count nothing). Calls of jitted
        functions are compiled work, not counted. None when it does none."""
        return self._array_work(node, set())

    def _array_work(self, node: cst.FunctionDef, seen: set[int]) -> tuple[str, int] | None:
        key = id(node)
        if key in self._work:
            return self._work[key]
        if key in seen:
            return None
        seen.add(key)
        function = self._defs[key]
        first, count = self._direct_array_work(function)
        for site, callee in self._eager_callees(function):
            inner = self._array_work(callee.node, seen)
            if inner is not None:
                first = first or callee.name
                count += inner[1] * _repetition(site.path, function.node)
        result = (first, count) if first is not None else None
        self._work[key] = result
        return result

    def _eager_callees(self, function: Function) -> Iterator[tuple[Site, Function]]:
        """The calls of the body that run another function of the file by name, eagerly (not
        a jitted one: its work is compiled already), with the function each runs."""
        jit = self.ctx.jit
        for site in function.body:
            func = site.call.func
            if not isinstance(func, cst.Name):
                continue
            callee = self.functions.get(func.value)
            if callee is None:
                callee = self._nested_callee(function, site, func.value)
            elif callee is function or site not in callee.sites:
                continue
            if callee is None:
                continue
            if jit.callee(site.call, site.path) or self.ctx.function_info(callee.node, callee.path).jit:
                continue  # compiled already
            yield site, callee

    def _nested_callee(self, function: Function, site: Site, name: str) -> Function | None:
        """The `def` nested in `function` that a call of `name` in its own body runs, where the
        function binds `name` by that def alone, though other defs of the file bind it too (a
        `loss_fn` in each of a train and an eval step), so the name is not trusted file-wide."""
        if site.scope is not function.node:
            return None
        bindings = self.ctx.bindings.of(name, [*site.path, site.call])
        if len(bindings) != 1 or bindings[0].kind is not Kind.DEF:
            return None
        nested = self._defs.get(id(bindings[0].node))
        if nested is None or nested.owner is not function.node or nested is function:
            return None
        return nested

    def _direct_array_work(self, function: Function) -> tuple[str | None, int]:
        """The first array operation the body itself runs (spelled as in the source), and
        how many it dispatches (see `array_work`)."""
        first: str | None = None
        count = 0
        for site, weight, _plain in self._weighed_sites(function):
            func = site.call.func
            first = first or (dotted_name(func.func if isinstance(func, cst.Call) else func) or "a call")
            count += weight * _repetition(site.path, function.node)
        if function.matmul:
            first = first or "@"
            count += 1
        return first, count

    def _weighed_sites(self, function: Function) -> Iterator[tuple[Site, int, bool]]:
        """The calls of the body that dispatch array work, with what each counts (see
        `array_work`) and whether it is a plain operation (`jnp.mean(x)`), not a model's
        forward pass, a transform, an operation per leaf or a `lax` control-flow call
        (`_jaxapi.TRACING`: eagerly it traces its body and compiles it again on every call)."""
        params = _parameter_names(function.node.params) | _parts_of(function.node, _parameter_names(function.node.params))
        for site in function.body:
            call = site.call
            func = call.func
            if self._compiled_inline(site, function.node):
                continue  # `jax.pmap(lambda x: ...)(x)`: compiled (again on every call: jit-in-loop's cost)
            resolved = self.ctx.resolve(func, site.path, anchor=call)
            if resolved is not None:
                if (
                    _jaxapi.is_array_op(resolved)
                    and resolved.rsplit(".", 1)[-1] not in _NOT_COMPUTE
                    and not resolved.startswith("jax.random.")  # sampling keys and weights: setup
                ):
                    yield site, 1, resolved not in _jaxapi.TRACING
                elif resolved in _TREE_MAPS and self._leafwise_arithmetic(call, site.path):
                    yield site, _PER_LEAF, False  # an operation per leaf of a model: an EMA, a scaled update
            elif isinstance(func, cst.Call):
                transform = self.ctx.resolve(func.func, site.path, anchor=call)
                if transform in _jaxapi.TRANSFORMS and transform not in _jaxapi.JIT_WRAPPERS:
                    yield site, 2, False
            elif isinstance(func, cst.Attribute) and self._optimizer_update(call, func, site.path):
                yield site, _PER_LEAF, False  # an optimizer step over every leaf of the model
            elif (
                # `model.apply(variables, x)`, a Flax `TrainState`'s `state.apply_fn(params, x)`
                (isinstance(func, cst.Attribute) and func.attr.value in ("apply", "apply_fn") and call.args and self._uses_flax)
                or (self._uses_equinox and _module_call(func, params))
                or (self._uses_nnx and _module_call(func, params) and self._nnx_module(func, site.path))
            ):
                yield site, 2, False

    def _optimizer_update(self, call: cst.Call, func: cst.Attribute, path: Sequence[cst.CSTNode]) -> bool:
        """Whether `call` applies an optimizer step to a model's parameters, an update of every
        leaf: a Flax `TrainState`'s `state.apply_gradients(grads=grads)`, or an optax transformation's `tx.update(grads, opt_state, ...)` (`_pytrees`
        reads `tx` as an optimizer). Not a dict's or an NNX object's `update` (in place)."""
        method = func.attr.value
        if method == "apply_gradients":
            return any(a.keyword is not None and a.keyword.value == "grads" for a in call.args)
        if method == "update" and len([a for a in call.args if a.keyword is None and not a.star]) >= 2:
            from ._pytrees import Value, classify

            return classify(self.ctx, func.value, [*path, call, func]) is Value.OPTIMIZER
        return False

    def light_work(self, node: cst.FunctionDef, limit: int) -> bool:
        """Whether what `node` dispatches when called eagerly is a few plain array operations:
        at most `limit` as `array_work` counts them, every one a plain operation
        (`_weighed_sites`), its own or in the functions of the file it calls. Eagerly such a
        function costs a few dispatches per call, microseconds each."""
        found = self.array_work(node)
        return found is not None and found[1] <= limit and self._plain(node, set())

    def _plain(self, node: cst.FunctionDef, seen: set[int]) -> bool:
        if id(node) in seen:
            return True
        seen.add(id(node))
        function = self._defs[id(node)]
        if any(not plain for _site, _weight, plain in self._weighed_sites(function)):
            return False
        return all(self._plain(callee.node, seen) for _site, callee in self._eager_callees(function))

    def hands_to_transform(self, name: cst.Name, path: tuple[cst.CSTNode, ...]) -> bool:
        """Whether this use of a function hands it to a JAX transform (`jax.grad(loss_fn)`,
        `eqx.filter_value_and_grad(loss_fn)`, `jax.vmap`) inside code that is traced: the
        transformed function runs under that trace, and nothing about the use makes the
        function's other, eager calls compiled."""
        if self._escape(name, path) is not Mode.TRACED:
            return False
        return self.scope_mode(_innermost_scope(list(path), self.ctx.module), path) is Mode.TRACED

    def traced_too(self, function: Function) -> bool:
        """Whether some of `function`'s calls, or a use that hands it on, run under a trace
        (in a jitted or transformed function, a `lax` loop's body...), though `mode` says its
        body runs eagerly from elsewhere: a function the project also runs traced."""
        if any(self.scope_mode(site.scope, site.path) is Mode.TRACED for site in function.sites):
            return True
        return any(self._escape(name, path) is Mode.TRACED for name, path in function.uses)

    def transformed_too(self, function: Function) -> bool:
        """Whether the file calls `function` from a function it runs under a transform that
        does not compile, called at once (a helper of the loss in `jax.grad(loss_fn)(params)`):
        a use built around the transformed function, which jit would take whole."""
        return any(self._run_transformed(site.scope) for site in function.sites)

    def _nnx_module(self, func: cst.BaseExpression, path: Sequence[cst.CSTNode]) -> bool:
        """Whether the parameter `func` calls (or a part of it) holds a Flax NNX Module: what
        every caller of the function passes for it (`_pytrees.classify`)."""
        from ._pytrees import Value, classify

        root = func
        while isinstance(root, (cst.Attribute, cst.Subscript)):
            root = root.value
        return classify(self.ctx, root, path) in (Value.NNX, Value.MODULE)

    def _leafwise_arithmetic(self, call: cst.Call, path: Sequence[cst.CSTNode]) -> bool:
        """Whether a `jax.tree.map(f, tree, ...)` computes on every leaf: `f` is a lambda, or
        a name the function binds to one or a `def`, whose body does arithmetic (`+ - * /
        **`) with a leaf it is given as an operand, or hands a leaf to an array operation
        (`lambda e, p: e * rate + p * (1 - rate)`; not `lambda x: x[i]`, which only indexes,
        nor a dtype or layout change, nor `prod(x.shape) * x.dtype.itemsize` on metadata)."""
        positional = [a.value for a in call.args if a.keyword is None and not a.star]
        if not positional:
            return False
        function = positional[0]
        leaf_functions: list[cst.Lambda | cst.FunctionDef] = []
        if isinstance(function, cst.Lambda):
            leaf_functions.append(function)
        elif isinstance(function, cst.Name):
            for binding in self.ctx.bindings.of(function.value, [*path, call]):
                if isinstance(binding.value, cst.Lambda):
                    leaf_functions.append(binding.value)
                elif isinstance(binding.node, cst.FunctionDef):
                    leaf_functions.append(binding.node)
        for leaf_function in leaf_functions:
            leaves = _parameter_names(leaf_function.params)
            for node in iter_subtree_no_scopes(leaf_function.body):
                if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, _ARITHMETIC):
                    if any(isinstance(side, cst.Name) and side.value in leaves for side in (node.left, node.right)):
                        return True
                elif isinstance(node, cst.Call) and any(
                    isinstance(a.value, cst.Name) and a.value.value in leaves for a in node.args
                ):
                    resolved = self.ctx.resolve(node.func, path, anchor=call)
                    if (
                        resolved is not None
                        and _jaxapi.is_array_op(resolved)
                        and resolved.rsplit(".", 1)[-1] not in _NOT_COMPUTE  # `jnp.astype`: layout
                    ):
                        return True
        return False

    def _compiled_inline(self, site: Site, owner: cst.FunctionDef) -> bool:
        """Whether `site` sits in a lambda or nested def that the body hands straight to a jit
        wrapper (`jax.pmap(lambda x: lax.all_gather(x, "i"))(x)`): its work is compiled."""
        path = list(site.path)
        start = next((i for i, n in enumerate(path) if n is owner), 0)
        for index in range(start + 1, len(path) - 1):
            node, child = path[index], path[index + 1]
            if isinstance(node, cst.Arg) and isinstance(child, cst.Lambda) and index >= 1:
                wrapper = path[index - 1]
                if isinstance(wrapper, cst.Call) and self.ctx.resolve(wrapper.func, path[:index - 1], anchor=wrapper) in _jaxapi.JIT_WRAPPERS:
                    return True
        return False

    def repeats(
        self, function: Function, *, compiles: bool = False, drivers: bool = False, driven: bool = False
    ) -> list[Repeat]:
        """The eager call paths that run `function` once per iteration of a loop that runs
        many times: its own call sites in such loops, or those of the (trusted, plain)
        functions that call it, up to three levels up. `compiles`: many for a compile per
        call (`runs_many_times(compiles=True)`). `drivers`: a call site whose mode is unknown
        counts too when its loop is driver code (`drives_loop`), and a loop that a bare `return`
        ends early is no search (`runs_many_times(exits=True)`): missing-jit's reading.
        `driven`: code of a function that is eager on its own evidence (`driven`) counts as
        eager (preview)."""
        found: list[Repeat] = []
        self._repeats(function, (), found, {id(function.node)}, compiles, drivers, driven)
        return found

    def repeated_elsewhere(self, function: Function) -> str | None:
        """How `function` (a top-level function, or a method of a top-level class) comes to run
        many times though no loop of this file calls it, as evidence to report: another module
        of the project calls it once per iteration of a loop (`_project`: "called once per
        iteration of the loop at train.py:40"), or it is a method its framework calls on every
        step (`library.toml`'s `per-step-methods`: an environment's `step`). None otherwise."""
        ctx = self.ctx
        owner = function.owner
        if owner is ctx.module:
            name = function.name
        elif isinstance(owner, cst.ClassDef) and owner in ctx.module.body:
            name = f"{owner.name.value}.{function.name}"
        else:
            return None
        if ctx.project is not None and ctx.module_name is not None:
            looped = ctx.project.looped(f"{ctx.module_name}.{name}")
            if looped is not None:
                where, line = looped
                return f"called once per iteration of the loop at {where}:{line}"
        if isinstance(owner, cst.ClassDef):
            entry = _jaxapi.active().per_step_method(function.name, self.ancestors(owner))
            if entry is not None:
                return f"a `{entry}`, which its framework calls on every step"
        return None

    def ancestors(self, cls: cst.ClassDef) -> set[str]:
        """The qualified names of the classes `cls` (a top-level class of the file) subclasses:
        through its imports, other classes of the file and, with a project, classes of other
        modules."""
        ctx = self.ctx
        found: set[str] = set()
        classes = {s.name.value: s for s in ctx.module.body if isinstance(s, cst.ClassDef)}
        stack, seen = [cls], {id(cls)}
        while stack:
            node = stack.pop()
            for base in node.bases:
                if base.keyword is not None or base.star:
                    continue
                expr = base.value.value if isinstance(base.value, cst.Subscript) else base.value  # `Base[T]`
                resolved = ctx.resolve(expr, [ctx.module], anchor=node)
                local = classes.get(expr.value) if isinstance(expr, cst.Name) else None
                if resolved is None and local is not None:
                    if ctx.module_name is not None:
                        found.add(f"{ctx.module_name}.{local.name.value}")
                    if id(local) not in seen:
                        seen.add(id(local))
                        stack.append(local)
                    continue
                if resolved is None:
                    continue
                found.add(resolved)
                if ctx.project is not None:
                    found |= ctx.project.ancestors(resolved, ctx.module_name)
        return found

    def _repeats(
        self,
        function: Function,
        chain: tuple[Function, ...],
        found: list[Repeat],
        seen: set[int],
        compiles: bool,
        drivers: bool = False,
        driven: bool = False,
    ) -> None:
        for site in function.sites:
            mode = self.scope_mode(site.scope, site.path)
            if driven and mode is Mode.UNKNOWN and self.driven(site.scope):
                mode = Mode.EAGER
            if mode is not Mode.EAGER and not (drivers and mode is Mode.UNKNOWN):
                continue
            many = [
                loop
                for loop in self.ctx.loops(site.call, site.path)
                if runs_many_times(self.ctx, loop, site.path, calls=True, searches=True, compiles=compiles, exits=drivers)
            ]
            if many and mode is not Mode.EAGER and not self.drives_loop(site.call, site.path, many[0]):
                continue
            if many:
                found.append(Repeat(many[-1], site, chain))
                continue
            if mode is not Mode.EAGER:
                continue
            caller = self._defs.get(id(site.scope))
            if (
                caller is not None
                and caller.trusted
                and id(caller.node) not in seen
                and len(chain) < _MAX_DEPTH
            ):
                self._repeats(caller, (caller, *chain), found, seen | {id(caller.node)}, compiles, drivers, driven)


def _driver_loop(loop: Loop) -> bool:
    """Whether `loop`'s header itself shows a run over data or steps that no trace would
    take (it has passed `runs_many_times` already): a `while` loop (on a flag or a count,
    tested in Python on every pass), or a `for` over anything but a `range` (a loader, a
    progress bar, a dataset). A `range` of a count, however named (`range(num_iters)`,
    `range(len(bins) - 1)`), is also what an algorithm of a library unrolls under its
    caller's jit: no evidence."""
    if isinstance(loop, cst.While):
        return True
    if not isinstance(loop, cst.For):
        return False
    iterable = loop.iter
    while isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) and iterable.func.value in ("enumerate", "reversed") and iterable.args:
        iterable = iterable.args[0].value
    return not (isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) and iterable.func.value == "range")


def _repetition(path: Sequence[cst.CSTNode], function: cst.FunctionDef) -> int:
    """2 when the code at `path` repeats inside `function` (a loop, a comprehension, a
    lambda handed to `tree.map`...), else 1."""
    start = next((i for i, n in enumerate(path) if n is function), 0)
    return 2 if any(isinstance(n, (*_LOOPS, cst.Lambda)) for n in path[start + 1 :]) else 1


def _is_test(function: Function) -> bool:
    """A test function or a method of a test class (pytest/unittest naming)."""
    if function.name.startswith("test"):
        return True
    owner = function.owner
    if isinstance(owner, cst.ClassDef):
        name = owner.name.value
        return name.startswith("Test") or name.endswith(("Test", "Tests", "TestCase"))
    return False


def _calls_under(call: cst.Call) -> Iterator[cst.Call]:
    """The calls inside `call`'s arguments."""
    stack: list[cst.CSTNode] = [a.value for a in call.args]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Call):
            yield node
        stack.extend(iter_children(node))


def _innermost_scope(path: Sequence[cst.CSTNode], module: cst.Module) -> cst.CSTNode:
    """The innermost def, lambda or class whose body holds the last node of `path` (a def's
    decorators and defaults run in the scope around it)."""
    for index in range(len(path) - 1, -1, -1):
        node = path[index]
        if isinstance(node, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            child = path[index + 1] if index + 1 < len(path) else None
            if child is node.body:
                return node
    return module


def _imported_or_class_names(node: cst.CSTNode) -> Iterator[str]:
    if isinstance(node, cst.ClassDef):
        yield node.name.value
        return
    assert isinstance(node, (cst.Import, cst.ImportFrom))
    names = node.names
    if isinstance(names, cst.ImportStar):
        return
    for alias in names:
        if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
            yield alias.asname.name.value
        else:
            full = dotted_name(alias.name)
            if full:
                yield full.split(".", 1)[0]


def _parameter_names(params: cst.Parameters) -> set[str]:
    names = {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}
    for star in (params.star_arg, params.star_kwarg):
        if isinstance(star, cst.Param):
            names.add(star.name.value)
    return names


def _module_call(func: cst.BaseExpression, params: set[str]) -> bool:
    """`model(x)`, `model.blocks[0](x)`, `model.encoder(x)`, `block(x)` for a `block` of
    `model.blocks`: calling a parameter or a part of one (in an equinox file, a Module
    call), not a container method (`storage.append`)."""
    if isinstance(func, cst.Attribute) and func.attr.value in _CONTAINER_METHODS:
        return False
    expr = func
    while isinstance(expr, (cst.Attribute, cst.Subscript)):
        expr = expr.value
    return isinstance(expr, cst.Name) and expr.value in params and expr.value not in ("self", "cls")


def _parts_of(function: cst.FunctionDef, params: set[str]) -> set[str]:
    """Loop targets that iterate over parameters: `block` in `for block in model.blocks`,
    `for i, block in enumerate(model.blocks)`."""
    parts: set[str] = set()
    for node in iter_subtree_no_scopes(function.body):
        if isinstance(node, (cst.For, cst.CompFor)):
            iterable = node.iter
            while (
                isinstance(iterable, cst.Call)
                and isinstance(iterable.func, cst.Name)
                and iterable.func.value in ("enumerate", "zip", "reversed", "list", "tuple")
                and iterable.args
            ):
                iterable = iterable.args[0].value
            root = iterable
            while isinstance(root, (cst.Attribute, cst.Subscript)):
                root = root.value
            if isinstance(root, cst.Name) and root.value in params:
                target = node.target
                if isinstance(target, cst.Tuple) and len(target.elements) == 2 and isinstance(node.iter, cst.Call) \
                        and isinstance(node.iter.func, cst.Name) and node.iter.func.value == "enumerate":
                    target = target.elements[1].value
                parts.update(target_names(target))
    return parts


def iter_subtree_no_scopes(root: cst.CSTNode) -> Iterator[cst.CSTNode]:
    from ._nodes import iter_subtree

    return iter_subtree(root, into_scopes=False)


def runs_many_times(
    ctx: FileContext,
    loop: Loop,
    path: Sequence[cst.CSTNode],
    *,
    calls: bool = False,
    searches: bool = False,
    exits: bool = False,
    compiles: bool = False,
    shown: bool = True,
) -> bool:
    """Whether `loop` plausibly runs many times over data (batches, steps, examples), not a
    few times over a literal table, a small constant `range`, or a model's parts (layers,
    parameter dicts, pytree leaves, devices). `path` is a path through the loop (ancestors
    of something inside it). The loop must show that it runs over data or steps
    (`_frequency.streams`) unless `compiles`; `shown=False` asks only that it is not
    known to run a few times.

    `calls`: judge it for a per-call cost (eager dispatch, a wrapper's Python overhead)
    rather than a compile per iteration: a literal `range` below `FEW_CALLS` is few, and so
    is a loop drawing with matplotlib.
    `searches`: a loop whose body returns from the function stops at its first hit: few
    (not for training steps, where a `return` at the step limit is common).
    `compiles`: judge it for a compile per iteration, which costs seconds: a loop over a
    model's layers or blocks (`range(cfg.num_layers)`, `for block in model.blocks`) runs
    dozens of times in a real model, which is many.
    `exits` (with `searches`): only a `return` of a value is a search's hit; a bare `return`
    (under a stop test: a time limit, a loss of zero) ends a run early and leaves it many."""
    if isinstance(loop, (cst.For, cst.While)):
        if calls and (_plots(ctx, loop) or paced(ctx, loop)):
            return False
        if searches and _returns(loop, values_only=exits):
            return False
    if isinstance(loop, cst.While):
        return not isinstance(loop.test, (cst.Integer, cst.SimpleString))
    if isinstance(loop, cst.For):
        iterable = loop.iter
        target = loop.target
    else:
        iterable = loop.for_in.iter
        target = loop.for_in.target
    index = next((i for i, n in enumerate(path) if n is loop), len(path))
    few = FEW_CALLS if calls else _FEW_ITERATIONS
    words = _PARTS_FEW_PER_COMPILE if compiles else _STRUCTURE_WORDS
    if not _iterates_data(ctx, iterable, list(path[:index]), loop, target, few, words):
        return False
    # For a per-call cost, a count the header spells out however it is wrapped:
    # `tqdm(np.arange(20))`, `zip(prices[:25], volumes[:25])`. (A compile per iteration costs
    # seconds even over three temperatures.)
    if calls:
        count = iteration_count(ctx, loop, path[:index])
        if count is not None and count < few:
            return False
    # For a per-call or per-copy cost the loop must show that it runs over data or steps; a
    # loop over a caller's values runs an unknown number of times. A compile per iteration
    # costs seconds, so a loop over a model's blocks or a caller's values counts already.
    return compiles or not shown or streams(ctx, iterable, [*path[:index], loop])


def _returns(loop: cst.For | cst.While, *, values_only: bool = False) -> bool:
    """Whether the loop's body has a `return` of the function around it (a search loop);
    `values_only`: a `return` of a value (not a bare `return` or `return None`)."""
    stack: list[cst.CSTNode] = [loop.body]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Return):
            value = node.value
            if not values_only or not (value is None or (isinstance(value, cst.Name) and value.value == "None")):
                return True
            continue
        if isinstance(node, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            continue
        stack.extend(iter_children(node))
    return False


def paced(ctx: FileContext, loop: cst.For | cst.While) -> bool:
    """Whether the loop's body sleeps on every iteration (`time.sleep(0.05)`, not under an
    `if`): it is paced on purpose, a live demo or a poll, and a per-call cost is nothing next
    to the wait."""
    imports = ctx._module_scope.imports  # noqa: SLF001 - engine-internal
    stack: list[cst.CSTNode] = [loop.body]
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.If, cst.Try, cst.For, cst.While, cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            continue
        if isinstance(node, cst.Call):
            func = node.func
            if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
                name = f"{imports.get(func.value.value)}.{func.attr.value}"
            else:
                name = imports.get(func.value) if isinstance(func, cst.Name) else None
            if name == "time.sleep":
                return True
        stack.extend(iter_children(node))
    return False


def _plots(ctx: FileContext, loop: cst.For | cst.While) -> bool:
    """Whether the loop's body draws with matplotlib (`plt.plot(...)` per iteration): one
    curve or panel per iteration, a handful of them. Drawing under a remainder test (`if step
    % every == 0:`, as `periodic` reads it) is a progress plot of a long loop, made once per
    `every` iterations: it says nothing of how many iterations there are."""
    imports = ctx._module_scope.imports  # noqa: SLF001 - engine-internal
    stack: list[cst.CSTNode] = [loop.body]
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            continue
        if isinstance(node, cst.If) and periodic_test(node.test, loop):
            if node.orelse is not None:
                stack.append(node.orelse)
            continue
        stack.extend(iter_children(node))
        if isinstance(node, cst.Call):
            root = node.func
            while isinstance(root, cst.Attribute):
                root = root.value
            if isinstance(root, cst.Name) and (imports.get(root.value) or "").startswith("matplotlib"):
                return True
    return False


def call_arguments(
    ctx: FileContext, function: cst.FunctionDef, name: str
) -> list[tuple[cst.BaseExpression | None, list[cst.CSTNode]]] | None:
    """What every call of `function` in this file passes for its parameter `name`: for each
    call, the argument expression (None: the call leaves the default) and the path to read it
    at. None when a caller may be elsewhere: no call here, the function is handed on or is a
    method, or a call spreads `*args`/`**kwargs`."""
    known = ctx.calls.function(function)
    if known is None or not known.sites or known.uses or known.method:
        return None
    params = positional_params(function)
    if name not in params:
        return None
    found: list[tuple[cst.BaseExpression | None, list[cst.CSTNode]]] = []
    for site in known.sites:
        if any(a.star for a in site.call.args):
            return None
        found.append((passed_argument(site.call, name, params), [*site.path, site.call]))
    return found


def method_call_arguments(
    ctx: FileContext, function: cst.FunctionDef, name: str
) -> list[tuple[cst.BaseExpression | None, list[cst.CSTNode]]] | None:
    """`call_arguments` for a method of a class of the file: what every call `x.method(...)`
    of the file passes for its parameter `name`, on `self` or on any object (a method of
    another class spelled the same counts too: more calls to agree, never fewer). None when
    a caller may be elsewhere: no such call here, the method is read without being called
    (handed on), it is a static or class method or a property, or a call spreads
    `*args`/`**kwargs`."""
    known = ctx.calls.function(function)
    if known is None or not known.method or function.decorators:
        return None
    params = positional_params(function)[1:]  # `self`
    if name not in params:
        return None
    sites = ctx.calls.attribute_sites(function.name.value)
    if not sites:
        return None
    found: list[tuple[cst.BaseExpression | None, list[cst.CSTNode]]] = []
    for site in sites:
        if any(a.star for a in site.call.args):
            return None
        found.append((passed_argument(site.call, name, params), [*site.path, site.call]))
    return found


def parameter_calls(
    ctx: FileContext, param: cst.CSTNode, ancestors: Sequence[cst.CSTNode]
) -> tuple[cst.Param, list[tuple[cst.BaseExpression | None, list[cst.CSTNode]]]] | None:
    """`call_arguments` for the parameter `param` (whose ancestors are `ancestors`, as a
    binding gives them) of the function defining it; None as there, or when `param` is no
    plain parameter of a `def`."""
    if not isinstance(param, cst.Param) or param.star:
        return None
    function = next((n for n in reversed(ancestors) if isinstance(n, cst.FunctionDef)), None)
    if function is None or not any(p is param for p in function.params.params):
        return None
    calls = call_arguments(ctx, function, param.name.value)
    return None if calls is None else (param, calls)


def positional_params(function: cst.FunctionDef) -> list[str]:
    """The names of `function`'s parameters a call can pass by position, in order
    (`passed_argument`'s `params`)."""
    return [p.name.value for p in (*function.params.posonly_params, *function.params.params)]


def passed_argument(call: cst.Call, name: str, params: Sequence[str]) -> cst.BaseExpression | None:
    """The argument `call` passes for the parameter `name` of a function whose positional
    parameters are `params`, by keyword or position; None when it passes none (or spreads
    `*args` before reaching it)."""
    for index, arg in enumerate(call.args):
        if arg.star:
            return None
        if arg.keyword is not None:
            if arg.keyword.value == name:
                return arg.value
        elif index < len(params) and params[index] == name:
            return arg.value
    return None


def in_test(ctx: FileContext, path: Sequence[cst.CSTNode]) -> bool:
    """Whether code at `path` is test code: a test file (`test_*.py`, `*_test.py`, under a
    `tests/` folder), or inside a test function or a method of a test class."""
    if is_test_file(ctx.path):
        return True
    for node in path:
        if isinstance(node, cst.FunctionDef) and node.name.value.startswith("test"):
            return True
        if isinstance(node, cst.ClassDef):
            name = node.name.value
            if name.startswith("Test") or name.endswith(("Test", "Tests", "TestCase")):
                return True
    return False


def is_test_file(path: str) -> bool:
    """Whether the file at `path` is test code (see `_test_file`)."""
    return _test_file(path, os.getcwd())


@ft.lru_cache(maxsize=256)
def _test_file(file_path: str, cwd: str) -> bool:
    """A test file, or a file under a `tests/` folder of the project. Folders above the
    current directory, or more than two levels up from the file, do not count: a checkout
    under `/home/me/tests/` is not test code."""
    parts = re.split(r"[\\/]", file_path)
    if _TEST_FILE.match(parts[-1]):
        return True
    try:
        relative = os.path.relpath(os.path.join(cwd, file_path), cwd)
    except ValueError:  # another drive on Windows
        relative = os.pardir
    if relative.startswith(os.pardir):
        folders = parts[-3:-1]
    else:
        folders = re.split(r"[\\/]", relative)[:-1]
    return bool(_TEST_DIRS & set(folders))


def _iterates_data(
    ctx: FileContext,
    iterable: cst.BaseExpression,
    path: list[cst.CSTNode],
    anchor: cst.CSTNode,
    target: cst.BaseExpression | None,
    few: int = _FEW_ITERATIONS,
    words: tuple[str, ...] = (),
) -> bool:
    words = words or _STRUCTURE_WORDS
    if isinstance(iterable, (cst.Tuple, cst.List, cst.Set, cst.Dict, cst.SimpleString, cst.ConcatenatedString)):
        return False
    if target is not None and _mentions_structure(target, part_words=words):
        return False
    if isinstance(iterable, cst.Call):
        func = iterable.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("items", "keys", "values"):
            return False
        resolved = ctx.resolve(func, path, anchor=anchor)
        if resolved is None and isinstance(func, cst.Name):
            resolved = func.value  # builtins: range, zip, enumerate...
        if resolved == "range":
            constants = [integer_value(ctx, a.value, [*path, anchor]) for a in iterable.args]
            if constants and all(c is not None for c in constants) and not (len(constants) == 3 and constants[2] == 0):
                span = range(*constants)  # type: ignore[arg-type]
                return len(span) >= few
            return not any(_mentions_structure(a.value, part_words=words) for a in iterable.args)
        if resolved in _STRUCTURE_CALLS:
            if resolved.startswith("jax."):
                return False
            return bool(iterable.args) and all(
                _iterates_data(ctx, a.value, path, anchor, None, few, words)
                for a in iterable.args
                if a.keyword is None
            )
        # What a call yields is named by the call and what it is given to iterate, not by its
        # options (`pipeline(data, devices=devices)` yields batches, not devices).
        return not _mentions_structure(func, part_words=words) and not any(
            _mentions_structure(a.value, part_words=words) for a in iterable.args if a.keyword is None
        )
    return not _mentions_structure(iterable, part_words=words)


def counts_few_things(loop: Loop) -> bool:
    """Whether a `for` loop's target or iterable names something there are few of
    (`for epoch in range(num_epochs)`, `for _ in range(FLAGS.num_runs)`, `for seed in
    seeds`): an iteration is a whole epoch, run or experiment."""
    if not isinstance(loop, cst.For):
        return False
    return _mentions_structure(loop.target, parts=False) or _mentions_structure(loop.iter, parts=False)


def _mentions_structure(
    expr: cst.CSTNode, *, parts: bool = True, part_words: tuple[str, ...] = _STRUCTURE_WORDS
) -> bool:
    """Whether a name or attribute in `expr` names a model part (`layers`, `num_heads`: one
    of `part_words`; only with `parts`), or something there are few of (`epochs`, `seeds`,
    `configs`, plot axes)."""
    stack = [expr]
    while stack:
        node = stack.pop()
        if (isinstance(node, cst.Arg) and node.keyword is not None) or isinstance(node, cst.FormattedString):
            # A call's options and text say how it iterates, not what over:
            # `tqdm(loader, desc=f"epoch {epoch}")` runs over batches.
            continue
        text = None
        if isinstance(node, cst.Name):
            text = node.value
        elif isinstance(node, cst.Attribute):
            # The attribute says what is counted (`cfg.num_layers`); its owner does not.
            text = node.attr.value
            if isinstance(node.value, (cst.Attribute, cst.Name)):
                node = node.attr
        elif isinstance(node, cst.SimpleString):
            text = node.value
        if text is not None and names_few_things(text, parts=parts, part_words=part_words):
            return True
        stack.extend(iter_children(node))
    return False


# Words (whole, in `snake_case` names, singular or plural) for what a loop runs over many
# times: data and steps, and for a compile per iteration a real model's layers and blocks.
_MANY_TOKENS = frozenset({"batch", "minibatch", "step", "sample", "example", "episode", "layer", "block"})
# First words of a name that counts things rather than holding one (`num_layers`, `max_steps`).
_COUNT_WORDS = frozenset({"n", "num", "number", "max", "min", "total", "count"})
# What a call that makes a loop's iterable may also be named for: a stream of data
# (`get_ds_iter`, `make_loader`); as a loop target, a dataset is one of a few named ones.
_STREAM_TOKENS = frozenset({"ds", "loader", "dataloader", "dataset"})


def names_many_things(text: str, *, streams: bool = False) -> bool:
    """Whether the name `text` names data items, steps or a model's layers or blocks, things
    a loop runs over many times, by its last word (`batch`, `image_batch`, `local_step`;
    not `block_size` or `step_config`, a size or a configuration of them, nor a count,
    `num_steps`, unless `streams`; `steps_per_epoch` counts steps); with `streams` (a
    call's name), also a stream of data by any word (`get_ds_iter`) and a count of them
    (`get_num_layers`): the project summary's reading of a loop header that also names few
    things."""
    words = _counted_words(text)
    if not words or (not streams and words[0] in _COUNT_WORDS):
        return False  # `num_steps`, `max_concurrent_steps`: a count, not a step
    for index, word in enumerate(words):
        forms = {word}
        if word.endswith("s") and len(word) > 3:
            forms |= {word[:-1]} | ({word[:-2]} if word.endswith("es") else set())
        if streams and forms & _STREAM_TOKENS:
            return True  # `get_ds_iter`, `make_loader`
        if index == len(words) - 1 and forms & _MANY_TOKENS:
            return True
    return False


def names_few_things(
    text: str, *, parts: bool = True, part_words: tuple[str, ...] = _PARTS_FEW_PER_COMPILE
) -> bool:
    """Whether the name `text` names a model part (one of `part_words`, only with `parts`;
    by default those there are few of even for a compile per iteration) or something there are
    few of (`epochs`, `seeds`, `configs`): `_mentions_structure` for one name, also read by the
    project summary (`_project`), which has names but no libcst nodes."""
    lowered = text.lower()
    # `n_data_per_shard` counts data items, `steps_per_epoch` counts steps: what is
    # counted comes before "per".
    counted = re.split(r"(?:^|_)per(?:_|$)", lowered, maxsplit=1)[0] or lowered
    if parts and any(word in counted for word in part_words):
        return True
    tokens = {t[:-1] if t.endswith("s") and len(t) > 3 else t for t in _counted_words(text)}
    return bool(tokens & _FEW_TOKENS)


def _counted_words(text: str) -> list[str]:
    """The words of the name `text` that say what it counts: those before "per", "in" or
    "of" (`steps_per_epoch`, `step_in_epoch`, `batch_of_run` count steps and batches, not
    epochs or runs); all of them when it has none of these after its first word."""
    words = _TOKEN.findall(text.lower())
    for index, word in enumerate(words):
        if index and word in ("per", "in", "of"):
            return words[:index]
    return words
