"""Timed regions: the code run between two timer reads, and what ran before the first.

`t0 = time.perf_counter()` ... `time.perf_counter() - t0` (or `t1 = time.perf_counter()` and
a later `t1 - t0`) times the statements between the two reads. `timed_region` finds the start
read that reaches a given end read, and lists what runs in between in execution order, as
`Step`s for `DeviceFlow`: the statements after the start, the headers of the compound
statements the end read sits in, and what comes before it in their bodies. Precision first:
no region when the start is ambiguous (rebound on another path, or inside a loop around the
end read), or when the end read sits in an `except`/`finally`/`else` block.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from . import _jaxapi
from ._waits import DeviceFlow, Step, Work, light_call
from ._nodes import free_names, iter_subtree, literal_iterations
from ._scope import target_names
from ._walk import walk_with_paths
from ._walk import iter_children


if TYPE_CHECKING:
    from ._context import FileContext


__all__ = [
    "TIMERS",
    "TIMEIT",
    "Figure",
    "Segment",
    "TimedRegion",
    "TimingIndex",
    "body_steps",
    "clears_caches_first",
    "is_timer_read",
    "measures_compile_or_dispatch",
]

# Clocks read around code to time it.
TIMERS = frozenset(
    {
        "time.time",
        "time.perf_counter",
        "time.monotonic",
        "time.process_time",
        "time.time_ns",
        "time.perf_counter_ns",
        "time.monotonic_ns",
        "time.process_time_ns",
        "timeit.default_timer",
    }
)
# `timeit` entry points that take the code to time as their first argument.
TIMEIT = frozenset({"timeit.timeit", "timeit.repeat", "timeit.Timer"})

_BLOCKS = (cst.IndentedBlock, cst.Module)
_LOOPS = (cst.For, cst.While)


@dataclass(frozen=True)
class Segment:
    """Statements `block.body[first:stop]` of one block, run in the region; then the
    `headers` of the compound statement at `stop` that the end read sits in (if any)."""

    block: cst.CSTNode  # an IndentedBlock or the Module
    path: tuple[cst.CSTNode, ...]  # the ancestors of `block`, then `block`
    first: int
    stop: int
    repeated: bool  # inside a loop, below the start, that holds the end read
    headers: tuple[Step, ...]

    def steps(self, first: int | None = None) -> Iterator[Step]:
        """The segment's statements from `first` (default: all of them) as steps."""
        for stmt in self.block.body[self.first if first is None else first : self.stop]:  # type: ignore[attr-defined]
            yield from _flatten(stmt, self.path, certain=True, repeated=self.repeated)


@dataclass(frozen=True)
class TimedRegion:
    """The code between a start read (`start`, a `t0 = timer()` line) and an end read."""

    start: cst.SimpleStatementLine
    start_name: str
    start_path: tuple[cst.CSTNode, ...]  # the ancestors of `start`
    end_line: cst.SimpleStatementLine  # the statement holding the end read
    end_path: tuple[cst.CSTNode, ...]  # its ancestors
    segments: tuple[Segment, ...]  # what runs between them, block by block, outermost first
    scope: cst.CSTNode  # the body of the function (or the module) holding both reads
    function: cst.FunctionDef | None  # that function
    start_in_loop: bool  # the whole region repeats (a loop around the start read)
    # The expressions that compute the elapsed time: `timer() - t0`, or each `t1 - t0` of the
    # scope when the end read is assigned (`t1 = timer()`).
    figures: tuple[cst.BinaryOperation, ...] = ()
    # The clock is restarted after each read, in the loop holding it: `start` is that restart,
    # and the region runs from the top of the loop's body to the read. Its work counts as
    # pending only when the code between the read and the restart waits for the device
    # (`TimingIndex.pending`).
    carried: bool = False

    def steps(self) -> Iterator[Step]:
        """What runs between the two reads, in execution order."""
        for segment in self.segments:
            yield from segment.steps()
            yield from segment.headers

    def before(self) -> Iterator[tuple[cst.CSTNode, tuple[cst.CSTNode, ...]]]:
        """The statements (and compound headers) of the scope that ran before `start`,
        nearest first, each with its ancestors."""
        path = (*self.start_path, self.start)
        for k in range(len(path) - 2, -1, -1):
            node = path[k]
            if isinstance(node, _BLOCKS):
                stop = next(i for i, n in enumerate(node.body) if n is path[k + 1])
                for stmt in reversed(node.body[:stop]):  # type: ignore[index]
                    yield stmt, path[: k + 1]
            elif not isinstance(node, cst.FunctionDef):
                for step in _headers(node, path[:k], path[k + 1]):
                    yield step.node, step.path
            if node is self.scope:
                return

    @property
    def running_clock(self) -> bool:
        """Whether the clock is started once and read on every iteration of a loop that does
        not restart it (`start = time.time()` before the epochs; `print(time.time() - start)`
        or `global_step / (time.time() - start)` in each): a running total of elapsed time or
        a throughput over the whole run, off by at most the one step still in flight, its
        first compile amortised over the run; not a measurement of the code between the two
        reads."""
        started = {id(n) for n in self.start_path}
        return any(isinstance(n, _LOOPS) and id(n) not in started for n in self.end_path)

    def bound_before(self, name: str) -> bool:
        """Whether `name` (its head) is a parameter of the function holding the region, or a
        plain assignment before the timer started binds it."""
        head = name.split(".", 1)[0]
        if self.function is not None:
            params = self.function.params
            every = (*params.posonly_params, *params.params, *params.kwonly_params)
            if any(p.name.value == head for p in every):
                return True
        for node, _ in self.before():
            if isinstance(node, cst.SimpleStatementLine):
                for small in node.body:
                    if isinstance(small, cst.Assign) and any(head in target_names(t.target) for t in small.targets):
                        return True
        return False


