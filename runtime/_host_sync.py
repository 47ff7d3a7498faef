"""Count, or forbid, the blocking device-to-host conversions of `jax.Array` in a block of code."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from types import TracebackType
from typing import Any, NamedTuple

from ._frames import user_frame


_clock = time.perf_counter  # bound at import: `profile()` wraps time.perf_counter


# jax.Array attribute -> how the user spells the conversion. Each of these reads the array's
# value on the host (`_value`, or `np.asarray(self)` for `item`), so it waits for the pending
# computation and copies (jax/_src/array.py, jax/_src/numpy/array_methods.py in jax 0.10.2).
_METHODS = {
    "__array__": "__array__",
    "item": ".item()",
    "tolist": ".tolist()",
    "tobytes": ".tobytes()",
    "__float__": "float()",
    "__int__": "int()",
    "__complex__": "complex()",
    "__bool__": "bool()",
    "__index__": "operator.index()",
    "__format__": "format()",
    "__str__": "str()",
    "__repr__": "repr()",
    "__reduce__": "pickle",
}
# On CPU these read a jax.Array through the buffer protocol, never calling `__array__`.
_NUMPY_FUNCTIONS = ("asarray", "array", "asanyarray", "ascontiguousarray")
_MAX_EVENTS = 100


class HostSyncError(RuntimeError):
    """A jax.Array was converted to a host value inside `no_host_sync()`."""


class HostSync(NamedTuple):
    """One conversion: how (`"float()"`, `"np.asarray"`...), of what (`"float32[4]"`), where."""

    kind: str
    array: str
    where: str


class _ThreadState(threading.local):
    def __init__(self) -> None:
        self.counters: list[HostSyncCounter] = []
        self.depth = 0
        self.batched = 0  # inside `to_host`: one deliberate wait for many copies


@contextmanager
def batched_transfer() -> Iterator[None]:
    """Mark the conversions made inside as one batched transfer (`to_host` after a loop): the
    wait there is the fix of a per-iteration wait, not one. Counters still see each one."""
    _state.batched += 1
    try:
        yield
    finally:
        _state.batched -= 1


def in_batched_transfer() -> bool:
    """Whether the current thread is inside `batched_transfer()`."""
    return _state.batched > 0


_state = _ThreadState()
_install_lock = threading.Lock()
_installs = 0
_patches: list[tuple[Any, str, Any, Any]] = []  # (owner, attribute, original, wrapper)
_library_dirs: tuple[str, ...] = ()


def _caller() -> str:
    start = sys._getframe(3)
    frame = user_frame(start)  # the user's line, past numpy, jax, equinox and jaxlint helpers
    if frame is None:
        frame = start
        while frame is not None and frame.f_code.co_filename.startswith(_library_dirs):
            frame = frame.f_back
    return f"{frame.f_code.co_filename}:{frame.f_lineno}" if frame is not None else "<unknown>"


def _record(kind: str, array: Any) -> HostSync:
    what = f"{array.dtype.name}{list(array.shape)}"
    event = HostSync(kind, what, _caller())
    for counter in _state.counters:
        counter._add(event)
    if any(c._forbid for c in _state.counters):
        raise HostSyncError(
            f"{kind} of a jax.Array {what} at {event.where} inside no_host_sync(): it waits for the "
            "device to finish and copies the value to the host. Keep the value on the device "
            "(accumulate with jnp), or convert once after the loop (jax.device_get of the "
            "collected results)."
        )
    return event


def _pending(array: Any) -> bool:
    """Whether the device has not finished computing `array` yet (so reading it waits)."""
    try:
        return not array.is_ready()
    except Exception:  # noqa: BLE001 - a deleted or donated array: the conversion raises itself
        return False


def _convert(original: Any, kind: str, subject: Any, args: Any, kwargs: Any, arrays: list[Any] | None = None) -> Any:
    """Record one conversion of `subject` (of all `arrays`, for `jax.device_get`), run it, and
    tell the timing counters how long it took, whether its array was still being computed,
    and what they judged of it beforehand (`_judge`)."""
    state = _state
    timed = [c for c in state.counters if c._timed]
    pending = _pending(subject) if timed else False
    judged = [c._judge(arrays or [subject]) for c in timed]
    event = _record(kind, subject)
    state.depth += 1
    start = _clock() if timed else 0.0
    try:
        return original(*args, **kwargs)
    finally:
        state.depth -= 1
        if timed:
            seconds = _clock() - start
            for counter, verdict in zip(timed, judged):
                counter._add_wait(event, pending, seconds, verdict)


def _wrap(original: Any, kind: str, array_type: type, *, positional: bool) -> Any:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        state = _state
        if state.depth or not state.counters:
            return original(*args, **kwargs)
        subject = args[0] if args else kwargs.get("object", kwargs.get("a"))
        if positional and type(subject) is not array_type:
            return original(*args, **kwargs)
        return _convert(original, kind, subject, args, kwargs)

    wrapper.__name__ = getattr(original, "__name__", kind)
    wrapper.__doc__ = getattr(original, "__doc__", None)
    wrapper.__wrapped__ = original  # type: ignore[attr-defined]
    return wrapper


def _wrap_device_get(original: Any, array_type: type) -> Any:
    import jax

    def device_get(x: Any) -> Any:
        state = _state
        if state.depth or not state.counters:
            return original(x)
        arrays = [leaf for leaf in jax.tree.leaves(x) if type(leaf) is array_type]
        if not arrays:
            return original(x)
        pending = [a for a in arrays if _pending(a)]
        return _convert(original, "jax.device_get", (pending or arrays)[0], (x,), {}, arrays)

    device_get.__doc__ = original.__doc__
    device_get.__wrapped__ = original  # type: ignore[attr-defined]
    return device_get


def _array_type() -> type:
    try:
        from jax._src.array import ArrayImpl
    except ImportError:  # pragma: no cover - private path moved; fall back to a live array's type
        import jax
        import numpy as np

        return type(jax.device_put(np.zeros((), np.float32)))
    return ArrayImpl  # type: ignore[no-any-return]


def _install() -> None:
    global _installs, _library_dirs
    with _install_lock:
        _installs += 1
        if _installs > 1:
            return
        import jax
        import numpy as np

        array_type = _array_type()
        _library_dirs = tuple(os.path.dirname(m.__file__ or "") + os.sep for m in (jax, np)) + (__file__,)
        targets: list[tuple[Any, str, Any]] = []
        for attr, kind in _METHODS.items():
            if attr in vars(array_type):
                original = vars(array_type)[attr]
                targets.append((array_type, attr, _wrap(original, kind, array_type, positional=False)))
        for attr in _NUMPY_FUNCTIONS:
            original = vars(np)[attr]
            targets.append((np, attr, _wrap(original, f"np.{attr}", array_type, positional=True)))
        targets.append((jax, "device_get", _wrap_device_get(vars(jax)["device_get"], array_type)))
        for owner, attr, wrapper in targets:
            _patches.append((owner, attr, vars(owner)[attr], wrapper))
            setattr(owner, attr, wrapper)


def _uninstall() -> None:
    global _installs
    with _install_lock:
        _installs -= 1
        if _installs:
            return
        while _patches:
            owner, attr, original, wrapper = _patches.pop()
            if vars(owner).get(attr) is wrapper:  # leave alone whatever someone patched over us
                setattr(owner, attr, original)


class HostSyncCounter:
    """What `count_host_syncs()` / `no_host_sync()` saw in the entering thread.

    **Attributes:** `total`; `by_kind` (`{"float()": 3, "np.asarray": 1}`); `events`, the first
    100 `HostSync(kind, array, where)` records, `where` being the calling `file:line`.
    """

    def __init__(self, *, forbid: bool) -> None:
        self._forbid = forbid
        self._lock = threading.Lock()
        self._by_kind: dict[str, int] = {}
        self._events: list[HostSync] = []
        self._stack: ExitStack | None = None
        self._used = False

    @property
    def total(self) -> int:
        with self._lock:
            return sum(self._by_kind.values())

    @property
    def by_kind(self) -> dict[str, int]:
        with self._lock:
            return dict(self._by_kind)

    @property
    def events(self) -> list[HostSync]:
        with self._lock:
            return list(self._events)

    _timed = False  # subclasses that set it get `_judge` before and `_add_wait` after each conversion

    def _judge(self, arrays: list[Any]) -> Any:
        """Before a conversion of `arrays` runs: what `_add_wait` is then given as `verdict`."""
        return None

    def _add_wait(self, event: HostSync, pending: bool, seconds: float, verdict: Any) -> None:
        """After the conversion of `event` ran: whether its array was still being computed,
        how long the conversion took (waiting included), and `_judge`'s verdict."""

    def _add(self, event: HostSync) -> None:
        with self._lock:
            self._by_kind[event.kind] = self._by_kind.get(event.kind, 0) + 1
            if len(self._events) < _MAX_EVENTS:
                self._events.append(event)

    def __repr__(self) -> str:
        return f"HostSyncCounter(total={self.total}, by_kind={self.by_kind})"

    def __enter__(self) -> HostSyncCounter:
        if self._used:
            raise RuntimeError("a HostSyncCounter covers one `with` block; make a new one")
        self._used = True
        stack = ExitStack()
        try:
            import jax

            _install()
            stack.callback(_uninstall)
            if self._forbid and jax.default_backend() != "cpu":
                # Thread-local, like the counting. Device-to-host guards never fire on CPU.
                stack.enter_context(jax.transfer_guard_device_to_host("disallow_explicit"))
            _state.counters.append(self)
            stack.callback(_state.counters.remove, self)
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




