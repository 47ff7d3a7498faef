"""Where a name is bound: the assignments, parameters, loop targets, `with` targets, imports
and definitions of the scope that a read of the name resolves to.

Built per scope on first use (`BindingIndex.of`), by one walk of the scope's own statements
(nested functions, classes and lambdas are other scopes; their names are bindings here).
Flow-insensitive: every binding of the name anywhere in the scope is returned, in source
order, so a question like "is `model` a Module here?" sees `model = MLP(...)` before the
loop as well as `model, opt_state, loss = step(model, opt_state, x)` inside it.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from ._scope import target_names
from ._walk import iter_children


if TYPE_CHECKING:
    from ._context import FileContext


__all__ = ["Binding", "BindingIndex", "Kind"]

_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)


class Kind(enum.Enum):
    ASSIGN = "assign"  # `x = ...`, `x: T = ...`, `x := ...`, `a, x = ...`
    AUGMENT = "augment"  # `x += ...`
    PARAM = "param"  # a parameter of the function
    FOR = "for"  # a `for` target
    WITH = "with"  # `with ... as x`
    IMPORT = "import"
    DEF = "def"
    CLASS = "class"
    OTHER = "other"  # `except ... as x`, `match` captures, `del x`


@dataclass(frozen=True)
class Binding:
    """One place where a scope binds a name."""

    kind: Kind
    node: cst.CSTNode  # the statement, parameter, `for`, `with` item...
    path: tuple[cst.CSTNode, ...]  # the ancestors of `node`
    # The expression whose value the name gets, when it is known whole: the right-hand side
    # of `x = v`, the matching element of `a, x = u, v`, the context of `with v as x`, a
    # parameter's default.
    value: cst.BaseExpression | None = None
    # For unpacking (`a, x = f()`, `for a, x in items`): the unpacked expression, and the
    # name's position in the target tuple (None when starred or nested).
    source: cst.BaseExpression | None = None
    index: int | None = None
    annotation: cst.BaseExpression | None = None


class BindingIndex:
    """The bindings of every scope of one file, computed per scope on first use."""

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self._by_scope: dict[int, dict[str, list[Binding]]] = {}
        self._attributes: dict[int, dict[str, list[Binding]]] = {}  # class -> attribute -> bindings

    def scope_of(self, name: str, path: Sequence[cst.CSTNode]) -> cst.CSTNode | None:
        """The def, lambda, class, comprehension or module that binds `name` as read at the
        end of `path`; None for a builtin or an undefined name."""
        return self.ctx.binding_owner(name, path)

    def of(self, name: str, path: Sequence[cst.CSTNode]) -> list[Binding]:
        """Every binding of `name` in the scope a read of it at the end of `path` resolves
        to (empty for builtins, undefined names and comprehension variables)."""
        scope = self.scope_of(name, path)
        if scope is None or isinstance(scope, _COMPREHENSIONS):
            return []
        table = self._by_scope.get(id(scope))
        if table is None:
            table = self._by_scope[id(scope)] = _scan(scope, self._path_to(scope, path))
        return table.get(name, [])

    def of_attribute(self, attribute: cst.Attribute, path: Sequence[cst.CSTNode]) -> list[Binding] | None:
        """Every binding of `self.attr`, read at the end of `path` in a method of a class: the
        class body's `attr: T` / `attr = v` (a dataclass or Module field) and each method's
        `self.attr = v`, `self.attr: T = v`, `self.attr += v` and `self.a, self.attr = u, v`,
        each with the ancestors of its statement. None when `attribute` is not read through
        the method's first parameter (`self`, `cls`) or no class holds the method."""
        holder = attribute.value
        if not isinstance(holder, cst.Name):
            return None
        # the innermost class, and its method around the read (ClassDef -> IndentedBlock ->
        # FunctionDef; the read may sit in a function nested in the method, a closure over it)
        index = next((i for i in range(len(path) - 1, -1, -1) if isinstance(path[i], cst.ClassDef)), None)
        if index is None or index + 2 >= len(path) or not isinstance(path[index + 2], cst.FunctionDef):
            return None
        method = path[index + 2]
        assert isinstance(method, cst.FunctionDef)
        first = (*method.params.posonly_params, *method.params.params)
        if not first or first[0].name.value != holder.value or _static(method):
            return None
        owner = path[index]
        assert isinstance(owner, cst.ClassDef)
        table = self._attributes.get(id(owner))
        if table is None:
            table = self._attributes[id(owner)] = _attribute_bindings(owner, tuple(path[:index]))
        return table.get(attribute.attr.value, [])

    def _path_to(self, scope: cst.CSTNode, path: Sequence[cst.CSTNode]) -> list[cst.CSTNode]:
        for index, node in enumerate(path):
            if node is scope:
                return list(path[:index])
        return []


