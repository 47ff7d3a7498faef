"""benchmark / compare on the CPU backend (jax-facts §9)."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest


jax = pytest.importorskip("jax")
jnp = jax.numpy

from jaxlint.runtime import BenchmarkResult, BenchmarkWarning, ComparisonResult, benchmark, compare  # noqa: E402


@pytest.fixture(scope="module")
def matmul_chain():  # type: ignore[no-untyped-def]
    """A jitted function that takes ~10 ms on 2 CPU cores, and its (warmed-up) argument."""

    @jax.jit
    def chain(x):  # type: ignore[no-untyped-def]
        for _ in range(4):
            x = jnp.tanh(x @ x)
        return x

    x = jax.device_put(np.random.default_rng(0).random((512, 512), np.float32) / 512)
    chain(x).block_until_ready()
    return chain, x


class Clock:
    """A stand-in for the `time` module in `jaxlint.runtime._benchmark`: it moves only when the
    code being timed says so, so the tests do not depend on how busy the machine is."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock(monkeypatch):  # type: ignore[no-untyped-def]
    from jaxlint.runtime import _benchmark

    fake = Clock()
    monkeypatch.setattr(_benchmark, "time", fake)
    return fake


class Dispatched:
    """What an asynchronous JAX call returns: ready only after `block_until_ready`, which
    waits `wait` seconds (of the fake clock)."""

    def __init__(self, clock: Clock, wait: float) -> None:
        self.clock, self.wait = clock, wait

    def block_until_ready(self) -> Dispatched:
        self.clock.advance(self.wait)
        return self


def test_an_unblocked_function_is_timed_for_real(clock: Clock) -> None:
    def work() -> Dispatched:
        clock.advance(0.001)  # the dispatch
        return Dispatched(clock, 0.010)  # the device work, waited on only when blocked

    result = benchmark(work, warmup=1, trials=5)
    assert result.times == pytest.approx((0.011,) * 5)  # dispatch and wait, not the dispatch alone
    assert result.trials == 5 and result.compiles_in_timed_region == 0
    assert result.min <= result.median <= result.max


def test_real_jax_work_is_waited_on(matmul_chain) -> None:  # type: ignore[no-untyped-def]
    """On real arrays: the result handed back by the timed call is ready (blocked on)."""
    chain, x = matmul_chain
    results = []

    def keep(x):  # type: ignore[no-untyped-def]
        out = chain(x)
        results.append(out)
        return out

    benchmark(keep, x, warmup=1, trials=2)
    assert all(out.is_ready() for out in results)


def test_warmup_uses_the_same_arguments_so_nothing_compiles_while_timed() -> None:
    @jax.jit
    def fresh(x, *, k):  # type: ignore[no-untyped-def]
        return x * k

    result = benchmark(fresh, jax.device_put(np.ones(3, np.float32)), k=2.0, warmup=1, trials=3)
    assert result.warmup_compiles == 1
    assert result.compiles_in_timed_region == 0 and result.compiles_by_name == {}
    assert len(result.warmup_times) == 1 and result.name.endswith("fresh")


def test_compiles_inside_the_timed_region_are_counted_and_warned_about() -> None:
    @jax.jit
    def grow(x):  # type: ignore[no-untyped-def]
        return x + 1

    sizes = iter(range(1, 100))

    def generate():  # type: ignore[no-untyped-def]
        # A new shape each call, like a generation loop whose warmup was shorter than the test.
        return grow(np.ones(next(sizes), np.float32))

    with pytest.warns(BenchmarkWarning, match=r"3 compile\(s\) inside the timed region"):
        result = benchmark(generate, warmup=1, trials=3)
    assert result.compiles_in_timed_region == 3
    assert result.compiles_by_name == {"grow": 3}
    assert result.warmup_compiles == 1


def test_no_warmup_puts_the_first_compile_in_the_timed_region() -> None:
    @jax.jit
    def cold(x):  # type: ignore[no-untyped-def]
        return x - 1

    with pytest.warns(BenchmarkWarning, match="cold"):
        result = benchmark(cold, jax.device_put(np.ones(2, np.float32)), warmup=0, trials=2)
    assert result.compiles_by_name == {"cold": 1}
    assert result.warmup_times == ()


def test_min_time_adds_trials(clock: Clock) -> None:
    result = benchmark(clock.advance, 0.125, warmup=0, trials=1, min_time=1.0)  # exact in binary
    assert result.trials == 8
    assert sum(result.times) == 1.0


def test_result_converts_to_json_and_prints_with_rich() -> None:
    from rich.console import Console

    result = benchmark(lambda: jnp.zeros(()), warmup=1, trials=4, name="zeros")
    data = json.loads(json.dumps(result.to_dict()))
    assert data["name"] == "zeros" and data["trials"] == 4 and len(data["times"]) == 4
    assert data["median"] == result.median and data["platform"] == "cpu"
    console = Console(file=io.StringIO(), width=120)
    console.print(result)
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "zeros" in text and "median" in text and "timed region" in text
    assert "zeros: median" in str(result)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"warmup": -1}, "warmup"), ({"trials": 0}, "trials"), ({"min_time": -1.0}, "min_time")],
)
def test_bad_settings_name_the_argument(kwargs, match) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=match):
        benchmark(lambda: None, **kwargs)


def test_compare_interleaves_and_alternates_the_order() -> None:
    calls: list[str] = []
    result = compare(lambda: calls.append("a"), lambda: calls.append("b"), warmup=1, trials=4)
    assert calls == ["a", "b", "a", "b", "b", "a", "a", "b", "b", "a"]
    assert result.a.trials == result.b.trials == len(result.round_ratios) == 4


def test_compare_ratio_is_a_over_b(clock: Clock) -> None:
    def slow() -> None:
        clock.advance(0.008)

    def fast() -> None:
        clock.advance(0.001)

    result = compare(slow, fast, warmup=0, trials=5, names=("before", "after"))
    assert isinstance(result, ComparisonResult) and isinstance(result.a, BenchmarkResult)
    assert result.a.name == "before" and result.b.name == "after"
    assert result.ratio == result.paired_ratio == result.min_ratio == pytest.approx(8)
    lo, hi = result.spread
    assert lo <= result.paired_ratio <= hi
    assert json.loads(json.dumps(result.to_dict()))["ratio"] == result.ratio
    assert str(result).startswith("before / after: ")


def test_compare_times_jax_work_blocked(clock: Clock) -> None:
    def twice() -> Dispatched:
        clock.advance(0.001)
        return Dispatched(clock, 0.020)

    def once() -> Dispatched:
        clock.advance(0.001)
        return Dispatched(clock, 0.010)

    result = compare(twice, once, warmup=1, trials=5)
    # Dispatch-only timing would give 0.001 for both and a ratio of 1.
    assert result.b.median == pytest.approx(0.011)
    assert result.ratio == pytest.approx(21 / 11)
    assert result.a.compiles_in_timed_region == result.b.compiles_in_timed_region == 0


def test_compare_warms_up_real_jax_work(matmul_chain) -> None:  # type: ignore[no-untyped-def]
    chain, x = matmul_chain

    def twice(x):  # type: ignore[no-untyped-def]
        return chain(chain(x))

    result = compare(twice, chain, x, warmup=1, trials=2)
    assert result.a.compiles_in_timed_region == result.b.compiles_in_timed_region == 0


@pytest.mark.parametrize("name", ["benchmark", "compare"])
def test_docstring_examples_run(name: str, run_doc_examples) -> None:  # type: ignore[no-untyped-def]
    import jaxlint.runtime as runtime

    run_doc_examples(getattr(runtime, name))
