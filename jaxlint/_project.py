"""What the other modules of a project define: the facts one file's lint needs from the rest.

jaxlint lints one file at a time, but the jitted training step often lives in `steps.py` and
the loop that calls it in `train.py`, and a model-surgery helper in `utils.py` may only ever
be called from a jitted function elsewhere. Before linting, `summarize` reads every file of
the run with Python's `ast` (a tenth of the cost of the libcst parse the lint does) and
records, per module:

- `jitted`: its top-level names bound to jit-compiled callables (`@jax.jit def step`,
  `@partial(jax.jit, static_argnums=1)`, `step = eqx.filter_jit(make_step)`), with the API;
- `traced_calls`: the project functions it calls from traced code (the bodies of functions it
  jits, transforms, scans or hands to a transform, and the local functions those call), and
  the project functions it hands to a transform itself (`jax.jit(steps.loss)`);
- `eager_calls`: the project functions it calls anywhere else (module level, functions not
  known to be traced: precision first, a function of unknown mode counts as eager).

`Project` joins them: `jitted(name)` for a call of an imported name, and `traced_only(name)`
for a function that other modules call only from traced code and nowhere else, so that its
body runs once per compile, not once per step. Names are absolute dotted names (`pkg.steps.
train_step`); a module's name comes from its path and the `__init__.py` files above it, as
Python would import it (a script beside others is imported by its stem).
"""

from __future__ import annotations

import ast
import hashlib
import re
from collections.abc import Iterable, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import _jaxapi

__all__ = ["ModuleFacts", "Project", "absolute_name", "module_name", "summarize"]

@dataclass(frozen=True)
class ModuleFacts:
    """What one module tells the rest of the project (see the module docstring)."""

    module: str
    jitted: tuple[tuple[str, str], ...] = ()  # (top-level name, jit API)
    traced_calls: frozenset[str] = frozenset()
    eager_calls: frozenset[str] = frozenset()


@dataclass
class Project:
    """The facts of every module of a run, joined."""

    modules: dict[str, str] = field(default_factory=dict)  # display path -> module name
    _jitted: dict[str, str] = field(default_factory=dict)  # absolute name -> jit API
    _traced: set[str] = field(default_factory=set)
    _eager: set[str] = field(default_factory=set)
    _calls_jitted: set[str] = field(default_factory=set)  # display paths
    digest: str = ""
    library: _jaxapi.Library = field(default_factory=_jaxapi.base_library)  # with `extend-*` names

    @classmethod
    def from_facts(
        cls,
        facts: Iterable[tuple[str, ModuleFacts]],
        *,
        imported_jit: bool = False,
        library: _jaxapi.Library | None = None,
    ) -> Project:
        """`imported_jit`: also use what other modules jit (preview: on the ecosystem check's
        test split it found host copies that the host needs right away, in RL loops that step
        an environment, more often than it found true ones)."""
        project = cls(library=library or _jaxapi.base_library())
        lines = [f"l {project.library.digest}"]
        facts = list(facts)
        for display, module in facts:
            project.modules[display] = module.module
            if imported_jit:
                for name, api in module.jitted:
                    project._jitted[f"{module.module}.{name}"] = api
            project._traced |= module.traced_calls
            project._eager |= module.eager_calls
        for display, module in facts:
            if (module.traced_calls | module.eager_calls) & project._jitted.keys():
                project._calls_jitted.add(display)
        for name, api in sorted(project._jitted.items()):
            lines.append(f"j {name} {api}")
        lines += [f"t {name}" for name in sorted(project._traced - project._eager)]
        # The findings of a file depend on these facts only: the cache keys on them.
        project.digest = hashlib.sha256("\n".join(lines).encode("utf-8", "surrogateescape")).hexdigest()[:16]
        return project

    def module_of(self, display: str) -> str | None:
        return self.modules.get(display)

    def calls_jitted(self, display: str) -> bool:
        """Whether the file calls (or hands on) a callable another module jits."""
        return display in self._calls_jitted

    def jitted(self, name: str, module: str | None = None) -> str | None:
        """The jit API compiling the project callable `name` (as imported into `module`)."""
        return self._jitted.get(absolute_name(name, module))

    def traced_only(self, name: str) -> bool:
        """Whether other modules call the function `name` (absolute) only from traced code."""
        return name in self._traced and name not in self._eager


def absolute_name(name: str, module: str | None) -> str:
    """`name` as an import spells it (`.steps.train_step`, `..utils`, `pkg.steps`), made
    absolute from the importing `module`."""
    if not name.startswith(".") or module is None:
        return name
    dots = len(name) - len(name.lstrip("."))
    package = module.split(".")[:-dots] if dots <= module.count(".") + 1 else []
    rest = name[dots:]
    return ".".join([*package, rest]) if rest else ".".join(package)


