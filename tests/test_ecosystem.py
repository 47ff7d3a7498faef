"""The ecosystem check's instrument: the corpus definition, labels, matching and scoring."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import pytest

ECOSYSTEM = Path(__file__).resolve().parent.parent / "ecosystem"
sys.path.insert(0, str(ECOSYSTEM))

import _common  # noqa: E402
import candidates  # noqa: E402
import score  # noqa: E402
from _common import Label, LabelError, draw_test_split, load_corpus, load_labels  # noqa: E402
from lint import Finding  # noqa: E402


def label(line: int, verdict: str = "TP", code: str = "JL005", path: str = "a.py") -> Label:
    return Label("o/r", path, line, code, verdict, "finding", "why")


def finding(line: int, code: str = "JL005", path: str = "a.py") -> Finding:
    return Finding("o/r", path, line, code, "message")


def test_corpus_is_pinned_and_large_enough():
    corpus = load_corpus()
    names = [repo.name for repo in corpus.repos]
    assert len(names) >= 60
    assert len(set(names)) == len(names)
    for repo in corpus.repos:
        assert re.fullmatch(r"[0-9a-f]{40}", repo.commit), repo.name
        assert repo.split in ("dev", "test")
    assert {repo.batch for repo in corpus.repos} == {draw.batch for draw in corpus.draws}


def test_test_split_is_the_recorded_draw_from_never_audited_repositories():
    corpus = load_corpus()
    for draw in corpus.draws:
        batch = [repo for repo in corpus.repos if repo.batch == draw.batch]
        never_audited = [repo.name for repo in batch if not repo.audited]
        drawn = draw_test_split(never_audited, draw.seed, draw.test_size)
        rotated = {repo.name for repo in batch if repo.rotated}
        assert all(repo.split == "dev" and repo.name in drawn for repo in batch if repo.rotated)
        assert sorted(repo.name for repo in batch if repo.split == "test") == [n for n in drawn if n not in rotated]
    assert not any(repo.audited for repo in corpus.split("test"))


def test_committed_labels_are_valid_and_name_corpus_repositories():
    labels = load_labels()
    repos = load_corpus().by_name()
    assert labels, "labels.tsv has no rows"
    for row in labels:
        assert row.repo in repos, row
        assert row.reason, row
        assert "\t" not in row.reason


def test_labels_loader_refuses_bad_rows(tmp_path: Path):
    header = "\t".join(_common.LABEL_FIELDS)
    bad = {
        "verdict": "o/r\ta.py\t3\tJL005\tMAYBE\tfinding\twhy",
        "code": "o/r\ta.py\t3\tJL999\tTP\tfinding\twhy",
        "line": "o/r\ta.py\tthree\tJL005\tTP\tfinding\twhy",
        "fields": "o/r\ta.py\t3\tJL005\tTP",
    }
    for what, row in bad.items():
        path = tmp_path / f"{what}.tsv"
        path.write_text(f"{header}\n{row}\n")
        with pytest.raises(LabelError):
            load_labels(path)
    twice = tmp_path / "twice.tsv"
    row = "o/r\ta.py\t3\tJL005\tTP\tfinding\twhy"
    twice.write_text(f"{header}\n{row}\n{row.replace('TP', 'FP')}\n")
    with pytest.raises(LabelError, match="already judged"):
        load_labels(twice)


def test_wilson_interval():
    low, high = score.wilson(8, 10)
    assert (round(low, 3), round(high, 3)) == (0.490, 0.943)
    assert score.wilson(0, 0) == (0.0, 1.0)
    low, high = score.wilson(10, 10)
    assert high == 1.0 and 0.7 < low < 0.75


def test_matching_prefers_the_same_line_then_the_nearest_within_three():
    same, near, far = label(10), label(14), label(30)
    paired = score.match([finding(10), finding(12), finding(26)], [same, near, far])
    assert paired[finding(10)] is same
    assert paired[finding(12)] is near
    assert finding(26) not in paired  # 4 lines away
    # a label pairs with one finding at most; another rule or file never pairs
    paired = score.match([finding(10), finding(11), finding(10, code="JL006"), finding(10, path="b.py")], [same])
    assert list(paired.values()) == [same]


def test_score_counts_precision_recall_and_unjudged():
    labels = [
        label(10, "TP"),  # found
        label(20, "FP"),  # a false alarm
        Label("o/r", "a.py", 40, "JL005", "TP", "candidate", "missed"),
        Label("o/r", "a.py", 60, "JL005", "FP", "candidate", "look-alike, silent"),
    ]
    result = score.score([finding(10), finding(21), finding(50)], labels)["JL005"]
    assert (result.findings, result.tp, result.fp, len(result.unjudged)) == (3, 1, 1, 1)
    assert result.precision() == 0.5
    assert (result.true_sites, result.found) == (2, 1)
    assert result.recall() == 0.5
    assert [m.line for m in result.missed] == [40]


def test_score_counts_the_true_positives_a_fix_applies_to():
    labels = [label(10, "TP"), label(20, "TP"), label(30, "TP"), label(40, "FP")]
    fixes = {10: "safe", 20: "unsafe", 30: "none", 40: "safe"}
    found = [Finding("o/r", "a.py", line, "JL005", "message", fix) for line, fix in fixes.items()]
    result = score.score(found, labels)["JL005"]
    assert (result.tp, result.fixed) == (3, 2)  # display-only and none are not applied; FPs not counted
    assert score.table("dev", {"JL005": result}).splitlines()[2].endswith("2/3")
    cached = [*found[:2], finding(30)]  # a result cached before fixes were kept
    assert score.score(cached, labels)["JL005"].fixed is None


def test_thresholds_fail_a_rule_below_them():
    scores = score.score([finding(10), finding(20)], [label(10, "TP"), label(20, "FP")])
    args = argparse.Namespace(min_precision=["0.9"], min_recall=["JL005=0.5"], threshold_split="test")
    assert score.check_thresholds(scores, args) == ["JL005 precision 0.50 < 0.90 on test"]
    args = argparse.Namespace(min_precision=["JL005=0.5"], min_recall=["1.0"], threshold_split="test")
    assert score.check_thresholds(scores, args) == []


def test_batch_keeps_only_the_named_batches_of_a_split():
    """`score.py --batch 22` scores the freshest code alone: only that batch's repositories of
    each split, each split's own; no batch named keeps them all."""
    corpus = load_corpus()
    for split in ("dev", "test"):
        fresh = score.repos_of(corpus, split, [22])
        assert fresh and {r.batch for r in fresh} == {22} and {r.split for r in fresh} == {split}
        assert score.repos_of(corpus, split, []) == corpus.split(split)
    both = score.repos_of(corpus, "dev", [21, 22])
    assert {r.batch for r in both} == {21, 22}


