"""Precision and recall of every rule on the labelled corpus, per split, with 95% intervals.

    python ecosystem/score.py [--split dev|test] [--batch N] [--rev REV] [--preview] [--alone] [--fixes] [-v] [-j N]
    python ecosystem/score.py --diff REV_A REV_B
    python ecosystem/score.py --min-precision 0.9 --min-recall 0.6 --min-recall JL007=0.5

Lints the exported corpus (`export.py` first) with this checkout, or `--rev REV` of it, and
matches its findings to `labels.tsv` (see README.md for how sites match); `--preview` lints with
jaxlint's `--preview`, to measure what is in preview before it becomes the default; `--alone`
lints each file knowing only itself, to measure what the project analysis (what other modules
define) adds: `--diff REV REV --alone-a` lists what it adds and removes. `--batch N` keeps only
the repositories of batch N (repeatable): the freshest batches are the code the rules were
tuned least on. `-v` lists,
for the dev split only, the findings nobody has judged and the true positives the rules miss:
the test split is counted, never read case by case. The last column counts the true positives
found whose fix `jaxlint fix` applies (safe, or unsafe with `--unsafe-fixes`); `--fixes` lints
again where a cached result predates that column. Thresholds apply to `--threshold-split` (default
test) and make the exit status 1 when a rule is below one; internal errors of jaxlint on the
corpus also exit 1.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RULE_CODES, Label, LabelError, load_corpus, load_labels  # noqa: E402
from lint import Finding, Linter, lint_corpus  # noqa: E402

NEAR = 3  # lines a finding may be from its label and still match it
APPLIED = ("safe", "unsafe")  # the applicabilities `jaxlint fix` applies (unsafe: when asked)
SPLITS = ("dev", "test")


def wilson(successes: int, total: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a proportion (95% by default)."""
    if total == 0:
        return (0.0, 1.0)
    p = successes / total
    denominator = 1 + z * z / total
    centre = (p + z * z / (2 * total)) / denominator
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / denominator
    return (max(0.0, centre - half), min(1.0, centre + half))


def match(findings: list[Finding], labels: list[Label]) -> dict[Finding, Label]:
    """Pair findings with labels of the same repo, path and code: same line first, then the
    nearest within NEAR lines; each label pairs with one finding at most."""
    by_place: dict[tuple[str, str, str], list[Label]] = defaultdict(list)
    for label in labels:
        by_place[(label.repo, label.path, label.code)].append(label)
    paired: dict[Finding, Label] = {}
    taken: set[int] = set()
    pending = []
    for finding in findings:
        candidates = by_place.get((finding.repo, finding.path, finding.code), [])
        exact = [l for l in candidates if l.line == finding.line and id(l) not in taken]
        if exact:
            paired[finding] = exact[0]
            taken.add(id(exact[0]))
        else:
            pending.append(finding)
    for finding in pending:
        candidates = [
            l
            for l in by_place.get((finding.repo, finding.path, finding.code), [])
            if id(l) not in taken and abs(l.line - finding.line) <= NEAR
        ]
        if candidates:
            nearest = min(candidates, key=lambda l: abs(l.line - finding.line))
            paired[finding] = nearest
            taken.add(id(nearest))
    return paired


@dataclass
class RuleScore:
    findings: int = 0
    tp: int = 0
    fp: int = 0
    true_sites: int = 0  # TP labels, from findings and candidates
    found: int = 0  # TP labels some finding matched
    # the true positives found whose fix jaxlint would apply (safe, or unsafe with
    # --unsafe-fixes); None once one of them comes from a result cached before fixes were kept
    fixed: int | None = 0
    unjudged: list[Finding] = field(default_factory=list)
    missed: list[Label] = field(default_factory=list)
    false_alarms: list[tuple[Finding, Label]] = field(default_factory=list)

    @property
    def judged(self) -> int:
        return self.tp + self.fp

    def precision(self) -> float | None:
        return self.tp / self.judged if self.judged else None

    def recall(self) -> float | None:
        return self.found / self.true_sites if self.true_sites else None


