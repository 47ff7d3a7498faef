"""`jaxlint check --evidence RUN.json`: join the static findings with what a run measured.

RUN.json is what `jaxlint run --output-format json -o RUN.json -- ...` writes. For each static
finding:

- the run made the same finding at the same line: the finding gets the measured cost as a
  fact ("measured in the run: ...");
- the run reached the line many times and measured no such cost there: it says so;
- the run never reached the line: it stays as it was.

Findings the run made that the static rules missed are added, in the files being checked,
unless a comment on their line suppresses them or the selection leaves their code out.
Pure data work: no jax import.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ._bench import _fmt_time as _seconds
from ._engine import Finding
from ._suppress import is_suppressed


__all__ = ["EvidenceError", "RunEvidence", "apply_evidence", "load_evidence"]

# How often a line must have run, by the run's counters, before "no cost measured" means
# something.
MANY = 5
_COMPILE_CODES = ("JL004", "JL007", "JL008", "JL100")


class EvidenceError(Exception):
    """RUN.json is missing or not a `jaxlint run` JSON document (one line, exit 2)."""


@dataclass
class RunEvidence:
    source: str  # the file name, as given
    wall_seconds: float
    device: str
    findings: dict[tuple[str, int, str], dict[str, Any]]  # (file, line, code) -> JSON finding
    lines: dict[tuple[str, int], dict[str, Any]]  # (file, line) -> what was measured there


def load_evidence(path: str) -> RunEvidence:
    try:
        with open(path, encoding="utf-8") as stream:
            data = json.load(stream)
    except OSError as error:
        raise EvidenceError(f"{path}: cannot read: {error.strerror or error}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise EvidenceError(f"{path}: not JSON ({error})") from None
    if not isinstance(data, dict) or "jaxlint_run" not in data:
        raise EvidenceError(
            f"{path}: not a `jaxlint run` JSON report (write one with `jaxlint run --output-format json -o {path} -- ...`)"
        )
    try:
        findings = {(_file(f), int(f["line"]), str(f["code"])): f for f in data["findings"]}
        lines = {(_file(r), int(r["line"])): r for r in data["lines"]}
        device = data.get("device") or {}
        return RunEvidence(
            source=path,
            wall_seconds=float(data["wall_seconds"]),
            device=str(device.get("device_kind", device.get("platform", "?"))),
            findings=findings,
            lines=lines,
        )
    except (KeyError, TypeError, ValueError) as error:
        raise EvidenceError(f"{path}: malformed `jaxlint run` report ({type(error).__name__}: {error})") from None


def _file(row: dict[str, Any]) -> str:
    return os.path.normcase(os.path.abspath(row.get("file") or row["path"]))


def _measured(row: dict[str, Any], run: RunEvidence, *, what: bool = True) -> str:
    measured = row.get("measured") or {}
    seconds = float(measured.get("seconds", 0.0))
    share = f", {seconds / run.wall_seconds:.0%} of the {_seconds(run.wall_seconds)} run" if run.wall_seconds else ""
    # A run finding's message is what was measured, then "; " and the advice.
    cost = f"measured in the run ({run.device}): {_seconds(seconds)}{share}"
    return f"{cost}: {str(row.get('message', '')).rsplit('; ', 1)[0]}" if what else cost


def _no_cost(code: str, row: dict[str, Any]) -> str | None:
    """What the run saw at a line where it made no `code` finding, if the line ran many times."""
    if code == "JL005" and row.get("host_syncs", 0) >= MANY:
        return (
            f"the run converted device arrays here {row['host_syncs']} times and "
            f"{'none' if not row.get('host_waits') else row['host_waits']} of them waited for the device"
        )
    if code == "JL002" and row.get("filter_jit_calls", 0) >= MANY:
        return (
            f"the run called the filter_jit function here {row['filter_jit_calls']} times; its wrapper took "
            f"{_seconds(row.get('filter_jit_overhead_seconds', 0.0))} in all"
        )
    if code == "JL003" and row.get("tree_at_calls", 0) >= MANY:
        return f"the run called `eqx.tree_at` here {row['tree_at_calls']} times, never twice in one run of the function"
    if code == "JL001" and row.get("eager_calls", 0) >= MANY:
        ops = row.get("eager_ops", 0)
        return (
            f"the run called this function {row['eager_calls']} times; from its own lines it dispatched {ops} "
            f"JAX operations eagerly ({ops / row['eager_calls']:.3g} per call), {_seconds(row.get('eager_seconds', 0.0))} in all"
        )
    if code == "JL006" and row.get("timer_reads") and not row.get("timer_intervals_unsynced"):
        return (
            f"the run read the clock here {row['timer_reads']} time(s), and no interval ending at them left "
            "device work it had dispatched not waited for"
        )
    if code in _COMPILE_CODES and row.get("compiles"):
        return f"the run compiled here {row['compiles']} time(s) and measured no avoidable recompile"
    return None


def apply_evidence(
    findings: Sequence[Finding], run: RunEvidence, checked: Collection[str], codes: Collection[str]
) -> list[Finding]:
    """`findings` with the run's measurements as facts, plus the run's own findings in the
    `checked` files (absolute paths) whose code is in `codes`."""
    out = []
    matched = set()
    for finding in findings:
        if finding.cell is not None:
            out.append(finding)
            continue
        key = (os.path.normcase(os.path.abspath(finding.path)), finding.line)
        row = run.findings.get((*key, finding.code))
        if row is not None:
            matched.add((*key, finding.code))
            fact = _measured(row, run)
        else:
            seen = run.lines.get(key)
            fact = _no_cost(finding.code, seen) if seen is not None else None
            fact = None if fact is None else f"{fact} ({run.source})"
        out.append(replace(finding, evidence=(*finding.evidence, fact)) if fact else finding)
    checked = {os.path.normcase(os.path.abspath(p)) for p in checked}
    for key, row in run.findings.items():
        if key in matched or key[0] not in checked or row["code"] not in codes:
            continue
        added = _run_finding(key[0], row, run)
        if added is not None:
            out.append(added)
    return sorted(out, key=Finding.sort_key)


def _run_finding(file: str, row: dict[str, Any], run: RunEvidence) -> Finding | None:
    try:
        with open(file, encoding="utf-8") as stream:
            lines = stream.read().splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    line = int(row["line"])
    if not 1 <= line <= len(lines) or is_suppressed(lines, line, line, row["code"], row["rule"]):
        return None
    source = lines[line - 1]
    rel = os.path.relpath(file)
    return Finding(
        path=file if rel.startswith("..") else rel,
        line=line,
        column=int(row.get("column", 1)),
        end_line=line,
        end_column=int(row.get("end_column", len(source) + 1)),
        code=str(row["code"]),
        rule=str(row["rule"]),
        message=str(row["message"]),
        source_line=source,
        evidence=(f"found by `jaxlint run` ({run.source}), not by the static rules", _measured(row, run, what=False)),
    )
