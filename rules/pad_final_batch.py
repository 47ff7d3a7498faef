"""## What it does

Finds batches cut so that the last one can be smaller, fed to a jitted function in the same
loop: `x[i:i + bs]` over `range(0, n, bs)`, `x[b * bs:(b + 1) * bs]` over
`range(ceil(n / bs))` (also `full + bool(rest)` with `full, rest = divmod(n, bs)`, read
in the function or one enclosing it; or tqdm's `trange(0, n, bs, desc=...)`,
`tqdm(range(...))`), the
chunks of `np.array_split(x, k)` or of `np.split(x, range(bs, n, bs))`, groups of
`itertools.batched(rows, n)` (the library table's `chunkers`: `more_itertools.chunked`,
`toolz.partition_all`), generators of the file that yield such slices (also inside
`jax.tree_util.tree_map(lambda a: a[idx[i:i + bs]], data)`), functions of the file returning
a list of them (`[x[i:i + bs] for i in range(0, n, bs)]`, or slices appended in such a loop),
such a comprehension itself, classes of the file whose `__iter__` yields them, methods of a
class of the file that do (`data.minibatches(bs)` for `data = Samples(x, y)`, or
`self.minibatches(bs)`, also inherited from a base class of the file), a generator, loader,
pipeline or list of batches of another module of the project that keeps a smaller last batch
(the project summary's `ragged`: `groups, key = make_minibatches(x, bs, key)`), and tf.data
pipelines batched
without `drop_remainder=True` (`tf.data.Dataset.from_tensor_slices(x).batch(bs)`,
`tfds.load(...).shuffle(n).batch(bs)`, `.padded_batch(bs, ...)`, `tfds.load(...,
batch_size=bs)`) iterated directly, through `ds.as_numpy_iterator()` / `tfds.as_numpy(ds)` /
`iter(ds)` / Python's `map(f, ds)` or a function of the file that returns one (or a tuple
holding one: `ds, names = get_dataset(...)`, `get_dataset(...)[0]`); grain's
`MapDataset.source(x).batch(bs)` batches the same way, and so does a Hugging Face dataset's
`.iter(batch_size=bs)` or `.batch(bs)` without `drop_last_batch=True` (`load_dataset(...)`,
`Dataset.from_dict(...)`: the library table's `hf-datasets`), iterated by the loop (drawn with
`next` a counted number of times, usually `len(ds) // bs`, it may never reach its last batch:
it does not repeat). Such a
generator or pipeline may also be drawn from with `batch = next(it)` (or `next(it)` passed to
the call) in a `for step in range(...)` or `while` loop, when `it` is made before the loop (a
batched, then `.repeat()`ed dataset ends every pass with a smaller batch; an iterator made in
the loop gives its first, full batch every time). The pipeline is followed through
assignments (`ds = ds.batch(bs)`) and `tensorflow` / `tensorflow_datasets` / `tqdm` are
recognised through the imports. PyTorch's `DataLoader(dataset, batch_size=bs)` (or
jax-dataloader's, or a class of the file that subclasses it, `class
NumpyLoader(DataLoader)`) without `drop_last=True` batches the same way; with a `batch_sampler`, or the default batch size of 1, it is left alone. So
does a function of the file that builds one with the `**kwargs` it is called with
(`def numpy_loader(ds, **kwargs): return DataLoader(ds, collate_fn=..., **kwargs)`), and
grain's `DataLoader(..., operations=[..., grain.Batch(bs)])` without `drop_remainder=True`
(the loaders, batching operations and dataset modules are the library table's `data-loaders`,
`operation-loaders`, `batch-operations` and `dataset-modules`). A
function's parameter counts as such a pipeline or loader when every call of the function in
the file passes one (`def evaluate(model, loader)` called with the test loader; for a
method, every call `x.evaluate(...)` of the file, on `self` or an instance), or, for a
function its file does not call, when every call from other modules of the project does
(`fit(weights, DataLoader(train_set, batch_size=64))` in `main.py`); so does what a method of
the class returns (`self.make_loader(ds)`). The jitted function may be a method jitted in its
class, here or in another module (or in a base class), called on an instance
(`model.update(w, x)` for `model = Regressor(rate)`, `self.model.update(...)` when every
assignment of `self.model` makes one). It may also be reached through a function of the
file, a method of the class or a function of another module that hands the batch on
unchanged to a jitted one (`self.step(x[i:i + bs])` where `def step(self, x):
self.params = update(self.params, x)`): the jitted function compiles for whatever shape
the call gives it.

## Why is this bad?

A jitted function compiles once per input shape. Unless `n` is a multiple of `bs`, the last
batch has a new shape and compiles the function a second time, every epoch that starts
cold, and on every process of a multi-host job (seed report 001). On CPU, a train step over
327 rows in batches of 32 compiled twice and the first epoch took 1.4-1.6x as long as with
padded batches (`../shared/research/runtime-baseline.md` §6); the slower the compile, the
larger the loss. Padding the last batch to full size and masking the padding rows compiles
once and computes the same result.

## Example

```python
@jax.jit
def loss_fn(params, x, y):
    return jnp.sum((x @ params - y) ** 2)

total = 0.0
for i in range(0, len(xs), batch_size):
    total += loss_fn(params, xs[i:i + batch_size], ys[i:i + batch_size])
```

Use instead:

```python
@jax.jit
def loss_fn(params, x, y, mask):
    return jnp.sum(jnp.where(mask, (x @ params - y) ** 2, 0.0))  # padding rows count 0

total = 0.0
for (x, y), mask in jaxlint.runtime.padded_batches((xs, ys), batch_size):
    total += loss_fn(params, x, y, mask)
```

The rule stays silent when the remainder is dropped (`range(0, n - bs + 1, bs)`, `n // bs`
batches), when the loop pads or masks already (a call or name spelled with `pad` or
`mask`), when it skips short batches (`if len(x) < bs: continue`), when the function checks
that `bs` divides the data (`assert n % bs == 0`), and when the consumer is not jitted. For
tf.data it stays silent when `drop_remainder` is passed anything but `False` (keyword, or the
second positional argument of `batch` / fourth of `padded_batch`; a variable counts, since
the linter cannot know it), when the dataset is `.repeat()`ed before `.batch` (an endless
stream has no last batch; `.repeat(n)` with a literal `n` is still finite), for
`.batch(1)`, when `.take(n)` / `.skip(n)` or a method it does not know follows the batching,
after `.unbatch()`, and when a function mapped over the batches (`map(pad_batch, ds)`) is
spelled with `pad` or `mask`. It cannot know the number of examples: a split whose size
happens to be a multiple of the batch size (CIFAR-100's 10,000 test images in batches of
500) is reported too.

## Fix safety

The fix rewrites `for i in range(0, len(x), bs)` with slices `x[i:i + bs]` passed straight
to a jitted function of the file that has a `mask` parameter the call does not pass yet:
the loop iterates `jaxlint.runtime.padded_batches((x, ...), bs)` and passes `mask=mask`.
It is **unsafe**: the function now sees `bs` rows every time, so the result is the same
only if it ignores the padding rows where the mask is `False` (a masked sum or mean, not a
plain `.mean()` over the batch); the padding is `0` in every array; and `x` must be an array
or a pytree of arrays with a leading batch axis (a Python list of examples is not). With no
`mask` parameter, or any other shape of loop, the rule reports only.

Datasets and data loaders get a fix only when they are shuffled and feed a training step: a
tf.data pipeline with `.shuffle(n)` on the way to its `.batch(bs)`, a `DataLoader(...,
shuffle=True)`, a grain `DataLoader` whose `sampler` is made with `shuffle=True`, whose jitted
consumer carries state from step to step (`state, loss = train_step(state, batch)`: assigned
to a name it is given; not `metrics = eval_step(state, batch)`, nor a step that updates a
model in place). The fix is what training code does: `drop_remainder=True` (`drop_last=True` for
a loader) added to the batching call, keeping its layout, so every batch is full and the
step compiles once. It is **unsafe**: each pass skips up to `bs - 1` examples (others each
pass, since the order is shuffled), a pass has one step fewer (`len(loader)` changes, and a
schedule counted from it), and a dataset smaller than one batch yields no batch at all. An
evaluation needs every example, so a stream that is not shuffled gets no fix: there, pad the
last batch to full size and pass a mask (`jaxlint.runtime.padded_batches`, or
`ds.padded_batch` over a dataset concatenated with dummy examples and a mask feature). Nor
does a stream shuffled only under a condition (`if training: ds = ds.shuffle(n)`, then one
`.batch` for both), one built by a function of the file or passed in as a parameter (its
other callers may evaluate), a grain operation list given by name (other loaders may share
it), or a loader class of the file whose `__init__` does not pass `drop_last` on.

With `runtime-helpers = false` in `[tool.jaxlint]` (fixes may not import `jaxlint.runtime`)
there is no fix: the loop is rewritten to `jaxlint.runtime.padded_batches`. The finding is
still reported.

## Runtime helper

`jaxlint.runtime.padded_batches(data, batch_size, pad_value=0, drop_remainder=False)`
yields `(batch, mask)` with every batch of exactly `batch_size` rows, padded on the host
before the transfer: one compile per epoch instead of two, and a cold epoch 1.86x faster on
CPU for a small MLP loss (`python bench/data_loops.py`).

## References

- Flax, "Processing the entire Dataset": https://flax.readthedocs.io/en/latest/guides/data_preprocessing/full_eval.html
- `../shared/research/jax-facts.md` §6 (padding and bucketing).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import libcst as cst

from jaxlint import _jaxapi
from jaxlint._frequency import integer_value, loop_evidence
from jaxlint._context import Loop
from jaxlint._device import Consumer
from jaxlint._nodes import free_names, iter_subtree, reads_name
from jaxlint._rule import Applicability, Edit, Fix, ImportSpec, Rule
from jaxlint._scope import target_names

from jaxlint._streams import Stream, Streams, mentions_padding

from ._shapes import loop_path as _loop_path


__all__ = ["PadFinalBatch"]

_CEILS = frozenset({"math.ceil", "numpy.ceil", "jax.numpy.ceil"})
_SPLITS = frozenset({"numpy.array_split", "jax.numpy.array_split"})
# Splits at given indices (`np.split(x, range(bs, n, bs))`): the part after the last is smaller.
_INDEX_SPLITS = frozenset({"numpy.split", "jax.numpy.split", "numpy.array_split", "jax.numpy.array_split"})
_RANGES = frozenset({"numpy.arange", "jax.numpy.arange"})


@dataclass
class Batching:
    """How a loop cuts ragged batches."""

    kind: str  # "range", "count", "split", "generator", "dataset"
    cut: str  # how the batches are cut, for the message
    why: str  # when the last one is smaller
    slices: list[cst.Subscript] = field(default_factory=list)  # the ragged slices in the loop
    names: set[str] = field(default_factory=set)  # names holding a batch
    draws: list[cst.Call] = field(default_factory=list)  # `next(it)` calls giving a batch
    step: cst.BaseExpression | None = None  # the batch size, when the code spells it
    drop: tuple[cst.Call, str] | None = None  # a shuffled stream's batching call and its drop keyword


class PadFinalBatch(Rule):
    CODE = "JL004"
    SLUG = "pad-final-batch"
    MESSAGE = "the last batch is smaller and recompiles the jitted function it is fed to"
    FIX = Applicability.UNSAFE
    TOKENS = ("jit", "pmap")

    def __init__(self, ctx, options=None) -> None:  # type: ignore[no-untyped-def]
        super().__init__(ctx, options)
        self._batchings: dict[int, Batching | None] = {}
        self._scopes: dict[int, cst.CSTNode] = {}
        self._paths: dict[int, list[cst.CSTNode]] = {}  # a generator's loop: its scope's path
        self._reported: set[int] = set()
        self._datasets = Streams(ctx)
        self._loops: list[cst.For] = []  # the loops comprehensions stand for (kept alive: keyed by id)

    def visit_Call(self, node: cst.Call) -> None:
        ctx = self.ctx
        found = ctx.device.looped_consumer(node, (cst.For, cst.While), instances=True)
        callee = _short(ctx.module.code_for_node(node.func))
        consumer: Consumer | None
        if found is not None:
            consumer, loops = found
            passed = [a.value for a in node.args]
            jitted = f"the jitted `{callee}`"
        else:
            # A function that hands the batch on, unchanged, to a jitted callable (of this file,
            # a method of the class, or another module of the project): that callable compiles
            # for whatever shape this call gives it.
            forwarded = ctx.device.looped_forwards(node, instances=True)
            if forwarded is None:
                return
            forwards, loops = forwarded
            consumer = None  # the fix rewrites calls of the jitted function itself
            passed = [f.argument for f in forwards]
            jitted = f"the jitted `{_short(forwards[0].inner)}`, which `{callee}` hands it to,"
        for loop in reversed(loops):
            batching = self._batching(loop)
            if batching is None or id(loop) in self._reported:
                continue
            if not any(_fed_expr(value, batching) for value in passed):
                continue
            self._reported.add(id(loop))
            evidence = [f"`{callee}` {loop_evidence(ctx, loop, ctx.path_to(node))}"]
            if batching.kind == "dataset":
                self.report(
                    node,
                    f"{batching.cut} yields a smaller last batch {batching.why}, and {jitted} "
                    "is compiled again for its shape; pass "
                    f"`{_drop_keyword(batching.cut)}=True` "
                    "when training, or pad the last batch and mask the padding rows when every "
                    "example counts (`jaxlint.runtime.padded_batches`)",
                    fix=_drop_remainder_fix(batching.drop) if batching.drop is not None and self._trains(node) else None,
                    evidence=evidence,
                )
                return
            self.report(
                node,
                f"{batching.cut} gives a smaller last batch {batching.why}, and {jitted} "
                "is compiled again for its shape; iterate `jaxlint.runtime.padded_batches(...)` (fixed-size batches and "
                "a mask of the real rows) or drop the remainder",
                fix=self._fix(node, loop, batching, consumer) if consumer is not None else None,
                evidence=evidence,
            )
            return

    def _trains(self, call: cst.Call) -> bool:
        """The jitted call carries state from step to step, as a training step does: it is
        assigned to a name it is also given (`state, loss = train_step(state, batch)`). An
        evaluation (`metrics = eval_step(state, batch)`) does not."""
        parent = self.ctx.ancestors[-1] if self.ctx.ancestors else None
        if not (isinstance(parent, cst.Assign) and parent.value is call):
            return False
        code = self.ctx.module.code_for_node
        given = {code(a.value) for a in call.args if not a.star}
        bound = set()
        for target in parent.targets:
            node = target.target
            elements = [e.value for e in node.elements] if isinstance(node, (cst.Tuple, cst.List)) else [node]
            bound.update(code(e) for e in elements if isinstance(e, (cst.Name, cst.Attribute)))
        return bool(given & bound)

    # -- which loops cut ragged batches ---------------------------------------------------------

    def _batching(self, loop: Loop) -> Batching | None:
        key = id(loop)
        if key not in self._batchings:
            found = self._find_batching(loop)
            if found is not None and (
                mentions_padding(loop) or _skips_short(loop) or self._checks_divisibility(loop, found.step)
            ):
                found = None
            if found is not None:
                _derive_names(loop, found)
            self._batchings[key] = found
        return self._batchings[key]

    def _find_batching(self, loop: Loop) -> Batching | None:
        if isinstance(loop, cst.While):
            return self._next_batching(loop, [*_loop_path(self.ctx, loop), loop])
        if not isinstance(loop, cst.For):
            return None
        dataset = self._dataset_batching(loop)
        if dataset is not None:
            return dataset
        source = _unwrap(loop.iter, self._resolver())
        listed = self._listed(source, [*_loop_path(self.ctx, loop), loop])
        if listed is not None:
            listed.names = set(target_names(loop.target))
            return listed
        if not isinstance(source, cst.Call):
            return None
        name = self.ctx.resolve(source.func, anchor=source)
        if name in _INDEX_SPLITS and len(source.args) > 1 and self._step_indices(source.args[1].value):
            return Batching(
                "split",
                f"`{_code(self.ctx, source)}`",
                "unless the step of its indices divides the number of rows (the part after the last is smaller)",
                names=set(target_names(loop.target)),
            )
        if name in _SPLITS and source.args:
            sections = _code(self.ctx, source.args[1].value) if len(source.args) > 1 else "the sections"
            return Batching(
                "split",
                f"`{_code(self.ctx, source)}`",
                f"unless {sections} divides the number of rows (its chunks differ by one row)",
                names=set(target_names(loop.target)),
            )
        if isinstance(source.func, cst.Name) and source.func.value == "range" and isinstance(loop.target, cst.Name):
            return self._range_batching(loop, source, loop.target.value)
        if isinstance(source.func, cst.Name) and name is None:
            found = self._generator(source.func.value, _loop_path(self.ctx, loop))
        elif isinstance(source.func, cst.Attribute):
            # `dataset.get_batches(bs)` / `self.batches(x)`: a method of a class of the file
            method = self.ctx.device.method_called(source, [*_loop_path(self.ctx, loop), loop])
            found = self._generator_of(f"{_code(self.ctx, source.func)}", *method) if method is not None else None
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

    def _resolver(self, path: list[cst.CSTNode] | None = None):  # type: ignore[no-untyped-def]
        """`resolve(func, call)` for `_unwrap`: names read at the end of `path` (default: the
        visited node's ancestors)."""
        return lambda func, call: self.ctx.resolve(func, path, anchor=call)

    def _dataset_batching(self, loop: cst.For) -> Batching | None:
        """`for batch in ds` where `ds` is a tf.data pipeline batched without
        `drop_remainder=True` (`tfds.as_numpy(ds)`, `ds.as_numpy_iterator()`, a function of
        the file returning one)."""
        loop_path = [*_loop_path(self.ctx, loop), loop]
        stream = self._datasets.stream(loop.iter, loop_path)
        if stream is None or stream.ragged is None:
            return self._next_batching(loop, loop_path)
        target = loop.target
        source = loop.iter
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
            if not (
                isinstance(node, cst.Call)
                and isinstance(node.func, cst.Name)
                and node.func.value == "next"
                and len(node.args) == 1
                and node.args[0].keyword is None
                and not node.args[0].star
                and self.ctx.is_builtin("next", loop_path, anchor=node)
            ):
                continue
            path = [*loop_path, node]
            source = node.args[0].value
            if not self._made_before(source, loop, path):
                continue  # `next(iter(ds))`: a new pass each time, its first batch
            stream = self._datasets.stream(source, path)
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

    def _made_before(self, source: cst.BaseExpression, loop: Loop, path: list[cst.CSTNode]) -> bool:
        """Whether `source`, drawn from with `next` in `loop`, is a name assigned before the
        loop: an iterator made in the loop (or in the `next` call) starts over every time."""
        if not isinstance(source, cst.Name):
            return False
        found = self._datasets.binding(source, path)
        return found is not None and found[0] is not None and not any(n is found[0] for n in iter_subtree(loop))

    def _drawn_generator(self, source: cst.BaseExpression, loop: Loop, path: list[cst.CSTNode]) -> Batching | None:
        """`gen` in `next(gen)`, where `gen = batches(x, bs)` (or `iter(batches(...))`),
        assigned before `loop`, and `def batches` in this file yields ragged slices."""
        assert isinstance(source, cst.Name)
        found = self._datasets.binding(source, path)
        if found is None:
            return None
        value, value_path, element = found
        if value is None or element >= 0:
            return None
        scope_path = value_path[:-1]
        if (
            isinstance(value, cst.Call)
            and isinstance(value.func, cst.Name)
            and value.func.value == "iter"
            and len(value.args) == 1
            and value.args[0].keyword is None
            and not value.args[0].star
            and self.ctx.is_builtin("iter", scope_path, anchor=value)
        ):
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
                f"`{_short(_code(self.ctx, batch.func))}(...)`, whose batches (another module's loader, "
                "dataset or generator) keep the remainder,",
                "unless the number of examples is a multiple of the batch size",
                names=names,
            )
        if stream.chunks:
            return Batching(
                "split",
                f"`{_short(_code(self.ctx, batch), 60)}`",
                "unless the group size divides the number of items",
                names=names,
            )
        if stream.hf and isinstance(batch.func, cst.Attribute):
            spelled = ", ".join(_code(self.ctx, a.with_changes(comma=cst.MaybeSentinel.DEFAULT)) for a in batch.args[:1])
            where = f"`.{batch.func.attr.value}({spelled})` without `drop_last_batch=True`"
        elif isinstance(batch.func, cst.Attribute) and batch.func.attr.value in ("batch", "padded_batch"):
            where = f"`.{batch.func.attr.value}({_code(self.ctx, size) if size is not None else ''})` without `drop_remainder=True`"
        elif operation in _jaxapi.BATCH_OPERATIONS:
            source = "the data loader batching with"
            where = f"`{_short(_code(self.ctx, batch.func))}(...)` without `{_jaxapi.BATCH_OPERATIONS[operation]}=True`"  # type: ignore[index]
        elif stream.loader:
            source = "the data loader"
            keyword = _jaxapi.DATA_LOADERS.get(operation or "", "drop_last")
            where = f"`{_short(_code(self.ctx, batch.func))}(..., batch_size=...)` without `{keyword}=True`"
        else:
            where = f"`{_short(_code(self.ctx, batch.func))}(..., batch_size=...)`"
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
            slices = _step_slices(loop, index, step)
            if not slices:
                return None
            text = _code(self.ctx, slices[0])
            return Batching(
                "range",
                f"`{text}` over `{_code(self.ctx, source)}`",
                f"unless `{_code(self.ctx, stop)}` is a multiple of `{_code(self.ctx, step)}`",
                slices=slices,
                step=step,
            )
        if len(args) in (1, 2):
            count = args[-1]
            if len(args) == 2 and not (isinstance(args[0], cst.Integer) and args[0].value == "0"):
                return None
            if not self._ceil_count(count, loop):
                return None
            slices = _count_slices(loop, index)
            if not slices:
                return None
            return Batching(
                "count",
                f"`{_code(self.ctx, slices[0])}` over `{_code(self.ctx, source)}`",
                "(the number of batches is rounded up)",
                slices=slices,
            )
        return None

    def _listed(self, source: cst.BaseExpression, path: list[cst.CSTNode]) -> Batching | None:
        """`[x[i:i + bs] for i in range(0, n, bs)]` (or a generator expression), spelled in the
        loop header or assigned to the name it iterates: a list of batches, the last smaller."""
        if isinstance(source, cst.Name):
            found = self._datasets.binding(source, path)
            if found is None or found[0] is None or found[2] >= 0:
                return None
            source, path = found[0], found[1][:-1]  # type: ignore[assignment]
        batching = self._comprehension(source, path)
        if batching is None:
            return None
        code = _code(self.ctx, source)
        return Batching("generator", f"`{_short(code, 60)}`, a list of {batching.cut},", batching.why)

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
        returned = _returned_names(function)
        for node in iter_subtree(function.body, into_scopes=False):
            if isinstance(node, cst.Return) and node.value is not None:
                listed = self._comprehension(node.value, [*inner_path, node])
                if listed is not None:
                    return Batching("generator", f"`{name}(...)`, which returns a list of {listed.cut},", listed.why)
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
                if isinstance(node, cst.Yield) and node.value is not None and _fed_expr(node.value, batching):
                    return Batching(
                        "generator",
                        f"`{name}(...)`, which yields {batching.cut},",
                        batching.why,
                    )
                if _appends_to(node, returned) and _fed_expr(node.args[0].value, batching):  # type: ignore[attr-defined]
                    return Batching(
                        "generator",
                        f"`{name}(...)`, which returns a list of {batching.cut},",
                        batching.why,
                    )
        return None

    def _drops_remainder(self, stop: cst.BaseExpression, step: cst.BaseExpression, loop: cst.For, depth: int = 0) -> bool:
        """`n - bs + 1`, `n - bs`, `n // bs * bs`, `n - n % bs`, or a name set to one; or
        `min(...)` of one of those and anything else (`min(n - bs, max_steps)`): the loop
        stops a full batch before the end either way."""
        step_text = _code(self.ctx, step)
        for expr in [stop, *self._assigned(stop, loop)]:
            if (
                depth < 3
                and isinstance(expr, cst.Call)
                and isinstance(expr.func, cst.Name)
                and expr.func.value == "min"
                and self.ctx.is_builtin("min", anchor=expr)
                and any(not a.star and self._drops_remainder(a.value, step, loop, depth + 1) for a in expr.args)
            ):
                return True
            text = " ".join(_code(self.ctx, expr).split())
            if f"- {step_text}" in text or f"-{step_text}" in text:
                return True
            if f"// {step_text}" in text or f"//{step_text}" in text or f"% {step_text}" in text:
                return True
        return False

    def _single_rows(self, step: cst.BaseExpression, loop: cst.For) -> bool:
        """A step the code sets to 1 at most (`blocks = 1`, `range(0, n, blocks)`): every slice
        `x[i:i + 1]` holds one row, the last one too."""
        path = self._paths.get(id(loop))
        if path is None:
            try:
                path = _loop_path(self.ctx, loop)
            except ValueError:
                return False
        size = integer_value(self.ctx, step, [*path, loop])
        return size is not None and size <= 1

    def _ceil_count(self, count: cst.BaseExpression, loop: cst.For) -> bool:
        """A number of batches rounded up: `ceil(n / bs)`, `(n + bs - 1) // bs`,
        `-(-n // bs)`, `n // bs + (n % bs > 0)`, `n // bs + 1`, or a name set to one."""
        for expr in [count, *self._assigned(count, loop)]:
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
                    left = "".join(_code(self.ctx, expr.left).split())
                    if "+" in left and left.rstrip(")").endswith("-1"):
                        return True  # (n + bs - 1) // bs
                if isinstance(expr.operator, cst.Add) and any(
                    self._quotient(side, loop) for side in (expr.left, expr.right)
                ):
                    return True  # n // bs + (n % bs > 0), n // bs + 1, full + bool(rest)
        return False

    def _quotient(self, expr: cst.BaseExpression, loop: cst.For) -> bool:
        """`n // bs`, or a name set to one or to `divmod(n, bs)` (`full, rest = divmod(n,
        bs)`): the number of full batches."""
        for value in [expr, *self._assigned(expr, loop)]:
            if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.FloorDivide):
                return True
            if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "divmod":
                if self.ctx.is_builtin("divmod", anchor=value):
                    return True
        return False

    def _assigned(self, expr: cst.BaseExpression, loop: cst.For) -> list[cst.BaseExpression]:
        """The values the enclosing function (or module) assigns to the name `expr`."""
        if not isinstance(expr, cst.Name):
            return []
        scope = self._scope(loop)
        values = _assignments(scope, expr.value)
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
        return _assignments(owner, expr.value)

    def _checks_divisibility(self, loop: cst.For, step: cst.BaseExpression | None) -> bool:
        """`assert n % bs == 0` (or `!= 0` with a raise) somewhere in the function."""
        if step is None:
            return False
        scope = self._scope(loop)
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

    def _scope(self, loop: cst.For) -> cst.CSTNode:
        """The function (or module) whose body holds `loop`."""
        known = self._scopes.get(id(loop))
        if known is not None:
            return known
        return self.ctx.enclosing_function() or self.ctx.module

    # -- the fix ----------------------------------------------------------------------------------

    def _fix(self, call: cst.Call, loop: cst.For, batching: Batching, consumer: Consumer) -> Fix | None:
        if batching.kind != "range" or loop.orelse is not None or loop.asynchronous is not None:
            return None
        if consumer.params is None or "mask" not in consumer.params:
            return None
        if any(a.star for a in call.args) or any(a.keyword is not None and a.keyword.value == "mask" for a in call.args):
            return None
        positional = [a for a in call.args if a.keyword is None]
        offset = 1 if consumer.params and consumer.params[0] in ("self", "cls") and isinstance(call.func, cst.Attribute) else 0
        if len(positional) + offset > consumer.params.index("mask"):
            return None
        source = _unwrap(loop.iter, self._resolver())
        assert isinstance(source, cst.Call) and isinstance(loop.target, cst.Name)
        start, stop, step = (a.value for a in source.args)
        if not (isinstance(start, cst.Integer) and start.value == "0") or source is not loop.iter:
            return None
        # Every use of the index is one of the ragged slices, passed straight to the call.
        arrays: list[str] = []
        for piece in batching.slices:
            if not isinstance(piece.value, cst.Name) or len(piece.slice) != 1:
                return None
            if not any(a.value is piece for a in call.args):
                return None
            if piece.value.value not in arrays:
                arrays.append(piece.value.value)
        index = loop.target.value
        if reads_name(loop.body, index, skip=batching.slices):
            return None
        if not _length_of(stop, arrays, self._assigned(stop, loop)):
            return None
        scope = self._scope(loop)
        names = {n.value for n in iter_subtree(scope) if isinstance(n, cst.Name)}
        batch_names = {a: f"{a}_batch" for a in arrays}
        mask = next((m for m in ("mask", "batch_mask") if m not in names), None)
        if mask is None or any(b in names for b in batch_names.values()):
            return None
        if len(arrays) == 1:
            target = f"{batch_names[arrays[0]]}, {mask}"
            data = arrays[0]
        else:
            target = f"({', '.join(batch_names[a] for a in arrays)}), {mask}"
            data = f"({', '.join(arrays)})"
        header = cst.parse_statement(f"for {target} in padded_batches({data}, {_code(self.ctx, step)}):\n    pass\n")
        assert isinstance(header, cst.For)
        body = loop.body.visit(_Rewrite(batching.slices, batch_names, call, mask))
        new_loop = loop.with_changes(target=header.target, iter=header.iter, body=body)
        return Fix(
            Applicability.UNSAFE,
            (Edit(loop, replacement=new_loop),),
            "Iterate `padded_batches` and pass the mask",
            imports=(ImportSpec("jaxlint.runtime", "padded_batches"),),
        )


