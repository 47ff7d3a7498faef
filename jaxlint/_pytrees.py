"""What kind of value an expression holds, as far as the code shows: an equinox Module, an
optimizer state, another (large) pytree, an array, a Python scalar, or unknown.

Used to tell a call that carries a model and an optimizer state from one that passes a few
arrays. Evidence only: a name is classified from its bindings in the scope it resolves to
(`model = eqx.nn.MLP(...)`, `opt_state = optimizer.init(...)`, `params, static =
eqx.partition(...)`, a parameter annotated `eqx.Module`, a class of this file that subclasses
`eqx.Module`...); anything else is `UNKNOWN`, never guessed from its spelling here (callers
may add their own name heuristics on top).
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

import libcst as cst

from ._bindings import Binding, Kind
from ._jaxapi import LINEN_MODULES
from ._scope import dotted_name


if TYPE_CHECKING:
    from ._context import FileContext


__all__ = ["Value", "classify", "declared_by_callee", "is_large", "is_module_class", "linen_builder", "subclasses_module"]

_MAX_DEPTH = 4


class Value(enum.Enum):
    MODULE = "Module"
    OPT_STATE = "optimizer state"
    PYTREE = "pytree"
    OPTIMIZER = "optimizer"  # an optax GradientTransformation (a tuple of functions)
    NNX = "Flax NNX object"  # a Module, Optimizer or metric of `flax.nnx`, updated in place
    ARRAY = "array"
    SCALAR = "scalar"
    UNKNOWN = "unknown"


_LARGE = frozenset({Value.MODULE, Value.OPT_STATE, Value.PYTREE})

# equinox functions returning a pytree like their `index`-th positional argument.
_LIKE_ARGUMENT = {
    "equinox.tree_at": 1,
    "equinox.apply_updates": 0,
    "equinox.filter": 0,
    "equinox.combine": 0,
    "equinox.nn.inference_mode": 0,
    "equinox.tree_deserialise_leaves": 1,
    "jax.tree.map": 1,
    "jax.tree_util.tree_map": 1,
    "jax.tree_map": 1,
}
# Calls returning a tuple of pytrees (`params, static = eqx.partition(model, ...)`).
_PYTREE_TUPLES = frozenset({"equinox.partition", "jax.tree_util.tree_flatten"})
_ARRAY_MODULES = ("jax.numpy.", "jax.random.", "jax.lax.", "jax.nn.", "numpy.", "jax.scipy.")
_ARRAY_ANNOTATIONS = ("jax.Array", "jax.numpy.ndarray", "numpy.ndarray", "jaxtyping.")
_OPTIMIZER_NAMES = frozenset({"opt", "optim", "optimizer", "optimiser", "tx"})  # optimistix/jaxopt `solver.init` states are a few arrays
_NNX_MODULE = "flax.nnx.Module"
_SCALAR_BUILTINS = frozenset({"int", "float", "bool", "str", "len", "complex"})


def is_large(value: Value) -> bool:
    """A Module, an optimizer state or another pytree: many leaves, or an unknown number."""
    return value in _LARGE


def classify(ctx: FileContext, expr: cst.BaseExpression, path: Sequence[cst.CSTNode], depth: int = 0) -> Value:
    """What `expr` (whose ancestors are `path`) holds."""
    if depth > _MAX_DEPTH:
        return Value.UNKNOWN
    if isinstance(expr, (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
        return Value.SCALAR
    if isinstance(expr, cst.Name):
        if expr.value in ("True", "False", "None"):
            return Value.SCALAR
        return _classify_name(ctx, expr, path, depth)
    if isinstance(expr, (cst.Tuple, cst.List, cst.Dict, cst.Set)):
        elements = (
            [e.value for e in expr.elements if isinstance(e, cst.DictElement)]
            if isinstance(expr, cst.Dict)
            else [e.value for e in expr.elements]
        )
        kinds = [classify(ctx, e, [*path, expr], depth + 1) for e in elements]
        if any(is_large(k) for k in kinds):
            return Value.PYTREE
        return Value.UNKNOWN
    if isinstance(expr, cst.UnaryOperation):
        inner = classify(ctx, expr.expression, [*path, expr], depth + 1)
        return inner if inner in (Value.ARRAY, Value.SCALAR) else Value.UNKNOWN
    if isinstance(expr, cst.BinaryOperation):
        kinds = {classify(ctx, side, [*path, expr], depth + 1) for side in (expr.left, expr.right)}
        if Value.ARRAY in kinds and kinds <= {Value.ARRAY, Value.SCALAR}:
            return Value.ARRAY
        return Value.SCALAR if kinds == {Value.SCALAR} else Value.UNKNOWN
    if isinstance(expr, cst.Call):
        return _classify_call(ctx, expr, path, depth)
    if isinstance(expr, cst.Attribute):
        # `self.model`: what the class's fields and methods set it to
        bindings = ctx.bindings.of_attribute(expr, path)
        return _classify_bindings(ctx, bindings, depth) if bindings else Value.UNKNOWN
    if isinstance(expr, cst.IfExp):
        # `ema_model if use_ema else model`: either branch, as for a name bound on two paths
        kinds = [classify(ctx, branch, [*path, expr], depth + 1) for branch in (expr.body, expr.orelse)]
        for preferred in (Value.MODULE, Value.OPT_STATE, Value.PYTREE):
            if preferred in kinds:
                return preferred
        return kinds[0] if kinds[0] is kinds[1] else Value.UNKNOWN
    return Value.UNKNOWN


def declared_by_callee(ctx: FileContext, call: cst.Call, arg: cst.Arg, path: Sequence[cst.CSTNode]) -> Value:
    """What the function `call` calls declares the parameter receiving `arg` to hold, by its
    annotation (`def make_step(model: eqx.Module, opt_state: optax.OptState, ...)`), for a
    `def` of this file called by name; `UNKNOWN` otherwise. `path`: the call's ancestors."""
    if arg.star or not isinstance(call.func, cst.Name):
        return Value.UNKNOWN
    bindings = ctx.bindings.of(call.func.value, [*path, call])
    if len(bindings) != 1 or not isinstance(bindings[0].node, cst.FunctionDef):
        return Value.UNKNOWN
    function = bindings[0].node
    params = [*function.params.posonly_params, *function.params.params]
    if arg.keyword is not None:
        params += function.params.kwonly_params
        param = next((p for p in params if p.name.value == arg.keyword.value), None)
    else:
        index = next((i for i, a in enumerate(call.args) if a is arg), len(params))
        if any(a.keyword is not None or a.star for a in call.args[:index]):
            return Value.UNKNOWN
        param = params[index] if index < len(params) else None
    if param is None or param.annotation is None:
        return Value.UNKNOWN
    return _classify_annotation(ctx, param.annotation.annotation, [*bindings[0].path, function, function.params])


