"""`jaxlint.runtime.profile()` and `jaxlint run`: problems measured in a real run, reported
with the codes of `jaxlint check` at the lines that paid for them.

The runnable fixtures are the programs: each `bad_*.py` must give its rule's code at lines
it marks `# expect:` (only those its `main()` reaches), and its `.fixed.py` nothing. Every
finding is asserted exactly: compiles, `tree_at` and `filter_jit` calls are counted, and host
waits (JL005) and unsynced timing (JL006) are decided from the order of the program's
dispatches and syncs (`runtime/_ledger.py`), not from whether a loaded machine had finished the
work, so a fast or a slow device gives the same findings. Only their measured costs vary.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import textwrap
from pathlib import Path

import pytest


pytest.importorskip("jax")
pytest.importorskip("equinox")

from jaxlint._bench import load_module  # noqa: E402
from jaxlint.runtime import profile  # noqa: E402


ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"

# fixture -> the (code, line)s its main() reaches; every other `# expect:` line is in a
# function main() does not call.
RUNS = {
    "filter-jit-per-call/bad_name_taken": {("JL002", 25)},
    "filter-jit-per-call/bad_spellings": {("JL002", 49), ("JL002", 60), ("JL002", 64), ("JL002", 65)},
    "growing-shape-loop/bad_greedy_decode": {("JL008", 17)},
    "jit-in-loop/bad_bound_method": {("JL007", 18)},
    "jit-in-loop/bad_captured": {("JL007", 13), ("JL007", 16)},
    "jit-in-loop/bad_lambda_loop": {("JL007", 19), ("JL007", 20), ("JL007", 23)},
    "pad-final-batch/bad_ragged_loss": {("JL004", 21)},
    "tree-at-batch/bad_chain": {("JL003", 30), ("JL003", 39)},
    "tree-at-batch/bad_plan_loop": {("JL003", 66)},
    "tree-at-batch/bad_return_chain": {("JL003", 20), ("JL003", 25), ("JL003", 30), ("JL003", 36)},
    "host-copy-in-loop/bad_extraction": {("JL005", 18), ("JL005", 25), ("JL005", 30)},
    "host-copy-in-loop/bad_scan_over_device_array": {("JL005", 20)},
    "host-copy-in-loop/bad_compiled_through_helper": {("JL005", 22)},  # not 21: one comparison of a synced slice
    "filter-jit-per-call/bad_name_rebound_elsewhere": {("JL002", 36)},
    "tree-at-batch/bad_annotated_loop": {("JL003", 11)},
    "tree-at-batch/bad_attribute_plain_target": {("JL003", 15)},
    "tree-at-batch/bad_attribute_target": {("JL003", 15), ("JL003", 20), ("JL003", 32)},
    "tree-at-batch/bad_plain_target": {("JL003", 11)},
    "tree-at-batch/bad_renamed_chain": {("JL003", 14), ("JL003", 22)},
    "missing-jit/bad_decode_loop": {("JL001", 22)},
    "missing-jit/bad_static_flags": {("JL001", 7)},
    "missing-jit/bad_after_early_exit": {("JL001", 7)},
    "growing-shape-loop/bad_sliding_window": {("JL008", 19)},
    "growing-shape-loop/bad_joined_predictions": {("JL008", 24), ("JL008", 31), ("JL008", 39)},
    "growing-shape-loop/bad_returned_carry": {("JL008", 26), ("JL008", 33)},
    "missing-jit/bad_spellings": {("JL001", 16)},  # a module-level loop; score (22) is never called
    # 21: decode_step's first call (its compile) inside the interval timed at 22
    "unsynced-timing/bad_benchmark_loop": {("JL006", 21), ("JL006", 22)},
    "unsynced-timing/bad_epoch_timing": {("JL006", 30)},
    "unsynced-timing/bad_jitted_by_other_means": {("JL006", 32), ("JL006", 40), ("JL006", 51), ("JL006", 60), ("JL006", 77)},
    "unsynced-timing/bad_jnp_only": {("JL006", 14)},
    "unsynced-timing/bad_timeit_lambda": {("JL006", 20)},
}
# What a run finds that the static rules leave alone, on purpose: missing-jit/bad_spellings prints
# an array its module-level loop computed, so each of its 16 iterations waits for the device
# (JL005 at 39), but a loop of 16 items is one the static rule calls too short to report.
RUN_ONLY = {
    "missing-jit/bad_spellings": {("JL005", 39)},
    # The chains run on every step, so a run also sees their replacements (`jnp.zeros(2)`,
    # `jnp.eye(4)`) dispatched eagerly a hundred times: a missing jit the static rule, which
    # asks for more array work than that, leaves alone. The fixed files keep them.
    "tree-at-batch/bad_chain": {("JL001", 29)},
    "tree-at-batch/bad_renamed_chain": {("JL001", 19)},
}
# What a run finds in a .fixed.py: what the static rules find there too. The missing warm-up of
# bad_benchmark_loop has no automatic fix (the static rule reports line 21 of the fixed file),
# and the missing-jit fix leaves bad_spellings' printing loop as it was (now line 41).
FIXED_RUNS = {
    "unsynced-timing/bad_benchmark_loop": {("JL006", 21)},
    "missing-jit/bad_spellings": {("JL005", 41)},
    "tree-at-batch/bad_chain": {("JL001", 29)},
    "tree-at-batch/bad_renamed_chain": {("JL001", 22)},
    # The merged reset still runs once per step of `fit`'s loop: a hundred `tree_at` calls in
    # one call of `fit`, which a run cannot tell from a loop of updates to batch.
    "tree-at-batch/bad_attribute_target": {("JL003", 16)},
}
# Not run: missing-jit/bad_extraction_loop. Its three batches are too few calls for a run to call
# extract_activations a loop (5, as for host waits and filter_jit calls; Block.__call__'s twelve
# calls belong to them: test_eager_function_called_in_a_loop_is_jl001), and its np.asarray of
# activations the eager forward is still computing may wait: a JL005 at line 41, which the static
# rule, seeing a loop over a dict of two layers, leaves alone.
# Slow: nearly all of their time is compiling (random initialisers, an adam step, attention), which
# no smaller size or fewer steps would shorten; their bad and fixed runs share one worker, and so
# jax's in-memory cache of those compiles.
SLOW_RUNS = {
    "filter-jit-per-call/bad_mlp_training": {("JL002", 36), ("JL002", 40)},
    "filter-jit-per-call/bad_transformer_dropout": {("JL002", 78), ("JL002", 82)},
    "tree-at-batch/bad_layer_loop": {("JL003", 16)},
}
RUNS.update(SLOW_RUNS)
CODES = {
    "missing-jit": "JL001", "filter-jit-per-call": "JL002", "tree-at-batch": "JL003", "pad-final-batch": "JL004",
    "host-copy-in-loop": "JL005", "unsynced-timing": "JL006", "jit-in-loop": "JL007", "growing-shape-loop": "JL008",
}  # fmt: skip


def _profile_run(path: Path):  # type: ignore[no-untyped-def]
    """Profile the fixture's main(), or its import where the program is its module-level code:
    the report and what main() returned."""
    result = None
    with contextlib.redirect_stdout(io.StringIO()):
        with profile() as report:
            module = load_module(path)
            if hasattr(module, "main"):
                result = module.main()
    return report, result


def _profile_main(path: Path):  # type: ignore[no-untyped-def]
    return _profile_run(path)[0]


def _expected_lines(path: Path) -> set[tuple[str, int]]:
    marks = set()
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        for slug in re.findall(r"# expect: ([\w-]+)", line):
            if slug in CODES:
                marks.add((CODES[slug], number))
    return marks


def _cases(cases):  # type: ignore[no-untyped-def]
    return [pytest.param(c, marks=pytest.mark.xdist_group("run-slow-fixtures")) if c in SLOW_RUNS else c for c in sorted(cases)]


@pytest.mark.parametrize("case", _cases(RUNS))
def test_bad_fixture_run_reports_its_code_at_its_lines(case: str) -> None:
    path = FIXTURES / f"{case}.py"
    report = _profile_main(path)
    found = {(f.code, f.line) for f in report.findings if f.path == str(path)}
    assert all(f.path == str(path) for f in report.findings), report.findings
    assert RUNS[case] <= _expected_lines(path), "a finding on a line the static rule does not mark"
    assert found == RUNS[case] | RUN_ONLY.get(case, set())
    assert sum(f.seconds for f in report.findings) <= report.wall_seconds
    assert all(f.seconds >= 0 and f.count >= 1 for f in report.findings)


@pytest.mark.parametrize("case", _cases(c for c in RUNS if (FIXTURES / f"{c}.fixed.py").is_file()))
def test_fixed_fixture_run_reports_nothing(case: str) -> None:
    report = _profile_main(FIXTURES / f"{case}.fixed.py")
    assert {(f.code, f.line) for f in report.findings} == FIXED_RUNS.get(case, set())


def _program(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "program.py"
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return path


def test_host_waits_on_running_device_work_are_jl005(tmp_path: Path) -> None:
    path = _program(tmp_path, """\
        import jax
        import jax.numpy as jnp
        import numpy as np

        @jax.jit
        def slow(x):
            for _ in range(30):
                x = jnp.tanh(x @ x) / 2
            return x

        def main():
            x = jnp.ones((256, 256))
            slow(x).block_until_ready()
            out = []
            for _ in range(8):
                out.append(np.asarray(slow(x)))  # line 16: waits for every call
            return jax.device_get([slow(x) for _ in range(8)])  # one wait for the list
        """)
    report = _profile_main(path)
    assert [(f.code, f.line) for f in report.findings] == [("JL005", 16)]
    finding = report.findings[0]
    assert finding.count == 8 and 0 < finding.seconds <= report.wall_seconds
    assert "np.asarray" in finding.message


def test_eager_function_called_in_a_loop_is_jl001(tmp_path: Path) -> None:
    path = _program(tmp_path, """\
        import equinox as eqx
        import jax
        import jax.numpy as jnp
        import numpy as np

        class Block(eqx.Module):
            weight: jax.Array

            def __call__(self, x):
                return jnp.tanh(x @ self.weight) + x

        def forward(blocks, x):  # line 12: the function to jit, not Block.__call__ it calls
            for block in blocks:
                x = block(x)
            return x.mean(axis=0)

        def log(x):  # waits for the host: jit cannot take it whole
            return float(jnp.sum(x * x) + jnp.max(x) - jnp.min(x))

        def init_blocks(key):  # setup, however often it runs
            return [Block(jax.random.normal(k, (4, 4)) / 4) for k in jax.random.split(key, 3)]

        def main():
            blocks = init_blocks(jax.random.PRNGKey(0))
            x = jnp.ones((2, 4))
            for _ in range(6):
                init_blocks(jax.random.PRNGKey(1))
                x = x + forward(blocks, x)
                log(x)
            for _ in range(4):  # too few calls to be a loop
                forward(blocks, x)
            return np.asarray(x)
        """)
    report = _profile_main(path)
    finding, logged = report.findings
    assert (logged.code, logged.line, logged.count) == ("JL005", 18, 6)  # log()'s float() waits for forward()
    assert (finding.code, finding.rule, finding.line, finding.count) == ("JL001", "missing-jit", 12, 10)
    assert finding.detail["ops"] >= 10 * 8 and 0 < finding.seconds <= report.wall_seconds
    assert finding.message.startswith("`forward` ran eagerly: called 10 times, it dispatched ")
    row = next(r for r in report.to_dict()["lines"] if r["line"] == 9)  # Block.__call__'s own ops
    assert row["eager_ops"] == 3 * 3 * 10 and row["eager_calls"] == 30


SLOW = textwrap.dedent("""\
    import time
    import timeit

    import jax
    import jax.numpy as jnp

    @jax.jit
    def slow(x):
        for _ in range(30):
            x = jnp.tanh(x @ x) / 2
        return x

    """)


def test_clock_read_while_device_work_runs_is_jl006(tmp_path: Path) -> None:
    path = _program(tmp_path, SLOW + textwrap.dedent("""\
        def main():
            x = jnp.ones((256, 256))
            slow(x).block_until_ready()
            y = slow(x)
            start = time.perf_counter()  # y still running, but this read starts an interval
            z = slow(x)
            elapsed = time.perf_counter() - start  # line 19: z still running
            jax.block_until_ready((y, z))
            times = timeit.repeat(lambda: slow(x), number=1, repeat=3)  # line 21
            begin = time.perf_counter_ns()
            jax.block_until_ready(slow(x))
            waited = time.perf_counter_ns() - begin  # waited for: no finding
            return elapsed, times, waited
        """))
    report, (elapsed, times, waited) = _profile_run(path)
    assert [(f.code, f.rule, f.line) for f in report.findings] == [("JL006", "unsynced-timing", 19), ("JL006", "unsynced-timing", 21)]
    at19, at21 = report.findings
    assert (at19.count, at21.count) == (1, 3)
    assert 0 < at19.seconds and sum(f.seconds for f in report.findings) <= report.wall_seconds
    assert "with device work it had dispatched not waited for (1 array dispatched in it" in at19.message
    # What the program got are its clock's values, as plain numbers once used.
    assert type(elapsed) is float and type(waited) is int and all(type(t) is float for t in times)
    row = next(r for r in report.to_dict()["lines"] if r["line"] == 19)
    assert row["timer_reads_running"] == 1 and row["timer_gap_seconds"] == at19.seconds


def test_clock_read_after_waiting_is_no_jl006(tmp_path: Path) -> None:
    import pickle
    import time

    path = _program(tmp_path, SLOW + textwrap.dedent("""\
        def main():
            x = jnp.ones((256, 256))
            slow(x).block_until_ready()
            y = slow(x)
            stamp = time.perf_counter()  # y still running: this value remembers the read
            start = time.perf_counter()
            jax.block_until_ready(slow(x))
            timeit.Timer(stmt=lambda: slow(x).block_until_ready(), timer=time.perf_counter).timeit(number=1)
            return stamp, time.perf_counter() - start, time.time()
        """))
    report, (stamp, elapsed, now) = _profile_run(path)
    assert report.findings == []
    # Every read from the program's lines remembers where the program stood (a float subclass),
    # and is a plain number once used or pickled.
    assert isinstance(stamp, float) and pickle.loads(pickle.dumps(stamp)) == stamp
    assert type(pickle.loads(pickle.dumps(stamp))) is float and type(stamp + 1) is float
    assert type(elapsed) is float and isinstance(now, float) and abs(now - time.time()) < 60
    assert time.perf_counter.__module__ == "time"  # restored


def test_finished_work_still_counts_as_not_waited_for(tmp_path: Path) -> None:
    """The findings do not depend on how fast the device is: here every result is ready before
    Python asks for it (polled with `is_ready()`, which is no wait), and the copies in the loop
    and the timed interval are reported all the same; what the program waited for is not."""
    path = _program(tmp_path, """\
        import time

        import jax
        import jax.numpy as jnp

        @jax.jit
        def step(x):
            return x * 2 + 1

        def finish(x):
            while not x.is_ready():
                time.sleep(0.001)
            time.sleep(0.001)
            return x

        def main():
            x = jnp.ones(4)
            step(x).block_until_ready()
            out = []
            for _ in range(6):
                y = finish(step(x))
                out.append(float(y[0]))  # line 22: converts this iteration's work
                out.append(float(y[1]))  # line 23: y was waited for on line 22
            start = time.perf_counter()
            y = finish(step(x))
            elapsed = time.perf_counter() - start  # line 26: y was never waited for
            start = time.perf_counter()
            y = step(x).block_until_ready()
            waited = time.perf_counter() - start
            return out, elapsed, waited
        """)
    report = _profile_main(path)
    assert [(f.code, f.line, f.count) for f in report.findings] == [("JL005", 22, 6), ("JL006", 26, 1)]
    assert report.findings[1].detail["unsynced"] >= 1
    row = next(r for r in report.to_dict()["lines"] if r["line"] == 23)
    assert row["host_syncs"] == 6 and row["host_waits"] == 0


def test_clock_reads_during_a_garbage_collection_are_left_alone() -> None:
    """A finalizer or gc callback reading the clock must not make the profile ask jax for its
    arrays in the middle of a collection (that crashed the interpreter)."""
    import gc
    import time

    import jax.numpy as jnp

    reads: list[float] = []

    def on_gc(phase: str, info: dict) -> None:  # type: ignore[type-arg]
        reads.append(time.perf_counter())

    gc.callbacks.append(on_gc)
    try:
        with profile() as report:
            xs = [jnp.ones(4) * i for i in range(50)]
            gc.collect()
            del xs
    finally:
        gc.callbacks.remove(on_gc)
    assert reads and report.findings == []
    assert all(type(r) is float for r in reads)


def test_general_recompile_names_what_changed(tmp_path: Path) -> None:
    path = _program(tmp_path, """\
        import functools
        import jax
        import jax.numpy as jnp

        @functools.partial(jax.jit, static_argnums=1)
        def scale(x, k):
            return x * k

        def main():
            x = jnp.ones(3)
            return [scale(x, k) for k in range(4)]  # line 11: one compile per k
        """)
    report = _profile_main(path)
    assert [(f.code, f.rule, f.line, f.count) for f in report.findings] == [("JL100", "recompile", 11, 3)]
    assert "`scale` was compiled 4 times" in report.findings[0].message
    assert "Static" in report.findings[0].message or "static" in report.findings[0].message


def test_summary_and_dict(tmp_path: Path) -> None:
    report = _profile_main(FIXTURES / "pad-final-batch/bad_ragged_loss.py")
    text = report.summary()
    assert text.startswith("jaxlint run: ") and "compiling" in text and "top lines by cost" in text
    assert "bad_ragged_loss.py:21" in text
    data = report.to_dict()
    assert data["device"]["platform"] == "cpu"
    assert data["compiles"] >= 2 and 0 < data["compile_seconds"] <= data["wall_seconds"]
    assert [f["code"] for f in data["findings"]] == ["JL004"]
    assert any(r["line"] == 21 and r["compiles"] >= 2 for r in data["lines"])  # + eager ops not yet cached
    json.dumps(data)


def test_profile_restores_what_it_wrapped() -> None:
    import equinox as eqx
    import equinox._jit as eqx_jit
    import jax

    from jax._src.array import ArrayImpl

    before = (jax.jit, eqx.filter_jit, eqx.tree_at, eqx_jit._call, eqx_jit._preprocess, eqx_jit._postprocess,
              jax.block_until_ready, ArrayImpl.block_until_ready)  # fmt: skip
    with pytest.raises(ValueError):
        with profile():
            assert jax.jit is not before[0] and eqx.tree_at is not before[2]
            assert jax.block_until_ready is not before[6] and ArrayImpl.block_until_ready is not before[7]
            raise ValueError
    after = (jax.jit, eqx.filter_jit, eqx.tree_at, eqx_jit._call, eqx_jit._preprocess, eqx_jit._postprocess,
             jax.block_until_ready, ArrayImpl.block_until_ready)  # fmt: skip
    assert after == before
    p = profile()
    with p:
        pass
    with pytest.raises(RuntimeError):
        p.__enter__()


def test_profile_docstring_example(run_doc_examples) -> None:  # type: ignore[no-untyped-def]
    run_doc_examples(profile)


# -- jaxlint run ------------------------------------------------------------------------------
RAGGED = ("pad-final-batch", "bad_ragged_loss")


def _ragged_script(tmp_path: Path) -> Path:
    """The ragged-batch fixture as a script (fixtures define main() and no __main__ block)."""
    source = (FIXTURES / RAGGED[0] / f"{RAGGED[1]}.py").read_text(encoding="utf-8")
    path = tmp_path / "ragged.py"
    path.write_text(source + "\n\nif __name__ == '__main__':\n    print('total', float(main()))\n", encoding="utf-8")
    return path


def test_run_reports_to_stderr_and_keeps_the_program_stdout(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    script = _ragged_script(tmp_path)
    result = run_cli("run", "--", "python", script, "extra-arg")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("total ")
    assert "JL004" not in result.stdout
    assert "ragged.py:21:" in result.stderr and "JL004 [pad-final-batch]" in result.stderr
    assert "jaxlint run: " in result.stderr and "top lines by cost" in result.stderr


def test_run_json_document_to_a_file(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    script = _ragged_script(tmp_path)
    result = run_cli("run", "--output-format", "json", "-o", "run.json", "--", "python", script)
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    doc = json.loads((tmp_path / "run.json").read_text(encoding="utf-8"))
    assert doc["jaxlint_run"] == 1 and doc["exit_code"] == 0 and doc["device"]["platform"] == "cpu"
    [finding] = doc["findings"]
    assert (finding["path"], finding["line"], finding["code"], finding["rule"]) == ("ragged.py", 21, "JL004", "pad-final-batch")
    assert finding["measured"]["count"] == 1 and 0 < finding["measured"]["seconds"] <= doc["wall_seconds"]
    assert any(row["path"] == "ragged.py" and row["line"] == 21 and row["compiles"] >= 2 for row in doc["lines"])


@pytest.mark.parametrize("output_format", ["sarif", "github", "jsonl", "concise"])
def test_run_other_formats(run_cli, tmp_path: Path, output_format: str) -> None:  # type: ignore[no-untyped-def]
    result = run_cli("run", "--output-format", output_format, "--", _ragged_script(tmp_path))
    assert result.exit_code == 0, result.output
    if output_format == "sarif":
        [run] = json.loads(result.stderr)["runs"]
        assert [(r["ruleId"], r["locations"][0]["physicalLocation"]["region"]["startLine"]) for r in run["results"]] == [("JL004", 21)]
    elif output_format == "github":
        assert result.stderr.startswith("::warning file=ragged.py,line=21,")
    elif output_format == "jsonl":
        assert json.loads(result.stderr.splitlines()[0])["code"] == "JL004"
    else:
        assert result.stderr.startswith("ragged.py:21:")


def test_run_passes_exit_code_and_traceback_through(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "exits.py").write_text("import sys\nprint('hi')\nsys.exit(3)\n", encoding="utf-8")
    result = run_cli("run", "--", "python", "exits.py")
    assert (result.exit_code, result.stdout) == (3, "hi\n")
    assert "No findings in the run." in result.stderr
    (tmp_path / "fails.py").write_text("def f():\n    raise ValueError('boom')\n\nf()\n", encoding="utf-8")
    result = run_cli("run", "--", "python", "fails.py")
    assert result.exit_code == 1
    assert "Traceback (most recent call last):" in result.stderr
    assert 'fails.py", line 2, in f' in result.stderr and "ValueError: boom" in result.stderr
    assert "_run.py" not in result.stderr and "runpy" not in result.stderr
    assert "jaxlint run: " in result.stderr  # the report is written when the program fails


def test_run_module_and_arguments(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "mod.py").write_text("import sys\nprint(sys.argv)\n", encoding="utf-8")
    result = run_cli("run", "--", "python", "-m", "mod", "--flag", "x")
    assert result.exit_code == 0, result.output
    assert result.stdout.endswith("'--flag', 'x']\n")


def test_run_max_seconds_stops_and_reports(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "forever.py").write_text("import time\nwhile True:\n    time.sleep(0.01)\n", encoding="utf-8")
    result = run_cli("run", "--max-seconds", "0.3", "--", "python", "forever.py")
    assert result.exit_code == 0, result.output
    assert "stopped the program after --max-seconds" in result.stderr
    assert "Traceback" not in result.stderr


def test_run_max_seconds_stops_where_sigint_is_ignored(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A parent (a test worker, a shell with `trap '' INT`) may ignore SIGINT, and then
    `_thread.interrupt_main` does nothing: the run must still stop at --max-seconds."""
    import signal

    (tmp_path / "long.py").write_text("import time\nfor _ in range(1000):\n    time.sleep(0.01)\n", encoding="utf-8")
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        result = run_cli("run", "--max-seconds", "0.3", "--", "python", "long.py")
    finally:
        signal.signal(signal.SIGINT, previous)
    assert result.exit_code == 0, result.output
    assert "stopped the program after --max-seconds" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run"], "Missing argument"),
        (["run", "--", "python"], "nothing to run"),
        (["run", "--", "python", "missing.py"], "missing.py: no such file"),
        (["run", "--", "python", "-c", "1"], "unsupported python option '-c'"),
        (["run", "--max-seconds", "0", "--", "x.py"], "--max-seconds"),
    ],
)
def test_run_usage_errors(run_cli, args: list[str], message: str) -> None:  # type: ignore[no-untyped-def]
    result = run_cli(*args)
    assert result.exit_code == 2
    assert message in result.stderr and "Traceback" not in result.stderr


