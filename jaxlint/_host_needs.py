"""What the host needs now: a device value converted where Python must have it at once.

A copy to the host inside a loop stalls the loop, unless the program needs the Python value
right away and no reordering could defer it: an index or slice bound (`x[: n.item()]`), a
static argument of a JAX op (a shape), `range(...)`, an assertion, a test that decides what
runs next (also through the names the loop computes from it: `dx = float(d)`, `total += dx`,
`if total > tol:`), a value the next iteration starts from, a list of sizes then used as
shapes, or an argument of a host library that computes with it at once (`library.toml`'s
`host-consumers`: sklearn, scipy, mujoco, PIL...), also of a method of an object such a
library made (`env = gym.make(name)`, then `env.step(action)`), or of a function of the file
that turns what it is given into Python values and returns what it makes of them (`decode =
lambda ids: "".join(vocab[int(i)] for i in ids)`, then `decode(tokens)`: `converts_on_host`).
Rules that weigh a host copy (host-copy-in-loop) ask here rather than guessing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import libcst as cst

from ._device import HOST_ATTRIBUTES
from ._bindings import Kind
from ._jaxapi import HOST_BUILTINS, HOST_METHODS, is_array_op, is_host_consumer, is_host_copy
from ._nodes import free_names, iter_subtree, reads_name, root_name
from ._scope import target_names
from ._walk import path_below, walk_with_paths

if TYPE_CHECKING:
    from ._context import FileContext


__all__ = [
    "array_op_call",
    "carried",
    "converts_on_host",
    "decided_on",
    "derived",
    "ends_timing",
    "feeds_host_library",
    "handed_to_host_library",
    "is_assertion",
    "needed_now",
    "passed_to_host_library",
    "statement_of",
    "static_list",
    "tested_every_round",
    "used_statically",
]


def statement_of(path: list[cst.CSTNode]) -> cst.CSTNode | None:
    """The innermost statement line or compound statement on `path`."""
    return next((n for n in reversed(path) if isinstance(n, (cst.SimpleStatementLine, cst.BaseCompoundStatement))), None)


def ends_timing(ctx: FileContext, path: list[cst.CSTNode]) -> bool:
    """Whether the statement at the end of `path` is the last wait before a clock read that
    ends a timing: a clock started earlier in its block (`start = time.perf_counter()`), then
    this statement, then the end read, with nothing but host bookkeeping between (statements
    that call nothing), in a statement that calls nothing but the clock and a list's `append`:
    `end = time.perf_counter()`, `elapsed = time.perf_counter() - start`, `total +=
    time.perf_counter() - start`, `times.append(time.perf_counter() - start)`; also as the
    first statement of a branch of an `if` that tests without calling (`if step == 0: first
    = time() - start` / `else: total += time() - start`). A copy there (`energy =
    float(out[0])`, a loss formatted into a progress bar) is the wait the timing needs before
    its read (unsynced-timing asks for one), not a stall to remove: deferring it would time the dispatch. A clock read that is
    not such an end (a throughput printed from a clock started before the loop, a restart of
    the same clock) does not count."""
    from ._timing import is_timer_read

    statement = statement_of(path)
    if statement is None:
        return False
    index = next((i for i, n in enumerate(path) if n is statement), None)
    block = path[index - 1] if index else None
    if not isinstance(block, (cst.IndentedBlock, cst.Module)):
        return False
    body = list(block.body)
    position = next((i for i, n in enumerate(body) if n is statement), None)
    if position is None:
        return False
    around = list(path[:index])

    def clock(expr: cst.BaseExpression, where: list[cst.CSTNode]) -> bool:
        return isinstance(expr, cst.Call) and is_timer_read(ctx, expr, where)

    def started_clock(line: cst.CSTNode) -> str | None:
        """`NAME = <clock read>` as NAME, else None."""
        if not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1:
            return None
        small = line.body[0]
        if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name):
            if clock(small.value, [*around, line, small]):
                return small.targets[0].target.value
        return None

    started = {name for line in body[:position] if (name := started_clock(line)) is not None}
    if not started:
        return False

    def ends(line: cst.CSTNode, where: list[cst.CSTNode]) -> bool | None:
        """Whether `line` ends a started clock (True), is host bookkeeping to read past
        (None), or may wait or dispatch (False)."""
        if isinstance(line, cst.If):
            if any(isinstance(n, cst.Call) for n in iter_subtree(line.test)):
                return False
            branches: list[cst.BaseSuite] = []
            branch: cst.If | cst.Else | None = line
            while branch is not None:
                branches.append(branch.body)
                branch = branch.orelse if isinstance(branch, cst.If) else None
            firsts = [b.body[0] for b in branches if isinstance(b, cst.IndentedBlock) and b.body]
            return any(ends(first, [*where, line]) is True for first in firsts)
        if not isinstance(line, cst.SimpleStatementLine):
            return False
        calls = [n for n in iter_subtree(line) if isinstance(n, cst.Call)]
        if not calls:
            return None
        if not all(clock(c, [*where, line]) or _appends(c) for c in calls):
            return False  # `writer.add_scalar("sps", n / (time() - t0))`: more than a timing
        name = started_clock(line)
        if name is not None:
            return name not in started  # `end = time.perf_counter()`, not a restart of `start`
        for node in iter_subtree(line):
            if (
                isinstance(node, cst.BinaryOperation)
                and isinstance(node.operator, cst.Subtract)
                and isinstance(node.right, cst.Name)
                and node.right.value in started
                and clock(node.left, [*where, line])
            ):
                return True
        return False

    for line in body[position + 1 : position + 4]:
        verdict = ends(line, around)
        if verdict is not None:
            return verdict
    return False


def _appends(call: cst.Call) -> bool:
    """`times.append(...)`: a list's append, which stores and waits for nothing."""
    return isinstance(call.func, cst.Attribute) and call.func.attr.value == "append"


