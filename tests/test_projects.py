"""Multi-file fixture projects (`fixtures/_projects/<case>/`): every file of a case is linted
as one project, and the findings are exactly the lines marked `# expect: <slug>` across its
files. Each case is also linted file by file: what another module defines must change what
some file reports, or the case does not exercise the project analysis."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

PROJECTS = Path(__file__).resolve().parent.parent / "fixtures" / "_projects"
_EXPECT = re.compile(r"#\s*expect:\s*(?P<slugs>[\w\-]+(?:\s*,\s*[\w\-]+)*)")
CASES = sorted(p for p in PROJECTS.iterdir() if p.is_dir())


def _files(case: Path) -> list[str]:
    return sorted(str(p.relative_to(case)) for p in case.rglob("*.py"))


def _expected(case: Path) -> set[tuple[str, int, str]]:
    found = set()
    for name in _files(case):
        for number, line in enumerate((case / name).read_text().splitlines(), start=1):
            match = _EXPECT.search(line)
            if match:
                found |= {(name, number, s.strip()) for s in match["slugs"].split(",")}
    return found


def _lint(run_cli, *files: str) -> set[tuple[str, int, str]]:
    result = run_cli("check", "--no-cache", "--exit-zero", "--output-format", "json", *files)
    assert result.exit_code == 0, result.output
    return {(f["path"], f["line"], f["rule"]) for f in json.loads(result.stdout)}


@pytest.fixture
def in_case(monkeypatch):  # type: ignore[no-untyped-def]
    def enter(case: Path) -> None:
        monkeypatch.chdir(case)

    return enter


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_project_findings_match_markers(case: Path, tmp_path: Path, run_cli) -> None:
    import shutil

    shutil.copytree(case, tmp_path, dirs_exist_ok=True)  # away from this repository's config
    assert _lint(run_cli, *_files(case)) == _expected(case)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case_depends_on_other_modules(case: Path, tmp_path: Path, run_cli, in_case) -> None:
    """Each file copied into a folder of its own, with nothing else of the project."""
    alone: set[tuple[str, int, str]] = set()
    for number, name in enumerate(_files(case)):
        folder = tmp_path / str(number)
        (folder / name).parent.mkdir(parents=True)
        (folder / name).write_bytes((case / name).read_bytes())
        in_case(folder)
        alone |= _lint(run_cli, name)
    assert alone != _expected(case)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_file_named_alone_sees_the_rest_of_the_project(case: Path, tmp_path: Path, run_cli) -> None:
    """`jaxlint check trainer/loop.py` (a pre-commit hook passes the changed files) summarizes
    the project's other modules: file by file, the same findings as `check` on the folder."""
    import shutil

    shutil.copytree(case, tmp_path, dirs_exist_ok=True)
    assert set().union(*(_lint(run_cli, name) for name in _files(case))) == _expected(case)


def test_cached_findings_follow_other_modules(tmp_path: Path, run_cli) -> None:
    """A file's cached findings are stale when what another module defines changes: with the
    jit taken off the step, the unchanged loop file no longer reports a host copy."""
    import shutil

    shutil.copytree(PROJECTS / "jitted_elsewhere" / "trainer", tmp_path / "trainer")
    check = lambda: run_cli("check", "--exit-zero", "--output-format", "json", "trainer")  # noqa: E731
    first = {(f["path"], f["rule"]) for f in json.loads(check().stdout)}
    assert ("trainer/loop.py", "host-copy-in-loop") in first
    assert {(f["path"], f["rule"]) for f in json.loads(check().stdout)} == first  # warm: same
    steps = tmp_path / "trainer" / "steps.py"
    steps.write_text(steps.read_text().replace("@jax.jit\n", ""))
    assert ("trainer/loop.py", "host-copy-in-loop") not in {(f["path"], f["rule"]) for f in json.loads(check().stdout)}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_standard_input_sees_the_rest_of_the_project(case: Path, tmp_path: Path, run_cli) -> None:
    """Each file of a case piped through `--stdin-filename` (as an editor or a pre-commit pipe
    does) is linted knowing what the project's other modules define: together the same
    findings as `check` on the folder."""
    import shutil

    shutil.copytree(case, tmp_path, dirs_exist_ok=True)
    found = set()
    for name in _files(case):
        text = (tmp_path / name).read_text()
        (tmp_path / name).write_text("# on disk: not what is piped\n")  # the piped text counts
        result = run_cli("check", "--exit-zero", "--output-format", "json", "--stdin-filename", name, "-", input=text)
        (tmp_path / name).write_text(text)
        assert result.exit_code == 0, result.output
        found |= {(f["path"], f["line"], f["rule"]) for f in json.loads(result.stdout)}
    assert found == _expected(case)


