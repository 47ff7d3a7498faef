"""`profile()`: watch a real run of a JAX program and measure what it costs, line by line.

What is recorded, and how:

- **compiles**, from jax's own signals: the `/jax/core/compile/*_duration` events of
  `jax.monitoring` (trace, lowering and backend compile time, through `CompileCounter`), the
  `jax_explain_cache_misses` message jax logs before each retrace (what changed), and the user's
  line on the Python stack when the compile happened. `jax.jit` and `eqx.filter_jit` are
  wrapped while the block runs so that a jit wrapper of a new function can be traced back to
  the line that built it.
- **host waits**, with `count_host_syncs`'s patching of the `jax.Array` conversions: each
  conversion's line, whether its array was dispatched since the program last waited for the
  device (`_ledger`: so the conversion waited for it, however fast the device), whether it was
  still being computed (`is_ready()` before it), and how long it took.
- **Python overhead**: time in `eqx.filter_jit`'s flattening and rebuilding of pytrees
  (`_preprocess`/`_postprocess`) per call site, and time in `eqx.tree_at` per call site, with
  the calls one function invocation made in a row.
- **eager dispatch**: JAX operations run outside any trace, per user function (`_eager`).
- **clock reads** that end an interval before the work dispatched in it was waited for, or
  with a first compile inside it (`_timers`).
"""

from __future__ import annotations

import re
import sys
import threading
import time
from collections import OrderedDict
from contextlib import ExitStack
from dataclasses import dataclass, field
from types import FrameType, TracebackType
from typing import Any

from ._compile import _EXPLAIN_LOGGER, CompileCounter
from ._eager import EagerOps
from ._frames import user_frame
from ._host_sync import HostSync, HostSyncCounter, in_batched_transfer
from ._ledger import Ledger
from ._timers import TimerReads


_clock = time.perf_counter  # bound before `profile()` wraps the clocks
Site = tuple[str, int]  # (absolute file name, line)

TRACE_EVENT = "/jax/core/compile/jaxpr_trace_duration"
LOWER_EVENT = "/jax/core/compile/jaxpr_to_mlir_module_duration"
_NEW_FUNCTION = re.compile(r"never seen function:\s*\n\s*(?P<name>.+?) id=(?P<id>\d+) defined at (?P<at>\S+)")
_SEEN_FUNCTION = re.compile(r"\n\s*for (?P<name>.+?) defined at (?P<at>\S+)")
_MAX_CREATED = 100_000
_MAX_OPEN_BURSTS = 8


def _site(frame: FrameType | None) -> Site | None:
    frame = user_frame(frame)
    return None if frame is None else (frame.f_code.co_filename, frame.f_lineno)


def _split_at(at: str) -> Site | None:
    path, _, line = at.rpartition(":")
    return (path, int(line)) if path and line.isdigit() else None


@dataclass
class CompileEvent:
    """One XLA compile: of what, triggered from which user line, how long, and jax's reason."""

    name: str
    site: Site | None
    seconds: float  # tracing + lowering + backend compile
    explanation: str | None = None  # jax_explain_cache_misses, for functions outside jax
    new_function: bool = False  # jax had never seen this function object
    function_id: int | None = None
    defined_at: Site | None = None
    created_at: Site | None = None  # where the jit wrapper of the new function was built

    @property
    def key(self) -> tuple[str, Site | None]:
        return (self.name, self.defined_at)


@dataclass
class SyncSite:
    """Conversions of device arrays to host values made at one line."""

    count: int = 0
    pending: int = 0  # conversions whose array was still being computed (`is_ready()` before)
    seconds: float = 0.0
    pending_seconds: float = 0.0
    kinds: dict[str, int] = field(default_factory=dict)
    batched: int = 0  # of `waits`, those inside `to_host`: the one wait a fix leaves
    waits: int = 0  # conversions of an array dispatched since the previous sync (`_ledger`): they waited
    wait_seconds: float = 0.0  # how long those took (on a fast device the work may have been done)


@dataclass
class CallSite:
    """Calls of a wrapper (`eqx.filter_jit`, `eqx.tree_at`) at one line."""

    name: str
    calls: int = 0
    seconds: float = 0.0  # the whole call
    overhead: float = 0.0  # filter_jit: flattening and rebuilding pytrees
    bursts: int = 0  # tree_at: runs of calls from one invocation of a function, starting here
    burst_calls: int = 0
    burst_seconds: float = 0.0
    burst_lines: set[int] = field(default_factory=set)


