"""`[tool.jaxlint]` in pyproject.toml: where it is found, what it selects and excludes, and
clear errors for anything wrong in it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


LOOP = """\
import equinox as eqx


def f(model, plan):
    for name, layer in plan.items():
        model = eqx.tree_at(lambda m: getattr(m, name), model, layer)
    return model

for batch in loader:
    model = f(model, batch)
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def config(directory: Path, body: str) -> Path:
    return write(directory / "pyproject.toml", "[tool.jaxlint]\n" + body)


def reported(result) -> list[str]:  # type: ignore[no-untyped-def]
    """The paths with findings, from `--output-format json` output."""
    assert result.exit_code in (0, 1), result.output
    return sorted({f["path"] for f in json.loads(result.stdout)})


def assert_config_error(result, *needles: str) -> None:  # type: ignore[no-untyped-def]
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("jaxlint: error: ")
    assert "Traceback" not in result.output
    assert result.stdout == ""
    for needle in needles:
        assert needle in lines[0], lines[0]


def check(run_cli, *args: str):  # type: ignore[no-untyped-def]
    return run_cli("check", "--no-cache", "--output-format", "json", *args)


# -- finding the configuration ---------------------------------------------------------


def test_nearest_config_walking_up_from_the_linted_path(tmp_path: Path, run_cli) -> None:
    config(tmp_path / "repo", 'select = ["JL"]\n')
    config(tmp_path / "repo" / "quiet", 'ignore = ["JL003"]\n')
    write(tmp_path / "repo" / "quiet" / "deep" / "er" / "a.py", LOOP)
    write(tmp_path / "repo" / "loud" / "a.py", LOOP)
    assert reported(check(run_cli, "repo/quiet/deep")) == []
    assert reported(check(run_cli, "repo/quiet/deep/er/a.py")) == []
    assert reported(check(run_cli, "repo/loud")) == ["repo/loud/a.py"]


def test_config_is_found_from_the_path_not_the_working_directory(tmp_path: Path, run_cli) -> None:
    config(tmp_path, "")  # the working directory: everything on
    config(tmp_path / "other", 'ignore = ["tree-at-batch"]\n')
    write(tmp_path / "other" / "a.py", LOOP)
    assert reported(check(run_cli, "other")) == []


def test_pyproject_without_a_jaxlint_table_is_skipped(tmp_path: Path, run_cli) -> None:
    config(tmp_path, 'ignore = ["JL003"]\n')
    write(tmp_path / "pkg" / "pyproject.toml", '[project]\nname = "pkg"\n')
    write(tmp_path / "pkg" / "a.py", LOOP)
    assert reported(check(run_cli, "pkg")) == []


def test_explicit_config_option(tmp_path: Path, run_cli) -> None:
    config(tmp_path, "")
    write(tmp_path / "configs" / "strict.toml", '[tool.jaxlint]\nignore = ["JL003"]\n')
    write(tmp_path / "a.py", LOOP)
    assert reported(check(run_cli, "a.py")) == ["a.py"]
    assert reported(check(run_cli, "--config", "configs/strict.toml", "a.py")) == []
    missing = check(run_cli, "--config", "configs/nope.toml", "a.py")
    assert_config_error(missing, "configs/nope.toml")


# -- selection -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "flagged"),
    [
        ('select = ["JL"]\n', True),
        ('select = ["tree-at-batch"]\n', True),
        ('select = ["JL003"]\n', True),
        ("select = []\n", False),
        ('select = []\nextend-select = ["JL003"]\n', True),
        ('ignore = ["JL003"]\n', False),
        ('ignore = ["tree-at-batch"]\n', False),
        ('select = ["JL"]\nignore = ["JL0"]\n', False),
    ],
)
def test_selection_from_config(tmp_path: Path, run_cli, body: str, flagged: bool) -> None:
    config(tmp_path, body)
    write(tmp_path / "a.py", LOOP)
    assert reported(check(run_cli, "a.py")) == (["a.py"] if flagged else [])


