"""Which loops of a file feed on batches whose last one can be smaller (read with libcst, for
the rule that lints the file: pad-final-batch). `_streams` says what a pipeline or loader a
loop iterates yields; `_batches` reads the same facts with `ast` for the project summaries.

`ctx.batches.batching(loop)`, asked while a node inside `loop` is visited (as `ctx.loops`
is), says how the loop's batches are cut when the last one can be smaller (a `Batching`),
or None:

- slices over a `range`: `x[i:i + bs]` over `range(0, n, bs)` (tqdm's `trange` and
  `tqdm(range(...))` unwrapped), `x[b * bs:(b + 1) * bs]` over a count rounded up
  (`ceil(n / bs)`, `(n + bs - 1) // bs`, `n // bs + 1`, `full + bool(rest)` with `full, rest
  = divmod(n, bs)`), following the names the loop body and its function (or the functions
  around it) assign; not when the stop drops the remainder (`n - bs + 1`, `n // bs * bs`,
  `min(n - bs, cap)`) or the step is at most 1; `Batching.guessed` when the code does not
  show that the last batch is smaller (a plain `x[i:i + bs]` end over a length it does not
  know; not `x[i:min(i + bs, n)]`, nor known sizes that leave a remainder);
- the chunks of `np.array_split(x, k)` and of `np.split(x, range(bs, n, bs))` (guessed);
- a list or generator expression of such slices, in the header or assigned to the name it
  iterates; a generator of the file (or a class's `__iter__`, or a method of a class of the
  file, inherited too) that yields them, or a function that returns a list of them;
- a pipeline, loader or chunker that keeps a smaller last batch (`_streams`), iterated or
  drawn with `next(it)` from an iterator made before the loop (one made in the loop gives
  its first, full batch every time; a Hugging Face `.iter()` drawn a counted number of
  times may never reach its last batch), and a generator of the file drawn the same way;

and None when the loop pads or masks (`_streams.mentions_padding`), tops a short batch up
to full size itself (`chunk = np.concatenate([chunk, filler])`: `_fills_up`), skips short batches
(`if len(x) < bs: continue`), or its function checks that the step divides the data
(`assert n % bs == 0`). `Batching.names` are the names holding a batch, the loop's target
and the names its body derives from one (`xb = jnp.asarray(batch)`; not a state updated
with it, nor a slice of one cut again along its first axis by a loop nested inside);
`Batching.feeds(expr)` whether an expression holds one. The answers are kept per
loop for the file: every call site in the loop asks once.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import libcst as cst

from . import _jaxapi
from ._frequency import integer_value, items_count, leading_dimension
from ._nodes import free_names, iter_subtree, one_line, shorten
from ._scope import parameter_names, target_names
from ._streams import Stream, Streams, mentions_padding

if TYPE_CHECKING:
    from ._context import FileContext, Loop


__all__ = ["BatchIndex", "Batching", "assigned_in", "returned_names"]

_CEILS = frozenset({"math.ceil", "numpy.ceil", "jax.numpy.ceil"})
_SPLITS = frozenset({"numpy.array_split", "jax.numpy.array_split"})
# Splits at given indices (`np.split(x, range(bs, n, bs))`): the part after the last is smaller.
_INDEX_SPLITS = frozenset({"numpy.split", "jax.numpy.split", "numpy.array_split", "jax.numpy.array_split"})
_RANGES = frozenset({"numpy.arange", "jax.numpy.arange"})
# Array functions (of `_ARRAY_MODULES`) that return their first argument with rows joined
# after it: a batch bound to one of itself is topped up (`_fills_up`).
_ARRAY_MODULES = ("numpy.", "jax.numpy.")
_GROWING = frozenset({"concatenate", "append", "vstack", "row_stack", "concat"})


@dataclass
class Batching:
    """How a loop cuts batches whose last one can be smaller (`kind`: "range" for slices
    over `range(0, n, bs)`, the only kind the rule's padding fix rewrites; "count" over a
    count rounded up; "split", "generator" and "dataset" for what the loop iterates)."""

    kind: str  # "range", "count", "split", "generator", "dataset"
    cut: str  # how the batches are cut, for the message
    why: str  # when the last one is smaller
    slices: list[cst.Subscript] = field(default_factory=list)  # the ragged slices in the loop
    names: set[str] = field(default_factory=set)  # names holding a batch
    draws: list[cst.Call] = field(default_factory=list)  # `next(it)` calls giving a batch
    step: cst.BaseExpression | None = None  # the batch size, when the code spells it
    drop: tuple[cst.Call, str] | None = None  # a shuffled stream's batching call and its drop keyword
    inner: set[str] = field(default_factory=set)  # targets of the loops nested in the loop
    # The last batch is smaller only if the array's length is not a multiple of the step, and
    # nothing in the code says which (`guessed`): see `BatchIndex._range_batching`.
    guessed: bool = False

    def feeds(self, expr: cst.BaseExpression) -> bool:
        """Whether `expr` holds one of the batches: reads a name holding one, or is built
        from one of the ragged slices or `next(it)` draws; not a slice of one cut again along
        its first axis by a loop nested inside (`chunk[j * bs:(j + 1) * bs]` for `j` of an
        inner loop: that loop's cut decides the shape, and is read as a batching of its own)."""
        if _recut(expr, self.inner):
            return False
        if free_names(expr) & self.names:
            return True
        ids = {id(s) for s in self.slices} | {id(d) for d in self.draws}
        return any(id(n) in ids for n in iter_subtree(expr))


class BatchIndex:
    """Which loops of one file cut batches whose last one can be smaller (`ctx.batches`)."""

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.streams = Streams(ctx)
        self._batchings: dict[int, Batching | None] = {}
        self._scopes: dict[int, cst.CSTNode] = {}
        self._paths: dict[int, list[cst.CSTNode]] = {}  # a generator's loop: its scope's path
        self._loops: list[cst.For] = []  # the loops comprehensions stand for (kept alive: keyed by id)

    def batching(self, loop: Loop) -> Batching | None:
        """How `loop`, which encloses the node being visited, cuts batches whose last one can
        be smaller; None when it does not, or pads, skips short batches or checks that the
        batch size divides the data. Kept per loop: every site in the loop asks once."""
        key = id(loop)
        if key not in self._batchings:
            found = self._find_batching(loop)
            if found is not None and (
                mentions_padding(loop) or _skips_short(loop) or self._checks_divisibility(loop, found.step)
            ):
                found = None
            if found is not None:
                _derive_names(loop, found)
                if self._fills_up(loop, found):
                    found = None
            self._batchings[key] = found
        return self._batchings[key]

    def _fills_up(self, loop: Loop, batching: Batching) -> bool:
        """Whether the loop body makes a batch longer by joining rows to it and binding the
        result to the same name (`chunk = np.concatenate([chunk, np.zeros((bs - len(chunk),
        3))])`, `np.vstack`, `np.append`): the loop tops the short batch up to full size
        itself, however it spells the padding (usually under `if len(chunk) < bs:`)."""
        body = loop.body if isinstance(loop, (cst.For, cst.While)) else None
        if body is None:
            return False
        for node in iter_subtree(body, into_scopes=False):
            if not isinstance(node, cst.Assign) or not isinstance(node.value, cst.Call):
                continue
            bound = {n for t in node.targets for n in target_names(t.target)} & batching.names
            if not bound:
                continue
            call = node.value
            name = self.ctx.resolve(call.func, anchor=call)
            if name is None or not name.startswith(_ARRAY_MODULES) or name.rpartition(".")[2] not in _GROWING:
                continue
            if not _joins_rows(call, name.rpartition(".")[2]):
                continue  # `np.concatenate([x, feats], axis=1)`: wider, not longer
            first = call.args[0].value if call.args and not call.args[0].star else None
            parts = [e.value for e in first.elements] if isinstance(first, (cst.List, cst.Tuple)) else [first]
            if any(isinstance(p, cst.Name) and p.value in bound for p in parts if p is not None):
                return True
        return False

    def _find_batching(self, loop: Loop) -> Batching | None:
        if isinstance(loop, cst.While):
            return self._next_batching(loop, [*self.ctx.ancestors_of(loop), loop])
        if isinstance(loop, (cst.ListComp, cst.GeneratorExp, cst.SetComp, cst.DictComp)):
            # `[eval_step(state, b) for b in test_loader]`: its one `for` clause over a loader
            # or pipeline (one with `if` clauses still feeds every short batch it keeps)
            if loop.for_in.inner_for_in is not None:
                return None
            return self._stream_header(loop.for_in.target, loop.for_in.iter, [*self.ctx.ancestors_of(loop), loop])
        if not isinstance(loop, cst.For):
            return None
        dataset = self._dataset_batching(loop)
        if dataset is not None:
            return dataset
        source = _unwrap(loop.iter, self._resolver())
        listed = self._listed(source, [*self.ctx.ancestors_of(loop), loop])
        if listed is not None:
            listed.names = set(target_names(loop.target))
            return listed
        if not isinstance(source, cst.Call):
            return None
        name = self.ctx.resolve(source.func, anchor=source)
        if name in _INDEX_SPLITS and len(source.args) > 1 and self._step_indices(source.args[1].value):
            return Batching(
                "split",
                f"`{self._code(source)}`",
                "unless the step of its indices divides the number of rows (the part after the last is smaller)",
                names=set(target_names(loop.target)),
                guessed=True,
            )
        if name in _SPLITS and source.args:
            sections = self._code(source.args[1].value) if len(source.args) > 1 else "the sections"
            return Batching(
                "split",
                f"`{self._code(source)}`",
                f"unless {sections} divides the number of rows (its chunks differ by one row)",
                names=set(target_names(loop.target)),
                guessed=True,
            )
        if isinstance(source.func, cst.Name) and source.func.value == "range" and isinstance(loop.target, cst.Name):
            return self._range_batching(loop, source, loop.target.value)
        if isinstance(source.func, cst.Name) and name is None:
            found = self._generator(source.func.value, self.ctx.ancestors_of(loop))
        elif isinstance(source.func, cst.Attribute):
            # `dataset.get_batches(bs)` / `self.batches(x)`: a method of a class of the file
            method = self.ctx.device.method_called(source, [*self.ctx.ancestors_of(loop), loop])
            found = self._generator_of(f"{self._code(source.func)}", *method) if method is not None else None
        else:
            return None
        if found is not None:
            found.names = set(target_names(loop.target))
        return found

    def _step_indices(self, indices: cst.BaseExpression) -> bool:
        """`range(bs, n, bs)` / `np.arange(bs, n, bs)`: split points every `bs` rows."""
        if not isinstance(indices, cst.Call) or len(indices.args) != 3 or any(a.keyword or a.star for a in indices.args):
            return False
        func = indices.func
        builtin = isinstance(func, cst.Name) and func.value == "range" and self.ctx.is_builtin("range", anchor=indices)
        return builtin or self.ctx.resolve(func, anchor=indices) in _RANGES

    def unwrap(self, expr: cst.BaseExpression) -> cst.BaseExpression:
        """`range(...)` out of `tqdm(range(...))` / `trange(...)` in a loop header, read at the
        node being visited; anything else as it is."""
        return _unwrap(expr, self._resolver())

    def _code(self, node: cst.CSTNode) -> str:
        return one_line(node, self.ctx.module)

    def _resolver(self, path: list[cst.CSTNode] | None = None):  # type: ignore[no-untyped-def]
        """`resolve(func, call)` for `_unwrap`: names read at the end of `path` (default: the
        visited node's ancestors)."""
        return lambda func, call: self.ctx.resolve(func, path, anchor=call)

    def _dataset_batching(self, loop: cst.For) -> Batching | None:
        """`for batch in ds` where `ds` is a tf.data pipeline batched without
        `drop_remainder=True` (`tfds.as_numpy(ds)`, `ds.as_numpy_iterator()`, a function of
        the file returning one)."""
        loop_path = [*self.ctx.ancestors_of(loop), loop]
        found = self._stream_header(loop.target, loop.iter, loop_path)
        return found if found is not None else self._next_batching(loop, loop_path)

    def _stream_header(self, target: cst.BaseExpression, source: cst.BaseExpression, loop_path: list[cst.CSTNode]) -> Batching | None:
        """`for target in source` (a loop's header or a comprehension's, `loop_path` ending
        with it) over such a pipeline, a data loader or a dataset batched keeping the remainder."""
        stream = self.streams.stream(source, loop_path)
        if stream is None or stream.ragged is None:
            return None
        if (
            isinstance(source, cst.Call)
            and isinstance(source.func, cst.Name)
            and source.func.value == "enumerate"
            and isinstance(target, (cst.Tuple, cst.List))
            and len(target.elements) == 2
        ):
            target = target.elements[1].value  # not the counter
        return self._stream_batching(stream, set(target_names(target)))

    def _next_batching(self, loop: Loop, loop_path: list[cst.CSTNode]) -> Batching | None:
        """`batch = next(train_ds)`, or `next(train_ds)` passed to the call, in the body of a
        `for step in range(n)` / `while` loop, where `train_ds` iterates such a pipeline, or is
        a generator of the file yielding ragged slices created before the loop (one created in
        the loop starts over: its first batch is full). The message names the first such draw."""
        found: Batching | None = None
        for node in iter_subtree(loop.body, into_scopes=False):
            if not self._builtin_of_one(node, "next", loop_path):
                continue
            path = [*loop_path, node]
            source = node.args[0].value
            if not self._made_before(source, loop, path):
                continue  # `next(iter(ds))`: a new pass each time, its first batch
            stream = self.streams.stream(source, path)
            if stream is not None and stream.hf:
                # A Hugging Face `.iter()` does not repeat: drawn a counted number of times
                # (`len(ds) // bs` per epoch, as usual), it may never reach its last batch.
                continue
            if stream is not None and stream.ragged is not None:
                batching: Batching | None = self._stream_batching(stream, set())
            else:
                batching = self._drawn_generator(source, loop, path)
            if batching is not None:
                found = found or batching
                found.draws.append(node)
        return found

    def _builtin_of_one(self, node: cst.CSTNode, name: str, path: list[cst.CSTNode]) -> bool:
        """`name(x)`, the builtin `name` as read at the end of `path`, given one plain argument."""
        return (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Name)
            and node.func.value == name
            and len(node.args) == 1
            and node.args[0].keyword is None
            and not node.args[0].star
            and self.ctx.is_builtin(name, path, anchor=node)
        )

    def _made_before(self, source: cst.BaseExpression, loop: Loop, path: list[cst.CSTNode]) -> bool:
        """Whether `source`, drawn from with `next` in `loop`, is a name assigned before the
        loop: an iterator made in the loop (or in the `next` call) starts over every time."""
        if not isinstance(source, cst.Name):
            return False
        found = self.streams.binding(source, path)
        return found is not None and found[0] is not None and not any(n is found[0] for n in iter_subtree(loop))

    def _drawn_generator(self, source: cst.BaseExpression, loop: Loop, path: list[cst.CSTNode]) -> Batching | None:
        """`gen` in `next(gen)`, where `gen = batches(x, bs)` (or `iter(batches(...))`),
        assigned before `loop`, and `def batches` in this file yields ragged slices."""
        assert isinstance(source, cst.Name)
        found = self.streams.binding(source, path)
        if found is None:
            return None
        value, value_path, element = found
        if value is None or element >= 0:
            return None
        scope_path = value_path[:-1]
        if self._builtin_of_one(value, "iter", scope_path):
            assert isinstance(value, cst.Call)
            value = value.args[0].value
        if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Name)):
            return None
        if self.ctx.resolve(value.func, scope_path, anchor=value) is not None:
            return None
        return self._generator(value.func.value, scope_path)

    def _stream_batching(self, stream: Stream, names: set[str]) -> Batching:
        if stream.passed is not None:
            return Batching(
                "split",
                f"`{stream.passed}`, the data loader or dataset that other modules pass (batched keeping the remainder),",
                "unless the number of examples is a multiple of the batch size",
                names=names,
            )
        batch = stream.ragged
        assert batch is not None
        size = batch.args[0].value if batch.args else None
        source = "the dataset batched with"
        operation = self.ctx.resolve(batch.func, anchor=batch) if stream.loader else None
        if stream.imported:
            return Batching(
                "split",
                f"`{shorten(self._code(batch.func))}(...)`, whose batches (another module's loader, "
                "dataset or generator) keep the remainder,",
                "unless the number of examples is a multiple of the batch size",
                names=names,
            )
        if stream.chunks:
            return Batching(
                "split",
                f"`{shorten(self._code(batch), 60)}`",
                "unless the group size divides the number of items",
                names=names,
            )
        if stream.hf and isinstance(batch.func, cst.Attribute):
            spelled = ", ".join(self._code(a.with_changes(comma=cst.MaybeSentinel.DEFAULT)) for a in batch.args[:1])
            where = f"`.{batch.func.attr.value}({spelled})` without `drop_last_batch=True`"
        elif isinstance(batch.func, cst.Attribute) and batch.func.attr.value in ("batch", "padded_batch"):
            where = f"`.{batch.func.attr.value}({self._code(size) if size is not None else ''})` without `drop_remainder=True`"
        elif operation in _jaxapi.BATCH_OPERATIONS:
            source = "the data loader batching with"
            where = f"`{shorten(self._code(batch.func))}(...)` without `{_jaxapi.BATCH_OPERATIONS[operation]}=True`"  # type: ignore[index]
        elif stream.loader:
            source = "the data loader"
            keyword = _jaxapi.DATA_LOADERS.get(operation or "", "drop_last")
            where = f"`{shorten(self._code(batch.func))}(..., batch_size=...)` without `{keyword}=True`"
        else:
            where = f"`{shorten(self._code(batch.func))}(..., batch_size=...)`"
        return Batching(
            "dataset",
            f"{source} {where}",
            "unless the number of examples is a multiple of the batch size",
            names=names,
            drop=stream.drop if stream.shuffled else None,
        )

    def _range_batching(self, loop: cst.For, source: cst.Call, index: str) -> Batching | None:
        args = [a.value for a in source.args]
        if any(a.keyword is not None or a.star for a in source.args):
            return None
        if len(args) == 3:
            stop, step = args[1], args[2]
            if self._drops_remainder(stop, step, loop) or self._single_rows(step, loop):
                return None
            known = self._known_sizes(stop, step, loop)
            if _divides(known):
                return None
            slices = _step_slices(loop, index, step)
            if not slices:
                return None
            text = self._code(slices[0])
            sizes = _remainder(known)
            why = f"unless `{self._code(stop)}` is a multiple of `{self._code(step)}`"
            if sizes is not None:
                total, size = sizes
                why = f"(`{self._code(stop)}` is {total}, not a multiple of {size}: the last batch has {total % size} rows)"
            return Batching(
                "range",
                f"`{text}` over `{self._code(source)}`",
                why,
                slices=slices,
                step=step,
                guessed=sizes is None and not _clamped_slices(loop, index, step),
            )
        if len(args) in (1, 2):
            count = args[-1]
            if len(args) == 2 and not (isinstance(args[0], cst.Integer) and args[0].value == "0"):
                return None
            if not self._ceil_count(count, loop):
                return None
            operands = self._ceil_operands(count, loop)
            known = self._known_sizes(*operands, loop) if operands is not None else None
            if _divides(known):
                return None  # rounded up from a whole number of batches: every batch is full
            slices = _count_slices(loop, index)
            if not slices:
                return None
            sizes = _remainder(known)
            why = "(the number of batches is rounded up)"
            if sizes is not None and operands is not None:
                total, size = sizes
                why = f"(the number of batches is rounded up, and `{self._code(operands[0])}` is {total}, not a multiple of {size}: the last batch has {total % size} rows)"
            return Batching(
                "count",
                f"`{self._code(slices[0])}` over `{self._code(source)}`",
                why,
                slices=slices,
            )
        return None

    def _listed(self, source: cst.BaseExpression, path: list[cst.CSTNode]) -> Batching | None:
        """`[x[i:i + bs] for i in range(0, n, bs)]` (or a generator expression), spelled in the
        loop header or assigned to the name it iterates: a list of batches, the last smaller."""
        if isinstance(source, cst.Name):
            found = self.streams.binding(source, path)
            if found is None or found[0] is None or found[2] >= 0:
                return None
            source, path = found[0], found[1][:-1]  # type: ignore[assignment]
        batching = self._comprehension(source, path)
        if batching is None:
            return None
        code = self._code(source)
        return Batching("generator", f"`{shorten(code, 60)}`, a list of {batching.cut},", batching.why, guessed=batching.guessed)

    def _comprehension(self, comp: cst.BaseExpression, path: list[cst.CSTNode]) -> Batching | None:
        """How a comprehension over `range(...)` cuts ragged slices, as the loop it stands for."""
        if not isinstance(comp, (cst.ListComp, cst.GeneratorExp)):
            return None
        for_in = comp.for_in
        if for_in.inner_for_in is not None or for_in.ifs or not isinstance(for_in.target, cst.Name):
            return None
        source = _unwrap(for_in.iter, self._resolver([*path, comp]))
        if not (isinstance(source, cst.Call) and isinstance(source.func, cst.Name) and source.func.value == "range"):
            return None
        loop = cst.For(
            target=for_in.target,
            iter=source,
            body=cst.IndentedBlock([cst.SimpleStatementLine([cst.Expr(comp.elt)])]),
        )
        self._loops.append(loop)
        self._scopes[id(loop)] = next(
            (n for n in reversed(path) if isinstance(n, cst.FunctionDef)), self.ctx.module
        )
        self._paths[id(loop)] = path
        batching = self._range_batching(loop, source, for_in.target.value)
        if batching is None or mentions_padding(comp) or self._checks_divisibility(loop, batching.step):
            return None
        return batching

    def _generator(self, name: str, path: list[cst.CSTNode]) -> Batching | None:
        """How the generator `name` cuts its batches, when `def name`, visible from `path`, is
        one of this file that yields ragged slices (`for i in range(0, n, bs): yield x[i:i +
        bs]`, `yield tree_map(lambda a: a[idx[i:i + bs]], data)`), returns a list of them
        (appended in such a loop, or a comprehension), or a class of the file whose `__iter__`
        does."""
        found = self.ctx.device._local_def(name, path)
        if found is None:
            found = _iter_method(self.ctx, name, path)
        if found is None or found[0] is None:
            return None
        return self._generator_of(name, found[0], found[1])

    def _generator_of(self, name: str, function: cst.FunctionDef, outer: tuple[cst.CSTNode, ...]) -> Batching | None:
        """`_generator` for the `def function` whose ancestors are `outer`."""
        inner_path = [*outer, function, function.body]
        returned = returned_names(function)
        for node in iter_subtree(function.body, into_scopes=False):
            if isinstance(node, cst.Return) and node.value is not None:
                listed = self._comprehension(node.value, [*inner_path, node])
                if listed is not None:
                    return Batching(
                        "generator", f"`{name}(...)`, which returns a list of {listed.cut},", listed.why, guessed=listed.guessed
                    )
        for inner in iter_subtree(function.body, into_scopes=False):
            if not isinstance(inner, cst.For) or not isinstance(inner.target, cst.Name):
                continue
            inner_source = _unwrap(inner.iter, self._resolver(inner_path))
            if not (
                isinstance(inner_source, cst.Call)
                and isinstance(inner_source.func, cst.Name)
                and inner_source.func.value == "range"
            ):
                continue
            self._scopes[id(inner)] = function
            self._paths[id(inner)] = inner_path
            batching = self._range_batching(inner, inner_source, inner.target.value)
            if batching is None or mentions_padding(inner) or self._checks_divisibility(inner, batching.step):
                continue
            if _skips_short(inner):
                continue
            _derive_names(inner, batching)  # `idx = perm[i * bs:(i + 1) * bs]; yield x[idx]`
            for node in iter_subtree(inner.body, into_scopes=False):
                if isinstance(node, cst.Yield) and node.value is not None and batching.feeds(node.value):
                    return Batching(
                        "generator",
                        f"`{name}(...)`, which yields {batching.cut},",
                        batching.why,
                        guessed=batching.guessed,
                    )
                if _appends_to(node, returned) and batching.feeds(node.args[0].value):  # type: ignore[attr-defined]
                    return Batching(
                        "generator",
                        f"`{name}(...)`, which returns a list of {batching.cut},",
                        batching.why,
                        guessed=batching.guessed,
                    )
        return None

    def _drops_remainder(self, stop: cst.BaseExpression, step: cst.BaseExpression, loop: cst.For, depth: int = 0) -> bool:
        """`n - bs + 1`, `n - bs`, `n // bs * bs`, `n - n % bs`, or a name set to one; or
        `min(...)` of one of those and anything else (`min(n - bs, max_steps)`): the loop
        stops a full batch before the end either way."""
        step_text = self._code(step)
        for expr in [stop, *self.assigned(stop, loop)]:
            if (
                depth < 3
                and isinstance(expr, cst.Call)
                and isinstance(expr.func, cst.Name)
                and expr.func.value == "min"
                and self.ctx.is_builtin("min", anchor=expr)
                and any(not a.star and self._drops_remainder(a.value, step, loop, depth + 1) for a in expr.args)
            ):
                return True
            text = " ".join(self._code(expr).split())
            if f"- {step_text}" in text or f"-{step_text}" in text:
                return True
            if f"// {step_text}" in text or f"//{step_text}" in text or f"% {step_text}" in text:
                return True
        return False

    def _ancestors(self, loop: cst.For) -> list[cst.CSTNode] | None:
        """`loop`'s ancestors from the module: those recorded for a generator's loop, else
        those of the node being visited; None when `loop` encloses neither."""
        path = self._paths.get(id(loop))
        if path is not None:
            return path
        try:
            return self.ctx.ancestors_of(loop)
        except ValueError:
            return None

    def _single_rows(self, step: cst.BaseExpression, loop: cst.For) -> bool:
        """A step the code sets to 1 at most (`blocks = 1`, `range(0, n, blocks)`): every slice
        `x[i:i + 1]` holds one row, the last one too."""
        path = self._ancestors(loop)
        if path is None:
            return False
        size = integer_value(self.ctx, step, [*path, loop])
        return size is not None and size <= 1

    def _known_sizes(self, stop: cst.BaseExpression, step: cst.BaseExpression, loop: cst.For) -> tuple[int, list[int]] | None:
        """The step, when it is a known integer above 1, and the values the stop is known to
        take (`_known_integers`; empty when one is unknown): a literal or a name assigned one, a
        configuration field at the default the file declares for it (`add_argument("--n-keys",
        default=2000)`, `_frequency.integer_value`), the first dimension of an array whose
        shape the code spells, or a parameter of the function that every call of the file
        passes such a value (`def losses(n_keys)` called with `args.n_keys`). `_divides` and
        `_remainder` read them."""
        path = self._ancestors(loop)
        if path is None:
            return None
        size = integer_value(self.ctx, step, [*path, loop])
        if size is None or size <= 1:
            return None
        return size, self._known_integers(stop, [*path, loop])

    def _known_integers(self, expr: cst.BaseExpression, path: list[cst.CSTNode]) -> list[int]:
        """The values `expr` takes where `path` reads it: `integer_value`'s, or for a parameter
        of the function around it, those that every call of the file passes (or leaves as the
        default: `Streams.passed_values`); empty when one is unknown."""
        value = integer_value(self.ctx, expr, path)
        if value is not None:
            return [value]
        passed = self.streams.passed_values(expr, path)
        if len(passed) == 1 and passed[0][0] is expr:
            return self._parameter_rows(expr, path)  # not a parameter: its rows may be one's
        values = [integer_value(self.ctx, given, at) for given, at in passed]
        return [] if any(v is None for v in values) else values  # type: ignore[misc]

    def _parameter_rows(self, expr: cst.BaseExpression, path: list[cst.CSTNode], depth: int = 0) -> list[int]:
        """The number of rows of a parameter, `len(features)` or `features.shape[0]` (or a
        name the function sets to one once, `n = features.shape[0]`), where every call passes
        an array whose rows the code shows (`train_x = data[:1000]`, `jnp.ones(4096)`:
        `_frequency.items_count`); empty when one is unknown."""
        if depth > 2:
            return []
        if isinstance(expr, cst.Name):
            scope = next((n for n in reversed(path) if isinstance(n, cst.FunctionDef)), None)
            values = assigned_in(scope, expr.value) if scope is not None else []
            return self._parameter_rows(values[0], path, depth + 1) if len(values) == 1 else []
        owner = None
        if isinstance(expr, cst.Subscript):
            owner = leading_dimension(expr)
        elif isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "len" and len(expr.args) == 1:
            if self.ctx.is_builtin("len", anchor=expr):
                owner = expr.args[0].value
        if not isinstance(owner, cst.Name):
            return []
        passed = self.streams.passed_values(owner, path)
        if not passed or passed[0][0] is owner:
            return []
        rows = [items_count(self.ctx, given, at) for given, at in passed]
        return [] if any(r is None for r in rows) else rows  # type: ignore[misc]

    def _ceil_count(self, count: cst.BaseExpression, loop: cst.For) -> bool:
        """A number of batches rounded up: `ceil(n / bs)`, `(n + bs - 1) // bs`,
        `-(-n // bs)`, `n // bs + (n % bs > 0)`, `n // bs + 1`, or a name set to one."""
        for expr in [count, *self.assigned(count, loop)]:
            for node in iter_subtree(expr):
                if isinstance(node, cst.Call) and self.ctx.resolve(node.func, anchor=node) in _CEILS:
                    return True
                if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "len":
                    if node.args and isinstance(node.args[0].value, cst.Call):
                        inner = node.args[0].value
                        if self.ctx.resolve(inner.func, anchor=inner) in _SPLITS:
                            return True
            if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
                inner = expr.expression
                if isinstance(inner, cst.BinaryOperation) and isinstance(inner.operator, cst.FloorDivide):
                    if isinstance(inner.left, cst.UnaryOperation) and isinstance(inner.left.operator, cst.Minus):
                        return True
            if isinstance(expr, cst.BinaryOperation):
                if isinstance(expr.operator, cst.FloorDivide) and isinstance(expr.left, cst.BinaryOperation):
                    left = "".join(self._code(expr.left).split())
                    if "+" in left and left.rstrip(")").endswith("-1"):
                        return True  # (n + bs - 1) // bs
                if isinstance(expr.operator, cst.Add) and any(
                    self._quotient(side, loop) for side in (expr.left, expr.right)
                ):
                    return True  # n // bs + (n % bs > 0), n // bs + 1, full + bool(rest)
        return False

    def _ceil_operands(self, count: cst.BaseExpression, loop: cst.For) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
        """The number of rows and the batch size a rounded-up count is made of (`ceil(n / bs)`,
        `(n + bs - 1) // bs`, `-(-n // bs)`, `n // bs + (n % bs > 0)`), or None. A count
        `n // bs + 1` is one more than the full batches whether or not `bs` divides `n`."""
        for expr in [count, *self.assigned(count, loop)]:
            for node in iter_subtree(expr):
                if isinstance(node, cst.Call) and self.ctx.resolve(node.func, anchor=node) in _CEILS and node.args:
                    inner = node.args[0].value
                    if isinstance(inner, cst.BinaryOperation) and isinstance(inner.operator, cst.Divide):
                        return inner.left, inner.right
            if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
                inner = expr.expression
                if isinstance(inner, cst.BinaryOperation) and isinstance(inner.operator, cst.FloorDivide):
                    if isinstance(inner.left, cst.UnaryOperation) and isinstance(inner.left.operator, cst.Minus):
                        return inner.left.expression, inner.right
            if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.FloorDivide):
                top = expr.left  # (n + bs - 1)
                if (
                    isinstance(top, cst.BinaryOperation) and isinstance(top.operator, cst.Subtract)
                    and isinstance(top.left, cst.BinaryOperation) and isinstance(top.left.operator, cst.Add)
                ):  # fmt: skip
                    return top.left.left, expr.right
            if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
                for side, other in ((expr.left, expr.right), (expr.right, expr.left)):
                    if (
                        isinstance(side, cst.BinaryOperation) and isinstance(side.operator, cst.FloorDivide)
                        and any(isinstance(n, cst.BinaryOperation) and isinstance(n.operator, cst.Modulo) for n in iter_subtree(other))
                    ):  # fmt: skip
                        return side.left, side.right
        return None

    def _quotient(self, expr: cst.BaseExpression, loop: cst.For) -> bool:
        """`n // bs`, or a name set to one or to `divmod(n, bs)` (`full, rest = divmod(n,
        bs)`): the number of full batches."""
        for value in [expr, *self.assigned(expr, loop)]:
            if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.FloorDivide):
                return True
            if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "divmod":
                if self.ctx.is_builtin("divmod", anchor=value):
                    return True
        return False

    def assigned(self, expr: cst.BaseExpression, loop: cst.For) -> list[cst.BaseExpression]:
        """The values the enclosing function (or module) assigns to the name `expr`."""
        if not isinstance(expr, cst.Name):
            return []
        scope = self.scope(loop)
        values = assigned_in(scope, expr.value)
        if values:
            return values
        # A name of an enclosing function or the module (a generator nested in `main`).
        path = self._paths.get(id(loop))
        if path is None:
            path = next((list(self.ctx.ancestors[:i]) for i, n in enumerate(self.ctx.ancestors) if n is loop), None)
        if path is None:
            return []
        owner = self.ctx.binding_owner(expr.value, [*path, loop, loop.body, expr])
        if owner is None or owner is scope:
            return []
        return assigned_in(owner, expr.value)

    def _checks_divisibility(self, loop: cst.For, step: cst.BaseExpression | None) -> bool:
        """`assert n % bs == 0` (or `!= 0` with a raise) somewhere in the function."""
        if step is None:
            return False
        scope = self.scope(loop)
        for node in iter_subtree(scope, into_scopes=False):
            if isinstance(node, cst.Comparison) and isinstance(node.left, cst.BinaryOperation):
                left = node.left
                if (
                    isinstance(left.operator, cst.Modulo)
                    and _same(left.right, step)
                    and any(isinstance(c.operator, (cst.Equal, cst.NotEqual)) for c in node.comparisons)
                ):
                    return True
        return False

    def scope(self, loop: cst.For) -> cst.CSTNode:
        """The function (or module) whose body holds `loop`."""
        known = self._scopes.get(id(loop))
        if known is not None:
            return known
        return self.ctx.enclosing_function() or self.ctx.module