# What a log line says the timing measures when it is meant to include compile or to stop at
# the dispatch: "compilation done in %.2f s", "Submitted transfer in ...".
# "Loss warmup time: ...", "Warming up...": the interval is the warm-up, whose first call
# compiles on purpose ("... (after warmup)" measures what follows it).
_DISPATCH_OR_COMPILE = re.compile(
    r"compil|dispatch|submit|trac(?:e|ing)\b|lower(?:ed|ing)\b|(?<!after )(?<!after a )warm(?:ing)?[ _-]?up", re.IGNORECASE
)
# A name that says the same of the figure it holds: `warmup_time`, `compile_s`, `jit_seconds`.
_COMPILE_NAME = re.compile(r"warm_?up|compil|^jit_|_jit_", re.IGNORECASE)


def measures_compile_or_dispatch(region: TimedRegion) -> bool:
    """Whether the code says the region times a compile, a warm-up or a dispatch: the end
    read's statement, or a statement after it in the same block that reads the name it
    assigns, holds a string saying so, or the name it assigns says so
    (`warmup_ms = (time.perf_counter() - t0) * 1000`), or the log line right before the start
    read announces it (`print("Warming up...")`, `logging.info("Compiling model init")`)."""
    announced = next(iter(region.before()), None)
    if (
        announced is not None
        and isinstance(announced[0], cst.SimpleStatementLine)
        and all(isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) for small in announced[0].body)
        # a message, not the report of an earlier interval (`print(f"compile: {t1 - t0}")`)
        and not any(isinstance(n, cst.FormattedStringExpression) for n in iter_subtree(announced[0]))
        and _says_dispatch_or_compile(announced[0])
    ):
        return True
    end = region.end_line
    names = {n for small in end.body if isinstance(small, cst.Assign) for t in small.targets for n in target_names(t.target)}
    statements: list[cst.CSTNode] = [end]
    block = region.end_path[-1] if region.end_path else None
    body = getattr(block, "body", None)
    if names and isinstance(body, (list, tuple)):
        index = next((i for i, stmt in enumerate(body) if stmt is end), None)
        if index is not None:
            statements += [stmt for stmt in body[index + 1 : index + 4] if free_names(stmt) & names]
    if any(_COMPILE_NAME.search(name) for name in names):
        return True
    return any(_says_dispatch_or_compile(stmt) for stmt in statements)


def clears_caches_first(ctx: FileContext, region: TimedRegion) -> bool:
    """Whether the statement right before the start read empties JAX's compilation caches
    (`library.toml`'s `cache-clearing`: `jax.clear_caches()`, then `t = time.time()`): the
    region times a compile on purpose, and what it leaves in flight is small beside it."""
    before = next(iter(region.before()), None)
    if before is None or not isinstance(before[0], cst.SimpleStatementLine):
        return False
    statement, path = before
    return any(
        isinstance(small, cst.Expr)
        and isinstance(small.value, cst.Call)
        and ctx.resolve(small.value.func, (*path, statement, small), anchor=small.value) in _jaxapi.CACHE_CLEARING
        for small in statement.body
    )


def _says_dispatch_or_compile(statement: cst.CSTNode) -> bool:
    return any(
        isinstance(node, (cst.SimpleString, cst.FormattedStringText)) and _DISPATCH_OR_COMPILE.search(node.value)
        for node in iter_subtree(statement)
    )


@dataclass(frozen=True)
class Figure:
    """What makes a timed region's figure a time per unit of work (`TimingIndex.figure`):
    `kind` is "divided" (`elapsed / n_steps`), "rate" (`n_steps / elapsed`), "returned" (a
    benchmark helper's result) or "averaged" (`np.mean(times)`), at `node`; `gathered`, for
    the passes of a loop, the statements gathering each pass's figure (`times.append(dt)`)."""

    kind: str
    node: cst.CSTNode
    gathered: tuple[cst.CSTNode, ...] = ()


@dataclass
class _Progress:
    """How far the flow of one (start, chain of blocks) has been computed."""

    done: int  # statements of the last block fed so far
    flow: DeviceFlow
    cold: dict[str, tuple[cst.Call, tuple[cst.CSTNode, ...]]]  # jitted calls a loop of the region repeats
    # jitted calls run on every pass through the region (a region a loop repeats compiles them
    # on its first pass)
    first: dict[str, tuple[cst.Call, tuple[cst.CSTNode, ...]]]

    def copy(self, done: int | None = None) -> _Progress:
        return _Progress(self.done if done is None else done, self.flow.copy(), dict(self.cold), dict(self.first))


def is_timer_read(ctx: FileContext, call: cst.Call, ancestors: Sequence[cst.CSTNode]) -> bool:
    """Whether `call` (with `ancestors`) reads a clock: `time.perf_counter()` and the like."""
    return ctx.resolve(call.func, ancestors, anchor=call) in TIMERS


