"""## What it does

Finds batches cut so that the last one can be smaller, fed to a jitted function in the same
loop: `x[i:min(i + bs, n)]` over `range(0, n, bs)` (with `--preview`, also `x[i:i + bs]`:
see below), `x[b * bs:(b + 1) * bs]` over
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
    end = min(i + batch_size, len(xs))
    total += loss_fn(params, xs[i:end], ys[i:end])
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
`mask`, or a batch bound to itself with rows joined after it: `chunk = np.concatenate([chunk,
np.zeros((bs - len(chunk), 3))])`, `np.vstack`), when it skips short batches (`if len(x) < bs: continue`), when the function checks
that `bs` divides the data (`assert n % bs == 0`), when the code shows both sizes and `bs`
divides `n` (`range(0, n_keys, 100)`, or `range(ceil(n / bs))` and the other rounded-up
counts, with `n_keys` a literal, a module constant, the default
the script declares for a flag, `add_argument("--n-keys", default=2000)`, or what every call
of the function in the file passes; the rows of a parameter, `n = features.shape[0]`, when
every call passes an array whose rows the code shows, `data["a"][:1000]` or `jnp.ones(4096)`;
`x.shape[0]` or `len(x)` of what a function of the file
returns when asked for that many by a parameter counting what it is named for,
`sample_random_points(h, w, num_points)`; a loader over a library dataset of a known size,
the library table's `dataset-sizes`: `DataLoader(datasets.MNIST(root, train=True),
batch_size=32)` has 60,000 examples; or a TensorFlow Datasets split of a known size,
`tfds-sizes`, mapped or shuffled before `.batch(bs)`: `tfds.builder("cifar100")
.as_dataset("test")` has 10,000), when a loop inside cuts the ragged chunk again along
its first axis (`chunk[j * bs:(j + 1) * bs]`: that loop's cut decides the batch's shape),
and when the consumer is not jitted. For
tf.data it stays silent when `drop_remainder` is passed anything but `False` (keyword, or the
second positional argument of `batch` / fourth of `padded_batch`; a variable counts, since
the linter cannot know it), when the dataset is `.repeat()`ed before `.batch` (an endless
stream has no last batch; `.repeat(n)` with a literal `n` is still finite), for
`.batch(1)`, when `.take(n)` / `.skip(n)` or a method it does not know follows the batching,
after `.unbatch()`, and when a function mapped over the batches (`map(pad_batch, ds)`) is
spelled with `pad` or `mask`. Beyond those tables it cannot know the number of examples: a
split whose size happens to be a multiple of the batch size (a dataset read from files, in
batches that divide it) is reported too.

A slice of an array over `range(0, n, bs)` with a plain end, `x[i:i + bs]`, the chunks of
`np.array_split(x, k)` and of `np.split(x, range(bs, n, bs))`, and the generators and lists
made of them (in this module or another), are reported only with `--preview` (`Batching.guessed`): the
last batch is smaller only if `n` is not a multiple of `bs`, and an array cut in a loop is
often sized to fit (chains per device, a capped subset, a few prompts that make one batch).
On the ecosystem check's dev split this shape was right 3 times in 9. It is reported
without `--preview` when the code shows the remainder: an end clamped to the data
(`x[i:min(i + bs, n)]`, or `end = min(i + bs, n)`), or both sizes known and `bs` leaving a
remainder (`range(0, 1000, 128)`, module constants, a flag's default).

## Fix safety

The fix rewrites `for i in range(0, len(x), bs)` with slices `x[i:i + bs]` (or `x[i:min(i + bs,
len(x))]`) passed straight
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

import libcst as cst

from jaxlint._frequency import loop_evidence
from jaxlint._device import Consumer
from jaxlint._nodes import iter_subtree, one_line, reads_name, shorten
from jaxlint._ragged import Batching
from jaxlint._rule import Applicability, Edit, Fix, ImportSpec, Rule


__all__ = ["PadFinalBatch"]


class PadFinalBatch(Rule):
    CODE = "JL004"
    SLUG = "pad-final-batch"
    MESSAGE = "the last batch is smaller and recompiles the jitted function it is fed to"
    FIX = Applicability.UNSAFE
    TOKENS = ("jit", "pmap")

    def __init__(self, ctx, options=None) -> None:  # type: ignore[no-untyped-def]
        super().__init__(ctx, options)
        self._reported: set[int] = set()

    def visit_Call(self, node: cst.Call) -> None:
        ctx = self.ctx
        found = ctx.device.looped_consumer(node, (cst.For, cst.While, cst.ListComp, cst.GeneratorExp), instances=True)
        callee = shorten(ctx.module.code_for_node(node.func))
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
            jitted = f"the jitted `{shorten(forwards[0].inner)}`, which `{callee}` hands it to,"
        for loop in reversed(loops):
            batching = ctx.batches.batching(loop)
            if batching is None or id(loop) in self._reported:
                continue
            if batching.guessed and not self.preview:
                continue  # whether the last batch is smaller depends on a length the code does not show
            if not any(batching.feeds(value) for value in passed):
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
        batches = self.ctx.batches
        source = batches.unwrap(loop.iter)
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
        if not _length_of(stop, arrays, batches.assigned(stop, loop)):
            return None
        scope = batches.scope(loop)
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
        header = cst.parse_statement(f"for {target} in padded_batches({data}, {one_line(step, self.ctx.module)}):\n    pass\n")
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