def _joins_rows(call: cst.Call, function: str) -> bool:
    """Whether the joining call `function(...)` joins along the first axis: `vstack`, or
    `concatenate` with no axis or axis 0; `append` only with `axis=0` (without, it flattens)."""
    positional = [a.value for a in call.args if a.keyword is None and not a.star]
    axis = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "axis"), None)
    if axis is None:
        index = {"append": 2, "concatenate": 1, "concat": 1}.get(function)
        if index is not None and len(positional) > index:
            axis = positional[index]
    if axis is None:
        return function != "append"
    return isinstance(axis, cst.Integer) and axis.value == "0"


def _unwrap(expr: cst.BaseExpression, resolve) -> cst.BaseExpression:  # type: ignore[no-untyped-def]
    """`range(...)` out of `tqdm(range(...), ...)` / `trange(a, b, c, desc=...)` (tqdm's
    `trange(*args, **kwargs)` is `tqdm(range(*args), **kwargs)`), from `tqdm`, `tqdm.auto`,
    `tqdm.notebook`, ... `resolve(func, call)` gives the callee's qualified name; a name that
    resolves to no import is matched by its spelling (a star import, a notebook's earlier cell)."""
    if not isinstance(expr, cst.Call) or not isinstance(expr.func, (cst.Name, cst.Attribute)):
        return expr
    name = resolve(expr.func, expr)
    if name is not None:
        parts = name.split(".")
        if parts[0] != "tqdm":
            return expr
        func = parts[-1]
    else:
        func = expr.func.value if isinstance(expr.func, cst.Name) else expr.func.attr.value
    positional = [a for a in expr.args if a.keyword is None and not a.star]
    if func == "tqdm" and positional:
        return _unwrap(positional[0].value, resolve)
    if func == "trange" and positional and not any(a.star for a in expr.args):
        args = [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) if i == len(positional) - 1 else a for i, a in enumerate(positional)]
        return expr.with_changes(func=cst.Name("range"), args=args)
    return expr


