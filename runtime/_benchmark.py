"""Honest wall-clock benchmarks of JAX code: warm up, block on every result, count compiles."""

from __future__ import annotations

import dataclasses
import math
import statistics
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from ._compile import CompileCounter, count_compiles, function_name


_MAX_TRIALS = 1_000_000


class BenchmarkWarning(UserWarning):
    """A benchmark measured something other than steady-state run time (compiles while timing)."""


def _unit(seconds: float) -> tuple[str, float]:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return unit, scale
    return "ns", 1e-9


def _fmt(seconds: float) -> str:
    unit, scale = _unit(seconds)
    return f"{seconds / scale:.3g} {unit}"


def _fmt_range(lo: float, hi: float) -> str:
    unit, scale = _unit(hi)
    return f"{lo / scale:.3g}–{hi / scale:.3g} {unit}"


def _quartiles(values: Sequence[float]) -> tuple[float, float]:
    if len(values) < 2:
        return values[0], values[0]
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q3


@dataclasses.dataclass(frozen=True)
class BenchmarkResult:
    """Timings of one function from `benchmark` (or one side of `compare`). Times are seconds.

    **Fields:** `name`; `times` (one per timed call, each blocked on its result);
    `warmup_times` (the untimed warmup calls: the first includes tracing and compiling);
    `warmup_compiles`; `compiles_in_timed_region` and `compiles_by_name` (compiles inside the
    timed calls: should be 0 and `{}`); `platform` and `device_kind` of `jax.devices()[0]`.
    **Properties:** `trials`, `median`, `min`, `max`, `mean`, `iqr` (first and third quartiles).
    It prints as a table with rich (`rich.print(result)`) and `to_dict()` gives plain JSON types.
    """

    name: str
    times: tuple[float, ...]
    warmup_times: tuple[float, ...]
    warmup_compiles: int
    compiles_in_timed_region: int
    compiles_by_name: dict[str, int]
    platform: str
    device_kind: str

    @property
    def trials(self) -> int:
        return len(self.times)

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def min(self) -> float:
        return min(self.times)

    @property
    def max(self) -> float:
        return max(self.times)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.times)

    @property
    def iqr(self) -> tuple[float, float]:
        return _quartiles(self.times)

    def to_dict(self) -> dict[str, Any]:
        """Every field and statistic as JSON-ready values (seconds as floats)."""
        return {
            **dataclasses.asdict(self),
            "times": list(self.times),
            "warmup_times": list(self.warmup_times),
            "trials": self.trials,
            "median": self.median,
            "min": self.min,
            "max": self.max,
            "mean": self.mean,
            "iqr": list(self.iqr),
        }

    def __str__(self) -> str:
        text = (
            f"{self.name}: median {_fmt(self.median)} (min {_fmt(self.min)}, max {_fmt(self.max)}) "
            f"over {self.trials} trials on {self.device_kind}"
        )
        if self.compiles_in_timed_region:
            text += f"; {self.compiles_in_timed_region} compiles while timing {self.compiles_by_name}"
        return text

    def table(self) -> Any:
        """A `rich.table.Table` of the result."""
        from rich.table import Table

        device = self.device_kind if self.device_kind == self.platform else f"{self.device_kind} ({self.platform})"
        table = Table(title=f"{self.name} on {device}", caption="compiles: inside the timed region (want 0)")
        for column in ("median", "min", "max", "IQR", "trials", "1st call", "compiles"):
            table.add_column(column, justify="right", no_wrap=True)
        compiles = str(self.compiles_in_timed_region)
        if self.compiles_in_timed_region:
            compiles = f"[bold red]{compiles}[/]"
        table.add_row(
            _fmt(self.median), _fmt(self.min), _fmt(self.max), _fmt_range(*self.iqr),
            str(self.trials), _fmt(self.warmup_times[0]) if self.warmup_times else "-", compiles,
        )  # fmt: skip
        return table

    def __rich__(self) -> Any:
        return self.table()


