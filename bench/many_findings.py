"""The cost of many findings in one large file, against the parse of that file.

    python bench/many_findings.py [--lines 50000] [--findings 800] [--repeat 3] [--fix] [--out FILE]

Generates one module of about `--lines` lines holding `--findings` findings of four kinds
(consecutive `eqx.tree_at` calls, `eqx.tree_at` in a loop, `jax.jit` of a lambda built in a
loop, a timer read around jitted work), spread evenly through plain filler functions, and
prints the CPU time (`time.process_time`) of `libcst.parse_module` on it, of linting it with
every default rule (what `jaxlint check` does per file), and with `--fix` of fixing it with
`--unsafe-fixes` (what `jaxlint fix` does), each with its ratio to the parse. Runs are
interleaved (parse, check, parse, check, ...) and the medians reported.

The target (issue 19, row 9): check within 3x the parse whatever the number of findings, so
the cost stays linear in the size of the file. Before, every fix and every finding's line
regenerated the whole module's source: 352 s for a 50k-line file with 805 findings.

This is a measuring script, not a test: absolute seconds depend on the machine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import libcst as cst

from jaxlint._engine import analyze, decode_source
from jaxlint._fixer import fix_source
from jaxlint._registry import default_rules


HEADER = "import time\n\nimport equinox as eqx\nimport jax\nimport jax.numpy as jnp\n\n\n"

BLOCKS = (
    '''def chain_{i}(model, enc, head):
    model = eqx.tree_at(lambda m: m.encoder, model, enc)
    model = eqx.tree_at(lambda m: m.decoder.head, model, head)
    return model


for batch in loader:
    model = chain_{i}(model, *batch)


''',
    '''def surgery_{i}(model, plan):
    for name, layer in plan.items():
        model = eqx.tree_at(lambda m: getattr(m, name), model, layer)
    return model


''',
    '''def rebuild_{i}(batches):
    out = []
    for batch in batches:
        out.append(jax.jit(lambda x: jnp.sin(x) @ x.T)(batch))
    return out


''',
    '''def timed_{i}(step, x):
    start = time.perf_counter()
    y = jax.jit(step)(x)
    return y, time.perf_counter() - start


''',
)

FILLER = '''def helper_{i}(x, y):
    """Plain code number {i}."""
    z = x + y * 2
    if z > 3:
        return [z, x, y]
    return {{"a": x, "b": (y, z)}}


'''


def generate(lines: int, findings: int) -> str:
    parts = [HEADER]
    block_lines = sum(b.count("\n") for b in BLOCKS) / len(BLOCKS)
    filler_count = max(0, int((lines - findings * block_lines) / FILLER.count("\n")))
    per_finding = filler_count / max(findings, 1)
    made = 0.0
    for index in range(findings):
        parts.append(BLOCKS[index % len(BLOCKS)].format(i=index))
        made += per_finding
        while made >= 1:
            parts.append(FILLER.format(i=len(parts)))
            made -= 1
    return "".join(parts)


def _cpu(function) -> float:  # type: ignore[no-untyped-def]
    start = time.process_time()
    function()
    return time.process_time() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=50_000)
    parser.add_argument("--findings", type=int, default=800)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--fix", action="store_true", help="also time fix --unsafe-fixes")
    parser.add_argument("--out", type=Path, help="also write the generated module here")
    args = parser.parse_args(argv)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 20_000))

    source = generate(args.lines, args.findings)
    if args.out:
        args.out.write_text(source, encoding="utf-8")
    data = source.encode()
    text, _ = decode_source(data)
    rules = default_rules()
    result = analyze("many.py", data, rules).result
    print(f"{text.count(chr(10))} lines, {len(data) / 1e6:.2f} MB, {len(result.findings)} findings")

    times: dict[str, list[float]] = {"parse": [], "check": [], "fix": []}
    for _ in range(args.repeat):
        times["parse"].append(_cpu(lambda: cst.parse_module(text)))
        times["check"].append(_cpu(lambda: analyze("many.py", data, rules)))
        if args.fix:
            times["fix"].append(_cpu(lambda: fix_source("many.py", data, rules, unsafe=True)))
    parse = statistics.median(times["parse"])
    print(f"parse  {parse:8.2f} s")
    for name in ("check", "fix"):
        if times[name]:
            value = statistics.median(times[name])
            print(f"{name:6} {value:8.2f} s  {value / parse:5.2f}x the parse")
    return 0


if __name__ == "__main__":
    sys.exit(main())
