"""Packaging: the wheel ships what users import, `jaxlint check` never imports jax, and the
pre-commit hooks work as a user installs them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from pathlib import Path

import pytest


ROOT = Path(__file__).resolve().parents[1]
JAX_PACKAGES = {"jax", "jaxlib", "equinox"}

LOOP = textwrap.dedent(
    """\
    import equinox as eqx


    def apply_plan(model, plan):
        for getter, layer in plan:
            model = eqx.tree_at(getter, model, layer)
        return model


    for batch in loader:
        model = apply_plan(model, batch)
    """
)
LOOP_BATCHED = textwrap.dedent(
    """\
    import equinox as eqx


    def apply_plan(model, plan):
        getters = [getter for getter, _ in plan]
        layers = [layer for _, layer in plan]
        return eqx.tree_at(lambda m: [g(m) for g in getters], model, layers)


    for batch in loader:
        model = apply_plan(model, batch)
    """
)
CHAIN = textwrap.dedent(
    """\
    import equinox as eqx


    def reset(model, weight, bias):
        model = eqx.tree_at(lambda m: m.head.weight, model, weight)
        model = eqx.tree_at(lambda m: m.head.bias, model, bias)
        return model


    for batch in loader:
        model = reset(model, *batch)
    """
)


def _run(args: list[str], **kwargs) -> subprocess.CompletedProcess[str]:
    kwargs.setdefault("timeout", 600)
    return subprocess.run(args, capture_output=True, text=True, **kwargs)


def _snapshot(destination: Path) -> Path:
    """Copy the project's working tree (tracked and untracked, not ignored) to `destination`."""
    listing = None
    if shutil.which("git") and (ROOT / ".git").exists():
        result = _run(["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=ROOT)
        if result.returncode == 0:
            listing = [name for name in result.stdout.split("\0") if name]
    if listing is None:
        ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "dist", ".*cache*", ".git", ".venv", ".ci-venv")
        shutil.copytree(ROOT, destination, ignore=ignore)
        return destination
    for name in listing:
        source = ROOT / name
        if source.is_file():  # a tracked file deleted in the working tree is skipped
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination / name)
    return destination


def _source_fixtures() -> set[str]:
    return {p.relative_to(ROOT / "fixtures").as_posix() for p in (ROOT / "fixtures").glob("*/*.py")}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("wheel")
    source = _snapshot(work / "src")
    result = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(work / "dist"), str(source)])
    assert result.returncode == 0, result.stdout + result.stderr
    (built,) = (work / "dist").glob("jaxlint_perf-*.whl")
    return built


@pytest.mark.slow
@pytest.mark.xdist_group("wheel")
def test_wheel_contents(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"jaxlint/py.typed", "jaxlint/runtime/py.typed", "jaxlint/rules/__init__.py", "jaxlint/library.toml"} <= names
    assert {"jaxlint/fixtures/__init__.py", "jaxlint/runtime/__init__.py", "jaxlint/__main__.py"} <= names
    fixtures = _source_fixtures()
    assert fixtures, "no fixtures/<slug>/*.py in the source tree"
    assert {f"jaxlint/fixtures/{name}" for name in fixtures} <= names
    assert not any(name.startswith(("rules/", "runtime/", "fixtures/", "tests/")) for name in names)