def test_user_jit_wrapper_comes_from_the_config(tmp_path: Path, run_cli, in_case) -> None:
    """`user_jit_wrapper` knows `mylib.compile` only through its pyproject.toml
    (`extend-jit-wrappers`): without it, the same files report nothing."""
    import shutil

    shutil.copytree(PROJECTS / "user_jit_wrapper" / "trainer", tmp_path / "trainer")
    in_case(tmp_path)
    assert _lint(run_cli, *_files(tmp_path)) == set()


def _linted(monkeypatch) -> list[str]:  # type: ignore[no-untyped-def]
    """The display paths of the files each run lints (not served from the cache)."""
    from jaxlint import _runner

    linted: list[str] = []
    lint_one = _runner._lint_one

    def counting(display, *args):  # type: ignore[no-untyped-def]
        linted.append(display)
        return lint_one(display, *args)

    monkeypatch.setattr(_runner, "_lint_one", counting)
    return linted


def test_fix_of_standard_input_sees_the_rest_of_the_project(tmp_path: Path, run_cli) -> None:
    """`jaxlint fix --stdin-filename` (an editor's fix on save) reports what `check` does."""
    import shutil

    shutil.copytree(PROJECTS / "jitted_elsewhere" / "trainer", tmp_path / "trainer")
    loop = (tmp_path / "trainer" / "loop.py").read_text()
    result = run_cli("fix", "--output-format", "concise", "--stdin-filename", "trainer/loop.py", "-", input=loop)
    assert result.stdout == loop
    assert "trainer/loop.py:10:24: JL005" in result.stderr


def test_fix_of_a_named_file_sees_the_rest_of_the_project(tmp_path: Path, run_cli) -> None:
    """`jaxlint fix trainer/loop.py` (the pre-commit fix hook) fixes and reports what `check .`
    does; with `--no-cache` it keeps no facts on disk."""
    import shutil

    shutil.copytree(PROJECTS / "jitted_elsewhere" / "trainer", tmp_path / "trainer")
    result = run_cli("fix", "--no-cache", "--output-format", "concise", "trainer/loop.py")
    assert "trainer/loop.py:10:24: JL005" in result.stdout
    assert not (tmp_path / ".jaxlint_cache").exists()
    run_cli("fix", "--output-format", "concise", "trainer/loop.py")
    assert (tmp_path / ".jaxlint_cache").is_dir()