def _static(method: cst.FunctionDef) -> bool:
    """A `@staticmethod`: its first parameter is no instance."""
    return any(isinstance(d.decorator, cst.Name) and d.decorator.value == "staticmethod" for d in method.decorators)


def _attribute_bindings(owner: cst.ClassDef, outer: tuple[cst.CSTNode, ...]) -> dict[str, list[Binding]]:
    """The bindings of each attribute of the class `owner` (whose ancestors are `outer`): its
    fields, and what its methods assign through their first parameter. One walk per class."""
    table: dict[str, list[Binding]] = {}
    body_path = (*outer, owner, owner.body)
    for statement in owner.body.body:
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                inner = (*body_path, statement)
                if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
                    table.setdefault(small.target.value, []).append(
                        Binding(Kind.ASSIGN, small, inner, value=small.value, annotation=small.annotation.annotation)
                    )
                elif isinstance(small, cst.Assign):
                    for target in small.targets:
                        if isinstance(target.target, cst.Name):
                            table.setdefault(target.target.value, []).append(Binding(Kind.ASSIGN, small, inner, value=small.value))
            continue
        if not isinstance(statement, cst.FunctionDef):
            continue
        params = (*statement.params.posonly_params, *statement.params.params)
        if not params or _static(statement):
            continue
        receiver = params[0].name.value

        def attribute(target: cst.BaseExpression) -> str | None:
            if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == receiver:
                return target.attr.value
            return None

        stack: list[tuple[cst.CSTNode, tuple[cst.CSTNode, ...]]] = [(statement.body, (*body_path, statement))]
        while stack:
            node, path = stack.pop()
            if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                continue  # another scope: its `self` is not this method's
            if isinstance(node, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
                targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
                annotation = node.annotation.annotation if isinstance(node, cst.AnnAssign) else None
                kind = Kind.AUGMENT if isinstance(node, cst.AugAssign) else Kind.ASSIGN
                for target in targets:
                    name = attribute(target)
                    if name is not None:
                        table.setdefault(name, []).append(Binding(kind, node, path, value=node.value, annotation=annotation))
                    elif isinstance(target, (cst.Tuple, cst.List)):
                        elements = target.elements
                        starred = any(isinstance(e, cst.StarredElement) for e in elements)
                        value = node.value
                        whole = isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(elements) and not starred
                        for position, element in enumerate(elements):
                            name = attribute(element.value)
                            if name is not None:
                                matched = value.elements[position].value if whole else None  # type: ignore[union-attr]
                                table.setdefault(name, []).append(
                                    Binding(kind, node, path, value=matched, source=value, index=None if starred else position)
                                )
                continue
            inner = (*path, node)
            stack.extend((child, inner) for child in iter_children(node))
    return table


def _scan(scope: cst.CSTNode, outer: list[cst.CSTNode]) -> dict[str, list[Binding]]:
    table: dict[str, list[Binding]] = {}

    def add(name: str, binding: Binding) -> None:
        table.setdefault(name, []).append(binding)

    def add_targets(
        target: cst.BaseExpression, kind: Kind, node: cst.CSTNode, path: tuple[cst.CSTNode, ...],
        value: cst.BaseExpression | None, annotation: cst.BaseExpression | None = None,
    ) -> None:  # fmt: skip
        if isinstance(target, cst.Name):
            add(target.value, Binding(kind, node, path, value=value, annotation=annotation))
            return
        if isinstance(target, (cst.Tuple, cst.List)):
            elements = target.elements
            values: list[cst.BaseExpression | None] = [None] * len(elements)
            if isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(elements) and not any(
                isinstance(e, cst.StarredElement) for e in (*value.elements, *elements)
            ):
                values = [e.value for e in value.elements]
            starred = any(isinstance(e, cst.StarredElement) for e in elements)
            for position, element in enumerate(elements):
                if isinstance(element.value, cst.Name):
                    add(
                        element.value.value,
                        Binding(kind, node, path, value=values[position], source=value,
                                index=None if starred or isinstance(element, cst.StarredElement) else position),
                    )  # fmt: skip
                else:
                    for name in target_names(element.value):
                        add(name, Binding(kind, node, path, source=value))
            return
        for name in target_names(target):  # attributes and subscripts bind nothing
            add(name, Binding(kind, node, path, source=value))

    root_path = (*outer, scope)
    if isinstance(scope, (cst.FunctionDef, cst.Lambda)):
        params = scope.params
        for param in (*params.posonly_params, *params.params, *params.kwonly_params,
                      *(p for p in (params.star_arg, params.star_kwarg) if isinstance(p, cst.Param))):  # fmt: skip
            annotation = param.annotation.annotation if param.annotation is not None else None
            add(param.name.value, Binding(Kind.PARAM, param, (*root_path, params), value=param.default, annotation=annotation))
        body: cst.CSTNode = scope.body
    elif isinstance(scope, cst.Module):
        body = scope
        root_path = ()
    else:
        body = scope.body  # type: ignore[attr-defined]

    stack: list[tuple[cst.CSTNode, tuple[cst.CSTNode, ...]]] = [(body, root_path)]
    while stack:
        node, path = stack.pop()
        inner = (*path, node)
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)) and node is not body:
            add(node.name.value, Binding(Kind.DEF if isinstance(node, cst.FunctionDef) else Kind.CLASS, node, path))
            # Decorators, defaults, annotations and bases run in this scope.
            for child in (*node.decorators, *(getattr(node, "bases", ()) or ()), *(getattr(node, "keywords", ()) or ())):
                stack.append((child, inner))
            if isinstance(node, cst.FunctionDef):
                stack.append((node.params, inner))
            continue
        if isinstance(node, cst.Param):
            if node.default is not None:
                stack.append((node.default, inner))
            continue
        if isinstance(node, cst.Lambda):
            stack.append((node.params, inner))
            continue
        if isinstance(node, _COMPREHENSIONS):
            first = node.for_in
            stack.append((first.iter, (*inner, first)))
            continue
        if isinstance(node, cst.Assign):
            for target in node.targets:
                add_targets(target.target, Kind.ASSIGN, node, path, node.value)
        elif isinstance(node, cst.AnnAssign):
            add_targets(node.target, Kind.ASSIGN, node, path, node.value, node.annotation.annotation)
        elif isinstance(node, cst.AugAssign):
            add_targets(node.target, Kind.AUGMENT, node, path, node.value)
        elif isinstance(node, cst.NamedExpr):
            add_targets(node.target, Kind.ASSIGN, node, path, node.value)
        elif isinstance(node, cst.For):
            add_targets(node.target, Kind.FOR, node, path, node.iter)
        elif isinstance(node, cst.WithItem) and node.asname is not None:
            add_targets(node.asname.name, Kind.WITH, node, path, node.item)
        elif isinstance(node, (cst.Import, cst.ImportFrom)):
            names = node.names
            if not isinstance(names, cst.ImportStar):
                for alias in names:
                    if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                        add(alias.asname.name.value, Binding(Kind.IMPORT, node, path))
                    else:
                        full = alias.name
                        while isinstance(full, cst.Attribute):
                            full = full.value
                        if isinstance(full, cst.Name):
                            add(full.value, Binding(Kind.IMPORT, node, path))
        elif isinstance(node, cst.ExceptHandler) and node.name is not None:
            for name in target_names(node.name.name):
                add(name, Binding(Kind.OTHER, node, path))
        elif isinstance(node, cst.Del):
            for name in target_names(node.target):
                add(name, Binding(Kind.OTHER, node, path))
        elif isinstance(node, (cst.MatchAs, cst.MatchStar)) and node.name is not None:
            add(node.name.value, Binding(Kind.OTHER, node, path))
        children = list(iter_children(node))
        children.reverse()
        stack.extend((child, inner) for child in children)
    if any(len(bindings) > 1 for bindings in table.values()):
        order = _source_order(scope)  # one walk of the scope, not one per name
        for bindings in table.values():
            bindings.sort(key=order)
    return table


def _source_order(scope: cst.CSTNode):  # type: ignore[no-untyped-def]
    """Sort key putting bindings in source order (a walk of the scope numbers its nodes)."""
    order: dict[int, int] = {}
    stack = [scope]
    while stack:
        node = stack.pop()
        order[id(node)] = len(order)
        children = list(iter_children(node))
        children.reverse()
        stack.extend(children)
    return lambda binding: order.get(id(binding.node), 0)
