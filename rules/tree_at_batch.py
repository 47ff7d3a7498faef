"""## What it does

Finds `eqx.tree_at` called again and again on the same pytree: once per iteration of a loop
(`m = eqx.tree_at(where, m, new)` in a `for`/`while`), or in a straight-line chain of
consecutive calls that each update the tree the previous one returned. The tree may be a
name (`m = ...`, annotated `m: Model = ...`) or an attribute (`self.model = eqx.tree_at(
where, self.model, new)`, `state.params = ...`). A chain may end in `return eqx.tree_at(...,
m, ...)`, and may rename the tree at a step (`m1 = eqx.tree_at(w1, m0, r1)` then `m2 =
eqx.tree_at(w2, m1, r2)`) when the intermediate name (`m1`) is a function's local that
nothing reads after that step.

## Why is this bad?

Every `eqx.tree_at` call flattens and rebuilds the *whole* pytree (five full passes in
equinox 0.13), however few nodes it replaces. N calls cost N traversals; one call with N
`where` targets costs one. On a 4-layer BERT with 24 replacements, one call per match took
130 ms and one batched call 17 ms (7.6x, seed report 002); on CPU we measured 17.3 ms vs
0.82 ms (21x). The gap grows with model size.

## Example

```python
def apply_plan(model, plan):
    for name, layer in plan.items():
        model = eqx.tree_at(lambda m: getattr(m, name), model, layer)
    return model

for batch in batches:  # the plan is applied on every step
    model = apply_plan(model, plan)

net = eqx.tree_at(lambda m: m.encoder, net, encoder)
net = eqx.tree_at(lambda m: m.decoder.head, net, head)
```

Use instead:

```python
def apply_plan(model, plan):
    wheres, replacements = [], []
    for name, layer in plan.items():
        wheres.append(lambda m, name=name: getattr(m, name))
        replacements.append(layer)
    return eqx.tree_at(lambda m: [w(m) for w in wheres], model, replacements)

for batch in batches:
    model = apply_plan(model, plan)

net = eqx.tree_at(lambda m: [m.encoder, m.decoder.head], net, [encoder, head])
```

The rule stays silent where batching would be wrong: calls on different trees (a loop over
objects, `for layer in layers: layer.params = ...`), a later `where` that reaches into a node
an earlier call replaced (or an ancestor of one), a loop that rebinds the tree or stops early
on a value read from the updated tree, a renamed intermediate tree that is read again later
(or in a loop, a closure, or declared `global`), an attribute chain that ends in `return`
(the attribute must keep its update), and calls that use `replace_fn`. It also stays silent
inside jitted or otherwise traced code (`@eqx.filter_jit` bodies, functions handed to a
transform, methods of a `Module`): there each call runs once per compile, not once per step;
and for a loop whose header says it runs three times or fewer (`for split in ("train",
"validation"):`, or a literal list every caller in the file passes), where batching saves one
or two traversals. A loop that runs a few times by what its header shows (over a model's
layers or blocks, a count of at most 20; not a table of unknown size, such as a plan's entries
or a list of names) in code the engine does not show to repeat is set-up paid once (weights
copied into a model layer by layer when a checkpoint is loaded): reported only with
`--preview`. Repeated means in a loop over data or steps, or in a function such a loop calls
(a loop over a loader in a caller whose mode is unknown counts: no trace iterates a loader).
A chain is reported only where the engine shows it runs many times (in a loop that does, or
in a function such a loop calls; the finding says which): in set-up code run once (weights
initialised when a model is built, a checkpoint loaded) its extra traversals are paid once.

## Fix safety

- **Chains** are merged into one call, bound to the chain's last target (with its
  annotation) or returned when the chain ends in `return`. The fix is **safe** when every
  `where` is a lambda selecting a fixed path (`m.a.b`, `m.layers[0]`), the paths are
  pairwise disjoint (none equal to or an ancestor of another: batched `tree_at` raises on
  overlap, where the sequential calls would not), every call uses the same `is_leaf`, and no
  replacement reads the tree being rewritten except at paths no earlier call replaced. When
  a replacement passes the whole tree somewhere (`f(m)`), the fix is **unsafe**. When a
  `where` is not such a lambda, or a replacement reads a replaced path or a renamed
  intermediate tree, there is no fix.
  - A chain on an **attribute** (`self.model`) is always **unsafe**: the attribute is
    assigned once instead of once per call (a property setter or `__setattr__` sees
    fewer assignments), and a replacement that calls a method of the object could change the
    attribute between the calls; reads of the object other than fixed paths in the tree
    (`self.other`, `self.f()`) are treated as whole-tree reads.
  - A chain ending in **`return`** no longer rebinds its names before returning. There is
    no fix when anything could still see them: a nested function, lambda or class reading
    them, a `global`/`nonlocal` declaration, `locals()`/`eval`, or a `try`/`with` around
    the `return`.
- **Loops** are rewritten to collect `(where, replacement)` pairs in the loop and apply
  them with one `jaxlint.runtime.tree_at_batched(tree, updates)` after it (the import is
  added). `tree_at_batched` gives the result of the sequential calls even when targets
  overlap or repeat. The fix is still **unsafe**: replacements and loop iterables that read
  the tree now see the original tree instead of the partly updated one (seed 002 accepted
  exactly this). Lambdas that close over loop variables get them bound as default
  arguments, so late binding cannot change which node they select. There is no fix when the
  loop reads the tree elsewhere, returns from inside, has an `else`, or wraps the call in
  `try`. With `runtime-helpers = false` (or a custom `is_leaf`) the loop is rewritten to
  one plain `eqx.tree_at` with a list `where`, which raises `ValueError` where targets
  overlap.
  - For an **attribute** target the loop may not use the object anywhere else (any
    `self.x` or `self.f()` in the loop body means no fix, as a method may read or write the
    attribute), and the batched assignment after the loop is guarded by `if updates:` so
    the attribute is assigned only when the loop updated it.
  - An **annotated** assignment keeps its annotation on the batched assignment; outside a
    function (where the annotation is recorded when the line runs) there is no fix.

## Options

- `runtime-helpers` (bool, default true): target `jaxlint.runtime.tree_at_batched`, which
  needs jaxlint with its `runtime` extra wherever the fixed code runs. Set it to false in
  `[tool.jaxlint.tree-at-batch]`, or for every rule with `runtime-helpers = false` in
  `[tool.jaxlint]`, to keep the fixed code free of a jaxlint dependency: loops are then
  rewritten to one plain `eqx.tree_at`.

## Runtime helper

`jaxlint.runtime.tree_at_batched(tree, updates)` applies many updates in one traversal with
sequential semantics; `jaxlint.runtime.apply_transforms(module, plan)` does the same for an
fnmatch plan of path patterns (seed 002's shape). Measured on CPU (`python
bench/tree_surgery.py`): 14.5x faster than a loop of `eqx.tree_at` at 24 replacements on a
4-layer BERT-like encoder, 85x at 144 on 24 layers.

## References

- equinox `tree_at`: https://docs.kidger.site/equinox/api/manipulation/#equinox.tree_at
- `../shared/research/jax-facts.md` §2 (semantics and cost model of `tree_at`).
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from jaxlint._frequency import FEW, Often, call_chain_evidence, iteration_count, loop_evidence, loop_runs, over_model_parts
from jaxlint._context import FileContext, Loop
from jaxlint._jaxapi import TREE_AT
from jaxlint._nodes import assigns_name, contains_exit, free_names, iter_subtree, literal_iterations, reads_name
from jaxlint._rule import Applicability, Fix, Option, Rule

from ._tree_at_fixes import chain_fix, chain_paths, indentation, loop_fix, overlapping


__all__ = ["TreeAtBatch"]

_PARAMETERS = ("where", "pytree", "replace", "replace_fn", "is_leaf")


@dataclass
class TreeAtCall:
    """`target = tree_at(where, pytree, replace, ...)` (or `target: T = ...`, or
    `return tree_at(...)`) as the only statement of its line."""

    call: cst.Call
    line: cst.SimpleStatementLine
    block: cst.CSTNode  # the node whose `.body` holds `line`
    target: str | None  # a name or a dotted attribute (`self.model`); None for `return`
    pytree: cst.BaseExpression
    where: cst.BaseExpression
    replace: cst.BaseExpression | None
    is_leaf: cst.BaseExpression | None
    loops: list[Loop]
    indent: str
    ancestors: list[cst.CSTNode]
    annotation: cst.BaseExpression | None = None
    function: cst.FunctionDef | None = None  # the enclosing scope when it is a function

    @property
    def pytree_key(self) -> str | None:
        return dotted(self.pytree)

    @property
    def assigns_back(self) -> bool:
        return self.target is not None and self.pytree_key == self.target

    @property
    def is_return(self) -> bool:
        return self.target is None

    @property
    def root(self) -> str:
        """The variable the target lives in (`self` for `self.model`)."""
        assert self.target is not None
        return self.target.split(".")[0]

    @property
    def is_attribute(self) -> bool:
        return self.target is not None and "." in self.target


def dotted(expr: cst.BaseExpression) -> str | None:
    """`a` or `a.b.c` (names and attributes only, no parentheses) as text, else None."""
    if expr.lpar or expr.rpar:  # type: ignore[attr-defined]
        return None
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        base = dotted(expr.value)
        return None if base is None else f"{base}.{expr.attr.value}"
    return None


def bind_arguments(call: cst.Call) -> dict[str, cst.BaseExpression] | None:
    """Map the call's arguments onto `tree_at`'s parameters; None if that is not possible."""
    bound: dict[str, cst.BaseExpression] = {}
    for position, arg in enumerate(call.args):
        if arg.star:
            return None
        if arg.keyword is None:
            if position >= len(_PARAMETERS):
                return None
            bound[_PARAMETERS[position]] = arg.value
        else:
            name = arg.keyword.value
            if name not in _PARAMETERS or name in bound:
                return None
            bound[name] = arg.value
    if "where" not in bound or "pytree" not in bound:
        return None
    return bound


# At most this many updates in a loop are not worth a batched call: it saves one or two
# traversals of the tree.
_FEW_UPDATES = 3

class TreeAtBatch(Rule):
    CODE = "JL003"
    SLUG = "tree-at-batch"
    MESSAGE = "`eqx.tree_at` called repeatedly on the same pytree; batch the updates"
    FIX = Applicability.SAFE
    TOKENS = ("tree_at",)
    OPTIONS = {
        "runtime-helpers": Option(
            bool,
            True,
            "Rewrite loops to `jaxlint.runtime.tree_at_batched` (needs jaxlint and its runtime extra where "
            "the code runs); false: to one plain `eqx.tree_at` with a list `where`.",
        )
    }

    def __init__(self, ctx: FileContext, options: dict[str, object] | None = None) -> None:
        super().__init__(ctx, options)
        self._calls: list[TreeAtCall] = []

    def visit_Call(self, node: cst.Call) -> None:
        if not self.ctx.is_call_to(node, TREE_AT):
            return
        if self.ctx.device.is_traced(self.ctx.ancestors):
            return  # under a trace it runs once per compile, not once per step
        found = self._match(node)
        if found is not None:
            self._calls.append(found)

    def _match(self, node: cst.Call) -> TreeAtCall | None:
        ancestors = self.ctx.ancestors
        if len(ancestors) < 3:
            return None
        statement, line, block = ancestors[-1], ancestors[-2], ancestors[-3]
        if not (
            isinstance(line, cst.SimpleStatementLine)
            and len(line.body) == 1
            and isinstance(block, (cst.IndentedBlock, cst.Module))
        ):
            return None
        annotation = None
        if (
            isinstance(statement, cst.Assign)
            and statement.value is node
            and len(statement.targets) == 1
        ):
            target = dotted(statement.targets[0].target)
        elif isinstance(statement, cst.AnnAssign) and statement.value is node:
            target = dotted(statement.target)
            annotation = statement.annotation.annotation
        elif isinstance(statement, cst.Return) and statement.value is node:
            target = None
        else:
            return None
        if target is None and not isinstance(statement, cst.Return):
            return None
        arguments = bind_arguments(node)
        if arguments is None or "replace_fn" in arguments or "replace" not in arguments:
            return None
        scope = next(
            (n for n in reversed(ancestors) if isinstance(n, (cst.FunctionDef, cst.ClassDef))),
            None,
        )
        return TreeAtCall(
            call=node,
            line=line,
            block=block,
            target=target,
            pytree=arguments["pytree"],
            where=arguments["where"],
            replace=arguments.get("replace"),
            is_leaf=arguments.get("is_leaf"),
            loops=self.ctx.loops(node),
            indent=indentation(ancestors, self.ctx.module),
            ancestors=list(ancestors),
            annotation=annotation,
            function=scope if isinstance(scope, cst.FunctionDef) else None,
        )

    def _few_updates(self, call: TreeAtCall) -> bool:
        """The loop's header says it runs two or three times (`for key in ("train", "val")`)."""
        return _few(iteration_count(self.ctx, *_innermost_loop(call)))

    def _few_iterations(self, call: TreeAtCall) -> bool:
        """Whether the loop runs a few times by what its header shows: a count of at most
        `FEW`, or a model's layers or blocks (`range(len(model.layers))`, `for block in
        model.blocks`): where no caller repeats it, a bounded number of extra traversals, paid
        once. Not a table of unknown size (a plan's entries, a list of names)."""
        loop, ancestors = _innermost_loop(call)
        count = iteration_count(self.ctx, loop, ancestors)
        if count is not None:
            return count <= FEW
        return over_model_parts(self.ctx, loop, [*ancestors, loop])

    def _repeated(self, call: TreeAtCall) -> str | None:
        """How a chain comes to run many times, as evidence: in a loop that runs many times,
        or in a function that such a loop calls (`CallGraph.repeats`), here or in another
        module of the project (`CallGraph.repeated_elsewhere`); None when the engine cannot
        show it (set-up: a model built, weights loaded once)."""
        ctx = self.ctx
        for loop in reversed(call.loops):
            index = next(i for i, n in enumerate(call.ancestors) if n is loop)
            if loop_runs(ctx, loop, call.ancestors[:index]).often is Often.MANY:
                return loop_evidence(ctx, loop, [*call.ancestors, call.call])
        function = ctx.calls.function(call.function) if call.function is not None else None
        if function is None:
            return None
        for repeat in ctx.calls.repeats(function, drivers=True):
            return call_chain_evidence(
                ctx, repeat.site.call, repeat.site.path, repeat.loop, [f.name for f in repeat.chain]
            )
        return ctx.calls.repeated_elsewhere(function)

    def finish(self) -> None:
        chains = _chains(self._calls)
        in_chain = {id(c.call) for chain in chains for c in chain[1:]}
        heads = {id(chain[0].call): chain for chain in chains}
        module = self.ctx.module
        for call in self._calls:
            chain = heads.get(id(call.call))
            if call.loops and call.assigns_back and _repeats_on_same_tree(call, self._calls):
                if self._few_updates(call):
                    continue
                repeated = self._repeated(call)
                if repeated is None and not self.preview and self._few_iterations(call):
                    continue  # a few updates in set-up run once (weights converted per layer): paid once
                if chain is not None:
                    fix = chain_fix(module, chain)
                elif id(call.call) in in_chain:
                    fix = None  # the chain's head carries the fix for the whole chain
                else:
                    fix = _loop_fix(
                        module, call, self._calls, self.runtime_helpers, self.ctx.source
                    )
                self.report(
                    call.call,
                    _loop_message(module, call),
                    fix=fix,
                    ancestors=call.ancestors,
                    evidence=[repeated or loop_evidence(self.ctx, call.loops[-1], [*call.ancestors, call.call])],
                )
            elif chain is not None and not _chain_is_silent(chain):
                repeated = self._repeated(call)
                if repeated is None:
                    continue  # set-up run once: one or two more traversals, paid once
                self.report(
                    call.call,
                    _chain_message(module, chain),
                    fix=chain_fix(module, chain),
                    ancestors=call.ancestors,
                    evidence=[repeated],
                )


