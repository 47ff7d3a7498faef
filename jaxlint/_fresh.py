"""Which jit wrappers build a new function object each time they run, and how often the
function they make is called (read with libcst, for the rule that lints the file:
jit-in-loop).

jax keys its compile caches on the function object a wrapper is given: a wrapper around a new
object traces and compiles again. `wrapper_api(ctx, call)` is the jit API when `call` wraps a
callable (`jax.jit(f, ...)`, `partial(jax.jit, ...)(f)`, `eqx.filter_jit(donate=...)(f)`; not
`jax.jit(f)(x)`). `fresh_kind(ctx, call, api, ancestors)` says whether what it wraps is a new
object every time the wrapper runs: a `lambda`, a `functools.partial(...)`, or a bound method
(a method of the enclosing class read on `self`, of an object the code builds by calling a
class, a Flax linen `model.apply`; `equinox.filter_jit` caches those, so not for it).
`made_in_loop(ctx, name, loop)` is the lambda, partial or def that is a name's only binding in
a loop's body, and `closure_reads(callable)` the names a callable reads from outside itself.

Where the jitted function runs: `calls_by_name(body, name)` (each call with the number of loops
around it in `body`), `called_once_per_call(function, name)` (called, never in a loop of the
function: a driver that loops over its own jitted step compiles once per call next to many
calls), `nested_def(function, name)`. How often: `hot_repeat(ctx, function)`, a call path
that runs the function once per iteration of a loop that runs many times (`CallGraph.repeats`),
not under a periodic guard (`if step % every == 0:`) nor over a loop the engine counts as few;
`in_benchmark(ctx, ancestors)`, a benchmark function, which times compiles on purpose. What a
callable made in a loop captures: `range_indices(loops)`, the integer indices the loops count
with, and `value_captures(loop, callable, captured)`, whether the loop values it reads are plain
values it could take as arguments.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import libcst as cst

from . import _jaxapi
from ._bindings import Kind
from ._callgraph import Function, Repeat
from ._frequency import Often, loop_runs
from ._guards import thinning_guard
from ._nodes import free_names, iter_subtree
from ._scope import function_scope, target_names
from ._walk import iter_children

if TYPE_CHECKING:
    from ._context import FileContext, Loop


__all__ = [
    "assigned_name",
    "called_once_per_call",
    "calls_by_name",
    "closure_reads",
    "enclosing_function",
    "fresh_kind",
    "hot_repeat",
    "in_benchmark",
    "made_in_loop",
    "nested_def",
    "range_indices",
    "value_captures",
    "wrapper_api",
]

_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)


def wrapper_api(ctx: FileContext, call: cst.Call) -> str | None:
    """The jit API when `call` wraps a callable: `jax.jit(f, ...)`,
    `partial(jax.jit, ...)(f)`, `eqx.filter_jit(donate=...)(f)`; not `jax.jit(f)(x)`."""
    func = call.func
    if isinstance(func, (cst.Name, cst.Attribute)):
        if not ctx.is_call_to(call, _jaxapi.JIT_WRAPPERS):
            return None
        return ctx.resolve_call(call)
    if isinstance(func, cst.Call):
        inner = ctx.resolve(func.func, anchor=call)
        if inner in _jaxapi.PARTIAL and func.args:
            api = ctx.resolve(func.args[0].value, anchor=call)
            return api if api in _jaxapi.JIT_WRAPPERS else None
        if inner in _jaxapi.JIT_WRAPPERS and not any(a.keyword is None for a in func.args):
            return inner
    return None


def fresh_kind(ctx: FileContext, node: cst.Call, api: str, ancestors: Sequence[cst.CSTNode]) -> str | None:
    """Whether the callable `node` wraps is a new object each time the wrapper is built: a
    `lambda`, a `functools.partial(...)`, a bound `method`; None otherwise."""
    target = node.args[0].value
    if isinstance(target, cst.Lambda):
        return "lambda"
    if isinstance(target, cst.Call) and ctx.resolve(target.func, anchor=node) in _jaxapi.PARTIAL:
        return "partial"
    if isinstance(target, cst.Attribute) and api not in _jaxapi.FILTER_JIT | {"equinox.filter_pmap"}:
        return "method" if _bound_method(ctx, target, ancestors) else None
    return None


def _bound_method(ctx: FileContext, target: cst.Attribute, ancestors: Sequence[cst.CSTNode]) -> bool:
    """`self.step` for a method of the enclosing class, `strategy.ask` for an object the
    code builds by calling a class (`strategy = OpenES(...)`), or a Flax linen `model.apply`:
    reading them makes a new bound-method object, which `jax.jit` caches apart
    (`equinox.filter_jit` does not: it is left out)."""
    receiver = target.value
    if isinstance(receiver, cst.Attribute):
        # `train_state.model.apply`, `self.model.apply`: a Flax linen model held by an object
        root = receiver
        while isinstance(root, cst.Attribute):
            root = root.value
        if not isinstance(root, cst.Name) or target.attr.value != "apply":
            return False
        if root.value != "self" and ctx.resolve(root, ancestors, anchor=target) is not None:
            return False  # a module's attribute (`flax.linen.apply`), not an object's
        return _flax_linen_file(ctx)
    if not isinstance(receiver, cst.Name):
        return False
    if receiver.value == "self":
        return _class_defines(ancestors, target.attr.value)
    if _instance_of_a_class(ctx, receiver, [*ancestors, target]):
        return True
    if target.attr.value != "apply" or ctx.resolve(receiver, ancestors, anchor=target) is not None:
        return False
    return _flax_linen_file(ctx)


def _flax_linen_file(ctx: FileContext) -> bool:
    """Whether the file imports Flax (linen) and not haiku, whose `apply` is a plain function
    a transformed object holds (the same object on every read)."""
    imports = [t or "" for t in ctx._module_scope.imports.values()]  # noqa: SLF001
    return any(t.startswith("flax.linen") or t == "flax" for t in imports) and not any(
        t.startswith("haiku") for t in imports
    )


def _instance_of_a_class(ctx: FileContext, receiver: cst.Name, path: Sequence[cst.CSTNode]) -> bool:
    """Whether every binding of `receiver` builds it by calling a class (`OpenES(...)`,
    `envs.Wrapper(...)`): its attributes are then methods, bound anew on each read."""
    bindings = ctx.bindings.of(receiver.value, path)
    if not bindings:
        return False
    for binding in bindings:
        value = binding.value
        if binding.kind is not Kind.ASSIGN or not isinstance(value, cst.Call):
            return False
        func = value.func
        name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        if not name[:1].isupper() or name.isupper():
            return False
    return True


def _class_defines(ancestors: Sequence[cst.CSTNode], method: str) -> bool:
    for node in reversed(ancestors):
        if isinstance(node, cst.ClassDef):
            return any(isinstance(s, cst.FunctionDef) and s.name.value == method for s in node.body.body)
    return False


def made_in_loop(ctx: FileContext, name: str, loop: Loop) -> cst.CSTNode | None:
    """The lambda, partial or def that `name` is bound to inside `loop`'s body, when
    that is its only binding there."""
    if name not in ctx.loop_bindings(loop):
        return None
    found: list[cst.CSTNode] = []
    for node in iter_subtree(loop, into_scopes=False):
        if isinstance(node, cst.FunctionDef) and node.name.value == name:
            found.append(node)
        elif isinstance(node, cst.Assign):
            if any(isinstance(t.target, cst.Name) and t.target.value == name for t in node.targets):
                found.append(node.value)
        elif isinstance(node, (cst.AugAssign, cst.AnnAssign, cst.For, cst.CompFor)):
            if name in target_names(node.target):
                found.append(node)  # some other binding: take no chances
        elif isinstance(node, cst.NamedExpr) and name in target_names(node.target):
            found.append(node)
        elif isinstance(node, cst.WithItem) and node.asname is not None:
            if name in target_names(node.asname.name):
                found.append(node)
    if len(found) != 1:
        return None
    made = found[0]
    if isinstance(made, (cst.FunctionDef, cst.Lambda)):
        return made
    if isinstance(made, cst.Call) and ctx.resolve(made.func, anchor=made) in _jaxapi.PARTIAL:
        return made
    return None


def closure_reads(node: cst.CSTNode) -> set[str]:
    """Names a callable reads from outside itself (closure and partial arguments)."""
    if isinstance(node, cst.FunctionDef):
        own = function_scope(node).bindings
        names = set()
        for part in (node.body, *node.decorators, node.params):
            names |= free_names(part)
        return names - own - {node.name.value}
    return free_names(node)


def enclosing_function(ancestors: Sequence[cst.CSTNode]) -> cst.FunctionDef | None:
    """The def whose body runs the node at the end of `ancestors` (None at module or class
    level, or in a lambda)."""
    for node in reversed(ancestors):
        if isinstance(node, cst.FunctionDef):
            return node
        if isinstance(node, (cst.ClassDef, cst.Lambda)):
            return None
    return None


def nested_def(function: cst.FunctionDef, name: str) -> bool:
    """Whether `function`'s body defines `name` with a nested `def` (a new object per call)."""
    return any(
        isinstance(node, cst.FunctionDef) and node is not function and node.name.value == name
        for node in iter_subtree(function.body, into_scopes=False)
    )


