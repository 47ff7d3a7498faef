"""The engine's timing analysis: timed regions (`_timing`) and pending device work (`_waits`)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import libcst as cst
import pytest

from jaxlint._context import FileContext
from jaxlint._engine import analyze
from jaxlint._timing import TIMERS, TimingIndex
from jaxlint._walk import walk


HEADER = """
import time
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

@jax.jit
def step(x):
    return x * 2

@eqx.filter_jit
def fstep(x):
    return x * 2

"""


def _regions(body: str):  # type: ignore[no-untyped-def]
    """For every end read in `body` (`timer() - t0`, `toc = timer()`): None when it ends no
    region, else (start name, the names of the pending work, the cold callees)."""
    source = HEADER + textwrap.dedent(body)
    module = cst.parse_module(source)
    ctx = FileContext("<test>", source, module)
    index = TimingIndex(ctx)
    found = []

    def probe(call: cst.Call) -> None:
        if not ctx.is_call_to(call, TIMERS):
            return
        parent = ctx.ancestors[-1]
        is_end = isinstance(parent, cst.BinaryOperation) or (
            isinstance(parent, cst.Assign) and module.code_for_node(parent.targets[0].target) == "toc"
        )
        if not is_end:
            return
        region = index.region(call, ctx.ancestors)
        if region is None:
            found.append(None)
            return
        pending = [w.names for w in index.pending(region)]
        cold = [callee for _, _, callee in index.cold_calls(region)]
        found.append((region.start_name, pending, cold))

    walk(module, {cst.Call: [probe]}, {}, ctx.ancestors)
    return found


def _pending(body: str) -> list[tuple[str, ...]]:
    regions = [r for r in _regions(body) if r is not None]
    assert len(regions) == 1, regions
    return regions[0][1]


def test_unwaited_result_is_pending() -> None:
    assert _pending(
        """
        def f(x):
            t0 = time.perf_counter()
            out = step(x)
            return time.perf_counter() - t0
        """
    ) == [("out",)]


@pytest.mark.parametrize(
    "wait",
    [
        "out.block_until_ready()",
        "jax.block_until_ready(out)",
        "np.asarray(out)",
        "float(out.sum())",
        "out.item()",
        "jax.device_get(out)",
        "print(out)",
        "print(f'{out}')",
        "log(out)",  # unknown: may wait
        "assert out.sum() > 0",
        "fstep(x)",  # eqx.filter_jit blocks on its result
    ],
)
def test_waits(wait: str) -> None:
    assert _pending(
        f"""
        def f(x, log):
            t0 = time.perf_counter()
            out = step(x)
            {wait}
            return time.perf_counter() - t0
        """
    ) == []


@pytest.mark.parametrize("not_a_wait", ["print(i)", "outs.append(out)", "n = len(out)", "y = np.ones(3)"])
def test_not_waits(not_a_wait: str) -> None:
    assert _pending(
        f"""
        def f(x, i, outs):
            t0 = time.perf_counter()
            out = step(x)
            {not_a_wait}
            return time.perf_counter() - t0
        """
    ) != []


def test_only_the_last_results_need_a_wait() -> None:
    # `y` is computed from `out`: waiting for `y` waits for both.
    assert _pending(
        """
        def f(x):
            t0 = time.perf_counter()
            out = step(x)
            y = jnp.sin(out)
            return time.perf_counter() - t0
        """
    ) == [("y",)]


def test_overwritten_results_are_dead() -> None:
    assert _pending(
        """
        def f(x, g):
            t0 = time.perf_counter()
            out = jnp.zeros(3)
            out = g(x)
            return time.perf_counter() - t0
        """
    ) == []


def test_a_wait_on_the_reading_line_counts() -> None:
    assert _pending(
        """
        def f(x):
            t0 = time.time()
            loss = step(x)
            print(f"{loss} {time.time() - t0}")
        """
    ) == []


def test_second_read_assigned_then_subtracted() -> None:
    assert _regions(
        """
        def f(x):
            tic = time.time()
            out = step(x)
            toc = time.time()
            return toc - tic
        """
    ) == [("tic", [("out",)], [])]


@pytest.mark.parametrize(
    "body",
    [
        # The start is rebound inside the loop holding the end read, not right after it.
        """
        def f(x, n):
            last = time.time()
            for i in range(n):
                x = step(x)
                if i % 2:
                    print(time.time() - last)
                else:
                    last = time.time()
        """,
        # Rebound after the read, and elsewhere in the loop too.
        """
        def f(x, n):
            last = time.time()
            for i in range(n):
                if i == 0:
                    last = time.time()
                x = step(x)
                print(time.time() - last)
                last = time.time()
        """,
        # The start is set on one branch only.
        """
        def f(x, p):
            if p:
                t0 = time.time()
            x = step(x)
            print(time.time() - t0)
        """,
        # The end read sits in an exception handler.
        """
        def f(x):
            t0 = time.time()
            try:
                x = step(x)
            except ValueError:
                print(time.time() - t0)
        """,
    ],
)
def test_no_region_when_the_start_is_ambiguous(body: str) -> None:
    assert _regions(body) == [None]


def test_cold_call_in_a_timed_loop() -> None:
    found = _regions(
        """
        def bench(x):
            t0 = time.perf_counter()
            for _ in range(3):
                out = step(x)
            out.block_until_ready()
            return time.perf_counter() - t0

        bench(1)
        """
    )
    assert found == [("t0", [], ["step"])]


@pytest.mark.parametrize(
    "before, calls",
    [
        ("step(x)", "bench(1)"),  # warmed up
        ("", "bench(1)\nbench(2)"),  # the function runs twice: the first run compiles
        ("", "for _ in range(2):\n    bench(1)"),
    ],
)
def test_no_cold_call_after_a_warm_up(before: str, calls: str) -> None:
    bench = f"""
        def bench(x):
            {before or "pass"}
            t0 = time.perf_counter()
            for _ in range(3):
                out = step(x)
            out.block_until_ready()
            return time.perf_counter() - t0

        """
    found = _regions(textwrap.dedent(bench) + calls + "\n")
    assert found == [("t0", [], [])]


def test_later_reads_of_one_start_reuse_the_flow() -> None:
    found = _regions(
        """
        def f(x):
            t0 = time.time()
            a = step(x)
            print(time.time() - t0)
            a.block_until_ready()
            print(time.time() - t0)
            b = step(a)
            print(time.time() - t0)
        """
    )
    assert [r[1] for r in found] == [[("a",)], [], [("b",)]]


@pytest.mark.parametrize(
    "report, cold",
    [
        ("return time.perf_counter() - t0", ["step"]),  # a benchmark helper's figure
        ("print((time.perf_counter() - t0) / n)", ["step"]),  # per step
        ("elapsed = time.perf_counter() - t0\nprint(n / elapsed)", ["step"]),  # a rate
        ("toc = time.perf_counter()\nper = (toc - t0) * 1e3 / n", ["step"]),
        ("print((time.perf_counter() - t0) / 60)", []),  # the whole run, in minutes
        ("elapsed = time.perf_counter() - t0\nprint(elapsed * 1000, n)", []),
    ],
)
def test_cold_call_only_in_a_figure_per_step(report: str, cold: list[str]) -> None:
    body = textwrap.indent(textwrap.dedent(report), " " * 4)
    found = _regions(
        f"""
