"""How many array leaves a pytree holds, where the code shows it.

`leaf_count` counts the arrays of a value from how it was built: an `eqx.nn` layer (a
`Linear` holds a weight and a bias, an `MLP` of depth d holds d + 1 of them), a Module class
of this file (the leaves of what its `__init__` assigns to its fields, and where the code
that builds a field is unknown, what the field's declaration says: `weight: jax.Array` or a
jaxtyping `Float[Array, "n"]` is one array, `use_bias: bool` or `eqx.field(static=True)` none;
or the leaves of the arguments it is built from when it has no `__init__`), an array (1), a Python scalar (0), a container (the
sum; a list grown after it is made, `layers.append(eqx.nn.Linear(...))` in a loop, holds
what is appended times the loop's iterations), `eqx.partition`/`eqx.filter`/`tree_at` (like their tree), an optimizer state
(`optimizer.init(params)`: about two arrays per parameter, as Adam keeps), and a function's
parameter when every call of the function in the file passes a counted value (the largest).
Anything else is unknown (None): a checkpoint, a config-driven model, a library class.

`SMALL` is the count below which a pytree is "a few arrays" for a per-leaf Python cost:
the ecosystem check's judging standard counts dozens of leaves or more as large.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import libcst as cst

from . import _jaxapi
from ._bindings import Kind
from ._frequency import integer_value, items_count, iteration_count
from ._nodes import iter_subtree, keyword_or_position
from ._walk import walk_with_paths

if TYPE_CHECKING:
    from ._context import FileContext

__all__ = ["SMALL", "leaf_count"]

SMALL = 24
_MAX_DEPTH = 6
_ARRAY_MODULES = ("jax.numpy.", "jax.random.", "numpy.", "jax.nn.initializers.")
# equinox layers: their array leaves with default arguments.
_LAYER_LEAVES = {
    "Linear": 2, "Conv": 2, "Conv1d": 2, "Conv2d": 2, "Conv3d": 2, "ConvTranspose": 2,
    "ConvTranspose1d": 2, "ConvTranspose2d": 2, "ConvTranspose3d": 2, "LayerNorm": 2,
    "RMSNorm": 2, "GroupNorm": 2, "BatchNorm": 2, "Embedding": 1, "GRUCell": 4,
    "LSTMCell": 4, "MultiheadAttention": 4, "PReLU": 1, "Dropout": 0, "Identity": 0,
    "Lambda": 0, "MaxPool1d": 0, "MaxPool2d": 0, "AvgPool1d": 0, "AvgPool2d": 0,
}  # fmt: skip
# Functions returning a pytree shaped like their positional argument at this index.
_LIKE_ARGUMENT = {
    "equinox.partition": 0, "equinox.filter": 0, "equinox.combine": 0, "equinox.tree_at": 1,
    "equinox.nn.inference_mode": 0, "equinox.apply_updates": 0, "jax.tree.map": 1,
    "jax.tree_util.tree_map": 1, "jax.device_put": 0,
}  # fmt: skip


def leaf_count(ctx: FileContext, expr: cst.BaseExpression, path: Sequence[cst.CSTNode], depth: int = 0) -> int | None:
    """The number of array leaves `expr` (whose ancestors are `path`) holds; None if unknown."""
    if depth > _MAX_DEPTH:
        return None
    if isinstance(expr, (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.ConcatenatedString)):
        return 0
    if isinstance(expr, cst.Name):
        if expr.value in ("True", "False", "None"):
            return 0
        return _name(ctx, expr, list(path), depth)
    if isinstance(expr, (cst.Tuple, cst.List)):
        return _sum(leaf_count(ctx, e.value, [*path, expr], depth + 1) for e in expr.elements)
    if isinstance(expr, cst.Dict):
        return _sum(
            leaf_count(ctx, e.value, [*path, expr], depth + 1) if isinstance(e, cst.DictElement) else None
            for e in expr.elements
        )
    if isinstance(expr, (cst.ListComp, cst.GeneratorExp)):
        times = items_count(ctx, expr.for_in.iter, [*path, expr]) if expr.for_in.inner_for_in is None else None
        each = leaf_count(ctx, expr.elt, [*path, expr], depth + 1)
        return None if times is None or each is None else times * each
    if isinstance(expr, cst.Call):
        return _call(ctx, expr, list(path), depth)
    return None


def _sum(counts) -> int | None:  # type: ignore[no-untyped-def]
    total = 0
    for count in counts:
        if count is None:
            return None
        total += count
    return total


def _name(ctx: FileContext, name: cst.Name, path: list[cst.CSTNode], depth: int) -> int | None:
    bindings = ctx.bindings.of(name.value, [*path, name])
    if not bindings:
        return None
    counts = []
    for binding in bindings:
        if binding.kind is Kind.ASSIGN and _updates(binding.value or binding.source, name.value):
            continue  # `model, opt_state = step(model, opt_state)`: an update keeps the structure
        if binding.kind is Kind.ASSIGN and binding.value is not None:
            count = leaf_count(ctx, binding.value, [*binding.path, binding.node], depth + 1)
            if count is not None and isinstance(binding.value, (cst.List, cst.Dict)):
                scope = next(
                    (i for i in range(len(binding.path) - 1, -1, -1) if isinstance(binding.path[i], cst.FunctionDef)),
                    0,
                )
                grown = _growth(
                    ctx, binding.path[scope], binding.path[:scope],
                    lambda e: isinstance(e, cst.Name) and e.value == name.value, depth,
                )  # fmt: skip
                count = None if grown is None else count + grown
            counts.append(count)
        elif binding.kind is Kind.PARAM:
            counts.append(_parameter(ctx, binding.node, binding.path, depth))
        else:
            return None
    if not counts or any(c is None for c in counts):
        return None
    return max(counts)  # type: ignore[type-var]


def _updates(value: cst.BaseExpression | None, name: str) -> bool:
    """Whether `value` is a call given `name` itself (`step(model, batch)`, or in a tuple:
    `eqx.filter_shard((model, opt_state), sharding)`)."""

    def is_name(expr: cst.BaseExpression) -> bool:
        return isinstance(expr, cst.Name) and expr.value == name

    return isinstance(value, cst.Call) and any(
        is_name(a.value)
        or (isinstance(a.value, (cst.Tuple, cst.List)) and any(is_name(e.value) for e in a.value.elements))
        for a in value.args
    )


def _parameter(ctx: FileContext, param: cst.CSTNode, path: Sequence[cst.CSTNode], depth: int) -> int | None:
    """A parameter's count: the largest of what every call of its function in the file passes
    (`path`: the parameter's ancestors)."""
    from ._callgraph import parameter_calls

    if isinstance(param, cst.Param) and param.annotation is not None:
        # `linear: eqx.nn.Linear`: a layer type with a fixed number of arrays
        annotation = param.annotation.annotation
        resolved = ctx.resolve(annotation, [*path, param], anchor=annotation)
        if resolved is not None and resolved.startswith("equinox.nn.") and resolved.count(".") == 2:
            count = _LAYER_LEAVES.get(resolved.rsplit(".", 1)[-1])
            if count is not None:
                return count
    found = parameter_calls(ctx, param, path)
    if found is None:
        return None
    counts = [
        leaf_count(ctx, passed, read_at, depth + 1) if passed is not None else None
        for passed, read_at in found[1]
    ]
    if not counts or any(c is None for c in counts):
        return None
    return max(counts)  # type: ignore[type-var]


def _call(ctx: FileContext, call: cst.Call, path: list[cst.CSTNode], depth: int) -> int | None:
    func = call.func
    resolved = ctx.resolve(func, path, anchor=call)
    positional = [a.value for a in call.args if a.keyword is None and not a.star]
    if resolved is not None:
        if resolved in _LIKE_ARGUMENT:
            index = _LIKE_ARGUMENT[resolved]
            return leaf_count(ctx, positional[index], [*path, call], depth + 1) if index < len(positional) else None
        if resolved.startswith("equinox.nn."):
            return _layer(ctx, call, resolved.rsplit(".", 1)[-1], path, depth)
        if resolved in _jaxapi.ARGUMENT_MODULES:
            # a solver or a step-size controller: options, and only the arrays it is given
            if any(a.star for a in call.args):
                return None
            return _sum(leaf_count(ctx, a.value, [*path, call], depth + 1) for a in call.args)
        if resolved.startswith(_ARRAY_MODULES):
            return 1
        return None
    if isinstance(func, cst.Attribute) and func.attr.value == "init" and positional:
        # An optimizer state: Adam-like optimizers keep two arrays per parameter.
        params = leaf_count(ctx, positional[0], [*path, call], depth + 1)
        return None if params is None else 2 * params + 1
    if isinstance(func, cst.Name):
        return _module_class(ctx, func, call, path, depth)
    return None


def _layer(ctx: FileContext, call: cst.Call, name: str, path: list[cst.CSTNode], depth: int) -> int | None:
    if name == "MLP":
        depth_arg = keyword_or_position(call, "depth", 3)
        layers = None if depth_arg is None else integer_value(ctx, depth_arg, [*path, call])
        return None if layers is None else 2 * (layers + 1)
    if name == "Sequential":
        layers_arg = keyword_or_position(call, "layers", 0)
        return None if layers_arg is None else leaf_count(ctx, layers_arg, [*path, call], depth + 1)
    return _LAYER_LEAVES.get(name)


def _module_class(ctx: FileContext, name: cst.Name, call: cst.Call, path: list[cst.CSTNode], depth: int) -> int | None:
    """A Module class of this file built here: the leaves its `__init__` assigns to `self`,
    or, with no `__init__`, those of the arguments it is built from."""
    from ._callgraph import passed_argument
    from ._pytrees import is_module_class

    if not is_module_class(ctx, name, [*path, call], 0):
        return None
    (binding,) = ctx.bindings.of(name.value, [*path, call, name])
    node = binding.node
    assert isinstance(node, cst.ClassDef)
    init = next(
        (n for n in node.body.body if isinstance(n, cst.FunctionDef) and n.name.value == "__init__"), None
    )
    if init is None:
        if any(a.star for a in call.args):
            return None
        return _sum(leaf_count(ctx, a.value, [*path, call], depth + 1) for a in call.args)
    counts: dict[str, int | None] = {}
    init_path = [*binding.path, node, node.body, init]
    params = [p.name.value for p in init.params.params][1:]  # without `self`
    for statement in iter_subtree(init.body, into_scopes=False):
        if not isinstance(statement, cst.Assign):
            continue
        for target in statement.targets:
            field = target.target
            if isinstance(field, cst.Attribute) and isinstance(field.value, cst.Name) and field.value.value == "self":
                value = statement.value
                if isinstance(value, cst.Name) and value.value in params:
                    # `self.mean = mean`: what this construction passes for it, or else the
                    # parameter's default (`solver=dfx.Tsit5()`)
                    argument = passed_argument(call, value.value, params)
                    if argument is not None:
                        counts[field.attr.value] = leaf_count(ctx, argument, [*path, call], depth + 1)
                    else:
                        counts[field.attr.value] = _default_count(ctx, call, init, value.value, init_path, depth)
                else:
                    counts[field.attr.value] = leaf_count(ctx, value, [*init_path, statement], depth + 1)
    for field, count in counts.items():
        if count is not None:  # `self.blocks = []`, then `self.blocks.append(Block(...))` in a loop
            grown = _growth(ctx, init, init_path[:-1], lambda e, f=field: _is_self_field(e, f), depth)
            counts[field] = None if grown is None else count + grown
    declared = _declared_fields(node)
    for field, count in counts.items():
        if count is None:
            counts[field] = declared.get(field)  # `weight: jax.Array`, whatever built it
    if not counts or any(c is None for c in counts.values()):
        return None
    return sum(counts.values())  # type: ignore[arg-type]


_GROWERS = frozenset({"append", "extend", "insert"})


def _growth(
    ctx: FileContext, scope: cst.CSTNode, scope_path: list[cst.CSTNode], is_container, depth: int  # type: ignore[no-untyped-def]
) -> int | None:
    """The array leaves a container gains in `scope` after it is made: each value given to its
    `append`/`insert`, `extend` or `+=`, times the iterations of the `for` loops around that
    call inside `scope` (0 when it is never grown; None when a value or a count is unknown)."""
    total = 0
    for node, path in walk_with_paths(scope, scope_path):
        if (
            isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
            and node.func.attr.value in _GROWERS and is_container(node.func.value) and node.args
        ):  # fmt: skip
            value = node.args[-1].value
        elif isinstance(node, cst.AugAssign) and is_container(node.target):
            value = node.value
        else:
            continue
        each = leaf_count(ctx, value, [*path, node], depth + 1)
        times: int | None = 1
        for index in range(len(scope_path) + 1, len(path)):
            if isinstance(path[index], cst.While):
                times = None
            elif isinstance(path[index], cst.For) and times is not None:
                runs = iteration_count(ctx, path[index], path[:index])
                times = None if runs is None else times * runs
        if each is None or times is None:
            return None
        total += each * times
    return total


def _is_self_field(expr: cst.BaseExpression, field: str) -> bool:
    return (
        isinstance(expr, cst.Attribute) and expr.attr.value == field
        and isinstance(expr.value, cst.Name) and expr.value.value == "self"
    )  # fmt: skip


def _default_count(
    ctx: FileContext, call: cst.Call, init: cst.FunctionDef, name: str, init_path: list[cst.CSTNode], depth: int
) -> int | None:
    """The leaves of parameter `name`'s default, when `call` passes nothing for it (and
    spreads no `*args`/`**kwargs` that might)."""
    if any(a.star for a in call.args):
        return None
    param = next((p for p in init.params.params if p.name.value == name), None)
    if param is None or param.default is None:
        return None
    return leaf_count(ctx, param.default, [*init_path[:-1], init, init.params, param], depth + 1)


# Annotations that declare one array, and ones that declare a Python value (no array).
_ARRAY_ANNOTATIONS = frozenset(
    {"Array", "ndarray", "ArrayLike", "Float", "Int", "Bool", "Shaped", "Num", "Real", "Complex",
     "UInt", "Integer", "Inexact", "Key", "PRNGKeyArray"}
)  # fmt: skip
_STATIC_ANNOTATIONS = frozenset({"bool", "int", "float", "str", "complex", "Callable", "type"})


def _declared_fields(node: cst.ClassDef) -> dict[str, int]:
    """The array leaves a Module class's field declarations state: `weight: jax.Array` (or a
    jaxtyping `Float[Array, "n"]`) holds one array, `use_bias: bool` and any
    `eqx.field(static=True)` none. Fields declared otherwise are left out."""
    declared: dict[str, int] = {}
    for line in node.body.body:
        if not isinstance(line, cst.SimpleStatementLine):
            continue
        for small in line.body:
            if not (isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name)):
                continue
            value = small.value
            if (
                isinstance(value, cst.Call)
                and any(
                    a.keyword is not None and a.keyword.value == "static"
                    and isinstance(a.value, cst.Name) and a.value.value == "True"
                    for a in value.args
                )
            ):
                declared[small.target.value] = 0
                continue
            annotation = small.annotation.annotation
            base = annotation.value if isinstance(annotation, cst.Subscript) else annotation
            last = base.attr.value if isinstance(base, cst.Attribute) else base.value if isinstance(base, cst.Name) else None
            if last in _ARRAY_ANNOTATIONS:
                declared[small.target.value] = 1
            elif last in _STATIC_ANNOTATIONS:
                declared[small.target.value] = 0
    return declared
