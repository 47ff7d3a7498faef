"""The shipped examples: what the README's first command shows, and that they run."""

from __future__ import annotations

import json
import runpy
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from jaxlint._cli import cli

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def test_check_on_the_examples_finds_what_the_readme_promises() -> None:
    result = CliRunner().invoke(cli, ["check", "--no-cache", "--output-format", "json", str(EXAMPLES)])
    assert result.exit_code == 1
    found = Counter((Path(f["path"]).name, f["code"]) for f in json.loads(result.stdout))
    assert found == Counter(
        {
            ("freeze_head.py", "JL003"): 1,
            ("generate.py", "JL007"): 1,
            ("generate.py", "JL008"): 1,
            ("low_rank.py", "JL003"): 1,
            ("train_loop.py", "JL002"): 1,
            ("train_loop.py", "JL004"): 2,
            ("train_loop.py", "JL005"): 1,
            ("train_loop.py", "JL006"): 1,
        }
    )
    readme = (EXAMPLES.parent / "README.md").read_text(encoding="utf-8")
    assert "it finds nine\nproblems" in readme and sum(found.values()) == 9


def test_the_training_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("optax")
    runpy.run_path(str(EXAMPLES / "train_loop.py"), run_name="__main__")
    assert "trained in" in capsys.readouterr().out