@dataclasses.dataclass(frozen=True)
class ComparisonResult:
    """Two functions timed interleaved by `compare`: `a`, `b` and the ratios between them.

    **Fields:** `a`, `b` (`BenchmarkResult`s) and `round_ratios` (`a`'s time over `b`'s in each
    interleaved round). **Properties:** `ratio` = `a.median / b.median`, so above 1 means `b` is
    faster ("speed-up of b over a"); `paired_ratio`, the median of `round_ratios`; `spread`, the
    first and third quartiles of `round_ratios` (half the rounds fall inside); `min_ratio` =
    `a.min / b.min`. When `spread` straddles 1, neither is clearly faster.
    """

    a: BenchmarkResult
    b: BenchmarkResult
    round_ratios: tuple[float, ...]

    @property
    def ratio(self) -> float:
        return self.a.median / self.b.median

    @property
    def paired_ratio(self) -> float:
        return statistics.median(self.round_ratios)

    @property
    def spread(self) -> tuple[float, float]:
        return _quartiles(self.round_ratios)

    @property
    def min_ratio(self) -> float:
        return self.a.min / self.b.min

    def to_dict(self) -> dict[str, Any]:
        """Both results and every ratio as JSON-ready values."""
        return {
            "a": self.a.to_dict(),
            "b": self.b.to_dict(),
            "round_ratios": list(self.round_ratios),
            "ratio": self.ratio,
            "paired_ratio": self.paired_ratio,
            "spread": list(self.spread),
            "min_ratio": self.min_ratio,
        }

    def __str__(self) -> str:
        lo, hi = self.spread
        return (
            f"{self.a.name} / {self.b.name}: {self.ratio:.3g}x (rounds {lo:.3g}–{hi:.3g}x); "
            f"{self.a.name} {_fmt(self.a.median)}, {self.b.name} {_fmt(self.b.median)}"
        )

    def table(self) -> Any:
        """A `rich.table.Table`: one row per function, then the ratio with its spread."""
        from rich.table import Table

        table = Table(title=f"{self.a.name} vs {self.b.name} on {self.a.device_kind}")
        for column in ("", "median", "min", "max", "trials", "compiles"):
            table.add_column(column, justify="right", no_wrap=True)
        for r in (self.a, self.b):
            table.add_row(r.name, _fmt(r.median), _fmt(r.min), _fmt(r.max), str(r.trials), str(r.compiles_in_timed_region))
        lo, hi = self.spread
        table.add_row(f"{self.a.name} / {self.b.name}", f"{self.ratio:.3g}x", f"{self.min_ratio:.3g}x", "", "", "")
        table.caption = (
            f"ratio: of medians (min column: of minima); per-round ratios: median {self.paired_ratio:.3g}x, "
            f"IQR {lo:.3g}–{hi:.3g}x; compiles: inside the timed region (want 0)"
        )
        return table

    def __rich__(self) -> Any:
        return self.table()


class _Variant:
    """One function under test: its warmup and timed calls, compiles attributed per call."""

    def __init__(self, fn: Callable[..., Any], name: str | None) -> None:
        if not callable(fn):
            raise TypeError(f"benchmark: fn must be callable, got {fn!r}")
        self.fn = fn
        self.name = name if name is not None else _name_of(fn)
        self.times: list[float] = []
        self.warmup_times: list[float] = []
        self.warmup_compiles = 0
        self.timed_by_name: dict[str, int] = {}

    def call(self, args: tuple[Any, ...], kwargs: dict[str, Any], counter: CompileCounter, *, timed: bool) -> float:
        import jax

        before = counter.by_name
        start = time.perf_counter()
        out = self.fn(*args, **kwargs)
        jax.block_until_ready(out)
        elapsed = time.perf_counter() - start
        del out
        after = counter.by_name
        if timed:
            self.times.append(elapsed)
            for k, v in after.items():
                if v > before.get(k, 0):
                    self.timed_by_name[k] = self.timed_by_name.get(k, 0) + v - before.get(k, 0)
        else:
            self.warmup_times.append(elapsed)
            self.warmup_compiles += sum(after.values()) - sum(before.values())
        return elapsed

    def result(self) -> BenchmarkResult:
        import jax

        device = jax.devices()[0]
        return BenchmarkResult(
            name=self.name, times=tuple(self.times), warmup_times=tuple(self.warmup_times),
            warmup_compiles=self.warmup_compiles, compiles_in_timed_region=sum(self.timed_by_name.values()),
            compiles_by_name=dict(self.timed_by_name), platform=device.platform,
            device_kind=str(getattr(device, "device_kind", device.platform)),
        )  # fmt: skip