def _iter_method(ctx, name: str, path: list[cst.CSTNode]):  # type: ignore[no-untyped-def]
    """`(def __iter__, its scope path)` of the class `name`, when the file binds `name` once,
    to a class with an `__iter__` method (`for x in Batches(data, bs)` runs it)."""
    bindings = ctx.bindings.of(name, path)
    if len(bindings) != 1 or not isinstance(bindings[0].node, cst.ClassDef):
        return None
    node = bindings[0].node
    for statement in getattr(node.body, "body", ()):
        if isinstance(statement, cst.FunctionDef) and statement.name.value == "__iter__":
            if isinstance(statement.body, cst.IndentedBlock):
                return statement, (*bindings[0].path, node, node.body)
    return None


def returned_names(function: cst.FunctionDef) -> set[str]:
    """The names `function` returns as they are (`return batches`, `return tuple(batches),
    key`), not a value computed from them (`return jnp.concatenate(parts)`)."""
    found: set[str] = set()
    for node in iter_subtree(function.body, into_scopes=False):
        if isinstance(node, cst.Return) and node.value is not None:
            value = node.value
            for element in [e.value for e in value.elements] if isinstance(value, cst.Tuple) else [value]:
                if (
                    isinstance(element, cst.Call)
                    and isinstance(element.func, cst.Name)
                    and element.func.value in ("tuple", "list")
                    and len(element.args) == 1
                ):
                    element = element.args[0].value
                if isinstance(element, cst.Name):
                    found.add(element.value)
    return found