@pytest.mark.parametrize(
    ("body", "args", "flagged"),
    [
        ('ignore = ["JL003"]\n', ["--select", "JL003"], True),
        ('ignore = ["tree-at-batch"]\n', ["--select", "JL"], True),
        ("select = []\n", ["--select", "tree-at-batch"], True),
        ("select = []\n", ["--extend-select", "JL003"], True),
        ('select = ["JL003"]\n', ["--ignore", "JL003"], False),
        ('extend-select = ["JL003"]\n', ["--ignore", "tree-at-batch"], False),
    ],
)
def test_cli_flags_override_config(tmp_path: Path, run_cli, body: str, args: list[str], flagged: bool) -> None:
    config(tmp_path, body)
    write(tmp_path / "a.py", LOOP)
    assert reported(check(run_cli, *args, "a.py")) == (["a.py"] if flagged else [])


def test_fix_honours_config_selection(tmp_path: Path, run_cli) -> None:
    config(tmp_path, 'ignore = ["JL003"]\n')
    path = write(tmp_path / "a.py", LOOP)
    result = run_cli("fix", "--unsafe-fixes", "a.py")
    assert result.exit_code == 0
    assert path.read_text() == LOOP


# -- exclusion -------------------------------------------------------------------------


DEFAULT_EXCLUDED = [
    ".git",
    ".venv",
    "venv",
    "build",
    "dist",
    "__pycache__",
    "node_modules",
    ".tox",
    "site-packages",
    "foo.egg-info",
]


def test_default_excludes(tmp_path: Path, run_cli) -> None:
    for directory in DEFAULT_EXCLUDED:
        write(tmp_path / directory / "a.py", LOOP)
        write(tmp_path / "src" / directory / "nested.py", LOOP)
    write(tmp_path / "src" / "real.py", LOOP)
    assert reported(check(run_cli, ".")) == ["src/real.py"]
    assert reported(check(run_cli, "src")) == ["src/real.py"]


def test_exclude_and_extend_exclude(tmp_path: Path, run_cli) -> None:
    config(tmp_path, 'extend-exclude = ["generated", "*_pb2.py", "legacy/old_*.py"]\n')
    write(tmp_path / "generated" / "a.py", LOOP)
    write(tmp_path / "src" / "generated" / "b.py", LOOP)
    write(tmp_path / "src" / "model_pb2.py", LOOP)
    write(tmp_path / "legacy" / "old_model.py", LOOP)
    write(tmp_path / "legacy" / "new_model.py", LOOP)
    write(tmp_path / "build" / "c.py", LOOP)  # the defaults still apply
    write(tmp_path / "src" / "model.py", LOOP)
    assert reported(check(run_cli, ".")) == ["legacy/new_model.py", "src/model.py"]


def test_double_star_globs_match_zero_directories(tmp_path: Path, run_cli) -> None:
    config(
        tmp_path,
        'extend-exclude = ["**/generated/*", "docs/**"]\n'
        '[tool.jaxlint.per-file-ignores]\n"tests/**/*.py" = ["JL003"]\n',
    )
    for name in (
        "generated/a.py",
        "src/generated/b.py",
        "docs/conf.py",
        "docs/api/gen.py",
        "tests/test_top.py",
        "tests/unit/test_deep.py",
        "src/model.py",
        "src/regenerated/c.py",
    ):
        write(tmp_path / name, LOOP)
    assert reported(check(run_cli, ".")) == ["src/model.py", "src/regenerated/c.py"]


def test_trailing_slash_excludes_directories(tmp_path: Path, run_cli) -> None:
    config(tmp_path, 'extend-exclude = ["generated/"]\n')
    write(tmp_path / "generated" / "a.py", LOOP)
    write(tmp_path / "src" / "generated" / "b.py", LOOP)
    write(tmp_path / "src" / "c.py", LOOP)
    assert reported(check(run_cli, ".")) == ["src/c.py"]