def _innermost_loop(call: TreeAtCall) -> tuple[cst.CSTNode, list[cst.CSTNode]]:
    """The loop nearest to the call, with its ancestors."""
    innermost = call.loops[-1]
    index = next(i for i, n in enumerate(call.ancestors) if n is innermost)
    return innermost, call.ancestors[:index]


def _chains(calls: list[TreeAtCall]) -> list[list[TreeAtCall]]:
    """Runs of consecutive statements in one block, each updating the previous one's result."""
    by_line = {id(c.line): c for c in calls}
    blocks: dict[int, cst.CSTNode] = {id(c.block): c.block for c in calls}
    chains: list[list[TreeAtCall]] = []
    for block in blocks.values():
        run: list[TreeAtCall] = []
        for statement in block.body:  # type: ignore[attr-defined]
            call = by_line.get(id(statement))
            if call is not None and run and _links(run[-1], call):
                run.append(call)
                continue
            if len(run) >= 2:
                chains.append(run)
            run = [call] if call is not None else []
        if len(run) >= 2:
            chains.append(run)
    return chains


def _links(previous: TreeAtCall, call: TreeAtCall) -> bool:
    """Whether `call` updates the tree `previous` just produced, and that tree is not
    needed anywhere else: it is rebound (`m = tree_at(.., m, ..)`, `self.m = ...`),
    returned (`return tree_at(.., m, ..)`), or renamed (`m2 = tree_at(.., m1, ..)`) with
    the intermediate name read nowhere else."""
    name = previous.target
    if name is None or call.pytree_key != name:
        return False
    if call.target == name:
        return True
    if "." in name:
        return False  # an attribute outlives the chain: its intermediate value is visible
    if call.is_return:
        return True  # whether the name's last binding may go is the fix's question
    return _dead_after(previous, call)


