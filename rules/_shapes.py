"""What shapes flow into jitted calls inside loops: shared by pad-final-batch and growing-shape-loop."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import libcst as cst

from jaxlint._nodes import free_names, iter_subtree
from jaxlint._scope import target_names


if TYPE_CHECKING:
    from jaxlint._context import FileContext, Loop


__all__ = ["loop_path", "counter_derived", "counters", "mentions_padding", "passed_whole", "varying_slice", "whole_parts"]

# Calls that give back their argument's data with its leading shape unchanged.
_CONSTRUCTORS = frozenset(
    {"jax.numpy.asarray", "jax.numpy.array", "numpy.asarray", "numpy.array", "jax.device_put",
     "numpy.ascontiguousarray"}
)  # fmt: skip
_SHAPE_KEEPING_METHODS = frozenset({"astype", "reshape", "squeeze", "copy", "block_until_ready"})
_PADDING_HINTS = ("pad", "bucket", "mask")


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


def counters(loop: Loop) -> set[str]:
    """Names that step through the loop: the target of `for i in range(...)` /
    `enumerate(...)` / `trange(...)`, and names the body increments (`pos += 1`)."""
    names: set[str] = set()
    if isinstance(loop, cst.For):
        source = loop.iter
        if isinstance(source, cst.Call) and isinstance(source.func, (cst.Name, cst.Attribute)):
            func = source.func.value if isinstance(source.func, cst.Name) else source.func.attr.value
            if func in ("range", "trange"):
                names |= set(target_names(loop.target))
            elif func == "enumerate" and isinstance(loop.target, cst.Tuple) and loop.target.elements:
                names |= set(target_names(loop.target.elements[0].value))
            elif func in ("tqdm", "zip") and source.args:
                inner = source.args[0].value
                if isinstance(inner, cst.Call) and isinstance(inner.func, cst.Name) and inner.func.value == "range":
                    first = loop.target.elements[0].value if isinstance(loop.target, cst.Tuple) and func == "zip" else loop.target
                    names |= set(target_names(first))
    body = loop.body if isinstance(loop, (cst.For, cst.While)) else loop
    nodes = list(iter_subtree(body, into_scopes=False))
    for node in nodes:
        if isinstance(node, cst.AugAssign) and isinstance(node.operator, (cst.AddAssign, cst.SubtractAssign)):
            if isinstance(node.target, cst.Name):
                names.add(node.target.value)
        elif isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
            name = node.targets[0].target.value
            value = node.value
            if (
                isinstance(value, cst.BinaryOperation)
                and isinstance(value.operator, (cst.Add, cst.Subtract))
                and isinstance(value.left, cst.Name)
                and value.left.value == name
            ):
                names.add(name)
    return names


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


def mentions_padding(loop: Loop, name: str | None = None) -> bool:
    """Whether the loop pads or masks (a call, name or attribute spelled with `pad`, `bucket`
    or `mask`), optionally only calls given `name`."""
    body = loop.body if isinstance(loop, (cst.For, cst.While)) else loop
    for node in iter_subtree(body, into_scopes=False):
        if isinstance(node, cst.Call):
            func = node.func
            last = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
            if any(hint in last.lower() for hint in _PADDING_HINTS[:2]):
                if name is None or any(name in free_names(a.value) for a in node.args):
                    return True
        elif name is None and isinstance(node, cst.Name) and any(h in node.value.lower() for h in _PADDING_HINTS):
            return True
    return False


def loop_path(ctx: FileContext, loop: cst.CSTNode) -> list[cst.CSTNode]:
    """The ancestors of `loop`, which encloses the node being visited."""
    for index, node in enumerate(ctx.ancestors):
        if node is loop:
            return list(ctx.ancestors[:index])
    raise ValueError("the loop does not enclose the visited node")
