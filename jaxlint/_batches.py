"""Which functions of a module give batches whose last one can be smaller (read with `ast`,
for the project summaries; the pad-final-batch rule reads the file it lints with libcst).

A function of another module gives such batches when it returns a data loader that keeps its
smaller last batch (`return DataLoader(ds, batch_size=bs)` without `drop_last=True`, as the
library table's `data-loaders` say), a dataset batched without dropping it
(`return ds.shuffle(n).batch(bs)`, `tf.data` and grain: `dataset-modules`), or when it is a
generator yielding the slices `x[i:min(i + bs, n)]` of a `for i in range(0, n, bs)` loop (an end
clamped to the data: with a plain `x[i:i + bs]` the code does not say whether the last batch is
smaller, `_ragged.Batching.guessed`). The summary
records those as `=ragged` where it records other loaders and datasets as `=stream`: a loop
over what they give runs over data either way, and pad-final-batch reports a jitted function
fed from it.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Mapping

from . import _jaxapi


__all__ = ["KEEPS_BATCHES", "loader_keeps_last", "pipeline_keeps_last", "yields_ragged_slices"]

# Dataset methods that keep a batched stream's batches (their number may change, not their size).
KEEPS_BATCHES = frozenset(
    {"map", "shuffle", "prefetch", "cache", "filter", "as_numpy_iterator", "with_options",
     "ignore_errors", "apply_options", "to_iter_dataset", "mp_prefetch"}
)  # fmt: skip


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _false(value: ast.expr | None) -> bool:
    return value is None or (isinstance(value, ast.Constant) and value.value is False)


def _one(value: ast.expr | None) -> bool:
    """No batch size, or one that batches nothing: `None`, `1`."""
    return value is None or (isinstance(value, ast.Constant) and value.value in (None, 1))


def loader_keeps_last(call: ast.Call, loader: str) -> bool:
    """Whether the data loader call `call` (of the library's `loader`) keeps a smaller last
    batch: a batch size other than 1, no `batch_sampler`, its drop keyword absent or `False`,
    and no starred argument (which may pass either)."""
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return False
    if _keyword(call, "batch_sampler") is not None:
        return False
    position = _jaxapi.LOADER_BATCH_SIZE_POSITIONS.get(loader, 1)
    size = call.args[position] if len(call.args) > position else _keyword(call, "batch_size")
    return not _one(size) and _false(_keyword(call, _jaxapi.DATA_LOADERS[loader]))


def pipeline_keeps_last(
    expr: ast.expr, resolve: Callable[[ast.expr], str | None], value_of: Callable[[ast.Name], ast.expr | None]
) -> bool:
    """Whether `expr` is a dataset (of the library's `dataset-modules`) batched with
    `.batch(bs)` / `.padded_batch(bs, ...)` without `drop_remainder`, not `.repeat()`ed
    before, and only kept batched after (`KEEPS_BATCHES`). `value_of(name)` is what a name in
    the chain was last assigned (`ds = ds.batch(bs); return ds`), or None."""
    methods: list[tuple[str, ast.Call]] = []
    node: ast.expr | None = expr
    for _ in range(40):
        if isinstance(node, ast.Name):
            node = value_of(node)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and resolve(node.func) is None:
            methods.append((node.func.attr, node))
            node = node.func.value
        else:
            break
    if not isinstance(node, ast.Call):
        return False
    root = resolve(node.func)
    if root is None or not root.startswith(_jaxapi.DATASET_MODULES):
        return False
    ragged = infinite = False
    for method, call in reversed(methods):
        if method in ("batch", "padded_batch"):
            if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
                return False
            index = 1 if method == "batch" else 3
            drop = call.args[index] if len(call.args) > index else _keyword(call, "drop_remainder")
            size = call.args[0] if call.args else _keyword(call, "batch_size")
            if not _false(drop) or _one(size) or infinite:
                continue
            ragged = True
        elif method == "repeat":
            count = call.args[0] if call.args else _keyword(call, "count")
            if not (isinstance(count, ast.Constant) and isinstance(count.value, int) and count.value > 0):
                infinite = infinite or not ragged
        elif method == "unbatch":
            ragged = False
        elif ragged and method not in KEEPS_BATCHES:
            return False
    return ragged


def yields_ragged_slices(function: ast.FunctionDef | ast.AsyncFunctionDef, nodes: Iterable[ast.AST]) -> bool:
    """Whether the generator `function` (its own `nodes`) yields, in a `for i in range(start,
    n, bs)` loop whose stop does not drop the remainder (`n - bs + 1`, `n // bs * bs`), a
    slice `x[i:min(i + bs, n)]` (also through names the loop assigns: `end = min(i + bs, n);
    idx = perm[i:end]; yield x[idx]`); not when it mentions padding or masking."""
    for loop, index, step, local, ragged in _ragged_loops(function, nodes):
        for node in _loop_nodes(loop):
            if isinstance(node, (ast.Yield, ast.YieldFrom)) and node.value is not None:
                if _has_slice(node.value, index, step, local) or any(
                    isinstance(n, ast.Name) and n.id in ragged for n in ast.walk(node.value)
                ):
                    return True
    return False


def appends_ragged_slices(function: ast.FunctionDef | ast.AsyncFunctionDef, nodes: Iterable[ast.AST]) -> set[str]:
    """The lists `function` (its own `nodes`) fills with one ragged batch a pass of such a
    loop: `batches.append(x[i:min(i + bs, n)])`, or a value computed from the loop's slices
    (`idx = perm[i:min(i + bs, n)]; batch = tuple(a[idx] for a in arrays); batches.append(batch)`).
    Returned, such a list holds batches whose last one is smaller."""
    found: set[str] = set()
    for loop, index, step, local, ragged in _ragged_loops(function, nodes):
        # Names computed from the loop's ragged names, through the loop's assignments.
        for _ in range(3):
            for name, value in local.items():
                if name not in ragged and any(isinstance(n, ast.Name) and n.id in ragged for n in ast.walk(value)):
                    ragged.add(name)
        for node in _loop_nodes(loop):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "append"
                and isinstance(node.func.value, ast.Name)
                and len(node.args) == 1
                and not node.keywords
            ):
                value = node.args[0]
                if _has_slice(value, index, step, local) or any(
                    isinstance(n, ast.Name) and n.id in ragged for n in ast.walk(value)
                ):
                    found.add(node.func.value.id)
    return found


def _ragged_loops(
    function: ast.FunctionDef | ast.AsyncFunctionDef, nodes: Iterable[ast.AST]
) -> Iterable[tuple[ast.For, str, str, dict[str, ast.expr], set[str]]]:
    """The `for i in range(start, n, bs)` loops of `function` that keep the remainder, with the
    loop's index, its step (dumped), the names its body assigns, and those holding a slice
    `x[i:i + bs]`; none when the function mentions padding or masking."""
    if any(isinstance(n, ast.Name) and _pads(n.id) for n in ast.walk(function)) or _pads(function.name):
        return
    for loop in nodes:
        if not (
            isinstance(loop, ast.For)
            and isinstance(loop.target, ast.Name)
            and isinstance(loop.iter, ast.Call)
            and isinstance(loop.iter.func, ast.Name)
            and loop.iter.func.id == "range"
            and len(loop.iter.args) == 3
            and not loop.iter.keywords
        ):
            continue
        index, stop, step = loop.target.id, loop.iter.args[1], ast.dump(loop.iter.args[2])
        if any(
            isinstance(n, ast.BinOp)
            and isinstance(n.op, (ast.Sub, ast.FloorDiv, ast.Mod))
            and ast.dump(n.right) == step
            for n in ast.walk(stop)
        ):
            continue
        local: dict[str, ast.expr] = {}
        for node in _loop_nodes(loop):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                local[node.targets[0].id] = node.value
        ragged = {name for name, value in local.items() if _has_slice(value, index, step, local)}
        yield loop, index, step, local, ragged


def _pads(name: str) -> bool:
    lowered = name.lower()
    return "pad" in lowered or "mask" in lowered


def _loop_nodes(loop: ast.For) -> Iterable[ast.AST]:
    """The nodes of a loop's body, not inside nested functions, classes or lambdas."""
    stack: list[ast.AST] = list(loop.body)
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))


