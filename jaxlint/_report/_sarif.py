"""SARIF 2.1.0, for GitHub code scanning."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import PurePath
from typing import Any, TextIO

from .._engine import SYNTAX_ERROR_CODE, Finding
from .._registry import all_rules
from .._version import __version__

_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_HELP = "https://github.com/jaxlint/jaxlint#rules"


def _rule_descriptors() -> list[dict[str, Any]]:
    descriptors = [
        {
            "id": SYNTAX_ERROR_CODE,
            "name": "syntax-error",
            "shortDescription": {"text": "The file does not parse"},
        }
    ]
    for rule in all_rules():
        descriptors.append(
            {
                "id": rule.CODE,
                "name": rule.SLUG,
                "shortDescription": {"text": rule.MESSAGE},
                "fullDescription": {"text": rule.docs().split("\n\n")[1] if "\n\n" in rule.docs() else rule.MESSAGE},
                "helpUri": f"{_HELP}-{rule.SLUG}",
                "properties": {"fix": rule.FIX.value if rule.FIX else "none"},
            }
        )
    return descriptors


def _region(f: Finding) -> dict[str, int]:
    """Where the finding is in the file: for a notebook, the lines of the `.ipynb` text
    holding the cell's lines (columns there are not the code's, so none are given)."""
    if f.cell is not None:
        start = f.ipynb_line or 1
        return {"startLine": start, "endLine": max(f.ipynb_end_line or start, start)}
    return {"startLine": f.line, "startColumn": f.column, "endLine": f.end_line, "endColumn": f.end_column}


def _cell_properties(f: Finding) -> dict[str, Any]:
    """The result's properties: the evidence, and for a notebook the cell and the region
    within the cell's source."""
    properties: dict[str, Any] = {}
    if f.evidence:
        properties["evidence"] = list(f.evidence)
    if f.cell is not None:
        properties["cell"] = f.cell
        properties["cellRegion"] = {
            "startLine": f.line,
            "startColumn": f.column,
            "endLine": f.end_line,
            "endColumn": f.end_column,
        }
    return {"properties": properties} if properties else {}


def render_sarif(findings: Sequence[Finding], stream: TextIO) -> None:
    descriptors = _rule_descriptors()
    index = {d["id"]: i for i, d in enumerate(descriptors)}
    for f in findings:  # codes no rule owns: `jaxlint run`'s JL100 (recompile)
        if f.code not in index:
            index[f.code] = len(descriptors)
            descriptors.append({"id": f.code, "name": f.rule, "shortDescription": {"text": f.rule}})
    results = [
        {
            "ruleId": f.code,
            "ruleIndex": index.get(f.code, 0),
            "level": "error" if f.code == SYNTAX_ERROR_CODE else "warning",
            "message": {"text": f.message},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": PurePath(f.path).as_posix()},
                        "region": _region(f),
                    }
                }
            ],
            **_cell_properties(f),
        }
        for f in findings
    ]
    document = {
        "$schema": _SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "jaxlint",
                        "version": __version__,
                        "informationUri": "https://github.com/jaxlint/jaxlint",
                        "rules": descriptors,
                    }
                },
                "results": results,
            }
        ],
    }
    json.dump(document, stream, indent=2)
    stream.write("\n")