def test_exclude_replaces_the_defaults(tmp_path: Path, run_cli) -> None:
    config(tmp_path, 'exclude = ["generated"]\n')
    write(tmp_path / "generated" / "a.py", LOOP)
    write(tmp_path / "build" / "b.py", LOOP)
    assert reported(check(run_cli, ".")) == ["build/b.py"]


def test_explicit_file_is_linted_even_if_excluded(tmp_path: Path, run_cli) -> None:
    config(tmp_path, 'extend-exclude = ["generated", "*_pb2.py"]\n')
    write(tmp_path / "generated" / "a.py", LOOP)
    write(tmp_path / "model_pb2.py", LOOP)
    write(tmp_path / "build" / "b.py", LOOP)
    assert reported(check(run_cli, ".")) == []
    args = ["generated/a.py", "model_pb2.py", "build/b.py"]
    assert reported(check(run_cli, *args)) == sorted(args)


def test_excludes_are_relative_to_the_config(tmp_path: Path, run_cli) -> None:
    config(tmp_path / "proj", 'extend-exclude = ["src/gen"]\n')
    write(tmp_path / "proj" / "src" / "gen" / "a.py", LOOP)
    write(tmp_path / "proj" / "src" / "b.py", LOOP)
    assert reported(check(run_cli, "proj")) == ["proj/src/b.py"]
    assert reported(check(run_cli, "proj/src")) == ["proj/src/b.py"]


# -- per-file-ignores ------------------------------------------------------------------


def test_per_file_ignores(tmp_path: Path, run_cli) -> None:
    config(
        tmp_path,
        '[tool.jaxlint.per-file-ignores]\n"tests/*" = ["JL003"]\n"scripts/*.py" = ["tree-at-batch"]\n'
        '"conftest.py" = ["JL"]\n',
    )
    for name in ("tests/test_a.py", "tests/sub/test_b.py", "scripts/run.py", "src/conftest.py", "src/a.py"):
        write(tmp_path / name, LOOP)
    assert reported(check(run_cli, ".")) == ["src/a.py"]
    # Also for explicit files, and for `fix`.
    assert reported(check(run_cli, "tests/test_a.py")) == []
    result = run_cli("fix", "--unsafe-fixes", "tests/test_a.py")
    assert result.exit_code == 0
    assert (tmp_path / "tests" / "test_a.py").read_text() == LOOP


# -- errors ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "needles"),
    [
        ('selct = ["JL"]\n', ["unknown key 'selct'", "did you mean 'select'"]),
        ('extend_select = ["JL"]\n', ["'extend_select'", "did you mean 'extend-select'"]),
        ('per_file_ignores = {}\n', ["'per_file_ignores'", "did you mean 'per-file-ignores'"]),
        ('totally-unrelated = 1\n', ["unknown key 'totally-unrelated'"]),
        ('select = ["tree-at-bach"]\n', ["unknown rule 'tree-at-bach'", "did you mean 'tree-at-batch'"]),
        ('ignore = ["JL03"]\n', ["unknown rule 'JL03'"]),
        ('per-file-ignores = { "x.py" = ["tree_at_batch"] }\n', ["tree_at_batch", "tree-at-batch"]),
        ('extend-jit-wrapper = ["mylib.compile"]\n', ["'extend-jit-wrapper'", "did you mean 'extend-jit-wrappers'"]),
        ('extend-array-modules = ["mylib."]\n', ["unknown key 'extend-array-modules'"]),
    ],
)
def test_unknown_names_are_errors_with_suggestions(tmp_path: Path, run_cli, body: str, needles: list[str]) -> None:
    config(tmp_path, body)
    write(tmp_path / "a.py", LOOP)
    assert_config_error(check(run_cli, "a.py"), "pyproject.toml", *needles)


