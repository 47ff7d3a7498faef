"""What shapes flow into jitted calls inside loops: shared by pad-final-batch and growing-shape-loop."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import libcst as cst

from jaxlint._callgraph import passed_argument, positional_params
from jaxlint._guards import counters
from jaxlint._nodes import free_names, iter_subtree
from jaxlint._scope import target_names
from jaxlint._streams import mentions_padding


if TYPE_CHECKING:
    from jaxlint._context import FileContext, Loop


__all__ = [
    "counter_derived", "growth", "loop_path", "mentions_padding", "passed_whole", "varying_slice",
    "whole_parts",
]  # fmt: skip

# Calls that give back their argument's data with its leading shape unchanged.
_CONSTRUCTORS = frozenset(
    {"jax.numpy.asarray", "jax.numpy.array", "numpy.asarray", "numpy.array", "jax.device_put",
     "numpy.ascontiguousarray"}
)  # fmt: skip
_SHAPE_KEEPING_METHODS = frozenset({"astype", "reshape", "squeeze", "copy", "block_until_ready"})
# array functions (numpy or jax.numpy) that return their first argument made longer
_GROWING_FUNCTIONS = frozenset(
    {"concatenate", "append", "hstack", "vstack", "column_stack", "row_stack", "dstack", "concat"}
)
_ARRAY_MODULES = ("numpy.", "jax.numpy.")
# array functions whose result's leading axis is made of their first argument's items
_JOINING_FUNCTIONS = _GROWING_FUNCTIONS | {"stack", "array", "asarray"}
_LIST_GROWING_METHODS = frozenset({"append", "extend", "insert"})


def whole_parts(value: cst.BaseExpression, ctx: FileContext) -> Iterator[cst.BaseExpression]:
    """The names and subscripts an argument passes on with their shape: `x`, the items of
    `(x, y)` / `{"x": x}`, `jnp.asarray(x)`, `x[None]`, `x.astype(...)`; not `x[-1:]` or
    `x.sum()`, whose shapes do not follow `x`'s."""
    stack = [value]
    while stack:
        expr = stack.pop()
        if isinstance(expr, (cst.Name, cst.Subscript)) and not _adds_axes(expr):
            yield expr
        elif isinstance(expr, cst.Subscript):
            stack.append(expr.value)
        elif isinstance(expr, (cst.Tuple, cst.List)):
            stack.extend(e.value for e in expr.elements)
        elif isinstance(expr, cst.Dict):
            stack.extend(e.value for e in expr.elements if isinstance(e, (cst.DictElement, cst.StarredDictElement)))
        elif isinstance(expr, cst.Attribute) and expr.attr.value == "T":
            stack.append(expr.value)
        elif isinstance(expr, cst.Call) and expr.args:
            func = expr.func
            if isinstance(func, cst.Attribute) and func.attr.value in _SHAPE_KEEPING_METHODS:
                stack.append(func.value)
            elif isinstance(func, cst.Name) and func.value == "dict":
                stack.extend(a.value for a in expr.args)
            elif ctx.resolve(func, anchor=expr) in _CONSTRUCTORS:
                stack.append(expr.args[0].value)


def passed_whole(value: cst.BaseExpression, ctx: FileContext) -> list[str]:
    """Names among `whole_parts(value)`."""
    return [p.value for p in whole_parts(value, ctx) if isinstance(p, cst.Name)]


def _adds_axes(expr: cst.BaseExpression) -> bool:
    """`x[None]`, `x[None, :]`, `x[..., None]`: the shape still follows `x`."""
    if not isinstance(expr, cst.Subscript):
        return False
    for element in expr.slice:
        part = element.slice
        if isinstance(part, cst.Index):
            if not (isinstance(part.value, cst.Name) and part.value.value == "None") and not isinstance(part.value, cst.Ellipsis):
                return False
        elif isinstance(part, cst.Slice):
            if part.lower is not None or part.upper is not None or part.step is not None:
                return False
    return True


def counter_derived(loop: Loop) -> set[str]:
    """`counters(loop)` and the names the body computes from them (`end = min(i + bs, n)`)."""
    names = counters(loop)
    body = loop.body if isinstance(loop, (cst.For, cst.While)) else loop
    assigns = [n for n in iter_subtree(body, into_scopes=False) if isinstance(n, cst.Assign)]
    for _ in range(3):
        for node in assigns:
            if free_names(node.value) & names:
                names |= {n for t in node.targets for n in target_names(t.target)}
    return names


def varying_slice(expr: cst.BaseExpression, loop: Loop) -> cst.Subscript | None:
    """`expr` itself when it is a slice whose length follows the loop's counter: one bound
    reads a counter (`ids[:, :i]`, `x[: pos + 1]`, `x[t:]`), the other does not."""
    if not isinstance(expr, cst.Subscript):
        return None
    steps = counter_derived(loop)
    if not steps:
        return None
    for element in expr.slice:
        part = element.slice
        if not isinstance(part, cst.Slice) or part.step is not None:
            continue
        lower = free_names(part.lower) & steps if part.lower is not None else set()
        upper = free_names(part.upper) & steps if part.upper is not None else set()
        if bool(lower) != bool(upper):
            return expr
    return None


