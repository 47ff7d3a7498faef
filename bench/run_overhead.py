"""Overhead of `jaxlint run`'s instrumentation (`jaxlint.runtime.profile()`) on a real program.

    python bench/run_overhead.py [--rounds 7] [--example examples/train_loop.py]

Each round starts two fresh Python processes, one plain and one under `profile()` (the order
alternating each round), that import the example and call its `main()` twice, timing each call:

- **cold**: the first `main()`, compiles included: what one `jaxlint run` of a short program
  costs (the compile listeners, the cache-miss explanations, the jit wrappers);
- **warm**: the second `main()`, every function already compiled: the steady-state cost per
  step of a long run (the wrapped `jax.Array` conversions, `eqx.filter_jit`'s timed wrapper).

Each is timed as wall time and as the CPU time of the process (all its threads): on a shared
machine the CPU time moves less with other people's load.

The example's own printing is discarded. Reported: the median of each, and the overhead as the
ratio of medians minus one and as the median of per-round ratios ("paired"). The target is at
most 10% of wall time. Compare ratios, not absolute times: the machine may be shared.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path


ROOT = Path(__file__).resolve().parent.parent


def _child(example: str, profiled: bool) -> None:
    """Run inside a fresh process: two timed calls of the example's main()."""
    import jax  # noqa: F401 - imported before the clock starts, as in a real program

    from jaxlint._bench import load_module

    module = load_module(Path(example))
    times = []
    reports = []
    for _ in range(2):
        context = contextlib.nullcontext()
        if profiled:
            from jaxlint.runtime import profile

            context = profile()
        start, cpu = time.perf_counter(), time.process_time()
        with contextlib.redirect_stdout(io.StringIO()), context as report:
            module.main()
        times.append((time.perf_counter() - start, time.process_time() - cpu))
        reports.append(report)
    findings = [f"{f.code}:{f.line}" for f in reports[0].findings] if profiled else []
    print(json.dumps({
        "cold": times[0][0], "warm": times[1][0], "cold_cpu": times[0][1], "warm_cpu": times[1][1],
        "findings": findings,
    }))  # fmt: skip


def _spawn(example: str, profiled: bool) -> dict[str, float]:
    command = [sys.executable, __file__, "--child", "profiled" if profiled else "plain", "--example", example]
    out = subprocess.run(command, check=True, capture_output=True, text=True, cwd=ROOT).stdout
    return json.loads(out.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--example", default=str(ROOT / "examples" / "train_loop.py"))
    parser.add_argument("--child", choices=["plain", "profiled"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.example, args.child == "profiled")
        return
    import jax

    plain: list[dict[str, float]] = []
    profiled: list[dict[str, float]] = []
    for i in range(args.rounds):
        order = (False, True) if i % 2 == 0 else (True, False)
        for is_profiled in order:
            (profiled if is_profiled else plain).append(_spawn(args.example, is_profiled))
        print(f"round {i + 1}/{args.rounds}: plain {plain[-1]['cold']:.2f}/{plain[-1]['warm']:.3f} s, "
              f"profiled {profiled[-1]['cold']:.2f}/{profiled[-1]['warm']:.3f} s (cold/warm)", file=sys.stderr)  # fmt: skip
    print(f"# `jaxlint run` instrumentation overhead on {os.path.relpath(args.example, ROOT)}")
    print(f"# {args.rounds} rounds, fresh processes, interleaved; python {platform.python_version()}, "
          f"jax {jax.__version__}, {jax.devices()[0].device_kind} ({jax.default_backend()})")  # fmt: skip
    print("| main() | plain (median) | profiled (median) | overhead (ratio of medians) | overhead (paired median) |")
    print("|---|---|---|---|---|")
    labels = {
        "cold": "cold (compiles included), wall", "cold_cpu": "cold, CPU time of the process",
        "warm": "warm (already compiled), wall", "warm_cpu": "warm, CPU time of the process",
    }  # fmt: skip
    for phase, label in labels.items():
        a = [r[phase] for r in plain]
        b = [r[phase] for r in profiled]
        ratio = statistics.median(b) / statistics.median(a) - 1
        paired = statistics.median(y / x for x, y in zip(a, b)) - 1
        print(f"| {label} | {statistics.median(a):.3f} s | {statistics.median(b):.3f} s | {ratio:+.1%} | {paired:+.1%} |")
    print(f"# findings of the last profiled cold run: {', '.join(profiled[-1].get('findings', [])) or 'none'}")  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
