"""The loose finder: sites where each rule's problem might be, for judges to check recall.

    python ecosystem/candidates.py                 # write candidates.tsv for the whole corpus
    python ecosystem/candidates.py --sample        # print the judging worklist (seeded sample)

This is deliberately not the linter: plain `ast` patterns with no knowledge of jitting,
frequency or size, so that it over-reports and its misses are few. Each pattern names what it
saw. Judges take every candidate of the rare rules and a seeded sample of the common ones.
"""

from __future__ import annotations

import argparse
import ast
import csv
import random
import re
import sys
import warnings
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _common import CANDIDATES_TSV, Repo, load_corpus, load_labels  # noqa: E402

from jaxlint._notebook import NotebookError, read_notebook  # noqa: E402

JAX_MARKERS = ("jax", "equinox", "flax", "haiku")
TIMERS = {"time", "perf_counter", "monotonic", "process_time", "perf_counter_ns", "time_ns", "default_timer"}
HOST_COPIES = {"array", "asarray", "device_get", "item", "tolist", "float", "int", "print"}
JIT_NAMES = {"jit", "filter_jit", "pjit", "pmap", "filter_pmap", "xla_computation"}
GROW_NAMES = {"concatenate", "append", "hstack", "vstack", "stack", "column_stack"}
TEST_PATH = re.compile(r"(^|/)(tests?|testing)/|(^|/)test_[^/]*$|_test\.(py|ipynb)|(^|/)conftest\.py")
# Per rule: how many candidates a judging worklist takes (None: all of them). JL007's
# per-call patterns (jits a function makes anew on each call) are hundreds: a sample.
SAMPLE_SIZES = {"JL001": 60, "JL002": None, "JL003": None, "JL004": 80, "JL005": 80,
                "JL006": 80, "JL007": 120, "JL008": 60}
# JL007 patterns outside loops: whether they cost anything depends on how often the function
# runs, so test files (where nothing does) are left out.
PER_CALL_PATTERNS = ("built and called at once in a function", "called by the function that defines it",
                     "stored and called in a function")


def _name(node: ast.AST) -> str:
    """The last name of a callee: `jax.jit` -> `jit`, `x.item` -> `item`."""
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    if isinstance(node, ast.Name):
        return node.id
    return ""


