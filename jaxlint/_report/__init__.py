"""Output formats: text (ruff-like), concise, json, jsonl, sarif, github."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TextIO

from .._engine import Finding
from ._machine import render_github, render_json, render_jsonl
from ._sarif import render_sarif
from ._text import render_concise, render_statistics, render_text


__all__ = ["FORMATS", "STATISTICS_FORMATS", "render", "render_statistics"]

FORMATS = ("text", "concise", "json", "jsonl", "sarif", "github")
STATISTICS_FORMATS = ("text", "concise", "json", "jsonl")


def render(findings: Sequence[Finding], output_format: str, stream: TextIO, *, color: bool) -> None:
    """Write `findings` to `stream` in `output_format`."""
    if output_format == "text":
        render_text(findings, stream, color=color)
    elif output_format == "concise":
        render_concise(findings, stream, color=color)
    elif output_format == "json":
        render_json(findings, stream)
    elif output_format == "jsonl":
        render_jsonl(findings, stream)
    elif output_format == "sarif":
        render_sarif(findings, stream)
    elif output_format == "github":
        render_github(findings, stream)
    else:  # pragma: no cover - click validates the choice
        raise ValueError(f"unknown output format {output_format!r}")
