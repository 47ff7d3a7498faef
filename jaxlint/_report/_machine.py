"""Machine-readable formats: JSON (one array), JSON Lines, GitHub workflow annotations."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, TextIO

from .._engine import Finding


def finding_dict(finding: Finding) -> dict[str, Any]:
    """The JSON object of one finding (the schema in DESIGN.md; notebooks add `cell`)."""
    data = {
        "path": finding.path,
        "line": finding.line,
        "column": finding.column,
        "end_line": finding.end_line,
        "end_column": finding.end_column,
        "code": finding.code,
        "rule": finding.rule,
        "message": finding.message,
        "fix": None if finding.fix is None else {"applicability": finding.fix, "title": finding.fix_title},
        "evidence": list(finding.evidence),
    }
    if finding.cell is not None:
        data["cell"] = finding.cell
    return data


def render_json(findings: Sequence[Finding], stream: TextIO) -> None:
    json.dump([finding_dict(f) for f in findings], stream, indent=2)
    stream.write("\n")


def render_jsonl(findings: Sequence[Finding], stream: TextIO) -> None:
    for finding in findings:
        stream.write(json.dumps(finding_dict(finding)) + "\n")


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def render_github(findings: Sequence[Finding], stream: TextIO) -> None:
    """GitHub Actions workflow commands: one `::warning` annotation per finding."""
    for f in findings:
        level = "error" if f.code == "JL000" else "warning"
        message = f"{f.code} {f.message}"
        if f.cell is not None:
            # A notebook: the annotation goes on the line of the `.ipynb` text where the
            # cell's line is written (its columns there are not the code's); the message
            # says where in the cell.
            position = f"line={f.ipynb_line or 1},endLine={f.ipynb_end_line or f.ipynb_line or 1}"
            message += f" (cell {f.cell}, line {f.line}, column {f.column})"
        else:
            position = f"line={f.line},col={f.column},endLine={f.end_line},endColumn={f.end_column}"
        properties = f"file={_escape_property(f.path)},{position},title={_escape_property(f'{f.code} {f.rule}')}"
        stream.write(f"::{level} {properties}::{_escape_data(message)}\n")