class TimingIndex:
    """The timed regions of one file, with the caches that keep the analysis linear in the
    file's size: the subtractions of each scope, the names each statement binds, positions
    in blocks, and the flow through each start read's region so far (later end reads of the
    same start extend it instead of starting over)."""

    def __init__(self, ctx: FileContext, *, helpers: bool = False) -> None:
        self.ctx = ctx
        self.helpers = helpers  # `DeviceFlow.helpers`: read calls of helpers that return work in flight
        # Caches keyed by node id; each entry keeps its node alive so ids stay unique.
        self._subtractions: dict[int, tuple[cst.CSTNode, dict[str, str], list[cst.BinaryOperation]]] = {}
        self._per_step: dict[tuple[int, bool], Figure | None] = {}
        self._binders: dict[int, tuple[cst.CSTNode, list[frozenset[str]], frozenset[str]]] = {}
        self._positions: dict[int, tuple[cst.CSTNode, dict[int, int]]] = {}
        self._progress: dict[tuple[int, ...], _Progress] = {}
        self._once: dict[int, bool] = {}
        self._warm: dict[tuple[int, str], bool] = {}

    # -- finding the region ----------------------------------------------------------------

    def region(self, read: cst.Call, ancestors: Sequence[cst.CSTNode]) -> TimedRegion | None:
        """The region that the timer read `read` (whose ancestors are `ancestors`) ends."""
        path = [*ancestors, read]
        line_index = _innermost(path, cst.SimpleStatementLine)
        if line_index is None or any(isinstance(n, cst.Lambda) for n in path[line_index:]):
            return None
        scope_index = _scope_index(path, line_index)
        if scope_index is None:
            return None
        start_name = self._start_name(path, path[scope_index])
        if start_name is None:
            return None
        # Walk up from the end read's statement to the scope, looking for the start read
        # among the statements before the path at each level.
        start: tuple[int, int] | None = None
        for k in range(line_index - 1, scope_index - 1, -1):
            block = path[k]
            if not isinstance(block, _BLOCKS):
                continue
            child_index = self._index_in(block, path[k + 1])
            if child_index is None:
                return None
            found = self._assignment_before(block, child_index, start_name, tuple(path[: k + 1]))
            if found is False:
                return None
            if found is not None:
                start = (k, found)
                break
        if start is None:
            return None
        start_k, start_index = start
        # The compounds between the start and the end read: their kind decides what ran.
        loops = []
        for k in range(start_k + 1, line_index):
            node, child = path[k], path[k + 1]
            if isinstance(node, (cst.Try, cst.TryStar)) and child is not node.body:
                return None
            if isinstance(node, (cst.For, cst.While)) and child is not node.body:
                return None
            if isinstance(node, cst.Match):
                return None
            if isinstance(node, _LOOPS):
                loops.append(k)
        carried = False
        if any(self._rebinds(path[k].body, start_name) for k in loops):  # type: ignore[attr-defined]
            # The start is rebound on a later iteration: only a restart right after the read
            # (`print(time() - t0)`, then `t0 = time()`) is understood.
            restart = self._restart(path, loops, line_index, start_name)
            if restart is None:
                return None
            block_k, restart_index, body_k = restart
            carried = True
        scope = path[scope_index]
        if carried:
            # What runs from the restart to the next read: the innermost loop's body from its
            # top (what follows the restart in the body, after the read, is left out).
            block = path[block_k]
            start_k, start_index = block_k, restart_index
            segments = tuple(self._segments(path, body_k, -1, line_index))
        else:
            block = path[start_k]
            segments = tuple(self._segments(path, start_k, start_index, line_index))
        parent = path[-2]
        if isinstance(parent, cst.BinaryOperation):
            figures: tuple[cst.BinaryOperation, ...] = (parent,)
        else:
            end_name = parent.targets[0].target.value  # type: ignore[attr-defined]
            figures = tuple(
                node
                for node in self._subtractions[id(scope)][2]
                if node.left.value == end_name and node.right.value == start_name  # type: ignore[attr-defined]
            )
        return TimedRegion(
            start=block.body[start_index],  # type: ignore[attr-defined]
            start_name=start_name,
            start_path=tuple(path[: start_k + 1]),
            end_line=path[line_index],  # type: ignore[arg-type]
            end_path=tuple(path[:line_index]),
            segments=segments,
            scope=scope,
            function=path[scope_index - 1] if isinstance(scope, cst.IndentedBlock) else None,  # type: ignore[arg-type]
            start_in_loop=any(isinstance(path[k], _LOOPS) for k in range(scope_index + 1, start_k)),
            figures=figures,
            carried=carried,
        )

    def _restart(
        self, path: Sequence[cst.CSTNode], loops: list[int], line_index: int, name: str
    ) -> tuple[int, int, int] | None:
        """Where a loop-carried clock restarts: `name = timer()` in the block of the end
        read's line, after it, and nowhere else in the loops between the start and the read
        (`if step % 200 == 0: print(time() - t0); t0 = time()`). Returns the block's index in
        `path`, the restart's index in the block, and the index of the innermost loop's body."""
        block_k = line_index - 1
        block = path[block_k]
        if not isinstance(block, cst.IndentedBlock) or not loops or block_k <= loops[-1]:
            return None
        read_index = self._index_in(block, path[line_index])
        if read_index is None:
            return None
        binders = self._binders_of(block)
        after = [i for i in range(read_index + 1, len(block.body)) if name in binders[i]]
        if len(after) != 1 or self._assignment_before(block, after[0] + 1, name, tuple(path[: block_k + 1])) != after[0]:
            return None
        outer = path[loops[0]]
        if sum(1 for bound in _bound_names(outer.body) if bound == name) != 1:  # type: ignore[attr-defined]
            return None
        if not isinstance(path[loops[-1] + 1], cst.IndentedBlock):
            return None
        return block_k, after[0], loops[-1] + 1

    def _segments(
        self, path: Sequence[cst.CSTNode], start_k: int, start_index: int, line_index: int
    ) -> Iterator[Segment]:
        """The blocks on the way from the start statement down to the end read's line."""
        k, first, repeated = start_k, start_index + 1, False
        while True:
            block = path[k]
            stop = self._index_in(block, path[k + 1])
            assert stop is not None
            if k + 1 == line_index:
                yield Segment(block, tuple(path[: k + 1]), first, stop, repeated, ())
                return
            # Descend through the compound statement (and its clauses) holding the end read.
            headers: list[Step] = []
            inner = repeated
            j = k + 1
            while not isinstance(path[j], _BLOCKS):
                for step in _headers(path[j], tuple(path[:j]), path[j + 1]):
                    headers.append(Step(step.node, step.path, converts=step.converts, repeated=inner, binds=step.binds))
                inner = inner or isinstance(path[j], _LOOPS)
                j += 1
            yield Segment(block, tuple(path[: k + 1]), first, stop, repeated, tuple(headers))
            k, first, repeated = j, 0, inner

    # -- what happens in it ----------------------------------------------------------------

    def pending(self, region: TimedRegion) -> list[Work]:
        """The device work started in `region` that nothing waits for before the end read:
        the leaves of it (see `DeviceFlow.leaves`). A wait on the end read's own line (as in
        `print(f"{loss} {time.time() - t0}")`) counts."""
        flow = self._walk(region).flow.copy()
        flow.feed_waits(Step(region.end_line, region.end_path))
        if region.carried and not self._waits_before_restart(region, flow.copy()):
            return []
        leaves = [work for work in flow.leaves() if not self._waited_every_pass(region, work, flow)]
        if flow.settled and all(self._light(work) for work in leaves):
            return []
        if leaves and self._host_fed(region, flow) and not self.reported_per_step(region):
            return []
        return leaves

    def _light(self, work: Work) -> bool:
        """Whether `work` is only array operations that make one pass over their inputs
        (`library.toml`'s `light-array-ops`: `jnp.mean(jnp.array(losses))`, an `argmax`),
        called eagerly, or calls of functions, jitted or not, of this file or another module
        of the project whose only device work is such operations (`light_call`: a gradient
        norm). `pending` drops such work when the region waited for device work it
        had started before (`DeviceFlow.settled`): the work it timed is done, and what is left
        in flight takes microseconds on values the host has just waited for."""
        path = (*work.step.path, work.step.node)
        return all(
            (self.ctx.resolve(call.func, path, anchor=call) in _jaxapi.LIGHT_ARRAY_OPS and self.ctx.jit.callee(call, path) is None)
            or light_call(self.ctx, call, path)
            for call in work.calls
        )

    def _host_fed(self, region: TimedRegion, flow: DeviceFlow) -> bool:
        """Whether all the work the region leaves in flight copies host data the region made
        to the device (`jnp.asarray(mesh.mask)`, `jax.device_put(table)` after
        `mesh = load_mesh(path)`), or makes one light pass (`light-array-ops`) over such
        copies (`jnp.sum(wet)`): a set-up timer around loading or building on the host. The
        host spent at least as long making the data as the device needs to receive it and
        pass over it once, so the figure is the host's. A copy of data made before the clock
        started (a benchmark of the transfer), or work on it, is not host-fed."""
        if not flow.pending:
            return False
        made = {n for work in flow.pending for n in work.names if n}
        host = _bound_in(region) - flow.device - made
        for work in flow.pending:
            path = (*work.step.path, work.step.node)
            for call in work.calls:
                name = self.ctx.resolve(call.func, path, anchor=call)
                if self.ctx.jit.callee(call, path) is not None:
                    return False
                if name in _jaxapi.SETUP_ARRAY_OPS:
                    continue
                data = [a.value for a in call.args if a.keyword is None and not a.star]
                reads = set().union(*(_data_names(v) for v in data)) if data else set()
                if name in _TRANSFERS:
                    # host data made here: a value a call computes right there, or one built
                    # from names the region bound, none of them known to hold device values
                    if not data:
                        return False
                    known = reads & (flow.device - made) or any(self.ctx.device.holds(cst.Name(n), path) for n in reads - made)
                    if known or not (isinstance(data[0], cst.Call) or reads & host):
                        return False
                elif name in _jaxapi.LIGHT_ARRAY_OPS:
                    # over the copies made here only: a value an unknown call returned may be
                    # a model's output on the device
                    if not reads or not reads <= made:
                        return False
                else:
                    return False
        return True

    def _waited_every_pass(self, region: TimedRegion, work: Work, flow: DeviceFlow) -> bool:
        """Whether `work` was started in a loop of the region that runs many times
        (`_frequency.loop_runs`) and waits for the device on its iterations: a wait before
        the dispatch in the loop's body (`print(loss)` at the top, then `loss = step(...)`),
        which the next pass meets, or in a branch of it (every k steps). Then at the read only
        the work started since the last pass's wait is in flight, a small part of the many
        passes the figure covers, as the judging standard reads a whole run whose loop waits
        ("at most the last step's work is still queued"). The next pass is read by feeding
        the loop's body once more, after the region's last statement; a loop that runs few
        times (a spelled count of 20 or less, epochs) is not amortised: its last pass is a
        large part of the figure."""
        from ._frequency import Often, loop_runs

        started = {id(n) for n in region.start_path}
        path = work.step.path
        for index, node in enumerate(path[:-1]):
            if not isinstance(node, _LOOPS) or id(node) in started or path[index + 1] is not node.body:
                continue
            if loop_runs(self.ctx, node, path[:index]).often is not Often.MANY:
                continue
            again = flow.copy()
            before = again.waits
            here = (*path[:index], node)
            if isinstance(node, cst.While):
                again.feed(Step(node.test, here, converts=True, repeated=True))
            for step in _body(node.body, here, certain=True, repeated=True):
                again.feed(step)
            if again.waits > before:
                return True
        return False

    def _waits_before_restart(self, region: TimedRegion, flow: DeviceFlow) -> bool:
        """Whether, with a clock restarted after each read, the code between the read and the
        restart waits for device work (a report that prints the loss, an evaluation): the work
        in flight at the read then finishes outside every interval, and the figures miss it.
        A restart right after the read, or after code that waits for nothing, makes intervals
        that follow each other: the work left in flight at one read is timed in the next
        interval, as with a running clock."""
        block = region.start_path[-1]
        body = block.body  # type: ignore[attr-defined]
        read = self._index_in(block, region.end_line)
        restart = self._index_in(block, region.start)
        if read is None or restart is None:
            return False
        flow.feed(Step(region.end_line, region.end_path))
        before = flow.waits
        for stmt in body[read + 1 : restart]:
            for step in _flatten(stmt, region.start_path, certain=True, repeated=False):
                flow.feed(step)
        return flow.waits > before

    def cold_calls(self, region: TimedRegion) -> list[tuple[cst.Call, tuple[cst.CSTNode, ...], str]]:
        """Calls of jitted functions repeated inside the timed region whose function was not
        called (or otherwise used) before the timer started: the first timed call compiles,
        inside the region.

        When a loop repeats the region itself, only its first pass compiles: reported, for
        the jitted calls every pass makes, when the figures of the passes are averaged
        (`times.append(time() - t0)` in the loop, then `np.mean(times)`; see
        `averaged_over_passes`), since the compile is then in the average; silent when they
        are reported one by one or by their best (`min(times)`), which leaves the compile out.

        Silent when the function holding it may run more than once (see `_runs_once`): an
        earlier run would have compiled; and when the figure is not reported per step (see
        `reported_per_step`): the wall time of a whole job includes its one compile, as it
        should."""
        if region.start_in_loop:
            if not self.averaged_over_passes(region):
                return []
            found = self._walk(region).first
        else:
            found = self._walk(region).cold
        if not found:
            return []
        once = self._once.get(id(region.scope))
        if once is None:
            once = self._once[id(region.scope)] = _runs_once(region.scope, self.ctx.module)
        if not once or not (region.start_in_loop or self.reported_per_step(region)):
            return []
        if not region.start_in_loop and self._read_on_iterations(region):
            return []  # the run's own clock: its total and rate are over the whole run
        hits = []
        for callee, (call, path) in found.items():
            key = (id(region.start), callee)
            if key not in self._warm:
                self._warm[key] = _used_before(region, callee)
            if not self._warm[key]:
                hits.append((call, path, callee))
        return hits

    def _read_on_iterations(self, region: TimedRegion) -> bool:
        """Whether the clock is also read, without a restart, on the iterations of a loop
        between its start and this read (`elapsed = time.time() - t_start` in each logging
        step of the training loop): a running clock of the whole run, so a total or rate
        read from it after the loop is the run's too, its one compile amortised over the run
        (`TimedRegion.running_clock`, for the reads in the loop). The read may be bound to a
        name first in the loop (`now = time.time()`, then `now - t_start`)."""
        repeated = [
            (node, path)
            for segment in region.segments
            for step in segment.steps()
            if step.repeated
            for node, path in walk_with_paths(step.node, list(step.path))
        ]
        reads = {
            node.targets[0].target.value
            for node, path in repeated
            if isinstance(node, cst.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0].target, cst.Name)
            and isinstance(node.value, cst.Call)
            and is_timer_read(self.ctx, node.value, [*path, node])
        }
        for node, path in repeated:
            if (
                isinstance(node, cst.BinaryOperation)
                and isinstance(node.operator, cst.Subtract)
                and isinstance(node.right, cst.Name)
                and node.right.value == region.start_name
                and (
                    (isinstance(node.left, cst.Call) and is_timer_read(self.ctx, node.left, [*path, node]))
                    or (isinstance(node.left, cst.Name) and node.left.value in reads and node.left.value != region.start_name)
                )
            ):
                return True
        return False

    def _walk(self, region: TimedRegion) -> _Progress:
        """Feed the region's steps, reusing what an earlier end read of the same start (down
        the same blocks) computed: each statement is analysed once per start."""
        key: tuple[int, ...] = (id(region.start), int(region.carried))
        state = _Progress(0, DeviceFlow(self.ctx, helpers=self.helpers), {}, {})
        for segment in region.segments:
            key = (*key, id(segment.block))
            cached = self._progress.get(key)
            if cached is not None and cached.done <= segment.stop:
                state = cached.copy()
            else:
                state = state.copy(segment.first)
            for step in segment.steps(state.done):
                self._feed(state, step)
            state.done = segment.stop
            self._progress[key] = state.copy()
            for step in segment.headers:
                self._feed(state, step)
        return state

    def _feed(self, state: _Progress, step: Step) -> None:
        state.flow.feed(step)
        if step.repeated or step.certain:
            for call, path in _step_calls(step):
                callee = _callee_name(call)
                if callee is None or (callee in state.cold and callee in state.first):
                    continue
                if self.ctx.jit.callee(call, path):
                    if step.repeated:
                        state.cold.setdefault(callee, (call, path))
                    if step.certain:
                        state.first.setdefault(callee, (call, path))

    def reported_per_step(self, region: TimedRegion) -> bool:
        """Whether the elapsed time is made a figure per unit of work: divided by a count
        (`elapsed / n_steps`, `(time() - t0) / len(batches)`) or dividing one (a rate,
        `n_steps / elapsed`), directly or through the names it is stored in; or returned by the
        function measuring it, a benchmark helper whose caller reports it. A total printed as
        it is, or only scaled to other units (`/ 60`, `* 1000`), is the wall time of the
        whole run: "training took 20 min", "weights loaded in 3 s", one compile included."""
        return self._figure_test(region, across=False)

    def averaged_over_passes(self, region: TimedRegion) -> bool:
        """Whether the figures of the passes of a loop repeating the region are gathered
        (appended to a list, added up) and the gathered figures averaged: `np.mean(times)`,
        `sum(times) / len(times)`, `total / n_trials`. The best of them (`min(times)`), or
        each printed as it comes, is not an average."""
        return self._figure_test(region, across=True)

    def figure(self, region: TimedRegion, *, across: bool) -> Figure | None:
        """What makes the region's figure a time per step (`reported_per_step`) or, with
        `across`, an average over the passes of a loop repeating it (`averaged_over_passes`)."""
        key = (id(region.figures[0]) if region.figures else id(region.end_line), across)
        if key not in self._per_step:
            path = region.start_path[: next(i for i, n in enumerate(region.start_path) if n is region.scope) + 1]

            def is_average(call: cst.Call) -> bool:
                return self.ctx.resolve(call.func, path, anchor=call) in _jaxapi.AVERAGES

            self._per_step[key] = _per_step(region, is_average, across=across)
        return self._per_step[key]

    def _figure_test(self, region: TimedRegion, *, across: bool) -> bool:
        return self.figure(region, across=across) is not None

    def line(self, region: TimedRegion, node: cst.CSTNode) -> int | None:
        """The line of `node`, a node of the region's scope (for evidence)."""
        from ._positions import line_of

        module = self.ctx.module
        if region.function is not None and len(region.start_path) > 1:
            return line_of(module, node, region.start_path[:2])  # the statement holding the function
        top = next((stmt for stmt in module.body if any(n is node for n in iter_subtree(stmt))), None)
        return line_of(module, node, [module, top]) if top is not None else None

    # -- caches ----------------------------------------------------------------------------

    def _index_in(self, block: cst.CSTNode, child: cst.CSTNode) -> int | None:
        """The position of `child` in `block.body`."""
        cached = self._positions.get(id(block))
        if cached is None:
            body = block.body  # type: ignore[attr-defined]
            cached = self._positions[id(block)] = (block, {id(n): i for i, n in enumerate(body)})
        return cached[1].get(id(child))

    def _start_name(self, path: Sequence[cst.CSTNode], scope: cst.CSTNode) -> str | None:
        """The name the end read is measured from: `timer() - t0`, or `t1 = timer()` and a
        `t1 - t0` somewhere in the scope."""
        read, parent = path[-1], path[-2]
        if isinstance(parent, cst.BinaryOperation) and parent.left is read:
            if isinstance(parent.operator, cst.Subtract) and isinstance(parent.right, cst.Name):
                return parent.right.value
            return None
        if not (isinstance(parent, cst.Assign) and parent.value is read and len(parent.targets) == 1):
            return None
        target = parent.targets[0].target
        if not isinstance(target, cst.Name):
            return None
        cached = self._subtractions.get(id(scope))
        if cached is None:
            pairs: dict[str, str] = {}
            nodes: list[cst.BinaryOperation] = []
            for node in iter_subtree(scope, into_scopes=False):
                if (
                    isinstance(node, cst.BinaryOperation)
                    and isinstance(node.operator, cst.Subtract)
                    and isinstance(node.left, cst.Name)
                    and isinstance(node.right, cst.Name)
                ):
                    pairs.setdefault(node.left.value, node.right.value)
                    nodes.append(node)
            cached = self._subtractions[id(scope)] = (scope, pairs, nodes)
        return cached[1].get(target.value)

    def _binders_of(self, block: cst.CSTNode) -> list[frozenset[str]]:
        """The names each statement of `block` binds."""
        cached = self._binders.get(id(block))
        if cached is None:
            binds = [frozenset(_bound_names(stmt)) for stmt in block.body]  # type: ignore[attr-defined]
            cached = self._binders[id(block)] = (block, binds, frozenset().union(*binds))
        return cached[1]

    def _rebinds(self, body: cst.BaseSuite, name: str) -> bool:
        """Whether a loop body binds `name` anywhere."""
        if isinstance(body, cst.SimpleStatementSuite):
            return name in set(_bound_names(body))
        self._binders_of(body)
        return name in self._binders[id(body)][2]

    def _assignment_before(
        self, block: cst.CSTNode, stop: int, name: str, block_path: tuple[cst.CSTNode, ...]
    ) -> int | None | bool:
        """The index of the nearest statement of `block` before `stop` that binds `name`, if
        it is `name = <timer read>`; False if it binds it otherwise; None if none does."""
        binders = self._binders_of(block)
        body = block.body  # type: ignore[attr-defined]
        for index in range(stop - 1, -1, -1):
            if name not in binders[index]:
                continue
            stmt = body[index]
            if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
                small = stmt.body[0]
                if (
                    isinstance(small, cst.Assign)
                    and len(small.targets) == 1
                    and isinstance(small.targets[0].target, cst.Name)
                    and isinstance(small.value, cst.Call)
                    and is_timer_read(self.ctx, small.value, (*block_path, stmt, small))
                ):
                    return index
            return False
        return None