def test_standard_input_into_a_warm_project_summarizes_only_itself(tmp_path: Path, run_cli, monkeypatch) -> None:
    """After `check` (or a first pipe), the facts of the project's modules come from the cache:
    a pipe reads the tree of the piped text alone and lints it alone, and stores neither."""
    import shutil

    from jaxlint import _project

    shutil.copytree(PROJECTS / "jitted_elsewhere" / "trainer", tmp_path / "trainer")
    linted = _linted(monkeypatch)
    summarized: list[str] = []
    summarize = _project.summarize

    def counting(module, text, **kwargs):  # type: ignore[no-untyped-def]
        summarized.append(module)
        return summarize(module, text, **kwargs)

    monkeypatch.setattr(_project, "summarize", counting)
    loop = (tmp_path / "trainer" / "loop.py").read_text()

    def pipe() -> list[tuple[str, str]]:
        linted.clear()
        summarized.clear()
        result = run_cli("check", "--exit-zero", "--output-format", "json", "--stdin-filename", "trainer/loop.py", "-", input=loop)
        assert result.exit_code == 0, result.output
        return [(f["path"], f["rule"]) for f in json.loads(result.stdout)]

    assert pipe() == [("trainer/loop.py", "host-copy-in-loop")]  # cold: every module summarized
    assert sorted(summarized) == ["trainer", "trainer.bench", "trainer.loop", "trainer.steps"]
    assert pipe() == [("trainer/loop.py", "host-copy-in-loop")]  # warm: the piped text alone
    assert (summarized, linted) == (["trainer.loop"], ["trainer/loop.py"])
    stored = {p: p.read_bytes() for p in (tmp_path / ".jaxlint_cache").rglob("*.json")}
    loop += "\n# an edit in the editor\n"
    assert pipe() == [("trainer/loop.py", "host-copy-in-loop")]
    assert (summarized, linted) == (["trainer.loop"], ["trainer/loop.py"])
    assert stored and {p: p.read_bytes() for p in (tmp_path / ".jaxlint_cache").rglob("*.json")} == stored


def test_editing_one_file_relints_it_and_its_importers(tmp_path: Path, run_cli, monkeypatch) -> None:
    """With the cache, editing a module re-lints that module; when what it exports to the
    others changes (the step is no longer jitted), also the modules that import it, and
    nothing else."""
    import shutil

    shutil.copytree(PROJECTS / "jitted_elsewhere" / "trainer", tmp_path / "trainer")
    (tmp_path / "trainer" / "data.py").write_text("import jax\nimport jax.numpy as jnp\n\n\ndef batches(x):\n    return jnp.split(x, 4)\n")
    linted = _linted(monkeypatch)

    def check() -> list[str]:
        linted.clear()
        result = run_cli("check", "--exit-zero", "--jobs", "1", "trainer")
        assert result.exit_code == 0, result.output
        return sorted(linted)

    # Read from its import lines alone (no tracing word in it): what it calls of `steps` is not
    # known, so any change to what `steps` defines re-lints it.
    (tmp_path / "trainer" / "evaluate.py").write_text(
        "import jax.numpy as jnp\n\nfrom . import steps\n\n\ndef evaluate(params, loader, history):\n"
        "    for batch in loader:\n        params, loss = steps.train_step(params, jnp.asarray(batch))\n"
        "        history.append(float(loss))\n    return params\n"
    )
    everything = check()
    assert everything == [
        "trainer/__init__.py", "trainer/bench.py", "trainer/data.py", "trainer/evaluate.py", "trainer/loop.py", "trainer/steps.py"
    ]
    assert check() == []
    steps = tmp_path / "trainer" / "steps.py"
    steps.write_text(steps.read_text().replace("0.01 * loss", "0.02 * loss"))  # same facts
    assert check() == ["trainer/steps.py"]
    steps.write_text(steps.read_text().replace("@jax.jit\n", ""))  # the step is not jitted any more
    assert check() == ["trainer/bench.py", "trainer/evaluate.py", "trainer/loop.py", "trainer/steps.py"]
    data = tmp_path / "trainer" / "data.py"
    data.write_text(data.read_text() + "\n\nfast_batches = jax.jit(batches)\n")  # exports a jitted callable
    assert check() == ["trainer/data.py"]  # which nothing imports