def count_host_syncs() -> HostSyncCounter:
    """Count the conversions of `jax.Array` values to host values made inside a `with` block.

    Use it to find, or pin in a test, the per-step syncs that JL005 (host-copy-in-loop)
    flags: each `float(loss)`, `.item()` or `np.asarray(x)` in a training loop waits for the
    device to finish before Python can go on, so the next step cannot be queued behind it.

    !!! Example

        ```python
        import jax
        import jax.numpy as jnp
        from jaxlint.runtime import count_host_syncs

        step = jax.jit(lambda w, b: (w - 0.1 * b, jnp.sum(w * b)))
        w, batches, losses = jnp.ones(3), [jnp.ones(3)] * 4, []
        with count_host_syncs() as syncs:
            for b in batches:
                w, loss = step(w, b)
                losses.append(float(loss))  # waits for the step, every step
        assert syncs.by_kind == {"float()": 4}
        ```

    What it sees: calls on `jax.Array` of `__array__`, `.item()`, `.tolist()`, `.tobytes()`,
    `float()`, `int()`, `complex()`, `bool()` (so `if x > 0:`), `operator.index()` (indexing a
    list with an array), `format()` (f-strings), `str()`, `repr()` (so `print`), pickling, and
    calls of `np.asarray`, `np.array`, `np.asanyarray`, `np.ascontiguousarray` and
    `jax.device_get` on arrays (one event per call, however many leaves). Only the entering
    thread is watched. Every such conversion counts, even of an array whose value was already
    on the host.

    What it cannot see, on CPU: other NumPy functions given a jax.Array (`np.sum(x)`,
    `np.float32(x)`, ufuncs such as `np.add(x, 1)`), because NumPy reads CPU arrays through
    the buffer protocol, in C, calling no Python method; `memoryview(x)`; DLPack exports;
    `asarray` bound before the block (`from numpy import asarray`); C extensions; and host
    callbacks inside jitted code (`jax.debug.print`, `pure_callback`). On GPU/TPU NumPy cannot
    read device memory directly and goes through `__array__`, which is counted (not verified
    on an accelerator yet), and `no_host_sync` also enters jax's device-to-host transfer guard,
    which raises jax's own `RuntimeError` for transfers the patching misses. On CPU that guard
    never fires ("fetching a buffer on a CPU device is always allowed"), hence the patching.

    The methods and functions are patched while any counter is active and restored exactly
    afterwards, also when the block raises. Counters nest.

    **Returns:**

    A `HostSyncCounter` context manager: `total`, `by_kind`, `events` (kind, array, `file:line`).

    **Raises:**

    `ImportError` without jax.

    !!! info "See also"

        `jax.transfer_guard_device_to_host("log")` logs transfers on GPU/TPU (from C++, not
        countable) and nothing on CPU. `no_host_sync` raises instead of counting.
    """
    return HostSyncCounter(forbid=False)