def bench(x, n):
    t0 = time.perf_counter()
    for _ in range(n):
        out = step(x)
    out.block_until_ready()
{body}

bench(1, 3)
"""
    )
    assert [r[2] for r in found if r is not None] == [cold]


@pytest.mark.parametrize(
    "report, cold",
    [
        ("print((time.perf_counter() - t0) / 3)", ["step"]),  # the loop's spelled count
        ("print((time.perf_counter() - t0) / 4)", []),  # another number: a unit
    ],
)
def test_a_spelled_count_divides_to_a_figure_per_step(report: str, cold: list[str]) -> None:
    found = _regions(
        f"""
def bench(x):
    t0 = time.perf_counter()
    for _ in range(3):
        out = step(x)
    out.block_until_ready()
    {report}

bench(1)
"""
    )
    assert [r[2] for r in found if r is not None] == [cold]


@pytest.mark.parametrize(
    "gather, report, cold",
    [
        ("laps.append(time.perf_counter() - t0)", "print(np.mean(laps))", ["step"]),
        ("laps.append(time.perf_counter() - t0)", "print(sum(laps) / len(laps))", ["step"]),
        ("total += time.perf_counter() - t0", "print(total / 5)", ["step"]),
        ("laps.append(time.perf_counter() - t0)", "print(min(laps))", []),  # the best pass
        ("laps.append(time.perf_counter() - t0)", "print(np.mean(laps[1:]))", []),  # first dropped
        ("if i:\n            laps.append(time.perf_counter() - t0)", "print(np.mean(laps))", []),
        ("print(time.perf_counter() - t0)", "pass", []),  # each pass on its own line
    ],
)
def test_cold_call_in_averaged_passes(gather: str, report: str, cold: list[str]) -> None:
    found = _regions(
        f"""
def trials(x):
    laps, total = [], 0.0
    for i in range(5):
        t0 = time.perf_counter()
        step(x).block_until_ready()
        {gather}
    {report}