def _classify_name(ctx: FileContext, name: cst.Name, path: Sequence[cst.CSTNode], depth: int) -> Value:
    return _classify_bindings(ctx, ctx.bindings.of(name.value, [*path, name]), depth)


def _classify_bindings(ctx: FileContext, bindings: Sequence[Binding], depth: int) -> Value:
    """What a name or attribute bound by `bindings` holds: a Module, optimizer state or
    pytree if one binding makes one, else the kind every binding agrees on."""
    if not bindings:
        return Value.UNKNOWN
    kinds = [_classify_binding(ctx, b, depth) for b in bindings]
    for preferred in (Value.MODULE, Value.OPT_STATE, Value.PYTREE):
        if preferred in kinds:
            return preferred
    known = set(kinds) - {Value.UNKNOWN}
    if len(known) == 1 and Value.UNKNOWN not in kinds:
        return known.pop()
    return Value.UNKNOWN


def _classify_binding(ctx: FileContext, binding: Binding, depth: int) -> Value:
    if binding.kind is Kind.PARAM:
        if binding.annotation is not None:
            return _classify_annotation(ctx, binding.annotation, binding.path)
        return _classify_parameter(ctx, binding, depth)
    if binding.kind is Kind.CLASS:
        return Value.UNKNOWN
    if binding.kind is Kind.ASSIGN:
        if binding.annotation is not None:
            annotated = _classify_annotation(ctx, binding.annotation, binding.path)
            if annotated is not Value.UNKNOWN:
                return annotated
        path = [*binding.path, binding.node]
        if binding.value is not None:
            return classify(ctx, binding.value, path, depth + 1)
        if binding.index is not None and isinstance(binding.source, cst.Call):
            return _classify_element(ctx, binding.source, binding.index, path, depth)
    return Value.UNKNOWN


def _classify_parameter(ctx: FileContext, binding: Binding, depth: int) -> Value:
    """What a parameter holds when every call of its function in the file passes the same
    kind of value (`train(model, loader, optax.adam(1e-3))`); `UNKNOWN` when a caller may be
    elsewhere (`_callgraph.call_arguments`) or a call leaves the default. For now only the
    kinds no rule read from parameters before (an optax optimizer, a Flax NNX object): what
    Modules and pytrees passed in change for the other rules is still to be measured."""
    from ._callgraph import parameter_calls

    found = parameter_calls(ctx, binding.node, binding.path)
    if found is None or not found[1]:
        return Value.UNKNOWN
    kinds = {
        classify(ctx, passed, read_at, depth + 1) if passed is not None else Value.UNKNOWN
        for passed, read_at in found[1]
    }
    kind = kinds.pop() if len(kinds) == 1 else Value.UNKNOWN
    return kind if kind in _BY_CALLERS else Value.UNKNOWN


