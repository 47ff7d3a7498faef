"""The rewrites of tree-at-batch: merge a chain into one call, hoist a loop's calls out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import libcst as cst

from jaxlint._nodes import (
    PathStep,
    assigns_name,
    attribute_path,
    free_names,
    iter_subtree,
    render_path,
)
from jaxlint._scope import target_names
from jaxlint._rule import Applicability, Edit, Fix, ImportSpec, unused_name


if TYPE_CHECKING:
    from jaxlint._context import Loop

    from .tree_at_batch import TreeAtCall


__all__ = ["chain_fix", "chain_paths", "indentation", "loop_fix", "overlapping"]

Path = tuple[PathStep, ...]
_LINE_LENGTH = 88


def indentation(ancestors: Sequence[cst.CSTNode], module: cst.Module) -> str:
    """The indentation of a statement whose ancestors are `ancestors`."""
    return "".join(
        (n.indent if n.indent is not None else module.default_indent)
        for n in ancestors
        if isinstance(n, cst.IndentedBlock)
    )


def _lambda_param(where: cst.BaseExpression) -> str | None:
    """The parameter of `lambda p: ...`, if `where` is a one-parameter lambda."""
    if not isinstance(where, cst.Lambda):
        return None
    params = where.params
    if (
        len(params.params) != 1
        or params.posonly_params
        or params.kwonly_params
        or isinstance(params.star_arg, cst.Param)
        or params.star_kwarg is not None
        or params.params[0].default is not None
    ):
        return None
    return params.params[0].name.value


def _where_paths(where: cst.BaseExpression) -> tuple[Path, ...] | None:
    """The node paths a `where` lambda selects: one path, or a literal tuple/list of paths."""
    param = _lambda_param(where)
    if param is None:
        return None
    assert isinstance(where, cst.Lambda)
    body = where.body
    if isinstance(body, (cst.Tuple, cst.List)):
        paths = []
        for element in body.elements:
            if not isinstance(element, cst.Element):
                return None
            path = attribute_path(element.value, param)
            if path is None:
                return None
            paths.append(path)
        return tuple(paths)
    path = attribute_path(body, param)
    return None if path is None else (path,)


def chain_paths(chain: Sequence[TreeAtCall]) -> list[tuple[Path, ...]] | None:
    """The paths each call of the chain replaces, or None if any `where` is opaque."""
    groups = []
    for call in chain:
        paths = _where_paths(call.where)
        if paths is None:
            return None
        groups.append(paths)
    return groups


def _related(a: Path, b: Path) -> bool:
    shorter = min(len(a), len(b))
    return a[:shorter] == b[:shorter]


def overlapping(paths: Sequence[Path]) -> bool:
    """Whether two paths are equal or one is an ancestor of the other."""
    return any(_related(a, b) for i, a in enumerate(paths) for b in paths[i + 1 :])


def _replacements(call: TreeAtCall, count: int) -> list[cst.BaseExpression] | None:
    """The replacement expressions of a call whose `where` selects `count` paths."""
    if call.replace is None:
        return None
    if isinstance(call.where, cst.Lambda) and isinstance(call.where.body, (cst.Tuple, cst.List)):
        replace = call.replace
        if not isinstance(replace, (cst.Tuple, cst.List)):
            return None
        if any(not isinstance(e, cst.Element) for e in replace.elements):
            return None
        values = [e.value for e in replace.elements]
        return values if len(values) == count else None
    return [call.replace]


def _tree_reads(expr: cst.CSTNode, tree: str) -> list[Path | None]:
    """Every read of `tree` (a name, or a dotted attribute such as `self.model`) in `expr`:
    its path inside the tree when it is a fixed path, else None (the whole tree, or an
    unknown part of the object holding it)."""
    root, *rest = tree.split(".")
    prefix: Path = tuple(("attr", part) for part in rest)
    reads: list[Path | None] = []
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.Attribute, cst.Subscript)):
            path = attribute_path(node, root)
            if path is not None:
                inside = len(path) > len(prefix) and path[: len(prefix)] == prefix
                reads.append(path[len(prefix) :] if inside else None)
                continue
        if isinstance(node, cst.Name):
            if node.value == root:
                reads.append(None)
            continue
        if isinstance(node, cst.Attribute):
            stack.append(node.value)
            continue
        from jaxlint._walk import iter_children

        stack.extend(iter_children(node))
    return reads


class _CommentCollector(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.comments: list[cst.Comment] = []

    def visit_Comment(self, node: cst.Comment) -> None:
        self.comments.append(node)


def _inner_comments(node: cst.CSTNode) -> list[cst.EmptyLine]:
    """Comments inside `node` (e.g. between a call's arguments), as lines of their own, so a
    rewrite that regenerates the call keeps them."""
    collector = _CommentCollector()
    node.visit(collector)
    return [cst.EmptyLine(comment=c) for c in collector.comments]


def _comment_lines(line: cst.SimpleStatementLine) -> list[cst.EmptyLine]:
    """A statement's trailing comment, as a line of its own."""
    comment = line.trailing_whitespace.comment
    return [cst.EmptyLine(comment=comment)] if comment is not None else []


# Continuation lines are written relative to the statement's own indentation: libcst adds
# the indentation of the block the statement lands in when it renders them.


def _layout(head: str, args: list[str], base: str, unit: str, column: int) -> str:
    """`head(args...)` on one line when it fits from `column`, else one argument per line
    (indented from `base`, the statement's indentation in the generated text)."""
    one_line = f"{head}({', '.join(args)})"
    if column + len(one_line) <= _LINE_LENGTH and "\n" not in one_line:
        return one_line
    inner = base + unit
    return f"{head}(\n" + "".join(f"{inner}{a},\n" for a in args) + f"{base})"


def _list_literal(items: list[str], base: str, unit: str, column: int) -> str:
    one_line = f"[{', '.join(items)}]"
    if column + len(one_line) <= _LINE_LENGTH - 8 and "\n" not in one_line:
        return one_line
    inner = base + unit
    return "[\n" + "".join(f"{inner}{i},\n" for i in items) + f"{base}]"


def _captured(function: cst.FunctionDef, name: str) -> bool:
    """Whether `name` may be seen outside the function's own straight-line code: declared
    `global`/`nonlocal`, read by a nested function, lambda or class, or by `locals()`."""
    for node in iter_subtree(function.body):
        if isinstance(node, (cst.Global, cst.Nonlocal)):
            if any(item.name.value == name for item in node.names):
                return True
        elif isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            if name in free_names(node):
                return True
    return bool(free_names(function.body) & {"locals", "vars", "eval", "exec"})


def _may_drop_bindings(chain: Sequence[TreeAtCall]) -> bool:
    """A chain ending in `return` binds none of its names once merged: fine for locals
    that nothing sees after the `return` (no closure, no `finally` or handler around)."""
    last = chain[-1]
    function = last.function
    if function is None:
        return False
    start = next(i for i, n in enumerate(last.ancestors) if n is function)
    if any(isinstance(n, (cst.Try, cst.TryStar, cst.With)) for n in last.ancestors[start:]):
        return False
    names = {c.target for c in chain[:-1]}
    return all(n is not None and "." not in n and not _captured(function, n) for n in names)


def chain_fix(module: cst.Module, chain: Sequence[TreeAtCall]) -> Fix | None:
    """One `tree_at` call replacing a chain, or None when batching is not provably right."""
    groups = chain_paths(chain)
    if groups is None:
        return None
    flat = [p for group in groups for p in group]
    if overlapping(flat):
        return None
    leaf_codes = {module.code_for_node(c.is_leaf) if c.is_leaf else None for c in chain}
    if len(leaf_codes) != 1:
        return None
    head, last = chain[0], chain[-1]
    if last.is_return and not _may_drop_bindings(chain):
        return None
    start = head.pytree_key
    applicability = Applicability.SAFE
    if any(c.is_attribute for c in chain):
        # Fewer attribute assignments (a property setter or `__setattr__` may count them),
        # and a call in a replacement may change the attribute between the calls.
        applicability = Applicability.UNSAFE
    replacements: list[cst.BaseExpression] = []
    for index, (call, group) in enumerate(zip(chain, groups)):
        values = _replacements(call, len(group))
        if values is None:
            return None
        if index > 0:
            link = call.pytree_key
            assert link is not None
            # Reads of the tree being built see the original tree once merged: right only
            # when the link names that original all along, and at paths not yet replaced.
            original = link == start and all(c.target == link for c in chain[:index])
            replaced_before = [p for g in groups[:index] for p in g]
            for value in values:
                for read in _tree_reads(value, link):
                    if not original:
                        return None  # reads an intermediate tree that no longer exists
                    if read is None:
                        applicability = Applicability.UNSAFE
                    elif any(_related(read, p) for p in replaced_before):
                        return None  # reads what an earlier call replaced
        replacements.extend(values)
    param = _lambda_param(head.where)
    assert param is not None
    unit = module.default_indent
    column = len(head.indent) + len(unit)
    rendered = [render_path(param, p) for p in flat]
    args = [
        f"lambda {param}: {_list_literal(rendered, unit, unit, column)}",
        module.code_for_node(head.pytree),
        _list_literal([module.code_for_node(r) for r in replacements], unit, unit, column),
    ]
    (leaf_code,) = leaf_codes
    if leaf_code is not None:
        args.append(f"is_leaf={leaf_code}")
    func = module.code_for_node(head.call.func)
    if last.is_return:
        lhs = "return "
    else:
        annotations = [c.annotation for c in chain if c.target == last.target and c.annotation]
        annotation = f": {module.code_for_node(annotations[-1])}" if annotations else ""
        lhs = f"{last.target}{annotation} = "
    text = lhs + _layout(func, args, "", unit, len(head.indent) + len(lhs)) + "\n"
    statement = cst.parse_statement(text, config=module.config_for_parsing)
    leading: list[cst.EmptyLine] = [*head.line.leading_lines, *_inner_comments(head.call)]
    for call in chain[1:]:
        leading.extend(call.line.leading_lines)
        leading.extend(_inner_comments(call.call))
        leading.extend(_comment_lines(call.line))
    statement = statement.with_changes(
        leading_lines=leading, trailing_whitespace=head.line.trailing_whitespace
    )
    edits = [Edit(head.line, replacement=statement)]
    edits.extend(Edit(call.line, remove=True) for call in chain[1:])
    count = len(chain)
    return Fix(applicability, tuple(edits), f"Merge the {count} `tree_at` calls into one")


def _late_bound_closure(hoist: Loop, name: str) -> bool:
    """Whether the loop binds `name` to a function it defines (`def name`, `name = lambda`)
    that reads variables the loop rebinds: such closures see the *last* iteration's values
    when they are called after the loop."""
    for node in iter_subtree(hoist, into_scopes=False):
        if isinstance(node, cst.FunctionDef) and node.name.value == name:
            if any(assigns_name(hoist, n) for n in free_names(node.body)):
                return True
        elif isinstance(node, cst.Assign) and isinstance(node.value, cst.Lambda):
            if any(name in target_names(t.target) for t in node.targets):
                if any(assigns_name(hoist, n) for n in free_names(node.value)):
                    return True
    return False


def _loop_where(module: cst.Module, call: TreeAtCall, hoist: Loop, sequences: bool) -> str | None:
    """The `where` as it can be stored in the loop: a lambda gets the loop variables it
    reads bound as default arguments, so late binding cannot change what it selects."""
    assert call.target is not None
    tree = call.root
    where = call.where
    if not isinstance(where, cst.Lambda):
        if any(_late_bound_closure(hoist, n) for n in free_names(where)):
            return None
        return module.code_for_node(where)
    param = _lambda_param(where)
    if param is None or (not sequences and isinstance(where.body, (cst.Tuple, cst.List))):
        return None
    free = free_names(where.body) - {param}
    if tree in free:
        return None
    captured = sorted(n for n in free if assigns_name(hoist, n))
    if any(_late_bound_closure(hoist, n) for n in captured):
        return None
    defaults = "".join(f", {n}={n}" for n in captured)
    return f"lambda {param}{defaults}: {module.code_for_node(where.body)}"


def loop_fix(
    module: cst.Module, call: TreeAtCall, hoist: Loop, *, runtime_helpers: bool, source: str
) -> Fix | None:
    """Collect the updates in the loop; apply them in one call after the hoisted loop:
    `jaxlint.runtime.tree_at_batched` (sequential semantics, overlaps included) or, without
    runtime helpers or with a custom `is_leaf`, one list-`where` `tree_at`."""
    if call.replace is None:
        return None
    if call.is_leaf is not None and any(assigns_name(hoist, n) for n in free_names(call.is_leaf)):
        return None
    use_runtime = runtime_helpers and call.is_leaf is None
    where_text = _loop_where(module, call, hoist, sequences=use_runtime)
    if where_text is None:
        return None
    tree = call.target
    assert tree is not None
    annotation = f": {module.code_for_node(call.annotation)}" if call.annotation else ""
    lhs = f"{tree}{annotation} = "
    config = module.config_for_parsing
    unit = module.default_indent
    start = next(i for i, n in enumerate(call.ancestors) if n is hoist)
    hoist_indent = indentation(call.ancestors[:start], module)
    replacement_text = module.code_for_node(call.replace)
    leading = [*call.line.leading_lines, *_inner_comments(call.call)]
    if use_runtime:
        updates = unused_name(source, "tree_at_updates")
        pair = f"({where_text}, {replacement_text})"
        append_text = _layout(f"{updates}.append", [pair], "", unit, len(call.indent))
        append = cst.parse_statement(append_text + "\n", config=config)
        assert isinstance(append, cst.SimpleStatementLine)
        in_loop = Edit(call.line, replacement=call.line.with_changes(body=append.body, leading_lines=leading))
        # An attribute is assigned only if the loop updated it, as before: its setter may
        # check or count assignments.
        guard = f"if {updates}:\n{unit}" if call.is_attribute else ""
        column = len(hoist_indent) + len(lhs) + (len(unit) if guard else 0)
        batched = lhs + _layout("tree_at_batched", [tree, updates], unit if guard else "", unit, column)
        around = Edit(
            hoist,
            before=(cst.parse_statement(f"{updates} = []\n", config=config),),
            after=(cst.parse_statement(guard + batched + "\n", config=config),),
        )
        return Fix(
            Applicability.UNSAFE,
            (in_loop, around),
            "Collect the updates in the loop and apply them with `tree_at_batched` after it",
            imports=(ImportSpec("jaxlint.runtime", "tree_at_batched"),),
        )
    wheres = unused_name(source, "tree_at_wheres")
    replacements = unused_name(source, "tree_at_replacements")
    append_where = cst.parse_statement(f"{wheres}.append({where_text})\n", config=config)
    append_replacement = cst.parse_statement(
        f"{replacements}.append({replacement_text})\n", config=config
    )
    assert isinstance(append_where, cst.SimpleStatementLine)
    first = call.line.with_changes(body=append_where.body, leading_lines=leading)
    args = [f"lambda tree: [where(tree) for where in {wheres}]", tree, replacements]
    if call.is_leaf is not None:
        args.append(f"is_leaf={module.code_for_node(call.is_leaf)}")
    func = module.code_for_node(call.call.func)
    column = len(hoist_indent) + len(unit) + len(lhs)
    batched = lhs + _layout(func, args, unit, unit, column)
    after = cst.parse_statement(f"if {wheres}:\n{unit}{batched}\n", config=config)
    before = (
        cst.parse_statement(f"{wheres} = []\n", config=config),
        cst.parse_statement(f"{replacements} = []\n", config=config),
    )
    edits = (
        Edit(call.line, replacement=first, after=(append_replacement,)),
        Edit(hoist, before=before, after=(after,)),
    )
    return Fix(
        Applicability.UNSAFE,
        edits,
        "Collect the updates in the loop and apply them with one `tree_at` after it",
    )