def _per_step(region: TimedRegion, is_average: Callable[[cst.Call], bool], *, across: bool = False) -> Figure | None:
    """See `TimingIndex.reported_per_step`; with `across`, `averaged_over_passes`."""
    if not region.figures:
        return None
    nodes = list(iter_subtree(region.scope, into_scopes=False))
    figures = {id(f) for f in region.figures}
    # The names the figure is stored in, and those computed from them (`ms = elapsed * 1e3`).
    names = _carriers(nodes, figures, set())
    if across:
        # Only what gathers the figure of every pass: `times.append(elapsed)`, `total += dt`;
        # not when the code averages some of them (`np.mean(times[1:])` drops the first).
        loop = next((n for n in reversed(region.start_path) if isinstance(n, _LOOPS)), None)
        gathered = _collectors(loop, figures, names) if loop is not None else {}
        if not gathered or any(_sliced(node, set(gathered)) for node in nodes):
            return None
        names = _carriers(nodes, set(), set(gathered))
        figures = set()
        counts = {literal_iterations(loop)} - {None, 0}  # `total / 50` after `for _ in range(50)`
    else:
        counts = _literal_counts(region)

    def carries(expr: cst.CSTNode) -> bool:
        return _carries(expr, figures, names)

    gatherers = tuple(gathered.values()) if across else ()
    for node in nodes:
        if not across and isinstance(node, cst.Return) and node.value is not None and carries(node.value):
            return Figure("returned", node) if region.function is not None else None
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.Divide, cst.FloorDivide)):
            left, right = carries(node.left), carries(node.right)
            if left and (not _constant(node.right) or _literal_int(node.right) in counts):
                return Figure("divided", node, gatherers)  # `elapsed / n_steps`, or `/ 100` after `for _ in range(100)`
            if right and not _constant(node.left):
                return Figure("rate", node, gatherers)  # a rate: `n_steps / elapsed`
        if isinstance(node, cst.Call) and any(carries(a.value) for a in node.args) and is_average(node):
            return Figure("averaged", node, gatherers)  # `np.mean(times)`
    return None


