"""How many times a loop runs, when the code says so.

`iteration_count` reads a `for` loop's header the way a reader would: `range(30)`,
`range(1, maxiter + 1)` with `maxiter = 30` assigned in the function or the module,
`range(len(prompts))` and `enumerate(prompts)` with `prompts` assigned literal lists
(every assignment known: the largest counts),
`zip(...)` (the shortest known), a literal tuple or list, and a configuration field
(`range(cfg.num_samples)`, `args.num_samples`, `FLAGS.num_samples`) at the default the file
declares for it (`config_defaults`: a dataclass field, `add_argument(..., default=1)`,
`flags.DEFINE_integer`). Anything else (a parameter some caller elsewhere sets, a data set, a
`while` loop) is unknown: None.

`loop_runs` classes a loop as few or many times with the reading of its header that says so,
and `loop_evidence`/`call_chain_evidence` state it as a finding's evidence.

`FEW` is the count at or below which a loop runs "a few times" for a per-iteration cost such as
a host copy or a Python wrapper's overhead: the ecosystem check's judging standard counts a
path as hot from about 20 runs on. Rules whose per-iteration cost is a compile judge smaller
counts on their own.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from ._bindings import Binding, Kind
from ._nodes import iter_subtree, keyword_argument, keyword_or_position
from ._walk import iter_children

if TYPE_CHECKING:
    from ._context import FileContext

__all__ = [
    "FEW",
    "LoopRuns",
    "Often",
    "call_chain_evidence",
    "config_defaults",
    "config_flags",
    "off_by_default",
    "describe_loop",
    "loop_evidence",
    "integer_value",
    "reaching_value",
    "items_count",
    "leading_dimension",
    "leaves_block",
    "iteration_count",
    "loop_runs",
    "never_runs",
    "over_model_parts",
    "paced_by_clock",
    "runs_few_times",
    "streams",
]

FEW = 20
_MAX_DEPTH = 6
# Builtins that iterate their first argument once, in order or not.
_SAME_LENGTH = frozenset({"enumerate", "reversed", "list", "tuple", "sorted", "iter", "tqdm"})


class Often(enum.Enum):
    """How many times a loop runs, as a class: `FEW` (at most `FEW` times: a literal table,
    the entries of a dict, a model's layers, epochs or seeds), `MANY` (over data, steps, or a
    known count above `FEW`), `UNKNOWN`."""

    FEW = "few"
    MANY = "many"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class LoopRuns:
    """How often a loop runs, and the reading of its header that says so (`why`, a phrase
    that completes "the loop ... runs": "over `train_loader`", "16 times (`range(16)`)")."""

    often: Often
    why: str
    count: int | None = None


def loop_runs(
    ctx: FileContext, loop: cst.CSTNode, ancestors: Sequence[cst.CSTNode], *, compiles: bool = False, calls: bool = False
) -> LoopRuns:
    """How often `loop` (whose ancestors are `ancestors`) runs each time the code around it
    runs, read from its header: a count known from literals (`iteration_count`); the entries
    of a dict (`.items()`, `.keys()`, `.values()`, and `zip`/`enumerate`/`sorted` of them); a
    name that counts things there are few of (`epochs`, `seeds`, `configs`) or a model's parts
    (`layers`, `params`, `devices`); otherwise data, steps or an open `while`: many.
    `compiles`: for a compile per iteration, a model's layers or blocks are many
    (`runs_many_times(compiles=True)`).
    `calls`: for a cost paid on each iteration that is small on its own (a wait for the
    device, a copy): a loop paced by a sleep on every iteration is few (the device finishes
    its work while the host sleeps, so a wait for it costs nothing more). A spelled count is
    read as for any other cost. Reading counts below a hundred as few, as missing-jit does
    for dispatches, was tried twice for host-copy-in-loop (e8bd38a, ebee869, the second time
    on a cost measured on an H100: 0.2-0.4 ms per copy, `bench/sync_cost.py`): each time it
    took false alarms off dev, most of them copies of one docs example, and more true sites
    than false alarms off the test split."""
    from ._callgraph import counts_few_things, paced, runs_many_times

    header = _header(ctx, loop)
    if calls and isinstance(loop, (cst.For, cst.While)) and paced(ctx, loop):
        return LoopRuns(Often.FEW, f"at a pace it sets itself: it sleeps on every iteration (`{header}`)")
    if counts_few_things(loop):  # type: ignore[arg-type]
        # `for epoch in range(100)`: each iteration is a whole epoch; a cost paid once per
        # iteration is paid next to an epoch's work.
        return LoopRuns(Often.FEW, f"once per epoch, seed or configuration (`{header}`)")
    count = iteration_count(ctx, loop, ancestors)
    if count is not None:
        often = Often.FEW if count <= FEW else Often.MANY
        times = f"{count} time{'s' if count != 1 else ''}"
        if isinstance(loop, cst.For) and stops_after(ctx, loop, ancestors) == count:
            return LoopRuns(often, f"at most {times}: its body leaves it (`{header}`)", count)
        return LoopRuns(often, f"{times} (`{header}`)", count)
    if isinstance(loop, cst.For) and _over_dict_entries(loop.iter):
        return LoopRuns(Often.FEW, f"over the entries of a dict (`{header}`)")
    path = [*ancestors, loop]
    if compiles and over_model_parts(ctx, loop, path):
        return LoopRuns(Often.MANY, f"over a model's layers or blocks, dozens in a real model (`{header}`)")
    if not runs_many_times(ctx, loop, path, shown=False):  # type: ignore[arg-type]
        return LoopRuns(Often.FEW, f"over a model's parts or a small table (`{header}`)")
    if isinstance(loop, cst.While):
        if isinstance(loop.test, cst.Name) and loop.test.value == "True":
            return LoopRuns(Often.MANY, "until it breaks (`while True`)")
        return LoopRuns(Often.MANY, f"while `{header}` holds")
    iterable = loop.iter if isinstance(loop, cst.For) else loop.for_in.iter  # type: ignore[attr-defined]
    if not streams(ctx, iterable, path):
        return LoopRuns(Often.UNKNOWN, f"over `{header}`, whose length the code does not show")
    return LoopRuns(Often.MANY, f"over `{header}`")


def over_model_parts(ctx: FileContext, loop: cst.CSTNode, path: Sequence[cst.CSTNode]) -> bool:
    """Whether `loop` (`path` runs through it) runs over a model's layers or blocks
    (`range(len(model.layers))`, `for block in model.blocks`): not over data or steps, yet
    dozens of times in a real model. Few for a cost paid once per iteration of set-up code,
    many for a compile per iteration (`loop_runs(compiles=True)`)."""
    from ._callgraph import runs_many_times

    return not runs_many_times(ctx, loop, path, shown=False) and runs_many_times(ctx, loop, path, compiles=True)  # type: ignore[arg-type]


# Calls that iterate over steps or data however long their argument is: a progress bar is
# put on a long loop, and an endless counter has no length.
_STREAM_CALLS = frozenset(
    {
        "tqdm", "trange", "tqdm.tqdm", "tqdm.trange", "tqdm.auto.tqdm", "tqdm.auto.trange",
        "tqdm.notebook.tqdm", "tqdm.notebook.trange", "tqdm.std.tqdm", "rich.progress.track",
        "itertools.count", "itertools.cycle", "range",
    }
)  # fmt: skip
# Wrappers that iterate what they are given: they stream when it does.
_WRAPPERS = _SAME_LENGTH | {"zip", "map", "filter", "itertools.islice", "itertools.chain", "more_itertools.chunked"}
# Methods of tf.data, Hugging Face datasets and grain datasets that give a stream of batches.
_STREAM_METHODS = frozenset(
    {
        "as_numpy_iterator", "batch", "padded_batch", "unbatch", "prefetch", "shuffle", "repeat",
        "iter", "to_iter_dataset", "take", "skip", "iter_batches", "create_iterator",
    }
)  # fmt: skip
# Words of a name that say it holds data or steps (`train_loader`, `val_ds`, `pbar`).
_STREAM_WORDS = frozenset(
    {
        "loader", "dataloader", "data", "dataset", "datasets", "ds", "dset", "batch", "batches",
        "minibatch", "minibatches", "iterator", "iter", "it", "stream", "pipeline", "pbar", "bar",
        "progress", "generator", "gen", "steps", "step", "episode", "episodes", "sample",
        "samples", "example", "examples", "trajectory", "trajectories", "rollout", "rollouts",
        "train", "val", "valid", "validation", "test", "eval", "queue", "loop", "iterable",
    }
)  # fmt: skip
# Parts of a word run together with others (`testloader`, `trainbatches`).
_STREAM_PARTS = (
    "loader", "dataset", "batch", "iterator", "stream", "pipeline", "progress", "generator", "episode",
    "sample", "example", "trajector", "rollout",
)  # fmt: skip
_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")


def streams(ctx: FileContext, expr: cst.BaseExpression, path: Sequence[cst.CSTNode], depth: int = 0) -> bool:
    """Whether a loop over `expr` (read at the end of `path`) shows that it runs over data or
    steps: a `range` of an unknown count, a progress bar, an endless counter, a data loader or
    dataset, a generator of this file, or a name bound to one of these; failing that, a name
    that says it holds data (`train_loader`, `val_ds`, `pbar`). A loop over anything else (a
    parameter `values`, `self.l2_regs`, the rows of an array) runs an unknown number of times."""
    if depth > _MAX_DEPTH:
        return False
    if isinstance(expr, cst.Call):
        func = expr.func
        resolved = ctx.resolve(func, path, anchor=func)
        name = resolved or (func.value if isinstance(func, cst.Name) else None)
        positional = [a.value for a in expr.args if a.keyword is None and not a.star]
        if name is not None:
            if name in _STREAM_CALLS or _library_stream(name):
                return True
            if name in _WRAPPERS:
                return any(streams(ctx, a, path, depth + 1) for a in positional)
            if resolved is not None and ctx.project is not None and ctx.project.built(resolved, ctx.module_name) in (("stream",), ("ragged",)):
                return True  # a generator over data, or a loader, of another module of the project
        if isinstance(func, cst.Attribute) and func.attr.value in _STREAM_METHODS:
            return True
        if isinstance(func, cst.Name) and _generator(ctx, func.value, path):
            return True
        # What a call yields is named by the call and by what it is given to iterate
        # (`track(range(n))`, `prefetch_to_device(train_iter)`).
        return _says_stream(func) or any(streams(ctx, a, path, depth + 1) for a in positional)
    if isinstance(expr, (cst.GeneratorExp, cst.ListComp)):
        return streams(ctx, expr.for_in.iter, [*path, expr], depth + 1)
    if isinstance(expr, cst.Name) and any(
        streams(ctx, binding.value, binding.path, depth + 1)
        for binding in ctx.bindings.of(expr.value, path)
        if binding.kind in (Kind.ASSIGN, Kind.WITH) and binding.value is not None
    ):
        return True
    return _says_stream(expr)


def _library_stream(name: str) -> bool:
    from ._jaxapi import DATA_LOADERS, DATASET_MODULES, OPERATION_LOADERS

    return name in DATA_LOADERS or name in OPERATION_LOADERS or name.startswith(DATASET_MODULES)


def _generator(ctx: FileContext, name: str, path: Sequence[cst.CSTNode]) -> bool:
    """Whether `name` is a generator function this file defines."""
    from ._callgraph import iter_subtree_no_scopes

    for binding in ctx.bindings.of(name, path):
        if binding.kind is Kind.DEF and isinstance(binding.node, cst.FunctionDef):
            body = binding.node.body
            if any(isinstance(n, cst.Yield) for n in iter_subtree_no_scopes(body)):
                return True
    return False


def _says_stream(expr: cst.CSTNode) -> bool:
    """Whether the names in `expr` (the attribute's own name, a subscript's value and key)
    say it holds data or steps."""
    if isinstance(expr, cst.Attribute):
        return _stream_word(expr.attr.value)
    if isinstance(expr, cst.Name):
        return _stream_word(expr.value)
    if isinstance(expr, cst.Subscript):
        keys = [e.slice.value for e in expr.slice if isinstance(e.slice, cst.Index)]
        return _says_stream(expr.value) or any(isinstance(k, cst.SimpleString) and _stream_word(k.raw_value) for k in keys)
    return False


def _stream_word(text: str) -> bool:
    words = [word.lower() for word in _WORD.findall(text)]
    return any(word in _STREAM_WORDS or any(part in word for part in _STREAM_PARTS) for word in words)


def describe_loop(
    ctx: FileContext, loop: cst.CSTNode, ancestors: Sequence[cst.CSTNode], *, compiles: bool = False
) -> str:
    """"the loop at line 40 over `train_loader`": where a loop is and how often it runs.
    `ancestors` are the loop's, or the path of code inside it (cut at the loop)."""
    from ._positions import line_of

    ancestors = ancestors[: next((i for i, n in enumerate(ancestors) if n is loop), len(ancestors))]
    line = line_of(ctx.module, loop, list(ancestors))
    kind = "loop" if isinstance(loop, (cst.For, cst.While)) else "comprehension"
    where = f"the {kind} at line {line}" if line is not None else f"the {kind}"
    runs = loop_runs(ctx, loop, ancestors, compiles=compiles)
    return f"{where}, which runs {runs.why}"


