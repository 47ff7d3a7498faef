"""Facts about the code around a node, shared by every rule and computed once per file.

The engine's walk keeps one list, the ancestors of the node being visited. Every other fact
(what a name was imported as, which loops repeat this node, the enclosing function and its
decorators, the names a loop rebinds) is derived from that list on demand and cached, so a
file that no rule asks about costs nothing beyond the walk.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import libcst as cst

from . import _jaxapi
from ._device import DeviceIndex
from ._jitted import JitIndex
from ._nodes import iter_subtree
from ._scope import (
    Scope,
    dotted_name,
    function_scope,
    module_scope,
    record_import,
    scan_bindings,
    target_names,
)


if TYPE_CHECKING:
    from ._project import Project
    from ._bindings import BindingIndex
    from ._callgraph import CallGraph
    from ._ragged import BatchIndex


__all__ = ["FileContext", "Loop"]

_SCOPE_NODES = (cst.FunctionDef, cst.Lambda, cst.ClassDef)
_GLOBAL = re.compile(r"\bglobal\b")
_BINDS = (
    r"(?:\b{name}\s*(?:[-+*/@%&|^]|//|\*\*|<<|>>)?=(?!=)"
    r"|\b(?:def|class|for)\s+{name}\b)"
)
_WALRUS = re.compile(r"(\w+)\s*:=")
_GLOBAL_NAMES = re.compile(r"^[ \t]*global[ \t]+(?P<names>[\w \t,]+)", re.M)
_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)

Loop = cst.For | cst.While | cst.ListComp | cst.SetComp | cst.DictComp | cst.GeneratorExp


@dataclass(frozen=True)
class FunctionInfo:
    """A `def` and how it is wrapped by its decorators."""

    node: cst.FunctionDef
    decorators: tuple[str | None, ...]
    jit: str | None  # the jit API it is decorated with (`jax.jit`, `equinox.filter_jit`...)


class FileContext:
    """The shared analysis of one file, handed to every rule."""

    def __init__(self, path: str, source: str, module: cst.Module, project: Project | None = None) -> None:
        self.path = path
        self.source = source
        self.module = module
        # The rest of the project (`_project`): what other modules jit and trace. None when
        # a file is linted alone.
        self.project = project
        self.module_name = project.module_of(path) if project is not None else None
        # A notebook's functions that its `%timeit` lines call (masked out of `source`):
        # benchmarked on purpose (`_notebook.NotebookSource.timed`).
        self.timed: frozenset[str] = frozenset()
        self.ancestors: list[cst.CSTNode] = []
        # Names some `:=` binds; treated as bound in every scope (cheaper than finding the
        # scope each one binds in, and it only ever makes resolution more careful).
        self._has_walrus = frozenset(_WALRUS.findall(source)) if ":=" in source else frozenset()
        self._module_scope = module_scope(module, walrus=self._has_walrus)
        self._scopes: dict[cst.CSTNode, Scope] = {}
        self._jit: JitIndex | None = None
        self._device: DeviceIndex | None = None
        self._calls: CallGraph | None = None
        self._bindings: BindingIndex | None = None
        self._batches: BatchIndex | None = None
        if _GLOBAL.search(source):
            self._note_global_rebindings()
        self._loop_bindings: dict[cst.CSTNode, frozenset[str]] = {}
        self._functions: dict[cst.FunctionDef, FunctionInfo] = {}
        self._aliases: list[tuple[str, str]] = []
        self._imports_seen = 0
        self._spellings: dict[tuple[frozenset[str], int], frozenset[str]] = {}
        # Functions of the file read again with Python's `ast` (`_waits._as_ast`), once each.
        self.ast_reads: dict[cst.FunctionDef, Any] = {}

    def _note_global_rebindings(self) -> None:
        """`global x` then `x = ...` in a function rebinds the module's `x`. Found by text,
        not by a second pass over the tree: a declared name counts as rebound when anything
        in the file looks like binding it (precision only needs no rebinding missed)."""
        for match in _GLOBAL_NAMES.finditer(self.source):
            names = match.group("names").split("#", 1)[0]
            for name in (n.strip() for n in names.split(",")):
                if name and re.search(_BINDS.format(name=re.escape(name)), self.source):
                    self._module_scope.bindings.add(name)

    # -- names ---------------------------------------------------------------------------

    def _scope_of(self, node: cst.CSTNode) -> Scope:
        scope = self._scopes.get(node)
        if scope is None:
            scope = self._scopes[node] = function_scope(node, walrus=self._has_walrus)  # type: ignore[arg-type]
        return scope

    def resolve(
        self,
        expr: cst.BaseExpression,
        ancestors: Sequence[cst.CSTNode] | None = None,
        *,
        anchor: cst.CSTNode | None = None,
    ) -> str | None:
        """The qualified name `expr` refers to through imports (`eqx.tree_at` →
        `equinox.tree_at`), or None when it is not an imported name or is rebound.

        `ancestors` defaults to those of the node being visited; `anchor` is the child of the
        last ancestor that contains `expr` (default: `expr` itself, right when `expr` is the
        visited node or lies inside it).
        """
        name = dotted_name(expr)
        if name is None:
            return None
        head, _, rest = name.partition(".")
        path = [*(self.ancestors if ancestors is None else ancestors), anchor or expr]
        target = self._lookup(head, path)
        if target is None:
            return None
        return f"{target}.{rest}" if rest else target

    def _lookup(self, head: str, path: Sequence[cst.CSTNode]) -> str | None:
        """What `head`, read at the end of `path`, was imported as (None: not an import)."""
        scope = self._binding_scope(head, path)
        if scope is None:
            # Bound nowhere in the file: a project callable a `from pkg import *` brings in
            return self.project.star_imported(head, self.module_name) if self.project is not None else None
        return scope.lookup(head)[1]

    def _binding_scope(self, head: str, path: Sequence[cst.CSTNode]) -> Scope | None:
        owner = self.binding_owner(head, path)
        if owner is None:
            return None
        return self._module_scope if owner is self.module else self._scope_of(owner)

    def binding_owner(self, name: str, path: Sequence[cst.CSTNode]) -> cst.CSTNode | None:
        """The def, lambda, class, comprehension or module whose scope binds `name` as read at
        the end of `path`; None for a builtin or an undefined name. Python's scoping order:
        a def's decorators, defaults and annotations, a class's bases and a comprehension's
        first iterable belong to the enclosing scope; class bodies are invisible to the
        functions and comprehensions inside them."""
        innermost = True
        for index in range(len(path) - 2, -1, -1):
            node, child = path[index], path[index + 1]
            if isinstance(node, _SCOPE_NODES):
                if child is not node.body:
                    continue
                if isinstance(node, cst.ClassDef) and not innermost:
                    continue
            elif isinstance(node, _COMPREHENSIONS):
                first = node.for_in
                if child is first and index + 2 < len(path) and path[index + 2] is first.iter:
                    continue
            else:
                continue
            innermost = False
            if self._scope_of(node).lookup(name)[0]:
                return node
        return self.module if self._module_scope.lookup(name)[0] else None

    def resolve_call(self, call: cst.Call) -> str | None:
        """The qualified name of the function `call` calls, if it is an imported name.
        `call` must be the node being visited or inside it."""
        return self.resolve(call.func, anchor=call)

    def is_call_to(self, call: cst.Call, names: frozenset[str]) -> bool:
        """Whether `call` calls one of the qualified `names`. Cheap when it does not: the
        last segment of the callee is checked against the known aliases first."""
        func = call.func
        if isinstance(func, cst.Attribute):
            last = func.attr.value
        elif isinstance(func, cst.Name):
            last = func.value
        else:
            return False
        if last not in self.local_names_for(names):
            return False
        return self.resolve(func, anchor=call) in names

    def local_names_for(self, names: frozenset[str]) -> frozenset[str]:
        """Every last segment under which something in `names` can be spelled in this file
        so far in the walk (`tree_at`, and `ta` after `from equinox import tree_at as ta`)."""
        key = (names, self._imports_seen)
        cached = self._spellings.get(key)
        if cached is None:
            spellings = {name.rsplit(".", 1)[-1] for name in names}
            for local, target in self._aliases:
                if target in names:
                    spellings.add(local)
            cached = self._spellings[key] = frozenset(spellings)
        return cached

    def note_import(self, node: cst.Import | cst.ImportFrom) -> None:
        """Called by the engine for every import statement it walks past."""
        scratch = Scope("scratch")
        record_import(scratch, node)
        for local, target in scratch.imports.items():
            if target is not None and local != target.rsplit(".", 1)[-1]:
                self._aliases.append((local, target))
        self._imports_seen += 1

    # -- position in the code ------------------------------------------------------------

    @property
    def calls(self) -> CallGraph:
        """The file's functions, where they are called from and how they run (built on
        first use)."""
        if self._calls is None:
            from ._callgraph import CallGraph

            self._calls = CallGraph.build(self)
        return self._calls

    @property
    def device(self) -> DeviceIndex:
        """Which values are on the device, which loops dispatch work, which calls are jitted
        (built on first use)."""
        if self._device is None:
            self._device = DeviceIndex(self)
        return self._device

    @property
    def bindings(self) -> BindingIndex:
        """Where each name is bound, per scope (built on first use)."""
        if self._bindings is None:
            from ._bindings import BindingIndex

            self._bindings = BindingIndex(self)
        return self._bindings

    @property
    def batches(self) -> BatchIndex:
        """Which loops cut batches whose last one can be smaller (built on first use)."""
        if self._batches is None:
            from ._ragged import BatchIndex

            self._batches = BatchIndex(self)
        return self._batches

    @property
    def jit(self) -> JitIndex:
        """Which callables of this file are jit-compiled (built on first use)."""
        if self._jit is None:
            self._jit = JitIndex.build(self)
        return self._jit

    def dispatches(self, call: cst.Call, ancestors: Sequence[cst.CSTNode] | None = None) -> bool:
        """Whether `call` sends work to the device: a JAX array operation (`jnp.*`,
        `jax.lax.*`, `jax.random.*`...) or a jitted callable. `ancestors` are `call`'s
        (default: `call` is the visited node or inside it)."""
        path = self.ancestors if ancestors is None else ancestors
        name = self.resolve(call.func, path, anchor=call)
        if name is not None:
            if _jaxapi.is_array_op(name):
                return True
            # A callable another module of the project jits (`from .steps import step`).
            return self.project is not None and self.jit.callee(call, path) is not None
        func = call.func
        if isinstance(func, cst.Call) and self.resolve(func.func, path, anchor=call) in _jaxapi.TRANSFORMS:
            return True
        return self.jit.callee(call, path) is not None

    def is_builtin(
        self, name: str, ancestors: Sequence[cst.CSTNode] | None = None, *, anchor: cst.CSTNode
    ) -> bool:
        """Whether `name`, read at `anchor` (whose ancestors are `ancestors`, default: those of
        the visited node), is bound by no enclosing scope, so it is Python's builtin."""
        path = [*(self.ancestors if ancestors is None else ancestors), anchor]
        return self._binding_scope(name, path) is None

    def ancestors_of(self, node: cst.CSTNode) -> list[cst.CSTNode]:
        """The ancestors of `node`, which encloses the node being visited (a ValueError when
        it does not)."""
        for index, ancestor in enumerate(self.ancestors):
            if ancestor is node:
                return list(self.ancestors[:index])
        raise ValueError("the node does not enclose the visited node")

    def path_to(self, node: cst.CSTNode) -> list[cst.CSTNode]:
        """Ancestors of the node being visited, then `node` itself."""
        return [*self.ancestors, node]

    def loops(self, node: cst.CSTNode, ancestors: Sequence[cst.CSTNode] | None = None) -> list[Loop]:
        """The loops that run `node` once per iteration, outermost first, stopping at the
        enclosing function or lambda (its body is not run by the loops around the `def`).
        `ancestors` are `node`'s (default: `node` is the visited node or inside it).

        A `for` loop's iterable and `else` run once, so they are not inside it; a `while`
        loop's test runs every iteration; in a comprehension everything but the first
        iterable repeats.
        """
        path = self.path_to(node) if ancestors is None else [*ancestors, node]
        found: list[Loop] = []
        for index in range(len(path) - 2, -1, -1):
            parent, child = path[index], path[index + 1]
            # A def/lambda body runs when called, not when the loop runs the definition
            # (its decorators and defaults do run); a class body runs with the loop.
            if isinstance(parent, (cst.FunctionDef, cst.Lambda)) and child is parent.body:
                break
            if isinstance(parent, cst.For):
                if child is parent.body:
                    found.append(parent)
            elif isinstance(parent, cst.While):
                if child is parent.body or child is parent.test:
                    found.append(parent)
            elif isinstance(parent, _COMPREHENSIONS):
                first = parent.for_in
                if child is not first or self._repeats_in_comprehension(path, index + 1):
                    found.append(parent)
        found.reverse()
        return found

    @staticmethod
    def _repeats_in_comprehension(path: list[cst.CSTNode], index: int) -> bool:
        """Inside the first `for ... in ...` of a comprehension, only the first iterable
        runs once; targets, conditions and nested `for`s repeat."""
        comp_for = path[index]
        assert isinstance(comp_for, cst.CompFor)
        child = path[index + 1] if index + 1 < len(path) else None
        return child is not comp_for.iter

    def enclosing_function(self, node: cst.CSTNode | None = None) -> cst.FunctionDef | None:
        """The innermost `def` containing the node being visited (or `node`'s ancestors)."""
        for ancestor in reversed(self.ancestors):
            if isinstance(ancestor, cst.FunctionDef):
                return ancestor
        return None

    def function_info(
        self, node: cst.FunctionDef, ancestors: Sequence[cst.CSTNode] | None = None
    ) -> FunctionInfo:
        """How `node` is decorated: resolved decorator names and the jit it uses, if any.
        `ancestors` are `node`'s (default: found in those of the node being visited)."""
        info = self._functions.get(node)
        if info is None:
            outer = list(ancestors) if ancestors is not None else self._ancestors_of_function(node)
            names = tuple(
                _jaxapi.decorator_target(
                    d.decorator, lambda e, d=d: self.resolve(e, [*outer, node], anchor=d)
                )
                for d in node.decorators
            )
            jit = next((n for n in names if n in _jaxapi.JIT_WRAPPERS), None)
            info = self._functions[node] = FunctionInfo(node, names, jit)
        return info

    def _ancestors_of_function(self, node: cst.FunctionDef) -> list[cst.CSTNode]:
        """The path to `node` (it is the visited node or one of its ancestors)."""
        for index, ancestor in enumerate(self.ancestors):
            if ancestor is node:
                return self.ancestors[:index]
        return self.ancestors

    def statement(self, node: cst.CSTNode) -> cst.CSTNode | None:
        """The innermost statement line or compound statement containing `node`."""
        for ancestor in reversed(self.path_to(node)):
            if isinstance(ancestor, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
                return ancestor
        return None

    def loop_bindings(self, loop: Loop) -> frozenset[str]:
        """Names (re)bound anywhere in the body of `loop`, including its targets."""
        cached = self._loop_bindings.get(loop)
        if cached is not None:
            return cached
        scope = Scope("loop")
        if isinstance(loop, cst.For):
            scan_bindings([loop], scope)
        elif isinstance(loop, cst.While):
            scan_bindings(loop.body.body, scope)
        else:
            comp_for: cst.CompFor | None = loop.for_in
            while comp_for is not None:
                scope.bindings.update(target_names(comp_for.target))
                comp_for = comp_for.inner_for_in
        result = frozenset(scope.bindings) | frozenset(scope.imports)
        self._loop_bindings[loop] = result
        return result