@pytest.mark.slow
@pytest.mark.xdist_group("wheel")
def test_wheel_installs_and_imports(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    result = _run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)])
    assert result.returncode == 0, result.stdout + result.stderr
    bad = tmp_path / "bad.py"
    bad.write_text(LOOP, encoding="utf-8")
    script = textwrap.dedent(
        f"""\
        import importlib.resources, json, subprocess, sys
        import jaxlint, jaxlint.rules, jaxlint.runtime, jaxlint.fixtures
        target = {str(target)!r}
        for module in (jaxlint, jaxlint.rules, jaxlint.runtime, jaxlint.fixtures):
            assert module.__file__.startswith(target), module.__file__
        root = importlib.resources.files("jaxlint.fixtures")
        fixtures = sorted(
            f"{{d.name}}/{{f.name}}" for d in root.iterdir() if d.is_dir() and d.name != "__pycache__"
            for f in d.iterdir() if f.name.endswith(".py")
        )
        typed = [importlib.resources.files(p).joinpath("py.typed").is_file() for p in ("jaxlint", "jaxlint.runtime")]
        check = subprocess.run([sys.executable, "-S", "-m", "jaxlint", "check", "--no-cache", {str(bad)!r}],
                               capture_output=True, text=True)
        print(json.dumps({{"fixtures": fixtures, "typed": typed, "rc": check.returncode, "out": check.stdout}}))
        """
    )
    # -S: no site-packages processing, so no editable install of the checkout is visible; only
    # the wheel's target and the directories holding the dependencies are on the path.
    dependencies = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(target), *dependencies])}
    result = _run([sys.executable, "-S", "-c", script], env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert set(report["fixtures"]) == _source_fixtures()
    assert report["typed"] == [True, True]
    assert report["rc"] == 1 and "JL003" in report["out"], report


def _imported_top_levels(stderr: str) -> set[str]:
    """Top-level package names from `PYTHONPROFILEIMPORTTIME` lines (all processes)."""
    names = set()
    for line in stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            names.add(name.split(".")[0])
    return names


@pytest.fixture
def lint_tree(tmp_path: Path) -> Path:
    """Enough files to start the process pool; they import jax, which linting must not do."""
    tree = tmp_path / "src"
    tree.mkdir()
    for index in range(20):
        (tree / f"module_{index}.py").write_text("import jax\nimport jax.numpy as jnp\n" + LOOP, encoding="utf-8")
    return tree


def test_import_time_parser_sees_imports() -> None:
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}
    result = _run([sys.executable, "-c", "import json"], env=env)
    assert "json" in _imported_top_levels(result.stderr)


def test_import_jaxlint_does_not_import_jax() -> None:
    code = "import sys, jaxlint, jaxlint.rules; print(sorted({m.split('.')[0] for m in sys.modules}))"
    result = _run([sys.executable, "-c", code])
    assert result.returncode == 0, result.stderr
    assert not JAX_PACKAGES & set(json.loads(result.stdout.replace("'", '"')))


def test_check_subprocess_does_not_import_jax(lint_tree: Path) -> None:
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}
    command = [sys.executable, "-m", "jaxlint", "check", "--no-cache", "-j", "2", "--output-format", "concise", str(lint_tree)]
    result = _run(command, env=env, cwd=lint_tree.parent)
    assert result.returncode == 1, result.stderr[-2000:]
    assert result.stdout.count("JL003") == 20
    assert not JAX_PACKAGES & _imported_top_levels(result.stderr)