trials(1)
"""
    )
    assert [r[2] for r in found if r is not None] == [cold]


@pytest.mark.parametrize(
    ("body", "pending"),
    [
        # a report that waits between the read and the restart: the work in flight at the
        # read finishes outside every interval; the region runs from the top of the body
        (
            """
            def f(x, n):
                last = time.time()
                for i in range(n):
                    x = step(x)
                    print(time.time() - last)
                    print(float(x))
                    last = time.time()
            """,
            [("x",)],
        ),
        (
            """
            def f(x, n):
                t0 = time.time()
                for i in range(n):
                    x = step(x)
                    if i % 100 == 0:
                        elapsed = time.time() - t0
                        log(elapsed, x)
                        t0 = time.time()
            """,
            [("x",)],
        ),
        # restarted right after the read: the intervals follow each other, as a running clock
        (
            """
            def f(x, n):
                last = time.time()
                for i in range(n):
                    x = step(x)
                    print(time.time() - last)
                    last = time.time()
                    print(float(x))
            """,
            [],
        ),
        # the report waits for the step's result on the read's own line
        (
            """
            def f(x, n):
                t0 = time.time()
                for i in range(n):
                    x = step(x)
                    if i % 100 == 0:
                        print(f"{x} {time.time() - t0}")
                        t0 = time.time()
            """,
            [],
        ),
    ],
)
def test_clock_restarted_after_each_read(body: str, pending: list[tuple[str, ...]]) -> None:
    found = _regions(textwrap.dedent(body))
    assert [(r[0], r[1]) for r in found] == [("last" if "last" in body else "t0", pending)]


# -- evidence ---------------------------------------------------------------------------------

_FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "unsynced-timing"


@pytest.mark.parametrize(
    "path", sorted(p for p in _FIXTURES.glob("bad_*.py") if not p.name.endswith(".fixed.py")), ids=lambda p: p.name
)
def test_every_finding_states_its_evidence(path: Path) -> None:
    """Each JL006 finding of the fixtures says what it relied on (issue 15)."""
    from jaxlint.rules.unsynced_timing import UnsyncedTiming

    findings = analyze(str(path), path.read_bytes(), [UnsyncedTiming]).result.findings
    assert findings
    assert all(f.evidence for f in findings), [(f.line, f.evidence) for f in findings if not f.evidence]


def _evidence(run_cli, name: str) -> dict[int, list[str]]:  # type: ignore[no-untyped-def]
    source = _FIXTURES / name
    result = run_cli("check", "--no-cache", "--select", "JL006", "--output-format", "json", str(source))
    return {f["line"]: f["evidence"] for f in json.loads(result.stdout)}


def test_evidence_of_work_in_flight(run_cli) -> None:  # type: ignore[no-untyped-def]
    """The device work in flight at the read, where it started and how it is jitted, where
    the clock started and what loop repeats the work."""
    evidence = _evidence(run_cli, "bad_benchmark_loop.py")
    assert evidence[22] == [
        "`decode_step(params, tokens)` at line 21, a function jitted with `jax.jit` (decorated at line 11), "
        "started on every iteration of the loop at line 20, which runs once per epoch, seed or configuration "
        "(`range(n_trials)`), is in flight at this read: nothing after it waits for its result",
        "the clock starts at line 19 (`t0`) and nothing between the two reads waits for the device",
    ]
    factory = _evidence(run_cli, "bad_jitted_by_other_means.py")[32]
    assert factory[0].startswith("`step(x)` at line 31, bound at line 28 to a function jitted with `jax.jit` (from `make_step(2.0)`)")
    eager = _evidence(run_cli, "bad_jnp_only.py")[14]
    assert "a JAX array operation (`jax.numpy.linalg.norm`) dispatched eagerly" in eager[0]


def test_evidence_of_a_compile_in_the_timed_region(run_cli) -> None:  # type: ignore[no-untyped-def]
    """Why the first call compiles inside the region, and how the figure spreads it."""
    per_step = _evidence(run_cli, "bad_cold_per_step.py")[23]
    assert per_step == [
        "`update` is a function jitted with `jax.jit` (decorated at line 10); nothing before the clock starts at "
        "line 21 (`t0`) calls it or hands it on, so this call traces and compiles it",
        "`main()` is called once in this file, outside any loop: no earlier run of it compiled the function",
        "the call runs on every iteration of the loop at line 22, which runs 200 times (`range(n_steps)`); only the first compiles",
        "the elapsed time is divided by a count at line 26 (`total / n_steps`): a time per step, the compile spread into it",
    ]
    averaged = _evidence(run_cli, "bad_cold_averaged_passes.py")[37]
    assert averaged[2].startswith("the timed pass is repeated by the loop at line 35")
    assert averaged[3] == (
        "each pass's time is gathered at line 39 (`durations.append(time.perf_counter() ...`) and averaged at "
        "line 40 (`np.mean(durations)`): the compile is in the average"
    )