_INTROSPECTION = frozenset({"locals", "vars", "eval", "exec", "dir", "globals"})


def _dead_after(previous: TreeAtCall, call: TreeAtCall) -> bool:
    """Whether the name `previous` binds is read only by `call` (its pytree argument) once
    bound: a local of a function, read nowhere after that binding, not even in a loop
    around it, a closure, `locals()` or a `global`/`nonlocal` declaration."""
    name = previous.target
    function = previous.function
    if name is None or function is None or function is not call.function:
        return False
    start = next(i for i, n in enumerate(previous.ancestors) if n is function)
    if any(isinstance(n, (cst.For, cst.While)) for n in previous.ancestors[start:]):
        return False  # a loop could run a read placed before the binding again after it
    if free_names(function.body) & _INTROSPECTION:
        return False
    for node in iter_subtree(function.body):
        if isinstance(node, (cst.Global, cst.Nonlocal)):
            if any(item.name.value == name for item in node.names):
                return False
    # Reads that run before the binding: in the statements of the block up to it, outside
    # nested scopes (a closure defined there could run later).
    body = list(previous.block.body)  # type: ignore[attr-defined]
    position = next(i for i, s in enumerate(body) if s is previous.line)
    before: set[int] = set()
    for statement in body[: position + 1]:
        before.update(id(n) for n in iter_subtree(statement, into_scopes=False))
    # Any other read (later, in an enclosing block, in a closure) keeps the name alive.
    bound = _bound_names(function.body)
    for node in iter_subtree(function.body):
        if isinstance(node, cst.Name) and node.value == name:
            if id(node) in before or id(node) in bound or node is call.pytree:
                continue
            return False
    return True