def _appends_to(node: cst.CSTNode, names: set[str]) -> bool:
    """`batches.append(x)` for a list `batches` of `names`."""
    return (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value == "append"
        and isinstance(node.func.value, cst.Name)
        and node.func.value.value in names
        and len(node.args) == 1
        and not node.args[0].star
    )


def _same(a: cst.CSTNode, b: cst.CSTNode) -> bool:
    return _plain(a).replace(" ", "") == _plain(b).replace(" ", "")


def _upper_ok(upper: cst.BaseExpression, index: str, step: cst.BaseExpression) -> bool:
    """`i + bs` (or `bs + i`), or `min(i + bs, n)`."""
    if isinstance(upper, cst.Call) and isinstance(upper.func, cst.Name) and upper.func.value == "min":
        return any(_upper_ok(a.value, index, step) for a in upper.args)
    if isinstance(upper, cst.BinaryOperation) and isinstance(upper.operator, cst.Add):
        left, right = upper.left, upper.right
        return (isinstance(left, cst.Name) and left.value == index and _same(right, step)) or (
            isinstance(right, cst.Name) and right.value == index and _same(left, step)
        )
    return False


def _bound_slices(loop: cst.For, match) -> list[cst.Subscript]:  # type: ignore[no-untyped-def]
    """Subscripts in the loop body with a slice element `lower:upper` that `match(lower,
    upper)` accepts, following local names (`end = i + bs` then `x[i:end]`)."""
    local: dict[str, cst.BaseExpression] = {}
    for node in iter_subtree(loop.body, into_scopes=False):
        if isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
            local[node.targets[0].target.value] = node.value
    found = []
    for node, shadowed in _body_nodes(loop.body):
        if not isinstance(node, cst.Subscript):
            continue
        for element in node.slice:
            part = element.slice
            if isinstance(part, cst.Slice) and part.lower is not None and part.upper is not None and part.step is None:
                if shadowed and (free_names(part.lower) | free_names(part.upper)) & shadowed:
                    continue  # `lambda i: x[i:i + bs]`: not the loop's `i`
                lower = _expand(part.lower, local)
                upper = _expand(part.upper, local)
                if match(lower, upper):
                    found.append(node)
                    break
    return found


