"""Small questions about a subtree that several rules ask (reads, writes, exits, paths), and
how a node is spelled in a message (`one_line`, `shorten`)."""

from __future__ import annotations

from collections.abc import Collection, Iterator

import libcst as cst

from ._scope import target_names
from ._walk import iter_children


__all__ = [
    "literal_iterations",
    "loop_header",
    "one_line",
    "shorten",
    "assigns_name",
    "attribute_path",
    "comp_fors",
    "contains_exit",
    "free_names",
    "iter_subtree",
    "keyword_argument",
    "keyword_or_position",
    "reads_name",
    "root_name",
    "spelled_numbers",
]

_NESTED_SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda)


def iter_subtree(
    root: cst.CSTNode,
    *,
    into_scopes: bool = True,
    skip: cst.CSTNode | Collection[cst.CSTNode] = (),
) -> Iterator[cst.CSTNode]:
    """Every code node under `root` (itself included), in source order, optionally not
    entering nested functions, classes and lambdas, and never entering `skip`."""
    skipped = _ids(skip)
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in skipped:
            continue
        yield node
        if not into_scopes and node is not root and isinstance(node, _NESTED_SCOPES):
            continue
        children = list(iter_children(node))
        children.reverse()
        stack.extend(children)


def _ids(nodes: cst.CSTNode | Collection[cst.CSTNode]) -> set[int]:
    return {id(nodes)} if isinstance(nodes, cst.CSTNode) else {id(n) for n in nodes}


def comp_fors(comp: cst.CSTNode) -> list[cst.CompFor]:
    """The `for` clauses of a comprehension, outermost first (none for any other node)."""
    found = []
    clause = getattr(comp, "for_in", None)
    while clause is not None:
        found.append(clause)
        clause = clause.inner_for_in
    return found


def root_name(expr: cst.BaseExpression) -> str | None:
    """The name an attribute or subscript chain starts from (`state` for `state.params[0]`)."""
    while isinstance(expr, (cst.Attribute, cst.Subscript)):
        expr = expr.value
    return expr.value if isinstance(expr, cst.Name) else None


def free_names(expr: cst.CSTNode) -> set[str]:
    """Names read in `expr`, not counting attribute names, keywords or lambda parameters."""
    names: set[str] = set()
    _collect_names(expr, names, frozenset())
    return names


def _collect_names(node: cst.CSTNode, out: set[str], bound: frozenset[str]) -> None:
    if isinstance(node, cst.Name):
        if node.value not in bound:
            out.add(node.value)
        return
    if isinstance(node, cst.Attribute):
        _collect_names(node.value, out, bound)
        return
    if isinstance(node, cst.Arg):
        _collect_names(node.value, out, bound)
        return
    if isinstance(node, cst.Lambda):
        params = node.params
        inner = {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}
        for star in (params.star_arg, params.star_kwarg):
            if isinstance(star, cst.Param):
                inner.add(star.name.value)
        for param in (*params.posonly_params, *params.params, *params.kwonly_params):
            if param.default is not None:
                _collect_names(param.default, out, bound)
        _collect_names(node.body, out, bound | inner)
        return
    for child in iter_children(node):
        _collect_names(child, out, bound)


def reads_name(
    root: cst.CSTNode, name: str, *, skip: cst.CSTNode | Collection[cst.CSTNode] = ()
) -> bool:
    """Whether `name` is read anywhere under `root`, outside the subtrees in `skip`."""
    skipped = _ids(skip)
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in skipped:
            continue
        if isinstance(node, cst.Name):
            if node.value == name:
                return True
            continue
        if isinstance(node, (cst.Attribute, cst.Arg)):
            stack.append(node.value)
            continue
        stack.extend(iter_children(node))
    return False


def assigns_name(
    root: cst.CSTNode, name: str, *, skip: cst.CSTNode | Collection[cst.CSTNode] = ()
) -> bool:
    """Whether a statement under `root` (outside `skip`, not in nested scopes) binds `name`."""
    for node in iter_subtree(root, into_scopes=False, skip=skip):
        if isinstance(node, cst.Assign):
            if any(name in target_names(t.target) for t in node.targets):
                return True
        elif isinstance(node, (cst.AnnAssign, cst.AugAssign, cst.For)):
            if name in target_names(node.target):
                return True
        elif isinstance(node, cst.CompFor):
            if name in target_names(node.target):
                return True
        elif isinstance(node, cst.WithItem):
            if node.asname is not None and name in target_names(node.asname.name):
                return True
        elif isinstance(node, cst.NamedExpr):
            if isinstance(node.target, cst.Name) and node.target.value == name:
                return True
        elif isinstance(node, (cst.FunctionDef, cst.ClassDef)) and node is not root:
            if node.name.value == name:
                return True
    return False


