"""Count XLA compiles with `jax.monitoring`, and assert a function compiles at most n times."""

from __future__ import annotations

import functools as ft
import logging
import threading
from collections.abc import Callable
from contextlib import ExitStack
from types import TracebackType
from typing import Any, TypeVar


_F = TypeVar("_F", bound=Callable[..., Any])

# jax/_src/dispatch.py BACKEND_COMPILE_EVENT; jax/_src/compiler.py records the hit event.
COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
CACHE_HIT_EVENT = "/jax/compilation_cache/cache_hits"
# `jax_explain_cache_misses` logs "TRACING CACHE MISS ..." on this logger (partial_eval.py).
_EXPLAIN_LOGGER = "jax._src.interpreters.partial_eval"
_MAX_EXPLANATIONS = 8


def _monitoring() -> Any:
    try:
        import jax.monitoring
    except ImportError as e:  # pragma: no cover - exercised only without jax
        raise ImportError(
            'jaxlint.runtime needs jax: pip install jax jaxlib equinox (the runtime extra)'
        ) from e
    return jax.monitoring


def function_name(fn: str | Callable[..., Any]) -> str:
    """The key that `CompileCounter.by_name` uses for `fn` (a name, or a possibly jitted callable)."""
    if isinstance(fn, str):
        return fn
    while isinstance(fn, ft.partial):
        fn = fn.func
    name = getattr(fn, "__name__", None)
    if name is None:
        raise TypeError(f"cannot tell the name of {fn!r}; pass the name as a string")
    return name


def _strip_jit(fun_name: str) -> str:
    if fun_name.startswith("jit(") and fun_name.endswith(")"):
        return fun_name[4:-1]
    return fun_name


class _ExplainHandler(logging.Handler):
    """Collects `jax_explain_cache_misses` messages logged by one thread."""

    def __init__(self, thread: int, sink: Callable[[str], None]) -> None:
        super().__init__(logging.DEBUG)
        self._thread = thread
        self._sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread == self._thread:
            message = record.getMessage()
            if "CACHE MISS" in message:
                self._sink(message)


class CompileCounter:
    """What `count_compiles()` counted. Live inside the `with` block, frozen after it.

    **Attributes:**

    - `total`: XLA compiles seen (persistent-cache hits excluded).
    - `by_name`: compiles per function, keyed by the name jax reports with its `jit(...)`
      wrapper removed: `{"step": 2, "broadcast_in_dim": 1}`. Lambdas are `"<lambda>"`;
      `jax.jit(functools.partial(f, ...))` is `"f"`.
    - `cache_hits`, `cache_hits_by_name`: executables loaded from the persistent compilation
      cache (`jax_compilation_cache_dir`), which jax reports as compiles too.
    - `seconds`: backend compile time of the counted compiles, summed.
    - `explanations`: the `jax_explain_cache_misses` messages of the entering thread (only with
      `explain=True`; at most the last 8).
    """

    def __init__(self, *, explain: bool = False, this_thread: bool = False) -> None:
        self._explain = explain
        self._this_thread = this_thread
        self._lock = threading.Lock()
        self._by_name: dict[str, int] = {}
        self._hits_by_name: dict[str, int] = {}
        self._pending_hits: dict[int, int] = {}
        self._seconds = 0.0
        self._explanations: list[str] = []
        self._thread = 0
        self._used = False
        self._stack: ExitStack | None = None

    # -- results ---------------------------------------------------------------------------
    @property
    def total(self) -> int:
        with self._lock:
            return sum(self._by_name.values())

    @property
    def by_name(self) -> dict[str, int]:
        with self._lock:
            return dict(self._by_name)

    @property
    def cache_hits(self) -> int:
        with self._lock:
            return sum(self._hits_by_name.values())

    @property
    def cache_hits_by_name(self) -> dict[str, int]:
        with self._lock:
            return dict(self._hits_by_name)

    @property
    def seconds(self) -> float:
        with self._lock:
            return self._seconds

    @property
    def explanations(self) -> list[str]:
        with self._lock:
            return list(self._explanations)

    def count(self, fn: str | Callable[..., Any]) -> int:
        """Compiles of `fn` (a name, or a callable whose `__name__` is used)."""
        name = function_name(fn)
        with self._lock:
            return self._by_name.get(name, 0)

    def __repr__(self) -> str:
        return f"CompileCounter(total={self.total}, by_name={self.by_name}, cache_hits={self.cache_hits})"

    # -- listeners (called by jax, possibly from any thread) ----------------------------------
    def _on_event(self, event: str, **kwargs: Any) -> None:
        if event != CACHE_HIT_EVENT:
            return
        thread = threading.get_ident()
        if self._this_thread and thread != self._thread:
            return
        with self._lock:
            # jax fires the hit event, then the compile-duration event, in the same thread.
            self._pending_hits[thread] = self._pending_hits.get(thread, 0) + 1

    def _on_duration(self, event: str, duration: float, **kwargs: Any) -> None:
        if event != COMPILE_EVENT:
            return
        thread = threading.get_ident()
        if self._this_thread and thread != self._thread:
            return
        name = _strip_jit(str(kwargs.get("fun_name", "<unknown>")))
        hit = True
        with self._lock:
            if self._pending_hits.get(thread, 0):
                self._pending_hits[thread] -= 1
                self._hits_by_name[name] = self._hits_by_name.get(name, 0) + 1
            else:
                self._by_name[name] = self._by_name.get(name, 0) + 1
                self._seconds += duration
                hit = False
        if not hit:
            self._compiled(name, duration)

    def _compiled(self, name: str, seconds: float) -> None:
        """Called, outside the lock, after each counted (non-hit) compile; for subclasses."""

    def _on_explanation(self, message: str) -> None:
        with self._lock:
            self._explanations.append(message)
            del self._explanations[:-_MAX_EXPLANATIONS]

    # -- context manager -------------------------------------------------------------------
    def __enter__(self) -> CompileCounter:
        if self._used:
            raise RuntimeError("a CompileCounter counts one `with` block; call count_compiles() again")
        monitoring = _monitoring()
        self._used = True
        self._thread = threading.get_ident()
        stack = ExitStack()
        try:
            if self._explain:
                import jax

                _hide_own_frames()
                handler = _ExplainHandler(self._thread, self._on_explanation)
                logger = logging.getLogger(_EXPLAIN_LOGGER)
                logger.addHandler(handler)
                stack.callback(logger.removeHandler, handler)
                # Thread-local: restores the previous value on exit, leaves other threads alone.
                stack.enter_context(jax.explain_cache_misses(True))
            monitoring.register_event_listener(self._on_event)
            stack.callback(_unregister, monitoring.unregister_event_listener, self._on_event)
            monitoring.register_event_duration_secs_listener(self._on_duration)
            stack.callback(_unregister, monitoring.unregister_event_duration_listener, self._on_duration)
        except BaseException:
            stack.close()
            raise
        self._stack = stack
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._stack is not None:
            self._stack.close()
            self._stack = None