def _carries(expr: cst.CSTNode, figures: set[int], names: set[str]) -> bool:
    return any(
        id(node) in figures or (isinstance(node, cst.Name) and node.value in names)
        for node in iter_subtree(expr, into_scopes=False)
    )


def _carriers(nodes: list[cst.CSTNode], figures: set[int], names: set[str]) -> set[str]:
    """`names` and the names assigned from the figures or from them, a few assignments deep."""
    names = set(names)
    for _ in range(3):
        before = len(names)
        for node in nodes:
            if (
                isinstance(node, (cst.Assign, cst.AnnAssign, cst.AugAssign))
                and node.value is not None
                and _carries(node.value, figures, names)
            ):
                targets = node.targets if isinstance(node, cst.Assign) else [node]
                names.update(n for t in targets for n in target_names(t.target))
        if len(names) == before:
            break
    return names


def _collectors(loop: cst.For | cst.While, figures: set[int], names: set[str]) -> dict[str, cst.CSTNode]:
    """The names that gather the figure on every pass of `loop`: a list it is appended to
    (`times.append(dt)`) or a sum it is added to (`total += dt`), in a statement of the loop's
    body that no `if`, `try` or inner loop guards (`if i > 0: times.append(dt)` skips one); each
    with the statement that gathers it."""
    found: dict[str, cst.CSTNode] = {}
    stack: list[cst.CSTNode] = [loop.body]
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.IndentedBlock, cst.SimpleStatementSuite)):
            stack.extend(node.body)
        elif isinstance(node, cst.With):
            stack.append(node.body)
        elif isinstance(node, cst.SimpleStatementLine):
            for small in node.body:
                value = small.value if isinstance(small, cst.Expr) else None
                if (
                    isinstance(value, cst.Call)
                    and isinstance(value.func, cst.Attribute)
                    and value.func.attr.value == "append"
                    and isinstance(value.func.value, cst.Name)
                    and any(_carries(a.value, figures, names) for a in value.args)
                ):
                    found.setdefault(value.func.value.value, node)
                elif (
                    isinstance(small, cst.AugAssign)
                    and isinstance(small.operator, cst.AddAssign)
                    and isinstance(small.target, cst.Name)
                    and _carries(small.value, figures, names)
                ):
                    found.setdefault(small.target.value, node)
    return found