def _body_nodes(body: cst.CSTNode) -> Iterator[tuple[cst.CSTNode, frozenset[str]]]:
    """The nodes of a loop body, entering lambdas (`tree_map(lambda a: a[i:i + bs], data)`
    runs in the loop), not defs or classes; each with the names the lambdas around it bind."""
    stack: list[tuple[cst.CSTNode, frozenset[str]]] = [(body, frozenset())]
    while stack:
        root, shadowed = stack.pop()
        for node in iter_subtree(root, into_scopes=False):
            if isinstance(node, cst.Lambda) and node is not root:
                params = frozenset(parameter_names(node.params))
                stack.append((node.body, shadowed | params))
            else:
                yield node, shadowed


def _expand(expr: cst.BaseExpression, local: dict[str, cst.BaseExpression]) -> cst.BaseExpression:
    """`expr` with the names the loop body assigns replaced by their values (one level:
    `end = start + bs` with `start = b * bs` gives `b * bs + bs`)."""
    if isinstance(expr, cst.Name):
        value = local.get(expr.value)
        if value is None:
            return expr
        return value.visit(_Substitute({k: v for k, v in local.items() if k != expr.value}))  # type: ignore[return-value]
    return expr.visit(_Substitute(local))  # type: ignore[return-value]


class _Substitute(cst.CSTTransformer):
    def __init__(self, local: dict[str, cst.BaseExpression]) -> None:
        super().__init__()
        self._local = local

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        value = self._local.get(original.value)
        if value is None:
            return updated
        if isinstance(value, (cst.Name, cst.Integer, cst.Attribute, cst.Call)):
            return value
        return value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def _step_slices(loop: cst.For, index: str, step: cst.BaseExpression) -> list[cst.Subscript]:
    def match(lower: cst.BaseExpression, upper: cst.BaseExpression) -> bool:
        return isinstance(lower, cst.Name) and lower.value == index and _upper_ok(upper, index, step)

    return _bound_slices(loop, match)