def _name_of(fn: Callable[..., Any]) -> str:
    try:
        return getattr(fn, "__qualname__", None) or function_name(fn)
    except TypeError:
        return repr(fn)


def _check(warmup: int, trials: int, min_time: float) -> None:
    if not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"benchmark: warmup must be an int >= 0, got {warmup!r}")
    if not isinstance(trials, int) or trials < 1:
        raise ValueError(f"benchmark: trials must be an int >= 1, got {trials!r}")
    if min_time < 0:
        raise ValueError(f"benchmark: min_time must be >= 0 seconds, got {min_time!r}")


def _warn_if_compiled(result: BenchmarkResult) -> None:
    if result.compiles_in_timed_region:
        warnings.warn(
            f"{result.name}: {result.compiles_in_timed_region} compile(s) inside the timed region "
            f"({result.compiles_by_name}), so the timings include compile time. The function compiles "
            "on calls after warmup: a shape, dtype or static argument changes from call to call, or "
            "it builds a new jax.jit wrapper each call. Warm up on exactly what you time.",
            BenchmarkWarning,
            stacklevel=3,
        )


def benchmark(
    fn: Callable[..., Any],
    /,
    *args: Any,
    warmup: int = 2,
    trials: int = 20,
    min_time: float = 0.0,
    name: str | None = None,
    **kwargs: Any,
) -> BenchmarkResult:
    """Time `fn(*args, **kwargs)` the way JAX needs: warmed up, blocked, compiles counted.

    Use it instead of `time.time()` around a call: JAX dispatches asynchronously, so an
    unblocked timer measures only the dispatch (~1000x too fast on CPU), and a first call, or a
    call on a new shape, measures a compile. Target of JL006's suggestion.

    It calls `fn` `warmup` times on the same arguments (untimed, blocked), then times each
    further call with `time.perf_counter`, including `jax.block_until_ready` on its result,
    until it has `trials` calls and their total reaches `min_time`. A `count_compiles` counter
    runs throughout; compiles during the timed calls are reported, and warned about.

    !!! Example

        ```python
        import json
        import jax
        import jax.numpy as jnp
        import rich
        from jaxlint.runtime import benchmark

        @jax.jit
        def step(w, x):
            return jnp.tanh(x @ w)

        w, x = jnp.ones((256, 256)), jnp.ones((64, 256))
        result = benchmark(step, w, x, trials=50)
        print(result)  # step: median ... over 50 trials on cpu
        assert result.compiles_in_timed_region == 0
        rich.print(result)  # a table
        json.dumps(result.to_dict())
        ```

    **Arguments:**

    - `fn`: the callable to time. Its result is blocked on with `jax.block_until_ready`, which
      walks pytrees; device work that the result does not reach (a global updated in place) is
      not waited for.
    - `*args`, `**kwargs`: passed to `fn` on every call. A function that donates its inputs
      cannot be called twice on them: wrap it so that each call makes fresh inputs.
    - `warmup`: keyword-only, untimed calls first (default 2).
    - `trials`: keyword-only, the least number of timed calls (default 20).
    - `min_time`: keyword-only, keep timing until the timed calls add up to this many seconds.
    - `name`: keyword-only, the label in the result (default: `fn`'s qualified name).

    These four keyword names are taken by `benchmark` (`fn` is positional-only, so `fn=` reaches
    `fn`); pass them to `fn` with `functools.partial`.

    **Returns:**

    A `BenchmarkResult`.

    **Raises:**

    `ValueError` for a bad `warmup`/`trials`/`min_time`; whatever `fn` raises. Warns
    `BenchmarkWarning` when compiles happen inside the timed region.

    !!! info "See also"

        `timeit` and IPython's `%timeit` neither block nor notice compiles. jax's
        `docs/benchmarking.md` recipe is `f(x).block_until_ready()` in `%timeit` after one
        untimed call; this adds the compile count and the statistics. Use `compare` to time a
        fix against the original, interleaved.
    """
    _check(warmup, trials, min_time)
    variant = _Variant(fn, name)
    with count_compiles() as counter:
        for _ in range(warmup):
            variant.call(args, kwargs, counter, timed=False)
        total = 0.0
        while len(variant.times) < _MAX_TRIALS and (len(variant.times) < trials or total < min_time):
            total += variant.call(args, kwargs, counter, timed=True)
    result = variant.result()
    _warn_if_compiled(result)
    return result