class _Compiles(CompileCounter):
    def __init__(self, sink: list[CompileEvent], created: dict[int, Site]) -> None:
        super().__init__(explain=True)
        self._sink = sink
        self._created = created
        self._front: dict[int, float] = {}  # thread -> trace + lowering seconds before the compile
        # thread -> explanations since the last compile: the outer function's, then those of
        # functions traced inside it (which are inlined, never compiled on their own)
        self._why: dict[int, list[str]] = {}

    def __enter__(self) -> _Compiles:
        import logging

        import jax

        asked = bool(jax.config.jax_explain_cache_misses)  # the program's own choice
        super().__enter__()
        if not asked and self._stack is not None:
            # The explanations jax now logs are ours: keep them out of the program's logging.
            logger = logging.getLogger(_EXPLAIN_LOGGER)
            self._stack.callback(setattr, logger, "propagate", logger.propagate)
            logger.propagate = False
        return self

    def _on_duration(self, event: str, duration: float, **kwargs: Any) -> None:
        if event == TRACE_EVENT or event == LOWER_EVENT:
            thread = threading.get_ident()
            self._front[thread] = self._front.get(thread, 0.0) + duration
            return
        super()._on_duration(event, duration, **kwargs)

    def _on_explanation(self, message: str) -> None:
        super()._on_explanation(message)
        self._why.setdefault(threading.get_ident(), []).append(message)

    def _compiled(self, name: str, seconds: float) -> None:
        thread = threading.get_ident()
        event = CompileEvent(name, _site(sys._getframe(1)), seconds + self._front.pop(thread, 0.0))
        pending = self._why.pop(thread, [])
        why = next((w for w in pending if f" {name} id=" in w or f"for {name} defined at" in w), None)
        if why is not None:
            event.explanation = why
            new = _NEW_FUNCTION.search(why)
            if new:
                event.new_function = True
                event.function_id = int(new["id"])
                event.defined_at = _split_at(new["at"])
                event.created_at = self._created.get(event.function_id)
            else:
                seen = _SEEN_FUNCTION.search(why)
                event.defined_at = _split_at(seen["at"]) if seen else None
        self._sink.append(event)


class _Syncs(HostSyncCounter):
    _timed = True

    def __init__(self, sites: dict[Site, SyncSite], eager: EagerOps, ledger: Ledger) -> None:
        super().__init__(forbid=False)
        self._sites = sites
        self._eager = eager
        self._ledger = ledger

    def _judge(self, arrays: list[Any]) -> bool:
        fresh, deep = self._ledger.wait(arrays)
        return fresh and deep

    def _add_wait(self, event: HostSync, pending: bool, seconds: float, verdict: Any) -> None:
        self._eager.mark_synced(sys._getframe(1))
        where = _split_at(event.where)
        if where is None:
            return
        with self._lock:
            site = self._sites.get(where)
            if site is None:
                site = self._sites[where] = SyncSite()
            site.count += 1
            site.seconds += seconds
            site.kinds[event.kind] = site.kinds.get(event.kind, 0) + 1
            if pending:
                site.pending += 1
                site.pending_seconds += seconds
            if verdict:
                site.waits += 1
                site.wait_seconds += seconds
                site.batched += in_batched_transfer()


class _Local(threading.local):
    def __init__(self) -> None:
        self.overhead = 0.0
        self.depth = 0
        # tree_at calls per function invocation: frame -> [first site, name, calls, seconds, lines]
        self.bursts: OrderedDict[FrameType, list[Any]] = OrderedDict()


def _patch(stack: ExitStack, owner: Any, attr: str, wrapper: Any) -> None:
    original = getattr(owner, attr)
    wrapper.__wrapped__ = original
    setattr(owner, attr, wrapper)

    def restore() -> None:
        if getattr(owner, attr, None) is wrapper:
            setattr(owner, attr, original)

    stack.callback(restore)