def test_check_and_fix_in_process_do_not_import_jax(lint_tree: Path, tmp_path: Path) -> None:
    report = tmp_path / "modules.json"
    script = textwrap.dedent(
        f"""\
        import json, sys
        from jaxlint._cli import main
        codes = []
        for argv in (["check", "-j", "2", {str(lint_tree)!r}], ["fix", "--diff", "--unsafe-fixes", {str(lint_tree)!r}]):
            try:
                main(argv)
            except SystemExit as exit:
                codes.append(exit.code)
        modules = sorted({{m.split(".")[0] for m in sys.modules}})
        open({str(report)!r}, "w").write(json.dumps({{"codes": codes, "modules": modules}}))
        """
    )
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}
    result = _run([sys.executable, "-c", script], env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    outcome = json.loads(report.read_text())
    assert outcome["codes"] == [1, 1]
    assert not JAX_PACKAGES & set(outcome["modules"])
    assert not JAX_PACKAGES & _imported_top_levels(result.stderr)  # pool workers too


def test_pre_commit_manifest() -> None:
    clientlib = pytest.importorskip("pre_commit.clientlib")
    hooks = {hook["id"]: hook for hook in clientlib.load_manifest(str(ROOT / ".pre-commit-hooks.yaml"))}
    assert set(hooks) == {"jaxlint", "jaxlint-fix"}
    assert hooks["jaxlint"]["entry"] == "jaxlint check --force-exclude"
    assert hooks["jaxlint-fix"]["entry"] == "jaxlint fix --force-exclude"
    assert hooks["jaxlint"]["types_or"] == ["python", "pyi", "jupyter"]
    assert hooks["jaxlint-fix"]["types_or"] == ["python", "pyi", "jupyter"]
    for hook in hooks.values():
        assert hook["language"] == "python"
        assert hook["pass_filenames"] and not hook["always_run"] and not hook["additional_dependencies"]


@pytest.mark.slow
def test_pre_commit_hooks(tmp_path: Path) -> None:
    """Install both hooks from a snapshot of this repository, as a user's config would."""
    pytest.importorskip("pre_commit")
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    git_env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
        "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"),
    }

    def git(cwd: Path, *args: str) -> str:
        result = _run(["git", *args], cwd=cwd, env=git_env)
        assert result.returncode == 0, result.stderr
        return result.stdout.strip()

    hook_repo = _snapshot(tmp_path / "jaxlint")
    git(hook_repo, "init", "-q")
    git(hook_repo, "add", "-A")
    git(hook_repo, "commit", "-q", "-m", "snapshot")
    rev = git(hook_repo, "rev-parse", "HEAD")

    user = tmp_path / "user"
    user.mkdir()
    git(user, "init", "-q")
    (user / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {hook_repo.as_posix()}\n    rev: {rev}\n    hooks:\n      - id: jaxlint\n      - id: jaxlint-fix\n",
        encoding="utf-8",
    )
    (user / "notes.txt").write_text("no python here\n", encoding="utf-8")
    git(user, "add", "-A")

    def pre_commit(*args: str) -> subprocess.CompletedProcess[str]:
        return _run([sys.executable, "-m", "pre_commit", "run", "--color", "never", *args], cwd=user, env=git_env)

    # No Python files: both hooks are skipped without running, and the run passes.
    result = pre_commit("--all-files")
    assert result.returncode == 0, result.stdout
    assert result.stdout.count("(no files to check)Skipped") == 2, result.stdout

    # The hook environment holds jaxlint and its core dependencies, never jax.
    (environment,) = Path(git_env["PRE_COMMIT_HOME"]).glob("repo*/py_env-*")
    installed = {p.name.split("-")[0].lower() for p in environment.glob("lib/python*/site-packages/*")}
    assert {"jaxlint", "libcst", "click", "rich"} <= installed
    assert not JAX_PACKAGES & installed

    (user / "model.py").write_text(LOOP, encoding="utf-8")
    git(user, "add", "model.py")
    result = pre_commit("jaxlint", "--all-files")
    assert result.returncode == 1, result.stdout
    assert "model.py:6:" in result.stdout and "JL003" in result.stdout

    (user / "model.py").write_text(LOOP_BATCHED, encoding="utf-8")
    git(user, "add", "model.py")
    result = pre_commit("jaxlint", "--all-files")
    assert result.returncode == 0, result.stdout

    (user / "reset.py").write_text(CHAIN, encoding="utf-8")
    git(user, "add", "reset.py")
    result = pre_commit("jaxlint-fix", "--all-files")
    assert result.returncode == 1, result.stdout
    assert "files were modified by this hook" in result.stdout
    fixed = (user / "reset.py").read_text(encoding="utf-8")
    assert fixed.count("eqx.tree_at(") == 1 and "[m.head.weight, m.head.bias]" in fixed
    git(user, "add", "reset.py")
    result = pre_commit("--all-files")
    assert result.returncode == 0, result.stdout


def test_distribution_name_is_ours_and_the_readme_installs_it() -> None:
    """`jaxlint` on the package index is an unrelated project: the distribution has its own
    name, and no install line of the README fetches the other one."""
    import re

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["name"] == "jaxlint-perf"
    assert project["scripts"] == {"jaxlint": "jaxlint._entry:main"}
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    installs = re.findall(r"^\s*(?:\S*/)?pip install (.+)$", readme, flags=re.MULTILINE)
    assert installs
    for line in installs:
        target = line.split("#")[0].split("&&")[0].replace("-q", "").replace("-e", "").strip().strip('"')
        assert not re.match(r"jaxlint\b(?!-perf)", target), line
