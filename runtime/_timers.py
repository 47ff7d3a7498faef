"""Clock reads that end a timed interval before the device work sent in it was waited for:
what `profile()` needs for JL006 (unsynced-timing).

While `profile()` runs, the clocks of `time` (`time`, `perf_counter`, `monotonic`,
`process_time` and their `_ns` forms) and the timer `timeit` uses are wrapped. A read from the
user's code returns the clock's value as a `float` (or `int`) that remembers the read: where
the program then stood in the ledger of dispatches and syncs (`_ledger`: how many arrays it
had dispatched, up to which it had waited) and how many compiles had happened. When one such
value is subtracted from another (`now - start`), the interval is judged from what the program
did in it, not from how fast the device was: arrays dispatched after `start` that no sync
before `now` covered mean the interval timed their dispatch, not their computation (JL006),
and a compile of the program's jitted function inside it means it timed the compile.

A second source measures the cost: each read also asks jax which live arrays are not computed
yet (`is_ready()`), leaving out those an earlier read already saw running. A helper thread
waits for them and records how much later they finished: the measured gap. While it waits,
the interpreter's switch interval is lowered to 0.1 ms so that the helper sees the work finish
within that much of it, not up to 5 ms later while the program runs Python. Where `start`
was read outside the profile or by a library, that source alone decides.

Reads from libraries (jax, logging, progress bars) are not examined, nor reads during a
garbage collection. The cost is two `jax.live_arrays()` per read from user code.
"""

from __future__ import annotations

import gc
import queue
import sys
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._frames import is_library, user_frame


_clock = time.perf_counter  # bound before `profile()` wraps the clocks
_CLOCKS = ("time", "perf_counter", "monotonic", "process_time", "time_ns", "perf_counter_ns", "monotonic_ns",
           "process_time_ns")  # fmt: skip
_WAIT_LIMIT = 60.0  # seconds the end of a profile waits for work still running at a read
_SWITCH_INTERVAL = 1e-4


if TYPE_CHECKING:
    from ._ledger import Ledger


@dataclass
class TimerRead:
    """One read of a clock from a user line: where the program stood then, and, once the value
    ended an interval (`self - start`), what the interval held."""

    site: tuple[str, int]
    at: float  # perf_counter when the clock was read
    seen: int  # the ledger's count of arrays dispatched, at the read
    synced: int  # up to which of them the program had waited, at the read
    compiles: int  # compiles so far, at the read
    arrays: int = 0  # arrays still being computed at the read that no earlier read saw running
    done: float | None = None  # perf_counter when the last of those was ready
    ended_interval: bool = False  # the value was subtracted from: `now - start`
    unsynced: int = 0  # arrays dispatched in the interval and not waited for before this read
    since: TimerRead | None = None  # the read that started the interval, when it was examined