def _divides(known: tuple[int, list[int]] | None) -> bool:
    """The step divides every value the stop is known to take (`BatchIndex._known_sizes`):
    every batch is full, the last one too."""
    return known is not None and bool(known[1]) and all(t > 0 and t % known[0] == 0 for t in known[1])


def _remainder(known: tuple[int, list[int]] | None) -> tuple[int, int] | None:
    """A value the stop is known to take that the step leaves a remainder of (`range(0, 1000,
    128)`: the code shows that the last batch is smaller), with the step; or None."""
    if known is None:
        return None
    return next(((t, known[0]) for t in known[1] if t % known[0]), None)


def _clamped_slices(loop: cst.For, index: str, step: cst.BaseExpression) -> list[cst.Subscript]:
    """`_step_slices` whose end is clamped to the data, `x[i:min(i + bs, n)]` (or `end =
    min(i + bs, n)`): the author expects the last batch to run past the end."""

    def match(lower: cst.BaseExpression, upper: cst.BaseExpression) -> bool:
        return (
            isinstance(lower, cst.Name)
            and lower.value == index
            and isinstance(upper, cst.Call)
            and isinstance(upper.func, cst.Name)
            and upper.func.value == "min"
            and _upper_ok(upper, index, step)
        )

    return _bound_slices(loop, match)


