"""A read-only walk over a libcst tree that skips syntactic trivia.

`libcst`'s own `node.visit(visitor)` rebuilds every node as it goes (it is written for
transformers) and visits every whitespace, comma and parenthesis node. Rules never look at
those, so the engine walks only the fields that can hold code: this is what keeps a full lint
within a small factor of the parse (`bench/lint_speed.py`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence

import libcst as cst


__all__ = ["child_fields", "iter_children"]

# Fields that only ever hold whitespace, comments, punctuation or keywords.
_TRIVIA_FIELDS = frozenset(
    {
        "lpar",
        "rpar",
        "lbracket",
        "rbracket",
        "lbrace",
        "rbrace",
        "leading_lines",
        "lines_after_decorators",
        "trailing_whitespace",
        "header",
        "footer",
        "indent",
        "encoding",
        "default_indent",
        "default_newline",
        "has_trailing_newline",
        "comma",
        "equal",
        "star",
        "dot",
        "semicolon",
        "colon",
        "newline",
        "asynchronous",
        "operator",
        "first_line",
        "empty_lines",
        "relative",
        "whitespace",
        "arrow",
        "default_comma",
        "star_arg_comma",
        "first_colon",
        "second_colon",
    }
)

# Visit decorators before the body they decorate, so that analysis of a function knows how
# it is wrapped before walking into it.
_FIELD_ORDER_OVERRIDES: dict[type[cst.CSTNode], tuple[str, ...]] = {
    cst.FunctionDef: ("decorators", "name", "params", "returns", "type_parameters", "body"),
    cst.ClassDef: ("decorators", "name", "type_parameters", "bases", "keywords", "body"),
}

_CHILD_FIELDS: dict[type[cst.CSTNode], tuple[str, ...]] = {}


def child_fields(node_type: type[cst.CSTNode]) -> tuple[str, ...]:
    """The names of the fields of `node_type` that can hold code (not trivia), in walk order."""
    fields = _CHILD_FIELDS.get(node_type)
    if fields is None:
        override = _FIELD_ORDER_OVERRIDES.get(node_type)
        names = [f.name for f in dataclasses.fields(node_type)]
        if override is not None:
            names = [n for n in override if n in names] + [n for n in names if n not in override]
        fields = tuple(
            n for n in names if n not in _TRIVIA_FIELDS and not n.startswith("whitespace")
        )
        _CHILD_FIELDS[node_type] = fields
    return fields


def iter_children(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Yield the code-bearing children of `node`, in walk order."""
    for name in child_fields(type(node)):
        value = getattr(node, name)
        if isinstance(value, cst.CSTNode):
            yield value
        elif isinstance(value, (list, tuple)):
            for item in value:
                if isinstance(item, cst.CSTNode):
                    yield item


Handler = Callable[[cst.CSTNode], object]


def walk(
    root: cst.CSTNode,
    visit: dict[type[cst.CSTNode], Sequence[Handler]],
    leave: dict[type[cst.CSTNode], Sequence[Handler]],
    ancestors: list[cst.CSTNode],
) -> None:
    """Walk `root` depth-first, calling the handlers registered for each node type.

    `ancestors` is kept equal to the chain of nodes above the one being visited, so handlers
    can look upwards without a parent map. A visit handler returning `False` prunes the node's
    children (as with libcst visitors).
    """
    node_type = type(root)
    descend = True
    handlers = visit.get(node_type)
    if handlers is not None:
        for handler in handlers:
            if handler(root) is False:
                descend = False
    if descend:
        ancestors.append(root)
        fields = _CHILD_FIELDS.get(node_type) or child_fields(node_type)
        for name in fields:
            value = getattr(root, name)
            if isinstance(value, cst.CSTNode):
                walk(value, visit, leave, ancestors)
            elif type(value) is tuple or type(value) is list:
                for item in value:
                    if isinstance(item, cst.CSTNode):
                        walk(item, visit, leave, ancestors)
        ancestors.pop()
    handlers = leave.get(node_type)
    if handlers is not None:
        for handler in handlers:
            handler(root)


def path_below(ancestors: list[cst.CSTNode], target: cst.CSTNode) -> list[cst.CSTNode] | None:
    """The ancestors of `target`, found below the last node of `ancestors`."""
    root = ancestors[-1]
    stack: list[tuple[cst.CSTNode, list[cst.CSTNode]]] = [(root, list(ancestors[:-1]))]
    while stack:
        node, path = stack.pop()
        if node is target:
            return path
        below = [*path, node]
        stack.extend((child, below) for child in iter_children(node))
    return None


def walk_with_paths(root: cst.CSTNode, path: list[cst.CSTNode]) -> Iterator[tuple[cst.CSTNode, list[cst.CSTNode]]]:
    """Every node under `root` with its ancestors, not entering nested scopes."""
    stack: list[tuple[cst.CSTNode, list[cst.CSTNode]]] = [(root, path)]
    while stack:
        node, ancestors = stack.pop()
        yield node, ancestors
        if node is not root and isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        below = [*ancestors, node]
        stack.extend((child, below) for child in iter_children(node))
