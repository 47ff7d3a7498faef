"""Properties over generated and mutated programs (issue 19): no valid program makes the linter
raise; fixes parse, converge (fixing the fixed file changes nothing) and keep every byte
outside their edits.

The budget is short by default (the `jaxlint-short` hypothesis profile, registered in
conftest.py) so that the suite stays fast; a long search:

    JAXLINT_PROPERTIES=long python -m pytest tests/test_properties.py
    python -m pytest tests/test_properties.py --hypothesis-profile=jaxlint-long
"""

from __future__ import annotations

import io
import re
import tokenize
from functools import lru_cache
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
hypothesmith = pytest.importorskip("hypothesmith")

from hypothesis import assume, given, strategies as st  # noqa: E402

from jaxlint._engine import analyze  # noqa: E402
from jaxlint._fixer import fix_source  # noqa: E402
from jaxlint._registry import all_rules  # noqa: E402


FIXTURES = Path(__file__).parent.parent / "fixtures"
BAD = sorted(p for p in FIXTURES.glob("*/bad_*.py") if not p.name.endswith(".fixed.py"))
RULES = all_rules()
PRELUDE = "import jax\nimport jax.numpy as jnp\nimport equinox as eqx\n"


def compiles(text: str | bytes) -> bool:
    try:
        compile(text, "<property>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def assert_fix_is_sound(path: str, data: bytes, markers: list[str] = ()) -> bytes:  # type: ignore[assignment]
    """Fix `data` with every rule and unsafe fixes; the result compiles, fixing it again
    changes nothing, and each marker comment is still there once."""
    outcome = fix_source(path, data, RULES, unsafe=True)
    assert outcome.error is None, outcome.error
    fixed = outcome.fixed
    if outcome.changed:
        assert compiles(fixed), fixed.decode(errors="replace")
        again = fix_source(path, fixed, RULES, unsafe=True)
        assert again.error is None, again.error
        assert again.fixed == fixed, "fixing the fixed file changed it again"
    text = fixed.decode()
    for marker in markers:
        assert text.count(marker) == 1, f"{marker!r} lost or repeated"
    return fixed


# -- generated programs -------------------------------------------------------------------------


@given(hypothesmith.from_grammar())
def test_no_generated_program_makes_the_linter_raise(source: str) -> None:
    text = PRELUDE + source
    assume(compiles(text))
    result = analyze("generated.py", text.encode(), RULES).result
    assert result.error is None, result.error
    assert_fix_is_sound("generated.py", text.encode())


# -- mutated fixtures -----------------------------------------------------------------------------


@lru_cache(maxsize=None)
def _safe_boundaries(path: Path) -> tuple[tuple[int, str], ...]:
    """(line index, indentation) where a comment line can go without entering a string or
    following a backslash continuation: before line `index` (0-based)."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    unsafe: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        for line in range(token.start[0], token.end[0]):  # a token over several lines
            unsafe.add(line)  # before 0-based line `line` (after 1-based line `line`)
    for index, line in enumerate(lines):
        if line.rstrip("\r\n").endswith("\\"):
            unsafe.add(index + 1)
    safe = []
    for index in range(len(lines) + 1):
        if index in unsafe:
            continue
        following = lines[index] if index < len(lines) else ""
        indent = re.match(r"[ \t]*", following).group() if following.strip() else ""  # type: ignore[union-attr]
        safe.append((index, indent))
    return tuple(safe)


@st.composite
def mutated_fixtures(draw: st.DrawFn) -> tuple[str, bytes, list[str]]:
    path = draw(st.sampled_from(BAD))
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    boundaries = _safe_boundaries(path)
    chosen = draw(st.lists(st.sampled_from(boundaries), max_size=8, unique=True))
    markers = []
    for number, (index, indent) in enumerate(sorted(chosen, reverse=True)):
        marker = f"# keep-{number}-{draw(st.integers(0, 9999))}"
        markers.append(marker)
        lines.insert(index, f"{indent}{marker}\n")
    text = "".join(lines)
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    if not draw(st.booleans()):
        text = text.rstrip("\n") if text.rstrip("\n") else text  # no final newline
    data = text.replace("\n", newline).encode()
    if draw(st.booleans()):
        data = b"\xef\xbb\xbf" + data
    return path.name, data, markers


@given(mutated_fixtures())
def test_fixes_of_mutated_fixtures_parse_converge_and_keep_other_bytes(case: tuple[str, bytes, list[str]]) -> None:
    name, data, markers = case
    assume(compiles(data))
    fixed = assert_fix_is_sound(name, data, markers)
    if b"\r\n" in data:
        assert b"\n" not in fixed.replace(b"\r\n", b""), "a fix wrote a bare \\n into a CRLF file"
    assert fixed.startswith(b"\xef\xbb\xbf") == data.startswith(b"\xef\xbb\xbf")
    assert fixed.endswith((b"\n", b"\r")) == data.endswith((b"\n", b"\r"))