_BY_CALLERS = frozenset({Value.OPTIMIZER, Value.NNX})


def _classify_element(ctx: FileContext, call: cst.Call, index: int, path: Sequence[cst.CSTNode], depth: int) -> Value:
    """What element `index` of the tuple returned by `call` holds."""
    resolved = ctx.resolve(call.func, path, anchor=call)
    if resolved in _PYTREE_TUPLES:
        return Value.PYTREE
    inner = call.func
    if isinstance(inner, cst.Call) and ctx.resolve(inner.func, path, anchor=call) == "equinox.nn.make_with_state":
        return Value.MODULE if index == 0 else Value.PYTREE
    built = _built(ctx, resolved) if resolved is not None else ()
    return built[index] if len(built) > 1 and index < len(built) else Value.UNKNOWN


_BUILT = {"module": Value.MODULE, "state": Value.OPT_STATE, "pytree": Value.PYTREE}


def _built(ctx: FileContext, resolved: str) -> tuple[Value, ...]:
    """What calling the project callable `resolved` (an imported name) gives, per element of
    a returned tuple, as another module of the project defines it (`_project.Project.built`):
    a Module class, a function returning a model, an optimizer state or a training state."""
    if ctx.project is None:
        return ()
    built = ctx.project.built(resolved, ctx.module_name) or ()
    return tuple(_BUILT.get(kind, Value.UNKNOWN) for kind in built)


def _classify_call(ctx: FileContext, call: cst.Call, path: Sequence[cst.CSTNode], depth: int) -> Value:
    func = call.func
    resolved = ctx.resolve(func, path, anchor=call)
    if resolved is not None:
        if resolved in _LIKE_ARGUMENT:
            positional = [a for a in call.args if a.keyword is None and not a.star]
            index = _LIKE_ARGUMENT[resolved]
            if index < len(positional):
                like = classify(ctx, positional[index].value, [*path, call], depth + 1)
                if is_large(like):
                    return like
            return Value.PYTREE if resolved.startswith("equinox.") else Value.UNKNOWN
        if resolved.startswith("equinox.nn.") and resolved.rsplit(".", 1)[-1][:1].isupper():
            return Value.PYTREE if resolved == "equinox.nn.State" else Value.MODULE
        if resolved.startswith("flax.nnx.") and resolved.rsplit(".", 1)[-1][:1].isupper():
            return Value.NNX  # `nnx.Optimizer(model, tx)`, `nnx.MultiMetric(...)`, `nnx.Linear(...)`
        if resolved.startswith("optax."):
            return Value.OPTIMIZER
        if resolved.startswith(_ARRAY_MODULES):
            return Value.ARRAY
        built = _built(ctx, resolved)
        return built[0] if len(built) == 1 else Value.PYTREE if any(is_large(b) for b in built) else Value.UNKNOWN
    if isinstance(func, cst.Attribute) and func.attr.value == "init":
        receiver = func.value
        if isinstance(receiver, cst.Call) and (ctx.resolve(receiver.func, path, anchor=call) or "").startswith("optax."):
            return Value.OPT_STATE
        if classify(ctx, receiver, [*path, call, func], depth + 1) is Value.OPTIMIZER:
            return Value.OPT_STATE
        if isinstance(receiver, (cst.Name, cst.Attribute)) and _last(receiver) in _OPTIMIZER_NAMES:
            return Value.OPT_STATE
        return Value.UNKNOWN
    if isinstance(func, cst.Name):
        if func.value in _SCALAR_BUILTINS and ctx.is_builtin(func.value, path, anchor=call):
            return Value.SCALAR
        if is_module_class(ctx, func, [*path, call], depth):
            return Value.MODULE
        if is_module_class(ctx, func, [*path, call], depth, roots=(_NNX_MODULE,)):
            return Value.NNX
    return Value.UNKNOWN


