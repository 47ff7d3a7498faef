"""Conditions that thin how often a statement runs within a loop.

A statement in a loop's body runs on every iteration unless something between the loop and
it holds on some iterations only. `thinning_guard` finds what does, for every rule:

- a **periodic** guard: an `if` (or a conditional expression) whose test takes a remainder
  (`if step % 100 == 0:`), or tests a name the loop sets to one (`should_eval = step % every
  == 0`, then `if should_eval:`): its body runs once per `every` iterations (`periodic`);
- a guard **paced by the clock** (`if time.time() - last > 60:` whose body sets `last`
  again, `_frequency.paced_by_clock`): its body runs once per interval of wall time;
- an **`except` handler**: it runs when something fails;
- a statement **after a skip** under a periodic guard (`if step % k != 0: continue`, then
  the statement): it runs on the iterations the skip lets through. A skip under a comparison
  of the counter (`if resuming and step < start: continue`) lets every later iteration
  through, and a `break` ends the loop: that bounds the count of iterations
  (`_frequency.stops_after`) and thins none of them;
- with `counter=True`, a **comparison of the loop's counter** (`if i == last:`, `if step >=
  warmup:`), in either branch: it holds on a stretch of iterations, which may be most of
  them. A rule that weighs a wait per iteration counts it (a copy made after warm-up only is
  not a copy of every step); a rule that weighs a compile or a per-call overhead, where most
  of the iterations are enough, does not.

Presence checks (`if key in acts:`, `if x is not None:`) and flags (`if verbose:`) hold on
every iteration or on none: they do not thin (`_frequency.off_by_default` reads flags that are
off unless asked for).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import libcst as cst

from ._frequency import paced_by_clock
from ._nodes import free_names, iter_subtree
from ._scope import target_names
from ._walk import iter_children

if TYPE_CHECKING:
    from ._context import FileContext

__all__ = ["counters", "counter_test", "has_modulo", "moduli", "periodic", "periodic_test", "thinning_guard"]

_SCOPES = (cst.FunctionDef, cst.Lambda, cst.ClassDef)
_ORDER = (cst.Equal, cst.NotEqual, cst.LessThan, cst.LessThanEqual, cst.GreaterThan, cst.GreaterThanEqual)


def thinning_guard(
    ctx: FileContext, path: Sequence[cst.CSTNode], loop: cst.CSTNode, *, counter: bool = False
) -> cst.CSTNode | None:
    """What makes the node at the end of `path` (its ancestors, then it) run on some
    iterations of `loop` only: the guarding `if` or conditional expression, the `except`
    handler, or the statement of the loop's body that skips the rest of the iteration before
    it (see the module docstring; `counter`: a comparison of the loop's counter counts too).
    None when it runs on every iteration, as far as the code shows."""
    start = next((i for i, n in enumerate(path) if n is loop), None)
    if start is None:
        return None
    for index, parent, child in _between(path, start):
        if isinstance(parent, cst.ExceptHandler):
            return parent
        if isinstance(parent, (cst.If, cst.IfExp)) and child is not parent.test:
            if child is parent.body and (periodic_test(parent.test, loop) or paced_by_clock(ctx, parent, path[:index])):
                return parent
            if counter and counter_test(parent.test, loop):
                return parent
    if any(isinstance(node, _SCOPES) for node in path[start + 1 : -1]):
        return None
    return _skip_before(path, start, loop)


def periodic(path: Sequence[cst.CSTNode], loop: cst.CSTNode) -> bool:
    """Whether the node whose ancestors are `path` runs only on some iterations of `loop`:
    under an `if` (between the loop and it) testing a remainder, `if step % every == 0:`, or
    a name the loop sets to one (`should_eval = step % every == 0`; `if should_eval:`).
    `loop` may be a function: then it is the function's body that runs only on some of its
    calls, once per `every` steps of a counter it is handed or keeps."""
    start = next((i for i, n in enumerate(path) if n is loop), None)
    return start is not None and any(
        isinstance(node, cst.If) and child is node.body and periodic_test(node.test, loop) for _, node, child in _between(path, start)
    )


def _between(path: Sequence[cst.CSTNode], start: int) -> Iterator[tuple[int, cst.CSTNode, cst.CSTNode]]:
    """(index, node, child) for each node on `path` after `path[start]` (a loop) and before
    its end, down to the first def, lambda or class: code in one runs when it is called, not
    when the loop runs."""
    for index in range(start + 1, len(path) - 1):
        if isinstance(path[index], _SCOPES):
            return
        yield index, path[index], path[index + 1]


def has_modulo(expr: cst.CSTNode) -> bool:
    """`step % every == 0` and the like (not `"%d" % n` string formatting)."""
    return bool(moduli(expr))


def moduli(expr: cst.CSTNode) -> list[cst.BinaryOperation]:
    """The `a % b` operations in `expr` (not `"%d" % n` string formatting), outermost first."""
    found: list[cst.BinaryOperation] = []
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Modulo):
            if isinstance(node.left, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
                continue  # `"%d" % n`
            found.append(node)
        stack.extend(iter_children(node))
    return found


def counter_test(test: cst.BaseExpression, loop: cst.CSTNode) -> bool:
    """A test that holds on some iterations of `loop` only: periodic (`step % 100 == 0`) or
    an order comparison of the loop's counter (`if i == last:`, `if step >= warmup:`)."""
    if has_modulo(test):
        return True
    steps = counters(loop)
    return any(
        isinstance(node, cst.Comparison)
        and free_names(node) & steps
        and all(isinstance(c.operator, _ORDER) for c in node.comparisons)
        for node in iter_subtree(test)
    )


def counters(loop: cst.CSTNode) -> set[str]:
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
    for node in iter_subtree(body, into_scopes=False):
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


def periodic_test(test: cst.BaseExpression, loop: cst.CSTNode) -> bool:
    """`step % every == 0`, or `should_eval` that `loop` sets to such a test."""
    return has_modulo(test) or _names_a_modulo(test, loop)


def _skip_before(path: Sequence[cst.CSTNode], start: int, loop: cst.CSTNode) -> cst.CSTNode | None:
    """The statement of `loop`'s body, before the one on `path`, that skips the rest of the
    iteration on some iterations (`if step % k != 0: continue`)."""
    block = getattr(loop, "body", None)
    if not isinstance(block, cst.IndentedBlock) or len(path) <= start + 2 or path[start + 1] is not block:
        return None
    top = path[start + 2]
    for statement in block.body:
        if statement is top:
            return None
        if isinstance(statement, cst.If) and periodic_test(statement.test, loop):
            # `continue` skips the iteration; a `break` or `return` ends the loop, which bounds
            # how many iterations run (`_frequency.stops_after`), not which of them do
            if any(isinstance(n, cst.Continue) for n in iter_subtree(statement, into_scopes=False)):
                return statement
    return None


def _names_a_modulo(test: cst.BaseExpression, loop: cst.CSTNode) -> bool:
    """`if should_eval:` where the loop sets `should_eval = step % every == 0 or ...`."""
    names = {n.value for n in _walk_names(test)}
    if not names:
        return False
    stack: list[cst.CSTNode] = [loop.body] if isinstance(loop, (cst.For, cst.While, cst.FunctionDef)) else []
    while stack:
        node = stack.pop()
        if isinstance(node, _SCOPES):
            continue
        if isinstance(node, cst.Assign) and any(
            isinstance(t.target, cst.Name) and t.target.value in names for t in node.targets
        ):
            if has_modulo(node.value):
                return True
        stack.extend(iter_children(node))
    return False


def _walk_names(expr: cst.CSTNode) -> list[cst.Name]:
    """The bare names a guard tests (`should_eval`, `not done`, `a and b`)."""
    if isinstance(expr, cst.Name):
        return [expr]
    if isinstance(expr, cst.UnaryOperation):
        return _walk_names(expr.expression)
    if isinstance(expr, cst.BooleanOperation):
        return _walk_names(expr.left) + _walk_names(expr.right)
    return []