def _sliced(node: cst.CSTNode, names: set[str]) -> bool:
    """`times[1:]`, `times[warmup:]`: some of the gathered figures, not all."""
    return (
        isinstance(node, cst.Subscript)
        and isinstance(node.value, cst.Name)
        and node.value.value in names
        and any(isinstance(e.slice, cst.Slice) for e in node.slice)
    )


def _literal_counts(region: TimedRegion) -> set[int]:
    """How many times the loops of the region run where their headers spell it
    (`for _ in range(100)`)."""
    counts: set[int] = set()
    for segment in region.segments:
        for stmt in segment.block.body[segment.first : segment.stop]:  # type: ignore[attr-defined]
            for node in iter_subtree(stmt, into_scopes=False):
                count = literal_iterations(node)
                if count:
                    counts.add(count)
    return counts


def _literal_int(expr: cst.CSTNode) -> int | None:
    return int(expr.evaluated_value) if isinstance(expr, cst.Integer) else None


def _constant(expr: cst.CSTNode) -> bool:
    """A number spelled in the code, or arithmetic of numbers (`60`, `1e6`, `60 * 60`)."""
    return all(
        isinstance(node, (cst.Integer, cst.Float, cst.BinaryOperation, cst.UnaryOperation))
        or not isinstance(node, cst.BaseExpression)
        for node in iter_subtree(expr, into_scopes=False)
    )