def loop_evidence(
    ctx: FileContext, loop: cst.CSTNode, path: Sequence[cst.CSTNode], *, compiles: bool = False
) -> str:
    """"runs on every iteration of the loop at line 40, which runs over `loader`" for code
    whose ancestors `path` pass through `loop` (`compiles`: see `loop_runs`)."""
    index = next((i for i, n in enumerate(path) if n is loop), len(path))
    return f"runs on every iteration of {describe_loop(ctx, loop, path[:index], compiles=compiles)}"


def call_chain_evidence(ctx: FileContext, site: cst.Call, site_path: Sequence[cst.CSTNode], loop: cst.CSTNode, chain: Sequence[str] = ()) -> str:
    """"called at line 52 in `train()`, on every iteration of the loop at line 40, which runs
    over `loader`": how a function's body comes to run per iteration of a loop in a caller
    (`chain`: the functions between, outermost first)."""
    from ._positions import line_of

    line = line_of(ctx.module, site, list(site_path))
    scope = next((n for n in reversed(site_path) if isinstance(n, cst.FunctionDef)), None)
    where = f"called at line {line}" if line is not None else "called"
    if scope is not None:
        where += f" in `{scope.name.value}()`"
    via = (" through " + " → ".join(f"`{name}()`" for name in chain)) if chain else ""
    index = next((i for i, n in enumerate(site_path) if n is loop), len(site_path))
    return f"{where}{via}, on every iteration of {describe_loop(ctx, loop, list(site_path[:index]))}"


