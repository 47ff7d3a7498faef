"""Import-alias resolution without libcst's whole-file scope analysis.

`QualifiedNameProvider` costs ~7x the parse on real code, so jaxlint keeps its own table of
what each name was imported as. A scope (module, class, function, lambda) is scanned once,
lazily, when a rule first asks to resolve a name inside it. A name that a scope binds both by
an import and by anything else (assignment, `def`, parameter, `for` target, `del`...) is
unresolved: precision first.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import libcst as cst


__all__ = [
    "Scope",
    "dotted_name",
    "function_scope",
    "module_scope",
    "parameter_names",
    "record_import",
    "scan_bindings",
    "target_names",
]


@dataclass
class Scope:
    """What one scope binds: import aliases and every other binding."""

    kind: str  # "module", "class", "function" or "lambda"
    imports: dict[str, str | None] = field(default_factory=dict)
    bindings: set[str] = field(default_factory=set)
    global_names: set[str] = field(default_factory=set)

    def add_import(self, local: str, target: str) -> None:
        previous = self.imports.get(local, target)
        # The same name imported as two different things is ambiguous.
        self.imports[local] = target if previous == target else None

    def lookup(self, name: str) -> tuple[bool, str | None]:
        """(whether this scope binds `name`, what it was imported as or None)."""
        if name in self.global_names:
            return False, None
        if name in self.bindings:
            return True, None
        if name in self.imports:
            return True, self.imports[name]
        return False, None


def dotted_name(expr: cst.BaseExpression) -> str | None:
    """`a.b.c` for a chain of attributes on a name; None for anything else (`f(x).y`)."""
    parts: list[str] = []
    while isinstance(expr, cst.Attribute):
        parts.append(expr.attr.value)
        expr = expr.value
    if isinstance(expr, cst.Name):
        parts.append(expr.value)
        parts.reverse()
        return ".".join(parts)
    return None


def _module_of_import_from(node: cst.ImportFrom) -> str:
    dots = "." * len(node.relative)
    module = dotted_name(node.module) if node.module is not None else None
    return dots + (module or "")


def record_import(scope: Scope, node: cst.Import | cst.ImportFrom) -> None:
    if isinstance(node, cst.Import):
        for alias in node.names:
            full = dotted_name(alias.name)
            if full is None:
                continue
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                scope.add_import(alias.asname.name.value, full)
            else:
                head = full.split(".", 1)[0]
                scope.add_import(head, head)
        return
    if isinstance(node.names, cst.ImportStar):
        return
    base = _module_of_import_from(node)
    for alias in node.names:
        name = dotted_name(alias.name)
        if name is None:
            continue
        target = f"{base}.{name}" if base and not base.endswith(".") else base + name
        if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
            scope.add_import(alias.asname.name.value, target)
        else:
            scope.add_import(name, target)


def target_names(target: cst.BaseExpression) -> Iterable[str]:
    """Names bound by an assignment target (`a`, `a, (b, *c)`); attributes bind nothing."""
    if isinstance(target, cst.Name):
        yield target.value
    elif isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            yield from target_names(element.value)
    elif isinstance(target, cst.StarredElement):
        yield from target_names(target.value)


def scan_bindings(body: Sequence[cst.CSTNode], scope: Scope) -> None:
    """Record what the statements in `body` bind, not descending into nested scopes."""
    for stmt in body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                _scan_small(small, scope)
        elif isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            scope.bindings.add(stmt.name.value)
        elif isinstance(stmt, cst.BaseCompoundStatement):
            _scan_compound(stmt, scope)


def _scan_small(small: cst.BaseSmallStatement, scope: Scope) -> None:
    if isinstance(small, (cst.Import, cst.ImportFrom)):
        record_import(scope, small)
    elif isinstance(small, cst.Assign):
        for assign_target in small.targets:
            scope.bindings.update(target_names(assign_target.target))
    elif isinstance(small, (cst.AnnAssign, cst.AugAssign)):
        scope.bindings.update(target_names(small.target))
    elif isinstance(small, cst.Del):
        scope.bindings.update(target_names(small.target))
    elif isinstance(small, cst.Global):
        scope.global_names.update(item.name.value for item in small.names)


def _body_of(block: cst.BaseSuite) -> Sequence[cst.CSTNode]:
    return block.body


def _scan_compound(stmt: cst.BaseCompoundStatement, scope: Scope) -> None:
    if isinstance(stmt, cst.For):
        scope.bindings.update(target_names(stmt.target))
    elif isinstance(stmt, cst.With):
        for item in stmt.items:
            if item.asname is not None:
                scope.bindings.update(target_names(item.asname.name))
    elif isinstance(stmt, (cst.Try, cst.TryStar)):
        for handler in stmt.handlers:
            if handler.name is not None and isinstance(handler.name.name, cst.Name):
                scope.bindings.add(handler.name.name.value)
            scan_bindings(_body_of(handler.body), scope)
        if stmt.finalbody is not None:
            scan_bindings(_body_of(stmt.finalbody.body), scope)
    elif isinstance(stmt, cst.Match):
        for case in stmt.cases:
            scope.bindings.update(_pattern_names(case.pattern))
            scan_bindings(_body_of(case.body), scope)
    body = getattr(stmt, "body", None)
    if isinstance(body, cst.BaseSuite):
        scan_bindings(_body_of(body), scope)
    orelse = getattr(stmt, "orelse", None)
    while orelse is not None:
        if isinstance(orelse, cst.If):
            scan_bindings(_body_of(orelse.body), scope)
            orelse = orelse.orelse
        else:
            scan_bindings(_body_of(orelse.body), scope)
            orelse = None


def _pattern_names(pattern: cst.CSTNode) -> set[str]:
    """Names a `case` pattern captures (`case x`, `case [*rest]`, `case {**rest}`, `as y`)."""
    from ._walk import iter_children

    names: set[str] = set()
    stack = [pattern]
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.MatchAs, cst.MatchStar)) and isinstance(node.name, cst.Name):
            names.add(node.name.value)
        elif isinstance(node, cst.MatchMapping) and isinstance(node.rest, cst.Name):
            names.add(node.rest.value)
        if isinstance(node, cst.MatchValue):
            continue  # `case jnp.float32:` reads a name, it does not bind one
        stack.extend(iter_children(node))
    return names


def module_scope(module: cst.Module, *, walrus: frozenset[str] = frozenset()) -> Scope:
    """What the module binds; `walrus` names (bound by `:=` somewhere) count as bound."""
    scope = Scope("module")
    scan_bindings(module.body, scope)
    scope.bindings.update(walrus)
    return scope


def parameter_names(params: cst.Parameters) -> Iterable[str]:
    """The names a `def`'s or a lambda's parameters bind, in order, `*args` and `**kwargs` last."""
    for param in (*params.posonly_params, *params.params, *params.kwonly_params):
        yield param.name.value
    for star in (params.star_arg, params.star_kwarg):
        if isinstance(star, cst.Param):
            yield star.name.value


_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)


def function_scope(
    node: cst.FunctionDef | cst.Lambda | cst.ClassDef | cst.BaseComp,
    *,
    walrus: frozenset[str] = frozenset(),
) -> Scope:
    """What a def, lambda, class body or comprehension binds; `walrus` names (bound by `:=`
    somewhere in the file) count as bound in every function."""
    if isinstance(node, _COMPREHENSIONS):
        scope = Scope("comprehension")
        comp_for: cst.CompFor | None = node.for_in
        while comp_for is not None:
            scope.bindings.update(target_names(comp_for.target))
            comp_for = comp_for.inner_for_in
        return scope
    if isinstance(node, cst.ClassDef):
        scope = Scope("class")
        scan_bindings(_body_of(node.body), scope)
        return scope
    if isinstance(node, cst.Lambda):
        scope = Scope("lambda")
        scope.bindings.update(parameter_names(node.params))
        return scope
    scope = Scope("function")
    scope.bindings.update(parameter_names(node.params))
    scan_bindings(_body_of(node.body), scope)
    scope.bindings.update(walrus)
    return scope