def test_preview_is_passed_to_the_lint(monkeypatch, tmp_path: Path):
    """`score.py --preview` measures what is in preview: the lint runs with `--preview`, and
    only then."""
    commands = []
    monkeypatch.setattr(_common.subprocess, "run", lambda command, **kwargs: commands.append(command))
    _common.run_jaxlint(tmp_path, 2)
    _common.run_jaxlint(tmp_path, 2, preview=True)
    assert ["--preview" in command for command in commands] == [False, True]


@pytest.mark.parametrize("jobs", [1, 2])
def test_alone_lints_each_file_knowing_only_itself(tmp_path: Path, jobs: int):
    """`score.py --alone` counts what the project analysis adds: a loop that copies what a
    jitted step of another module returns is reported with the project, and not alone (also
    in the worker processes of `-j 2`)."""
    import lint

    (tmp_path / "steps.py").write_text("import jax\n\n@jax.jit\ndef step(x):\n    return x * 2\n")
    for index in range(16):  # enough files for the process pool (`_POOL_THRESHOLD`)
        (tmp_path / f"train{index}.py").write_text(
            "import jax\nfrom steps import step\n\nfor b in range(1000):\n    print(float(step(b)))\n"
        )
    found = {}
    for alone in (False, True):
        path = str(lint.ALONE) if alone else None
        completed = _common.run_jaxlint(tmp_path, jobs, path)
        assert completed.returncode == 0, completed.stderr
        found[alone] = sorted(line for line in completed.stdout.splitlines() if '"JL005"' in line)
    assert len(found[False]) == 16 and found[True] == []