_DICT_VIEWS = frozenset({"items", "keys", "values"})
_SAME_ORDER = frozenset({"zip", "enumerate", "sorted", "list", "tuple", "reversed"})


def _over_dict_entries(expr: cst.BaseExpression) -> bool:
    if not isinstance(expr, cst.Call):
        return False
    func = expr.func
    if isinstance(func, cst.Attribute) and func.attr.value in _DICT_VIEWS and not expr.args:
        return True
    if isinstance(func, cst.Name) and func.value in _SAME_ORDER:
        positional = [a.value for a in expr.args if a.keyword is None and not a.star]
        return bool(positional) and all(_over_dict_entries(a) for a in positional)
    return False


def _header(ctx: FileContext, loop: cst.CSTNode) -> str:
    """The loop's iterable (or a `while` loop's test), on one line, shortened."""
    if isinstance(loop, cst.For):
        expr: cst.CSTNode = loop.iter
    elif isinstance(loop, cst.While):
        expr = loop.test
    elif isinstance(loop, (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)):
        expr = loop.for_in.iter
    else:
        return "?"
    text = " ".join(ctx.module.code_for_node(expr).split())
    return text if len(text) <= 40 else text[:37] + "..."


def iteration_count(ctx: FileContext, loop: cst.CSTNode, ancestors: Sequence[cst.CSTNode]) -> int | None:
    """How many times the `for` loop `loop` (whose ancestors are `ancestors`) runs, when its
    header says so through literals and names assigned them; None when unknown. A
    comprehension with one `for` clause counts like a loop over its iterable (its `if`
    clauses only skip items)."""
    if isinstance(loop, (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)):
        if loop.for_in.inner_for_in is not None:
            return None
        return _count(ctx, loop.for_in.iter, [*ancestors, loop], 0)
    if not isinstance(loop, cst.For):
        return None
    count = _count(ctx, loop.iter, [*ancestors, loop], 0)
    stop = stops_after(ctx, loop, ancestors)
    if stop is not None and (count is None or stop < count):
        return stop
    return count


def stops_after(ctx: FileContext, loop: cst.For, ancestors: Sequence[cst.CSTNode]) -> int | None:
    """The most iterations the body of `loop` lets it run, whatever its header says: one when
    a statement of the body always leaves the loop (`break`, `return`, `raise` at the body's
    own level: the first iteration is the only one, unless a `continue` before it can skip
    ahead); `K + 1` for a test of the loop's counter that leaves it (`for i in range(n): if i
    == max_tokens: break`, with `max_tokens = 1` a known integer; `K + 2` for `i > K`). None
    when the body says nothing."""
    body = loop.body
    if not isinstance(body, cst.IndentedBlock):
        return None
    counter = _counter_name(loop)
    for statement in body.body:
        if _may_continue(statement):
            return None  # `if skip: continue` before it: later iterations can pass it by
        if isinstance(statement, cst.SimpleStatementLine):
            if _exits_loop(statement):
                return 1
            continue
        if counter is None or not isinstance(statement, cst.If) or statement.orelse is not None:
            continue
        leaves = statement.body.body
        if not (leaves and _exits_loop(leaves[-1])):
            continue
        test = statement.test
        if not (
            isinstance(test, cst.Comparison)
            and len(test.comparisons) == 1
            and isinstance(test.left, cst.Name)
            and test.left.value == counter
        ):
            continue
        target = test.comparisons[0]
        bound = integer_value(ctx, target.comparator, [*ancestors, loop, body, statement, test])
        if bound is None or bound < 0:
            continue
        if isinstance(target.operator, (cst.Equal, cst.GreaterThanEqual)):
            return bound + 1
        if isinstance(target.operator, cst.GreaterThan):
            return bound + 2
    return None


def _exits_loop(statement: cst.CSTNode) -> bool:
    """Whether `statement` is a line that leaves the loop it is in (`break`, `return`,
    `raise`; unlike `leaves_block`, not `continue`)."""
    return isinstance(statement, cst.SimpleStatementLine) and any(
        isinstance(small, (cst.Break, cst.Return, cst.Raise)) for small in statement.body
    )


