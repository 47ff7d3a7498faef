"""benchmark / compare on the CPU backend (jax-facts §9)."""

from __future__ import annotations

import io
import json
import statistics
import time

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


def test_an_unblocked_function_is_timed_for_real(matmul_chain) -> None:  # type: ignore[no-untyped-def]
    chain, x = matmul_chain
    blocked, unblocked = [], []
    for _ in range(5):
        start = time.perf_counter()
        chain(x).block_until_ready()
        blocked.append(time.perf_counter() - start)
        start = time.perf_counter()
        out = chain(x)  # what a naive timer measures: the dispatch only
        unblocked.append(time.perf_counter() - start)
        out.block_until_ready()
    manual = statistics.median(blocked)
    result = benchmark(chain, x, warmup=1, trials=5)
    assert manual / 3 < result.median < manual * 3, (result.median, manual)
    assert statistics.median(unblocked) < result.median / 2  # the test can tell the difference
    assert result.trials == 5 and result.compiles_in_timed_region == 0
    assert result.min <= result.median <= result.max


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


def test_min_time_adds_trials() -> None:
    result = benchmark(time.sleep, 0.002, warmup=0, trials=1, min_time=0.02)
    assert result.trials >= 5
    assert sum(result.times) >= 0.02


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


def test_compare_ratio_is_a_over_b() -> None:
    def slow() -> None:
        time.sleep(0.008)

    def fast() -> None:
        time.sleep(0.001)

    result = compare(slow, fast, warmup=0, trials=5, names=("before", "after"))
    assert isinstance(result, ComparisonResult) and isinstance(result.a, BenchmarkResult)
    assert result.a.name == "before" and result.b.name == "after"
    assert result.ratio > 2 and result.paired_ratio > 2 and result.min_ratio > 2
    lo, hi = result.spread
    assert lo <= result.paired_ratio <= hi
    assert json.loads(json.dumps(result.to_dict()))["ratio"] == result.ratio
    assert str(result).startswith("before / after: ")


def test_compare_times_jax_work_blocked(matmul_chain) -> None:  # type: ignore[no-untyped-def]
    chain, x = matmul_chain

    def twice(x):  # type: ignore[no-untyped-def]
        return chain(chain(x))

    blocked = []
    for _ in range(3):
        start = time.perf_counter()
        chain(x).block_until_ready()
        blocked.append(time.perf_counter() - start)
    manual = statistics.median(blocked)
    result = compare(twice, chain, x, warmup=1, trials=5)
    # Margins are wide on purpose: CI shares two cores, and one slow round moves a 3-trial ratio
    # by 0.3. Dispatch-only timing would put b near 0.1 ms, far below manual / 3.
    assert manual / 3 < result.b.median < manual * 3, (result, manual)
    assert 1.1 < result.ratio < 4.0, result
    assert result.a.compiles_in_timed_region == result.b.compiles_in_timed_region == 0


@pytest.mark.parametrize("name", ["benchmark", "compare"])
def test_docstring_examples_run(name: str, run_doc_examples) -> None:  # type: ignore[no-untyped-def]
    import jaxlint.runtime as runtime

    run_doc_examples(getattr(runtime, name))
