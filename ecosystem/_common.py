"""What the ecosystem scripts share: the pinned corpus, where it is exported, the labels."""

from __future__ import annotations

import csv
import os
import random
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

HERE = Path(__file__).resolve().parent
REPOS_TOML = HERE / "repos.toml"
LABELS_TSV = HERE / "labels.tsv"
CANDIDATES_TSV = HERE / "candidates.tsv"

# Labels are facts about public code: where (repo, path, line), which rule, the verdict and why.
LABEL_FIELDS = ("repo", "path", "line", "code", "verdict", "source", "reason")
VERDICTS = ("TP", "FP")
SOURCES = ("finding", "candidate")
RULE_CODES = tuple(f"JL00{n}" for n in range(1, 9))


def cache_dir() -> Path:
    """The folder the corpus is exported to: outside the repository, never committed."""
    configured = os.environ.get("JAXLINT_ECOSYSTEM_CACHE")
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".cache" / "jaxlint-ecosystem"


def run_jaxlint(
    folder: Path, jobs: int, pythonpath: str | None = None, *, preview: bool = False
) -> subprocess.CompletedProcess[str]:
    """`jaxlint check` with every rule over `folder`, as JSON lines (from `folder`, so paths are
    relative to it; `pythonpath` puts another copy of jaxlint first; `preview`: with
    `--preview`)."""
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    return subprocess.run(
        [sys.executable, "-m", "jaxlint", "check", "--output-format", "jsonl", "--no-cache",
         "--exit-zero", "-q", "--select", "JL", "-j", str(jobs), *(["--preview"] if preview else []), "."],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
    )


def repo_folder(name: str) -> str:
    """`owner/name` as one folder name (`owner+name`, the fetch tool's spelling)."""
    return name.replace("/", "+")


@dataclass(frozen=True)
class Repo:
    name: str
    commit: str
    split: str
    kind: str
    about: str
    audited: bool
    batch: int
    rotated: str = ""  # why a repository drawn to `test` was moved to `dev` (its results were read)

    @property
    def folder(self) -> Path:
        return cache_dir() / repo_folder(self.name)


@dataclass(frozen=True)
class Draw:
    """How one batch of repositories was split: `test_size` drawn with `seed`."""

    batch: int
    seed: int
    test_size: int


@dataclass(frozen=True)
class Corpus:
    draws: tuple[Draw, ...]
    repos: tuple[Repo, ...]

    def split(self, split: str) -> list[Repo]:
        return [repo for repo in self.repos if repo.split == split]

    def by_name(self) -> dict[str, Repo]:
        return {repo.name: repo for repo in self.repos}


def load_corpus(path: Path = REPOS_TOML) -> Corpus:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    repos = tuple(
        Repo(
            name=entry["name"],
            commit=entry["commit"],
            split=entry["split"],
            kind=entry["kind"],
            about=entry.get("about", ""),
            audited=bool(entry.get("audited", False)),
            batch=int(entry["batch"]),
            rotated=str(entry.get("rotated", "")),
        )
        for entry in data["repo"]
    )
    draws = tuple(
        Draw(batch=int(d["batch"]), seed=int(d["seed"]), test_size=int(d["test-size"]))
        for d in data["draw"]
    )
    return Corpus(draws=draws, repos=repos)


def draw_test_split(names_never_audited: list[str], seed: int, size: int) -> list[str]:
    """The `test` split: `size` repositories drawn at random from those no audit has read.

    A repository an earlier audit tuned rules on cannot measure unseen code, so only the
    never-audited ones are drawn from; everything else is `dev`.
    """
    return sorted(random.Random(seed).sample(sorted(names_never_audited), size))


@dataclass(frozen=True)
class Label:
    repo: str
    path: str
    line: int
    code: str
    verdict: str
    source: str
    reason: str

    @property
    def site(self) -> tuple[str, str, int, str]:
        return (self.repo, self.path, self.line, self.code)


class LabelError(ValueError):
    pass


def load_labels(path: Path = LABELS_TSV) -> list[Label]:
    """Read `labels.tsv`, refusing malformed rows and a site judged twice."""
    labels: list[Label] = []
    seen: dict[tuple[str, str, int, str], int] = {}
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
        if tuple(reader.fieldnames or ()) != LABEL_FIELDS:
            raise LabelError(f"{path}: header must be {' '.join(LABEL_FIELDS)}")
        for number, row in enumerate(reader, start=2):
            where = f"{path.name}:{number}"
            if None in row or any(row[field] is None for field in LABEL_FIELDS):
                raise LabelError(f"{where}: expected {len(LABEL_FIELDS)} tab-separated fields")
            if row["verdict"] not in VERDICTS:
                raise LabelError(f"{where}: verdict must be TP or FP, not {row['verdict']!r}")
            if row["source"] not in SOURCES:
                raise LabelError(f"{where}: source must be finding or candidate")
            if row["code"] not in RULE_CODES:
                raise LabelError(f"{where}: unknown rule code {row['code']!r}")
            try:
                line = int(row["line"])
            except ValueError:
                raise LabelError(f"{where}: line must be a number") from None
            label = Label(
                repo=row["repo"],
                path=row["path"],
                line=line,
                code=row["code"],
                verdict=row["verdict"],
                source=row["source"],
                reason=row["reason"].strip(),
            )
            if label.site in seen:
                raise LabelError(f"{where}: site already judged on line {seen[label.site]}")
            seen[label.site] = number
            labels.append(label)
    return labels
