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
