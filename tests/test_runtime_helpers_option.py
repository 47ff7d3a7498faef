"""`runtime-helpers = false` in `[tool.jaxlint]`: no rule's fix imports `jaxlint.runtime`; each
rule writes plain JAX/equinox or offers no fix, and its documentation says which."""

from __future__ import annotations

from pathlib import Path

import pytest

from jaxlint._config import ConfigError, load_settings
from jaxlint._engine import analyze
from jaxlint._fixer import fix_source
from jaxlint._registry import all_rules, get_rule


FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
BAD = sorted(
    path
    for path in FIXTURES.glob("*/bad_*.py")
    if not path.name.endswith(".fixed.py") and "jaxlint" not in path.read_text(encoding="utf-8")
)


def _no_helpers() -> dict[str, dict[str, object]]:
    return {rule.SLUG: {"runtime-helpers": False} for rule in all_rules()}


def _rule(path: Path):  # type: ignore[no-untyped-def]
    """The rule a fixture is for (its folder)."""
    return get_rule(path.parent.name)


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.SLUG)
def test_every_rule_documents_what_the_option_does(rule) -> None:  # type: ignore[no-untyped-def]
    assert "runtime-helpers" in rule.docs()


@pytest.mark.parametrize("path", BAD, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_fix_imports_jaxlint_when_helpers_are_off(path: Path) -> None:
    data, rules = path.read_bytes(), [_rule(path)]
    outcome = fix_source(str(path), data, rules, _no_helpers(), unsafe=True)
    assert outcome.error is None
    assert b"jaxlint" not in outcome.fixed
    # The findings whose fix needed a helper are still reported, without a fix.
    found = analyze(str(path), data, rules, _no_helpers()).result.findings
    assert {(f.line, f.code) for f in found} == {(f.line, f.code) for f in analyze(str(path), data, rules).result.findings}


def test_some_fixes_do_use_the_helpers_by_default() -> None:
    """The test above is not vacuous: with the default, fixes import `jaxlint.runtime`."""
    helped = {"filter-jit-per-call", "host-copy-in-loop", "pad-final-batch", "tree-at-batch"}
    importing = {
        p.parent.name
        for p in BAD
        if p.parent.name in helped and b"jaxlint.runtime" in fix_source(str(p), p.read_bytes(), [_rule(p)], unsafe=True).fixed
    }
    assert importing == helped


def test_the_option_reaches_every_rule_and_a_rule_table_can_override_it(tmp_path: Path) -> None:
    config = tmp_path / "pyproject.toml"
    config.write_text("[tool.jaxlint]\nruntime-helpers = false\n[tool.jaxlint.tree-at-batch]\nruntime-helpers = true\n")
    options = load_settings(config).rule_options
    assert options["host-copy-in-loop"] == {"runtime-helpers": False}
    assert options["tree-at-batch"] == {"runtime-helpers": True}


def test_a_non_boolean_is_a_config_error(tmp_path: Path) -> None:
    config = tmp_path / "pyproject.toml"
    config.write_text('[tool.jaxlint]\nruntime-helpers = "no"\n')
    with pytest.raises(ConfigError, match="'runtime-helpers' must be true or false"):
        load_settings(config)


def test_the_option_from_the_command_line_config(tmp_path: Path, run_cli) -> None:
    loop = "import equinox as eqx\n\n\ndef f(m, plan):\n    for w, v in plan:\n        m = eqx.tree_at(w, m, v)\n    return m\n"
    (tmp_path / "pyproject.toml").write_text("[tool.jaxlint]\nruntime-helpers = false\n")
    (tmp_path / "m.py").write_text(loop)
    result = run_cli("fix", "--unsafe-fixes", "--diff", "m.py")
    assert result.exit_code == 1
    assert "jaxlint" not in result.stdout.replace("a/m.py", "").replace("b/m.py", "")
    assert "+        m = eqx.tree_at(\n" in result.stdout  # one plain batched call after the loop