def test_traced_only_callers_relint_the_callee(tmp_path: Path, run_cli, monkeypatch) -> None:
    """Which of a module's functions other modules call only from traced code is the one
    thing a file's findings take from its importers: when the jitted step stops calling the
    helper, the helper's module is re-linted (and the step's own), not the rest."""
    import shutil

    shutil.copytree(PROJECTS / "traced_elsewhere" / "model", tmp_path / "model")
    (tmp_path / "model" / "data.py").write_text("import jax.numpy as jnp\n\n\ndef batches(x):\n    return jnp.split(x, 4)\n")
    linted = _linted(monkeypatch)

    def check() -> tuple[list[str], list[str]]:
        linted.clear()
        result = run_cli("check", "--exit-zero", "--output-format", "json", "--jobs", "1", "model")
        return sorted(linted), sorted({f["path"] for f in json.loads(result.stdout)})

    assert check() == (["model/__init__.py", "model/data.py", "model/surgery.py", "model/train.py"], [])
    train = tmp_path / "model" / "train.py"
    train.write_text(train.read_text().replace("@eqx.filter_jit\n", ""))  # now an eager caller
    assert check() == (["model/surgery.py", "model/train.py"], ["model/surgery.py"])


def test_star_and_alias_cycles_end(tmp_path: Path, run_cli) -> None:
    """Modules that re-export each other (`from .b import *` in a, `from .a import *` in b,
    and names imported back and forth) are followed to an end, not forever."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("from .a import *\nfrom .b import step\n")
    (package / "a.py").write_text("from .b import *\nfrom .b import step as other\n")
    (package / "b.py").write_text("import jax\nfrom .a import *\nfrom .a import other as step\n\n\nf = jax.jit(abs)\n")
    (tmp_path / "loop.py").write_text(
        "from pkg import step, missing, f\n\n\ndef run(batches, out):\n    for x in batches:\n        out.append(float(f(step(missing(x)))))\n"
    )
    result = run_cli("check", "--no-cache", "--output-format", "json", "pkg", "loop.py")
    assert result.exit_code == 1, result.output
    assert [(f["path"], f["rule"]) for f in json.loads(result.stdout)] == [("loop.py", "host-copy-in-loop")]


@pytest.mark.parametrize(
    ("case", "module", "edit", "gone"),
    [
        # The encoder is no Module any more, nor its subclasses: only the optimizer state the
        # builder returns is still known to be large.
        ("model_elsewhere", "models.py", ("class Encoder(eqx.Module):", "class Encoder:"), {24, 31, 50, 57}),
        # The chunks come back as a list: the loop over them no longer shows it runs over data.
        ("generator_elsewhere", "data.py", ("        yield points[start", "        return points[start"), {19}),
        # The forward pass is no longer jitted: the tokens handed to it, directly or through the
        # model module's helper, compile nothing.
        ("decoder_elsewhere", "model.py", ("@jax.jit\ndef logits(", "def logits("), {13, 21}),
        # The coder is no Flax Linen module any more, nor its subclass: the steps that build
        # one call a class jaxlint cannot see into.
        ("linen_elsewhere", "nets.py", ("class Coder(nn.Module):", "class Coder:"), {13, 24}),
        # The builder returns a plain table instead: only the step building it is affected.
        ("linen_elsewhere", "nets.py", ("    return Coder(width=width)", "    return Table(width)"), {13}),
        # The regressor's update is no longer jitted: the ragged batches handed to it through an
        # instance (made in the loop's function, or held by a trainer) compile nothing.
        ("method_elsewhere", "models.py", ("    @partial(jax.jit, static_argnums=0)\n", ""), {19, 27}),
        # The training loader drops its last batch now: not every caller passes a ragged one.
        ("loader_passed", "main.py", ("batch_size=64, shuffle=True)", "batch_size=64, shuffle=True, drop_last=True)"), {15}),
        # The helper no longer compiles `apply`: the pair it returns holds an eager function, and
        # the growing histories handed to it compile nothing.
        ("pair_elsewhere", "compile.py", ("jax.jit(pair.apply))", "pair.apply)"), {17, 25}),
        # The flow prints now: the step that calls it would not trace.
        ("traceable_elsewhere", "layers.py", ("    return euler(", "    print(dt)\n    return euler("), {18}),
    ],
)
def test_cached_findings_follow_what_other_modules_build(
    case: str, module: str, edit: tuple[str, str], gone: set[int], tmp_path: Path, run_cli
) -> None:
    """A file's cached findings are stale when another module's Module classes, model builders,
    Flax Linen modules, data generators, what its functions hand to a jitted callable, the
    compiled pairs its helpers return or whether its functions trace change: the unchanged loop file is linted again and loses its finding."""
    import shutil

    shutil.copytree(PROJECTS / case / "trainer", tmp_path / "trainer")
    check = lambda: {(f["path"], f["line"]) for f in json.loads(run_cli("check", "--exit-zero", "--output-format", "json", "trainer").stdout)}  # noqa: E731
    first = check()
    lost = {("trainer/loop.py", line) for line in gone}
    assert lost <= first
    assert check() == first  # warm: same
    edited = tmp_path / "trainer" / module
    edited.write_text(edited.read_text().replace(*edit))
    assert check() == first - lost


def test_cached_findings_follow_loops_elsewhere(tmp_path: Path, run_cli) -> None:
    """A function's cached findings are stale when another module's loop stops calling it: with
    `act` moved out of the training loop, the unchanged policy module no longer reports the jit
    it rebuilds per call; moved back, it does again."""
    import shutil

    shutil.copytree(PROJECTS / "looped_elsewhere" / "agents", tmp_path / "agents")
    check = lambda: {  # noqa: E731
        (f["path"], f["line"]) for f in json.loads(run_cli("check", "--exit-zero", "--output-format", "json", "agents").stdout)
    }
    first = check()
    assert ("agents/policy.py", 10) in first
    assert check() == first  # warm: same
    train = tmp_path / "agents" / "train.py"
    looped = train.read_text()
    train.write_text(looped.replace("            action = act(weights, obs)\n", "").replace(
        "    weights = policy.setup(weights)\n", "    weights = policy.setup(weights)\n    action = act(weights, None)\n"
    ))
    assert ("agents/policy.py", 10) not in check()
    train.write_text(looped)
    assert ("agents/policy.py", 10) in check()


def test_a_named_file_cites_other_modules_as_check_dot_does(tmp_path: Path, run_cli) -> None:
    """A finding of a file named alone that cites another module's loop names it by the path
    `jaxlint check .` shows, not by an absolute one."""
    import shutil

    shutil.copytree(PROJECTS / "looped_elsewhere", tmp_path, dirs_exist_ok=True)
    named = json.loads(run_cli("check", "--no-cache", "--exit-zero", "--output-format", "json", "agents/policy.py").stdout)
    whole = json.loads(run_cli("check", "--no-cache", "--exit-zero", "--output-format", "json", ".").stdout)
    assert named and all(str(tmp_path) not in f["message"] for f in named)
    assert [f["message"] for f in named] == [f["message"] for f in whole if f["path"] == "agents/policy.py"]


_DIGESTS = """
import json, sys
from pathlib import Path
from jaxlint._project import project_for