def score(findings: list[Finding], labels: list[Label]) -> dict[str, RuleScore]:
    scores = {code: RuleScore() for code in RULE_CODES}
    # Two findings at one site (two values formatted on one line) are one judged site.
    findings = list({finding.site: finding for finding in findings}.values())
    paired = match(findings, labels)
    for finding in findings:
        rule = scores.setdefault(finding.code, RuleScore())
        rule.findings += 1
        label = paired.get(finding)
        if label is None:
            rule.unjudged.append(finding)
        elif label.verdict == "TP":
            rule.tp += 1
            if finding.fix is None or rule.fixed is None:
                rule.fixed = None
            elif finding.fix in APPLIED:
                rule.fixed += 1
        else:
            rule.fp += 1
            rule.false_alarms.append((finding, label))
    matched = {id(label) for label in paired.values()}
    for label in labels:
        if label.verdict != "TP":
            continue
        rule = scores.setdefault(label.code, RuleScore())
        rule.true_sites += 1
        if id(label) in matched:
            rule.found += 1
        else:
            rule.missed.append(label)
    return scores


def _ratio(value: float | None, successes: int, total: int) -> str:
    if value is None:
        return "-"
    low, high = wilson(successes, total)
    return f"{value:.2f} [{low:.2f}, {high:.2f}]"


def table(split: str, scores: dict[str, RuleScore]) -> str:
    lines = [
        f"split {split}",
        f"{'rule':6} {'findings':>8} {'TP':>4} {'FP':>4} {'unjudged':>8}  {'precision [95%]':19} "
        f"{'true sites':>10} {'found':>5}  {'recall [95%]':19}  fixed TP",
    ]
    total = RuleScore()
    for code in sorted(scores):
        s = scores[code]
        for name in ("findings", "tp", "fp", "true_sites", "found"):
            setattr(total, name, getattr(total, name) + getattr(s, name))
        total.fixed = None if total.fixed is None or s.fixed is None else total.fixed + s.fixed
        total.unjudged.extend(s.unjudged)
        lines.append(_row(code, s))
    lines.append(_row("all", total))
    return "\n".join(lines)


def _row(code: str, s: RuleScore) -> str:
    return (
        f"{code:6} {s.findings:>8} {s.tp:>4} {s.fp:>4} {len(s.unjudged):>8}  "
        f"{_ratio(s.precision(), s.tp, s.judged):19} {s.true_sites:>10} {s.found:>5}  "
        f"{_ratio(s.recall(), s.found, s.true_sites):19}  {_fixed(s)}"
    )


def _fixed(s: RuleScore) -> str:
    if s.fixed is None:
        return "?"  # cached before fixes were kept: `--fixes` lints again
    return f"{s.fixed}/{s.tp}" if s.tp else "-"


def _threshold(values: list[str], option: str) -> tuple[float | None, dict[str, float]]:
    default: float | None = None
    per_rule: dict[str, float] = {}
    for value in values:
        code, _, number = value.rpartition("=")
        try:
            figure = float(number)
        except ValueError:
            raise SystemExit(f"error: {option} takes X or CODE=X, not {value!r}") from None
        if code:
            if code not in RULE_CODES:
                raise SystemExit(f"error: {option}: unknown rule code {code!r}")
            per_rule[code] = figure
        else:
            default = figure
    return default, per_rule


def check_thresholds(scores: dict[str, RuleScore], args: argparse.Namespace) -> list[str]:
    failures = []
    for option, values, measure in (
        ("--min-precision", args.min_precision, RuleScore.precision),
        ("--min-recall", args.min_recall, RuleScore.recall),
    ):
        default, per_rule = _threshold(values, option)
        for code in RULE_CODES:
            limit = per_rule.get(code, default)
            value = measure(scores[code])
            if limit is not None and value is not None and value < limit:
                failures.append(f"{code} {option[6:]} {value:.2f} < {limit:.2f} on {args.threshold_split}")
    return failures


def diff(args: argparse.Namespace, repos_by_split: dict[str, list]) -> int:
    rev_a, rev_b = args.diff
    runs = []
    for rev, alone in ((rev_a, args.alone or args.alone_a), (rev_b, args.alone)):
        linter = Linter(None if rev == "WORKTREE" else rev, preview=args.preview, alone=alone)
        try:
            runs.append({
                split: lint_corpus(linter, repos, args.jobs, progress=False)
                for split, repos in repos_by_split.items()
            })
        finally:
            linter.close()
    for split in repos_by_split:
        before = {f.site: f for f in runs[0][split].findings}
        after = {f.site: f for f in runs[1][split].findings}
        gained = sorted(set(after) - set(before))
        lost = sorted(set(before) - set(after))
        counts = Counter(site[3] for site in gained)
        losses = Counter(site[3] for site in lost)
        print(f"split {split}: {len(before)} -> {len(after)} findings, +{len(gained)} -{len(lost)}")
        for code in sorted(set(counts) | set(losses)):
            print(f"  {code}: +{counts[code]} -{losses[code]}")
        if split == "test" and not args.list_test:
            continue  # the test split is counted, not read
        for sign, sites, source in (("+", gained, after), ("-", lost, before)):
            for site in sites:
                f = source[site]
                print(f"  {sign} {f.repo} {f.path}:{f.line} {f.code} {f.message[:120]}")
    errors = [e for run in runs for r in run.values() for e in r.errors]
    for error in errors:
        print(error, file=sys.stderr)
    return 1 if errors else 0