class _Rewrite(cst.CSTTransformer):
    """Ragged slices become the padded batch names; the consumer call gets `mask=mask`."""

    def __init__(self, slices: list[cst.Subscript], names: dict[str, str], call: cst.Call, mask: str) -> None:
        super().__init__()
        self._slices = {id(s) for s in slices}
        self._names = names
        self._call = call
        self._mask = mask

    def leave_Subscript(self, original: cst.Subscript, updated: cst.Subscript) -> cst.BaseExpression:
        if id(original) in self._slices:
            assert isinstance(original.value, cst.Name)
            return cst.Name(self._names[original.value.value])
        return updated

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if original is not self._call:
            return updated
        template = cst.parse_expression(f"f({self._mask}={self._mask})")
        assert isinstance(template, cst.Call)
        args = list(updated.args)
        last = args[-1]
        if last.comma is cst.MaybeSentinel.DEFAULT:
            args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            return updated.with_changes(args=[*args, template.args[0]])
        # A trailing comma (one argument per line): add the mask the same way.
        return updated.with_changes(args=[*args, template.args[0].with_changes(comma=last.comma)])


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


def _returned_names(function: cst.FunctionDef) -> set[str]:
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
                params = frozenset(_lambda_params(node.params))
                stack.append((node.body, shadowed | params))
            else:
                yield node, shadowed


