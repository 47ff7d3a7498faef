"""Shared test configuration."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-fixtures",
        action="store_true",
        default=False,
        help="Rewrite the golden bad_*.fixed.py files from the current fixes (review the diff).",
    )


@pytest.fixture
def run_cli(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    """Run the `jaxlint` click group in-process, with `tmp_path` as the working directory.

    Returns a function `run_cli(*args, input=None)` (`input`: standard input) giving click's `Result` (`exit_code`, `stdout`,
    `stderr`). An exception other than `SystemExit` escaping the CLI is re-raised: users
    would have seen it as a traceback.
    """
    from click.testing import CliRunner

    from jaxlint._cli import cli

    monkeypatch.chdir(tmp_path)

    def invoke(*args: object, input: bytes | str | None = None):  # type: ignore[no-untyped-def]
        result = CliRunner().invoke(cli, [str(a) for a in args], input=input)
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        return result

    return invoke


@pytest.fixture
def run_doc_examples():  # type: ignore[no-untyped-def]
    """A function running every ```python block of an object's docstring (dedented, each in
    a fresh namespace); it fails when the docstring has none."""
    import re

    def run(obj: object) -> None:
        blocks = re.findall(r"```python\n(.*?)```", obj.__doc__ or "", flags=re.S)
        assert blocks, f"{obj!r} has no ```python example"
        for block in blocks:
            lines = block.splitlines()
            indent = min(len(line) - len(line.lstrip()) for line in lines if line.strip())
            exec("\n".join(line[indent:] for line in lines), {})

    return run


# Property tests (tests/test_properties.py): a short budget by default, so the suite stays
# fast; `--hypothesis-profile=jaxlint-long` (or JAXLINT_PROPERTIES=long) for a long search.
try:
    import os as _os

    from hypothesis import HealthCheck, settings as _settings

    _relaxed = dict(
        deadline=None,
        database=None,
        derandomize=False,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
    )
    _settings.register_profile("jaxlint-short", max_examples=40, **_relaxed)
    _settings.register_profile("jaxlint-long", max_examples=1500, **_relaxed)
    _settings.load_profile("jaxlint-long" if _os.environ.get("JAXLINT_PROPERTIES") == "long" else "jaxlint-short")
except ImportError:  # pragma: no cover - hypothesis is in the dev extra
    pass