def _count_slices(loop: cst.For, index: str) -> list[cst.Subscript]:
    """`x[b * bs:(b + 1) * bs]`, `x[b * bs:b * bs + bs]`, `min(..., n)` uppers."""

    def product(expr: cst.BaseExpression) -> cst.BaseExpression | None:
        """`bs` for `b * bs` / `bs * b`."""
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply):
            if isinstance(expr.left, cst.Name) and expr.left.value == index:
                return expr.right
            if isinstance(expr.right, cst.Name) and expr.right.value == index:
                return expr.left
        return None

    def match(lower: cst.BaseExpression, upper: cst.BaseExpression) -> bool:
        size = product(lower)
        if size is None:
            return False
        if isinstance(upper, cst.Call) and isinstance(upper.func, cst.Name) and upper.func.value == "min":
            return any(match(lower, a.value) for a in upper.args)
        if isinstance(upper, cst.BinaryOperation) and isinstance(upper.operator, cst.Multiply):
            # (b + 1) * bs
            for factor, other in ((upper.left, upper.right), (upper.right, upper.left)):
                if _same(other, size) and isinstance(factor, cst.BinaryOperation) and isinstance(factor.operator, cst.Add):
                    if "".join(_plain(factor).split()) in (f"{index}+1", f"1+{index}"):
                        return True
        if isinstance(upper, cst.BinaryOperation) and isinstance(upper.operator, cst.Add):
            return (_same(upper.left, lower) and _same(upper.right, size)) or (
                _same(upper.right, lower) and _same(upper.left, size)
            )
        return False

    return _bound_slices(loop, match)


