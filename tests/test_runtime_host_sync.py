"""count_host_syncs / no_host_sync (jax-facts §4, §5): what they see on CPU, and clean restore."""

from __future__ import annotations

import math
import operator
import pickle
import threading
from typing import Any

import numpy as np
import pytest


jax = pytest.importorskip("jax")
jnp = jax.numpy

from jaxlint.runtime import HostSyncError, count_host_syncs, no_host_sync  # noqa: E402
from jaxlint.runtime._host_sync import _METHODS, _NUMPY_FUNCTIONS, _array_type  # noqa: E402


# Nothing here may create an array at import: a jax backend started while pytest collects
# makes later tests that fork (the CLI's process pool) fail on jax's at-fork warning.
@pytest.fixture
def arrays() -> tuple[Any, Any, Any]:
    """x: f32[4], s: an f32 scalar, i: an i32 scalar; all ready on the device."""
    x = jnp.arange(4.0)
    return jax.block_until_ready((x, x[1], jnp.int32(1)))


def _snapshot() -> dict[str, Any]:
    array_type = _array_type()
    return {
        **{f"Array.{k}": vars(array_type).get(k) for k in _METHODS},
        **{f"np.{k}": vars(np)[k] for k in _NUMPY_FUNCTIONS},
        "jax.device_get": vars(jax)["device_get"],
    }


ORIGINAL = _snapshot()  # no array needed


@pytest.mark.parametrize(
    ("convert", "kind"),
    [
        (lambda x, s, i: s.item(), ".item()"),
        (lambda x, s, i: float(s), "float()"),
        (lambda x, s, i: int(s), "int()"),
        (lambda x, s, i: complex(s), "complex()"),
        (lambda x, s, i: bool(s > 0), "bool()"),
        (lambda x, s, i: [1, 2, 3][i], "operator.index()"),
        (lambda x, s, i: operator.index(i), "operator.index()"),
        (lambda x, s, i: x.tolist(), ".tolist()"),
        (lambda x, s, i: x.tobytes(), ".tobytes()"),
        (lambda x, s, i: str(x), "str()"),
        (lambda x, s, i: repr(x), "repr()"),
        (lambda x, s, i: f"{s:.3f}", "format()"),
        (lambda x, s, i: math.isfinite(s), "float()"),
        (lambda x, s, i: pickle.dumps(x), "pickle"),
        (lambda x, s, i: x.__array__(), "__array__"),
        (lambda x, s, i: np.asarray(x), "np.asarray"),
        (lambda x, s, i: np.array(x), "np.array"),
        (lambda x, s, i: np.asanyarray(x), "np.asanyarray"),
        (lambda x, s, i: np.ascontiguousarray(x), "np.ascontiguousarray"),
        (lambda x, s, i: jax.device_get(x), "jax.device_get"),
        (lambda x, s, i: jax.device_get({"a": x, "b": [x, x]}), "jax.device_get"),  # one call, one sync
    ],
)
def test_each_blocking_conversion_counts_once(convert, kind: str, arrays) -> None:  # type: ignore[no-untyped-def]
    with count_host_syncs() as syncs:
        convert(*arrays)
    assert syncs.by_kind == {kind: 1}
    assert syncs.total == 1
    (event,) = syncs.events
    assert event.kind == kind and event.where.startswith(__file__)


@pytest.mark.parametrize(
    "work",
    [
        lambda x, s, i: x + 1,
        lambda x, s, i: jax.jit(lambda v: v * 2)(x),
        lambda x, s, i: x.copy_to_host_async(),
        lambda x, s, i: x.is_ready(),
        lambda x, s, i: (x.shape, x.dtype, x.sharding),
        lambda x, s, i: list(x),  # iterating makes device slices
        lambda x, s, i: jax.block_until_ready(x),
        lambda x, s, i: jax.device_get([1.0, np.ones(2)]),  # nothing on the device
        lambda x, s, i: np.asarray(np.ones(3)),
    ],
)
def test_device_work_and_non_blocking_calls_do_not_count(work, arrays) -> None:  # type: ignore[no-untyped-def]
    with count_host_syncs() as syncs:
        work(*arrays)
    assert syncs.total == 0, syncs.events


