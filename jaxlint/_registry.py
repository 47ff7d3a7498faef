"""The catalogue of rules, and selection by slug, code or code prefix."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from functools import lru_cache

from ._rule import Rule


__all__ = ["all_rules", "default_rules", "get_rule", "select_rules", "SelectionError"]


class SelectionError(ValueError):
    """An unknown rule name in --select/--ignore or configuration."""


@lru_cache(maxsize=1)
def all_rules() -> tuple[type[Rule], ...]:
    """Every rule jaxlint ships, ordered by code."""
    from jaxlint.rules import ALL_RULES

    return tuple(sorted(ALL_RULES, key=lambda r: r.CODE))


def default_rules() -> tuple[type[Rule], ...]:
    return tuple(r for r in all_rules() if r.DEFAULT_ON)


def _matches(selector: str, rule: type[Rule]) -> bool:
    upper = selector.upper()
    return selector == rule.SLUG or (upper.startswith("JL") and rule.CODE.startswith(upper))


def expand(selector: str) -> tuple[type[Rule], ...]:
    """The rules a selector names: a slug, a code, a code prefix (`JL`, `JL00`) or `ALL`."""
    selector = selector.strip()
    if selector.upper() == "ALL":
        return all_rules()
    matched = tuple(r for r in all_rules() if _matches(selector, r))
    if not matched:
        known = [r.SLUG for r in all_rules()] + [r.CODE for r in all_rules()]
        close = difflib.get_close_matches(selector, known, n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        raise SelectionError(f"unknown rule '{selector}'{hint}")
    return matched


def get_rule(selector: str) -> type[Rule]:
    """The one rule a slug or code names."""
    matched = expand(selector)
    if len(matched) != 1:
        raise SelectionError(f"'{selector}' names {len(matched)} rules, not one")
    return matched[0]


def select_rules(
    select: Iterable[str] | None = None,
    ignore: Iterable[str] = (),
    extend_select: Iterable[str] = (),
) -> tuple[type[Rule], ...]:
    """Rules chosen by `select` (default rules if None) plus `extend_select`, minus `ignore`."""
    chosen: dict[type[Rule], None] = {}
    base = default_rules() if select is None else [r for s in select for r in expand(s)]
    for rule in (*base, *(r for s in extend_select for r in expand(s))):
        chosen[rule] = None
    ignored = {r for s in ignore for r in expand(s)}
    return tuple(sorted((r for r in chosen if r not in ignored), key=lambda r: r.CODE))