def contains_exit(root: cst.CSTNode, kinds: tuple[type[cst.CSTNode], ...]) -> bool:
    """Whether `root` contains a statement of `kinds` (e.g. `cst.Return`, `cst.Break`)
    outside nested functions and classes."""
    return any(isinstance(n, kinds) for n in iter_subtree(root, into_scopes=False))


PathStep = tuple[str, str]  # ("attr", "blocks") or ("index", "0")


def attribute_path(expr: cst.BaseExpression, root: str) -> tuple[PathStep, ...] | None:
    """The steps from the name `root` to `expr` when `expr` is a chain of attributes and
    constant subscripts on it (`m.blocks[0].attn` → attr blocks, index 0, attr attn)."""
    steps: list[PathStep] = []
    while True:
        if isinstance(expr, cst.Name):
            if expr.value != root or expr.lpar:
                return None
            steps.reverse()
            return tuple(steps)
        if isinstance(expr, cst.Attribute):
            steps.append(("attr", expr.attr.value))
            expr = expr.value
        elif isinstance(expr, cst.Subscript) and len(expr.slice) == 1:
            index = expr.slice[0].slice
            if not isinstance(index, cst.Index) or index.star is not None:
                return None
            value = index.value
            if isinstance(value, cst.Integer):
                steps.append(("index", value.value))
            elif isinstance(value, cst.UnaryOperation) and isinstance(value.expression, cst.Integer) \
                    and isinstance(value.operator, cst.Minus):
                return None  # negative indices alias positive ones; paths would not compare
            elif isinstance(value, cst.SimpleString):
                steps.append(("index", repr(value.evaluated_value)))
            else:
                return None
            expr = expr.value
        else:
            return None


def render_path(root: str, steps: tuple[PathStep, ...]) -> str:
    """Source text for a path from `root` (the inverse of `attribute_path`)."""
    out = root
    for kind, value in steps:
        out += f".{value}" if kind == "attr" else f"[{value}]"
    return out


def loop_header(loop: cst.CSTNode) -> str:
    """How a message names a loop: `` `for batch in loader` `` (whitespace collapsed, cut at
    60 characters), `` `while step < n` ``, or "a comprehension"."""
    code = cst.Module([]).code_for_node
    if isinstance(loop, cst.For):
        text = f"for {code(loop.target)} in {code(loop.iter)}"
    elif isinstance(loop, cst.While):
        text = f"while {code(loop.test)}"
    else:
        return "a comprehension"
    text = " ".join(text.split())
    return f"`{text}`" if len(text) <= 60 else f"`{text[:57]}...`"


def spelled_numbers(expr: cst.BaseExpression) -> bool:
    """A number, or a list/tuple of them, written out in the code (`[0.167, 1.0, 10.0]`,
    `-1`)."""
    if isinstance(expr, (cst.List, cst.Tuple)):
        return all(spelled_numbers(e.value) for e in expr.elements)
    if isinstance(expr, cst.UnaryOperation):
        return spelled_numbers(expr.operand)
    return isinstance(expr, (cst.Integer, cst.Float))


def literal_iterations(loop: cst.CSTNode) -> int | None:
    """How many times a `for` loop runs when its header says so: `range(<int literal>)`, or
    a literal tuple or list without starred elements; None otherwise."""
    if not isinstance(loop, cst.For):
        return None
    source = loop.iter
    if isinstance(source, (cst.Tuple, cst.List)) and all(
        isinstance(e, cst.Element) for e in source.elements
    ):
        return len(source.elements)
    if (
        isinstance(source, cst.Call)
        and isinstance(source.func, cst.Name)
        and source.func.value == "range"
        and len(source.args) == 1
        and isinstance(source.args[0].value, cst.Integer)
    ):
        return int(source.args[0].value.evaluated_value)
    return None


def one_line(node: cst.CSTNode, module: cst.Module | None = None) -> str:
    """The code of `node` on one line, its white space folded to single spaces (`module`: the
    file's, for its newline and indentation; default a blank one)."""
    return " ".join((module or cst.Module([])).code_for_node(node).split())


def shorten(text: str, limit: int = 40) -> str:
    """`text`, cut to `limit` characters with `...` at the end when it is longer."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def keyword_argument(call: cst.Call, name: str) -> cst.BaseExpression | None:
    """The value `call` passes for the keyword `name`, or None."""
    return next((a.value for a in call.args if a.keyword is not None and a.keyword.value == name), None)


def keyword_or_position(call: cst.Call, keyword: str, index: int) -> cst.BaseExpression | None:
    """The value `call` passes for `keyword`, by keyword or as its `index`-th positional
    argument (not counting `*args`), or None."""
    found = keyword_argument(call, keyword)
    if found is not None:
        return found
    positional = [a.value for a in call.args if a.keyword is None and not a.star]
    return positional[index] if index < len(positional) else None