@pytest.mark.parametrize(
    ("body", "key"),
    [
        ('select = "JL"\n', "select"),
        ("ignore = [3]\n", "ignore"),
        ("extend-select = true\n", "extend-select"),
        ('exclude = "build"\n', "exclude"),
        ('extend-exclude = [["x"]]\n', "extend-exclude"),
        ('per-file-ignores = ["tests/*"]\n', "per-file-ignores"),
        ('per-file-ignores = { "tests/*" = "JL003" }\n', "tests/*"),
        ("tree-at-batch = 3\n", "tree-at-batch"),
        ("[tool.jaxlint.tree-at-batch]\nno-such-option = 1\n", "no-such-option"),
        ('extend-jit-wrappers = "mylib.compile"\n', "extend-jit-wrappers"),
        ("extend-blocking-calls = [1]\n", "extend-blocking-calls"),
        ('extend-transforms = ["mylib.vmap()"]\n', "'mylib.vmap()' is not a dotted name"),
        ('extend-host-copies = ["mylib..get"]\n', "'mylib..get' is not a dotted name"),
        ('extend-tracing-calls = [""]\n', "extend-tracing-calls"),
    ],
)
def test_wrong_types_are_errors(tmp_path: Path, run_cli, body: str, key: str) -> None:
    config(tmp_path, body)
    write(tmp_path / "a.py", LOOP)
    assert_config_error(check(run_cli, "a.py"), key)


def test_jaxlint_table_of_wrong_type(tmp_path: Path, run_cli) -> None:
    write(tmp_path / "pyproject.toml", '[tool]\njaxlint = "on"\n')
    write(tmp_path / "a.py", LOOP)
    assert_config_error(check(run_cli, "a.py"), "pyproject.toml")


@pytest.mark.parametrize(
    "text",
    [
        '[tool.jaxlint\nselect = ["JL"]\n',
        '[tool.jaxlint]\nselect = ["JL"\n',
        "[tool.jaxlint]\nselect = ['JL']\nselect = ['JL']\n",
        "\x00\x01 not toml at all",
    ],
)
def test_malformed_toml_is_a_one_line_error(tmp_path: Path, run_cli, text: str) -> None:
    write(tmp_path / "pyproject.toml", text)
    write(tmp_path / "a.py", LOOP)
    assert_config_error(check(run_cli, "a.py"), "pyproject.toml")