def _lambda_params(params: cst.Parameters) -> list[str]:
    """The names a lambda's parameters bind."""
    names = [p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)]
    for star in (params.star_arg, params.star_kwarg):
        if isinstance(star, cst.Param):
            names.append(star.name.value)
    return names


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
    assigns = [n for n in iter_subtree(loop.body, into_scopes=False) if isinstance(n, cst.Assign)]
    for _ in range(3):
        for node in assigns:
            if _fed_expr(node.value, batching):
                bound = {n for t in node.targets for n in target_names(t.target)}
                if (bound - batching.names) & free_names(node.value):
                    continue
                batching.names |= bound


def _assignments(scope: cst.CSTNode, name: str) -> list[cst.BaseExpression]:
    """The values that assignments in `scope` (not its nested defs) give `name`."""
    return [
        node.value
        for node in iter_subtree(scope, into_scopes=False)
        if isinstance(node, cst.Assign) and any(name in target_names(t.target) for t in node.targets)
    ]


def _fed_expr(expr: cst.BaseExpression, batching: Batching) -> bool:
    if free_names(expr) & batching.names:
        return True
    ids = {id(s) for s in batching.slices} | {id(d) for d in batching.draws}
    return any(id(n) in ids for n in iter_subtree(expr))


def _skips_short(loop: Loop) -> bool:
    """`if len(x) < bs: continue` / `if x.shape[0] != bs: break`: short batches never reach
    the call."""
    for node in iter_subtree(loop.body, into_scopes=False):
        if isinstance(node, cst.If):
            test = cst.Module([]).code_for_node(node.test)
            if ("len(" in test or ".shape" in test) and any(
                isinstance(n, (cst.Continue, cst.Break, cst.Return, cst.Raise)) for n in iter_subtree(node.body, into_scopes=False)
            ):
                return True
    return False