class RunProfile:
    """The context manager `profile()` returns; its `report` is a `RunReport`."""

    def __init__(self) -> None:
        from ._run_report import RunReport

        self.compiles: list[CompileEvent] = []
        self.syncs: dict[Site, SyncSite] = {}
        self.filter_jit: dict[Site, CallSite] = {}
        self.tree_at: dict[Site, CallSite] = {}
        self.ledger = Ledger()
        self.eager = EagerOps(self.ledger)
        self.timers = TimerReads(self.ledger, self.compiles)
        self._created: dict[int, Site] = {}
        self._lock = threading.Lock()
        self._local = _Local()
        self._names: dict[int, str] = {}
        self._stack: ExitStack | None = None
        self._start = 0.0
        self.end = 0.0
        self.wall = 0.0
        self.report = RunReport(self)

    # -- jit wrappers built inside the block -------------------------------------------------
    def _remember(self, site: Site | None, *functions: Any) -> None:
        if site is None:
            return
        with self._lock:
            if len(self._created) > _MAX_CREATED:
                self._created.clear()
            for fn in functions:
                if fn is not None:
                    self._created[id(fn)] = site

    def _wrap_jit(self, original: Any) -> Any:
        def jit(*args: Any, **kwargs: Any) -> Any:
            wrapped = original(*args, **kwargs)
            if args and callable(args[0]):
                self._remember(_site(sys._getframe(1)), args[0])
            return wrapped

        return jit

    def _wrap_filter_jit(self, original: Any) -> Any:
        def filter_jit(*args: Any, **kwargs: Any) -> Any:
            wrapped = original(*args, **kwargs)
            if args and callable(args[0]):
                inner = getattr(getattr(wrapped, "_cached", None), "__wrapped__", None)
                self._remember(_site(sys._getframe(1)), args[0], inner)
            return wrapped

        return filter_jit

    # -- eqx.filter_jit's per-call work -------------------------------------------------------
    def _wrap_eqx_call(self, original: Any) -> Any:
        local = self._local

        def _call(jit_wrapper: Any, is_lower: bool, args: Any, kwargs: Any) -> Any:
            if is_lower or local.depth:
                return original(jit_wrapper, is_lower, args, kwargs)
            site = _site(sys._getframe(1))
            outer, local.overhead = local.overhead, 0.0
            local.depth += 1
            start = _clock()
            try:
                return original(jit_wrapper, is_lower, args, kwargs)
            finally:
                seconds = _clock() - start
                local.depth -= 1
                overhead, local.overhead = local.overhead, outer
                if site is not None:
                    self._add_call(self.filter_jit, site, self._name(jit_wrapper), seconds, overhead)

        return _call

    def _wrap_timed(self, original: Any) -> Any:
        local = self._local

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = _clock()
            try:
                return original(*args, **kwargs)
            finally:
                local.overhead += _clock() - start

        return timed

    def _name(self, jit_wrapper: Any) -> str:
        key = id(jit_wrapper)
        name = self._names.get(key)
        if name is None:
            fn = getattr(getattr(jit_wrapper, "_cached", None), "__wrapped__", None)
            name = self._names[key] = str(getattr(fn, "__name__", "<filter_jit function>"))
        return name

    def _add_call(self, table: dict[Site, CallSite], site: Site, name: str, seconds: float, overhead: float) -> None:
        with self._lock:
            entry = table.get(site)
            if entry is None:
                entry = table[site] = CallSite(name)
            entry.calls += 1
            entry.seconds += seconds
            entry.overhead += overhead

    # -- eqx.tree_at ------------------------------------------------------------------------
    def _wrap_tree_at(self, original: Any) -> Any:
        local = self._local

        def tree_at(*args: Any, **kwargs: Any) -> Any:
            frame = user_frame(sys._getframe(1))
            if frame is None or local.depth or _traced(args, kwargs):
                return original(*args, **kwargs)
            site = (frame.f_code.co_filename, frame.f_lineno)
            start = _clock()
            try:
                return original(*args, **kwargs)
            finally:
                seconds = _clock() - start
                self._add_call(self.tree_at, site, "eqx.tree_at", seconds, 0.0)
                self._extend_burst(frame, site, seconds)

        return tree_at

    def _extend_burst(self, frame: FrameType, site: Site, seconds: float) -> None:
        # The frames are held (not their ids) so that a later invocation cannot reuse one; only
        # the last few, so that finished invocations do not keep their locals alive for long.
        bursts = self._local.bursts
        burst = bursts.get(frame)
        if burst is None:
            burst = bursts[frame] = [site, frame.f_code.co_name, 0, 0.0, set()]
            while len(bursts) > _MAX_OPEN_BURSTS:
                self._end_burst(bursts.pop(next(iter(bursts))))
        else:
            bursts.move_to_end(frame)
        burst[2] += 1
        burst[3] += seconds
        burst[4].add(site[1])

    def _end_burst(self, burst: list[Any]) -> None:
        site, name, calls, seconds, lines = burst
        if calls < 2:
            return
        with self._lock:
            entry = self.tree_at[site]
            entry.bursts += 1
            entry.burst_calls += calls
            entry.burst_seconds += seconds
            entry.burst_lines |= lines
            entry.name = name

    def _end_bursts(self) -> None:
        bursts = self._local.bursts
        while bursts:
            self._end_burst(bursts.popitem(last=False)[1])

    # -- context manager ----------------------------------------------------------------------
    def __enter__(self) -> RunReport:  # noqa: F821 - the annotation is a string
        if self._stack is not None or self._start:
            raise RuntimeError("a profile() covers one `with` block; call profile() again")
        stack = ExitStack()
        try:
            import jax

            self.ledger.install(stack, _patch)
            stack.enter_context(_Compiles(self.compiles, self._created))
            stack.enter_context(_Syncs(self.syncs, self.eager, self.ledger))
            _patch(stack, jax, "jit", self._wrap_jit(jax.jit))
            self.eager.install(stack)
            self.timers.install(stack, _patch)
            try:
                import equinox
                import equinox._jit as eqx_jit
            except ImportError:
                pass
            else:
                _patch(stack, equinox, "filter_jit", self._wrap_filter_jit(equinox.filter_jit))
                _patch(stack, equinox, "tree_at", self._wrap_tree_at(equinox.tree_at))
                if all(hasattr(eqx_jit, a) for a in ("_call", "_preprocess", "_postprocess")):
                    _patch(stack, eqx_jit, "_call", self._wrap_eqx_call(eqx_jit._call))
                    _patch(stack, eqx_jit, "_preprocess", self._wrap_timed(eqx_jit._preprocess))
                    _patch(stack, eqx_jit, "_postprocess", self._wrap_timed(eqx_jit._postprocess))
            stack.callback(self._end_bursts)
        except BaseException:
            stack.close()
            raise
        self._stack = stack
        self._start = _clock()
        return self.report

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.end = _clock()
        self.wall = self.end - self._start
        if self._stack is not None:
            self._stack.close()
            self._stack = None
        self.report._finish()