def test_loose_finder_over_reports_each_rule_pattern():
    source = '''
import time
import jax, equinox as eqx, numpy as np
import jax.numpy as jnp

@eqx.filter_jit
def step(model, x):
    return model(x)

def loss(w, x):
    return jnp.sum(w * x)

def train(model, w, data, ids):
    start = time.time()
    for i in range(0, len(data), 32):
        model = eqx.tree_at(lambda m: m.w, model, w)
        f = jax.jit(lambda x: x + i)
        model = step(model, data[i:i + 32])
        ids = np.concatenate([ids, ids[-1:]])
        print(float(loss(w, data)))
    elapsed = time.time() - start
'''
    found = {(code, pattern) for _, code, pattern in candidates.find_in_source(source)}
    codes = {code for code, _ in found}
    assert codes == {"JL001", "JL002", "JL003", "JL004", "JL005", "JL006", "JL007", "JL008"}
    assert ("JL006", "second timer read in a function") in found
    assert ("JL001", "loss does array work and is called in a loop") in found


def test_loose_finder_finds_jits_rebuilt_on_every_call():
    source = '''
import jax
import jax.numpy as jnp

def requantise(w, s):
    @jax.jit
    def rescale(a, b):
        return a / b

    return rescale(w, s)

def gather(x):
    return jax.pmap(lambda v: v, "i")(x)

def normalise(row):
    scaler = jax.jit(lambda r: r / jnp.linalg.norm(r))
    return scaler(row)

def make_step():
    @jax.jit
    def step(p):
        return p

    return step
'''
    found = {(line, pattern) for line, code, pattern in candidates.find_in_source(source) if code == "JL007"}
    assert found == {
        (6, "nested def with a jit decorator, called by the function that defines it"),
        (13, "pmap(...) built and called at once in a function"),
        (16, "jit of a lambda or nested def, stored and called in a function"),
    }


def test_worklist_of_one_batch_samples_only_its_repositories(tmp_path):
    batch_of = {repo.name: repo.batch for repo in load_corpus().repos}
    first, second = "Artur-Galstyan/jaxonmodels", "Vodolay/NovaJax"
    assert batch_of[first] != batch_of[second]
    table = tmp_path / "candidates.tsv"
    lines = ["repo\tsplit\tpath\tline\tcode\tpattern"]
    for repo in (first, second):
        lines += [f"{repo}\tdev\tnot_a_file_{i}.py\t{10 * i + 1}\tJL005\tcopy" for i in range(100)]
    table.write_text("\n".join(lines) + "\n", encoding="utf-8")
    one = candidates.worklist("dev", 7, ["JL005"], batches={batch_of[first]}, table=table)
    assert {row["repo"] for row in one} == {first}
    assert len(one) == candidates.SAMPLE_SIZES["JL005"]
    both = candidates.worklist("dev", 7, ["JL005"], table=table)
    assert {row["repo"] for row in both} == {first, second}


def test_sample_size_is_set_per_rule_on_the_command_line(tmp_path, monkeypatch, capsys):
    """A fresh batch is judged on smaller samples (JL005=25): `--size` sets them without
    calling `worklist` by hand; a malformed size is a usage error."""
    table = tmp_path / "candidates.tsv"
    lines = ["repo\tsplit\tpath\tline\tcode\tpattern"]
    lines += [f"Vodolay/NovaJax\tdev\tnot_a_file_{i}.py\t{10 * i + 1}\tJL005\tcopy" for i in range(100)]
    table.write_text("\n".join(lines) + "\n", encoding="utf-8")
    monkeypatch.setattr(candidates, "CANDIDATES_TSV", table)
    assert candidates.main(["--sample", "--code", "JL005", "--size", "JL005=25", "--seed", "3"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 25
    with pytest.raises(SystemExit) as raised:
        candidates.main(["--sample", "--size", "JL005"])
    assert raised.value.code == 2
