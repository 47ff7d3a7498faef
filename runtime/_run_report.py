"""What `profile()` measured, classified into jaxlint's codes at the user's lines."""

from __future__ import annotations

import os
import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jaxlint._bench import _fmt_time as fmt_seconds


if TYPE_CHECKING:
    from ._profile import CompileEvent, RunProfile

Site = tuple[str, int]

RULES = {
    "JL001": "missing-jit",
    "JL002": "filter-jit-per-call",
    "JL003": "tree-at-batch",
    "JL004": "pad-final-batch",
    "JL005": "host-copy-in-loop",
    "JL006": "unsynced-timing",
    "JL007": "jit-in-loop",
    "JL008": "growing-shape-loop",
    "JL100": "recompile",
}
# A line must repeat this often before its per-call cost is called a pattern: one or two
# conversions or filter_jit calls are a program's setup, not its loop.
MIN_SYNCS = 5
MIN_FILTER_JIT_CALLS = 5
MIN_RECOMPILES = 2
# A function run eagerly is JL001 when it was called this often (a loop, as for the other
# per-call costs) and dispatched this many operations per call: a few calls with many operations
# are setup, and many calls of one or two a helper too small to be worth a compiled program.
MIN_EAGER_CALLS = MIN_SYNCS
MIN_EAGER_OPS_PER_CALL = 3
WAIT_SHARE = 0.01
_CHANGE = re.compile(r"^\s*\* at (?P<path>.+?), now (?P<now>\S+) and before (?P<before>\S+?)\s*$", re.M)
_TYPE = re.compile(r"^(?P<dtype>[a-z]+\d*)\[(?P<dims>[\d,]*)\]")


@dataclass
class RunFinding:
    """One problem `profile()` measured: where, which code, and what it cost."""

    path: str  # absolute file name
    line: int
    code: str
    rule: str
    message: str
    seconds: float  # the measured cost (time a fix would save, or spent where the fix applies)
    count: int  # how many times it happened (compiles, waits, calls)
    detail: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path, "line": self.line, "code": self.code, "rule": self.rule,
            "message": self.message, "seconds": self.seconds, "count": self.count, "detail": self.detail,
        }  # fmt: skip


def _shape(text: str) -> tuple[str, tuple[int, ...]] | None:
    match = _TYPE.match(text)
    if match is None:
        return None
    dims = tuple(int(d) for d in match["dims"].split(",") if d)
    return match["dtype"], dims


def _size(dims: tuple[int, ...]) -> int:
    size = 1
    for d in dims:
        size *= d
    return size


def _changes(event: CompileEvent) -> list[tuple[str, str, str]]:
    return [(m["path"], m["now"], m["before"]) for m in _CHANGE.finditer(event.explanation or "")]


def _argument(path: str) -> str:
    """How to name an input jax names by its path: eqx.filter_jit's own structure
    (`dynamic_nodonate['rest'][21]`) means nothing to the user."""
    return "an input" if path.startswith(("dynamic_donate", "dynamic_nodonate")) else f"`{path}`"


def _shape_changes(event: CompileEvent) -> dict[str, tuple[tuple[int, ...], tuple[int, ...]]] | None:
    """{argument path: (now dims, before dims)} when every change jax names is a shape change
    of the same dtype and rank; None otherwise."""
    if "different input types" not in (event.explanation or ""):
        return None
    out = {}
    for path, now, before in _changes(event):
        a, b = _shape(now), _shape(before)
        if a is None or b is None or a[0] != b[0] or len(a[1]) != len(b[1]) or a[1] == b[1]:
            return None
        out[path] = (a[1], b[1])
    return out or None


def _reason(event: CompileEvent) -> str:
    changes = _changes(event)
    if changes:
        path, now, before = changes[0]
        text = f"{path}: now {now}, before {before}"
        if len(text) > 120:
            text = text[:117] + "..."
        return text
    lines = [ln.strip() for ln in (event.explanation or "").splitlines()[1:] if ln.strip()]
    return lines[-1][:120] if lines else "jax gave no reason"