class _Remembers:
    """A clock value that says when it ends an interval (`self - start`); pickled, the plain
    number (`_plain`: float or int)."""

    _read: TimerRead
    _reads: TimerReads
    _plain: type

    def __sub__(self, other: Any) -> Any:
        self._reads._ended(self._read, other._read if isinstance(other, _Remembers) else None)
        return self._plain(self) - other

    def __rsub__(self, other: Any) -> Any:
        return other - self._plain(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return (self._plain, (self._plain(self),))


class _Stamp(_Remembers, float):
    _plain = float


class _StampNs(_Remembers, int):
    _plain = int


class TimerReads:
    """Installs the clock wrappers; keeps the reads that found device work running (for the
    gaps) and the intervals that timed dispatch or compiles."""

    def __init__(self, ledger: Ledger, compiles: list[Any]) -> None:
        self.reads: list[TimerRead] = []  # reads that found new device work running
        self.intervals: list[TimerRead] = []  # reads that ended an interval with unsynced work or compiles
        self.counts: dict[tuple[str, int], int] = {}  # every read from a user line, per line
        self.ended: dict[tuple[str, int], int] = {}  # intervals from an examined start, per ending line
        self._ledger = ledger
        self._compiles = compiles
        self._seen: set[int] = set()  # ids of the arrays the previous read found running
        self._lock = threading.Lock()
        self._queue: queue.Queue[tuple[TimerRead, list[Any]] | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._active = False
        self._local = threading.local()
        self._interval = sys.getswitchinterval()
        self._kept: Any = None
        self._collecting = False

    def _read(self, site: tuple[str, int], clock: Callable[[], Any]) -> Any:
        value = clock()
        local = self._local
        if getattr(local, "busy", False) or self._collecting:
            return value  # asking jax for its arrays during a garbage collection could crash it
        local.busy = True
        try:
            import jax

            self.counts[site] = self.counts.get(site, 0) + 1
            ledger = self._ledger
            ledger.look()
            read = TimerRead(site, _clock(), ledger.seen, ledger.synced, len(self._compiles))
            running = []
            for array in jax.live_arrays():
                try:
                    if not array.is_ready():
                        running.append(array)
                except Exception:  # noqa: BLE001, S112 - a deleted or donated array
                    continue
            with self._lock:
                ids = {id(a) for a in running}
                new = [a for a in running if id(a) not in self._seen]
                self._seen = ids
                if new:
                    read.arrays = len(new)
                    self.reads.append(read)
            if new:
                self._watch(read, new)
        finally:
            local.busy = False
        stamp = (_StampNs if isinstance(value, int) else _Stamp)(value)
        stamp._read = read
        stamp._reads = self
        return stamp

    def _ended(self, read: TimerRead, start: TimerRead | None) -> None:
        """`read`'s value was subtracted from: judge the interval from `start` (None: read
        outside the profile or by a library; then only the running work found at `read`)."""
        if read.ended_interval:
            return
        read.ended_interval = True
        if start is not None and start.at <= read.at:
            read.since = start
            with self._lock:
                self.ended[read.site] = self.ended.get(read.site, 0) + 1
            read.unsynced = max(0, read.seen - max(read.synced, start.seen))
            timed = read.unsynced > 0 or read.compiles > start.compiles
        else:
            timed = read.arrays > 0
        if timed:
            with self._lock:
                self.intervals.append(read)

    def _watch(self, read: TimerRead, arrays: list[Any]) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._wait_loop, name="jaxlint-timer-reads", daemon=True)
            self._thread.start()
        sys.setswitchinterval(min(self._interval, _SWITCH_INTERVAL))
        self._queue.put((read, arrays))

    def _wait_loop(self) -> None:
        self._ledger.ignore_thread()  # its waits measure the gap: no sync of the program
        while True:
            item = self._queue.get()
            if item is None:
                return
            read, arrays = item
            for array in arrays:
                try:
                    array.block_until_ready()
                except Exception:  # noqa: BLE001, S112 - deleted, donated or failed: done either way
                    continue
            read.done = _clock()
            del arrays, item
            if self._queue.empty():
                sys.setswitchinterval(self._interval)

    # -- wrappers -----------------------------------------------------------------------------
    def _wrap_clock(self, original: Callable[[], Any]) -> Callable[[], Any]:
        def clock() -> Any:
            if not self._active:
                return original()
            frame = sys._getframe(1)
            if is_library(frame.f_code.co_filename):
                return original()
            return self._read((frame.f_code.co_filename, frame.f_lineno), original)

        clock.__name__ = getattr(original, "__name__", "clock")
        clock.__doc__ = getattr(original, "__doc__", None)
        clock.__wrapped__ = original  # type: ignore[attr-defined]
        return clock

    def _wrap_timeit(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def timeit(timer_object: Any, *args: Any, **kwargs: Any) -> Any:
            frame = user_frame(sys._getframe(1))
            if not self._active or frame is None:
                return original(timer_object, *args, **kwargs)
            site = (frame.f_code.co_filename, frame.f_lineno)
            clock = timer_object.timer
            timer_object.timer = lambda: self._read(site, clock)
            try:
                return original(timer_object, *args, **kwargs)
            finally:
                timer_object.timer = clock

        timeit.__doc__ = original.__doc__
        return timeit

    def _wrap_timer_init(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def __init__(timer_object: Any, stmt: Any = "pass", *args: Any, **kwargs: Any) -> None:
            if self._active and callable(stmt):
                statement = stmt

                def stmt() -> Any:
                    # timeit drops what the statement returns: keep the last result alive, so
                    # that the clock read after it can see whether it is still being computed.
                    self._kept = statement()
                    return self._kept

            original(timer_object, stmt, *args, **kwargs)

        __init__.__doc__ = original.__doc__
        return __init__

    def install(self, stack: ExitStack, patch: Callable[[ExitStack, Any, str, Any], None]) -> None:
        """Wrap the clocks (restored when `stack` closes, after the running work is waited for)."""
        import timeit

        self._interval = sys.getswitchinterval()
        stack.callback(self._close)
        # Reads from finalizers or gc callbacks: first and last of the callbacks, so that the
        # flag is up before any other runs and down after all have.
        gc.callbacks.insert(0, self._gc_start)
        gc.callbacks.append(self._gc_stop)
        for name in _CLOCKS:
            if hasattr(time, name):
                patch(stack, time, name, self._wrap_clock(getattr(time, name)))
        patch(stack, timeit, "default_timer", self._wrap_clock(timeit.default_timer))
        patch(stack, timeit.Timer, "timeit", self._wrap_timeit(timeit.Timer.timeit))
        patch(stack, timeit.Timer, "__init__", self._wrap_timer_init(timeit.Timer.__init__))
        self._active = True

    def _gc_start(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._collecting = True

    def _gc_stop(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "stop":
            self._collecting = False

    def _close(self) -> None:
        for callback in (self._gc_start, self._gc_stop):
            if callback in gc.callbacks:
                gc.callbacks.remove(callback)
        self._collecting = False
        self._active = False
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(_WAIT_LIMIT)
            self._thread = None
        sys.setswitchinterval(self._interval)
        self._seen = set()
        self._kept = None