def module_name(path: Path) -> str:
    """The dotted name Python imports `path` by: its stem, under every package (folder with an
    `__init__.py`) above it."""
    parts = [path.stem] if path.stem != "__init__" else []
    folder = path.parent
    while (folder / "__init__.py").is_file():
        parts.insert(0, folder.name)
        if folder.parent == folder:
            break
        folder = folder.parent
    return ".".join(parts) or path.stem


# A module without any of these words jits, transforms and traces nothing of its own.
_TRACE_WORDS = re.compile(r"jit|vmap|grad|scan|pmap|shard_map|checkpoint|remat|custom_[jv]jp|fori_loop|while_loop|cond|switch|transform|linearize")
_FROM_IMPORT = re.compile(r"^[ \t]*from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#;]+)", re.MULTILINE)
_IMPORT = re.compile(r"^[ \t]*import[ \t]+([^\n#;]+)", re.MULTILINE)


def summarize(module: str, text: str) -> ModuleFacts:
    """The facts of the module `module` whose source is `text` (empty facts when it does not
    parse: the lint reports that).

    A module that mentions no tracing API is read from its import lines alone (no parse): it
    traces nothing, and every name it imports counts as called eagerly."""
    if not _TRACE_WORDS.search(text):
        return ModuleFacts(module, eager_calls=frozenset(_imported_names(module, text)))
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ModuleFacts(module)
    return _Summary(module, tree).facts()


def _imported_names(module: str, text: str) -> set[str]:
    """The absolute names a module's import lines bring in (`from .steps import a, b as c`)."""
    found = set()
    for match in _FROM_IMPORT.finditer(text):
        base, names = absolute_name(match.group(1), module), match.group(2).strip("() \t\n")
        for part in names.split(","):
            name = part.split(" as ")[0].strip()
            if name and name != "*" and name.isidentifier():
                found.add(f"{base}.{name}" if base else name)
    for match in _IMPORT.finditer(text):
        for part in match.group(1).split(","):
            name = part.split(" as ")[0].strip()
            if name:
                found.add(name)
    return found


class _Summary:
    """One walk of a module's tree: its imports, its top-level functions, and every call with
    the top-level function it is in (None: module level or a class body)."""

    def __init__(self, module: str, tree: ast.Module) -> None:
        self.module = module
        self.tracing = _jaxapi.TRACING  # what the active library traces
        self.imports: dict[str, str] = {}  # local name -> absolute dotted name
        self.functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        self.calls: list[tuple[str | None, ast.Call]] = []
        for statement in tree.body:
            owner = statement.name if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)) else None
            if owner is not None:
                self.functions[owner] = statement  # type: ignore[assignment]
            for node in ast.walk(statement):
                if isinstance(node, ast.Call):
                    self.calls.append((owner, node))
                elif isinstance(node, ast.Import):
                    for alias in node.names:
                        if alias.asname:
                            self.imports[alias.asname] = alias.name
                        else:
                            head = alias.name.split(".", 1)[0]
                            self.imports[head] = head
                elif isinstance(node, ast.ImportFrom):
                    base = absolute_name("." * node.level + (node.module or ""), module)
                    for alias in node.names:
                        if alias.name != "*":
                            self.imports[alias.asname or alias.name] = f"{base}.{alias.name}" if base else alias.name
        self.assignments = [s for s in tree.body if isinstance(s, ast.Assign) and isinstance(s.value, ast.Call)]

    def resolve(self, expr: ast.expr) -> str | None:
        parts: list[str] = []
        while isinstance(expr, ast.Attribute):
            parts.insert(0, expr.attr)
            expr = expr.value
        if not isinstance(expr, ast.Name):
            return None
        head = self.imports.get(expr.id)
        if head is None:
            return None
        return ".".join([head, *parts])

    def _wrapper(self, expr: ast.expr) -> str | None:
        """The tracing API `expr` is (`jax.jit`, `partial(jax.jit, ...)`, `jax.jit(...)` used
        as a decorator factory), or None."""
        if isinstance(expr, ast.Call):
            func = self.resolve(expr.func)
            if func in _jaxapi.PARTIAL and expr.args:
                return self._wrapper(expr.args[0])
            if func in self.tracing and not expr.args:
                return func  # `@jax.jit(static_argnums=...)`-style factories
            return None
        name = self.resolve(expr)
        return name if name in self.tracing else None

    def facts(self) -> ModuleFacts:
        jitted: dict[str, str] = {}
        roots: set[str] = set()  # local functions whose bodies are traced
        handed: set[str] = set()  # project functions of other modules handed to a transform
        for name, function in self.functions.items():
            for decorator in function.decorator_list:
                api = self._wrapper(decorator)
                if api is not None:
                    roots.add(name)
                    if api in _jaxapi.JIT_WRAPPERS:
                        jitted[name] = api
        local_callees: dict[str | None, set[str]] = {}
        called: dict[str | None, set[str]] = {}  # owner -> absolute names called or handed on
        for owner, call in self.calls:
            func = call.func
            if isinstance(func, ast.Name) and func.id in self.functions and func.id not in self.imports:
                local_callees.setdefault(owner, set()).add(func.id)
            target = self.resolve(func)
            if target is not None:
                called.setdefault(owner, set()).add(target)
                if target in self.tracing or target in _jaxapi.PARTIAL:
                    api = self._wrapper(func) if target in _jaxapi.PARTIAL else target
                    if api is not None:
                        for arg in call.args[:1]:
                            if isinstance(arg, ast.Name) and arg.id in self.functions:
                                roots.add(arg.id)
                            else:
                                handed_to = self.resolve(arg)
                                if handed_to is not None:
                                    handed.add(handed_to)
            elif isinstance(func, ast.Call):  # `jax.jit(f)(x)`, `partial(jax.jit, ...)(f)`
                api = self._wrapper(func.func) if isinstance(func.func, (ast.Name, ast.Attribute, ast.Call)) else None
                if api is not None:
                    for arg in func.args[:1]:
                        if isinstance(arg, ast.Name) and arg.id in self.functions:
                            roots.add(arg.id)
            for arg in call.args:
                if isinstance(arg, (ast.Name, ast.Attribute)):
                    passed = self.resolve(arg)
                    if passed is not None:
                        called.setdefault(owner, set()).add(passed)  # handed on: runs there, as it runs
        for statement in self.assignments:
            api = self._wrapper(statement.value.func)  # type: ignore[attr-defined]
            if api in _jaxapi.JIT_WRAPPERS:
                for target in statement.targets:
                    if isinstance(target, ast.Name):
                        jitted[target.id] = api
        traced = set(roots)
        stack = list(roots)
        while stack:
            for callee in local_callees.get(stack.pop(), ()):
                if callee not in traced:
                    traced.add(callee)
                    stack.append(callee)
        traced_calls: set[str] = set(handed)
        eager_calls: set[str] = set()
        for owner, names in called.items():
            (traced_calls if owner is not None and owner in traced else eager_calls).update(names)
        return ModuleFacts(self.module, tuple(sorted(jitted.items())), frozenset(traced_calls), frozenset(eager_calls))