digests = {}
for case in sys.argv[1:]:
    files = sorted(Path(case).rglob("*.py"))
    project = project_for([(str(p.relative_to(case)), p, p.read_bytes()) for p in files])
    digests[case] = [project.digest, sorted(project._digests.items())]
print(json.dumps(digests))
"""


def test_cache_keys_are_the_same_in_every_process() -> None:
    """What a file's cached findings are keyed on (`Project.digest_for`) is the same text in
    every process: a set's order follows the string hash, which each process seeds anew, so a
    digest of a set's repr made every warm `jaxlint check` re-lint the files that read it."""
    import os
    import subprocess
    import sys

    runs = []
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        completed = subprocess.run(
            [sys.executable, "-c", _DIGESTS, *map(str, CASES)], capture_output=True, text=True, env=env, check=True
        )
        runs.append(json.loads(completed.stdout))
    assert runs[0] == runs[1] == runs[2]


def test_unwaited_returns_are_read_from_the_tree_and_kept_by_the_cache() -> None:
    """`ModuleFacts.unwaited`: functions and methods that start device work and return it
    without waiting; a wait, a host copy, an unknown call, a branch on a device value, a
    set-up array alone or a path returning nothing keep a function out. The lint cache keeps
    the fact (`_stored` / `_stored_facts`)."""
    from jaxlint._project import _stored, _stored_facts, summarize

    text = '''
import jax
import jax.numpy as jnp
import numpy as np

@jax.jit
def step(x):
    return x * 2

def run(x, n):
    for _ in range(n):
        x = step(x)
    return x

def chained(x):
    return run(x, 3) + 1

def waits(x):
    return jax.block_until_ready(step(x))

def to_host(x):
    return np.asarray(step(x))

def logs(x, log):
    y = step(x)
    log(y)
    return y

def branches(x):
    y = step(x)
    if y.sum() > 0:
        return y
    return -y

def zeros(n):
    return jnp.zeros((n, n))

def maybe(x, ready):
    if ready:
        return step(x)

class Average:
    def weight(self, count):
        return jnp.minimum(0.9, jnp.asarray(count) / 10.0)

    def update(self, average, value, count):
        w = self.weight(count)
        return jax.tree_util.tree_map(lambda a, v: a * w + v * (1 - w), average, value)

    def show(self, value):
        print(value)
        return value
'''
    facts = summarize("pkg.ops", text)
    assert set(facts.unwaited) == {"run", "chained", "Average.weight", "Average.update"}
    assert _stored_facts(_stored(facts)) == facts


