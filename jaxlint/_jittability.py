"""Can a function be jit-compiled as it is, and which of its parameters must be static?

Read by missing-jit (`analyze`; `OPTION_NAME`, the keywords of a Flax `.apply` that are
module options, also by its apply-in-loop reading). A function body is walked once (nested lambdas and defs included) and
each construct is sorted into: fine under a trace, a *blocker* (host I/O, `.item()`,
mutation of outer objects, value-dependent Python control flow, calls jaxlint cannot see
into), or a *static position*: a place that needs a concrete Python value (an `if` test,
`range(...)`, a dict key, an f-string, a shape argument, `x in layers`, `model.apply` and
its keyword arguments). Parameters read in static positions become `static_argnames`; a
local read there must derive from parameters and constants only (`n = len(layers)`), or
the control flow depends on array values and jit would raise.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import libcst as cst

from . import _jaxapi
from ._callgraph import HOST_METHODS, CallGraph, Function, is_host_copy, runs_many_times
from ._context import FileContext
from ._nodes import root_name
from ._pytrees import Value, classify, is_module_class
from ._scope import dotted_name, target_names
from ._traceable import SHAPE_KEYWORDS, SHAPE_POSITIONS, shape_positions
from ._walk import iter_children


__all__ = ["OPTION_NAME", "Jittability", "analyze"]

# Attributes of an array that are Python values even under a trace.
_STATIC_ATTRIBUTES = frozenset({"shape", "ndim", "dtype", "size", "itemsize", "weak_type", "sharding"})
# Builtins whose result is static whatever they are given, or that only inspect types.
_NEUTRAL_BUILTINS = frozenset({"len", "isinstance", "issubclass", "hasattr", "callable", "type", "id"})
# Builtins that need concrete values (bool/int conversion, comparisons, formatting).
_CONCRETE_BUILTINS = frozenset(
    {"range", "float", "int", "bool", "complex", "str", "repr", "format", "min", "max", "any", "all", "sorted", "hash", "round", "divmod", "chr", "ord"}
)  # fmt: skip
# Builtins fine on traced values and containers of them.
_TRACEABLE_BUILTINS = frozenset(
    {"tuple", "list", "dict", "set", "frozenset", "zip", "enumerate", "reversed", "sum", "abs", "map", "filter", "iter", "next", "getattr", "super", "slice", "NotImplementedError", "ValueError", "TypeError", "AssertionError", "KeyError", "RuntimeError", "IndexError"}
)  # fmt: skip
_HOST_BUILTINS = frozenset({"print", "open", "input", "breakpoint", "exec", "eval", "setattr", "delattr"})
# Methods of arrays (traceable).
_ARRAY_METHODS = frozenset(
    {
        "reshape", "astype", "sum", "mean", "max", "min", "argmax", "argmin", "transpose", "swapaxes",
        "squeeze", "flatten", "ravel", "dot", "clip", "prod", "std", "var", "cumsum", "round",
        "conj", "real", "imag", "take", "repeat", "all", "any", "at", "set", "add", "multiply",
        "divide", "power", "get", "apply", "view", "T", "mT", "sort", "argsort", "nonzero",
    }
)  # fmt: skip
# Methods of a Flax `TrainState` (`flax.training.train_state`): the model's `apply` and the
# optimizer update, both traceable.
_TRAIN_STATE_METHODS = frozenset({"apply_fn", "apply_gradients"})
# Methods of an optax `GradientTransformation` (`_pytrees.Value.OPTIMIZER`): pure functions.
_OPTIMIZER_METHODS = frozenset({"init", "update"})
# Container methods that read only.
_PURE_METHODS = frozenset(
    {"get", "items", "keys", "values", "copy", "index", "count", "format", "join", "split", "startswith", "endswith", "lower", "upper", "replace", "strip"}
)  # fmt: skip
# Container methods that mutate their receiver.
_MUTATORS = frozenset({"append", "extend", "insert", "update", "setdefault", "pop", "popitem", "add", "clear", "remove", "discard"})
# Keyword names of `.apply` that are module options rather than inputs.
OPTION_NAME = re.compile(
    r"(^|_)(indices|layers|layer|train|training|deterministic|mode|num|n|return|use|is|with|enable|output)(_|$)"
)
_Loop = cst.For | cst.ListComp | cst.SetComp | cst.DictComp | cst.GeneratorExp
_LOCAL = "local"
_PARAM = "param"
_SAFE = "safe"  # a Python value whatever the arguments are (enumerate index, len(...))


@dataclass
class Jittability:
    """What stands between a function and `jax.jit`."""

    blockers: list[str] = field(default_factory=list)  # what jit would break, in words
    statics: dict[str, str] = field(default_factory=dict)  # parameter -> why it is static
    module_calls: bool = False  # it calls Modules it is given (equinox): use filter_jit
    in_place: bool = False  # it calls or updates Flax NNX objects it is given: use nnx.jit
    undeterminable: str | None = None  # why static parameters cannot be told


def analyze(ctx: FileContext, graph: CallGraph, function: Function, _depth: int = 0) -> Jittability:
    """Read `function`'s body; see the module docstring."""
    return _Reader(ctx, graph, function, _depth).run()