def _traced(args: Any, kwargs: Any) -> bool:
    """Whether a `tree_at` call is made while tracing (its replacements are tracers): its cost
    is paid once per compile, not per step."""
    import jax

    replace = kwargs.get("replace", args[2] if len(args) > 2 else None)
    return any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree_util.tree_leaves(replace))


def profile() -> RunProfile:
    """Measure what a block of JAX code spends on compiles, host waits and Python overhead,
    per source line, and report it with jaxlint's codes.

    Use it in a notebook or a test around the code you want to check, or run a whole program
    under it with `jaxlint run -- python script.py`. Each finding is made at the user's line
    that paid the cost, with what was measured there:

    - **JL007** (jit-in-loop): a jit wrapper of a new function built again and again; each one
      was traced and compiled anew.
    - **JL008** (growing-shape-loop): a jitted function recompiled for an input that grew at
      every call.
    - **JL004** (pad-final-batch): one extra compile for a smaller last batch.
    - **JL100** (recompile): any other recompile of a function, with what changed (a dtype, a
      static argument, a pytree structure), as `jax_explain_cache_misses` says.
    - **JL005** (host-copy-in-loop): a line that converted device arrays to host values many
      times, most of them arrays dispatched since the program last waited for the device, so
      Python waited for that work each time (whether or not a fast device had finished it).
    - **JL002** (filter-jit-per-call): an `eqx.filter_jit` function called many times from a
      line, with the time its wrapper spent flattening and rebuilding pytrees.
    - **JL003** (tree-at-batch): one invocation of a function calling `eqx.tree_at` several
      times (a loop or a chain), with the time those calls took.
    - **JL001** (missing-jit): a function of yours called many times that ran its JAX
      operations eagerly, one dispatch each, with their count and the time they took.
    - **JL006** (unsynced-timing): a clock read (`time.perf_counter()`, `timeit`) that ended a
      timed interval before the device work dispatched in it was waited for, with how much
      later that work finished where it was still running; and a jitted function first called
      (so compiled) inside a timed interval, at that call.

    !!! Example

        ```python
        import jax
        import jax.numpy as jnp
        from jaxlint.runtime import profile

        @jax.jit
        def step(x):
            return x * 2

        with profile() as report:
            for n in range(3, 7):
                step(jnp.ones(n))  # a new shape per call: one compile each
        assert [f.code for f in report.findings] == ["JL008"]
        print(report.summary())
        ```

    **Returns:**

    A context manager whose `__enter__` gives a `RunReport`: `findings` (`RunFinding`s: path,
    line, code, rule, message, measured seconds and count), `wall_seconds`,
    `compile_seconds`, `host_wait_seconds`, `summary()` (a text table) and `to_dict()` (the
    document `jaxlint run --output-format json` writes). It is complete after the block.

    **Raises:**

    `ImportError` without jax.

    !!! info "See also"

        `count_compiles` and `count_host_syncs` count one kind of event in a block; this joins
        them to source lines and jaxlint's codes. What host waits it cannot see on CPU is listed
        in `count_host_syncs`. While the block runs, the clocks of `time` return, to your code,
        a `float` (or `int`) subclass that remembers the read (used, subtracted or pickled, a
        plain number). `eqx.tree_at` and `from jax import jit` bound to a name before
        the block starts are not wrapped (`jaxlint run` starts before the program imports them).
    """
    return RunProfile()
