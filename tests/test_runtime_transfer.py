"""to_host / prefetch_to_host / prefetch_to_device: values, order, bounded look-ahead, clean stops."""

from __future__ import annotations

import contextlib
import gc
import threading
import time

import numpy as np
import pytest


jax = pytest.importorskip("jax")
jnp = jax.numpy

from jaxlint.runtime import prefetch_to_device, prefetch_to_host, to_host  # noqa: E402


class Source:
    """An iterator that counts how many items were pulled and can fail at one of them."""

    def __init__(self, n: int, *, fail_at: int | None = None, make=np.float32) -> None:  # type: ignore[no-untyped-def]
        self.n, self.fail_at, self.make, self.pulled = n, fail_at, make, 0

    def __iter__(self) -> Source:
        return self

    def __next__(self):  # type: ignore[no-untyped-def]
        if self.pulled == self.fail_at:
            self.pulled += 1
            raise KeyError(f"item {self.fail_at}")
        if self.pulled >= self.n:
            raise StopIteration
        self.pulled += 1
        return self.make(self.pulled - 1)


def _device_item(i: int):  # type: ignore[no-untyped-def]
    return {"x": jax.device_put(np.full((3,), i, np.float32)), "i": i}


def test_to_host_converts_device_leaves_and_keeps_the_rest() -> None:
    a = jax.device_put(np.arange(4.0, dtype=np.float32))
    tree = {"a": a, "b": [a * 2, 3, "label"], "c": np.ones(2)}
    host = to_host(tree)
    assert isinstance(host["a"], np.ndarray) and isinstance(host["b"][0], np.ndarray)
    np.testing.assert_array_equal(host["b"][0], [0, 2, 4, 6])
    assert host["b"][1:] == [3, "label"] and host["c"] is tree["c"]
    scalar = to_host(jnp.float32(2.5))
    assert isinstance(scalar, np.ndarray) and scalar.shape == () and float(scalar) == 2.5


def test_to_host_copy_gives_writable_independent_arrays() -> None:
    a = jax.device_put(np.arange(3.0, dtype=np.float32))
    numpy_leaf = np.zeros(2)
    host = to_host([a, numpy_leaf], copy=True)
    host[0][0] = 42.0  # np.array semantics: writable
    host[1][0] = 1.0
    assert float(a[0]) == 0.0 and numpy_leaf[0] == 0.0
    np.testing.assert_array_equal(to_host([a])[0], np.asarray(a))


def test_to_host_matches_per_item_np_array_on_a_loop_of_jitted_results() -> None:
    @jax.jit
    def layer(x):
        return jnp.tanh(x) * 3

    xs = [jax.device_put(np.full((5, 4), i, np.float32)) for i in range(16)]
    per_item = [np.array(layer(x)) for x in xs]
    collected = to_host([layer(x) for x in xs])
    for a, b in zip(per_item, collected):
        np.testing.assert_array_equal(a, b)


def test_prefetch_to_host_yields_numpy_in_order_and_bounds_the_look_ahead() -> None:
    source = Source(6, make=_device_item)
    for size in (1, 2, 3):
        source = Source(6, make=_device_item)
        seen = []
        for k, item in enumerate(prefetch_to_host(source, size=size)):
            assert source.pulled <= k + size  # item k plus at most size-1 ahead
            assert isinstance(item["x"], np.ndarray) and item["i"] == k
            seen.append(float(item["x"][0]))
        assert seen == [0, 1, 2, 3, 4, 5]


def test_prefetch_to_host_raises_after_the_items_before_the_failure() -> None:
    source = Source(10, fail_at=3, make=_device_item)
    got = []
    with pytest.raises(KeyError, match="item 3"):
        for item in prefetch_to_host(source, size=2):
            got.append(item["i"])
    assert got == [0, 1, 2]
    assert source.pulled == 4  # it stopped pulling at the failure


def test_prefetch_to_device_yields_device_arrays_in_order() -> None:
    device = jax.devices()[0]
    for threaded in (False, True):
        out = list(prefetch_to_device(Source(5), size=2, device=device, threaded=threaded))
        assert all(isinstance(x, jax.Array) for x in out)
        assert [float(x) for x in out] == [0, 1, 2, 3, 4]


def test_prefetch_to_device_bounds_its_queue() -> None:
    source = Source(20)
    for k, _ in enumerate(prefetch_to_device(source, size=3)):
        assert source.pulled <= k + 3
    source = Source(20)
    for k, _ in enumerate(prefetch_to_device(source, size=3, threaded=True)):
        time.sleep(0.005)  # let the thread run ahead as far as it can
        # the queue holds 3, the thread may hold one more waiting for room
        assert source.pulled <= k + 1 + 3 + 1


@pytest.mark.parametrize("threaded", [False, True])
def test_prefetch_to_device_raises_after_the_items_before_the_failure(threaded: bool) -> None:
    got = []
    with pytest.raises(KeyError, match="item 4"):
        for x in prefetch_to_device(Source(10, fail_at=4), size=2, threaded=threaded):
            got.append(float(x))
    assert got == [0, 1, 2, 3]
    assert not _prefetch_threads()


def _prefetch_threads() -> list[threading.Thread]:
    """The prefetch threads still alive once they had time to stop: it returns as soon as
    none is left, so the long deadline only matters on a machine too busy to run them."""
    deadline = time.monotonic() + 30.0
    while True:
        alive = [t for t in threading.enumerate() if t.name == "jaxlint-prefetch"]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.01)


def test_threaded_prefetch_stops_its_thread_when_the_loop_stops_early() -> None:
    source = Source(10_000)
    with contextlib.closing(prefetch_to_device(source, size=2, threaded=True)) as batches:
        for k, _ in enumerate(batches):
            if k == 2:
                break
    assert not _prefetch_threads()
    assert source.pulled <= 3 + 2 + 1

    source = Source(10_000)
    with pytest.raises(RuntimeError, match="in the loop body"):
        for k, _ in enumerate(prefetch_to_device(source, size=2, threaded=True)):
            if k == 1:
                raise RuntimeError("in the loop body")
    gc.collect()  # the abandoned generator is closed when collected
    assert not _prefetch_threads()


def test_bad_sizes_are_rejected_at_the_call() -> None:
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ValueError, match="size must be"):
            prefetch_to_host([], size=bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="size must be"):
            prefetch_to_device([], size=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["to_host", "prefetch_to_host", "prefetch_to_device"])
def test_docstring_examples_run(name: str, run_doc_examples) -> None:  # type: ignore[no-untyped-def]
    import jaxlint.runtime as runtime

    run_doc_examples(getattr(runtime, name))