def _classify_annotation(ctx: FileContext, annotation: cst.BaseExpression, path: Sequence[cst.CSTNode]) -> Value:
    target = annotation
    if isinstance(target, cst.Subscript):  # PyTree[...], Float[Array, "..."], Optional[...]
        target = target.value
    if isinstance(target, cst.SimpleString):
        return Value.UNKNOWN
    resolved = ctx.resolve(target, path, anchor=annotation) if dotted_name(target) else None
    if resolved is not None:
        if resolved == "equinox.Module" or (resolved.startswith("equinox.nn.") and resolved.rsplit(".", 1)[-1][:1].isupper()):
            return Value.MODULE
        if resolved.startswith("flax.nnx.") and resolved.rsplit(".", 1)[-1][:1].isupper():
            return Value.NNX  # `model: nnx.Module`, `optimizer: nnx.Optimizer`
        if resolved in ("optax.GradientTransformation", "optax.GradientTransformationExtraArgs"):
            return Value.OPTIMIZER
        if resolved in ("optax.OptState", "optax.ScaleByAdamState"):
            return Value.OPT_STATE
        if resolved in ("jaxtyping.PyTree", "chex.ArrayTree", "optax.Params"):
            return Value.PYTREE
        if resolved.startswith(_ARRAY_ANNOTATIONS) or resolved in ("jax.Array",):
            return Value.ARRAY
        if ctx.project is not None and ctx.project.module_class(resolved, ctx.module_name):
            return Value.MODULE
        return Value.UNKNOWN
    if isinstance(target, cst.Name):
        if target.value in ("int", "float", "bool", "str") and ctx.is_builtin(target.value, path, anchor=annotation):
            return Value.SCALAR
        if is_module_class(ctx, target, [*path, annotation], 0):
            return Value.MODULE
    return Value.UNKNOWN


def linen_builder(ctx: FileContext, name: cst.Name, path: Sequence[cst.CSTNode]) -> str | None:
    """What builds the Flax Linen module `name` holds: the callee (as written) of the call
    every binding of `name` assigns, when that callee is a class subclassing
    `flax.linen.Module` (of this file, or of the project) or a project function every
    `return` of which builds one (`model = create_model(config)`); None otherwise. A Linen
    module's `.apply(variables, x)` runs its whole forward."""
    bindings = ctx.bindings.of(name.value, [*path, name])
    if not bindings:
        return None
    builders = set()
    for binding in bindings:
        value = binding.value
        if binding.kind is not Kind.ASSIGN or not isinstance(value, cst.Call):
            return None
        at = [*binding.path, binding.node]
        resolved = ctx.resolve(value.func, at, anchor=value)
        if resolved is not None:
            if not (ctx.project is not None and ctx.project.builds_linen(resolved, ctx.module_name)):
                return None
        elif not (isinstance(value.func, cst.Name) and is_module_class(ctx, value.func, [*at, value], 0, roots=LINEN_MODULES)):
            return None
        builders.add(dotted_name(value.func) or "")
    return builders.pop() if len(builders) == 1 else None


def is_module_class(
    ctx: FileContext,
    name: cst.Name,
    path: Sequence[cst.CSTNode],
    depth: int,
    *,
    roots: Collection[str] = ("equinox.Module",),
) -> bool:
    """Whether `name` is a class of this file that subclasses `eqx.Module` (or one of `roots`:
    `flax.nnx.Module`), directly, through other classes of the file, or through a Module class
    another module of the project defines: `class Encoder(Backbone)` with `from .models import
    Backbone`."""
    if depth > _MAX_DEPTH:
        return False
    bindings = ctx.bindings.of(name.value, [*path, name])
    if len(bindings) != 1 or bindings[0].kind is not Kind.CLASS:
        return False
    node = bindings[0].node
    assert isinstance(node, cst.ClassDef)
    return subclasses_module(ctx, node, bindings[0].path, roots, depth)


def subclasses_module(
    ctx: FileContext,
    node: cst.ClassDef,
    outer: Sequence[cst.CSTNode],
    roots: Collection[str],
    depth: int = 0,
    *,
    max_depth: int = _MAX_DEPTH,
) -> bool:
    """Whether the class `node` (whose ancestors are `outer`) subclasses one of `roots`
    directly, through other classes of the file, or is a Module class another module of the
    project defines or subclasses; a generic base (`Dynamics[S]`) counts as its class."""
    if depth > max_depth:
        return False
    for base in node.bases:
        value = base.value.value if isinstance(base.value, cst.Subscript) else base.value  # `Base[T]`
        resolved = ctx.resolve(value, outer, anchor=node)
        if resolved in roots:
            return True
        if resolved is not None and ctx.project is not None and ctx.project.module_class(resolved, ctx.module_name):
            return True
        if isinstance(value, cst.Name):
            bindings = ctx.bindings.of(value.value, [*outer, node])
            if len(bindings) == 1 and bindings[0].kind is Kind.CLASS and bindings[0].node is not node:
                parent = bindings[0].node
                assert isinstance(parent, cst.ClassDef)
                if subclasses_module(ctx, parent, bindings[0].path, roots, depth + 1, max_depth=max_depth):
                    return True
    return False


def _last(expr: cst.BaseExpression) -> str:
    return expr.value if isinstance(expr, cst.Name) else expr.attr.value  # type: ignore[attr-defined]