class _Reader:
    def __init__(self, ctx: FileContext, graph: CallGraph, function: Function, depth: int) -> None:
        self.ctx = ctx
        self.graph = graph
        self.function = function
        self.depth = depth
        self.result = Jittability()
        node = function.node
        params = node.params
        self.params = [p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)]
        self.posonly = {p.name.value for p in params.posonly_params}
        if isinstance(params.star_arg, cst.Param) or isinstance(params.star_kwarg, cst.Param):
            self.result.undeterminable = "it takes `*args`/`**kwargs`"
        self.defaults = {
            p.name.value: p.default for p in (*params.params, *params.kwonly_params) if p.default is not None
        }
        # name -> list of (kind, expression it derives from)
        self.derivations: dict[str, list[tuple[str, cst.BaseExpression | None]]] = {}
        self.array_uses: set[str] = set()
        self.uses_equinox = graph._uses_equinox  # noqa: SLF001
        self.uses_nnx = graph._uses_nnx and not self.uses_equinox  # noqa: SLF001
        self._resolving: set[str] = set()

    # -- the walk ------------------------------------------------------------------------

    def run(self) -> Jittability:
        body = self.function.node.body
        self._collect_bindings(body)
        self._visit(body, [*self.function.path, self.function.node])
        for name, default in self.defaults.items():
            if isinstance(default, (cst.SimpleString, cst.ConcatenatedString)) or (
                isinstance(default, cst.Name) and default.value in ("True", "False")
            ):
                self._mark_param(name, "a flag with a constant default")
        conflicts = sorted(set(self.result.statics) & self.array_uses)
        if conflicts:
            self._block(f"Python control flow on the value of `{conflicts[0]}`, which is also used as an array")
        if set(self.result.statics) & self.posonly:
            self.result.undeterminable = "a static parameter is positional-only"
        if self.uses_equinox:
            # Equinox Modules hold non-array leaves (activation functions, ints): only
            # `eqx.filter_jit` takes them as they are.
            self.result.module_calls = True
        return self.result

    def _block(self, reason: str) -> None:
        if reason not in self.result.blockers:
            self.result.blockers.append(reason)

    def _collect_bindings(self, body: cst.CSTNode) -> None:
        for param in self.params:
            self.derivations.setdefault(param, []).append((_PARAM, None))
        for node in _subtree(body):
            if isinstance(node, cst.Assign):
                for target in node.targets:
                    self._bind(target.target, node.value)
            elif isinstance(node, (cst.AnnAssign, cst.AugAssign)) and node.value is not None:
                self._bind(node.target, node.value)
            elif isinstance(node, (cst.For, cst.CompFor)):
                self._bind_loop(node.target, node.iter)
            elif isinstance(node, cst.NamedExpr):
                self._bind(node.target, node.value)
            elif isinstance(node, (cst.FunctionDef, cst.Lambda)) and node is not self.function.node:
                for param in (*node.params.posonly_params, *node.params.params, *node.params.kwonly_params):
                    self.derivations.setdefault(param.name.value, []).append((_LOCAL, None))
                if isinstance(node, cst.FunctionDef):
                    self.derivations.setdefault(node.name.value, []).append((_SAFE, None))
            elif isinstance(node, cst.WithItem) and node.asname is not None:
                for name in target_names(node.asname.name):
                    self.derivations.setdefault(name, []).append((_LOCAL, None))

    def _bind(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        for name in target_names(target):
            self.derivations.setdefault(name, []).append((_LOCAL, value))

    def _bind_loop(self, target: cst.BaseExpression, iterable: cst.BaseExpression) -> None:
        func = iterable.func if isinstance(iterable, cst.Call) else None
        name = func.value if isinstance(func, cst.Name) else None
        if name == "range":
            for bound in target_names(target):
                self.derivations.setdefault(bound, []).append((_SAFE, None))
            return
        if name == "enumerate" and isinstance(target, cst.Tuple) and len(target.elements) == 2:
            index, item = target.elements
            for bound in target_names(index.value):
                self.derivations.setdefault(bound, []).append((_SAFE, None))
            inner = iterable.args[0].value if iterable.args else iterable  # type: ignore[union-attr]
            for bound in target_names(item.value):
                self.derivations.setdefault(bound, []).append((_LOCAL, inner))
            return
        self._bind(target, iterable)

    def _visit(self, node: cst.CSTNode, path: list[cst.CSTNode]) -> None:
        self._inspect(node, path)
        path.append(node)
        for child in iter_children(node):
            self._visit(child, path)
        path.pop()

    def _inspect(self, node: cst.CSTNode, path: list[cst.CSTNode]) -> None:
        if isinstance(node, (cst.Yield, cst.Await)):
            self._block("it is a generator" if isinstance(node, cst.Yield) else "it awaits")
        elif isinstance(node, (cst.Global, cst.Nonlocal)):
            self._block("it rebinds outer names (`global`/`nonlocal`)")
        elif isinstance(node, (cst.Try, cst.TryStar)):
            self._block("it catches exceptions (`try`), which traced code raises differently")
        elif isinstance(node, cst.While):
            self._block("a `while` loop (jit would unroll it or reject a traced condition)")
            self._static(node.test, "a `while` test")
        elif isinstance(node, (cst.If, cst.IfExp)):
            self._static(node.test, "an `if` test")
        elif isinstance(node, cst.Assert):
            self._static(node.test, "an `assert`")
        elif isinstance(node, cst.CompIf):
            self._static(node.test, "a comprehension condition")
        elif isinstance(node, cst.BooleanOperation):
            self._static(node.left, "`and`/`or`")
            self._static(node.right, "`and`/`or`")
        elif isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
            self._static(node.expression, "`not`")
        elif isinstance(node, cst.Comparison):
            self._comparison(node)
        elif isinstance(node, cst.FormattedStringExpression):
            self._static(node.expression, "an f-string")
        elif isinstance(node, cst.DictElement):
            self._static(node.key, "a dict key")
        elif isinstance(node, cst.DictComp):
            self._static(node.key, "a dict key")
        elif isinstance(node, cst.Slice):
            for part in (node.lower, node.upper, node.step):
                if part is not None:
                    self._static(part, "a slice bound")
        elif isinstance(node, cst.With):
            for item in node.items:
                resolved = self._resolve(item.item.func if isinstance(item.item, cst.Call) else item.item, path, node)
                if not (resolved or "").startswith(("jax.", "flax.", "equinox.")):
                    self._block("a `with` block")
        elif isinstance(node, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            for target in targets:
                self._assignment_target(target)
        elif isinstance(node, (cst.For, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)):
            self._for_iterable(node, path)
        elif isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.MatrixMultiply):
            self._array_use(node.left)
            self._array_use(node.right)
        elif isinstance(node, cst.Attribute) and node.attr.value in (_STATIC_ATTRIBUTES | {"at"}):
            self._array_use(node.value)
        elif isinstance(node, cst.Call):
            self._call(node, path)

    # -- constructs ----------------------------------------------------------------------

    def _comparison(self, node: cst.Comparison) -> None:
        operators = [c.operator for c in node.comparisons]
        if all(isinstance(op, (cst.Is, cst.IsNot)) for op in operators):
            return  # identity: `mask is None` works on traced values
        if any(isinstance(op, (cst.In, cst.NotIn)) for op in operators):
            self._static(node.left, "an `in` test")
            for comparison in node.comparisons:
                self._static(comparison.comparator, "an `in` test")

    def _assignment_target(self, target: cst.BaseExpression) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._assignment_target(element.value)
            return
        if isinstance(target, (cst.Attribute, cst.Subscript)):
            root = root_name(target)
            if root is None or self._kind(root) is not _LOCAL or root in self.params:
                self._block(f"it mutates `{dotted_name(target) or _text(target)}`, an object from outside")
            elif isinstance(target, cst.Subscript):
                for element in target.slice:
                    if isinstance(element.slice, cst.Index):
                        self._static(element.slice.value, "a dict key")

    def _for_iterable(self, loop: _Loop, path: list[cst.CSTNode]) -> None:
        # Iterating a parameter's pytree structure (`for w, b in params`, `model.blocks`) or a
        # static `range` unrolls a few steps; a loop over data (`for batch in loader`), or a
        # comprehension over the items of a list it is given (`[jnp.max(d) for d in diffs]`),
        # would unroll the dataset, retrace for every new length, or fail on an iterator.
        if runs_many_times(self.ctx, loop, [*path, loop]):
            iterable = loop.iter if isinstance(loop, cst.For) else loop.for_in.iter
            kind = "loop" if isinstance(loop, cst.For) else "comprehension"
            self._block(f"a Python {kind} over `{_text(iterable)}` (jit would unroll it)")

    def _call(self, call: cst.Call, path: list[cst.CSTNode]) -> None:
        func = call.func
        resolved = self._resolve(func, path, call)
        if resolved is not None:
            self._known_call(call, resolved, path)
            return
        if isinstance(func, cst.Name):
            self._name_call(call, func.value, path)
        elif isinstance(func, cst.Attribute):
            self._method_call(call, func, path)
        elif isinstance(func, cst.Call):
            inner = self._resolve(func.func, path, call)
            if inner is None or not inner.startswith(("jax.", "equinox.", "flax.", "functools.partial")):
                self._block(f"it calls `{_text(func)}`, which jaxlint cannot see into")
        elif isinstance(func, cst.Subscript):
            if not (self.uses_equinox and self._rooted_in_argument(func)):
                self._block(f"it calls `{_text(func)}`, which jaxlint cannot see into")
            else:
                self.result.module_calls = True
        else:
            self._block(f"it calls `{_text(func)}`, which jaxlint cannot see into")

    def _known_call(self, call: cst.Call, resolved: str, path: list[cst.CSTNode]) -> None:
        last = resolved.rsplit(".", 1)[-1]
        if is_host_copy(resolved) or resolved in ("jax.block_until_ready", "jax.effects_barrier"):
            self._block(f"`{_text(call.func)}` copies to the host")
            return
        if resolved.startswith(("jax.", "equinox.", "flax.", "optax.", "haiku.", "chex.", "einops.", "jaxlint.")):
            if _jaxapi.is_array_op(resolved):
                positions = shape_positions(resolved)
                for index, arg in enumerate(a for a in call.args if a.keyword is None and not a.star):
                    if index in positions:
                        self._static(arg.value, f"a shape argument of `{last}`")
                    elif index == 0 or last not in SHAPE_POSITIONS:
                        self._array_use(arg.value)
                for arg in call.args:
                    if arg.keyword is not None and arg.keyword.value in SHAPE_KEYWORDS:
                        self._static(arg.value, f"`{arg.keyword.value}=` of `{last}`")
            return
        project = self.ctx.project
        if project is not None and project.builds_linen(resolved, self.ctx.module_name):
            self._linen_module(call)
            return
        traced = project.traceable(resolved, self.ctx.module_name) if project is not None else None
        if traced is not None:
            self._imported_call(call, *traced)
            return
        if resolved.startswith(("numpy.", "math.")):
            for arg in call.args:
                self._static(arg.value, f"an argument of `{_text(call.func)}` (NumPy needs concrete values)")
            return
        if resolved in ("functools.partial", "typing.cast", "dataclasses.replace"):
            return
        if self._traced_elsewhere(call, resolved):
            return
        self._block(f"it calls `{_text(call.func)}`, which jaxlint cannot see into")

    def _name_call(self, call: cst.Call, name: str, path: list[cst.CSTNode]) -> None:
        kind = self._kind(name)
        if kind is None:  # a builtin or a module-level name
            callee = self.graph.functions.get(name)
            if callee is not None and any(site.call is call for site in callee.sites):
                self._local_call(call, callee)
                return
            if name in _HOST_BUILTINS:
                self._block(f"`{name}(...)` runs on the host" if name != "print" else "`print` of values")
                return
            if name in _NEUTRAL_BUILTINS:
                return
            if name in _CONCRETE_BUILTINS:
                for arg in call.args:
                    self._static(arg.value, f"`{name}(...)`")
                return
            if name in _TRACEABLE_BUILTINS:
                return
            if isinstance(call.func, cst.Name) and is_module_class(self.ctx, call.func, path, 0, roots=("flax.linen.Module",)):
                self._linen_module(call)
                return
            if self._traced_elsewhere(call, name):
                return
            self._block(f"it calls `{name}`, which jaxlint cannot see into")
            return
        if kind is _SAFE:
            return  # a nested def: its body is part of this walk
        if name in self.params:
            for arg in call.args:
                self._array_use(arg.value)
            if self.uses_equinox:
                self.result.module_calls = True
            elif self._nnx_object(call.func, path):
                self.result.in_place = True
            else:
                self._mark_param(name, "a function it calls")
            return
        root = self._derived_param(name)
        if root is not None and self.uses_equinox:
            self.result.module_calls = True
            for arg in call.args:
                self._array_use(arg.value)
            return
        if root is None and self._kind(name) is _LOCAL and self._local_is_callable(name):
            return
        self._block(f"it calls `{name}`, which jaxlint cannot see into")

    def _local_call(self, call: cst.Call, callee: Function) -> None:
        if self.depth >= 3:
            self._block(f"it calls `{callee.name}` through too many levels to check")
            return
        inner = analyze(self.ctx, self.graph, callee, self.depth + 1)
        if inner.blockers:
            self._block(f"it calls `{callee.name}`, where {inner.blockers[0]}")
            return
        if inner.module_calls:
            self.result.module_calls = True
        if inner.in_place:
            self.result.in_place = True
        params = callee.node.params
        positional = [p.name.value for p in (*params.posonly_params, *params.params)]
        for index, arg in enumerate(call.args):
            if arg.star:
                if inner.statics:
                    self.result.undeterminable = f"`*` arguments to `{callee.name}`"
                continue
            name = arg.keyword.value if arg.keyword is not None else (positional[index] if index < len(positional) else None)
            if name in inner.statics:
                self._static(arg.value, f"a static parameter of `{callee.name}`")
            else:
                self._array_use(arg.value)

    def _imported_call(self, call: cst.Call, params: tuple[str, ...], statics: frozenset[str]) -> None:
        """A project function of another module that traces as it is (`Project.traceable`):
        what this call passes to its static parameters must be a Python value here."""
        name = _text(call.func)
        for index, arg in enumerate(call.args):
            if arg.star:
                if statics:
                    self.result.undeterminable = f"`*` arguments to `{name}`"
                continue
            param = arg.keyword.value if arg.keyword is not None else (params[index] if index < len(params) else None)
            if param in statics:
                self._static(arg.value, f"a static parameter of `{name}`")
            else:
                self._array_use(arg.value)

    def _traced_elsewhere(self, call: cst.Call, callee: str) -> bool:
        """A module-level callable whose body jaxlint cannot see (`rcl` from a star import,
        `losses.kl` of a module outside the project) that the file also calls from traced
        code (`CallGraph.calls_traced`: in a jitted function, or one handed to `jax.grad`):
        it traces, so calling it here is no blocker; what it is given is read as arrays."""
        if not callee or not self.graph.calls_traced(callee):
            return False
        for arg in call.args:
            self._array_use(arg.value)
        return True

    def _linen_module(self, call: cst.Call) -> None:
        """A Flax Linen module built in the body (`VAE(latents=latents)`, or a project function
        returning one: `models.model(latents)`, as `_project` reads it): a dataclass of options,
        fine under a trace, whose options must be Python values."""
        for arg in call.args:
            self._static(arg.value, f"an option of the Flax module `{_text(call.func)}` builds")

    def _method_call(self, call: cst.Call, func: cst.Attribute, path: list[cst.CSTNode]) -> None:
        method = func.attr.value
        receiver = func.value
        root = root_name(receiver)
        if method in HOST_METHODS or method in ("numpy", "cpu", "tobytes"):
            self._block(f"`.{method}()` copies to the host")
            return
        if method in _OPTIMIZER_METHODS and classify(self.ctx, receiver, [*path, call, func]) is Value.OPTIMIZER:
            # An optax `GradientTransformation`: `init` and `update` are pure functions of
            # their arguments (`updates, opt_state = tx.update(grads, opt_state, params)`).
            if root is not None and root in self.params:
                self._mark_param(root, "an optax optimizer (a tuple of functions)")
            for arg in call.args:
                self._array_use(arg.value)
            return
        if method in _TRAIN_STATE_METHODS and root is not None and (root in self.params or self._derived_param(root)):
            # A Flax `TrainState` handed in: `state.apply_fn` is its model's `apply` and
            # `state.apply_gradients(grads=...)` a pure update, both traceable.
            if method == "apply_gradients":
                for arg in call.args:
                    self._array_use(arg.value)
                return
            method = "apply"
        if method == "apply" and call.args:
            if isinstance(receiver, cst.Name) and receiver.value in self.params and func.attr.value == "apply":
                self._mark_param(receiver.value, "the Flax module of `.apply`")
            for arg in call.args[1:]:
                if arg.keyword is None:
                    self._array_use(arg.value)
            for arg in call.args:
                keyword = arg.keyword.value if arg.keyword is not None else None
                if keyword in ("mutable", "method", "capture_intermediates") or (
                    keyword is not None and OPTION_NAME.search(keyword)
                ):
                    # Module options (`train=`, `layer_indices=`) are Python values; other
                    # keyword inputs (`kv_caches=`, `position_offset=`) may well be arrays.
                    self._static(arg.value, f"`{keyword}=` of `.apply` (a module option)")
                elif keyword is not None and keyword != "rngs":
                    self._array_use(arg.value)
            return
        if isinstance(receiver, cst.Subscript) and isinstance(receiver.value, cst.Attribute) and receiver.value.attr.value == "at":
            return  # x.at[i].set(v)
        if method == "update" and root is not None and root in self.params and self._nnx_object(receiver, path):
            # `optimizer.update(model, grads)`, `metrics.update(loss=loss)` on Flax NNX
            # objects it is given: `nnx.jit` carries their updates out of the trace.
            self.result.in_place = True
            for arg in call.args:
                self._array_use(arg.value)
            return
        if method in _MUTATORS:
            if root is None or self._kind(root) is not _LOCAL or root in self.params:
                self._block(f"it mutates `{_text(receiver)}` (`.{method}`), an object from outside")
            return
        if method == "reshape":
            for arg in call.args:
                self._static(arg.value, "a shape argument of `reshape`")
            self._array_use(receiver)
            return
        if method in _ARRAY_METHODS or method in _PURE_METHODS:
            return
        if self.uses_equinox and root is not None and (root in self.params or self._derived_param(root)):
            self.result.module_calls = True
            for arg in call.args:
                self._array_use(arg.value)
            return
        if root is not None and self._kind(root) is None and self._traced_elsewhere(call, dotted_name(func) or ""):
            return
        self._block(f"it calls `{_text(func)}`, which jaxlint cannot see into")

    # -- names ---------------------------------------------------------------------------

    def _resolve(self, expr: cst.BaseExpression, path: Sequence[cst.CSTNode], anchor: cst.CSTNode) -> str | None:
        return self.ctx.resolve(expr, path, anchor=anchor)

    def _kind(self, name: str) -> str | None:
        """How the function binds `name`: a parameter, a local, a safe value; None: not
        bound here (global, builtin, closure)."""
        entries = self.derivations.get(name)
        if not entries:
            return None
        kinds = {k for k, _ in entries}
        if kinds == {_SAFE}:
            return _SAFE
        if _PARAM in kinds:
            return _PARAM if kinds == {_PARAM} else _LOCAL
        return _LOCAL

    def _rooted_in_argument(self, func: cst.Subscript) -> bool:
        """`model.layers[i](x)`, `blocks[0](x)`: a part of a parameter (or of a local taken from
        one) called, which under `eqx.filter_jit` is a Module's layer, traceable."""
        root = root_name(func)
        return root is not None and (root in self.params or self._derived_param(root) is not None)

    def _derived_param(self, name: str) -> str | None:
        """The parameter a local is a part of (`block` in `for block in model.blocks`)."""
        for kind, value in self.derivations.get(name, []):
            if kind == _LOCAL and value is not None:
                root = root_name(_strip_structural_call(value))
                if root in self.params:
                    return root
        return None

    def _local_is_callable(self, name: str) -> bool:
        """A local bound to a lambda, `partial(...)` or a jax transform of something."""
        for kind, value in self.derivations.get(name, []):
            if kind != _LOCAL or value is None:
                return False
            if isinstance(value, cst.Lambda):
                continue
            if isinstance(value, cst.Call):
                resolved = self.ctx.resolve(value.func, [*self.function.path, self.function.node], anchor=self.function.node.body)
                if resolved and resolved.startswith(("jax.", "functools.partial", "equinox.")):
                    continue
            return False
        return True

    def _nnx_object(self, expr: cst.BaseExpression, path: list[cst.CSTNode]) -> bool:
        """Whether `expr` holds a Flax NNX object (a Module, an `nnx.Optimizer`, a metric) in a
        file that uses `flax.nnx`: what every caller passes for it, as `_pytrees` reads it."""
        return self.uses_nnx and classify(self.ctx, expr, path) in (Value.NNX, Value.MODULE)

    def _mark_param(self, name: str, reason: str) -> None:
        self.result.statics.setdefault(name, reason)

    def _array_use(self, expr: cst.BaseExpression) -> None:
        if isinstance(expr, cst.Name) and expr.value in self.params:
            self.array_uses.add(expr.value)

    def _static(self, expr: cst.BaseExpression, where: str) -> None:
        """`expr` must be a concrete Python value: make the parameters it reads static, and
        block when it reads a value computed from arrays."""
        for name in _static_reads(expr):
            self._require_static(name, where)
        for call in _calls_in(expr):
            func = call.func
            resolved = self.ctx.resolve(func, [*self.function.path, self.function.node], anchor=self.function.node.body)
            array_method = (
                isinstance(func, cst.Attribute) and func.attr.value in _ARRAY_METHODS and func.attr.value not in _PURE_METHODS
            )
            if (resolved is not None and _jaxapi.is_array_op(resolved)) or array_method:
                self._block(f"Python control flow on array values ({where} computes `{_text(func)}`)")

    def _require_static(self, name: str, where: str) -> None:
        kind = self._kind(name)
        if kind is None or kind is _SAFE:
            return
        if kind is _PARAM:
            self._mark_param(name, where)
            return
        if name in self._resolving:
            return
        self._resolving.add(name)
        try:
            for entry_kind, value in self.derivations.get(name, []):
                if entry_kind == _PARAM:
                    self._mark_param(name, where)
                elif entry_kind == _LOCAL:
                    if value is None or not _structural(value):
                        self._block(f"Python control flow on the value of `{name}` ({where})")
                        return
                    for inner in _static_reads(value):
                        self._require_static(inner, where)
        finally:
            self._resolving.discard(name)


def _subtree(root: cst.CSTNode) -> Iterator[cst.CSTNode]:
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(iter_children(node))


def _calls_in(expr: cst.CSTNode) -> Iterator[cst.Call]:
    for node in _subtree(expr):
        if isinstance(node, cst.Call):
            yield node


def _static_reads(expr: cst.CSTNode) -> Iterator[str]:
    """Names whose values `expr` needs, skipping what is static on arrays anyway
    (`x.shape`, `len(x)`, `x is None`, `isinstance(x, ...)`)."""
    stack: list[cst.CSTNode] = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Name):
            yield node.value
            continue
        if isinstance(node, cst.Attribute):
            if node.attr.value in _STATIC_ATTRIBUTES:
                continue
            stack.append(node.value)
            continue
        if isinstance(node, cst.Call):
            if isinstance(node.func, cst.Name) and node.func.value in _NEUTRAL_BUILTINS:
                continue
            stack.extend(a.value for a in node.args)
            if not isinstance(node.func, cst.Name):
                stack.append(node.func)
            continue
        if isinstance(node, cst.Comparison) and all(isinstance(c.operator, (cst.Is, cst.IsNot)) for c in node.comparisons):
            continue
        if isinstance(node, cst.Lambda):
            continue
        if isinstance(node, cst.Arg):
            stack.append(node.value)
            continue
        stack.extend(iter_children(node))


