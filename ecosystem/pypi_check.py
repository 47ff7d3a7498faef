"""The CI ecosystem check: pinned JAX libraries from the package index, linted with every rule.

    python ecosystem/pypi_check.py            # exit 1 on an internal error or a changed finding
    python ecosystem/pypi_check.py --update   # rewrite pypi_baseline.json (review it like a golden file)

Downloads the wheels of PACKAGES (no dependencies, pure-Python wheels, pinned versions) into
`$JAXLINT_ECOSYSTEM_CACHE/pypi`, unpacks them, lints each with `--select JL`, and compares the
findings with `pypi_baseline.json`: a finding is (package, path, line, column, code); the
baseline also records each message for the reviewer. Needs the package index, not GitHub.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import HERE, cache_dir, run_jaxlint  # noqa: E402

PACKAGES = {
    "flax": "0.12.0",
    "optax": "0.2.5",
    "equinox": "0.13.0",
    "diffrax": "0.7.0",
    "numpyro": "0.19.0",
    "blackjax": "1.2.5",
    "chex": "0.1.90",
    "distrax": "0.1.5",
}
BASELINE = HERE / "pypi_baseline.json"


def unpacked(package: str, version: str, folder: Path) -> Path:
    """The unpacked wheel of package==version, downloaded once."""
    target = folder / f"{package}-{version}"
    if (target / ".complete").is_file():
        return target
    wheels = folder / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
         "--python-version", "3.11", "-d", str(wheels), f"{package}=={version}"],
        check=True,
    )
    prefix = package.replace("-", "_").lower() + "-" + version
    (wheel,) = [w for w in wheels.glob("*.whl") if w.name.lower().startswith(prefix)]
    shutil.rmtree(target, ignore_errors=True)
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.namelist():
            if member.endswith(".py"):
                archive.extract(member, target)
    (target / ".complete").write_text(wheel.name + "\n")
    return target


def lint(folder: Path, jobs: int) -> tuple[list[dict], list[str]]:
    completed = run_jaxlint(folder, jobs)
    findings = [json.loads(line) for line in completed.stdout.splitlines()]
    errors = [line for line in completed.stderr.splitlines() if line.strip()]
    if completed.returncode not in (0, 1):
        errors.append(f"jaxlint exited {completed.returncode}")
    return findings, errors


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--update", action="store_true", help="rewrite the baseline")
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    folder = cache_dir() / "pypi"
    current: list[dict] = []
    errors: list[str] = []
    files = 0
    for package, version in PACKAGES.items():
        root = unpacked(package, version, folder)
        files += sum(1 for _ in root.rglob("*.py"))
        findings, problems = lint(root, args.jobs)
        errors.extend(f"{package}: {problem}" for problem in problems)
        for item in findings:
            current.append({
                "package": f"{package}=={version}", "path": item["path"], "line": item["line"],
                "column": item["column"], "code": item["code"], "message": item["message"],
            })
    current.sort(key=lambda f: (f["package"], f["path"], f["line"], f["column"], f["code"]))
    elapsed = time.perf_counter() - start
    print(f"{len(PACKAGES)} packages, {files} files, {len(current)} findings, "
          f"{len(errors)} errors in {elapsed:.0f} s")
    for error in errors:
        print(f"error: {error}")
    if args.update:
        BASELINE.write_text(json.dumps(current, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {BASELINE.name}")
        return 1 if errors else 0

    def key(f: dict) -> tuple:
        return (f["package"], f["path"], f["line"], f["column"], f["code"])

    baseline = json.loads(BASELINE.read_text(encoding="utf-8"))
    expected = {key(f): f for f in baseline}
    found = {key(f): f for f in current}
    for site in sorted(set(found) - set(expected)):
        f = found[site]
        print(f"new finding: {f['package']} {f['path']}:{f['line']}:{f['column']} {f['code']} {f['message'][:140]}")
    for site in sorted(set(expected) - set(found)):
        f = expected[site]
        print(f"finding gone: {f['package']} {f['path']}:{f['line']}:{f['column']} {f['code']}")
    changed = set(found) != set(expected)
    if changed:
        print("the findings differ from ecosystem/pypi_baseline.json: review them, then "
              "`python ecosystem/pypi_check.py --update` and commit the baseline")
    return 1 if errors or changed else 0


if __name__ == "__main__":
    sys.exit(main())
