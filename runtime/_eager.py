"""Eager JAX operations per user function: what `profile()` needs for JL001 (missing-jit).

Op-by-op dispatch has no monitoring event, so the operations are counted at the Python entry
points an eager program goes through while `profile()` runs:

- the public `jax.numpy` (with `linalg` and `fft`) and `jax.nn` functions, looked up by name
  at each call (`jnp.tanh(x)`); a function bound to another name before the block started is
  not seen;
- the operators and methods of `jax.Array` (`x @ w`, `x + 1`, `x[i]`, `x.sum()`);
- primitives bound outside any trace (`lax.tanh(x)`), through `dispatch.xla_primitive_callable`.

A call is an eager operation when it returns a concrete array (under a trace it returns a
tracer, and costs once per compile). Nested calls (a `jnp` function implemented with other
`jnp` functions) count once, at the outermost. Not counted: `x.at[i].set(v)`, properties
(`x.T`), `jax.random` and functions of other libraries that dispatch through jax's C++ jit path
without passing through these names.

Each operation is charged to every user function on the Python stack (the functions of the
user's files), with the time the call took; a new frame of a function is a new call of it.
"""

from __future__ import annotations

import functools
import sys
import threading
import time
import types
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._frames import is_library, user_frame


if TYPE_CHECKING:
    from ._ledger import Ledger


_clock = time.perf_counter  # bound before `profile()` wraps the clocks
_MODULES = ("jax.numpy", "jax.numpy.linalg", "jax.numpy.fft", "jax.nn")


@dataclass
class EagerFunction:
    """Eager operations dispatched while one user function was on the stack."""

    code: types.CodeType
    calls: int = 0  # invocations that dispatched at least one operation
    ops: int = 0  # operations, its callees' included
    seconds: float = 0.0  # time inside those operations
    own_ops: int = 0  # operations dispatched from its own lines
    own_seconds: float = 0.0
    synced: bool = False  # an invocation converted a device array to a host value (cannot be jitted as is)
    parents: set[types.CodeType] = field(default_factory=set)
    last: types.FrameType | None = field(default=None, repr=False)

    @property
    def site(self) -> tuple[str, int]:
        return (self.code.co_filename, self.code.co_firstlineno)


class _Local(threading.local):
    def __init__(self) -> None:
        self.frame: types.FrameType | None = None  # the innermost user frame of the last operation
        self.chain: list[EagerFunction] = []  # its user frames' functions, innermost first


class _Depth(threading.local):
    depth = 0  # > 0 inside a counted operation: what it calls is part of it


# The wrappers are made once per process and shared by every `profile()`: one that made a few
# thousand new long-lived objects on entry could set off a full garbage collection in the block.
_depth = _Depth()
_recording: list[EagerOps] = []  # the installed counters (more than one when profiles nest)
_plan: list[tuple[Any, str, Any, Any]] = []  # (owner, attribute, original, wrapper)
_plan_lock = threading.Lock()
_ARRAY_TYPE: list[type] = []  # jax's array type, once the plan is made


def _record_all(frame: types.FrameType, seconds: float, args: tuple[Any, ...], kwargs: dict[str, Any], result: Any) -> None:
    for counter in tuple(_recording):
        counter._record(frame, seconds)
        if counter.ledger is not None:
            counter.ledger.eager_result(args, kwargs, result, _ARRAY_TYPE[0])


def _wrap(original: Callable[..., Any], array_type: type) -> Callable[..., Any]:
    def op(*args: Any, **kwargs: Any) -> Any:
        if _depth.depth or not _recording:
            return original(*args, **kwargs)
        _depth.depth += 1
        start = _clock()
        try:
            result = original(*args, **kwargs)
        finally:
            _depth.depth -= 1
        kind = type(result)
        if kind is array_type or (kind is tuple and result and type(result[0]) is array_type):
            _record_all(sys._getframe(1), _clock() - start, args, kwargs, result)
        return result

    try:
        functools.update_wrapper(op, original)
    except (AttributeError, TypeError):  # pragma: no cover - an object without the usual attributes
        op.__wrapped__ = original  # type: ignore[attr-defined]
    return op


def _wrap_primitive_callable(original: Callable[..., Any]) -> Callable[..., Any]:
    def xla_primitive_callable(prim: Any, **params: Any) -> Any:
        fun = original(prim, **params)
        if _depth.depth or not _recording:
            return fun

        def run(*args: Any) -> Any:
            _depth.depth += 1
            start = _clock()
            result = None
            try:
                result = fun(*args)
                return result
            finally:
                _depth.depth -= 1
                _record_all(sys._getframe(1), _clock() - start, args, {}, result)

        return run

    xla_primitive_callable.__wrapped__ = original  # type: ignore[attr-defined]
    return xla_primitive_callable