def _counter_name(loop: cst.For) -> str | None:
    """The name counting `loop`'s iterations from 0: `i` of `for i in range(n)` (one argument)
    or of `for i, x in enumerate(xs)` (no start)."""
    source = loop.iter
    if not (isinstance(source, cst.Call) and isinstance(source.func, cst.Name)):
        return None
    if source.func.value == "range" and len(source.args) == 1 and isinstance(loop.target, cst.Name):
        return loop.target.value
    if (
        source.func.value == "enumerate"
        and len(source.args) == 1
        and isinstance(loop.target, cst.Tuple)
        and loop.target.elements
        and isinstance(loop.target.elements[0].value, cst.Name)
    ):
        return loop.target.elements[0].value.value
    return None


def _may_continue(statement: cst.CSTNode) -> bool:
    """Whether `statement` holds a `continue` of the loop it is in (not of a loop inside it)."""
    if isinstance(statement, cst.Continue):
        return True
    if isinstance(statement, (cst.For, cst.While, cst.FunctionDef, cst.ClassDef, cst.Lambda)):
        return isinstance(statement, (cst.For, cst.While)) and statement.orelse is not None and _may_continue(statement.orelse)
    return any(_may_continue(child) for child in iter_children(statement))


def runs_few_times(ctx: FileContext, loop: cst.CSTNode, ancestors: Sequence[cst.CSTNode]) -> bool:
    """Whether `loop` is known to run at most `FEW` times."""
    count = iteration_count(ctx, loop, ancestors)
    return count is not None and count <= FEW


def items_count(ctx: FileContext, expr: cst.BaseExpression, path: list[cst.CSTNode]) -> int | None:
    """How many items iterating `expr` (read at the end of `path`) yields, when known."""
    return _count(ctx, expr, path, 0)


def _range_length(ctx: FileContext, bounds_args: list[cst.BaseExpression], path: list[cst.CSTNode], depth: int) -> int | None:
    """How many items `range(...)` (or `arange(...)`) of these positional arguments yields."""
    bounds = [_integer(ctx, a, path, depth + 1) for a in bounds_args]
    if any(b is None for b in bounds) or len(bounds) > 3 or (len(bounds) == 3 and bounds[2] == 0):
        return None
    return len(range(*bounds))  # type: ignore[arg-type]


def _array_count(ctx: FileContext, call: cst.Call, path: list[cst.CSTNode], depth: int) -> int | None:
    """The length (along the first axis) of an array built from what the code spells:
    `jnp.array([0.2, 0.5, 0.8])` (a literal list), `np.arange(4)`, `jnp.linspace(0, 1, 5)`,
    or a shape: `np.zeros((1000, 20))`, `jax.random.normal(key, (1000, 20))`,
    `np.random.randn(1000, 20)`, `rng.normal(size=(1000, 20))` for `rng =
    np.random.default_rng(0)`; through `.astype(...)` and `.copy()`, which keep it."""
    if isinstance(call.func, cst.Attribute) and call.func.attr.value in ("astype", "copy"):
        return _count(ctx, call.func.value, path, depth + 1)
    name = ctx.resolve(call.func, path, anchor=call)
    if name is None:
        return _generator_draw(ctx, call, path, depth)
    if name.split(".")[0] not in ("jax", "numpy"):
        return None
    function = name.rsplit(".", 1)[-1]
    positional = [a.value for a in call.args if a.keyword is None and a.star == ""]
    shape = _spelled_shape(name, call, positional)
    if shape is not None:
        return _leading(ctx, shape, path, depth)
    if function in ("array", "asarray") and positional:
        first = positional[0]
        if isinstance(first, (cst.List, cst.Tuple)) and not any(
            isinstance(e.value, (cst.List, cst.Tuple)) for e in first.elements if isinstance(e, cst.Element)
        ):
            return _count(ctx, first, path, depth + 1)  # 1-D: a nested literal is a matrix
        return None
    if function == "arange" and positional and len(positional) == len(call.args):
        return _range_length(ctx, positional, path, depth)
    if function == "linspace":
        num = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "num"), None)
        if num is None and len(positional) >= 3:
            num = positional[2]
        if num is None:
            return 50 if len(positional) == 2 and len(call.args) == 2 else None
        return _integer(ctx, num, path, depth + 1)
    return None


# Array constructors whose first argument is the shape, and random samplers whose shape is
# their second (`jax.random.normal(key, shape)`) or their `size` (NumPy).
_SHAPED = frozenset({"zeros", "ones", "empty", "full"})
_NUMPY_RANDOM_DIMS = frozenset({"randn", "rand"})  # `np.random.randn(d0, d1, ...)`
_GENERATOR_MAKERS = frozenset({"numpy.random.default_rng", "numpy.random.RandomState", "numpy.random.Generator"})


def _spelled_shape(name: str, call: cst.Call, positional: list[cst.BaseExpression]) -> cst.BaseExpression | None:
    """The shape argument of an array constructor or sampler of jax or NumPy (`name`)."""
    function = name.rsplit(".", 1)[-1]
    if name.startswith(("numpy.random.", "jax.random.")):
        if name.startswith("numpy.random.") and function in _NUMPY_RANDOM_DIMS:
            return positional[0] if positional else None
        if name.startswith("jax.random."):
            return keyword_or_position(call, "shape", 1)
        return keyword_argument(call, "size")
    if function in _SHAPED and name.count(".") <= 2:
        return keyword_or_position(call, "shape", 0)
    return None


def _leading(ctx: FileContext, shape: cst.BaseExpression, path: list[cst.CSTNode], depth: int) -> int | None:
    """The first dimension of a spelled shape: `(1000, 20)`, `[n, d]`, or `1000`."""
    if isinstance(shape, (cst.Tuple, cst.List)):
        first = shape.elements[0] if shape.elements else None
        if not isinstance(first, cst.Element):
            return None
        shape = first.value
    return _integer(ctx, shape, path, depth + 1)


def _generator_draw(ctx: FileContext, call: cst.Call, path: list[cst.CSTNode], depth: int) -> int | None:
    """`rng.normal(size=(1000, 20))` where every binding of `rng` makes a NumPy generator
    (`np.random.default_rng(0)`, `np.random.RandomState(0)`): the first dimension of `size`."""
    func = call.func
    if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)):
        return None
    size = keyword_argument(call, "size")
    if size is None:
        return None
    makers = _assigned(ctx, func.value.value, path)
    if not makers or not all(
        isinstance(m, cst.Call) and ctx.resolve(m.func, path, anchor=m) in _GENERATOR_MAKERS for m in makers
    ):
        return None
    return _leading(ctx, size, path, depth)