def _bound_names(stmt: cst.CSTNode) -> Iterator[str]:
    """Every name a statement binds (as `assigns_name` sees them), in one pass."""
    for node in iter_subtree(stmt, into_scopes=False):
        if isinstance(node, cst.Assign):
            for t in node.targets:
                yield from target_names(t.target)
        elif isinstance(node, (cst.AnnAssign, cst.AugAssign, cst.For, cst.CompFor)):
            yield from target_names(node.target)
        elif isinstance(node, cst.WithItem) and node.asname is not None:
            yield from target_names(node.asname.name)
        elif isinstance(node, cst.NamedExpr) and isinstance(node.target, cst.Name):
            yield node.target.value
        elif isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            yield node.name.value


def _innermost(path: Sequence[cst.CSTNode], kind: type) -> int | None:
    for index in range(len(path) - 1, -1, -1):
        if isinstance(path[index], kind):
            return index
    return None


def _scope_index(path: Sequence[cst.CSTNode], below: int) -> int | None:
    """The index of the module's or function's body block holding the statement at `below`."""
    for index in range(below - 1, -1, -1):
        node = path[index]
        if isinstance(node, cst.Module):
            return index
        if isinstance(node, cst.FunctionDef) and path[index + 1] is node.body:
            return index + 1
        if isinstance(node, (cst.ClassDef, cst.Lambda)):
            return None
    return None


def _headers(node: cst.CSTNode, prefix: tuple[cst.CSTNode, ...], child: cst.CSTNode) -> Iterator[Step]:
    """The expressions of a compound statement that run before the clause `child`."""
    here = (*prefix, node)
    if isinstance(node, cst.For):
        yield Step(node.iter, here, binds=node.target)
    elif isinstance(node, (cst.If, cst.While)):
        yield Step(node.test, here, converts=True)
    elif isinstance(node, cst.With):
        for item in node.items:
            yield Step(item.item, (*here, item))


def _flatten(
    stmt: cst.CSTNode, prefix: tuple[cst.CSTNode, ...], *, certain: bool, repeated: bool
) -> Iterator[Step]:
    """`stmt` as steps in execution order; a loop body once (its last iteration)."""
    here = (*prefix, stmt)
    if isinstance(stmt, cst.SimpleStatementLine):
        yield Step(stmt, prefix, certain=certain, repeated=repeated)
        return
    if isinstance(stmt, cst.For):
        yield Step(stmt.iter, here, certain=certain, repeated=repeated, binds=stmt.target)
        yield from _body(stmt.body, here, certain=certain and _runs(stmt), repeated=True)
        if stmt.orelse is not None:
            yield from _body(stmt.orelse.body, (*here, stmt.orelse), certain=False, repeated=repeated)
    elif isinstance(stmt, cst.While):
        yield Step(stmt.test, here, certain=certain, converts=True, repeated=True)
        yield from _body(stmt.body, here, certain=certain and _runs(stmt), repeated=True)
        if stmt.orelse is not None:
            yield from _body(stmt.orelse.body, (*here, stmt.orelse), certain=False, repeated=repeated)
    elif isinstance(stmt, cst.If):
        yield Step(stmt.test, here, certain=certain, converts=True, repeated=repeated)
        yield from _body(stmt.body, here, certain=False, repeated=repeated)
        if isinstance(stmt.orelse, cst.If):
            yield from _flatten(stmt.orelse, here, certain=False, repeated=repeated)
        elif stmt.orelse is not None:
            yield from _body(stmt.orelse.body, (*here, stmt.orelse), certain=False, repeated=repeated)
    elif isinstance(stmt, cst.With):
        for item in stmt.items:
            yield Step(item.item, (*here, item), certain=certain, repeated=repeated)
        yield from _body(stmt.body, here, certain=certain, repeated=repeated)
    elif isinstance(stmt, (cst.Try, cst.TryStar)):
        yield from _body(stmt.body, here, certain=False, repeated=repeated)
        for handler in stmt.handlers:
            yield from _body(handler.body, (*here, handler), certain=False, repeated=repeated)
        if stmt.orelse is not None:
            yield from _body(stmt.orelse.body, (*here, stmt.orelse), certain=False, repeated=repeated)
        if stmt.finalbody is not None:
            yield from _body(stmt.finalbody.body, (*here, stmt.finalbody), certain=certain, repeated=repeated)