def test_what_cannot_be_seen_on_cpu_is_as_documented(arrays) -> None:  # type: ignore[no-untyped-def]
    if jax.default_backend() != "cpu":
        pytest.skip("CPU-only limitation: NumPy reads CPU arrays through the buffer protocol")
    x, s, _ = arrays
    with count_host_syncs() as syncs:
        np.sum(x)
        np.float32(s)
        memoryview(x)
    assert syncs.total == 0  # if this starts failing, jax or NumPy changed: update the docstring


def test_a_training_loop_pattern() -> None:
    step = jax.jit(lambda w, x: (w - 0.1 * x, jnp.sum(w * x)))
    w, batches = jnp.ones(3), [jnp.full(3, float(i)) for i in range(5)]
    with count_host_syncs() as syncs:
        losses = []
        for b in batches:
            w, loss = step(w, b)
            losses.append(float(loss))
    assert syncs.by_kind == {"float()": 5}
    with no_host_sync():
        device_losses = []
        for b in batches:
            w, loss = step(w, b)
            device_losses.append(loss)
    assert len(jax.device_get(device_losses)) == 5


def test_no_host_sync_raises_naming_the_conversion_and_the_line(arrays) -> None:  # type: ignore[no-untyped-def]
    x, s, _ = arrays
    with pytest.raises(HostSyncError) as info:
        with no_host_sync() as syncs:
            x + 1
            s.item()
    message = str(info.value)
    assert ".item() of a jax.Array float32[]" in message
    assert f"{__file__}:" in message
    assert syncs.by_kind == {".item()": 1}
    assert isinstance(info.value, RuntimeError)
    assert _snapshot() == ORIGINAL


def test_everything_is_restored_exactly_even_after_an_exception(arrays) -> None:  # type: ignore[no-untyped-def]
    s = arrays[1]
    with pytest.raises(ZeroDivisionError):
        with count_host_syncs():
            assert _snapshot() != ORIGINAL
            1 / 0  # noqa: B018
    assert _snapshot() == ORIGINAL
    with count_host_syncs():
        pass
    assert _snapshot() == ORIGINAL
    with count_host_syncs() as after:
        pass
    float(s)
    assert after.total == 0


def test_counters_nest_and_the_inner_one_restores_nothing_early(arrays) -> None:  # type: ignore[no-untyped-def]
    s = arrays[1]
    with count_host_syncs() as outer:
        float(s)
        with count_host_syncs() as inner:
            int(s)
        str(s)
        assert _snapshot() != ORIGINAL
    assert inner.by_kind == {"int()": 1}
    assert outer.by_kind == {"float()": 1, "int()": 1, "str()": 1}
    assert _snapshot() == ORIGINAL


def test_only_the_entering_thread_is_watched(arrays) -> None:  # type: ignore[no-untyped-def]
    s = arrays[1]
    with no_host_sync() as syncs:
        worker = threading.Thread(target=lambda: float(s))  # a data loader converting: allowed
        worker.start()
        worker.join()
    assert syncs.total == 0


def test_tracers_pass_through(arrays) -> None:  # type: ignore[no-untyped-def]
    x = arrays[0]
    with count_host_syncs() as syncs:
        with pytest.raises(jax.errors.TracerArrayConversionError):
            jax.jit(lambda v: np.asarray(v))(x)
    assert syncs.total == 0


def test_a_counter_covers_one_block() -> None:
    c = count_host_syncs()
    with c:
        pass
    with pytest.raises(RuntimeError, match="one `with` block"):
        with c:
            pass


@pytest.mark.parametrize("name", ["count_host_syncs", "no_host_sync"])
def test_docstring_examples_run(name: str, run_doc_examples) -> None:  # type: ignore[no-untyped-def]
    import jaxlint.runtime as runtime

    run_doc_examples(getattr(runtime, name))