class _Finder(ast.NodeVisitor):
    def __init__(self) -> None:
        self.found: list[tuple[int, str, str]] = []  # (line, code, pattern)
        self.loops: list[ast.AST] = []
        self.functions: list[ast.AST] = []
        self.filter_jitted: set[str] = set()
        self.loop_called: set[str] = set()
        self.defs: dict[str, ast.AST] = {}
        self.timer_reads: dict[int, list[int]] = defaultdict(list)
        self.tree_at_calls: dict[int, list[int]] = defaultdict(list)

    def add(self, line: int, code: str, pattern: str) -> None:
        self.found.append((line, code, pattern))

    # Structure ---------------------------------------------------------------------------
    def _loop(self, node: ast.AST) -> None:
        self.loops.append(node)
        self._grow_and_slice(node)
        self.generic_visit(node)
        self.loops.pop()

    visit_For = visit_While = visit_AsyncFor = _loop

    def visit_comprehension_like(self, node: ast.AST) -> None:
        self.loops.append(node)
        self.generic_visit(node)
        self.loops.pop()

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = visit_comprehension_like

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.defs.setdefault(node.name, node)
        for decorator in node.decorator_list:
            if "filter_jit" in ast.unparse(decorator):
                self.filter_jitted.add(node.name)
        self._fresh_jits(node)
        saved = self.loops
        self.loops = []
        self.functions.append(node)
        self.generic_visit(node)
        self.functions.pop()
        self.loops = saved

    visit_FunctionDef = visit_AsyncFunctionDef = _function

    def _fresh_jits(self, function: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        """Defs nested in `function` with a jit decorator that `function` calls: each call of
        `function` defines them anew (JL007 when `function` runs per step or per layer)."""
        nested: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
        stored: list[tuple[str, ast.Call]] = []  # `step = jax.jit(<lambda or def>)`
        defined: set[str] = set()
        called: set[str] = set()
        stack: list[ast.AST] = list(function.body)
        while stack:
            node = stack.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                defined.add(node.name)
                if any(_name(n) in JIT_NAMES for d in node.decorator_list for n in ast.walk(d)):
                    nested.append(node)
                continue  # another scope
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                value = node.value
                if isinstance(value, ast.Call) and _name(value.func) in JIT_NAMES and value.args:
                    stored.append((node.targets[0].id, value))
            if isinstance(node, (ast.Lambda, ast.ClassDef)):
                continue
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                called.add(node.func.id)
            stack.extend(ast.iter_child_nodes(node))
        for node in nested:
            if node.name in called:
                decorator = next(d for d in node.decorator_list if any(_name(n) in JIT_NAMES for n in ast.walk(d)))
                self.add(decorator.lineno, "JL007", "nested def with a jit decorator, called by the function that defines it")
        for name, call in stored:
            wrapped = call.args[0]
            fresh = isinstance(wrapped, ast.Lambda) or (isinstance(wrapped, ast.Name) and wrapped.id in defined)
            if fresh and name in called:
                self.add(call.lineno, "JL007", f"{_name(call.func)} of a lambda or nested def, stored and called in a function")

    def visit_Assign(self, node: ast.Assign) -> None:
        if isinstance(node.value, ast.Call) and "filter_jit" in ast.unparse(node.value.func):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    self.filter_jitted.add(target.id)
        self.generic_visit(node)

    # Patterns ----------------------------------------------------------------------------
    def visit_Call(self, node: ast.Call) -> None:
        name = _name(node.func)
        in_loop = bool(self.loops)
        scope = id(self.functions[-1]) if self.functions else 0
        if name == "tree_at":
            self.tree_at_calls[scope].append(node.lineno)
        if name in TIMERS and "time" in _dotted(node.func) + name or name == "default_timer":
            self.timer_reads[scope].append(node.lineno)
        if not in_loop and self.functions and isinstance(node.func, ast.Call) and node.func.args:
            if _name(node.func.func) in JIT_NAMES:
                self.add(node.func.lineno, "JL007", f"{_name(node.func.func)}(...) built and called at once in a function")
        if in_loop:
            if isinstance(node.func, ast.Name):
                self.loop_called.add(node.func.id)
            if name == "tree_at":
                self.add(node.lineno, "JL003", "tree_at call in a loop")
            if name in JIT_NAMES:
                self.add(node.lineno, "JL007", f"{name}(...) called in a loop")
            if name in HOST_COPIES and (node.args or name in ("item", "tolist")):
                if not (name in ("float", "int", "print") and all(isinstance(a, ast.Constant) for a in node.args)):
                    self.add(node.lineno, "JL005", f"{name} in a loop")
            if name == "array_split":
                self.add(node.lineno, "JL004", "array_split in a loop")
            if isinstance(node.func, ast.Name) and node.func.id in self.filter_jitted:
                self.add(node.lineno, "JL002", f"filter_jit function {node.func.id} called in a loop")
            if name in ("apply",) or (isinstance(node.func, ast.Attribute) and node.func.attr == "apply"):
                self.add(node.lineno, "JL001", "model.apply called in a loop")
        if name in ("batch", "padded_batch") and isinstance(node.func, ast.Attribute):
            if not any(k.arg == "drop_remainder" for k in node.keywords):
                self.add(node.lineno, "JL004", f".{name}() without drop_remainder")
        if name in ("DataLoader",) and not any(k.arg == "drop_last" for k in node.keywords):
            self.add(node.lineno, "JL004", "DataLoader without drop_last")
        self.generic_visit(node)

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        if self.loops and any(isinstance(v, ast.FormattedValue) for v in node.values):
            self.add(node.lineno, "JL005", "f-string in a loop")
        self.generic_visit(node)

    def _grow_and_slice(self, loop: ast.AST) -> None:
        """Loop-local growth (JL008) and loop-index slices (JL004)."""
        loop_vars = set()
        if isinstance(loop, (ast.For, ast.AsyncFor)):
            loop_vars = {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)}
        for node in ast.walk(loop):
            if isinstance(node, ast.Call) and _name(node.func) in GROW_NAMES and node is not loop:
                self.add(node.lineno, "JL008", f"{_name(node.func)} in a loop")
            if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice) and loop_vars:
                bounds = [b for b in (node.slice.lower, node.slice.upper) if b is not None]
                names = {n.id for b in bounds for n in ast.walk(b) if isinstance(n, ast.Name)}
                if names & loop_vars and node.slice.upper is not None:
                    code = "JL004" if node.slice.lower is not None else "JL008"
                    self.add(node.lineno, code, "slice bounded by the loop variable")

    def finish(self) -> None:
        for calls in self.tree_at_calls.values():
            if len(calls) >= 2:
                for line in calls:
                    self.add(line, "JL003", "one of several tree_at calls in a function")
        for reads in self.timer_reads.values():
            for line in sorted(set(reads))[1:]:
                self.add(line, "JL006", "second timer read in a function")
        for name in self.loop_called:
            node = self.defs.get(name)
            if node is None:
                continue
            text = ast.unparse(node)
            decorated = " ".join(ast.unparse(d) for d in node.decorator_list)
            if ("jnp." in text or "lax." in text or ".apply(" in text) and "jit" not in decorated:
                self.add(node.lineno, "JL001", f"{name} does array work and is called in a loop")


def find_in_source(source: str) -> list[tuple[int, str, str]]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tree = ast.parse(source)
    finder = _Finder()
    finder.visit(tree)
    finder.finish()
    first: dict[tuple[int, str], str] = {}
    for line, code, pattern in finder.found:
        first.setdefault((line, code), pattern)
    return sorted((line, code, pattern) for (line, code), pattern in first.items())


