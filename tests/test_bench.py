"""`jaxlint bench`: runnable fixture pairs timed before and after their fix."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from jaxlint._bench import JAX_MISSING, discover


def test_discovers_runnable_pairs_only() -> None:
    pairs = {(p.rule, p.case) for p in discover(["unsynced-timing"])}
    assert ("unsynced-timing", "bad_epoch_timing") in pairs
    assert ("unsynced-timing", "bad_spellings") not in pairs  # no main()
    for pair in discover():
        assert pair.after.name == pair.case + ".fixed.py" and pair.after.is_file()
        assert pair.before.name == pair.case + ".py"


def test_bench_json_on_cpu(run_cli) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("jax")
    # One rule with one small runnable fixture: cold-start compiles are most of the cost.
    result = run_cli("bench", "--rule", "pad-final-batch", "--json", "--trials", "3")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["trials"] == 3
    assert document["device"]["platform"] == "cpu"
    rows = document["rows"]
    assert {r["case"] for r in rows} == {p.case for p in discover(["pad-final-batch"])}
    for row in rows:
        assert "error" not in row, row
        assert row["rule"] == "pad-final-batch"
        assert row["equal"] is True
        assert row["trials"] == 3
        assert row["before"] > 0 and row["after"] > 0
        assert row["speedup"] == pytest.approx(row["before"] / row["after"])
        assert row["compiles_before"] >= 1 and row["compiles_after"] >= 1
        assert row["device_kind"]


def test_bench_table(run_cli) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("jax")
    result = run_cli("bench", "--rule", "host-copy-in-loop", "--trials", "2")
    assert result.exit_code == 0, result.output
    assert "bad_extraction" in result.stdout and "speed-up" in result.stdout


def test_unknown_rule_is_a_usage_error(run_cli) -> None:  # type: ignore[no-untyped-def]
    result = run_cli("bench", "--rule", "no-such-rule")
    assert result.exit_code == 2
    assert "unknown rule 'no-such-rule'" in result.stderr


def test_missing_jax_is_one_clear_line() -> None:
    # `sys.modules["jax"] = None` makes every `import jax` raise ImportError.
    script = textwrap.dedent(
        """
        import sys
        sys.modules["jax"] = None
        from jaxlint._cli import main
        main(["bench", "--rule", "tree-at-batch"])
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert done.stderr.strip().splitlines() == [f"jaxlint: error: {JAX_MISSING}"]
    assert 'pip install jax jaxlib equinox (the runtime extra)' in done.stderr


def test_the_bench_module_does_not_import_jax() -> None:
    script = "import sys, jaxlint._bench, jaxlint._cli; assert 'jax' not in sys.modules, 'jax imported'"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
