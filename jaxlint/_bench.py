"""`jaxlint bench`: time every rule's runnable fixture before and after its fix, on this machine.

A runnable fixture is a `bad_*.py` that defines `def main():` and has its fixed version
`bad_*.fixed.py` beside it, in `jaxlint.fixtures/<rule slug>/` (shipped in the wheel). For
each pair, `bench` checks that both `main()`s compute the same values, counts the compiles of
one run of each from a cold start (`jax.clear_caches()` first, so neither side inherits the
other's compiled code), then times them interleaved with `jaxlint.runtime.compare`.

This module imports jax (through `jaxlint.runtime`) only inside `run_bench`, so `import jaxlint`
and `jaxlint check` stay free of it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import itertools
import json
import re
import sys
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from types import ModuleType
from typing import Any, TextIO


__all__ = ["BenchError", "FixturePair", "discover", "run_bench", "JAX_MISSING"]

JAX_MISSING = 'jaxlint bench needs jax: pip install jax jaxlib equinox (the runtime extra)'
_MAIN = re.compile(r"^def main\(", re.M)
_counter = itertools.count()


class BenchError(Exception):
    """A problem that stops `jaxlint bench` with a one-line message (exit 2)."""


@dataclass(frozen=True)
class FixturePair:
    """A runnable fixture and its fixed version."""

    rule: str  # the rule's slug (the folder)
    case: str  # the fixture's name without `.py`
    before: Path
    after: Path


def discover(rules: Sequence[str] = ()) -> list[FixturePair]:
    """The runnable fixture pairs shipped in `jaxlint.fixtures`, for `rules` (slugs; all
    when empty), in folder and file order."""
    root = resources.files("jaxlint.fixtures")
    pairs = []
    for folder in sorted(root.iterdir(), key=lambda p: p.name):
        if not folder.is_dir() or folder.name.startswith(("_", ".")):
            continue
        if rules and folder.name not in rules:
            continue
        for entry in sorted(folder.iterdir(), key=lambda p: p.name):
            name = entry.name
            if not (name.startswith("bad_") and name.endswith(".py")) or name.endswith(".fixed.py"):
                continue
            fixed = folder / (name[: -len(".py")] + ".fixed.py")
            if not fixed.is_file() or not _MAIN.search(entry.read_text(encoding="utf-8")):
                continue
            pairs.append(FixturePair(folder.name, name[: -len(".py")], Path(str(entry)), Path(str(fixed))))
    return pairs


def load_module(path: Path) -> ModuleType:
    """Import a fixture file as a fresh module under a private name (each call a new one)."""
    name = f"_jaxlint_bench_{next(_counter)}_{path.stem.replace('.', '_')}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:  # pragma: no cover - a .py path always has one
        raise BenchError(f"{path}: cannot be imported")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(name, None)
    return module


def _same(before: Any, after: Any) -> bool:
    """Whether two pytrees have the same structure and allclose leaves."""
    import jax
    import numpy as np

    leaves_a, tree_a = jax.tree_util.tree_flatten(before)
    leaves_b, tree_b = jax.tree_util.tree_flatten(after)
    if tree_a != tree_b:
        return False
    for a, b in zip(leaves_a, leaves_b):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape:
            return False
        if a.dtype.kind in "fc" or b.dtype.kind in "fc":
            if not np.allclose(a, b, rtol=1e-5, atol=1e-6, equal_nan=True):
                return False
        elif not np.array_equal(a, b):
            return False
    return True


def _cold_run(main: Any) -> tuple[Any, int]:
    """One call of `main` after clearing jax's caches: its result and how many compiles it
    took. Clearing first keeps the count fair: otherwise whichever side runs second finds
    the eager ops (`jnp.ones`, `x + 1`) the first one compiled."""
    import jax

    from jaxlint.runtime import count_compiles

    jax.clear_caches()
    with count_compiles() as counter:
        out = main()
        jax.block_until_ready(out)
    return out, counter.total


def _measure(pair: FixturePair, trials: int) -> dict[str, Any]:
    from jaxlint.runtime import BenchmarkWarning, compare

    before, after = load_module(pair.before), load_module(pair.after)
    out_before, compiles_before = _cold_run(before.main)
    out_after, compiles_after = _cold_run(after.main)
    equal = _same(out_before, out_after)
    with warnings.catch_warnings():
        # A fixture that compiles on every call (the mistake some rules fix) is reported in
        # the row, not as a warning.
        warnings.simplefilter("ignore", BenchmarkWarning)
        result = compare(before.main, after.main, warmup=1, trials=trials, names=("before", "after"))
    return {
        "rule": pair.rule,
        "case": pair.case,
        "equal": equal,
        "before": result.a.median,
        "after": result.b.median,
        "speedup": result.ratio,
        "speedup_spread": list(result.spread),
        "compiles_before": compiles_before,
        "compiles_after": compiles_after,
        "timed_compiles_before": result.a.compiles_in_timed_region,
        "timed_compiles_after": result.b.compiles_in_timed_region,
        "trials": result.a.trials,
        "device_kind": result.a.device_kind,
        "platform": result.a.platform,
        "timings": result.to_dict(),
    }


def _device() -> dict[str, Any]:
    import jax

    device = jax.devices()[0]
    return {
        "platform": device.platform,
        "device_kind": str(getattr(device, "device_kind", device.platform)),
        "device_count": jax.device_count(),
        "jax_version": jax.__version__,
    }


def measure_all(pairs: Sequence[FixturePair], trials: int) -> Iterator[dict[str, Any]]:
    """Measure each pair; the fixtures' own printing is swallowed (stdout stays ours)."""
    for pair in pairs:
        with contextlib.redirect_stdout(io.StringIO()):
            try:
                row = _measure(pair, trials)
            except Exception as error:  # noqa: BLE001 - one broken fixture must not stop the rest
                row = {"rule": pair.rule, "case": pair.case, "error": f"{type(error).__name__}: {error}"}
        yield row