def project_for(
    files: Iterable[tuple[str, Path, bytes]],
    store: MutableMapping[str, Any] | None = None,
    *,
    preview: bool = False,
    library: _jaxapi.Library | None = None,
) -> Project:
    """The project of a run: `files` are (display path, path, bytes) of its Python files.
    `store` (the lint cache's entries) keeps each module's facts by content hash, so a warm
    run reads no file's tree again. Which functions other modules call only from traced code
    is always used; what they jit only with `preview` (`Project.from_facts`). `library`: the
    library table with the user's `extend-*` names (default: as shipped)."""
    library = library or _jaxapi.base_library()
    with _jaxapi.using(library):
        facts = _module_facts(files, store, library)
    return Project.from_facts(facts, imported_jit=preview, library=library)


def _module_facts(
    files: Iterable[tuple[str, Path, bytes]], store: MutableMapping[str, Any] | None, library: _jaxapi.Library
) -> list[tuple[str, ModuleFacts]]:
    facts = []
    for display, path, data in files:
        if path.suffix != ".py":
            continue
        module = module_name(path.resolve() if not path.is_absolute() else path)
        # surrogateescape: a file name that is not UTF-8 keeps its bytes in the module name.
        named = f"{module}\0{library.digest}".encode("utf-8", "surrogateescape")
        key = "facts:" + hashlib.sha256(named + b"\0" + data).hexdigest()
        known = _stored_facts(store.get(key)) if store is not None else None
        if known is None:
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                continue
            known = summarize(module, text)
            if store is not None:
                store[key] = {
                    "module": known.module,
                    "jitted": [list(pair) for pair in known.jitted],
                    "traced": sorted(known.traced_calls),
                    "eager": sorted(known.eager_calls),
                }
        facts.append((display, known))
    return facts


def _stored_facts(entry: object) -> ModuleFacts | None:
    """The facts a cache entry holds, or None unless it has exactly the shape stored."""
    if not isinstance(entry, dict) or set(entry) != {"module", "jitted", "traced", "eager"}:
        return None
    module, jitted, traced, eager = entry["module"], entry["jitted"], entry["traced"], entry["eager"]
    if not isinstance(module, str) or not all(isinstance(x, list) for x in (jitted, traced, eager)):
        return None
    if not all(isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p) for p in jitted):
        return None
    if not all(isinstance(x, str) for x in (*traced, *eager)):
        return None
    return ModuleFacts(module, tuple((a, b) for a, b in jitted), frozenset(traced), frozenset(eager))