def integer_value(ctx: FileContext, expr: cst.BaseExpression, path: list[cst.CSTNode]) -> int | None:
    """The value of the integer expression `expr` (read at the end of `path`), when known."""
    return _integer(ctx, expr, path, 0)


def _count(ctx: FileContext, expr: cst.BaseExpression, path: list[cst.CSTNode], depth: int) -> int | None:
    if depth > _MAX_DEPTH:
        return None
    if isinstance(expr, (cst.Tuple, cst.List, cst.Set)):
        if all(isinstance(e, cst.Element) for e in expr.elements):
            return len(expr.elements)
        return None
    if isinstance(expr, cst.Dict):
        if all(isinstance(e, cst.DictElement) for e in expr.elements):
            return len(expr.elements)
        return None
    if isinstance(expr, cst.Name):
        reaching = reaching_value(expr.value, path)
        values = [reaching] if reaching is not None else _assigned(ctx, expr.value, path)
        return _most(_count(ctx, value, path, depth + 1) for value in values)
    if isinstance(expr, cst.Call):
        asked = _asked_count(ctx, expr, path, depth)
        if asked is not None:
            return asked
    if isinstance(expr, cst.Subscript):
        return _rows_of_subscript(ctx, expr, path, depth)
    if (
        isinstance(expr, cst.Call)
        and isinstance(expr.func, cst.Attribute)
        and expr.func.attr.value in _DICT_VIEWS
        and not expr.args
    ):
        return _count(ctx, expr.func.value, path, depth + 1)  # `{"train": a, "val": b}.items()`
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        return _array_count(ctx, expr, path, depth)
    if not isinstance(expr, cst.Call) or not isinstance(expr.func, cst.Name):
        return None
    name = expr.func.value
    positional = [a.value for a in expr.args if a.keyword is None and a.star == ""]
    if name in ("range", "trange") and positional and len(positional) == len(expr.args):
        if name == "range" and not ctx.is_builtin(name, path, anchor=expr):
            return None
        return _range_length(ctx, positional, path, depth)
    if name in _SAME_LENGTH and positional:
        return _count(ctx, positional[0], path, depth + 1)
    if name == "zip" and positional:
        counts = [c for c in (_count(ctx, a, path, depth + 1) for a in positional) if c is not None]
        return min(counts) if counts else None
    return None


def _rows_of_subscript(ctx: FileContext, expr: cst.Subscript, path: list[cst.CSTNode], depth: int) -> int | None:
    """How many rows (items along the first axis) `x[:25]`, `x[:, 3]` or `x[..., ::32]` keeps:
    a slice of the first axis counts (`_slice_length`); a whole first axis (`:`) or an
    ellipsis before one more index (the data's other axes: the rows of a batch of samples are
    kept) has the rows of `x`."""
    first = expr.slice[0].slice
    if len(expr.slice) > 1:
        whole = isinstance(first, cst.Slice) and first.lower is None and first.upper is None and first.step is None
        ellipsis = isinstance(first, cst.Index) and isinstance(first.value, cst.Ellipsis) and len(expr.slice) == 2
        if whole or ellipsis:
            return _count(ctx, expr.value, path, depth + 1)
    return _slice_length(ctx, first, path, depth) if isinstance(first, cst.Slice) else None


def _slice_length(ctx: FileContext, part: cst.Slice, path: list[cst.CSTNode], depth: int) -> int | None:
    """At most how many items the slice `:25` or `10:40` of an axis holds (the bounds known, no
    step, not counted from the end): a loop over `x[:25]` runs that many times or fewer."""
    if part.step is not None or part.upper is None:
        return None
    lower = 0 if part.lower is None else _integer(ctx, part.lower, path, depth + 1)
    upper = _integer(ctx, part.upper, path, depth + 1)
    if lower is None or upper is None or lower < 0 or upper < 0:
        return None
    return max(upper - lower, 0)


_COUNT_KEYWORD = re.compile(r"^(?:n|num|number_of)_([a-z]+?)s?$")


def _asked_count(ctx: FileContext, call: cst.Call, path: list[cst.CSTNode], depth: int) -> int | None:
    """How many items a call is asked to make, when a keyword counts what the call is named
    for: `get_graphs(images, n_graphs=2)`, `sample_trajectories(num_trajectories=N)` (not
    `load(ds, num_workers=4)`, which counts something else), or a positional argument binds
    such a parameter of a function of the file (`sample_random_points(0, h, w, num_points)`
    for `def sample_random_points(frame_max_idx, height, width, num_points)`)."""
    func = call.func
    name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else None
    if name is None:
        return None
    callee = name.lower()
    for keyword, value in _named_arguments(ctx, call, path):
        match = _COUNT_KEYWORD.match(keyword.lower())
        if match is not None and len(match.group(1)) > 2 and match.group(1) in callee:
            return _integer(ctx, value, path, depth + 1)
    return None


def _named_arguments(ctx: FileContext, call: cst.Call, path: list[cst.CSTNode]) -> list[tuple[str, cst.BaseExpression]]:
    """The call's keyword arguments, and for a function the file defines once (`def
    sample_points(height, width, num_points)`, called by name) its positional arguments
    under the names of the parameters they bind."""
    named = [(a.keyword.value, a.value) for a in call.args if a.keyword is not None]
    positional = [a for a in call.args if a.keyword is None]
    if not positional or any(a.star for a in call.args) or not isinstance(call.func, cst.Name):
        return named
    bindings = ctx.bindings.of(call.func.value, path)
    if len(bindings) != 1 or not isinstance(bindings[0].node, cst.FunctionDef):
        return named
    params = [*bindings[0].node.params.posonly_params, *bindings[0].node.params.params]
    named.extend((p.name.value, a.value) for p, a in zip(params, positional))
    return named