# -- jaxlint check --evidence -----------------------------------------------------------------
def test_check_with_evidence_marks_and_adds(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    script = _ragged_script(tmp_path)
    # Batches cut by np.split: the static rule cannot tell the last one is smaller; the run can.
    source = script.read_text(encoding="utf-8").replace(
        "if __name__ == '__main__':",
        "if __name__ == '__main__':\n"
        "    xs = np.ones((100, 8), np.float32)\n"
        "    for batch in np.split(xs, [32, 64, 96]):\n"
        "        loss_sum(np.ones(8, np.float32), batch, batch[:, 0])  # the split line\n",
    )
    script.write_text(source, encoding="utf-8")
    split_line = next(i for i, line in enumerate(source.splitlines(), 1) if "# the split line" in line)
    static = json.loads(run_cli("check", "--output-format", "json", "ragged.py").stdout)
    assert [(f["line"], f["code"]) for f in static] == [(21, "JL004")]

    assert run_cli("run", "--output-format", "json", "-o", "run.json", "--", script).exit_code == 0
    doc = json.loads((tmp_path / "run.json").read_text(encoding="utf-8"))
    assert {(f["line"], f["code"]) for f in doc["findings"]} == {(21, "JL004"), (split_line, "JL004")}

    result = run_cli("check", "--evidence", "run.json", "--output-format", "json", "ragged.py")
    assert result.exit_code == 1, result.output
    found = {(f["line"], f["code"]): f for f in json.loads(result.stdout)}
    assert set(found) == {(21, "JL004"), (split_line, "JL004")}
    fact = found[(21, "JL004")]["evidence"][-1]  # after the static rule's own facts
    assert fact.startswith("measured in the run (cpu): ") and "compiled a second time for a smaller batch" in fact
    assert "padded_batches" not in fact  # the measurement, not the advice again
    added = found[(split_line, "JL004")]
    assert added["evidence"][0] == "found by `jaxlint run` (run.json), not by the static rules"
    assert added["message"].startswith("`loss_sum` was compiled a second time for a smaller batch (`x`: [4, 8] after [32, 8])")

    text = run_cli("check", "--evidence", "run.json", "ragged.py").stdout
    assert "= why: measured in the run (cpu): " in text
    ignored = run_cli("check", "--evidence", "run.json", "--ignore", "JL004", "--output-format", "json", "ragged.py")
    assert json.loads(ignored.stdout) == []


def test_check_evidence_says_when_a_flagged_line_cost_nothing(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "prog.py").write_text(
        textwrap.dedent("""\
            import jax
            import jax.numpy as jnp


            @jax.jit
            def step(x):
                return x + 1


            x = jnp.zeros(3)
            for _ in range(150):
                x = step(x)
                print(float(x[0]))
            """),
        encoding="utf-8",
    )
    run = tmp_path / "run.json"
    run.write_text(json.dumps({
        "jaxlint_run": 1, "wall_seconds": 1.0, "device": {"device_kind": "cpu"}, "findings": [],
        "lines": [{"path": "prog.py", "file": str(tmp_path / "prog.py"), "line": 13, "seconds": 0.0,
                   "host_syncs": 150, "host_waits": 0, "host_wait_seconds": 0.0}],
    }), encoding="utf-8")  # fmt: skip
    result = run_cli("check", "--evidence", run, "--output-format", "json", "prog.py")
    [finding] = [f for f in json.loads(result.stdout) if f["code"] == "JL005"]
    assert finding["line"] == 13
    assert any("converted device arrays here 150 times and none of them waited" in e for e in finding["evidence"])


def test_check_evidence_with_eager_dispatch_and_clock_reads(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """End to end: the run's JL001 and JL006 join `check`'s findings."""
    source = (FIXTURES / "missing-jit/bad_decode_loop.py").read_text(encoding="utf-8") + SLOW.replace(
        "import time\nimport timeit\n\nimport jax\nimport jax.numpy as jnp\n", ""
    ) + textwrap.dedent("""\


        if __name__ == "__main__":
            import time

            main()
            x = jnp.ones((256, 256))
            slow(x).block_until_ready()
            start = time.perf_counter()
            y = slow(x)
            print("took", time.perf_counter() - start)  # the timed line
        """)
    (tmp_path / "prog.py").write_text(source, encoding="utf-8")
    timed = next(i for i, line in enumerate(source.splitlines(), 1) if "# the timed line" in line)
    static = {(f["line"], f["code"]) for f in json.loads(run_cli("check", "--output-format", "json", "prog.py").stdout)}
    assert (timed, "JL006") in static

    assert run_cli("run", "--output-format", "json", "-o", "run.json", "--", "prog.py").exit_code == 0
    doc = json.loads((tmp_path / "run.json").read_text(encoding="utf-8"))
    assert {(f["line"], f["code"]) for f in doc["findings"]} == {(22, "JL001"), (timed, "JL006")}
    [decode] = [r for r in doc["lines"] if r["line"] == 22]
    assert decode["eager_calls"] == 6 and decode["eager_ops"] >= 6 * 5

    result = run_cli("check", "--evidence", "run.json", "--output-format", "json", "prog.py")
    found = {(f["line"], f["code"]): f for f in json.loads(result.stdout)}
    assert {(22, "JL001"), (timed, "JL006")} <= set(found)
    assert any(e.startswith("measured in the run (cpu): ") and "not waited for" in e for e in found[(timed, "JL006")]["evidence"])
    assert any(e.startswith("measured in the run (cpu): ") for e in found[(22, "JL001")]["evidence"])


@pytest.mark.parametrize(
    ("case", "measured"),
    [
        ("host-copy-in-loop/bad_scan_over_device_array", {20: ("JL005", "91 of them computed since the program last waited")}),
        ("unsynced-timing/bad_benchmark_loop", {
            21: ("JL006", "`decode_step` was first called here inside the interval timed by the clock read at line 22"),
            22: ("JL006", "1 array dispatched in it and not waited for"),
        }),
    ],
)
def test_check_evidence_with_a_runs_host_waits_and_timing(run_cli, tmp_path: Path, case: str, measured: dict) -> None:  # type: ignore[no-untyped-def, type-arg]
    """End to end on the fixtures: each static JL005/JL006 gets what the run measured there."""
    source = (FIXTURES / f"{case}.py").read_text(encoding="utf-8") + '\n\nif __name__ == "__main__":\n    main()\n'
    (tmp_path / "prog.py").write_text(source, encoding="utf-8")
    assert run_cli("run", "--output-format", "json", "-o", "run.json", "--", "prog.py").exit_code == 0
    result = run_cli("check", "--evidence", "run.json", "--output-format", "json", "prog.py")
    found = {f["line"]: f for f in json.loads(result.stdout)}
    assert set(found) == set(measured)
    for line, (code, fact) in measured.items():
        assert found[line]["code"] == code
        [evidence] = [e for e in found[line]["evidence"] if e.startswith("measured in the run (cpu): ")]
        assert fact in evidence, evidence


def test_check_evidence_says_when_eager_calls_and_clock_reads_cost_nothing(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "prog.py").write_text("x = 1\n" * 20, encoding="utf-8")
    run = tmp_path / "run.json"
    run.write_text(json.dumps({
        "jaxlint_run": 1, "wall_seconds": 1.0, "device": {"device_kind": "cpu"}, "findings": [],
        "lines": [
            {"path": "prog.py", "line": 3, "seconds": 0.001, "eager_calls": 8, "eager_ops": 8, "eager_seconds": 0.001},
            {"path": "prog.py", "line": 9, "seconds": 0.0, "timer_reads": 3},
        ],
    }), encoding="utf-8")  # fmt: skip
    from jaxlint._engine import Finding
    from jaxlint._evidence import apply_evidence, load_evidence

    static = [Finding("prog.py", 3, 1, 3, 5, "JL001", "missing-jit", "m"), Finding("prog.py", 9, 1, 9, 5, "JL006", "unsynced-timing", "m")]
    out = apply_evidence(static, load_evidence(str(run)), [str(tmp_path / "prog.py")], {"JL001", "JL006"})
    facts = {f.code: f.evidence[-1] for f in out}
    assert facts["JL001"].startswith("the run called this function 8 times; from its own lines it dispatched 8 JAX operations eagerly (1 per call)")
    assert facts["JL006"].startswith("the run read the clock here 3 time(s), and no interval ending at them left device work")


@pytest.mark.parametrize(
    ("content", "message"),
    [(None, "cannot read"), ("{", "not JSON"), ("[]", "not a `jaxlint run` JSON report"), ('{"jaxlint_run": 1}', "malformed")],
)
def test_check_evidence_errors(run_cli, tmp_path: Path, content: str | None, message: str) -> None:  # type: ignore[no-untyped-def]
    if content is not None:
        (tmp_path / "run.json").write_text(content, encoding="utf-8")
    (tmp_path / "a.py").write_text("x = 1\n", encoding="utf-8")
    result = run_cli("check", "--evidence", "run.json", "a.py")
    assert result.exit_code == 2 and message in result.stderr and "Traceback" not in result.stderr


def test_sarif_describes_the_run_only_code() -> None:
    from jaxlint._engine import Finding
    from jaxlint._report import render

    stream = io.StringIO()
    finding = Finding("a.py", 3, 1, 3, 9, "JL100", "recompile", "`f` was compiled 4 times")
    render([finding], "sarif", stream, color=False)
    [run] = json.loads(stream.getvalue())["runs"]
    [result] = run["results"]
    assert run["tool"]["driver"]["rules"][result["ruleIndex"]]["id"] == "JL100"


# -- the shipped examples ---------------------------------------------------------------------
EXAMPLES = ROOT / "examples"
EXAMPLE_RUNS = {
    # JL001 at 24: reset_head's initialisers also run eagerly on each of the 1000 steps.
    "freeze_head": {("JL001", 24), ("JL003", 26)},
    # JL001 at 44: the projection's SVDs run eagerly on each of the 100 steps; the static rule does
    # not see `low_rank` called in a loop, since the plan calls it through a dict (`transform(layer)`).
    "low_rank": {("JL001", 44), ("JL003", 48)},
    # JL006 at 58: train_step's first call, and compile, inside the interval timed at 62
    "train_loop": {("JL002", 58), ("JL004", 58), ("JL004", 72), ("JL005", 72), ("JL006", 58)},
    "generate": {("JL001", 33), ("JL007", 53), ("JL008", 42), ("JL005", 44), ("JL006", 64)},
}


@pytest.mark.parametrize("name", sorted(EXAMPLE_RUNS))
def test_examples_run_shows_each_kind_of_finding(name: str) -> None:
    pytest.importorskip("optax")
    path = EXAMPLES / f"{name}.py"
    report = _profile_main(path)
    expected = EXAMPLE_RUNS[name]
    found = {(f.code, f.line) for f in report.findings}
    assert all(f.path == str(path) for f in report.findings)
    assert found == expected
    assert sum(f.seconds for f in report.findings) <= report.wall_seconds


def test_profile_keeps_its_cache_miss_explanations_out_of_the_program_logging() -> None:
    import logging

    import jax
    import jax.numpy as jnp

    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logging.getLogger().addHandler(handler)
    try:
        f = jax.jit(lambda x: x - 1)
        with profile() as report:
            for n in (2, 3, 4):
                f(jnp.ones(n))
    finally:
        logging.getLogger().removeHandler(handler)
    assert [f.code for f in report.findings] == ["JL008"]  # the explanations were read ...
    assert not [r for r in records if "CACHE MISS" in r.getMessage()]  # ... and not passed on


@pytest.mark.parametrize(
    ("count", "pending", "waited", "reported"),
    [
        (8, 6, 0.001, True),  # most conversions waited
        (1000, 30, 0.5, True),  # few did, but half a second of a 10 s run
        (1000, 30, 0.05, False),  # few did, briefly: the values were mostly ready
        (4, 4, 1.0, False),  # too few reads to call it a loop
        (6, 2, 1.0, False),  # two waits, however long: the first reads of arrays just computed
    ],
)
def test_host_wait_threshold(tmp_path: Path, count: int, pending: int, waited: float, reported: bool) -> None:
    from jaxlint.runtime._profile import SyncSite

    run = profile()
    run.syncs[(str(tmp_path / "a.py"), 3)] = SyncSite(count, kinds={"float()": count}, waits=pending, wait_seconds=waited)
    run.wall = 10.0
    run.report._finish()
    assert [(f.code, f.count) for f in run.report.findings] == ([("JL005", pending)] if reported else [])


def test_waits_inside_to_host_are_not_a_loop_of_waits(tmp_path: Path) -> None:
    """`to_host` after the loop is JL005's fix: the one batched wait it leaves is no finding,
    however many of its copies found the device still computing (a loaded machine)."""
    from jaxlint.runtime._host_sync import batched_transfer, in_batched_transfer
    from jaxlint.runtime._profile import SyncSite

    assert not in_batched_transfer()
    with batched_transfer():
        assert in_batched_transfer()
    assert not in_batched_transfer()
    run = profile()
    run.syncs[(str(tmp_path / "a.py"), 3)] = SyncSite(8, kinds={"np.asarray": 8}, waits=6, wait_seconds=0.5, batched=6)
    run.wall = 1.0
    run.report._finish()
    assert run.report.findings == []


def test_run_reads_the_source_line_of_this_directorys_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two runs in one process of a `prog.py` in two directories (the Python API, tests): the
    second run's findings are shown with its own source lines, not the first file's."""
    from jaxlint._run import _source_line

    for name, text in (("one", "x = 1\n"), ("two", "\n\ny = 2\n")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "prog.py").write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path / "one")
    assert _source_line("prog.py", 1) == "x = 1"
    monkeypatch.chdir(tmp_path / "two")
    assert _source_line("prog.py", 3) == "y = 2"