def _plain(node: cst.CSTNode) -> str:
    code = cst.Module([]).code_for_node(node)
    return code.strip("() ")


def _derive_names(loop: Loop, batching: Batching) -> None:
    """Add the names the loop body assigns from a ragged slice or batch (`batch = {"x":
    x[s:e]}`, `xb = jnp.asarray(batch)`); not a state the loop updates with a batch
    (`params = train_step(params, batch)`: the new `params` has the old one's shape)."""
    body = loop.body if isinstance(loop, (cst.For, cst.While)) else None
    assigns = [n for n in iter_subtree(body, into_scopes=False) if isinstance(n, cst.Assign)] if body is not None else []
    if body is not None:
        for node in iter_subtree(body, into_scopes=False):
            if isinstance(node, cst.For):
                batching.inner |= set(target_names(node.target))
    for _ in range(3):
        for node in assigns:
            if batching.feeds(node.value):
                bound = {n for t in node.targets for n in target_names(t.target)}
                if (bound - batching.names) & free_names(node.value):
                    continue
                batching.names |= bound


def _recut(expr: cst.BaseExpression, inner: set[str]) -> bool:
    """`x[j * bs:(j + 1) * bs]` (also through `jnp.asarray(...)`-like calls of it): a slice
    along the first axis whose bounds read a name of `inner`."""
    if not inner:
        return False
    while (
        isinstance(expr, cst.Call)
        and expr.args
        and expr.args[0].keyword is None
        and not expr.args[0].star
        and all(a.keyword is not None for a in expr.args[1:])
    ):
        expr = expr.args[0].value
    if not isinstance(expr, cst.Subscript) or not expr.slice:
        return False
    first = expr.slice[0].slice
    if not isinstance(first, cst.Slice):
        return False
    bounds = [b for b in (first.lower, first.upper) if b is not None]
    return bool(bounds) and any(free_names(b) & inner for b in bounds)


def assigned_in(scope: cst.CSTNode, name: str) -> list[cst.BaseExpression]:
    """The values that assignments in `scope` (not its nested defs) give `name`."""
    return [
        node.value
        for node in iter_subtree(scope, into_scopes=False)
        if isinstance(node, cst.Assign) and any(name in target_names(t.target) for t in node.targets)
    ]


def _skips_short(loop: Loop) -> bool:
    """`if len(x) < bs: continue` / `if x.shape[0] != bs: break`, or a test of where the
    batch would end (`if i + bs > n: break`, `end = i + bs` then `if end > n: break`): short
    batches never reach the call."""
    if not isinstance(loop, (cst.For, cst.While)):
        return False  # a comprehension has no statement to leave by
    index = loop.target.value if isinstance(loop, cst.For) and isinstance(loop.target, cst.Name) else None
    ends = _batch_ends(loop, index) if index is not None else set()
    for node in iter_subtree(loop.body, into_scopes=False):
        if isinstance(node, cst.If):
            test = cst.Module([]).code_for_node(node.test)
            if ("len(" in test or ".shape" in test or _compares_end(node.test, index, ends)) and any(
                isinstance(n, (cst.Continue, cst.Break, cst.Return, cst.Raise)) for n in iter_subtree(node.body, into_scopes=False)
            ):
                return True
    return False


def _is_end(expr: cst.BaseExpression, index: str | None) -> bool:
    """`i + bs` (or `bs + i`) for the loop index `i`: where the batch starting at `i` ends."""
    return (
        isinstance(expr, cst.BinaryOperation)
        and isinstance(expr.operator, cst.Add)
        and any(isinstance(side, cst.Name) and side.value == index for side in (expr.left, expr.right))
    )


def _batch_ends(loop: Loop, index: str) -> set[str]:
    """The names the loop body binds to where the batch ends (`end = i + bs`)."""
    names = set()
    for node in iter_subtree(loop.body, into_scopes=False):
        if isinstance(node, cst.Assign) and _is_end(node.value, index):
            names.update(n for t in node.targets for n in target_names(t.target))
    return names


def _compares_end(test: cst.BaseExpression, index: str | None, ends: set[str]) -> bool:
    """`i + bs > n`, `end >= len(x)`, `n < end`: a test of where the batch ends against a bound."""
    if index is None or not isinstance(test, cst.Comparison):
        return False
    ordering = (cst.GreaterThan, cst.GreaterThanEqual, cst.LessThan, cst.LessThanEqual)
    if not all(isinstance(c.operator, ordering) for c in test.comparisons):
        return False
    sides = [test.left, *(c.comparator for c in test.comparisons)]
    return any(_is_end(side, index) or (isinstance(side, cst.Name) and side.value in ends) for side in sides)