def reaching_value(name: str, path: Sequence[cst.CSTNode]) -> cst.BaseExpression | None:
    """The value `name` holds where the code at the end of `path` reads it, when the last
    statement before it that binds the name is a plain `name = value` in the same block or
    a block around it (`dataset = make(n_graphs=1000)`, later `dataset = make(n_graphs=2)`:
    a loop over `dataset` after the second reads 2 graphs). None when a binding in between
    is conditional or in a loop that rebinds it, or none is found before the enclosing
    function."""
    for index in range(len(path) - 1, 0, -1):
        block, statement = path[index - 1], path[index]
        if isinstance(block, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return None
        if not isinstance(block, (cst.IndentedBlock, cst.Module)):
            continue
        body = list(block.body)
        position = next((i for i, s in enumerate(body) if s is statement), None)
        if position is None:
            return None
        for previous in reversed(body[:position]):
            if isinstance(previous, cst.SimpleStatementLine):
                for small in reversed(previous.body):
                    if (
                        isinstance(small, cst.Assign)
                        and len(small.targets) == 1
                        and isinstance(small.targets[0].target, cst.Name)
                        and small.targets[0].target.value == name
                    ):
                        return small.value
                    if _binds(small, name):
                        return None
            elif _binds(previous, name):
                return None
        owner = path[index - 2] if index >= 2 else None
        if isinstance(owner, (cst.For, cst.While)) and _binds(owner, name):
            return None  # read again on the next iteration, after the loop's own binding
    return None


def _binds(node: cst.CSTNode, name: str) -> bool:
    """Whether code under `node` (nested functions and classes aside) binds `name`. A
    `def` or `class` statement binds its own name only (what its body assigns is its own)."""
    from ._callgraph import iter_subtree_no_scopes

    if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
        return node.name.value == name
    from ._scope import target_names

    for inner in iter_subtree_no_scopes(node):
        targets: list[cst.BaseExpression] = []
        if isinstance(inner, cst.Assign):
            targets = [t.target for t in inner.targets]
        elif isinstance(inner, (cst.AugAssign, cst.AnnAssign, cst.For, cst.CompFor, cst.NamedExpr)):
            targets = [inner.target]
        elif isinstance(inner, cst.AsName):
            targets = [inner.name]
        if any(name in target_names(t) for t in targets):
            return True
    return False


def _integer(ctx: FileContext, expr: cst.BaseExpression, path: list[cst.CSTNode], depth: int) -> int | None:
    if depth > _MAX_DEPTH:
        return None
    if isinstance(expr, cst.Integer):
        return int(expr.evaluated_value)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        inner = _integer(ctx, expr.expression, path, depth + 1)
        return None if inner is None else -inner
    if isinstance(expr, cst.BinaryOperation):
        left = _integer(ctx, expr.left, path, depth + 1)
        right = _integer(ctx, expr.right, path, depth + 1)
        if left is None or right is None:
            return None
        if isinstance(expr.operator, cst.Add):
            return left + right
        if isinstance(expr.operator, cst.Subtract):
            return left - right
        if isinstance(expr.operator, cst.Multiply):
            return left * right
        if isinstance(expr.operator, cst.FloorDivide) and right:
            return left // right
        return None
    if isinstance(expr, cst.Name):
        return _most(_integer(ctx, value, path, depth + 1) for value in _assigned(ctx, expr.value, path))
    if isinstance(expr, cst.Attribute):
        # `cfg.num_samples`, `args.num_samples`, `FLAGS.num_samples`: the default the file
        # declares for that field, the value a run gets unless somebody asks for another.
        return config_defaults(ctx).get(expr.attr.value)
    if isinstance(expr, cst.Subscript):
        owner = leading_dimension(expr)
        if owner is not None:
            return _count(ctx, owner, path, depth + 1)  # `x.shape[0]` is `len(x)`
        return _dict_entry(ctx, expr, path, depth)
    if (
        isinstance(expr, cst.Call)
        and isinstance(expr.func, cst.Name)
        and expr.func.value == "len"
        and len(expr.args) == 1
        and ctx.is_builtin("len", path, anchor=expr)
    ):
        return _count(ctx, expr.args[0].value, path, depth + 1)
    return None


def leading_dimension(expr: cst.Subscript) -> cst.BaseExpression | None:
    """`x` of `x.shape[0]`: the number of rows of `x`, as `len(x)` counts them."""
    if len(expr.slice) != 1 or not isinstance(expr.slice[0].slice, cst.Index):
        return None
    index = expr.slice[0].slice.value
    value = expr.value
    if isinstance(index, cst.Integer) and index.value == "0" and isinstance(value, cst.Attribute) and value.attr.value == "shape":
        return value.value
    return None


def _dict_entry(ctx: FileContext, expr: cst.Subscript, path: list[cst.CSTNode], depth: int) -> int | None:
    """`options["n_iter"]`: the integer entry of the dict literal that `options` is given
    (`options = {"n_iter": 20, ...}`), unless the file writes that entry somewhere."""
    key = _string_key(expr)
    if key is None or not isinstance(expr.value, cst.Name):
        return None
    name = expr.value.value
    values = _assigned(ctx, name, path)
    if not values or not all(isinstance(v, cst.Dict) for v in values) or _entry_written(ctx.module, name, key):
        return None
    counts = []
    for value in values:
        assert isinstance(value, cst.Dict)
        entry = next(
            (e.value for e in value.elements if isinstance(e, cst.DictElement) and _string_value(e.key) == key), None
        )
        if entry is None:
            return None
        counts.append(_integer(ctx, entry, path, depth + 1))
    return _most(counts)


def _string_key(expr: cst.Subscript) -> str | None:
    """The key of `x["key"]`, a single string subscript."""
    if len(expr.slice) != 1 or not isinstance(expr.slice[0].slice, cst.Index):
        return None
    return _string_value(expr.slice[0].slice.value)


def _string_value(expr: cst.BaseExpression | None) -> str | None:
    if isinstance(expr, cst.SimpleString):
        value = expr.evaluated_value
        return value if isinstance(value, str) else None
    return None


def _entry_written(module: cst.Module, name: str, key: str) -> bool:
    """Whether the file sets `name[key]` (or an entry it does not spell) or calls
    `name.update(...)` / `name.setdefault(...)` anywhere."""
    for node in iter_subtree(module):
        targets: list[cst.BaseExpression] = []
        if isinstance(node, cst.Assign):
            targets = [t.target for t in node.targets]
        elif isinstance(node, (cst.AugAssign, cst.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            if isinstance(node.func.value, cst.Name) and node.func.value.value == name:
                if node.func.attr.value in ("update", "setdefault", "__setitem__"):
                    return True
        for target in targets:
            if isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name) and target.value.value == name:
                written = _string_key(target)
                if written is None or written == key:
                    return True
    return False


def _assigned(ctx: FileContext, name: str, path: list[cst.CSTNode]) -> list[cst.BaseExpression]:
    """The values `name` is given, as read at the end of `path`, when its scope binds it only
    by plain assignments (a parameter with a value-bearing default, a loop target, `+=`...:
    unknown, so no values)."""
    bindings = [b for b in ctx.bindings.of(name, path) if not _defaults_to_none(b)]
    values: list[cst.BaseExpression] = []
    for binding in bindings:
        if binding.kind is Kind.PARAM:
            passed = _passed_literals(ctx, binding)
            if not passed:
                return []
            values.extend(passed)
        elif binding.kind is Kind.ASSIGN and binding.value is not None:
            values.append(binding.value)
        else:
            return []
    return values


def _passed_literals(ctx: FileContext, binding: Binding) -> list[cst.BaseExpression]:
    """What a parameter holds at every call of its function in this file, when each call passes
    a literal or leaves the literal default (`def sample(model, num_samples=1)` called as
    `sample(model)`); nothing when a caller may be elsewhere or passes something else."""
    from ._callgraph import parameter_calls

    found = parameter_calls(ctx, binding.node, binding.path)
    if found is None:
        return []
    param, calls = found
    values = [param.default if passed is None else passed for passed, _ in calls]
    if not all(_literal(v) for v in values):
        return []
    return values  # type: ignore[return-value]


def _literal(value: cst.BaseExpression | None) -> bool:
    if isinstance(value, cst.Integer):
        return True
    if isinstance(value, (cst.List, cst.Tuple)):
        return all(isinstance(e, cst.Element) and isinstance(e.value, (cst.Integer, cst.SimpleString, cst.Float)) for e in value.elements)
    return False


def _defaults_to_none(binding: Binding) -> bool:
    """A parameter defaulting to None (`prompts=None`, then `if prompts is None: prompts = [...]`
    in the body): the body's assignments say what it holds when the caller says nothing."""
    return binding.kind is Kind.PARAM and isinstance(binding.value, cst.Name) and binding.value.value == "None"


def _most(counts: Iterable[int | None]) -> int | None:
    """The largest of the counts, when every one is known (and there is one)."""
    known = list(counts)
    if not known or any(c is None for c in known):
        return None
    return max(known)  # type: ignore[type-var]


def never_runs(path: Sequence[cst.CSTNode]) -> bool:
    """Whether the last node of `path` (its ancestors, from the module down) sits after a
    statement that always leaves its block: `raise`, `return`, `break`, `continue` or
    `sys.exit(...)` earlier in the same indented block, as in a debug block under
    `if __name__ == "__main__":` cut short by a bare `raise`. Such code never runs, so it costs
    nothing. A module's own top-level statements are not judged: in a notebook, whose cells
    jaxlint reads as one module, the cells after one that raises still run when the user
    runs them."""
    for parent, child in zip(path, path[1:]):
        if not isinstance(parent, cst.IndentedBlock):
            continue
        for statement in parent.body:
            if statement is child:
                break
            if leaves_block(statement):
                return True
    return False


def leaves_block(statement: cst.CSTNode) -> bool:
    """Whether `statement` always leaves its block (see `never_runs`)."""
    if not isinstance(statement, cst.SimpleStatementLine):
        return False
    for small in statement.body:
        if isinstance(small, (cst.Raise, cst.Return, cst.Break, cst.Continue)):
            return True
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
            func = small.value.func
            if (
                isinstance(func, cst.Attribute)
                and isinstance(func.value, cst.Name)
                and (func.value.value, func.attr.value) in (("sys", "exit"), ("os", "_exit"))
            ):
                return True
    return False


def paced_by_clock(ctx: FileContext, guard: cst.CSTNode, path: Sequence[cst.CSTNode]) -> bool:
    """Whether `guard` (an `if` whose ancestors are `path`) runs its body at most once per
    interval of wall time: its test compares a clock reading (`time.time() - last_log >
    every`, or a name the scope binds to one, `now - last > 3`) and its body sets one of the
    test's names to a clock reading again (`last_log = time.time()`). However fast the loop
    around it goes, the body runs about once every few seconds: a thinning condition, as
    `step % k == 0` is, whose count follows the clock instead of the steps. A test of a clock
    against a start that is never set again (`if time.time() - start > warmup:`) holds on
    every iteration once it holds, and is no such guard."""
    if not isinstance(guard, cst.If) or "time" not in ctx.source:  # every clock is of `time` or `timeit`
        return False
    read = {n.value for n in iter_subtree(guard.test) if isinstance(n, cst.Name)}
    resets = [
        node
        for node in iter_subtree(guard.body, into_scopes=False)
        if isinstance(node, cst.Assign) and any(isinstance(t.target, cst.Name) and t.target.value in read for t in node.targets)
    ]
    if not resets:
        return False
    scope = next((n for n in reversed(path) if isinstance(n, (cst.FunctionDef, cst.Module))), ctx.module)
    clocks = _clock_names(ctx, scope, list(path), guard.body)
    if not (read & clocks or _reads_clock(ctx, guard.test, [*path, guard])):
        return False
    return any(_clock_value(ctx, node.value, list(path), clocks) for node in resets)


def _clock_names(ctx: FileContext, scope: cst.CSTNode, path: list[cst.CSTNode], besides: cst.CSTNode) -> set[str]:
    """Names `scope` (a function or the module, not the functions in it) binds to a clock
    reading (`last = time.time()`, `now = time.perf_counter()`) outside `besides`."""
    names: set[str] = set()
    body = scope.body if isinstance(scope, cst.FunctionDef) else scope
    for node in iter_subtree(body, into_scopes=False, skip=besides):
        if isinstance(node, cst.Assign) and _reads_clock(ctx, node.value, path):
            names.update(t.target.value for t in node.targets if isinstance(t.target, cst.Name))
    return names


def _clock_value(ctx: FileContext, value: cst.BaseExpression, path: list[cst.CSTNode], clocks: set[str]) -> bool:
    """`time.time()`, or a name bound to a clock reading."""
    if isinstance(value, cst.Name):
        return value.value in clocks
    return isinstance(value, cst.Call) and _reads_clock(ctx, value, path)


def _reads_clock(ctx: FileContext, expr: cst.CSTNode, path: list[cst.CSTNode]) -> bool:
    from ._timing import TIMERS

    return any(
        isinstance(node, cst.Call) and ctx.resolve(node.func, path, anchor=node) in TIMERS
        for node in iter_subtree(expr, into_scopes=False)
    )


def off_by_default(ctx: FileContext, path: Sequence[cst.CSTNode]) -> str | None:
    """The flag, when the node whose ancestors are `path` runs only if somebody asks: it sits
    (inside its function) under `if flag:` where `flag` is a parameter defaulting to False or
    None that no call in the file sets (`def fit(..., verbose=False)`), or a configuration
    field the file declares False (`verbose: bool = False`, `add_argument("--verbose",
    action="store_true")`, `flags.DEFINE_bool("verbose", False, ...)`). An ordinary run skips
    it. None otherwise."""
    start = max((i for i, n in enumerate(path) if isinstance(n, (cst.FunctionDef, cst.Lambda))), default=0)
    for index in range(start, len(path) - 1):
        node, child = path[index], path[index + 1]
        if not (isinstance(node, cst.If) and child is node.body):
            continue
        test = node.test
        if isinstance(test, cst.Attribute) and config_flags(ctx).get(test.attr.value) is False:
            return ctx.module.code_for_node(test)
        if isinstance(test, cst.Name) and _off_parameter(ctx, test.value, list(path[: index + 1])):
            return test.value
    return None


def _off_parameter(ctx: FileContext, name: str, path: list[cst.CSTNode]) -> bool:
    from ._callgraph import parameter_calls

    bindings = ctx.bindings.of(name, path)
    if len(bindings) != 1 or bindings[0].kind is not Kind.PARAM:
        return False
    binding = bindings[0]
    if not _false(binding.value):
        return False
    found = parameter_calls(ctx, binding.node, binding.path)
    if found is None:
        return True  # callers elsewhere: the default is what a run gets unless asked
    return all(passed is None or _false(passed) for passed, _ in found[1])


def _false(value: cst.BaseExpression | None) -> bool:
    return isinstance(value, cst.Name) and value.value in ("False", "None")


def config_flags(ctx: FileContext) -> dict[str, bool]:
    """The boolean defaults the file declares for configuration fields, by field name (as
    `config_defaults` for integers; `action="store_true"` declares False)."""
    return _config_fields(ctx)[1]


def config_defaults(ctx: FileContext) -> dict[str, int]:
    """The integer defaults the file declares for configuration fields, by field name: class
    attributes with a literal value (`num_samples: int = 1` in a dataclass or config class),
    `parser.add_argument("--num-samples", default=1)`, `flags.DEFINE_integer("num_samples",
    1, ...)`. A name given two different defaults is left out, and so is a field the file sets
    itself (`args.num_iterations = ...`) or declares 0 (a placeholder filled in later)."""
    return _config_fields(ctx)[0]


def _config_fields(ctx: FileContext) -> tuple[dict[str, int], dict[str, bool]]:
    """Both tables of declared defaults, read from the module once per file."""
    found = getattr(ctx, "_config_fields", None)
    if found is None:
        found = ctx._config_fields = _collect_defaults(ctx.module)  # type: ignore[attr-defined]
    return found


def _collect_defaults(module: cst.Module) -> tuple[dict[str, int], dict[str, bool]]:
    values: dict[str, set[int | bool]] = {}

    def add(name: str, value: cst.BaseExpression | None) -> None:
        key = name.lstrip("-").replace("-", "_")
        if isinstance(value, cst.Integer):
            values.setdefault(key, set()).add(int(value.evaluated_value))
        elif isinstance(value, cst.Name) and value.value in ("True", "False"):
            values.setdefault(key, set()).add(value.value == "True")

    assigned: set[str] = set()
    for node in _iter_config_nodes(module):
        if isinstance(node, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            assigned |= {t.attr.value for t in targets if isinstance(t, cst.Attribute)}
        elif isinstance(node, cst.ClassDef):
            for statement in node.body.body:
                if not isinstance(statement, cst.SimpleStatementLine):
                    continue
                for small in statement.body:
                    if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
                        add(small.target.value, small.value)
                    elif isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name):
                        add(small.targets[0].target.value, small.value)
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            method = node.func.attr.value
            positional = [a.value for a in node.args if a.keyword is None and not a.star]
            keywords = {a.keyword.value: a.value for a in node.args if a.keyword is not None}
            action = keywords.get("action")
            if method == "add_argument" and "default" not in keywords and isinstance(action, cst.SimpleString):
                if action.evaluated_value in ("store_true", "store_false"):
                    keywords["default"] = cst.Name("False" if action.evaluated_value == "store_true" else "True")
            if method == "add_argument" and "default" in keywords:
                flags = [p for p in positional if isinstance(p, cst.SimpleString)]
                long = [f for f in flags if f.evaluated_value.startswith("--")] or flags  # type: ignore[union-attr]
                dest = keywords.get("dest")
                if isinstance(dest, cst.SimpleString):
                    add(str(dest.evaluated_value), keywords["default"])
                elif long:
                    add(str(long[0].evaluated_value), keywords["default"])
            elif method in ("DEFINE_integer", "DEFINE_bool", "DEFINE_boolean") and positional and isinstance(positional[0], cst.SimpleString):
                default = positional[1] if len(positional) > 1 else keywords.get("default")
                add(str(positional[0].evaluated_value), default)
    # A field the file sets itself (`args.num_iterations = args.total // args.batch_size`) is
    # not at its declared default when it is read; nor is one declared 0 (a placeholder).
    ints: dict[str, int] = {}
    flags: dict[str, bool] = {}
    for name, found in values.items():
        if len(found) != 1 or name in assigned:
            continue
        (value,) = found
        if isinstance(value, bool):
            flags[name] = value
        elif value > 0:
            ints[name] = value
    return ints, flags


def _iter_config_nodes(module: cst.Module) -> Iterable[cst.CSTNode]:
    """Classes, assignments and `add_argument`/`DEFINE_*` calls, wherever they are."""
    from ._walk import iter_children

    stack: list[cst.CSTNode] = [module]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.ClassDef):
            yield node
        elif isinstance(node, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
            yield node
        elif isinstance(node, cst.Call):
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value in ("add_argument", "DEFINE_integer", "DEFINE_bool", "DEFINE_boolean"):
                yield node
        stack.extend(iter_children(node))