def repos_of(corpus, split: str, batches: list[int]) -> list:  # type: ignore[no-untyped-def]
    """The repositories of `split`, only those of `batches` when any are named."""
    return [repo for repo in corpus.split(split) if not batches or repo.batch in batches]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=SPLITS, action="append", help="default: both")
    parser.add_argument("--rev", help="score this git revision of jaxlint (default: the working tree)")
    parser.add_argument("--diff", nargs=2, metavar=("REV_A", "REV_B"),
                        help="list findings gained and lost from REV_A to REV_B (WORKTREE: this checkout)")
    parser.add_argument("--preview", action="store_true",
                        help="lint with jaxlint's --preview (results cached apart from those without)")
    parser.add_argument("--alone", action="store_true",
                        help="lint each file knowing only itself, not its project (cached apart)")
    parser.add_argument("--alone-a", action="store_true",
                        help="with --diff: lint REV_A with --alone (what the project analysis changes)")
    parser.add_argument("--list-test", action="store_true",
                        help="with --diff: list the test split's findings too (then rotate those repos)")
    parser.add_argument("--fixes", action="store_true",
                        help="lint again where a cached result predates fix applicabilities (the fixed TP column)")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="list unjudged findings, missed true sites and false alarms (dev split only)")
    parser.add_argument("--min-precision", action="append", default=[], metavar="[CODE=]X")
    parser.add_argument("--min-recall", action="append", default=[], metavar="[CODE=]X")
    parser.add_argument("--threshold-split", choices=SPLITS, default="test")
    parser.add_argument("--batch", action="append", type=int, default=[], metavar="N",
                        help="only the repositories of batch N (repeat for several): a figure on the freshest code")
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args(argv)

    corpus = load_corpus()
    splits = args.split or list(SPLITS)
    repos_by_split = {split: repos_of(corpus, split, args.batch) for split in splits}
    if args.diff:
        return diff(args, repos_by_split)
    try:
        labels = load_labels()
    except (LabelError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    split_of = {repo.name: repo.split for repo in corpus.repos}
    unknown = sorted({l.repo for l in labels if l.repo not in split_of})
    if unknown:
        print(f"error: labels name repositories not in repos.toml: {', '.join(unknown)}", file=sys.stderr)
        return 2

    linter = Linter(args.rev, preview=args.preview, fixes=args.fixes, alone=args.alone)
    status = 0
    try:
        for split in splits:
            run = lint_corpus(linter, repos_by_split[split], args.jobs, progress=False)
            names = {repo.name for repo in repos_by_split[split]}
            scores = score(run.findings, [l for l in labels if l.repo in names])
            print(table(split, scores))
            print(f"labelled rows: {sum(1 for l in labels if l.repo in names)}; "
                  f"repositories: {len(repos_by_split[split])}; internal errors: {len(run.errors)}")
            print()
            for error in run.errors:
                print(error, file=sys.stderr)
                status = 1
            if args.verbose and split == "dev":
                for code in sorted(scores):
                    for f in scores[code].unjudged:
                        print(f"unjudged {f.repo}\t{f.path}\t{f.line}\t{f.code}\t{f.message[:150]}")
                    for l in scores[code].missed:
                        print(f"missed   {l.repo}\t{l.path}\t{l.line}\t{l.code}\t{l.reason}")
                    for f, l in scores[code].false_alarms:
                        print(f"FP       {f.repo}\t{f.path}\t{f.line}\t{f.code}\t{l.reason}")
            if split == args.threshold_split:
                failures = check_thresholds(scores, args)
                for failure in failures:
                    print(f"below threshold: {failure}")
                if failures:
                    status = 1
    finally:
        linter.close()
    return status


if __name__ == "__main__":
    sys.exit(main())