def _make_plan() -> list[tuple[Any, str, Any, Any]]:
    import importlib

    from ._host_sync import _METHODS, _array_type

    array_type = _array_type()
    _ARRAY_TYPE[:] = [array_type]
    targets: list[tuple[Any, str, Any]] = []
    for name in _MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:  # pragma: no cover - an older jax without one of them
            continue
        for attr, value in list(vars(module).items()):
            if not attr.startswith("_") and callable(value) and not isinstance(value, (type, types.ModuleType)):
                targets.append((module, attr, value))
    methods: set[str] = {"__getitem__"}
    try:
        from jax._src.numpy import array_methods
    except ImportError:  # pragma: no cover
        pass
    else:
        methods |= {f"__{k}__" for k in getattr(array_methods, "_array_operators", {})}
        methods |= set(getattr(array_methods, "_array_methods", {}))
    for attr in sorted(methods - set(_METHODS)):  # conversions: count_host_syncs wraps those
        value = vars(array_type).get(attr)
        if value is not None and callable(value) and not isinstance(value, (type, property)):
            targets.append((array_type, attr, value))
    plan = [(owner, attr, value, _wrap(value, array_type)) for owner, attr, value in targets]
    try:
        from jax._src import dispatch
    except ImportError:  # pragma: no cover
        return plan
    original = getattr(dispatch, "xla_primitive_callable", None)
    if callable(original):
        plan.append((dispatch, "xla_primitive_callable", original, _wrap_primitive_callable(original)))
    return plan


def _install() -> None:
    with _plan_lock:
        if not _plan:
            _plan.extend(_make_plan())
        for owner, attr, original, wrapper in _plan:
            if vars(owner).get(attr) is original:  # not replaced since (by the program, or a nested profile)
                setattr(owner, attr, wrapper)


def _uninstall() -> None:
    with _plan_lock:
        for owner, attr, original, wrapper in _plan:
            if vars(owner).get(attr) is wrapper:
                setattr(owner, attr, original)


class EagerOps:
    """Counts eager operations per user function while installed (see the module's docstring)."""

    def __init__(self, ledger: Ledger | None = None) -> None:
        self.ledger = ledger  # told of each operation's result (shallow or not)
        self.functions: dict[types.CodeType, EagerFunction] = {}
        self._local = _Local()
        self._lock = threading.Lock()

    # -- recording ----------------------------------------------------------------------------
    def _entry(self, code: types.CodeType) -> EagerFunction:
        entry = self.functions.get(code)
        if entry is None:
            with self._lock:
                entry = self.functions.setdefault(code, EagerFunction(code))
        return entry

    def _chain(self, frame: types.FrameType) -> list[EagerFunction]:
        """The functions of the user frames from `frame` outwards, each new frame a new call."""
        chain = []
        while frame is not None:
            if not is_library(frame.f_code.co_filename):
                entry = self._entry(frame.f_code)
                if entry.last is not frame:
                    entry.last = frame
                    entry.calls += 1
                if chain:
                    chain[-1].parents.add(frame.f_code)
                chain.append(entry)
            frame = frame.f_back
        return chain

    def _record(self, frame: types.FrameType | None, seconds: float) -> None:
        frame = user_frame(frame)
        if frame is None:
            return
        local = self._local
        if frame is not local.frame:
            local.frame, local.chain = frame, self._chain(frame)
        chain = local.chain
        chain[0].own_ops += 1
        chain[0].own_seconds += seconds
        for entry in chain:
            entry.ops += 1
            entry.seconds += seconds

    def mark_synced(self, frame: types.FrameType | None) -> None:
        """A host conversion was made from `frame`: the user functions on the stack wait for
        the device, so jit cannot take them whole."""
        while frame is not None:
            if not is_library(frame.f_code.co_filename):
                self._entry(frame.f_code).synced = True
            frame = frame.f_back

    def install(self, stack: ExitStack) -> None:
        """Count from now until `stack` closes."""
        with _plan_lock:
            first = not _recording
            _recording.append(self)
        if first:
            _install()
        stack.callback(self._close)

    def _close(self) -> None:
        with _plan_lock:
            if self in _recording:
                _recording.remove(self)
            last = not _recording
        if last:
            _uninstall()
        self._local.frame, self._local.chain = None, []
        for entry in self.functions.values():
            entry.last = None