def loop_path(ctx: FileContext, loop: cst.CSTNode) -> list[cst.CSTNode]:
    """The ancestors of `loop`, which encloses the node being visited."""
    return ctx.ancestors_of(loop)


def growth(
    ctx: FileContext, value: cst.BaseExpression, loop: Loop, ancestors: list[cst.CSTNode], *, windows: bool = True
) -> tuple[str, str] | None:
    """(what grows, how) when the argument `value`, passed inside `loop` (whose ancestors are
    `ancestors`), has a shape that changes from one iteration to the next: a slice that follows
    the loop's counter (`ids[:, :i]`), a name the loop makes longer each time
    (`tokens = jnp.concatenate([tokens, nxt], axis=1)`, `ids.append(t)`), or a name the body
    takes from one of those (`window = tokens[:, -max_len:]`), or an array joined from one
    (`jnp.concatenate([observed, jnp.array(predictions)])`). A jitted function given it
    compiles once per new shape. `windows=False`: a window taken from a growing name
    (`tokens[:, -max_len:]`), which stops growing at its bound, does not count."""
    for part in whole_parts(value, ctx):
        sliced = varying_slice(part, loop)
        if sliced is not None:
            return ctx.module.code_for_node(sliced), "changes length with the loop index"
        if isinstance(part, cst.Name):
            found = _growing_name(ctx, part.value, loop, ancestors, windows)
            if found is not None:
                return found
    for joined in _joined_names(ctx, value, ancestors):
        found = _growing_name(ctx, joined, loop, ancestors, windows)
        if found is not None:
            return found
    return None


def _growing_name(
    ctx: FileContext, passed: str, loop: Loop, ancestors: list[cst.CSTNode], windows: bool = True
) -> tuple[str, str] | None:
    """(`passed`, how) when the loop makes the name `passed` longer, or a carried name the body
    takes it from (`windows`: by a slice too)."""
    for name in (passed, *_taken_from(ctx, passed, loop, ancestors, windows)):
        if not _carried_over(name, loop):
            continue
        how = _grows(ctx, name, loop, ancestors)
        if how is not None and not mentions_padding(loop, name):
            return (passed, how) if name == passed else (passed, f"is taken from `{name}`, which {how.removeprefix('is ')}")
    return None


def _taken_from(ctx: FileContext, name: str, loop: Loop, path: list[cst.CSTNode], windows: bool = True) -> list[str]:
    """The carried names the loop body assigns `name` from, keeping their shape or a slice of
    it (`window = tokens[:, -max_len:]`, only with `windows`; `x = jnp.asarray(tokens)`), or
    joining them to something (`context = jnp.concatenate([prompt, jnp.stack(predictions)])`)."""
    sources = []
    for node in iter_subtree(loop.body, into_scopes=False):
        if isinstance(node, cst.Assign) and any(isinstance(t.target, cst.Name) and t.target.value == name for t in node.targets):
            value = node.value
            if not windows and isinstance(value, cst.Subscript):
                continue
            base = value
            while isinstance(base, cst.Subscript):
                base = base.value
            if isinstance(base, cst.Name) and base.value != name:
                sources.append(base.value)
            sources.extend(n for n in _joined_names(ctx, value, path) if n != name)
    return sources


def _joined_names(ctx: FileContext, value: cst.BaseExpression, path: list[cst.CSTNode]) -> list[str]:
    """The names whose items make up the leading axis of an array built by joining or
    stacking (`jnp.concatenate([prompt, jnp.array(predictions)])`: `prompt`, `predictions`)."""
    names: list[str] = []
    stack = [value]
    while stack:
        expr = stack.pop()
        if isinstance(expr, cst.Name):
            names.append(expr.value)
        elif isinstance(expr, (cst.List, cst.Tuple)):
            stack.extend(e.value for e in expr.elements)
        elif isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
            stack.extend((expr.left, expr.right))  # `[context] + outputs`
        elif isinstance(expr, cst.Call) and expr.args and expr.args[0].keyword is None:
            qualified = ctx.resolve(expr.func, path, anchor=expr) or ""
            if qualified.startswith(_ARRAY_MODULES) and qualified.rsplit(".", 1)[-1] in _JOINING_FUNCTIONS:
                stack.append(expr.args[0].value)
    return names


