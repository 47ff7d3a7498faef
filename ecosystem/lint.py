"""Lint the exported corpus with every rule and collect the findings as sites.

    python ecosystem/lint.py [--rev REV] [--preview] [--alone] [--split dev|test] [-j N] [--out FILE]

Without `--rev` it lints with the jaxlint of this checkout (its working tree); `--rev REV`
installs that git revision of this repository into a scratch folder first, so two versions can
be compared (`score.py --diff`). Results are kept per (jaxlint source, repository commit) under
`$JAXLINT_ECOSYSTEM_CACHE/results/`, so scoring again after editing labels costs nothing;
`--preview` lints with jaxlint's `--preview`, `--alone` lints each file knowing only itself, as
if there were no project analysis (the results of both are kept apart). Each finding keeps the
applicability of the fix jaxlint offers for it (`safe`, `unsafe`, `display-only`, `none`).

A finding's site is (repo, path, line, code); in a notebook the path is `file.ipynb#CELL` and the
line is the line within that cell, as jaxlint reports it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Repo, cache_dir, load_corpus, run_jaxlint  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SOURCE_FOLDERS = ("jaxlint", "rules")
ALONE = Path(__file__).resolve().parent / "_alone"  # its sitecustomize lints each file alone


@dataclass(frozen=True)
class Finding:
    repo: str
    path: str
    line: int
    code: str
    message: str
    # How far jaxlint's fix for it can be trusted: "safe", "unsafe", "display-only", "none"
    # (no fix offered); None where the result was cached before fixes were recorded.
    fix: str | None = None

    @property
    def site(self) -> tuple[str, str, int, str]:
        return (self.repo, self.path, self.line, self.code)


@dataclass
class LintRun:
    findings: list[Finding]
    errors: list[str]  # internal errors and crashes, one line each


class Linter:
    """A jaxlint to run: this checkout, or a revision installed into a scratch folder;
    `preview`: run with `--preview`."""

    def __init__(
        self, rev: str | None = None, *, preview: bool = False, fixes: bool = False, alone: bool = False
    ) -> None:
        self.rev = rev
        self.preview = preview
        self.alone = alone  # each file linted knowing only itself (`_alone/sitecustomize.py`)
        self.fixes = fixes  # lint again where the cached result predates fix applicabilities
        self._scratch: Path | None = None
        if rev is None:
            changed = _git("status", "--porcelain", "--", *SOURCE_FOLDERS).strip()
            self.key = _tree_hash(ROOT) if changed else _source_key("HEAD")
            # A snapshot of the working tree: edits made while the corpus is linted must not
            # mix into results stored under this key.
            self._scratch = Path(tempfile.mkdtemp(prefix="jaxlint-worktree-"))
            _lay_out_package(ROOT, self._scratch / "site")
            self.pythonpath = str(self._scratch / "site")
        else:
            commit = _git("rev-parse", "--verify", f"{rev}^{{commit}}").strip()
            self.key = _source_key(commit)
            self._scratch = Path(tempfile.mkdtemp(prefix="jaxlint-rev-"))
            source = self._scratch / "src"
            source.mkdir()
            archive = subprocess.run(
                ["git", "-C", str(ROOT), "archive", "--format=tar", commit],
                capture_output=True,
                check=True,
            ).stdout
            subprocess.run(["tar", "-x", "-C", str(source)], input=archive, check=True)
            site = self._scratch / "site"
            _lay_out_package(source, site)
            self.pythonpath = str(site)

    def close(self) -> None:
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)

    def lint(self, repo: Repo, jobs: int) -> LintRun:
        variant = self.key[:16] + ("-preview" if self.preview else "") + ("-alone" if self.alone else "")
        stored = cache_dir() / "results" / variant / f"{repo.folder.name}@{repo.commit[:12]}.json"
        if stored.is_file():
            data = json.loads(stored.read_text())
            if data.get("fixes") or not self.fixes:
                return LintRun([Finding(**item) for item in data["findings"]], data["errors"])
        if not repo.folder.is_dir():
            raise LookupError(f"{repo.name} is not exported: run ecosystem/export.py first")
        pythonpath = os.pathsep.join([self.pythonpath, str(ALONE)]) if self.alone else self.pythonpath
        completed = run_jaxlint(repo.folder, jobs, pythonpath, preview=self.preview)
        run = LintRun([], [])
        for line in completed.stdout.splitlines():
            item = json.loads(line)
            path = item["path"]
            if item.get("cell") is not None:
                path = f"{path}#{item['cell']}"
            if item["code"] == "JL000":
                continue  # a file that does not parse is a fact about the file, not a rule
            fix = (item.get("fix") or {}).get("applicability", "none")
            run.findings.append(Finding(repo.name, path, item["line"], item["code"], item["message"], fix))
        for line in completed.stderr.splitlines():
            if "internal error" in line or "Traceback" in line:
                run.errors.append(f"{repo.name}: {line.strip()}")
        unreadable = [line for line in completed.stderr.splitlines() if line.startswith("jaxlint: error: ")]
        if completed.returncode not in (0, 1) and not (completed.returncode == 2 and unreadable):
            # exit 2 with a one-line error per file is a file jaxlint cannot read (an empty
            # notebook): a fact about the corpus, reported, not a fault of the linter
            run.errors.append(f"{repo.name}: jaxlint exited {completed.returncode}")
        stored.parent.mkdir(parents=True, exist_ok=True)
        stored.write_text(json.dumps({
            "findings": [f.__dict__ for f in run.findings], "errors": run.errors, "fixes": True,
        }))
        return run


def lint_corpus(linter: Linter, repos: list[Repo], jobs: int, progress: bool = True) -> LintRun:
    total = LintRun([], [])
    for repo in repos:
        run = linter.lint(repo, jobs)
        total.findings.extend(run.findings)
        total.errors.extend(run.errors)
        if progress:
            print(f"  {repo.name}: {len(run.findings)} findings", file=sys.stderr)
    return total


def _lay_out_package(source: Path, site: Path) -> None:
    """The import layout of pyproject.toml's package-dir (`rules/` is `jaxlint.rules`, ...),
    made by copying: no build step, so any revision can be run from a scratch folder."""
    shutil.copytree(source / "jaxlint", site / "jaxlint")
    for folder in ("rules", "runtime", "fixtures"):
        if (source / folder).is_dir():
            shutil.copytree(source / folder, site / "jaxlint" / folder)


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True).stdout


def _source_key(commit: str) -> str:
    """The linter's source at `commit`, named by its git trees: revisions that differ only
    outside jaxlint/ and rules/ share their lint results."""
    trees = [_git("rev-parse", f"{commit}:{folder}").strip() for folder in SOURCE_FOLDERS]
    return "git-" + hashlib.sha256(" ".join(trees).encode()).hexdigest()


def _tree_hash(root: Path) -> str:
    """A hash of the linter's own source files as they are on disk now (its Python and its
    data: `jaxlint/library.toml` decides what rules know)."""
    digest = hashlib.sha256()
    for folder in SOURCE_FOLDERS:
        files = [*(root / folder).rglob("*.py"), *(root / folder).rglob("*.toml")]
        for path in sorted(files):
            digest.update(str(path.relative_to(root)).encode())
            digest.update(path.read_bytes())
    return "tree-" + digest.hexdigest()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rev", help="a git revision of this repository (default: the working tree)")
    parser.add_argument("--preview", action="store_true", help="lint with jaxlint's --preview")
    parser.add_argument("--alone", action="store_true", help="lint each file knowing only itself")
    parser.add_argument("--split", choices=("dev", "test"))
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--out", type=Path, help="write the findings here as JSON lines")
    args = parser.parse_args(argv)
    corpus = load_corpus()
    repos = [r for r in corpus.repos if not args.split or r.split == args.split]
    linter = Linter(args.rev, preview=args.preview, alone=args.alone)
    try:
        run = lint_corpus(linter, repos, args.jobs)
    finally:
        linter.close()
    if args.out:
        with args.out.open("w", encoding="utf-8") as handle:
            for finding in run.findings:
                handle.write(json.dumps(finding.__dict__) + "\n")
    for error in run.errors:
        print(error, file=sys.stderr)
    print(f"{len(run.findings)} findings, {len(run.errors)} internal errors", file=sys.stderr)
    return 1 if run.errors else 0


if __name__ == "__main__":
    sys.exit(main())
