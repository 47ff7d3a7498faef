"""Human formats: ruff-like text with the source line and a caret, and one-line concise."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import TextIO

from rich.console import Console
from rich.markup import escape

from .._engine import Finding
from .._registry import all_rules


def _console(stream: TextIO, color: bool) -> Console:
    return Console(
        file=stream,
        force_terminal=color,
        no_color=not color,
        highlight=False,
        soft_wrap=True,
        emoji=False,
    )


def _header(f: Finding) -> str:
    fixable = " [bold cyan]\\[*][/]" if f.fix == "safe" else ""
    cell = f"cell {f.cell}[cyan]:[/]" if f.cell is not None else ""
    return (
        f"[bold]{escape(f.path)}[/][cyan]:[/]{cell}{f.line}[cyan]:[/]{f.column}[cyan]:[/] "
        f"[bold red]{f.code}[/]{fixable} [dim]\\[{f.rule}][/] {escape(f.message)}"
    )


def render_concise(findings: Sequence[Finding], stream: TextIO, *, color: bool) -> None:
    console = _console(stream, color)
    for f in findings:
        console.print(_header(f))


def render_text(findings: Sequence[Finding], stream: TextIO, *, color: bool) -> None:
    console = _console(stream, color)
    for f in findings:
        console.print(_header(f))
        if f.source_line:
            gutter = " " * len(str(f.line))
            raw = f.source_line.rstrip()
            line = raw.expandtabs(4)
            # Columns count characters; the caret goes under them once tabs are expanded.
            start = len(raw[: max(f.column - 1, 0)].expandtabs(4))
            end = len(raw[: max(f.end_column - 1, 0)].expandtabs(4)) if f.end_line == f.line else len(line)
            width = end - start
            console.print(f"[blue]{gutter} |[/]")
            console.print(f"[blue]{f.line} |[/] {escape(line)}")
            console.print(f"[blue]{gutter} |[/] {' ' * start}[bold red]{'^' * max(width, 1)}[/]")
            for fact in f.evidence:
                console.print(f"[blue]{gutter} =[/] [cyan]why:[/] {escape(fact)}")
            if f.fix_title:
                kind = "" if f.fix == "safe" else f" ({f.fix})"
                console.print(f"[blue]{gutter} =[/] [cyan]fix{kind}:[/] {escape(f.fix_title)}")
        console.print()


def statistics(findings: Sequence[Finding]) -> list[dict[str, object]]:
    """One entry per rule, most frequent first: count, code, name, whether any is fixable."""
    counts = Counter(f.code for f in findings)
    slugs = {r.CODE: r.SLUG for r in all_rules()} | {"JL000": "syntax-error"}
    fixable = {f.code for f in findings if f.fix == "safe"}
    return [
        {"code": code, "name": slugs.get(code, ""), "count": count, "fixable": code in fixable}
        for code, count in sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    ]


def render_statistics(findings: Sequence[Finding], output_format: str, stream: TextIO, *, color: bool) -> None:
    """ruff's --statistics: one line per rule (count, code, fixable marker, slug), or JSON."""
    rows = statistics(findings)
    if output_format == "json":
        stream.write(json.dumps(rows, indent=2) + "\n")
        return
    if output_format == "jsonl":
        for row in rows:
            stream.write(json.dumps(row) + "\n")
        return
    console = _console(stream, color)
    width = max((len(str(row["count"])) for row in rows), default=1)
    for row in rows:
        marker = "[*]" if row["fixable"] else "   "
        console.print(f"{row['count']:>{width}}\t{row['code']}\t{escape(marker)} {row['name']}")
