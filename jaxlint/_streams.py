"""What a loop iterates, as far as batch shapes go (read with libcst, for the rule that lints a
file: pad-final-batch): tf.data, grain and Hugging Face pipelines, data loaders and chunkers of
the library table, followed through assignments, functions and methods of the file, the
parameters every caller fills, and what other modules of the project give or pass
(`Project.built`'s `ragged`, `Project.passed_ragged`). `Streams.stream(expr, path)` says
whether `expr` yields batches whose last one can be smaller (`Stream.ragged`), and where a fix
could drop it. `_batches` reads the same facts with `ast` for the project summaries.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import libcst as cst

from . import _batches, _jaxapi
from ._callgraph import call_arguments, method_call_arguments, positional_params
from ._nodes import free_names, iter_subtree, keyword_argument
from ._scope import target_names

if TYPE_CHECKING:
    from ._context import Loop


__all__ = ["Stream", "Streams", "mentions_padding"]

_PADDING_HINTS = ("pad", "bucket", "mask")


def mentions_padding(loop: Loop | cst.CSTNode, name: str | None = None) -> bool:
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


# Dataset methods that keep a batched stream's batches (their number may change, not their size).
_KEEPS_BATCHES = _batches.KEEPS_BATCHES
# Data loaders that batch like `.batch()`: a smaller last batch unless the keyword they map
# to is true (`drop_last=True`); the library table's `data-loaders`.
_LOADERS = _jaxapi.DATA_LOADERS
# Wrappers that iterate their first argument unchanged (the library table's `batch-wrappers`).
_PASS_THROUGH = _jaxapi.BATCH_WRAPPERS


@dataclass(frozen=True)
class Stream:
    """What a tf.data pipeline yields, as far as batch shapes go."""

    ragged: cst.Call | None = None  # the `.batch(...)` that keeps a smaller last batch
    infinite: bool = False  # `.repeat()`ed before any batching: every batch is full
    loader: bool = False  # a data loader (`drop_last`), not a tf.data pipeline
    shuffled: bool = False  # shuffled on the way: a training stream (`.shuffle(n)`, `shuffle=True`)
    # The call of the file to give `keyword=True` that drops the smaller last batch: the
    # `.batch(...)`, the loader, the batching operation (None: none the fix can edit).
    drop: tuple[cst.Call, str] | None = None
    hf: bool = False  # a Hugging Face dataset: `.iter(batch_size=bs)`, `drop_last_batch`
    chunks: bool = False  # groups of `n` items of an iterable (`itertools.batched(rows, n)`)
    imported: bool = False  # given by a function of another module (the project's `ragged`)
    passed: str | None = None  # the parameter other modules pass it as (`Project.passed_ragged`)
    # Before batching: how many examples it holds, when a library dataset of a known size
    # (`tfds.load("mnist", split="train")`); or for a `tfds.builder(name)`, its splits' sizes.
    examples: int | None = None
    splits: tuple[tuple[str, int], ...] = ()


class Streams:
    """Follows tf.data pipelines through assignments in one file: which iterables yield the
    batches of a `.batch(bs)` without `drop_remainder=True` over a finite dataset."""

    def __init__(self, ctx) -> None:  # type: ignore[no-untyped-def]
        self.ctx = ctx
        self._scopes: dict[int, tuple[dict[int, int], dict[str, list[tuple[int, cst.CSTNode | None, int]]]]] = {}
        # While a function's returned pipeline is read for one call (`_returned`): the function,
        # that call and the path to it, so its parameters are what this call passes.
        self._calling: tuple[cst.FunctionDef, cst.Call, list[cst.CSTNode]] | None = None

    def stream(self, expr: cst.BaseExpression, path: list[cst.CSTNode], depth: int = 0) -> Stream | None:
        """The stream `expr` (read at the end of `path`, its ancestors) iterates; None when it is
        not known to be a tf.data dataset."""
        if depth > 60:  # a function returning its own call
            return None
        ctx = self.ctx
        if isinstance(expr, cst.Name):
            return self._name(expr, path, depth)
        if isinstance(expr, cst.Subscript):
            return self._item(expr, path, depth)
        if not isinstance(expr, cst.Call):
            return None
        func = expr.func
        name = ctx.resolve(func, path, anchor=expr)
        positional = [a.value for a in expr.args if a.keyword is None and not a.star]
        if name is not None:
            if name in _PASS_THROUGH or name.split(".")[0] == "tqdm":
                return self.stream(positional[0], path, depth + 1) if positional else None
            if name.startswith(_jaxapi.DATASET_MODULES):
                return self._source(expr, name)
            if name.startswith(_jaxapi.HF_DATASETS):
                return Stream(hf=True)
            if name in _LOADERS:
                position = _jaxapi.LOADER_BATCH_SIZE_POSITIONS.get(name, 1)
                stream = _loader(expr, _LOADERS[name], position=position)
                if stream is not None and stream.ragged is not None and self._fills_batches(expr, position, path):
                    return Stream(loader=True)
                return stream
            if name in _jaxapi.CHUNKERS:
                return _chunks(expr, _jaxapi.CHUNKERS[name])
            if name in _jaxapi.OPERATION_LOADERS:
                return self._operations(expr, _jaxapi.OPERATION_LOADERS[name], path)
            return self._imported(expr, name)
        if isinstance(func, cst.Name) and self._loader_class(func, path):
            stream = _loader(expr)
            if stream is not None and not self._takes_drop_last(func, path):
                stream = replace(stream, drop=None)
            return stream
        if isinstance(func, cst.Name):
            if func.value in ("iter", "enumerate") and ctx.is_builtin(func.value, path, anchor=expr):
                return self.stream(positional[0], path, depth + 1) if positional else None
            if func.value == "map" and len(expr.args) == len(positional) == 2 and ctx.is_builtin("map", path, anchor=expr):
                # `map(lambda b: Batch(b["image"]), ds)`: one result per batch, of its size,
                # unless the function pads.
                if self._pads(positional[0], path):
                    return None
                return self.stream(positional[1], path, depth + 1)
            return self._returned(expr, path, depth)
        if not isinstance(func, cst.Attribute):
            return None
        if isinstance(func.value, cst.Name) and func.value.value == "self":
            return self._returned(expr, path, depth)  # `self.get_loader(...)`: a method of the class
        inner = self.stream(func.value, path, depth + 1)
        if inner is None:
            return None
        method = func.attr.value
        if inner.hf and inner.ragged is None and method in ("iter", "batch"):
            return self._hf_batch(expr, inner)
        if method in ("batch", "padded_batch") and not inner.hf:
            return self._batch(expr, method, inner, path)
        if method == "as_dataset" and inner.splits:
            split = positional[0] if positional else keyword_argument(expr, "split")
            return Stream(examples=_split_size(dict(inner.splits), split))
        if method == "repeat":
            count = positional[0] if positional else keyword_argument(expr, "count")
            if count is None or not (isinstance(count, cst.Integer) and int(count.value) > 0):
                return replace(inner, infinite=inner.infinite or inner.ragged is None)
            return inner
        if method == "shuffle":
            return replace(inner, shuffled=True)
        if method == "unbatch":
            return Stream(None, inner.infinite)
        if inner.ragged is None:
            # before batching: `builder.as_dataset(...)`, `ds.take(n)`, ...; a map or shuffle
            # keeps the number of examples, a filter or take does not
            return inner if method in _KEEPS_EXAMPLES else replace(inner, examples=None, splits=())
        return inner if method in _KEEPS_BATCHES else None

    def _imported(self, call: cst.Call, name: str, element: int = -1) -> Stream | None:
        """A call of a function of another module of the project that gives batches whose last
        one can be smaller (the project summary's `ragged`: a data loader or dataset keeping it,
        a generator of `x[i:i + bs]` slices); `element`: the item of a returned tuple."""
        project = self.ctx.project
        built = project.built(name, self.ctx.module_name) if project is not None else None
        if built is None or element >= len(built) or (element < 0 and len(built) != 1):
            return None
        return Stream(call, imported=True) if built[max(element, 0)] == "ragged" else None

    def _item(self, expr: cst.Subscript, path: list[cst.CSTNode], depth: int) -> Stream | None:
        """`get_dataset(...)[0]`: an item of the tuple a function of the file returns."""
        value = expr.value
        if len(expr.slice) != 1 or not isinstance(expr.slice[0].slice, cst.Index):
            return None
        index = expr.slice[0].slice.value
        if not (isinstance(index, cst.Integer) and isinstance(value, cst.Call) and isinstance(value.func, cst.Name)):
            return None
        if self.ctx.resolve(value.func, path, anchor=value) is not None:
            return None
        return self._returned(value, path, depth + 1, int(index.value))

    def _operations(self, call: cst.Call, keyword: str, path: list[cst.CSTNode]) -> Stream | None:
        """`grain.python.DataLoader(..., operations=[..., grain.python.Batch(bs)])`: ragged
        when the list (spelled out in the call, or a name assigned one) holds a batching
        operation that keeps the smaller last batch; None when it holds none or the linter
        cannot read the list."""
        operations = keyword_argument(call, keyword)
        at = path
        shared = isinstance(operations, cst.Name)  # a list other loaders may be given too
        if isinstance(operations, cst.Name):
            found = self.binding(operations, path)
            if found is None or found[2] >= 0:
                return None
            operations, at = found[0], found[1][:-1]  # type: ignore[assignment]
        if not isinstance(operations, (cst.List, cst.Tuple)):
            return None
        for element in operations.elements:
            op = element.value
            if not isinstance(op, cst.Call):
                continue
            name = self.ctx.resolve(op.func, at, anchor=op)
            if name not in _jaxapi.BATCH_OPERATIONS:
                continue
            if any(a.star for a in op.args):
                return Stream(loader=True)
            positional = [a.value for a in op.args if a.keyword is None]
            size = positional[0] if positional else keyword_argument(op, "batch_size")
            drop = positional[1] if len(positional) > 1 else keyword_argument(op, _jaxapi.BATCH_OPERATIONS[name])
            if drop is not None and not (isinstance(drop, cst.Name) and drop.value == "False"):
                return Stream(loader=True)
            if size is None or (isinstance(size, cst.Integer) and size.value == "1"):
                return Stream(loader=True)
            shuffled = self._shuffling_sampler(keyword_argument(call, "sampler"), path)
            drop = None if shared else (op, _jaxapi.BATCH_OPERATIONS[name])
            return Stream(op, loader=True, shuffled=shuffled, drop=drop)  # type: ignore[arg-type]
        return None

    def _shuffling_sampler(self, sampler: cst.BaseExpression | None, path: list[cst.CSTNode]) -> bool:
        """`sampler=grain.IndexSampler(..., shuffle=True)`, spelled out or a name assigned it."""
        if isinstance(sampler, cst.Name):
            found = self.binding(sampler, path)
            sampler = found[0] if found is not None and found[2] < 0 else None  # type: ignore[assignment]
        return isinstance(sampler, cst.Call) and _true(keyword_argument(sampler, "shuffle"))

    def _loader_class(self, name: cst.Name, path: list[cst.CSTNode]) -> bool:
        """A class of this file that subclasses a data loader (`class NumpyLoader(DataLoader)`)."""
        bindings = self.ctx.bindings.of(name.value, [*path, name])
        if len(bindings) != 1 or not isinstance(bindings[0].node, cst.ClassDef):
            return False
        node = bindings[0].node
        return any(
            self.ctx.resolve(base.value, list(bindings[0].path), anchor=node) in _LOADERS for base in node.bases
        )

    def _takes_drop_last(self, name: cst.Name, path: list[cst.CSTNode]) -> bool:
        """Whether the loader class of the file `name` names passes `drop_last` on: it keeps
        the loader's own `__init__`, or its `__init__` takes `drop_last` or `**kwargs`."""
        node = self.ctx.bindings.of(name.value, [*path, name])[0].node
        assert isinstance(node, cst.ClassDef)
        inits = [
            s for s in getattr(node.body, "body", ())
            if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"
        ]
        if not inits:
            return True
        params = inits[0].params
        return isinstance(params.star_kwarg, cst.Param) or any(
            p.name.value == "drop_last" for p in (*params.params, *params.kwonly_params)
        )

    def _fills_batches(self, call: cst.Call, position: int, path: list[cst.CSTNode]) -> bool:
        """Whether the loader `call` batches a library dataset of a known size (the library
        table's `dataset-sizes`: `datasets.MNIST(root, train=True)`, spelled in the call or
        assigned to the name it is given) with a batch size the code shows that divides it:
        every batch is full (MNIST's 60,000 training images in batches of 32). A dataset or a
        batch size that is a parameter of the function around the loader is what every call of
        the function in the file passes (`get_loader(train_set, batch_size=32)`), each dataset
        with each batch size."""
        from ._frequency import integer_value

        positional = [a.value for a in call.args if a.keyword is None and not a.star]
        dataset = positional[0] if positional else keyword_argument(call, "dataset")
        size = positional[position] if len(positional) > position else keyword_argument(call, "batch_size")
        if dataset is None or size is None:
            return False
        batches = [integer_value(self.ctx, value, at) for value, at in self.passed_values(size, [*path, call])]
        if not batches or any(batch is None or batch <= 1 for batch in batches):
            return False
        given = self.passed_values(dataset, [*path, call])
        if not given:
            return False
        for value, at in given:
            examples = self._dataset_size(value, at[:-1] if at and at[-1] is value else at)
            if examples is None or any(examples % batch for batch in batches):  # type: ignore[operator]
                return False
        return True

    def passed_values(self, expr: cst.BaseExpression, path: list[cst.CSTNode]) -> list[tuple[cst.BaseExpression, list[cst.CSTNode]]]:
        """The values `expr` (read at the end of `path`) takes: itself, or for a parameter of
        the function around it, what every call of the function in the file passes (or the
        default it leaves); empty when a call passes nothing the linter can read."""
        from ._bindings import Kind
        from ._callgraph import parameter_calls, passed_argument

        if not isinstance(expr, cst.Name):
            return [(expr, path)]
        bindings = self.ctx.bindings.of(expr.value, path)
        if len(bindings) != 1 or bindings[0].kind is not Kind.PARAM:
            return [(expr, path)]
        param = bindings[0].node
        if self._calling is not None and isinstance(param, cst.Param) and not param.star:
            function, call, at = self._calling
            if any(p is param for p in function.params.params):
                if any(a.star for a in call.args):
                    return []
                value = passed_argument(call, expr.value, positional_params(function))
                value = param.default if value is None else value
                return [] if value is None else [(value, at)]
        found = parameter_calls(self.ctx, param, bindings[0].path)
        if found is None:
            return []
        param, calls = found
        values = []
        for passed, at in calls:
            value = param.default if passed is None else passed
            if value is None:
                return []
            values.append((value, list(at)))
        return values

    def _dataset_size(self, dataset: cst.BaseExpression, path: list[cst.CSTNode]) -> int | None:
        """The number of examples of a library dataset of a known size (`dataset-sizes`),
        spelled at the end of `path` or assigned to the name there; None when unknown."""
        at = path
        if isinstance(dataset, cst.Name):
            found = self.binding(dataset, path)
            if found is None or found[0] is None or found[2] >= 0:
                return None
            dataset, at = found[0], found[1][:-1]  # type: ignore[assignment]
        if not isinstance(dataset, cst.Call):
            return None
        sizes = _jaxapi.DATASET_SIZES.get(self.ctx.resolve(dataset.func, at, anchor=dataset) or "")
        if sizes is None or any(a.star for a in dataset.args):
            return None
        args = [a.value for a in dataset.args if a.keyword is None]
        train = args[1] if len(args) > 1 else keyword_argument(dataset, "train")
        if train is None or (isinstance(train, cst.Name) and train.value == "True"):
            split = "train"
        elif isinstance(train, cst.Name) and train.value == "False":
            split = "test"
        else:
            return None  # a flag the linter cannot read: either split
        return sizes.get(split)

    def _pads(self, function: cst.BaseExpression, path: list[cst.CSTNode]) -> bool:
        """Whether the function mapped over a stream pads or masks its batches (its name or
        body mentions `pad`, `bucket` or `mask`)."""
        if mentions_padding(function):  # type: ignore[arg-type]
            return True
        if isinstance(function, cst.Name):
            found = self.ctx.device._local_def(function.value, path)
            if found is not None and found[0] is not None:
                return mentions_padding(found[0])
        return False

    def _source(self, call: cst.Call, name: str) -> Stream | None:
        """`tf.data.Dataset.from_tensor_slices(x)`, `tfds.load(...)`, `tfds.builder(...)`."""
        if name == "tensorflow_datasets.load":
            size = keyword_argument(call, "batch_size")
            if size is not None:
                # `batch_size=-1`: the whole split as tensors, not a dataset; `batch_size=n`:
                # batches of n, the last one smaller.
                if isinstance(size, (cst.Integer, cst.UnaryOperation)):
                    return None
                return Stream(call)
        if name in ("tensorflow_datasets.load", "tensorflow_datasets.builder"):
            known = _tfds_sizes(call)
            if known is not None and name.endswith(".builder"):
                return Stream(splits=tuple(known.items()))
            if known is not None:
                return Stream(examples=_split_size(known, keyword_argument(call, "split")))
        return Stream()

    def _tfds_split(self, call: cst.Call, name: str, element: int) -> Stream:
        """The split a tuple target takes from `tfds.load(...)` (`element`: its position, or
        `_NESTED` for one inside a nested target): `train, test = tfds.load(name,
        split=["train", "test"])`, `ds, info = tfds.load(name, split="train", with_info=True)`,
        `(train, test), info = tfds.load(..., with_info=True)`; with the split's size when the
        table knows the dataset."""
        if name != "tensorflow_datasets.load":
            return Stream()
        split = keyword_argument(call, "split")
        outer, inner = (element // _NESTED - 1, element % _NESTED) if element >= _NESTED else (element, None)
        if _true(keyword_argument(call, "with_info")):
            if outer != 0:
                return Stream()  # the info object
            outer, inner = (inner, None) if inner is not None else (-1, None)
        elif inner is not None:
            return Stream()
        if outer >= 0:
            if not isinstance(split, (cst.List, cst.Tuple)) or outer >= len(split.elements):
                return Stream()
            split = split.elements[outer].value
        elif isinstance(split, (cst.List, cst.Tuple)):
            return Stream()
        if keyword_argument(call, "batch_size") is not None:
            return Stream()
        known = _tfds_sizes(call)
        return Stream(examples=_split_size(known, split)) if known is not None else Stream()

    def _hf_batch(self, call: cst.Call, inner: Stream) -> Stream:
        """A Hugging Face dataset's `.iter(batch_size=bs)` or `.batch(bs)`: ragged unless
        `drop_last_batch` is passed anything but `False`."""
        positional = [a.value for a in call.args if a.keyword is None and not a.star]
        size = positional[0] if positional else keyword_argument(call, "batch_size")
        drop = positional[1] if len(positional) > 1 else keyword_argument(call, "drop_last_batch")
        if any(a.star for a in call.args) or size is None or (isinstance(size, cst.Integer) and size.value == "1"):
            return inner
        if drop is not None and not (isinstance(drop, cst.Name) and drop.value == "False"):
            return inner
        return Stream(call, hf=True)

    def _batch(self, call: cst.Call, method: str, inner: Stream, path: list[cst.CSTNode] | None = None) -> Stream:
        positional = [a.value for a in call.args if a.keyword is None and not a.star]
        size = positional[0] if positional else keyword_argument(call, "batch_size")
        index = 1 if method == "batch" else 3
        drop = positional[index] if len(positional) > index else keyword_argument(call, "drop_remainder")
        if drop is not None and not (isinstance(drop, cst.Name) and drop.value == "False"):
            return inner  # `drop_remainder=True`, or a value the linter cannot know
        if inner.infinite or (isinstance(size, cst.Integer) and size.value == "1") or size is None:
            return inner
        if any(a.star for a in call.args):
            return inner
        if inner.examples is not None and path is not None:
            from ._frequency import integer_value

            batch = integer_value(self.ctx, size, [*path, call])
            if batch is not None and batch > 1 and inner.examples % batch == 0:
                return Stream(None, inner.infinite, shuffled=inner.shuffled)  # every batch is full
        return Stream(call, inner.infinite, shuffled=inner.shuffled, drop=(call, "drop_remainder"))

    # -- names and functions --------------------------------------------------------------------

    def _name(self, read: cst.Name, path: list[cst.CSTNode], depth: int) -> Stream | None:
        found = self.binding(read, path)
        if found is None:
            return self._parameter(read, path, depth)
        value, value_path, element = found
        if value is None:
            return None
        if element >= 0:
            scope_path = value_path[:-1]
            if not isinstance(value, cst.Call):
                return None
            callee = self.ctx.resolve(value.func, scope_path, anchor=value)
            if callee is None and isinstance(value.func, cst.Name):
                return self._returned(value, scope_path, depth + 1, element)  # `ds, names = get_dataset()`
            if callee is not None and not callee.startswith("tensorflow_datasets."):
                return self._imported(value, callee, element)  # `train, test = get_loaders()` of another module
            if not (callee or "").startswith("tensorflow_datasets."):
                return None
            return self._tfds_split(value, callee, element)  # type: ignore[arg-type]
        stream = self.stream(value, value_path, depth + 1)  # type: ignore[arg-type]
        if stream is not None and stream.shuffled and not _unconditional(value_path[-2], value):
            # `if training: ds = ds.shuffle(n)`: the batching after it may serve both
            stream = replace(stream, shuffled=False)
        return stream

    def _parameter(self, read: cst.Name, path: list[cst.CSTNode], depth: int) -> Stream | None:
        """`def evaluate(model, loader): for x, y in loader: ...`: the stream every call of the
        function (or method, on any object) in this file passes, when each passes one that
        keeps a smaller last batch."""
        owner = self.ctx.binding_owner(read.value, [*path, read])
        if not isinstance(owner, cst.FunctionDef):
            return None
        calls = call_arguments(self.ctx, owner, read.value)
        if calls is None:
            # a method, `def evaluate(self, loader)` called as `self.evaluate(val_loader)`
            calls = method_call_arguments(self.ctx, owner, read.value)
        if calls is None:
            return self._passed_elsewhere(read.value, owner, path)
        if not calls or any(passed is None for passed, _ in calls):
            return None
        streams = [self.stream(passed, read_at, depth + 1) for passed, read_at in calls]  # type: ignore[arg-type]
        if any(stream is None or stream.ragged is None for stream in streams):
            return None
        return replace(streams[0], drop=None)  # built once for several callers, or elsewhere

    def _passed_elsewhere(self, name: str, function: cst.FunctionDef, path: list[cst.CSTNode]) -> Stream | None:
        """`def fit(params, loader)`, a top-level function no code of this file calls, where
        every call from other modules passes a loader or dataset keeping a smaller last batch
        (`Project.passed_ragged`: `fit(params, DataLoader(ds, batch_size=64))` in main.py)."""
        project = self.ctx.project
        if project is None or self.ctx.module_name is None or not any(n is function for n in self.ctx.module.body):
            return None
        known = self.ctx.calls.function(function)
        if known is None or known.sites or known.uses:
            return None
        params = positional_params(function)
        if name not in params or not project.passed_ragged(f"{self.ctx.module_name}.{function.name.value}", params.index(name)):
            return None
        return Stream(cst.Call(func=cst.Name(name)), imported=True, passed=name)  # its batching is elsewhere

    def binding(
        self, read: cst.Name, path: list[cst.CSTNode]
    ) -> tuple[cst.CSTNode | None, list[cst.CSTNode], int] | None:
        """The last assignment to `read` before it is read at the end of `path`, in its
        function (or module): the value (None when it is not a plain assignment), the path to
        read the value at (ending with the value), and the tuple element it binds (-1: all)."""
        name = read.value
        owner = self.ctx.binding_owner(name, [*path, read])
        if not isinstance(owner, (cst.FunctionDef, cst.Module)):
            return None
        scope_path = _scope_path(path, owner)
        if scope_path is None:
            return None
        order, bindings = self._scope(owner)
        # The position of the statement reading `name`, in the scope's source order.
        here = next((order[id(n)] for n in reversed([*path, read]) if id(n) in order), None)
        if here is None:
            return None
        found = [b for b in bindings.get(name, []) if b[0] < here]
        if not found:
            return None
        _, value, element = found[-1]
        return value, [*scope_path, value] if value is not None else scope_path, element  # type: ignore[list-item]

    def _returned(
        self, call: cst.Call, path: list[cst.CSTNode], depth: int, element: int = -1
    ) -> Stream | None:
        """`get_batches()` where `def get_batches` in this file returns a dataset (`element`:
        the item of a returned tuple, `ds, names = get_dataset()`), or `self.get_batches()`
        where the enclosing class's method does. A loader built with the
        function's `**kwargs` (`def numpy_loader(ds, **kwargs): return DataLoader(ds,
        collate_fn=..., **kwargs)`) takes its keywords from `call`."""
        func = call.func
        if isinstance(func, cst.Attribute):
            found = _method(func.attr.value, path)
        else:
            assert isinstance(func, cst.Name)
            found = self.ctx.device._local_def(func.value, path)
        if found is None or found[0] is None:
            return None
        function, outer = found
        returns = [n for n in iter_subtree(function.body, into_scopes=False) if isinstance(n, cst.Return)]
        if len(returns) != 1 or returns[0].value is None or not isinstance(function.body, cst.IndentedBlock):
            return None
        function_path = [*outer, function, function.body, returns[0]]
        value = returns[0].value
        if element >= 0:
            if not isinstance(value, cst.Tuple) or element >= len(value.elements):
                return None
            if any(isinstance(e, cst.StarredElement) for e in value.elements[: element + 1]):
                return None
            value = value.elements[element].value
        forwarded = _forwarded_loader(self.ctx, function, value, function_path)
        if forwarded is not None:
            return _loader(value, forwarded, call)  # type: ignore[arg-type]
        calling, self._calling = self._calling, (function, call, [*path, call])
        try:
            stream = self.stream(value, function_path, depth + 1)
        finally:
            self._calling = calling
        # A pipeline a function of the file builds may serve its other callers (an evaluation).
        return replace(stream, drop=None) if stream is not None else None

    def _scope(self, scope: cst.CSTNode) -> tuple[dict[int, int], dict[str, list[tuple[int, cst.CSTNode | None, int]]]]:
        """Source order of the scope's nodes, and every binding of each name: (position, the
        assigned value or None when it is not a plain assignment, the tuple element or -1)."""
        cached = self._scopes.get(id(scope))
        if cached is not None:
            return cached
        order: dict[int, int] = {}
        bindings: dict[str, list[tuple[int, cst.CSTNode | None, int]]] = {}
        nodes = list(iter_subtree(scope, into_scopes=False))
        for index, node in enumerate(nodes):
            order[id(node)] = index
        for index, node in enumerate(nodes):
            if isinstance(node, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
                index = _end(node, order)  # the value is read before the names are bound
            elif isinstance(node, (cst.For, cst.CompFor)):
                index = _end(node.target, order)
            if node is not scope and isinstance(node, (cst.FunctionDef, cst.ClassDef)):
                bindings.setdefault(node.name.value, []).append((index, None, -1))
            elif isinstance(node, cst.Assign):
                for target in node.targets:
                    if isinstance(target.target, cst.Name):
                        bindings.setdefault(target.target.value, []).append((index, node.value, -1))
                    elif isinstance(target.target, (cst.Tuple, cst.List)):
                        for position, element in enumerate(target.target.elements):
                            if isinstance(element.value, cst.Name):
                                bindings.setdefault(element.value.value, []).append((index, node.value, position))
                            elif isinstance(element.value, (cst.Tuple, cst.List)):
                                # `(train, test), info = tfds.load(..., with_info=True)`
                                for inner, item in enumerate(element.value.elements):
                                    if isinstance(item.value, cst.Name):
                                        bound_at = _NESTED * (position + 1) + inner
                                        bindings.setdefault(item.value.value, []).append((index, node.value, bound_at))
                                    else:
                                        for bound in target_names(item.value):
                                            bindings.setdefault(bound, []).append((index, None, -1))
                            else:
                                for bound in target_names(element.value):
                                    bindings.setdefault(bound, []).append((index, None, -1))
            elif isinstance(node, (cst.AugAssign, cst.AnnAssign, cst.For, cst.CompFor, cst.AsName, cst.NamedExpr)):
                target = node.name if isinstance(node, cst.AsName) else node.target
                value = node.value if isinstance(node, cst.AnnAssign) else None
                for bound in target_names(target):
                    bindings.setdefault(bound, []).append((index, value, -1))
        self._scopes[id(scope)] = (order, bindings)
        return order, bindings


# The element of a name bound inside a nested tuple target, `_NESTED * (outer + 1) + inner`:
# past every tuple's length, so only `tfds.load`'s splits are read through it.
_NESTED = 1 << 20


def _method(name: str, path: list[cst.CSTNode]) -> tuple[cst.FunctionDef, list[cst.CSTNode]] | None:
    """`(def name, the path to its class's body)` for a method of the innermost class
    enclosing `path` (not a static method: `self.name(...)` calls it on the instance)."""
    for index in range(len(path) - 1, -1, -1):
        node = path[index]
        if isinstance(node, cst.ClassDef):
            for statement in node.body.body:
                if isinstance(statement, cst.FunctionDef) and statement.name.value == name:
                    return statement, [*path[: index + 1], node.body]
            return None
    return None


def _scope_path(path: list[cst.CSTNode], owner: cst.CSTNode) -> list[cst.CSTNode] | None:
    """The ancestors down to `owner`'s body: what names read in its body resolve through."""
    if isinstance(owner, cst.Module):
        return [owner]
    for index, node in enumerate(path):
        if node is owner:
            return [*path[: index + 1], owner.body]  # type: ignore[attr-defined]
    return None


def _end(node: cst.CSTNode, order: dict[int, int]) -> int:
    """The position of the last node of `node`'s subtree in its scope's source order."""
    last = node
    for last in iter_subtree(node, into_scopes=False):
        pass
    return order[id(last)]


def _forwarded_loader(ctx, function: cst.FunctionDef, value: cst.BaseExpression, path: list[cst.CSTNode]) -> str | None:  # type: ignore[no-untyped-def]
    """The drop keyword of the data loader `value` builds when it passes the `**kwargs` of
    `function` on (`return DataLoader(ds, collate_fn=collate, **kwargs)`), else None."""
    star = function.params.star_kwarg
    if not (isinstance(star, cst.Param) and isinstance(value, cst.Call)):
        return None
    starred = [a for a in value.args if a.star]
    if len(starred) != 1 or starred[0].star != "**" or not (
        isinstance(starred[0].value, cst.Name) and starred[0].value.value == star.name.value
    ):
        return None
    return _LOADERS.get(ctx.resolve(value.func, path, anchor=value) or "")


def _loader(
    call: cst.Call, drop_keyword: str = "drop_last", forwarded: cst.Call | None = None, position: int = 1
) -> Stream | None:
    """`DataLoader(dataset, batch_size=bs)`: ragged unless `drop_last=True` (or a value the
    linter cannot know); a `batch_sampler` decides batches itself, and the default batch
    size of 1 is never ragged. `forwarded`: the call whose keywords reach `call` through a
    `**kwargs` (which must then be `call`'s only starred argument, and `forwarded` has none).
    `position`: where the loader takes its batch size positionally."""
    if forwarded is not None:
        if any(a.star for a in forwarded.args):
            return None
        call = call.with_changes(args=[*(a for a in call.args if not a.star), *(a for a in forwarded.args if a.keyword is not None)])
    if any(a.star for a in call.args) or keyword_argument(call, "batch_sampler") is not None:
        return None
    positional = [a.value for a in call.args if a.keyword is None]
    size = positional[position] if len(positional) > position else keyword_argument(call, "batch_size")
    if size is None or (isinstance(size, cst.Integer) and size.value == "1") or isinstance(size, cst.Name) and size.value == "None":
        return None
    drop = keyword_argument(call, drop_keyword)
    if drop is not None and not (isinstance(drop, cst.Name) and drop.value == "False"):
        return Stream(loader=True)
    # With `forwarded`, `call` is made up: the keyword goes to the call that forwards it.
    target = forwarded if forwarded is not None else call
    return Stream(call, loader=True, shuffled=_true(keyword_argument(call, "shuffle")), drop=(target, drop_keyword))


# Dataset methods that keep the number of examples of a stream not yet batched.
_KEEPS_EXAMPLES = frozenset({"map", "shuffle", "prefetch", "cache", "with_options", "as_dataset"})


def _tfds_sizes(call: cst.Call) -> Mapping[str, int] | None:
    """The split sizes the library table knows for the dataset a `tfds.load(name, ...)` or
    `tfds.builder(name)` call names with a string; None for any other name."""
    positional = [a.value for a in call.args if a.keyword is None and not a.star]
    dataset = positional[0] if positional else keyword_argument(call, "name")
    if not isinstance(dataset, cst.SimpleString):
        return None
    return _jaxapi.TFDS_SIZES.get(dataset.evaluated_value)  # type: ignore[arg-type]


def _split_size(sizes: Mapping[str, int], split: cst.BaseExpression | None) -> int | None:
    """The number of examples of the split a string names (`"train"`, `tfds.Split.TEST`),
    when the table knows it; None for a slice (`"train[:90%]"`) or anything else."""
    if isinstance(split, cst.SimpleString):
        value = split.evaluated_value
        return sizes.get(value) if isinstance(value, str) else None
    if isinstance(split, cst.Attribute) and isinstance(split.value, cst.Attribute) and split.value.attr.value == "Split":
        return sizes.get(split.attr.value.lower())
    return None


def _chunks(call: cst.Call, position: int) -> Stream | None:
    """`itertools.batched(rows, n)`: groups of `n` items, the last one shorter unless `n`
    divides their number; none with `strict=` anything but `False` (it raises instead), or
    `n` of 1."""
    if any(a.star for a in call.args):
        return None
    positional = [a.value for a in call.args if a.keyword is None]
    size = positional[position] if len(positional) > position else keyword_argument(call, "n")
    strict = keyword_argument(call, "strict")
    if size is None or (isinstance(size, cst.Integer) and size.value == "1"):
        return None
    if strict is not None and not (isinstance(strict, cst.Name) and strict.value == "False"):
        return None
    return Stream(call, chunks=True)


def _unconditional(block: cst.CSTNode, value: cst.CSTNode) -> bool:
    """Whether `value` is assigned by a statement directly in `block` (a function's body, a
    module), not under an `if`, a loop or a `try` there."""
    body = getattr(block, "body", ())
    return any(
        isinstance(statement, cst.SimpleStatementLine) and any(getattr(small, "value", None) is value for small in statement.body)
        for statement in (body if isinstance(body, (list, tuple)) else ())
    )


def _true(value: cst.BaseExpression | None) -> bool:
    return isinstance(value, cst.Name) and value.value == "True"