def _length_of(stop: cst.BaseExpression, arrays: list[str], assigned: list[cst.BaseExpression]) -> bool:
    """`len(x)` or `x.shape[0]` for one of the sliced arrays (or a name set to that)."""
    for expr in [stop, *assigned]:
        text = "".join(cst.Module([]).code_for_node(expr).split())
        if any(text in (f"len({a})", f"{a}.shape[0]") for a in arrays):
            return True
    return False


def _drop_keyword(cut: str) -> str:
    """The keyword that drops the smaller last batch of the batching `cut` describes."""
    for keyword in ("drop_last_batch", "drop_last"):
        if f"`{keyword}=True`" in cut:
            return keyword
    return "drop_remainder"


def _code(ctx, node: cst.CSTNode) -> str:  # type: ignore[no-untyped-def]
    return " ".join(ctx.module.code_for_node(node).split())


def _short(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _drop_remainder_fix(drop: tuple[cst.Call, str]) -> Fix:
    """`keyword=True` added to the batching call of a shuffled (training) stream: every batch
    is full, the last few examples of each pass are skipped."""
    call, keyword = drop
    args = list(call.args)
    last = args[-1]
    added = cst.Arg(
        keyword=cst.Name(keyword),
        value=cst.Name("True"),
        equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")),
    )
    trailing = last.comma.whitespace_after if isinstance(last.comma, cst.Comma) else None
    if isinstance(trailing, cst.ParenthesizedWhitespace):
        # One argument a line, with a trailing comma: the new one gets a line of its own at the
        # arguments' indentation; the last one keeps its comma and the comment after it.
        before = args[-2].comma.whitespace_after if len(args) > 1 and isinstance(args[-2].comma, cst.Comma) else call.whitespace_before_args
        if not isinstance(before, cst.ParenthesizedWhitespace):
            return _plain_fix(call, keyword, args, added)
        args[-1] = last.with_changes(comma=last.comma.with_changes(whitespace_after=trailing.with_changes(last_line=before.last_line)))  # type: ignore[union-attr]
        added = added.with_changes(
            comma=cst.Comma(
                whitespace_after=cst.ParenthesizedWhitespace(indent=trailing.indent, last_line=trailing.last_line)
            )
        )
        return _keyword_fix(call, keyword, [*args, added])
    return _plain_fix(call, keyword, args, added.with_changes(comma=last.comma))


def _plain_fix(call: cst.Call, keyword: str, args: list[cst.Arg], added: cst.Arg) -> Fix:
    """The new argument after the last, `, keyword=True`, or on a line of its own where the
    arguments before are one a line (without their comments)."""
    between: cst.Comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    if len(args) > 1 and isinstance(args[-2].comma, cst.Comma):
        if not any(isinstance(n, cst.Comment) for n in iter_subtree(args[-2].comma)):
            between = args[-2].comma
    args[-1] = args[-1].with_changes(comma=between)
    return _keyword_fix(call, keyword, [*args, added])


def _keyword_fix(call: cst.Call, keyword: str, args: list[cst.Arg]) -> Fix:
    return Fix(
        Applicability.UNSAFE,
        (Edit(call, replacement=call.with_changes(args=args)),),
        f"Pass `{keyword}=True` to the shuffled training stream's batching",
    )

