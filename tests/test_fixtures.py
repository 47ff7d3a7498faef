"""Tests generated from `fixtures/<slug>/`: adding a case is adding a file.

For every rule's folder:

- `bad_*.py`: the findings are exactly the lines marked `# expect: <slug>`;
- `ok_*.py`: no findings at all;
- `bad_*.fixed.py`: the golden output of `jaxlint fix --unsafe-fixes` on `bad_*.py`
  (required exactly when the rule offers a fix there); the fixed code parses, is a fixed
  point (fixing it again changes nothing) and has no fixable finding left;
- runnable pairs (`def main()`): both programs run on CPU JAX and return equal pytrees.

`pytest --update-fixtures` rewrites the goldens; review the diff like code.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import libcst as cst
import pytest

from jaxlint._bench import load_module
from jaxlint._engine import analyze
from jaxlint._fixer import fix_source
from jaxlint._registry import all_rules
from jaxlint._rule import Rule


FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
_EXPECT = re.compile(r"#\s*expect:\s*(?P<slugs>[\w\-]+(?:\s*,\s*[\w\-]+)*)")
# A fixture may set rule options: `# fixture-options: {"runtime-helpers": false}`.
_OPTIONS = re.compile(r"^#\s*fixture-options:\s*(?P<json>\{.*\})\s*$", re.M)


def _options(path: Path, slug: str) -> dict[str, dict[str, object]]:
    match = _OPTIONS.search(path.read_text(encoding="utf-8"))
    return {slug: json.loads(match.group("json"))} if match else {}


def _rule(slug: str) -> type[Rule]:
    return {r.SLUG: r for r in all_rules()}[slug]


def _cases(prefix: str) -> list[tuple[str, Path]]:
    return [
        (folder.name, path)
        for folder in sorted(p for p in FIXTURES.iterdir() if p.is_dir() and not p.name.startswith("_"))
        for path in sorted(folder.glob(f"{prefix}*.py"))
        if not path.name.endswith(".fixed.py")
    ]


def _ids(cases: list[tuple[str, Path]]) -> list[str]:
    return [f"{slug}/{path.name}" for slug, path in cases]


BAD = _cases("bad_")
OK = _cases("ok_")
RUNNABLE = [(slug, path) for slug, path in BAD if re.search(r"^def main\(", path.read_text(), re.M)]


def _expected(path: Path, slug: str) -> list[tuple[int, str]]:
    expected = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        match = _EXPECT.search(line)
        if match:
            for marked in match.group("slugs").split(","):
                expected.append((number, marked.strip()))
    return expected


def _findings(path: Path, rule: type[Rule], data: bytes | None = None) -> list[tuple[int, str]]:
    data = path.read_bytes() if data is None else data
    result = analyze(str(path), data, [rule], _options(path, rule.SLUG)).result
    assert result.error is None, result.error
    return sorted((f.line, f.rule) for f in result.findings)


def test_every_fixture_folder_is_a_rule() -> None:
    slugs = {r.SLUG for r in all_rules()}
    folders = {p.name for p in FIXTURES.iterdir() if p.is_dir() and not p.name.startswith("_")}
    assert folders <= slugs, f"fixture folders without a rule: {folders - slugs}"
    assert slugs <= folders, f"rules without fixtures: {slugs - folders}"
    for slug in slugs:
        assert any((FIXTURES / slug).glob("bad_*.py")), f"{slug} has no bad_*.py"
        assert any((FIXTURES / slug).glob("ok_*.py")), f"{slug} has no ok_*.py traps"


@pytest.mark.parametrize(("slug", "path"), BAD, ids=_ids(BAD))
def test_bad_fixture_findings_match_markers(slug: str, path: Path) -> None:
    expected = _expected(path, slug)
    assert expected, f"{path.name} marks no expected finding"
    assert _findings(path, _rule(slug)) == sorted(expected)


@pytest.mark.parametrize(("slug", "path"), OK, ids=_ids(OK))
def test_ok_fixture_is_silent(slug: str, path: Path) -> None:
    assert not _expected(path, slug), "ok_ fixtures must not carry expect markers"
    assert _findings(path, _rule(slug)) == []


def _golden(path: Path) -> Path:
    return path.with_name(path.name[: -len(".py")] + ".fixed.py")


@pytest.mark.parametrize(("slug", "path"), BAD, ids=_ids(BAD))
def test_fix_matches_golden(slug: str, path: Path, request: pytest.FixtureRequest) -> None:
    rule = _rule(slug)
    outcome = fix_source(str(path), path.read_bytes(), [rule], _options(path, slug), unsafe=True)
    assert outcome.error is None, outcome.error
    golden = _golden(path)
    if request.config.getoption("--update-fixtures"):
        if outcome.changed:
            golden.write_bytes(outcome.fixed)
        elif golden.exists():
            golden.unlink()
    if not outcome.changed:
        assert not golden.exists(), f"{golden.name} exists but the rule fixes nothing here"
        return
    assert golden.exists(), f"missing {golden.name}; run pytest --update-fixtures"
    assert outcome.fixed == golden.read_bytes(), f"fix differs from {golden.name}"


@pytest.mark.parametrize(("slug", "path"), BAD, ids=_ids(BAD))
def test_fixed_output_is_a_fixed_point(slug: str, path: Path) -> None:
    rule = _rule(slug)
    golden = _golden(path)
    if not golden.exists():
        pytest.skip("no fix for this fixture")
    fixed = golden.read_bytes()
    cst.parse_module(fixed)
    again = fix_source(str(golden), fixed, [rule], _options(path, slug), unsafe=True)
    assert again.error is None, again.error
    assert again.fixed == fixed, "fixing the fixed file changed it again"
    assert all(f.fix is None for f in again.remaining), "a fixable finding is left"


def assert_trees_equal(before: object, after: object) -> None:
    import jax
    import numpy as np

    leaves_before, tree_before = jax.tree_util.tree_flatten(before)
    leaves_after, tree_after = jax.tree_util.tree_flatten(after)
    assert tree_before == tree_after, f"structures differ: {tree_before} vs {tree_after}"
    for a, b in zip(leaves_before, leaves_after):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(("slug", "path"), RUNNABLE, ids=_ids(RUNNABLE))
def test_fixed_program_computes_the_same(slug: str, path: Path) -> None:
    pytest.importorskip("jax")
    golden = _golden(path)
    if not golden.exists():
        pytest.skip("no fix for this fixture")
    before = load_module(path).main()
    after = load_module(golden).main()
    assert_trees_equal(before, after)


def _doc_blocks(rule: type[Rule]) -> tuple[str, str]:
    docs = rule.docs()
    example = docs.split("## Example", 1)[1]
    bad, good = example.split("Use instead:", 1)
    fence = re.compile(r"```python\n(.*?)```", re.S)
    return fence.search(bad).group(1), fence.search(good).group(1)  # type: ignore[union-attr]


@pytest.mark.parametrize("rule", all_rules(), ids=[r.SLUG for r in all_rules()])
def test_rule_docs_examples(rule: type[Rule]) -> None:
    docs = rule.docs()
    for heading in ("## What it does", "## Why is this bad?", "## Example", "Use instead:", "## Fix safety"):
        assert heading in docs, f"{rule.SLUG} docs lack {heading!r}"
    bad, good = _doc_blocks(rule)
    prelude = (
        "import time\nimport timeit\n\nimport equinox as eqx\nimport jax\nimport jax.numpy as jnp\n"
        "import numpy as np\n\n\ndef example(model, net, plan, encoder, head, params, batches):\n"
    )
    indent = lambda code: "".join(f"    {line}\n" if line else "\n" for line in code.splitlines())  # noqa: E731
    bad_findings = analyze("doc", (prelude + indent(bad)).encode(), [rule]).result.findings
    good_findings = analyze("doc", (prelude + indent(good)).encode(), [rule]).result.findings
    assert bad_findings, f"{rule.SLUG}: the docs' Example is not flagged"
    assert not good_findings, f"{rule.SLUG}: the docs' 'Use instead' is flagged: {good_findings}"


def test_codes_and_slugs_are_unique() -> None:
    rules = all_rules()
    assert len({r.CODE for r in rules}) == len(rules)
    assert len({r.SLUG for r in rules}) == len(rules)
    for rule in rules:
        assert re.fullmatch(r"JL\d{3}", rule.CODE)
        assert re.fullmatch(r"[a-z]+(-[a-z]+)*", rule.SLUG)
        module = rule.__module__.rsplit(".", 1)[-1]
        assert module == rule.SLUG.replace("-", "_"), "a rule's module is its slug in snake case"