def compare(
    a: Callable[..., Any],
    b: Callable[..., Any],
    /,
    *args: Any,
    warmup: int = 2,
    trials: int = 20,
    min_time: float = 0.0,
    names: tuple[str, str] | None = None,
    **kwargs: Any,
) -> ComparisonResult:
    """Time two callables interleaved on the same arguments, and give the ratio of their medians.

    Use it to check that a fix pays off (`compare(before, after, x)`): running the two in
    alternating rounds (a b, then b a, ...) exposes both to the same machine noise (frequency
    changes, other processes, cache state), which timing one after the other does not.

    !!! Example

        ```python
        import jax
        import jax.numpy as jnp
        from jaxlint.runtime import compare

        def eager(x):
            for _ in range(8):
                x = jnp.sin(x)  # one dispatch per op
            return x

        x = jnp.ones((128, 128))
        c = compare(eager, jax.jit(eager), x, names=("eager", "jit"))
        lo, hi = c.spread
        print(f"jit is {c.ratio:.1f}x faster (half the rounds between {lo:.1f}x and {hi:.1f}x)")
        ```

    **Arguments:**

    - `a`, `b`: the callables; each is warmed up and blocked on as in `benchmark`.
    - `*args`, `**kwargs`: passed to both on every call.
    - `warmup`, `trials`, `min_time`: keyword-only, as in `benchmark`, for each callable
      (`trials` rounds at least; `min_time` must be reached by both).
    - `names`: keyword-only, labels for `a` and `b` (default: their qualified names).

    **Returns:**

    A `ComparisonResult`: `ratio` is `a.median / b.median` (above 1: `b` is faster), with
    `spread`, the quartiles of the per-round ratios.

    **Raises:**

    As `benchmark`; warns `BenchmarkWarning` for each side that compiled while timed.

    !!! info "See also"

        `benchmark` for one function. `jaxlint bench` runs this on the rule fixtures' `main()`
        before and after the fix.
    """
    _check(warmup, trials, min_time)
    name_a, name_b = names if names is not None else (None, None)
    va, vb = _Variant(a, name_a), _Variant(b, name_b)
    with count_compiles() as counter:
        for v in (va, vb):
            for _ in range(warmup):
                v.call(args, kwargs, counter, timed=False)
        ratios: list[float] = []
        total_a = total_b = 0.0
        rounds = 0
        while rounds < _MAX_TRIALS and (rounds < trials or min(total_a, total_b) < min_time):
            if rounds % 2 == 0:
                ta = va.call(args, kwargs, counter, timed=True)
                tb = vb.call(args, kwargs, counter, timed=True)
            else:
                tb = vb.call(args, kwargs, counter, timed=True)
                ta = va.call(args, kwargs, counter, timed=True)
            ratios.append(ta / tb if tb > 0 else math.inf)
            total_a += ta
            total_b += tb
            rounds += 1
    result = ComparisonResult(va.result(), vb.result(), tuple(ratios))
    _warn_if_compiled(result.a)
    _warn_if_compiled(result.b)
    return result