def _bound_names(root: cst.CSTNode) -> set[int]:
    """Ids of the `Name` nodes that are plain assignment targets (`x = ...`, `x: T = ...`)."""
    bound: set[int] = set()
    for node in iter_subtree(root):
        if isinstance(node, cst.Assign):
            bound.update(id(t.target) for t in node.targets if isinstance(t.target, cst.Name))
        elif isinstance(node, cst.AnnAssign) and isinstance(node.target, cst.Name):
            bound.add(id(node.target))
    return bound


def _few(count: int | None) -> bool:
    """Two or three updates: batching them saves one or two traversals."""
    return count is not None and count <= _FEW_UPDATES


def _chain_is_silent(chain: list[TreeAtCall]) -> bool:
    """A chain whose `where` paths overlap cannot be batched: stay silent."""
    paths = chain_paths(chain)
    return paths is not None and overlapping([p for group in paths for p in group])


def _repeats_on_same_tree(call: TreeAtCall, calls: list[TreeAtCall]) -> bool:
    """The innermost loop keeps updating one tree, at targets that change from one iteration
    to the next, and does not stop on what it reads."""
    tree, root = call.target, call.root
    assert tree is not None
    updates = [c.line for c in calls if c.assigns_back and c.target == tree]
    innermost = call.loops[-1]
    if call.is_attribute:
        if assigns_name(innermost, root) or _assigns_attribute(innermost, tree, skip=updates):
            return False  # `for layer in layers: layer.w = ...`: a different tree each time
    elif assigns_name(innermost, tree, skip=updates):
        return False  # each iteration starts from a different tree
    if not any(assigns_name(innermost, name) for name in free_names(call.where)):
        # The same node every iteration: an accumulation (`m.layers + (new,)`) or "last
        # wins"; there is nothing to batch.
        return False
    for loop in call.loops:
        if isinstance(loop, cst.While) and reads_name(loop.test, root):
            return False
        body = loop.body if isinstance(loop, (cst.For, cst.While)) else loop
        if contains_exit(body, (cst.Break, cst.Return)) and reads_name(body, root, skip=updates):
            return False
    return True