def test_config_errors_through_python_m_have_no_traceback(tmp_path: Path) -> None:
    import subprocess
    import sys

    config(tmp_path, 'selct = ["JL"]\n')
    write(tmp_path / "a.py", LOOP)
    proc = subprocess.run(
        [sys.executable, "-m", "jaxlint", "check", "a.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1
    assert "did you mean 'select'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_force_exclude_applies_excludes_to_named_files(tmp_path: Path, run_cli) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.jaxlint]\nextend-exclude = ["generated"]\n')
    generated = tmp_path / "generated"
    generated.mkdir()
    source = "import equinox as eqx\nfor w, v in ups:\n    m = eqx.tree_at(w, m, v)\n"
    (generated / "model.py").write_text(source)
    named = run_cli("check", "--no-cache", "generated/model.py")
    assert named.exit_code == 1  # a named file is linted even when excluded...
    forced = run_cli("check", "--no-cache", "--force-exclude", "generated/model.py")
    assert forced.exit_code == 0  # ...unless --force-exclude, as pre-commit hooks run it


# -- the library table -----------------------------------------------------------------

COMPILED_LOOP = """\
import jax.numpy as jnp
import mylib


def score_all(params, batches):
    return [mylib.compile(lambda p, b: jnp.mean(b @ p))(params, b) for b in batches]


def score_each(params, batches):
    results = []
    for batch in batches:
        results.append(mylib.compile(lambda p, b: jnp.mean(b @ p))(params, batch))
    return results
"""


def test_extend_jit_wrappers_adds_a_users_wrapper(tmp_path: Path, run_cli) -> None:
    """`mylib.compile` is a jit wrapper once `extend-jit-wrappers` names it: one built in a
    loop is jit-in-loop; without the key it is an unknown call."""
    write(tmp_path / "a.py", COMPILED_LOOP)
    config(tmp_path, "")
    assert json.loads(check(run_cli, "a.py").stdout) == []
    config(tmp_path, 'extend-jit-wrappers = ["mylib.compile"]\n')
    result = check(run_cli, "--select", "jit-in-loop", "a.py")
    assert [(f["line"], f["rule"]) for f in json.loads(result.stdout)] == [(6, "jit-in-loop"), (12, "jit-in-loop")]
    # Named in full: `compile` alone would not say whose.
    assert all(f["message"].startswith("`mylib.compile` wraps ") for f in json.loads(result.stdout))


def test_extended_library_is_part_of_the_cache_key(tmp_path: Path, run_cli) -> None:
    """Adding a wrapper to the table changes what an unchanged file reports, cache or not."""
    write(tmp_path / "a.py", COMPILED_LOOP)
    config(tmp_path, "")
    cached = lambda: run_cli("check", "--output-format", "json", "a.py")  # noqa: E731
    assert json.loads(cached().stdout) == []
    config(tmp_path, 'extend-jit-wrappers = ["mylib.compile"]\n')
    assert {f["rule"] for f in json.loads(cached().stdout)} == {"jit-in-loop"}


def test_library_extensions_are_loaded(tmp_path: Path) -> None:
    from jaxlint import _jaxapi
    from jaxlint._config import load_settings

    settings = load_settings(config(tmp_path, 'extend-blocking-calls = ["mylib.sync"]\nextend-transforms = []\n'))
    assert "mylib.sync" in settings.library.blocking_calls
    assert "jax.block_until_ready" in settings.library.blocking_calls
    assert settings.library.transforms == _jaxapi.base_library().transforms
    assert "mylib.sync" not in _jaxapi.BLOCKING  # only while a run uses it
    with _jaxapi.using(settings.library):
        assert "mylib.sync" in _jaxapi.BLOCKING


def test_extend_host_copies_adds_a_host_copy(tmp_path: Path, run_cli) -> None:
    """`mylib.fetch(x)` of a jitted step's result, per iteration, is a host copy once
    `extend-host-copies` names it."""
    write(
        tmp_path / "a.py",
        "import jax\nimport jax.numpy as jnp\nimport mylib\n\n\n@jax.jit\ndef step(x):\n    return jnp.sin(x)\n\n\n"
        "def run(x, n):\n    out = []\n    for _ in range(n):\n        x = step(x)\n        out.append(mylib.fetch(x))\n    return out\n",
    )
    config(tmp_path, "")
    assert json.loads(check(run_cli, "a.py").stdout) == []
    config(tmp_path, 'extend-host-copies = ["mylib.fetch"]\n')
    assert [(f["line"], f["rule"]) for f in json.loads(check(run_cli, "a.py").stdout)] == [(15, "host-copy-in-loop")]


HOOKED = """\
import jax
import jax.numpy as jnp
from mylib import Trainer


class MyTrainer(Trainer):
    def train_step(self, batch):
        @jax.jit
        def loss(x):
            return jnp.mean(x**2)

        return loss(batch)
"""


def test_extend_per_step_methods_adds_a_frameworks_hook(tmp_path: Path, run_cli) -> None:
    """`mylib.Trainer.train_step` runs on every step once `extend-per-step-methods` names it:
    the jit its subclass's method rebuilds on every call is jit-in-loop; without the key
    nothing shows that the method runs more than once. The cache keys on the table."""
    write(tmp_path / "a.py", HOOKED)
    config(tmp_path, "")
    cached = lambda: run_cli("check", "--select", "jit-in-loop", "--output-format", "json", "a.py")  # noqa: E731
    assert json.loads(cached().stdout) == []
    config(tmp_path, 'extend-per-step-methods = ["mylib.Trainer.train_step"]\n')
    found = json.loads(cached().stdout)
    assert [(f["line"], f["rule"]) for f in found] == [(8, "jit-in-loop")]
    assert "a `mylib.Trainer.train_step`, which its framework calls on every step" in found[0]["message"]