@ft.cache
def _hide_own_frames() -> None:
    """Make jax's "TRACING CACHE MISS at <callsite>" point past this module, at the user's call."""
    try:
        from jax._src import source_info_util

        source_info_util.register_exclusion(__file__)
    except (ImportError, AttributeError):  # private API; the explanations only lose a callsite
        pass


def _unregister(unregister: Callable[[Any], None], callback: Any) -> None:
    try:
        unregister(callback)
    except (AssertionError, ValueError):
        pass  # someone called jax.monitoring.clear_event_listeners() inside the block


def count_compiles(*, explain: bool = False, this_thread: bool = False) -> CompileCounter:
    """Count the XLA compiles that happen inside a `with` block, per function.

    Use it to check that a training step compiles once, that a fix removed a recompile, or how
    many compiles a benchmark's timed region hid. It counts every backend compile jax reports:
    your jitted functions, and also the eager ops (`jnp.ones` compiles `broadcast_in_dim`,
    `x + 1` compiles `add`), AOT `jax.jit(f).lower(x).compile()`, and the resharding helpers of
    `jax.device_put`. So assert on a function's own count (`counter.count(step)`), not on
    `total`, unless the block only calls jitted code on ready-made arrays.

    !!! Example

        ```python
        import jax
        import jax.numpy as jnp
        from jaxlint.runtime import count_compiles

        @jax.jit
        def step(x):
            return x * 2

        with count_compiles() as c:
            step(jnp.zeros(4))
            step(jnp.zeros(4))  # cached: no compile
            step(jnp.zeros(7))  # new shape: compiles again
        assert c.count(step) == 2 and c.by_name["step"] == 2
        ```

    **Arguments:**

    - `explain`: keyword-only. Also turn on `jax_explain_cache_misses` for the entering thread
      and keep its "TRACING CACHE MISS" messages in `counter.explanations` (they say which
      argument changed). jax only explains tracing-cache misses of functions defined outside
      jax and the standard library. The messages are captured, not printed.
    - `this_thread`: keyword-only. Count only compiles made by the thread that entered the
      block. By default compiles from every thread count (jax's listeners are process-wide).

    **Returns:**

    A `CompileCounter` context manager. Its `total`, `by_name`, `count(fn)`, `cache_hits` and
    `seconds` are live inside the block and frozen after it. The listeners are unregistered on
    exit, also when the block raises. Nested counters each count everything inside them.

    **Raises:**

    `ImportError` if jax is not installed; `RuntimeError` if the same counter is entered twice.

    !!! info "See also"

        Unlike `chex.assert_max_traces` and `eqx.debug.assert_max_traces`, which count Python
        traces of one wrapped function, this counts backend compiles of everything, needs no
        change to the code under test, and sees AOT and eager-op compiles. Persistent-cache
        hits (jax fires the compile event for them too) are told apart by the
        `/jax/compilation_cache/cache_hits` event that jax fires just before, in the same
        thread, and are reported as `cache_hits` instead. `jitted._cache_size()` is private,
        shared by all `jax.jit` wrappers of one function, and blind to AOT compiles.
    """
    return CompileCounter(explain=explain, this_thread=this_thread)