def _has_slice(expr: ast.expr, index: str, step: str, local: Mapping[str, ast.expr]) -> bool:
    """Whether `expr` holds a slice from the loop's index to `min(index + step, n)`: an end
    clamped to the data, so the author expects a smaller last batch. With a plain `index +
    step` end, whether the last batch is smaller depends on a length the code does not show
    (`_ragged.Batching.guessed`), which pad-final-batch reports only in preview; the summary
    does not record it as ragged."""
    for node in ast.walk(expr):
        if isinstance(node, ast.Slice) and node.step is None and node.lower is not None and node.upper is not None:
            lower, upper = _local(node.lower, local), _local(node.upper, local)
            if (
                isinstance(lower, ast.Name)
                and lower.id == index
                and isinstance(upper, ast.Call)
                and isinstance(upper.func, ast.Name)
                and upper.func.id == "min"
                and _end(upper, index, step, local)
            ):
                return True
    return False


def _local(expr: ast.expr, local: Mapping[str, ast.expr]) -> ast.expr:
    return local.get(expr.id, expr) if isinstance(expr, ast.Name) else expr


def _end(expr: ast.expr, index: str, step: str, local: Mapping[str, ast.expr]) -> bool:
    """`i + bs`, `bs + i`, `min(i + bs, n)` (or a name the loop set to one)."""
    expr = _local(expr, local)
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "min":
        return any(_end(a, index, step, local) for a in expr.args)
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
        sides = (expr.left, expr.right)
        return any(
            isinstance(a, ast.Name) and a.id == index and ast.dump(b) == step for a, b in (sides, sides[::-1])
        )
    return False