def _kept(found: list[tuple[int, str, str]], path: str) -> list[tuple[int, str, str]]:
    """`found` without the per-call patterns in test files."""
    test = bool(TEST_PATH.search(path))
    return [row for row in found if not (test and row[2].endswith(PER_CALL_PATTERNS))]


def find_in_repo(repo: Repo) -> list[tuple[str, int, str, str]]:
    rows = []
    for path in sorted(repo.folder.rglob("*")):
        if path.suffix not in (".py", ".ipynb") or not path.is_file():
            continue
        relative = path.relative_to(repo.folder).as_posix()
        data = path.read_bytes()
        if not any(marker.encode() in data for marker in JAX_MARKERS):
            continue
        try:
            if path.suffix == ".ipynb":
                notebook = read_notebook(data)
                for line, code, pattern in _kept(find_in_source(notebook.text), relative):
                    cell, cell_line = notebook.locate(line)
                    rows.append((f"{relative}#{cell}", cell_line, code, pattern))
            else:
                for line, code, pattern in _kept(find_in_source(data.decode("utf-8")), relative):
                    rows.append((relative, line, code, pattern))
        except (SyntaxError, ValueError, NotebookError, RecursionError):
            continue
    return rows


def write_candidates(out: Path) -> int:
    corpus = load_corpus()
    count = 0
    with out.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, delimiter="\t", lineterminator="\n", quoting=csv.QUOTE_NONE, escapechar="\\")
        writer.writerow(("repo", "split", "path", "line", "code", "pattern"))
        for repo in corpus.repos:
            for path, line, code, pattern in find_in_repo(repo):
                writer.writerow((repo.name, repo.split, path, line, code, pattern))
                count += 1
    return count



def worklist(split: str, seed: int | str, codes: list[str], skip_tests: bool = False,
             sizes: dict[str, int | None] | None = None, batches: set[int] | None = None,
             table: Path | None = None) -> list[dict[str, str]]:
    """Candidates to judge: all of a rare rule's, a seeded sample of a common one's, none within
    3 lines of a site already labelled for the same rule (test files left out on request: every
    one of them is FP by the standard, so they say nothing about recall). `batches`: only the
    repositories of these batches (a fresh batch is judged on its own; the sample of each rule
    is drawn from that batch's candidates, `random.Random(f"{seed}-{split}-{code}")`)."""
    with (table or CANDIDATES_TSV).open(encoding="utf-8", newline="") as handle:
        rows = [r for r in csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE) if r["split"] == split]
    if batches is not None:
        batch_of = {repo.name: repo.batch for repo in load_corpus().repos}
        rows = [r for r in rows if batch_of.get(r["repo"]) in batches]
    labelled: dict[tuple[str, str, str], list[int]] = defaultdict(list)
    try:
        for label in load_labels():
            labelled[(label.repo, label.path, label.code)].append(label.line)
    except FileNotFoundError:
        pass

    def judged(row: dict[str, str]) -> bool:
        lines = labelled.get((row["repo"], row["path"], row["code"]), [])
        return any(abs(line - int(row["line"])) <= 3 for line in lines)

    chosen = []
    for code in codes:
        pool = [r for r in rows if r["code"] == code and not judged(r)]
        if skip_tests:
            pool = [r for r in pool if not TEST_PATH.search(r["path"])]
        size = (sizes or SAMPLE_SIZES).get(code)
        if size is not None and len(pool) > size:
            pool = random.Random(f"{seed}-{split}-{code}").sample(pool, size)
        chosen.extend(pool)
    return chosen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", action="store_true", help="print the judging worklist instead")
    parser.add_argument("--split", choices=("dev", "test"), default="dev")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--code", action="append", default=[], help="rule codes (default: all)")
    parser.add_argument("--skip-tests", action="store_true", help="leave out test files")
    parser.add_argument("--batch", type=int, action="append", default=[], help="only these batches' repositories (repeatable)")
    parser.add_argument(
        "--size", action="append", default=[], metavar="CODE=N",
        help="sample N candidates of CODE instead of the default (repeatable; a fresh batch: JL005=25, JL008=12)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.sample:
        codes = args.code or sorted(SAMPLE_SIZES)
        batches = set(args.batch) or None
        sizes: dict[str, int | None] = dict(SAMPLE_SIZES)
        for item in args.size:
            code, _, number = item.partition("=")
            if code not in SAMPLE_SIZES or not number.isdigit():
                parser.error(f"--size {item!r}: expected CODE=N with a rule code such as JL005=25")
            sizes[code] = int(number)
        for row in worklist(args.split, args.seed, codes, skip_tests=args.skip_tests, sizes=sizes, batches=batches):
            print("\t".join((row["repo"], row["path"], row["line"], row["code"], row["pattern"])))
        return 0
    count = write_candidates(CANDIDATES_TSV)
    print(f"{count} candidates in {CANDIDATES_TSV}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