class assert_max_compiles:  # noqa: N801 - used like a function, as a context manager or decorator
    """Fail when code compiles more than `n` times: as a context manager or a decorator.

    Use it in tests to pin "this step compiles once" (the ragged-batch recompile of JL004 and
    the growing-shape loop of JL008 fail it), or as a decorator on a jitted function to catch
    recompiles in a real run. The `AssertionError` names the function, gives the per-function
    counts and, where jax can say it, why it recompiled (from `jax_explain_cache_misses`,
    turned on for the calling thread while active and restored after).

    !!! Example

        ```python
        import jax
        import jax.numpy as jnp
        from jaxlint.runtime import assert_max_compiles

        @assert_max_compiles(1)  # over all calls, for the life of the function
        @jax.jit
        def step(x):
            return x * 2

        batches = [jnp.ones(4), jnp.ones(4), jnp.ones(4)]  # a ragged last batch would fail
        with assert_max_compiles(1, name=step):  # in this block only, `step` only
            for batch in batches:
                step(batch)
        ```

    **Arguments:**

    - `n`: the most compiles allowed.
    - `name`: count only this function's compiles: a name as in `CompileCounter.by_name`, or a
      callable whose `__name__` is used (`step` or `jax.jit(step)`). With `None`, a context
      manager counts every compile in the block (eager ops included), and a decorator counts
      every compile made by the calling thread during calls of the decorated function.

    **Returns:**

    A context manager (checks once, at the end of the block) that is also a decorator. As a
    decorator the count accumulates over all calls, like `chex.assert_max_traces`: the call that
    makes the total exceed `n` raises, after the function returned.

    **Raises:**

    `AssertionError` when the count exceeds `n` (not raised over an exception already leaving
    the block); `ValueError` if `n` is negative.

    !!! info "See also"

        `chex.assert_max_traces` and `eqx.debug.assert_max_traces` count traces and must sit
        under the jit decorator; this counts real compiles and can wrap anything. Compiles are
        counted by `count_compiles`; persistent-cache hits do not count.
    """

    def __init__(self, n: int, name: str | Callable[..., Any] | None = None) -> None:
        if not isinstance(n, int) or n < 0:
            raise ValueError(f"assert_max_compiles: n must be an int >= 0, got {n!r}")
        self.n = n
        self.name = None if name is None else function_name(name)
        self._counter: CompileCounter | None = None

    def _measure(self, counter: CompileCounter) -> int:
        return counter.total if self.name is None else counter.count(self.name)

    def _message(self, subject: str, count: int, by_name: dict[str, int], explanations: list[str]) -> str:
        per_fn = ", ".join(f"{k} x{v}" for k, v in sorted(by_name.items(), key=lambda kv: -kv[1]))
        lines = [
            f"assert_max_compiles({self.n}): {subject} compiled {count} time{'s' * (count != 1)}, "
            f"more than the {self.n} allowed.",
            f"Compiles by function: {per_fn or 'none'}.",
        ]
        if self.name is not None:
            explanations = [e for e in explanations if _mentions(e, self.name)]
        if explanations:
            lines.append("Why it recompiled (jax_explain_cache_misses):")
            lines.extend("  " + e.replace("\n", "\n  ") for e in explanations)
        else:
            lines.append(
                "jax gave no explanation (it explains tracing-cache misses, in the calling thread, "
                "of functions defined outside jax and the standard library)."
            )
        return "\n".join(lines)

    def __enter__(self) -> CompileCounter:
        if self._counter is not None:
            raise RuntimeError("this assert_max_compiles block is already active")
        self._counter = count_compiles(explain=True)
        return self._counter.__enter__()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        counter, self._counter = self._counter, None
        assert counter is not None
        counter.__exit__(exc_type, exc, tb)
        count = self._measure(counter)
        if exc_type is None and count > self.n:
            subject = repr(self.name) if self.name is not None else "the block"
            raise AssertionError(self._message(subject, count, counter.by_name, counter.explanations))

    def __call__(self, fn: _F) -> _F:
        lock = threading.Lock()
        seen: dict[str, int] = {}
        explanations: list[str] = []
        subject = repr(self.name if self.name is not None else getattr(fn, "__qualname__", function_name(fn)))

        @ft.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with count_compiles(explain=True, this_thread=True) as counter:
                out = fn(*args, **kwargs)
            with lock:
                for k, v in counter.by_name.items():
                    seen[k] = seen.get(k, 0) + v
                explanations.extend(counter.explanations)
                del explanations[:-_MAX_EXPLANATIONS]
                count = sum(seen.values()) if self.name is None else seen.get(self.name, 0)
                if count > self.n:
                    raise AssertionError(self._message(subject, count, dict(seen), list(explanations)))
            return out

        return wrapper  # type: ignore[return-value]


def _mentions(explanation: str, name: str) -> bool:
    return f"for {name} defined" in explanation or f"\n    {name} id=" in explanation