class RunReport:
    """What a `profile()` block measured. Complete once the block has ended."""

    def __init__(self, profile: RunProfile) -> None:
        self._profile = profile
        self.findings: list[RunFinding] = []
        self.device: dict[str, Any] = {}
        self._rebuilt: set[tuple[str, Any]] = set()  # functions compiled anew again and again (JL007)

    # -- totals -------------------------------------------------------------------------------
    @property
    def wall_seconds(self) -> float:
        return self._profile.wall

    @property
    def compile_seconds(self) -> float:
        return sum(e.seconds for e in self._profile.compiles)

    @property
    def host_wait_seconds(self) -> float:
        return sum(s.wait_seconds for s in self._profile.syncs.values())

    def _finish(self) -> None:
        import jax

        device = jax.devices()[0]
        self.device = {
            "platform": device.platform,
            "device_kind": str(getattr(device, "device_kind", device.platform)),
            "device_count": jax.device_count(),
            "jax_version": jax.__version__,
        }
        findings = self._compile_findings() + self._sync_findings() + self._call_findings() + self._eager_findings()
        findings += self._timer_findings()
        self.findings = sorted(findings, key=lambda f: (f.path, f.line, f.code))

    # -- compiles -----------------------------------------------------------------------------
    def _compile_findings(self) -> list[RunFinding]:
        explained = [e for e in self._profile.compiles if e.explanation is not None]
        findings: list[RunFinding] = []
        fresh: dict[tuple[str, Any], list[CompileEvent]] = defaultdict(list)
        for event in explained:
            if event.new_function:
                fresh[(event.name, event.created_at or event.defined_at or event.site)].append(event)
        rebuilt = self._rebuilt
        for (name, _), events in fresh.items():
            # jax had never seen the function object at each of these compiles: a new one every
            # time (its id may repeat: a freed function's address is reused).
            if len(events) < 2:
                continue
            rebuilt.add(events[0].key)
            site = events[0].created_at or events[0].site or events[0].defined_at
            if site is None:
                continue
            extra = sum(e.seconds for e in events[1:])
            findings.append(RunFinding(
                site[0], site[1], "JL007", RULES["JL007"],
                f"a jit wrapper of a new `{name}` was built here {len(events)} times, and jax traced and "
                f"compiled each one: {len(events) - 1} needless compiles took {fmt_seconds(extra)}; build "
                "the jitted function once, outside the loop, and call it in the loop",
                extra, len(events), {"compiles": len(events)},
            ))  # fmt: skip
        groups: dict[tuple[str, Any], list[CompileEvent]] = defaultdict(list)
        for event in explained:
            if event.key not in rebuilt:
                groups[event.key].append(event)
        for (name, _), events in groups.items():
            # Each call site is judged on its own: a ragged last batch in training and another
            # in evaluation are two one-off recompiles, not one function recompiling twice.
            by_site: dict[Site, list[CompileEvent]] = defaultdict(list)
            for e in events:
                if not e.new_function and e.site is not None:
                    by_site[e.site].append(e)
            for site, again in by_site.items():
                finding = self._recompile(name, len(events), site, again)
                if finding is not None:
                    findings.append(finding)
        return findings

    def _recompile(self, name: str, total: int, site: Site, again: list[CompileEvent]) -> RunFinding | None:
        seconds = sum(e.seconds for e in again)
        n = len(again)
        shapes = [_shape_changes(e) for e in again]
        if n >= 2 and all(shapes):
            common = set.intersection(*(set(s) for s in shapes if s))
            for path in sorted(common):
                sizes = [_size(s[path][0]) for s in shapes if s]
                firsts = [_size(s[path][1]) for s in shapes if s]
                if sizes[0] > firsts[0] and all(b > a for a, b in zip(sizes, sizes[1:])):
                    last = shapes[-1][path][0] if shapes[-1] else ()
                    return RunFinding(
                        site[0], site[1], "JL008", RULES["JL008"],
                        f"`{name}` was compiled again {n} times because {_argument(path)} grew at every call "
                        f"(to shape {list(last)}): {fmt_seconds(seconds)} of recompiles; write into a "
                        "fixed-size buffer (`.at[].set`, `lax.dynamic_update_slice`) or pad to a few "
                        "sizes with `jaxlint.runtime.bucket`",
                        seconds, n, {"argument": path, "recompiles": n},
                    )  # fmt: skip
        if n == 1 and shapes[0]:
            (path, (now, before)), *_ = shapes[0].items()
            if now and before and now[0] < before[0] and now[1:] == before[1:]:
                return RunFinding(
                    site[0], site[1], "JL004", RULES["JL004"],
                    f"`{name}` was compiled a second time for a smaller batch ({_argument(path)}: {list(now)} after "
                    f"{list(before)}), {fmt_seconds(seconds)}; iterate `jaxlint.runtime.padded_batches(...)` "
                    "(fixed-size batches and a mask) or drop the remainder",
                    seconds, n, {"argument": path, "now": list(now), "before": list(before)},
                )  # fmt: skip
        if n < MIN_RECOMPILES:
            return None  # one more program (eval mode, another config) is no pattern
        reasons = list(dict.fromkeys(_reason(e) for e in again))
        shown = "; ".join(reasons[:3]) + ("; ..." if len(reasons) > 3 else "")
        return RunFinding(
            site[0], site[1], "JL100", RULES["JL100"],
            f"`{name}` was compiled {total} times, {n} of them again from this line, taking "
            f"{fmt_seconds(seconds)} ({shown}); keep shapes, dtypes and static "
            "arguments the same from call to call",
            seconds, n, {"recompiles": n, "reasons": reasons[:8]},
        )  # fmt: skip

    # -- host waits ---------------------------------------------------------------------------
    def _sync_findings(self) -> list[RunFinding]:
        findings = []
        for (path, line), site in self._profile.syncs.items():
            # A wait is a conversion of an array dispatched since the program last waited
            # (`_ledger`): it had to wait for that work, whether or not a fast device had already
            # finished it. Waits inside `to_host` are the one batched wait that the fix leaves.
            waits = site.waits - site.batched
            if site.count < MIN_SYNCS or waits < 2:
                continue
            # Most conversions waited, or the waits repeat (a loop's, not the first reads of arrays
            # just computed, as in `for x in zip(xs, ys)`) and are a real share of the run. The
            # share alone is no evidence: on a loaded machine two waits can take 1% of a short run.
            few = 2 * waits < site.count
            if few and (waits < MIN_SYNCS or site.wait_seconds < WAIT_SHARE * self.wall_seconds):
                continue
            kind = max(site.kinds, key=site.kinds.__getitem__)
            running = (
                f"; {site.pending} times the work was still running when Python asked"
                if site.pending else "; this device had finished the work each time Python asked"
            )  # fmt: skip
            findings.append(RunFinding(
                path, line, "JL005", RULES["JL005"],
                f"`{kind}` here read {site.count} device arrays on the host, {waits} of them computed since the "
                f"program last waited for the device, so Python waited for that work each time "
                f"({fmt_seconds(site.wait_seconds)} in all{running}) instead of queueing the next step; "
                "keep values on the device and transfer once after the loop (`jaxlint.runtime.to_host`), "
                "or log every N steps",
                site.wait_seconds, waits, {"conversions": site.count, "waits": waits, "running": site.pending},
            ))  # fmt: skip
        return findings

    # -- Python overhead ----------------------------------------------------------------------
    def _call_findings(self) -> list[RunFinding]:
        findings = []
        for (path, line), site in self._profile.filter_jit.items():
            if site.calls < MIN_FILTER_JIT_CALLS or site.overhead <= 0:
                continue
            findings.append(RunFinding(
                path, line, "JL002", RULES["JL002"],
                f"`{site.name}` (`eqx.filter_jit`) was called {site.calls} times here, and its wrapper spent "
                f"{fmt_seconds(site.overhead)} flattening and rebuilding the arguments and outputs "
                f"({fmt_seconds(site.overhead / site.calls)} per call); "
                "`jaxlint.runtime.filter_jit` is a drop-in without that per-call cost",
                site.overhead, site.calls, {"calls": site.calls, "call_seconds": site.seconds},
            ))  # fmt: skip
        for (path, line), site in self._profile.tree_at.items():
            if not site.bursts:
                continue
            lines = sorted(site.burst_lines)
            where = f"line {lines[0]}" if len(lines) == 1 else "lines " + ", ".join(map(str, lines))
            runs = (
                "in one run" if site.bursts == 1
                else f"in {site.bursts} runs ({site.burst_calls / site.bursts:.3g} per run)"
            )  # fmt: skip
            findings.append(RunFinding(
                path, line, "JL003", RULES["JL003"],
                f"`{site.name}` called `eqx.tree_at` {site.burst_calls} times {runs} at {where}, each call "
                f"traversing the whole pytree: {fmt_seconds(site.burst_seconds)} in all; make one batched "
                "`tree_at` call (or `jaxlint.runtime.tree_at_batched`) per run",
                site.burst_seconds, site.burst_calls, {"runs": site.bursts, "lines": lines},
            ))  # fmt: skip
        return findings

    # -- eager dispatch ------------------------------------------------------------------------
    def _eager_findings(self) -> list[RunFinding]:
        functions = self._profile.eager.functions
        if not any(fn.calls >= MIN_EAGER_CALLS for fn in functions.values()):
            return []  # and the rules stay unimported (a third of a second)
        from jaxlint.rules.missing_jit import _SETUP  # names of one-shot setup code, as the static rule

        # Functions jit could take whole: no host conversion inside, several operations per call.
        jittable = {
            code for code, fn in functions.items()
            if fn.ops >= MIN_EAGER_OPS_PER_CALL * fn.calls and not fn.synced
            and not code.co_name.startswith("<")  # module code, lambdas, comprehensions
            and not _SETUP.match(code.co_name)
        }  # fmt: skip

        def inside_another(code: Any) -> bool:
            """Whether a caller of `code` (at any depth) is jittable and called more than once:
            that is the function to jit (a function called once is the program, its loop the
            loop); when it ran too few times to be a loop, so did `code`'s work."""
            seen, todo = {code}, list(functions[code].parents)
            while todo:
                parent = todo.pop()
                if parent in jittable and functions[parent].calls > 1:
                    return True
                if parent not in seen and parent in functions:
                    seen.add(parent)
                    todo.extend(functions[parent].parents)
            return False

        candidates = [code for code in jittable if functions[code].calls >= MIN_EAGER_CALLS]
        findings = []
        for code in candidates:
            if inside_another(code):
                continue
            fn = functions[code]
            name = code.co_qualname if hasattr(code, "co_qualname") else code.co_name
            path, line = fn.site
            findings.append(RunFinding(
                path, line, "JL001", RULES["JL001"],
                f"`{name}` ran eagerly: called {fn.calls} times, it dispatched {fn.ops} JAX operations one "
                f"by one ({fn.ops / fn.calls:.3g} per call), {fmt_seconds(fn.seconds)} in all; jit it "
                "(`@jax.jit`, static arguments for its Python values) so that each call runs one compiled program",
                fn.seconds, fn.calls, {"calls": fn.calls, "ops": fn.ops},
            ))  # fmt: skip
        return findings

    # -- timers -------------------------------------------------------------------------------
    def _timer_gaps(self) -> list[tuple[Any, float]]:
        """Each read that found device work running, with how much later that work finished:
        until its last array was ready, the next such read or the end of the block, whichever
        came first (so that the gaps never overlap)."""
        p = self._profile
        reads = sorted(p.timers.reads, key=lambda r: r.at)
        out = []
        for read, after in zip(reads, [r.at for r in reads[1:]] + [p.end]):
            done = p.end if read.done is None else read.done
            out.append((read, max(0.0, min(done, after, p.end) - read.at)))
        return out

    def _timer_findings(self) -> list[RunFinding]:
        p = self._profile
        gaps = {id(read): gap for read, gap in self._timer_gaps()}
        unsynced: dict[Site, list[Any]] = defaultdict(list)
        compiled: dict[Site, dict[Site, list[CompileEvent]]] = defaultdict(lambda: defaultdict(list))
        with_compiles: dict[Site, int] = defaultdict(int)
        for read in p.timers.intervals:
            if read.since is None or read.unsynced:
                unsynced[read.site].append(read)
            if read.since is None:
                continue
            # First compiles of the program's own jitted functions (a rebuilt wrapper is JL007's)
            first = [
                e for e in p.compiles[read.since.compiles : read.compiles]
                if e.new_function and e.site is not None and e.key not in self._rebuilt
            ]  # fmt: skip
            if first:
                with_compiles[read.site] += 1
                for event in first:
                    compiled[read.site][event.site].append(event)  # type: ignore[index]
        findings = []
        for (path, line), reads in unsynced.items():
            n = len(reads)
            total = sum(gaps.get(id(r), 0.0) for r in reads)
            counted = sum(r.unsynced for r in reads)
            left = counted or sum(r.arrays for r in reads)
            times = "once" if n == 1 else f"{n} times"
            if total > 0:
                cost = f"that work finished {fmt_seconds(total)} later{' in all' if n > 1 else ''}"
            else:
                cost = "this device had finished it by the read, so the gap is not measurable here"
            what = (
                f"{counted} array{'s' if counted != 1 else ''} dispatched in it and not waited for" if counted
                else f"{left} array{'s' if left != 1 else ''} dispatched in it still running"
            )  # fmt: skip
            findings.append(RunFinding(
                path, line, "JL006", RULES["JL006"],
                f"the clock read here ended a timed interval {times} with device work it had dispatched not "
                f"waited for ({what}; {cost}): the interval timed the dispatch, not the computation; "
                "call `jax.block_until_ready(...)` on the results before reading the clock "
                "(or time with `jaxlint.runtime.benchmark`)",
                total, n, {"reads": n, "arrays": left, "unsynced": counted},
            ))  # fmt: skip
        # A call site whose first compile fell inside timed intervals: one finding, once per compile.
        calls: dict[Site, dict[int, CompileEvent]] = defaultdict(dict)
        timers: dict[Site, list[int]] = defaultdict(list)
        for end, sites in compiled.items():
            if with_compiles[end] < p.timers.ended.get(end, 0):
                continue  # a timer started anew in a loop: only its first interval paid the compile
            for site, events in sites.items():
                calls[site].update((id(e), e) for e in events)
                timers[site].append(end[1])
        reported = {(f.path, f.line) for f in findings}
        for (path, line), by_id in calls.items():
            if (path, line) in reported:
                continue  # the line also ended an interval: that finding stands for it
            events = list(by_id.values())
            names = ", ".join(dict.fromkeys(f"`{e.name}`" for e in events))
            seconds = sum(e.seconds for e in events)
            at = ", ".join(str(n) for n in sorted(set(timers[(path, line)])))
            findings.append(RunFinding(
                path, line, "JL006", RULES["JL006"],
                f"{names} was first called here inside the interval timed by the clock read at line {at}, "
                f"so the interval includes its tracing and compile ({fmt_seconds(seconds)}); call it once on "
                "the same inputs before starting the timer (or time with `jaxlint.runtime.benchmark`)",
                seconds, len(events), {"compiles": len(events), "timers": sorted(set(timers[(path, line)]))},
            ))  # fmt: skip
        return findings

    # -- per line -----------------------------------------------------------------------------
    def lines(self) -> list[dict[str, Any]]:
        """Everything measured at each user line, costliest first."""
        table: dict[Site, dict[str, Any]] = defaultdict(lambda: defaultdict(float))
        for event in self._profile.compiles:
            if event.site is not None:
                row = table[event.site]
                row["compiles"] += 1
                row["compile_seconds"] += event.seconds
        for site, sync in self._profile.syncs.items():
            row = table[site]
            row["host_syncs"] += sync.count
            row["host_waits"] += sync.waits
            row["host_waits_running"] += sync.pending
            row["host_wait_seconds"] += sync.wait_seconds
        for site, call in self._profile.filter_jit.items():
            row = table[site]
            row["filter_jit_calls"] += call.calls
            row["filter_jit_overhead_seconds"] += call.overhead
        for site, call in self._profile.tree_at.items():
            row = table[site]
            row["tree_at_calls"] += call.calls
            row["tree_at_seconds"] += call.seconds
        for site, count in self._profile.timers.counts.items():
            table[site]["timer_reads"] += count
        for read, gap in self._timer_gaps():
            row = table[read.site]
            row["timer_reads_running"] += 1
            row["timer_gap_seconds"] += gap
        for read in self._profile.timers.intervals:
            if read.unsynced:
                table[read.site]["timer_intervals_unsynced"] += 1
        for fn in self._profile.eager.functions.values():
            if fn.own_ops and not fn.code.co_name.startswith("<"):
                row = table[fn.site]
                row["eager_calls"] += fn.calls
                row["eager_ops"] += fn.own_ops
                row["eager_seconds"] += fn.own_seconds
        out = []
        for (path, line), row in table.items():
            cost = (
                row.get("compile_seconds", 0.0) + row.get("host_wait_seconds", 0.0)
                + row.get("filter_jit_overhead_seconds", 0.0) + row.get("tree_at_seconds", 0.0)
                + row.get("eager_seconds", 0.0) + row.get("timer_gap_seconds", 0.0)
            )  # fmt: skip
            counts = {k: (int(v) if not k.endswith("seconds") else v) for k, v in row.items()}
            out.append({"path": path, "line": line, "seconds": cost, **counts})
        return sorted(out, key=lambda r: (-r["seconds"], r["path"], r["line"]))

    def to_dict(self) -> dict[str, Any]:
        """The measurements as plain data (what `jaxlint run --output-format json` builds on)."""
        return {
            "device": self.device,
            "wall_seconds": self.wall_seconds,
            "compile_seconds": self.compile_seconds,
            "compiles": len(self._profile.compiles),
            "host_wait_seconds": self.host_wait_seconds,
            "findings": [f.to_dict() for f in self.findings],
            "lines": self.lines(),
        }

    def summary(self, top: int = 5, relative_to: str | None = None) -> str:
        """A short table: wall time, time compiling, waiting on the host and in wrappers, and the
        costliest lines."""
        p = self._profile
        wall = self.wall_seconds or 1e-12

        def pct(seconds: float) -> str:
            return f"{fmt_seconds(seconds):>9} {seconds / wall:>4.0%}"

        syncs = sum(s.count for s in p.syncs.values())
        waits = sum(s.waits for s in p.syncs.values())
        fj_calls = sum(c.calls for c in p.filter_jit.values())
        ta_calls = sum(c.calls for c in p.tree_at.values())
        recompiles = sum(f.count for f in self.findings if f.code in ("JL004", "JL007", "JL008", "JL100"))
        d = self.device
        rows = [
            f"jaxlint run: {fmt_seconds(self.wall_seconds)} wall on {d.get('device_kind', '?')} "
            f"({d.get('platform', '?')}, {d.get('device_count', '?')} device(s), jax {d.get('jax_version', '?')})",
            f"  compiling          {pct(self.compile_seconds)}  {len(p.compiles)} compiles, {recompiles} avoidable",
            f"  waiting on device  {pct(self.host_wait_seconds)}  {waits} of {syncs} host conversions waited",
        ]
        if fj_calls:
            rows.append(f"  filter_jit wrapper {pct(sum(c.overhead for c in p.filter_jit.values()))}  {fj_calls} calls")
        if ta_calls:
            rows.append(f"  eqx.tree_at        {pct(sum(c.seconds for c in p.tree_at.values()))}  {ta_calls} calls")
        lines = [r for r in self.lines() if r["seconds"] > 0][:top]
        if lines:
            rows.append("  top lines by cost:")
            for r in lines:
                parts = []
                if r.get("compiles"):
                    parts.append(f"{r['compiles']} compiles {fmt_seconds(r['compile_seconds'])}")
                if r.get("host_waits"):
                    parts.append(f"{r['host_waits']} waits {fmt_seconds(r['host_wait_seconds'])}")
                if r.get("filter_jit_calls"):
                    parts.append(f"{r['filter_jit_calls']} filter_jit calls")
                if r.get("tree_at_calls"):
                    parts.append(f"{r['tree_at_calls']} tree_at calls")
                if r.get("timer_intervals_unsynced"):
                    parts.append(f"{r['timer_intervals_unsynced']} timed intervals with work not waited for")
                if r.get("eager_ops"):
                    parts.append(f"{r['eager_ops']} eager ops in {r['eager_calls']} calls")
                where = f"{_display(r['path'], relative_to)}:{r['line']}"
                rows.append(f"    {where:<40} {fmt_seconds(r['seconds']):>9}  {', '.join(parts)}")
        return "\n".join(rows)


def _display(path: str, relative_to: str | None) -> str:
    base = relative_to or os.getcwd()
    try:
        rel = os.path.relpath(path, base)
    except ValueError:  # another drive on Windows
        return path
    return path if rel.startswith("..") else rel
