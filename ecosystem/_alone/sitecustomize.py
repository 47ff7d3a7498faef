"""Loaded at start-up by the Python of a `score.py --alone` run (`lint.py` puts this folder on
PYTHONPATH): jaxlint lints every file knowing only that file, as a linter without the project
analysis would, so that the findings the project analysis adds or removes can be counted.

Every process of the run (the CLI's and its workers') imports this first and swaps the
function that lints one file; nothing else of jaxlint changes."""

from pathlib import Path

import jaxlint._runner as _runner
from jaxlint._engine import analyze
from jaxlint._project import project_for


def _lint_one(display, data, slugs, options):  # type: ignore[no-untyped-def]
    by_slug = {rule.SLUG: rule for rule in _runner.all_rules()}
    alone = project_for([(display, Path(display), data)])
    return analyze(display, data, [by_slug[s] for s in slugs], options, alone).result


_lint_one.__module__ = _runner._lint_one.__module__  # pickled by name into spawned workers
_runner._lint_one = _lint_one