def _structural(expr: cst.BaseExpression) -> bool:
    """Whether `expr` computes a Python value from its inputs without array operations:
    names, attributes, subscripts, literals, arithmetic, and structural builtins."""
    for node in _subtree(expr):
        if isinstance(node, cst.Call):
            func = node.func
            if isinstance(func, cst.Name) and func.value in (_NEUTRAL_BUILTINS | _CONCRETE_BUILTINS | {"tuple", "list", "set", "frozenset", "dict", "zip", "enumerate", "reversed", "sum", "abs"}):
                continue
            if isinstance(func, cst.Attribute) and func.attr.value in _PURE_METHODS:
                continue
            return False
        if isinstance(node, (cst.Lambda, cst.Await, cst.Yield)):
            return False
    return True


def _strip_structural_call(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`enumerate(model.blocks)` / `zip(a, b)` / `reversed(x)` → their first argument."""
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value in (
        "enumerate", "zip", "reversed", "list", "tuple", "sorted", "iter",
    ) and expr.args:  # fmt: skip
        expr = expr.args[0].value
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in ("items", "values"):
        expr = expr.func.value
    return expr


def _text(node: cst.CSTNode) -> str:
    text = cst.Module([]).code_for_node(node)
    return text if len(text) <= 40 else text[:37] + "..."