def _grows(ctx: FileContext, name: str, loop: Loop, path: list[cst.CSTNode]) -> str | None:
    """How the loop makes `name` longer, if it does."""
    for node in iter_subtree(loop.body, into_scopes=False):
        if isinstance(node, cst.Assign) and any(name in target_names(t.target) for t in node.targets):
            how = _growing_value(ctx, node.value, name, path) or _returned_growth(ctx, node, name)
            if how is not None:
                return how
            if isinstance(node.value, cst.Subscript) and varying_slice(node.value, loop):
                return "changes length with the loop index"
        elif isinstance(node, cst.AugAssign) and isinstance(node.target, cst.Name) and node.target.value == name:
            if isinstance(node.operator, cst.AddAssign) and isinstance(node.value, (cst.List, cst.Tuple)):
                return "gains items on every iteration"
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            if (
                node.func.attr.value in _LIST_GROWING_METHODS
                and isinstance(node.func.value, cst.Name)
                and node.func.value.value == name
            ):
                return f"gains an item on every iteration (`{name}.{node.func.attr.value}`)"
    return None


def _growing_value(ctx: FileContext, value: cst.BaseExpression, name: str, path: list[cst.CSTNode]) -> str | None:
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Add):
        if isinstance(value.left, cst.Name) and value.left.value == name and isinstance(value.right, (cst.List, cst.Tuple)):
            return "gains items on every iteration"
        return None
    if not isinstance(value, cst.Call) or not value.args:
        return None
    qualified = ctx.resolve(value.func, path, anchor=value)
    if qualified is None or not qualified.startswith(_ARRAY_MODULES):
        return None
    function = qualified.rsplit(".", 1)[-1]
    if function not in _GROWING_FUNCTIONS:
        return None
    first = value.args[0].value
    if function == "append":
        grows = isinstance(first, cst.Name) and first.value == name
    else:
        grows = isinstance(first, (cst.List, cst.Tuple)) and any(
            isinstance(e, cst.Element) and isinstance(e.value, cst.Name) and e.value.value == name
            for e in first.elements
        )
    prefix = "jnp" if qualified.startswith("jax.") else "np"
    return f"grows by `{prefix}.{function}` on every iteration" if grows else None


def _returned_growth(ctx: FileContext, assign: cst.Assign, name: str) -> str | None:
    """How a function of this file makes `name` longer when the loop rebinds it to what the
    function returns for it (`x, key = sample_step(x, key)`, where every `return` of
    `sample_step` gives back its `x` grown by `jnp.concatenate`)."""
    call = assign.value
    if len(assign.targets) != 1 or not isinstance(call, cst.Call) or not isinstance(call.func, cst.Name):
        return None
    target = assign.targets[0].target
    if isinstance(target, cst.Name):
        index = None
    elif isinstance(target, (cst.Tuple, cst.List)) and not any(isinstance(e, cst.StarredElement) for e in target.elements):
        index = next((i for i, e in enumerate(target.elements) if isinstance(e.value, cst.Name) and e.value.value == name), None)
        if index is None:
            return None
    else:
        return None
    function = ctx.calls.functions.get(call.func.value)
    if function is None:
        return None
    node = function.node
    params = positional_params(node)
    param = next((p for p in params if _names(passed_argument(call, p, params), name)), None)
    if param is None:
        return None
    path = [*function.path, node, node.body]
    returns = [n for n in iter_subtree(node.body, into_scopes=False) if isinstance(n, cst.Return)]
    if not returns:
        return None
    for statement in returns:
        value = statement.value
        if index is not None:
            if not isinstance(value, cst.Tuple) or len(value.elements) <= index:
                return None
            value = value.elements[index].value
        if value is None or not _grown_in(ctx, node, value, param, path):
            return None
    return f"is returned longer by `{node.name.value}` on every iteration"


def _grown_in(ctx: FileContext, function: cst.FunctionDef, value: cst.BaseExpression, param: str, path: list[cst.CSTNode]) -> bool:
    """Whether `value`, returned by `function`, is its parameter `param` made longer: joined
    right there, or a name the body assigns the joined array to."""
    if _growing_value(ctx, value, param, path) is not None:
        return True
    if not isinstance(value, cst.Name):
        return False
    assigned = [
        n.value
        for n in iter_subtree(function.body, into_scopes=False)
        if isinstance(n, cst.Assign) and any(value.value in target_names(t.target) for t in n.targets)
    ]
    return bool(assigned) and all(_growing_value(ctx, v, param, path) is not None for v in assigned)


def _names(expr: cst.BaseExpression | None, name: str) -> bool:
    return isinstance(expr, cst.Name) and expr.value == name


def _carried_over(name: str, loop: Loop) -> bool:
    """Whether `name` keeps its value from one iteration to the next: it is not the loop's
    target, and the body never assigns it anything but a value computed from itself."""
    if isinstance(loop, cst.For) and name in target_names(loop.target):
        return False
    for node in iter_subtree(loop.body, into_scopes=False):
        if isinstance(node, cst.Assign) and any(name in target_names(t.target) for t in node.targets):
            if name not in free_names(node.value):
                return False
        elif isinstance(node, (cst.For, cst.CompFor)) and name in target_names(node.target):
            return False
    return True