def _body(
    block: cst.BaseSuite, prefix: tuple[cst.CSTNode, ...], *, certain: bool, repeated: bool
) -> Iterator[Step]:
    if isinstance(block, cst.SimpleStatementSuite):
        yield Step(block, prefix, certain=certain, repeated=repeated)  # `for x in y: f(x)`
        return
    here = (*prefix, block)
    for stmt in block.body:
        yield from _flatten(stmt, here, certain=certain, repeated=repeated)


def body_steps(block: cst.BaseSuite, prefix: tuple[cst.CSTNode, ...]) -> Iterator[Step]:
    """The statements of a function's body `block` (whose ancestors are `prefix`) as steps
    in execution order, a loop's body once: what `DeviceFlow` reads of a whole call."""
    return _body(block, prefix, certain=True, repeated=False)


def _runs(loop: cst.For | cst.While) -> bool:
    """Whether a loop surely runs its body at least once: `for _ in range(<positive
    literal>)`, a non-empty literal sequence, or `while True`."""
    if isinstance(loop, cst.While):
        return isinstance(loop.test, cst.Name) and loop.test.value == "True"
    if isinstance(loop.iter, (cst.Tuple, cst.List)):
        return bool(loop.iter.elements)
    return (literal_iterations(loop) or 0) > 0


# Copies of host data to the device.
_TRANSFERS = frozenset({"jax.numpy.asarray", "jax.numpy.array", "jax.device_put"})


def _data_names(expr: cst.CSTNode) -> set[str]:
    """The names `expr` reads as data, not as the head of a function it calls
    (`np.asarray(mesh.area)` reads `mesh`, not `np`)."""
    called = set()
    for node in iter_subtree(expr, into_scopes=False):
        if isinstance(node, cst.Call):
            head = node.func
            while isinstance(head, cst.Attribute):
                head = head.value
            if isinstance(head, cst.Name):
                called.add(head.value)
    return free_names(expr) - called


def _bound_in(region: TimedRegion) -> set[str]:
    """The names the region's statements bind (assignment and loop targets)."""
    bound: set[str] = set()
    for step in region.steps():
        if step.binds is not None:
            bound.update(target_names(step.binds))
        node = step.node
        smalls = node.body if isinstance(node, (cst.SimpleStatementLine, cst.SimpleStatementSuite)) else ()
        for small in smalls:
            if isinstance(small, cst.Assign):
                for target in small.targets:
                    bound.update(target_names(target.target))
            elif isinstance(small, (cst.AnnAssign, cst.AugAssign)):
                bound.update(target_names(small.target))
    return bound


def _step_calls(step: Step) -> Iterator[tuple[cst.Call, tuple[cst.CSTNode, ...]]]:
    stack: list[tuple[cst.CSTNode, tuple[cst.CSTNode, ...]]] = [(step.node, step.path)]
    while stack:
        node, path = stack.pop()
        if isinstance(node, cst.Call):
            yield node, path
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        below = (*path, node)
        stack.extend((child, below) for child in reversed(list(iter_children(node))))


def _callee_name(call: cst.Call) -> str | None:
    """`step` for `step(x)`, `self.step` for `self.step(x)`; None for anything else."""
    func = call.func
    if isinstance(func, cst.Name):
        return func.value
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
        if func.value.value in ("self", "cls"):
            return f"{func.value.value}.{func.attr.value}"
    return None


def _used_before(region: TimedRegion, callee: str) -> bool:
    """Whether the code before the start read names `callee` other than by defining it
    (`def step`, `step = jax.jit(...)`): a call, `f.lower(...)`, passing it to a helper."""
    attr = callee.split(".", 1)[1] if "." in callee else None
    for node, _ in region.before():
        defining: set[int] = set()
        for sub in iter_subtree(node):
            if isinstance(sub, cst.FunctionDef):
                defining.add(id(sub.name))
            elif isinstance(sub, cst.Assign):
                defining.update(id(t.target) for t in sub.targets)
            if id(sub) in defining:
                continue
            if attr is None and isinstance(sub, cst.Name) and sub.value == callee:
                return True
            if attr is not None and isinstance(sub, cst.Attribute) and sub.attr.value == attr:
                return True
    return False


def _runs_once(scope: cst.CSTNode, module: cst.Module) -> bool:
    """Whether the code of `scope` (a module, or a function's body) runs once per program:
    module code does; a function (not a method) does when the file calls it exactly once,
    outside loops (`main()`, `app.run(main)`). A function called from elsewhere may run many
    times, and an earlier run compiles for the later ones."""
    if isinstance(scope, cst.Module):
        return True
    owner = None
    stack: list[tuple[cst.CSTNode, bool]] = [(module, False)]
    uses: list[bool] = []
    for node in iter_subtree(module):
        if isinstance(node, cst.FunctionDef) and node.body is scope:
            owner = node
            break
        if isinstance(node, cst.ClassDef) and any(
            isinstance(n, cst.FunctionDef) and n.body is scope for n in node.body.body
        ):
            return False  # a method
    if owner is None:
        return False
    name = owner.name.value
    while stack:
        node, in_loop = stack.pop()
        if node is owner.name:
            continue
        if isinstance(node, cst.Name) and node.value == name:
            uses.append(in_loop)
        elif isinstance(node, cst.Attribute) and node.attr.value == name:
            uses.append(in_loop)
            stack.append((node.value, in_loop))
            continue
        looping = in_loop or isinstance(node, (cst.For, cst.While, cst.ListComp, cst.GeneratorExp))
        stack.extend((child, looping) for child in iter_children(node))
    return uses == [False]