def called_once_per_call(function: cst.FunctionDef, name: str) -> bool:
    """Whether `function`'s body calls `name`, and never in a loop of its own: a function
    that drives a loop with the jitted function it made compiles once per call next to
    many calls (`train()` defining its `step`), which is the usual cost of a driver."""
    calls = calls_by_name(function.body, name)
    return bool(calls) and all(depth == 0 for _, depth in calls)


def calls_by_name(body: cst.CSTNode, name: str) -> list[tuple[cst.Call, int]]:
    """Calls `name(...)` under `body` (not in nested scopes), with how many loops nested in
    `body` they sit in."""
    found: list[tuple[cst.Call, int]] = []
    stack: list[tuple[cst.CSTNode, int]] = [(body, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == name:
            found.append((node, depth))
        inner = depth + 1 if isinstance(node, (cst.For, cst.While, *_COMPREHENSIONS)) else depth
        stack.extend((child, inner) for child in iter_children(node))
    return found


def assigned_name(ancestors: Sequence[cst.CSTNode], node: cst.CSTNode) -> str | None:
    """`name` when `node` is the whole value of `name = node`."""
    parent = ancestors[-1] if ancestors else None
    if (
        isinstance(parent, cst.Assign)
        and parent.value is node
        and len(parent.targets) == 1
        and isinstance(parent.targets[0].target, cst.Name)
    ):
        return parent.targets[0].target.value
    return None


def hot_repeat(ctx: FileContext, function: Function) -> Repeat | None:
    """A call path of the file that runs `function` once per iteration of a loop that runs
    many times (`CallGraph.repeats`, counted for a compile per call), not under a thinning
    guard of a loop around it (`_guards`) and not in a loop the engine counts as few; None if there is
    none."""
    return next(
        (r for r in ctx.calls.repeats(function, compiles=True) if not _occasional(ctx, r) and not _few(ctx, r)), None
    )


def _occasional(ctx: FileContext, repeat: Repeat) -> bool:
    """Whether the call that repeats runs on some iterations only of any loop around it (an
    evaluation over a few datasets under `if step % every == 0:` is occasional)."""
    path = [*repeat.site.path, repeat.site.call]
    return any(thinning_guard(ctx, path, n) is not None for n in repeat.site.path if isinstance(n, (cst.For, cst.While)))


def _few(ctx: FileContext, repeat: Repeat) -> bool:
    """Whether the loop that repeats the call runs few times by the engine's count (a list of
    six batch sizes bound as a parameter's default: a sweep, each size compiling anyway)."""
    path = list(repeat.site.path)
    index = next((i for i, n in enumerate(path) if n is repeat.loop), len(path))
    return loop_runs(ctx, repeat.loop, path[:index]).often is Often.FEW


def in_benchmark(ctx: FileContext, ancestors: Sequence[cst.CSTNode]) -> bool:
    """Inside a benchmark function (`@google_benchmark.register`, `def bench_*`, or a
    function of a notebook that a `%timeit` line calls: `ctx.timed`), whose loop measures
    whatever it does, compiles included."""
    for node in ancestors:
        if not isinstance(node, cst.FunctionDef):
            continue
        if node.name.value.lower().startswith("bench") or node.name.value in ctx.timed:
            return True
        for decorator in node.decorators:
            expr = decorator.decorator
            if isinstance(expr, cst.Call):
                expr = expr.func
            if "benchmark" in ctx.module.code_for_node(expr).lower():
                return True
    return False


def range_indices(loops: Sequence[Loop]) -> set[str]:
    """The integer indices the loops count with: `i` of `for i in range(n)` and of
    `for i, x in enumerate(xs)`."""
    names: set[str] = set()
    for loop in loops:
        if not isinstance(loop, cst.For) or not isinstance(loop.iter, cst.Call):
            continue
        func = loop.iter.func
        if not isinstance(func, cst.Name):
            continue
        if func.value == "range" and isinstance(loop.target, cst.Name):
            names.add(loop.target.value)
        elif func.value == "enumerate" and isinstance(loop.target, cst.Tuple) and loop.target.elements:
            first = loop.target.elements[0].value
            if isinstance(first, cst.Name):
                names.add(first.value)
    return names


def value_captures(loop: Loop, callable_: cst.CSTNode, captured: set[str]) -> bool:
    """Whether `captured`, the variables of `loop` that `callable_` reads, are plain values
    (loop targets, assigned results), never called by it and not functions made in the loop,
    so that they could be passed as arguments instead."""
    called = {
        node.func.value
        for node in iter_subtree(callable_)
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name)
    }
    if captured & called:
        return False
    for node in iter_subtree(loop, into_scopes=False):
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)) and node.name.value in captured:
            return False
        if isinstance(node, cst.Assign) and isinstance(node.value, (cst.Lambda, cst.Call)):
            names = {n for t in node.targets for n in target_names(t.target)}
            if names & captured and (isinstance(node.value, cst.Lambda) or _is_partial_like(node.value)):
                return False
    return True


def closes_over_function_parameter(function: cst.FunctionDef, callable_: cst.CSTNode) -> bool:
    """Whether `callable_`, made in the body of `function`, reads a parameter of `function`
    that holds a function: one it calls, or one annotated `Callable` (`def normalize(f:
    Callable): @jax.jit def const(key): return moment(f, key)`). Each call of `function` then
    wraps a different function, a new configuration that compiles anyway, as a closure over a
    function made in a loop's iteration is (`value_captures`)."""
    reads = closure_reads(callable_)
    params = function.params
    every = [*params.posonly_params, *params.params, *params.kwonly_params]
    if isinstance(params.star_arg, cst.Param):
        every.append(params.star_arg)
    called = {
        node.func.value
        for node in iter_subtree(callable_)
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name)
    }
    for param in every:
        name = param.name.value
        if name not in reads:
            continue
        if name in called:
            return True
        annotation = param.annotation
        if annotation is not None and "Callable" in cst.Module([]).code_for_node(annotation.annotation):
            return True
    return False


def _is_partial_like(call: cst.Call) -> bool:
    func = call.func
    name = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", "")
    return name in ("partial", "jit", "vmap", "grad", "filter_jit", "pmap")
