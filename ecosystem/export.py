"""Export the pinned corpus: each repository's `.py` and `.ipynb` files at its pinned commit.

    python ecosystem/export.py [--mirrors DIR] [--repo OWNER/NAME ...] [--split dev|test]

Reads bare git mirrors named `OWNER+NAME/repo` under `--mirrors` (default `/work/.mirror`, or
`$JAXLINT_ECOSYSTEM_MIRRORS`), which is where the fetch tool of the search library puts them,
and writes the files of each pinned commit to `$JAXLINT_ECOSYSTEM_CACHE/OWNER+NAME/`
(default `~/.cache/jaxlint-ecosystem`), outside this repository. A repository already exported
at its pinned commit is skipped. Exits 1 if a mirror or a pinned commit is missing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Repo, cache_dir, load_corpus, repo_folder  # noqa: E402

SUFFIXES = (".py", ".ipynb")
STAMP = ".jaxlint-ecosystem-commit"


def default_mirrors() -> Path:
    return Path(os.environ.get("JAXLINT_ECOSYSTEM_MIRRORS", "/work/.mirror"))


def mirror_of(mirrors: Path, name: str) -> Path:
    folder = mirrors / repo_folder(name)
    for git_dir in (folder / "repo" / ".git", folder / "repo"):  # some snapshots are clones with a work tree
        if git_dir.is_dir():
            return git_dir
    return folder


def export(repo: Repo, mirrors: Path) -> str:
    """Export one repository; return a one-line account of what happened."""
    target = repo.folder
    stamp = target / STAMP
    if stamp.is_file() and stamp.read_text().strip() == repo.commit:
        return f"{repo.name}: already exported at {repo.commit[:12]}"
    git_dir = mirror_of(mirrors, repo.name)
    if not git_dir.is_dir():
        raise LookupError(f"{repo.name}: no mirror at {git_dir} (fetch github:{repo.name} first)")
    has_commit = subprocess.run(
        ["git", f"--git-dir={git_dir}", "cat-file", "-e", f"{repo.commit}^{{commit}}"],
        capture_output=True,
    )
    if has_commit.returncode != 0:
        raise LookupError(f"{repo.name}: the mirror lacks the pinned commit {repo.commit}")
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    count = missing = 0
    for path, data in _blobs(git_dir, repo.commit):
        if data is None:
            missing += 1  # the mirror leaves out files of 4 MiB and more
            continue
        out = staging / path
        if staging.resolve() not in out.resolve().parents:
            continue  # a name that climbs out of the folder
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(data)
        count += 1
    staging.mkdir(parents=True, exist_ok=True)
    (staging / STAMP).write_text(repo.commit + "\n")
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    absent = f" ({missing} too large for the mirror, left out)" if missing else ""
    return f"{repo.name}: exported {count} files at {repo.commit[:12]}{absent}"


def _blobs(git_dir: Path, commit: str):
    """(path, bytes or None when the mirror lacks the blob) for every .py/.ipynb file."""
    listing = subprocess.run(
        ["git", f"--git-dir={git_dir}", "ls-tree", "-r", "-z", commit],
        capture_output=True,
        check=True,
    ).stdout.decode("utf-8", "surrogateescape")
    wanted = []
    for entry in listing.split("\0"):
        if not entry:
            continue
        meta, path = entry.split("\t", 1)
        mode, kind, sha = meta.split()
        if kind == "blob" and mode in ("100644", "100755") and path.endswith(SUFFIXES):
            wanted.append((path, sha))
    request = "".join(f"{sha}\n" for _, sha in wanted).encode()
    output = subprocess.run(
        ["git", f"--git-dir={git_dir}", "cat-file", "--batch"],
        input=request,
        capture_output=True,
        check=True,
    ).stdout
    offset = 0
    for path, _ in wanted:
        newline = output.index(b"\n", offset)
        header = output[offset:newline].split()
        offset = newline + 1
        if header[-1] == b"missing":
            yield path, None
            continue
        size = int(header[2])
        yield path, output[offset : offset + size]
        offset += size + 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirrors", type=Path, default=default_mirrors())
    parser.add_argument("--repo", action="append", default=[], help="only these (repeatable)")
    parser.add_argument("--split", choices=("dev", "test"))
    args = parser.parse_args(argv)
    corpus = load_corpus()
    repos = [
        repo
        for repo in corpus.repos
        if (not args.repo or repo.name in args.repo) and (not args.split or repo.split == args.split)
    ]
    cache_dir().mkdir(parents=True, exist_ok=True)
    failed = 0
    for repo in repos:
        try:
            print(export(repo, args.mirrors))
        except (LookupError, subprocess.CalledProcessError, OSError) as error:
            print(f"error: {error}", file=sys.stderr)
            failed += 1
    print(f"{len(repos) - failed} of {len(repos)} repositories in {cache_dir()}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