def no_host_sync() -> HostSyncCounter:
    """Raise on any conversion of a `jax.Array` to a host value inside a `with` block.

    Use it around a loop that must stay asynchronous (a training step, a generation loop) to
    prove the fix for JL005 removed every sync, and to find the one that is left.

    !!! Example

        ```python
        import jax
        import jax.numpy as jnp
        from jaxlint.runtime import no_host_sync

        step = jax.jit(lambda w, b: (w - 0.1 * b, jnp.sum(w * b)))
        w, batches, losses = jnp.ones(3), [jnp.ones(3)] * 4, []
        with no_host_sync():
            for b in batches:
                w, loss = step(w, b)
                losses.append(loss)  # fine: stays on the device
        print(jax.device_get(losses))  # one sync, after the block
        ```

    It sees, and misses, exactly what `count_host_syncs` does: on CPU, conversions that NumPy
    makes through the buffer protocol (`np.sum(x)`, `np.float32(x)`, ufuncs, `memoryview`)
    pass silently. On GPU/TPU it also enters
    `jax.transfer_guard_device_to_host("disallow_explicit")` for the entering thread.

    **Returns:**

    A `HostSyncCounter` (it counts the conversion that raised).

    **Raises:**

    `HostSyncError` (a `RuntimeError`) at the first conversion, naming it, the array's dtype
    and shape, and the calling `file:line`. On GPU/TPU, jax's transfer-guard error for the
    transfers the patching cannot see.

    !!! info "See also"

        `jax.transfer_guard_device_to_host("disallow")`, which this uses on accelerators, and
        which never fires on CPU. `count_host_syncs` to count instead of raising.
    """
    return HostSyncCounter(forbid=True)