def _assigns_attribute(
    root: cst.CSTNode, key: str, *, skip: cst.CSTNode | list[cst.CSTNode] = ()
) -> bool:
    """Whether a statement under `root` assigns or deletes the attribute `key` (`self.model`),
    one of its parents (`self.state`) or a part of it (`self.model.head`)."""
    for node in iter_subtree(root, into_scopes=False, skip=skip):
        if isinstance(node, cst.Assign):
            targets = [t.target for t in node.targets]
        elif isinstance(node, (cst.AnnAssign, cst.AugAssign)):
            targets = [node.target]
        elif isinstance(node, cst.Del):
            targets = [node.target]
        else:
            continue
        while targets:
            target = targets.pop()
            if isinstance(target, (cst.Tuple, cst.List)):
                targets.extend(e.value for e in target.elements)
                continue
            if isinstance(target, cst.StarredElement):
                targets.append(target.value)
                continue
            while isinstance(target, cst.Subscript):
                target = target.value
            written = dotted(target)
            if written is None:
                continue
            if written == key or key.startswith(written + ".") or written.startswith(key + "."):
                return True
    return False


def _loop_fix(
    module: cst.Module, call: TreeAtCall, calls: list[TreeAtCall], runtime_helpers: bool, source: str
) -> Fix | None:
    """The outermost enclosing loop that can be hoisted past, and the rewrite around it."""
    tree, root = call.target, call.root
    assert tree is not None
    if call.annotation is not None and call.function is None:
        return None  # a module or class annotation is recorded when (and if) the line runs
    others = [c for c in calls if c is not call and c.target == tree]
    allowed_reads: list[cst.CSTNode] = [call.line]
    hoist: Loop | None = None
    for loop in reversed(call.loops):
        if not isinstance(loop, (cst.For, cst.While)) or loop.orelse is not None:
            break
        if isinstance(loop, cst.For) and loop.asynchronous is not None:
            break
        if any(any(loop is l for l in other.loops) for other in others):
            break
        if call.is_attribute:
            # Any other use of the object (`self.step()`) may read or write the attribute.
            if assigns_name(loop, root) or _assigns_attribute(loop, tree, skip=call.line):
                break
        elif assigns_name(loop, tree, skip=call.line):
            break
        if contains_exit(loop.body, (cst.Return,)):
            break
        if reads_name(loop.body, root, skip=allowed_reads):
            break
        if isinstance(loop, cst.While) and reads_name(loop.test, root):
            break
        hoist = loop
        if isinstance(loop, cst.For):
            allowed_reads.append(loop.iter)
    if hoist is None or _inside_try(call, hoist):
        return None
    return loop_fix(module, call, hoist, runtime_helpers=runtime_helpers, source=source)


def _inside_try(call: TreeAtCall, loop: Loop) -> bool:
    start = next(i for i, n in enumerate(call.ancestors) if n is loop)
    return any(isinstance(n, (cst.Try, cst.TryStar)) for n in call.ancestors[start:])


def _callee(module: cst.Module, call: TreeAtCall) -> str:
    return module.code_for_node(call.call.func)


def _loop_message(module: cst.Module, call: TreeAtCall) -> str:
    count = 1
    for loop in call.loops:
        iterations = literal_iterations(loop)
        if iterations is None:
            count = 0
            break
        count *= iterations
    saving = f" ({count} calls: one batched call saves {count - 1} traversals)" if count > 1 else ""
    return (
        f"`{_callee(module, call)}` rebuilds `{call.target}` on every loop iteration, and each "
        f"call traverses the whole pytree{saving}; collect the `where`s and replacements and "
        "make one batched call after the loop"
    )


def _chain_message(module: cst.Module, chain: list[TreeAtCall]) -> str:
    count = len(chain)
    return (
        f"{count} consecutive `{_callee(module, chain[0])}` calls on `{chain[0].target}` "
        f"traverse the whole pytree {count} times; one batched call saves {count - 1} "
        f"traversal{'s' if count > 2 else ''}"
    )
