"""Suppression comments: `# noqa`, `# noqa: JL003`, `# jaxlint: ignore[...]`, and the
file-level `# jaxlint: ignore-file`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jaxlint import lint_source


LOOP = """\
import equinox as eqx


def f(model, plan):
    for name, layer in plan.items():
        model = eqx.tree_at(lambda m: getattr(m, name), model, layer){comment}
    return model

for batch in loader:
    model = f(model, batch)
"""

CHAIN = """\
import equinox as eqx


def g(model, enc, head):
    model = eqx.tree_at(lambda m: m.encoder, model, enc){comment}
    model = eqx.tree_at(lambda m: m.decoder.head, model, head)
    return model


for batch in loader:
    model = g(model, *batch)
"""

SUPPRESSING = [
    "  # noqa",
    "  # noqa: JL003",
    "  # noqa:JL003",
    "  # noqa: tree-at-batch",
    "  # noqa: E501, JL003",
    "  # noqa: E501,tree-at-batch",
    "  # NOQA: jl003",
    "  # NoQA",
    "  # jaxlint: ignore[tree-at-batch]",
    "  # jaxlint: ignore[JL003]",
    "  # jaxlint: ignore[missing-jit, tree-at-batch]",
    "  # jaxlint:ignore[ tree-at-batch ]",
    "  # jaxlint: ignore",
    "  # type: ignore  # noqa: JL003",
    "  # why this is fine  # jaxlint: ignore[tree-at-batch]",
]

NOT_SUPPRESSING = [
    "",
    "  # noqa: E501",
    "  # noqa: F401, E501",
    "  # noqa: JL001",
    "  # noqa: JL0031",
    "  # noqa: tree-at",
    "  # jaxlint: ignore[missing-jit]",
    "  # jaxlint: ignore[JL00]",
    "  # type: ignore",
    "  # jaxlint: ignore-file",  # file-level only on a line of its own
    "  # a comment that mentions noqa later: nothing",
]


def count(source: str) -> int:
    return len(lint_source(source))


def test_sources_are_flagged_without_comments() -> None:
    assert count(LOOP.format(comment="")) == 1
    assert count(CHAIN.format(comment="")) == 1


@pytest.mark.parametrize("comment", SUPPRESSING)
@pytest.mark.parametrize("template", [LOOP, CHAIN], ids=["loop", "chain"])
def test_comment_suppresses(template: str, comment: str) -> None:
    assert count(template.format(comment=comment)) == 0


@pytest.mark.parametrize("comment", NOT_SUPPRESSING)
@pytest.mark.parametrize("template", [LOOP, CHAIN], ids=["loop", "chain"])
def test_comment_does_not_suppress(template: str, comment: str) -> None:
    assert count(template.format(comment=comment)) == 1


def test_comment_on_another_line_does_not_suppress() -> None:
    source = LOOP.format(comment="").replace(
        "    for name", "    # noqa: JL003\n    for name"
    )
    assert count(source) == 1
    below = LOOP.format(comment="").replace("    return model", "    return model  # noqa")
    assert count(below) == 1


MULTILINE = """\
import equinox as eqx


def f(model, plan):
    for name, layer in plan.items():
        model = eqx.tree_at({first}
            lambda m: getattr(m, name),{middle}
            model,
            layer,
        ){last}
    return model


for batch in loader:
    model = f(model, batch)
"""


def test_multiline_call_is_reported_on_its_first_line() -> None:
    (finding,) = lint_source(MULTILINE.format(first="", middle="", last=""))
    assert (finding.line, finding.end_line) == (6, 10)


@pytest.mark.parametrize(
    ("where", "suppressed"),
    [("first", True), ("last", True), ("middle", False)],
)
@pytest.mark.parametrize("comment", ["  # noqa: JL003", "  # jaxlint: ignore[tree-at-batch]", "  # noqa"])
def test_multiline_call(where: str, suppressed: bool, comment: str) -> None:
    parts = {"first": "", "middle": "", "last": ""}
    parts[where] = comment
    assert count(MULTILINE.format(**parts)) == (0 if suppressed else 1)


@pytest.mark.parametrize(
    "header",
    [
        "# jaxlint: ignore-file\n",
        "#jaxlint:ignore-file\n",
        '"""A module."""\n# jaxlint: ignore-file  (generated code)\n',
    ],
)
def test_file_level_ignore(header: str) -> None:
    assert count(header + LOOP.format(comment="") + CHAIN.format(comment="")) == 0


def test_file_level_ignore_anywhere_on_its_own_line() -> None:
    source = LOOP.format(comment="") + "\n# jaxlint: ignore-file\n"
    assert count(source) == 0


def test_file_level_ignore_inside_a_string_is_not_a_comment() -> None:
    # Documentation that *mentions* the comment does not switch the file off.
    source = 'DOC = """\n# jaxlint: ignore-file\n"""\n' + LOOP.format(comment="")
    assert count(source) == 1


def test_noqa_inside_a_string_on_the_line_does_not_suppress() -> None:
    source = LOOP.format(comment="").replace("layer)", 'layer or "# noqa")')
    assert count(source) == 1


def test_noqa_inside_a_multiline_string_does_not_suppress() -> None:
    template = LOOP.format(comment="").replace(
        "model, layer)", 'model, layer or """\n# noqa\n""")'
    )
    assert count(template) == 1
    assert count(template.replace('""")', '""")  # noqa: JL003')) == 0


def test_suppression_works_through_the_cli_and_blocks_the_fix(tmp_path: Path, run_cli) -> None:
    source = CHAIN.format(comment="  # noqa: JL003")
    path = tmp_path / "chain.py"
    path.write_text(source)
    result = run_cli("check", "--output-format", "json", "chain.py")
    assert result.exit_code == 0
    assert json.loads(result.stdout) == []
    fixed = run_cli("fix", "--unsafe-fixes", "chain.py")
    assert fixed.exit_code == 0
    assert path.read_text() == source


@pytest.mark.parametrize("separator", ["\x0c", "\u2028"])
def test_suppression_after_a_form_feed(separator: str) -> None:
    source = LOOP.format(comment="  # noqa: JL003").replace(
        "import equinox as eqx\n", f"import equinox as eqx\n# page{separator}break\n"
    )
    assert count(source) == 0


def test_suppression_with_crlf_line_endings() -> None:
    source = LOOP.format(comment="  # noqa: JL003").replace("\n", "\r\n")
    assert count(source) == 0
    assert count(LOOP.format(comment="").replace("\n", "\r\n")) == 1