def test_a_named_file_sees_the_project_its_markers_mark(tmp_path: Path, run_cli, monkeypatch) -> None:
    """Without a configuration, a named file's project is the nearest folder above it with a
    `.git`, `pyproject.toml`, `setup.py`, `setup.cfg` or `.hg` (below the working directory),
    not the whole working directory: here a folder of 5 loose scripts beside it would be over
    the (lowered) limit, but the project folder holds 4 files and its cross-module finding
    stands, with no warning. Named loose in that crowded folder, a script is linted without
    context, with one warning line."""
    import jaxlint._discovery as discovery
    import shutil

    monkeypatch.setattr(discovery, "MAX_CONTEXT_FILES", 4)
    project = tmp_path / "proj"
    shutil.copytree(PROJECTS / "jitted_elsewhere" / "trainer", project / "trainer")
    (project / ".git").mkdir()
    for index in range(5):
        (tmp_path / f"script{index}.py").write_text("import jax\n\nprint(jax.numpy.ones(3))\n")
    result = run_cli("check", "--exit-zero", "--output-format", "json", "proj/trainer/loop.py")
    assert result.exit_code == 0, result.output
    assert ("proj/trainer/loop.py", "host-copy-in-loop") in {(f["path"], f["rule"]) for f in json.loads(result.stdout)}
    assert "warning" not in result.stderr
    crowded = run_cli("check", "--exit-zero", "script0.py")
    assert crowded.exit_code == 0, crowded.output
    assert crowded.stderr.count("jaxlint: warning: more than 4 Python files around script0.py") == 1


def test_a_linen_model_built_elsewhere_is_preview(tmp_path: Path, run_cli) -> None:
    """`linen_built_elsewhere` asks for `--preview` in its pyproject.toml: without it, the
    eager `model.apply` of a Linen module another module builds, in a function reached only
    through a dispatcher of unknown mode, is not reported (the host copy beside it is)."""
    import shutil

    shutil.copytree(PROJECTS / "linen_built_elsewhere", tmp_path, dirs_exist_ok=True)
    (tmp_path / "pyproject.toml").unlink()
    rules = {rule for _, _, rule in _lint(run_cli, *_files(tmp_path))}
    assert rules == {"host-copy-in-loop"}