def needed_now(ctx: FileContext, node: cst.Call, path: list[cst.CSTNode] | None = None) -> bool:
    """The host value is needed right away as a Python value: an index or slice bound
    (`x[: n.item()]`), a static argument of a JAX op (a shape), `range(...)`, or an
    assertion (`self.assertEqual(..., x.item())`). `path`: `node`'s ancestors and
    `node` (default: `node` is being visited)."""
    path = ctx.path_to(node) if path is None else path
    for parent, child in zip(reversed(path[:-1]), reversed(path)):
        if isinstance(parent, (cst.SubscriptElement, cst.Assert)):
            return True
        if isinstance(parent, (cst.If, cst.While, cst.IfExp, cst.CompIf)) and child is parent.test:
            return True  # `if any(isnan(float(m)) for m in means):` decides what runs next
        if isinstance(parent, cst.Call) and child is not parent.func:
            if is_assertion(parent.func):
                return True
            if isinstance(parent.func, cst.Name) and parent.func.value == "range":
                return True
            if ctx.device._compiled_call(parent, tuple(path[: path.index(parent)])) or array_op_call(ctx, parent, path):
                return True
        if isinstance(parent, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            break
    if static_list(ctx, path) or passed_to_host_library(ctx, path):
        return True
    statement = statement_of(path)
    loop = next(iter(reversed(ctx.loops(node, path[:-1]))), None)
    if loop is None or not isinstance(statement, cst.SimpleStatementLine):
        return False
    # The loop's own ancestors, so that what it calls is read in its scope (`es.tell(...)`
    # with `es = cma.CMAEvolutionStrategy(...)` bound in the function around it).
    around = next((path[:i] for i, n in enumerate(path) if n is loop), [])
    for small in statement.body:
        if isinstance(small, cst.Assign) and any(n is small for n in path):
            names = {n for t in small.targets if isinstance(t.target, (cst.Name, cst.Tuple)) for n in target_names(t.target)}
            if any(used_statically(ctx, loop, name, statement, around) for name in names):
                return True
            # Handed to a host library in the loop, which computes with it now: what the loop
            # makes of the copy (`log_probs = jax.device_get(out)`, `probs = np.exp(log_probs)`,
            # then `np.random.choice(n, p=probs[i])`), or the host object it is stored into
            # (`sim.qpos = np.array(state.qpos)`, then `mujoco.mj_forward(model, sim)`).
            holders = {root_name(t.target) for t in small.targets if isinstance(t.target, (cst.Attribute, cst.Subscript))}
            if handed_to_host_library(ctx, loop, derived(loop, names) | (holders - {None}), around):
                return True
    return False


def static_list(ctx: FileContext, path: list[cst.CSTNode]) -> bool:
    """`sizes = [int(n_max[i]) for i in range(dim)]` whose items the function then uses
    where Python values are needed (`[jnp.arange(-n, n + 1) for n in sizes]`,
    `jnp.zeros(sizes)`): the list is a static shape, built from a few values."""
    for index in range(len(path) - 2, 0, -1):
        comp, child = path[index], path[index + 1]
        if not isinstance(comp, cst.ListComp) or child is not comp.elt:
            continue
        assign = path[index - 1]
        if not (
            isinstance(assign, cst.Assign)
            and assign.value is comp
            and len(assign.targets) == 1
            and isinstance(assign.targets[0].target, cst.Name)
        ):
            return False
        name = assign.targets[0].target.value
        scope = next((n for n in reversed(path[:index]) if isinstance(n, cst.FunctionDef)), ctx.module)
        for node, node_path in walk_with_paths(scope, []):
            if node is assign or any(n is assign for n in node_path):
                continue
            if isinstance(node, (cst.For, cst.CompFor)) and isinstance(node.iter, cst.Name) and node.iter.value == name:
                owner = node_path[-1] if isinstance(node, cst.CompFor) and node_path else node
                for item in target_names(node.target):
                    if used_statically(ctx, owner, item, node.target):
                        return True
            elif isinstance(node, cst.Call) and any(reads_name(a.value, name) for a in node.args):
                func = node.func
                if (isinstance(func, cst.Name) and func.value == "range") or array_op_call(ctx, node, [*node_path, node]):
                    return True
        return False
    return False


def is_assertion(func: cst.BaseExpression) -> bool:
    """`self.assertEqual`, `np.testing.assert_allclose`, `check`, `expect`: a test of the value."""
    last = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
    return last.startswith(("assert", "assert_")) or last in ("check", "expect")


def array_op_call(ctx: FileContext, call: cst.Call, path: list[cst.CSTNode]) -> bool:
    """`call` (on `path`, which ends with it) is a JAX or NumPy array operation."""
    name = ctx.resolve(call.func, path[: path.index(call)], anchor=call)
    return name is not None and is_array_op(name)


def used_statically(
    ctx: FileContext, loop: cst.CSTNode, name: str, assignment: cst.CSTNode, around: Sequence[cst.CSTNode] = ()
) -> bool:
    """Whether the loop uses `name` where a Python value is needed: an index or slice,
    `range(...)`, or an argument of a JAX op or jitted call (a shape, a static argument), or
    of a host library (`feeds_host_library`). `around`: the loop's ancestors."""
    for node, path in walk_with_paths(loop, list(around)):
        if node is assignment:
            continue
        if isinstance(node, cst.SubscriptElement) and reads_name(node, name):
            return True
        if isinstance(node, cst.Call) and any(reads_name(a.value, name) for a in node.args):
            func = node.func
            if isinstance(func, cst.Name) and func.value == "range":
                return True
            if any(n is assignment for n in path):
                continue
            if is_assertion(func):
                return True
            if ctx.resolve(func, path, anchor=node) is not None and array_op_call(ctx, node, [*path, node]):
                return True
            if feeds_host_library(ctx, node, [*path, node]):
                return True
    return False


def handed_to_host_library(ctx: FileContext, loop: cst.CSTNode, names: set[str], around: Sequence[cst.CSTNode] = ()) -> bool:
    """Whether the loop passes one of `names` to a function of a host library
    (`feeds_host_library`), in one walk of the loop. `around`: the loop's ancestors."""
    if not names:
        return False
    for node, path in walk_with_paths(loop, list(around)):
        if isinstance(node, cst.Call) and any(reads_name(a.value, name) for a in node.args for name in names):
            if feeds_host_library(ctx, node, [*path, node]):
                return True
    return False


def passed_to_host_library(ctx: FileContext, path: list[cst.CSTNode]) -> bool:
    """Whether the end of `path` is an argument, within its statement, of a call of a host
    library that computes with it now (`make_moons(random_state=int(seed))`)."""
    for parent, child in zip(reversed(path[:-1]), reversed(path)):
        if isinstance(parent, cst.Call) and child is not parent.func and feeds_host_library(ctx, parent, path):
            return True
        if isinstance(parent, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            return False
    return False


def feeds_host_library(ctx: FileContext, call: cst.Call, path: list[cst.CSTNode]) -> bool:
    """`call` is a function of a host library that computes with its arguments at once
    (`sklearn.datasets.make_moons`, `PIL.Image.fromarray`: `library.toml`'s host-consumers)."""
    index = next((i for i, n in enumerate(path) if n is call), len(path))
    return converts_on_host(ctx, call, path[:index]) or _library_call(ctx, call, path[:index])


def converts_on_host(ctx: FileContext, call: cst.Call, ancestors: Sequence[cst.CSTNode], depth: int = 0) -> bool:
    """Whether `call` (whose ancestors are `ancestors`) calls a function of the file, a `def`
    or a name bound to a `lambda` (every binding of the name one of them), that turns a
    parameter, or each item of one, into Python values (`int(t)`, `float(p)`, `t.item()`,
    `p.tolist()`, `np.asarray(p)`) or hands it to a host library (`tokenizer.decode(ids)`),
    and returns what it makes of them: `decode = lambda ids: "".join(vocab[int(t)] for t in
    ids)`, then `text = decode(tokens)`. The host computes with the argument at once, as a
    host library would. A function that only prints or logs what it converts returns nothing
    and is not one: its copy could be deferred."""
    if not isinstance(call.func, cst.Name) or depth > 2:
        return False
    bindings = ctx.bindings.of(call.func.value, [*ancestors, call])
    if not bindings:
        return False
    for binding in bindings:
        if binding.kind is Kind.DEF and isinstance(binding.node, cst.FunctionDef):
            function: cst.FunctionDef | cst.Lambda = binding.node
            inside = [*binding.path, function, function.body]
        elif binding.kind is Kind.ASSIGN and isinstance(binding.value, cst.Lambda):
            function = binding.value
            inside = [*binding.path, *_down_to(binding.node, function), function]
        else:
            return False
        if not _returns_converted(ctx, function, inside, depth):
            return False
    return True


def _down_to(root: cst.CSTNode, target: cst.CSTNode) -> list[cst.CSTNode]:
    """The nodes from `root` down to `target`'s parent ([] when `target` is not below it)."""
    for node, path in walk_with_paths(root, []):
        if node is target:
            return list(path)
    return []


def _returns_converted(ctx: FileContext, function: cst.FunctionDef | cst.Lambda, inside: list[cst.CSTNode], depth: int) -> bool:
    """`function` (whose body's ancestors are `inside`) converts one of its parameters, or an
    item it iterates out of one, to Python values or hands it to a host library, inside the
    expression it returns."""
    params = {p.name.value for p in (*function.params.posonly_params, *function.params.params)}
    if isinstance(function, cst.Lambda):
        returned = [(function.body, inside)]
    else:
        returned = [
            (n.value, [*path, n])
            for n, path in walk_with_paths(function.body, inside[:-1])
            if isinstance(n, cst.Return) and n.value is not None  # nested scopes are not walked
        ]
    for expr, expr_path in returned:
        items = set(params)
        for node in iter_subtree(expr, into_scopes=False):
            if isinstance(node, cst.CompFor) and any(reads_name(node.iter, name) for name in items):
                items |= set(target_names(node.target))
        for node, path in walk_with_paths(expr, expr_path):
            if not isinstance(node, cst.Call):
                continue
            if _converts_one_of(ctx, node, items, path):
                return True
            given = any(isinstance(a.value, cst.Name) and a.value.value in items for a in node.args)
            if given and (converts_on_host(ctx, node, path, depth + 1) or _library_call(ctx, node, path)):
                return True
    return False


def _library_call(ctx: FileContext, call: cst.Call, ancestors: Sequence[cst.CSTNode]) -> bool:
    """`call` (below `ancestors`) is a host library's function, or a method of an object one made."""
    name = ctx.resolve(call.func, ancestors, anchor=call)
    if name is not None:
        return is_host_consumer(name)
    return _host_object_method(ctx, call, tuple(ancestors))


def _converts_one_of(ctx: FileContext, call: cst.Call, names: set[str], ancestors: list[cst.CSTNode]) -> bool:
    """`int(t)`, `t.item()`, `p.tolist()`, `np.asarray(p)` with `t`/`p` among `names`."""
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value in HOST_METHODS:
        return isinstance(func.value, cst.Name) and func.value.value in names
    first = next((a.value for a in call.args if a.keyword is None and not a.star), None)
    if not (isinstance(first, cst.Name) and first.value in names):
        return False
    if isinstance(func, cst.Name) and func.value in HOST_BUILTINS:
        return True
    resolved = ctx.resolve(func, ancestors, anchor=call)
    return resolved is not None and is_host_copy(resolved)


def _host_object_method(ctx: FileContext, call: cst.Call, at: tuple[cst.CSTNode, ...]) -> bool:
    """`env.step(action)` where every binding of `env` calls a host library (`env =
    gym.make(name)`, `self.env = gym.vector.SyncVectorEnv(...)`): a method of an object a
    host library made computes on the host with what it is given."""
    func = call.func
    if not isinstance(func, cst.Attribute):
        return False
    makers = ctx.device.makers(func.value, at)
    return bool(makers) and all(m is not None and is_host_consumer(m) for m in makers)


_GROWING_METHODS = frozenset({"append", "extend", "add", "update", "insert", "appendleft"})


def _small_statements(loop: cst.CSTNode) -> list[cst.CSTNode]:
    body = getattr(loop, "body", None)
    if body is None:
        return []
    return [n for n in iter_subtree(body, into_scopes=False) if isinstance(n, cst.BaseSmallStatement)]


def derived(loop: cst.CSTNode, names: set[str], *, grown: bool = False) -> set[str]:
    """`names` and the names `loop`'s body assigns from them (`total += dx`, `score = a *
    total`), followed through two passes of the body (so a value carried to the next
    iteration counts). `grown`: also a collection the body adds them to (`hist.append(dx)`)."""
    smalls = _small_statements(loop)
    found = set(names)
    for _ in range(2):
        for small in smalls:
            if isinstance(small, cst.Assign) and free_names(small.value) & found:
                found |= {n for t in small.targets for n in free_names(t.target)}
            elif isinstance(small, (cst.AugAssign, cst.AnnAssign)) and small.value is not None:
                if free_names(small.value) & found:
                    found |= free_names(small.target)
            elif grown and isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
                func = small.value.func
                if (
                    isinstance(func, cst.Attribute)
                    and func.attr.value in _GROWING_METHODS
                    and isinstance(func.value, cst.Name)
                    and any(free_names(a.value) & found for a in small.value.args)
                ):
                    found.add(func.value.value)
    return found


def decided_on(loop: cst.CSTNode, names: set[str], statement: cst.CSTNode | None = None) -> bool:
    """Whether the loop decides what to do on `names` (its `while` test, an `if` or a
    conditional expression reads one), or, after `statement` (a statement of the loop's body
    that assigns them), on a value the following statements compute from them on every
    iteration (`dx = float(d)`, `total += dx`, `score = a * total`, `if score < eps:`): the
    host needs the value on the iteration that computes it. Only the body's own statements
    up to the first that can leave the iteration (a `continue`, `break` or `return` in it)
    are followed: a sum tested only on some iterations (`if step % k:` ... `continue`,
    then `avg = total / k`) could be kept on the device until then. A test that reads a name
    only for its metadata (`if out.ndim != 2: raise ...`) needs no value."""
    if isinstance(loop, cst.While) and _value_names(loop.test) & names:
        return True
    for node in iter_subtree(loop, into_scopes=False):
        if isinstance(node, (cst.If, cst.IfExp)) and _value_names(node.test) & names:
            return True
    block = getattr(loop, "body", None)
    if statement is None or not isinstance(block, cst.IndentedBlock):
        return False
    body = list(block.body)
    index = next((i for i, s in enumerate(body) if s is statement), None)
    if index is None:
        return False
    found = set(names)
    for following in body[index + 1 :]:
        for node in iter_subtree(following.test if isinstance(following, cst.If) else following, into_scopes=False):
            if isinstance(node, (cst.If, cst.IfExp)) and _value_names(node.test) & found:
                return True
        if isinstance(following, cst.If) and _value_names(following.test) & found:
            return True
        if isinstance(following, cst.SimpleStatementLine):
            for small in following.body:
                if isinstance(small, cst.Assign) and free_names(small.value) & found:
                    found |= {n for t in small.targets for n in target_names(t.target)}
                elif isinstance(small, (cst.AugAssign, cst.AnnAssign)) and small.value is not None:
                    if free_names(small.value) & found:
                        found |= set(target_names(small.target))
        if any(isinstance(n, (cst.Continue, cst.Break, cst.Return, cst.Raise)) for n in iter_subtree(following, into_scopes=False)):
            return False
    return isinstance(loop, cst.While) and bool(_value_names(loop.test) & found)


def _value_names(expr: cst.CSTNode) -> set[str]:
    """The free names `expr` reads for their values: not a name read only for its metadata
    (`x.shape`, `x.ndim`, `x.dtype`: known without waiting for the device)."""
    metadata = {
        id(node.value)
        for node in iter_subtree(expr, into_scopes=False)
        if isinstance(node, cst.Attribute) and node.attr.value in HOST_ATTRIBUTES and isinstance(node.value, cst.Name)
    }
    values = {node.value for node in iter_subtree(expr, into_scopes=False) if isinstance(node, cst.Name) and id(node) not in metadata}
    return free_names(expr) & values


def tested_every_round(loop: cst.CSTNode, value: cst.BaseExpression) -> bool:
    """Whether the loop's `while` test reads the object `value` is read from (`while not
    converged(stats):` for `float(stats.mean)`): the test makes a Python bool of it on every
    round, so the loop waits for that value anyway and a copy of it adds no wait. Its length
    and its host metadata (`HOST_ATTRIBUTES`: shape, dtype, ...) are known without waiting and
    do not count."""
    root = root_name(value)
    if root is None or not isinstance(loop, cst.While):
        return False
    hidden: set[int] = set()  # reads that need no wait: `len(x)`, `x.shape`
    for node in iter_subtree(loop.test, into_scopes=False):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "len":
            hidden.update(id(n) for arg in node.args for n in iter_subtree(arg.value, into_scopes=False))
        elif isinstance(node, cst.Attribute):
            hidden.add(id(node.attr))  # `other.stats` is not `stats`
            if node.attr.value in HOST_ATTRIBUTES:
                hidden.update(id(n) for n in iter_subtree(node.value, into_scopes=False))
    return any(
        isinstance(node, cst.Name) and node.value == root and id(node) not in hidden
        for node in iter_subtree(loop.test, into_scopes=False)
    )



def carried(loop: cst.CSTNode, statement: cst.CSTNode, names: set[str]) -> bool:
    """Whether values computed from `names` (assigned by `statement`) are read by the loop
    before `statement` runs again: in its `while` test, or earlier in its body. The host
    value then feeds the next iteration (a prompt re-tokenised from decoded text)."""
    if not isinstance(loop, (cst.For, cst.While)):
        return False
    found = derived(loop, names, grown=True)
    if isinstance(loop, cst.While) and free_names(loop.test) & found:
        return True
    rebound = set(target_names(loop.target)) if isinstance(loop, cst.For) else set()
    for small in _small_statements(loop):
        if any(small is n for n in statement.body):  # type: ignore[attr-defined]
            return False
        reads = _reads(small) - rebound
        if reads & found and not (isinstance(small, cst.Expr) and _only_grows(small, found)):
            return True
        rebound |= _binds(small)
    return False


def _reads(small: cst.CSTNode) -> set[str]:
    """Names a small statement reads (not the names it only assigns)."""
    if isinstance(small, cst.Assign):
        names = free_names(small.value)
        for t in small.targets:
            if not isinstance(t.target, (cst.Name, cst.Tuple, cst.List)):
                names |= free_names(t.target)
        return names
    if isinstance(small, cst.AnnAssign):
        return free_names(small.value) if small.value is not None else set()
    return free_names(small)


def _binds(small: cst.CSTNode) -> set[str]:
    if isinstance(small, cst.Assign):
        return {n for t in small.targets for n in target_names(t.target)}
    if isinstance(small, cst.AnnAssign) and small.value is not None:
        return set(target_names(small.target))
    return set()


def _only_grows(small: cst.Expr, found: set[str]) -> bool:
    """`results.append(...)`: adding to a collection is not reading it."""
    call = small.value
    return (
        isinstance(call, cst.Call)
        and isinstance(call.func, cst.Attribute)
        and call.func.attr.value in _GROWING_METHODS
        and not any(free_names(a.value) & found for a in call.args)
    )