def _fmt_time(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def _table(rows: Sequence[dict[str, Any]], device: dict[str, Any], trials: int) -> Any:
    from rich.table import Table

    table = Table(title=f"jaxlint bench on {device['device_kind']} ({device['platform']}, jax {device['jax_version']})")
    for column, justify in (
        ("rule", "left"), ("case", "left"), ("before", "right"), ("after", "right"),
        ("speed-up", "right"), ("compiles before → after", "right"), ("same result", "center"),
        ("device", "left"),
    ):  # fmt: skip
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for row in rows:
        if "error" in row:
            table.add_row(row["rule"], row["case"], f"[red]error: {row['error']}[/]", "", "", "", "", "")
            continue
        lo, hi = row["speedup_spread"]
        table.add_row(
            row["rule"], row["case"], _fmt_time(row["before"]), _fmt_time(row["after"]),
            f"{row['speedup']:.2f}x ({lo:.2f}–{hi:.2f})",
            f"{row['compiles_before']} → {row['compiles_after']}",
            "yes" if row["equal"] else "[bold red]NO[/]", row["device_kind"],
        )  # fmt: skip
    table.caption = (
        f"before/after: median time of main() over {trials} interleaved rounds; speed-up: "
        "ratio of medians (half the rounds' ratios fall in the brackets); compiles: one run "
        "from a cold start (jax.clear_caches())"
    )
    return table


def run_bench(rules: Sequence[str], trials: int, as_json: bool, stdout: TextIO, color: bool) -> int:
    """Run the benchmark and print it; the exit code: 0, or 1 when a fixed fixture computes
    something else than the original (or fails)."""
    try:
        import jax  # noqa: F401
    except ImportError:
        raise BenchError(JAX_MISSING) from None
    pairs = discover(rules)
    if not pairs:
        named = ", ".join(rules) if rules else "any rule"
        raise BenchError(f"no runnable fixture pairs (bad_*.py with main() and a .fixed.py) for {named}")
    rows = list(measure_all(pairs, trials))
    device = _device()
    if as_json:
        json.dump({"device": device, "trials": trials, "rows": rows}, stdout, indent=2)
        stdout.write("\n")
    else:
        from rich.console import Console

        console = Console(file=stdout, force_terminal=color, no_color=not color, width=160)
        console.print(_table(rows, device, trials))
    failed = any("error" in row or not row["equal"] for row in rows)
    return 1 if failed else 0
