"""Whether a function of another module of the project runs under jit as it is, and which of
its parameters jit must take as Python values, read from the `ast` the project summaries parse.

missing-jit reads a function of the file it lints with `_jittability` (libcst): a step
whose array work goes through a function of the file is jittable when that function is. A step
that calls an imported project function (`from model import apply_model`) needs the same answer
for a function it cannot read; `read` gives it, per top-level function, for the summaries
(`ModuleFacts.traceable`), and `Project.traceable` joins what each function calls across
modules. This reading is stricter than the rule's: whatever it does not know stops the answer.

A function is read as traceable when its body (nested functions and lambdas included) has no
`while`, `try`, `with`, `global`, `yield`, `await` or `del`; calls only JAX and the libraries
built on it (not a host copy), a few builtins, methods of arrays, functions of its own body,
the functions it is given (static: jit takes them as Python values) and other project
functions (each of which must be traceable: `calls`, `uses`); loops only over a `range` or
over what a parameter holds (a pytree's layers: unrolled); and sets no item or attribute of
what it is given. The parameters it reads where Python needs a value (an `if` test, `range`,
a slice bound, a shape argument, `in`, `and`/`or`/`not`) are static; a local read there must
be computed from parameters without array operations, or the answer is no.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from . import _jaxapi


__all__ = ["SHAPE_KEYWORDS", "SHAPE_POSITIONS", "Traceable", "read", "shape_positions"]

# Keyword arguments of jnp/lax/random functions that take shapes, axes and counts.
SHAPE_KEYWORDS = frozenset(
    {"shape", "axis", "axes", "num_classes", "length", "k", "size", "num_segments", "total_repeat_length", "reps", "repeats", "new_sizes", "newshape", "num", "indices_or_sections", "dimension", "unroll"}
)  # fmt: skip
# Positional shape arguments: function (last segment) -> the positions that are shapes.
SHAPE_POSITIONS = {
    "zeros": (0,), "ones": (0,), "empty": (0,), "full": (0,), "eye": (0, 1), "identity": (0,),
    "arange": (0, 1, 2), "linspace": (2,), "reshape": (1, 2, 3, 4), "tile": (1,), "repeat": (1,),
    "one_hot": (1,), "split": (1,), "array_split": (1,), "broadcast_to": (1,), "top_k": (1,),
    "expand_dims": (1,), "squeeze": (1,), "moveaxis": (1, 2), "swapaxes": (1, 2), "roll": (1, 2),
    "normal": (1,), "uniform": (1,), "truncated_normal": (3,), "randint": (1,), "bernoulli": (2,),
    "categorical": (2,), "permutation": (1,), "choice": (1,), "fold_in": (1,), "split_key": (1,),
    "dynamic_slice": (2,), "dynamic_slice_in_dim": (2, 3), "iota": (1,), "broadcast_in_dim": (1, 2),
    "pad": (1,),  # `jnp.pad(x, pad_width)`
}  # fmt: skip
# Where a full name's shape positions differ from its last segment's (`lax.pad(x, value, config)`).
_FULL_NAME_POSITIONS = {"jax.lax.pad": (2,)}


def shape_positions(name: str) -> tuple[int, ...]:
    """The positions of the shape arguments of the JAX array operation `name` (resolved)."""
    found = _FULL_NAME_POSITIONS.get(name)
    return found if found is not None else SHAPE_POSITIONS.get(name.rsplit(".", 1)[-1], ())

# Libraries whose functions trace (what `_jittability` lets a function call).
_JAX_HEADS = ("jax.", "equinox.", "flax.", "optax.", "haiku.", "chex.", "einops.")
# Builtins: static whatever they are given; needing Python values; fine on traced values.
_NEUTRAL = frozenset({"len", "isinstance", "issubclass", "hasattr", "callable", "type", "id"})
_CONCRETE = frozenset({"range", "float", "int", "bool", "str", "min", "max", "any", "all", "sorted", "round"})
_TRACEABLE = frozenset({"tuple", "list", "dict", "zip", "enumerate", "reversed", "sum", "abs", "map", "getattr", "slice"})
_ERRORS = frozenset({"ValueError", "TypeError", "AssertionError", "KeyError", "RuntimeError", "IndexError", "NotImplementedError"})
# Attributes of an array that are Python values under a trace.
_STATIC_ATTRIBUTES = frozenset({"shape", "ndim", "dtype", "size"})
# Methods of arrays and read-only methods of containers: traceable.
_METHODS = frozenset(
    {
        "astype", "sum", "mean", "max", "min", "argmax", "argmin", "transpose", "swapaxes", "squeeze",
        "flatten", "ravel", "dot", "clip", "prod", "std", "var", "cumsum", "conj", "real", "imag",
        "take", "repeat", "all", "any", "set", "add", "multiply", "get", "T", "items", "keys", "values",
    }
)  # fmt: skip
_MUTATORS = frozenset({"append", "extend", "insert", "update", "setdefault", "pop", "add", "clear", "remove"})
_BLOCKING = (
    ast.While, ast.Try, ast.With, ast.AsyncWith, ast.AsyncFor, ast.Global, ast.Nonlocal,
    ast.Yield, ast.YieldFrom, ast.Await, ast.Delete,
)  # fmt: skip
_LOCAL = "*"  # an argument reads a local of the caller: no Python value known there


@dataclass(frozen=True)
class Traceable:
    """What `read` says of one function (see the module docstring)."""

    params: tuple[str, ...]
    statics: frozenset[str]
    # Project functions it calls, with what each argument reads: (callee, ((position or
    # keyword, the parameters it reads, `_LOCAL` among them for a local), ...)).
    calls: tuple[tuple[str, tuple[tuple[str, tuple[str, ...]], ...]], ...] = ()
    uses: tuple[str, ...] = ()  # project functions it hands on (to `vmap`, `scan`, a parameter)

    def encode(self) -> str:
        return json.dumps([list(self.params), sorted(self.statics), [[c, [list(a) for a in m]] for c, m in self.calls], list(self.uses)])

    @classmethod
    def decode(cls, text: str) -> Traceable | None:
        try:
            params, statics, calls, uses = json.loads(text)
            return cls(
                tuple(params), frozenset(statics),
                tuple((c, tuple((k, tuple(r)) for k, r in m)) for c, m in calls), tuple(uses),
            )  # fmt: skip
        except (ValueError, TypeError):
            return None


def read(
    function: ast.FunctionDef | ast.AsyncFunctionDef,
    resolve: Callable[[ast.expr], str | None],
    module_functions: Iterable[str],
    module: str,
) -> Traceable | None:
    """`function`'s answer, or None when it is not known to trace. `resolve` makes a name or
    attribute chain absolute through the module's imports; `module_functions` are the module's
    top-level functions (`module.name` for the project)."""
    if isinstance(function, ast.AsyncFunctionDef) or function.decorator_list:
        return None
    try:
        return _Reader(function, resolve, set(module_functions), module).run()
    except _Blocked:
        return None


class _Blocked(Exception):
    pass


class _Reader:
    def __init__(self, function: ast.FunctionDef, resolve: Callable[[ast.expr], str | None], functions: set[str], module: str) -> None:
        args = function.args
        if args.vararg is not None or args.kwarg is not None:
            raise _Blocked
        self.function = function
        self.resolve = resolve
        self.functions = functions
        self.module = module
        self.params = tuple(a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs))
        self.statics: set[str] = set()
        self.calls: list[tuple[str, tuple[tuple[str, tuple[str, ...]], ...]]] = []
        self.uses: set[str] = set()
        self.values: dict[str, list[ast.expr | None]] = {}  # local -> what it is bound to (None: unknown)
        self.safe: set[str] = set()  # range and enumerate counters: Python ints
        self.defs: set[str] = set()  # nested defs
        self._seen: set[str] = set()

    def run(self) -> Traceable:
        for node in ast.walk(self.function):
            if node is not self.function:
                self._bind(node)
        for node in ast.walk(self.function):
            if node is not self.function:
                self._inspect(node)
        return Traceable(self.params, frozenset(self.statics), tuple(self.calls), tuple(sorted(self.uses)))

    # -- bindings -------------------------------------------------------------------------

    def _bind(self, node: ast.AST) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.defs.add(node.name)
            if node.decorator_list:
                raise _Blocked
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            args = node.args
            for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg):
                if arg is not None:
                    self.values.setdefault(arg.arg, []).append(None)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                self._target(target, node.value)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and node.value is not None:
            self._target(node.target, node.value if isinstance(node, ast.AnnAssign) else None)
        elif isinstance(node, ast.NamedExpr):
            self._target(node.target, node.value)
        elif isinstance(node, (ast.For, ast.comprehension)):
            self._loop_target(node.target, node.iter)

    def _target(self, target: ast.expr, value: ast.expr | None) -> None:
        if isinstance(target, ast.Name):
            self.values.setdefault(target.id, []).append(value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self._target(element.value if isinstance(element, ast.Starred) else element, None)
        elif isinstance(target, (ast.Attribute, ast.Subscript)):
            root = _root(target)
            if root is None or root in self.params or root not in self.values:
                raise _Blocked  # it sets a part of what it is given, or of a global

    def _loop_target(self, target: ast.expr, iterable: ast.expr) -> None:
        func = _builtin(iterable)
        if func == "range":
            self.safe.update(_names_of(target))
            return
        if func == "enumerate" and isinstance(target, ast.Tuple) and len(target.elts) == 2:
            self.safe.update(_names_of(target.elts[0]))
            target = target.elts[1]
        for name in _names_of(target):
            self.values.setdefault(name, []).append(None)

    # -- reading ---------------------------------------------------------------------------

    def _inspect(self, node: ast.AST) -> None:
        if isinstance(node, _BLOCKING):
            raise _Blocked
        if isinstance(node, (ast.If, ast.IfExp, ast.Assert)):
            self._static(node.test)
        elif isinstance(node, ast.BoolOp):
            for value in node.values:
                self._static(value)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            self._static(node.operand)
        elif isinstance(node, ast.Compare):
            if any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops):
                for part in (node.left, *node.comparators):
                    self._static(part)
        elif isinstance(node, ast.Slice):
            for part in (node.lower, node.upper, node.step):
                if part is not None:
                    self._static(part)
        elif isinstance(node, ast.JoinedStr):
            for value in node.values:
                if isinstance(value, ast.FormattedValue):
                    self._static(value.value)
        elif isinstance(node, (ast.For, ast.comprehension)):
            self._iterable(node.iter)
        elif isinstance(node, ast.Call):
            self._call(node)

    def _iterable(self, iterable: ast.expr) -> None:
        """A loop unrolls under a trace: over a `range` of Python ints, or over what a
        parameter holds (its layers, its entries), possibly enumerated or zipped."""
        func = _builtin(iterable)
        if func == "range":
            return  # its arguments are static (`_call`)
        parts = iterable.args if func in ("enumerate", "zip", "reversed") and isinstance(iterable, ast.Call) else [iterable]
        for part in parts:
            if isinstance(part, ast.Call) and isinstance(part.func, ast.Attribute) and part.func.attr in ("items", "values", "keys"):
                part = part.func.value
            root = _root(part)
            if root is None or root not in self.params or root in self.values:
                raise _Blocked

    def _call(self, call: ast.Call) -> None:
        func = call.func
        if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
            raise _Blocked
        for arg in (*call.args, *(k.value for k in call.keywords)):
            self._handed(arg)
        if isinstance(func, ast.Name) and func.id in self.params and func.id not in self.values:
            self.statics.add(func.id)  # a function it is given: jit takes it as a Python value
            return
        if isinstance(func, ast.Name) and (func.id in self.defs or self._callable_local(func.id)):
            return
        if isinstance(func, ast.Name) and func.id not in self.values and func.id not in self.params:
            if func.id in self.functions and self.resolve(func) is None:
                self._project_call(f"{self.module}.{func.id}", call)
                return
            name = self.resolve(func)
            if name is None:
                self._builtin_call(func.id, call)
                return
            self._known(name, call)
            return
        if isinstance(func, ast.Attribute):
            name = self.resolve(func)
            if name is not None:
                self._known(name, call)
                return
            self._method(func, call)
            return
        if isinstance(func, ast.Call):  # `jax.vmap(f)(x)`, `jax.grad(loss)(params)`
            inner = self.resolve(func.func)
            if inner is not None and inner.startswith(_JAX_HEADS):
                return
        raise _Blocked

    def _handed(self, arg: ast.expr) -> None:
        """A function of the project handed to a call (`jax.vmap(step)`, `integrate(rhs, ...)`)
        runs there: it must trace too."""
        if isinstance(arg, ast.Name) and arg.id not in self.values and arg.id not in self.params and arg.id not in self.defs:
            if arg.id in self.functions and self.resolve(arg) is None:
                self.uses.add(f"{self.module}.{arg.id}")
                return
        if isinstance(arg, (ast.Name, ast.Attribute)) and _root(arg) not in self.values and _root(arg) not in self.params:
            name = self.resolve(arg)
            if name is not None and not name.startswith(_JAX_HEADS) and not name.startswith(("numpy.", "math.")):
                self.uses.add(name)

    def _builtin_call(self, name: str, call: ast.Call) -> None:
        if name in _NEUTRAL or name in _TRACEABLE or name in _ERRORS:
            return
        if name in _CONCRETE:
            for arg in (*call.args, *(k.value for k in call.keywords)):
                self._static(arg)
            return
        raise _Blocked  # print, open, a class or global jaxlint cannot see into

    def _known(self, name: str, call: ast.Call) -> None:
        if _jaxapi.is_host_copy(name) or name in ("jax.block_until_ready", "jax.effects_barrier", "jax.debug.print"):
            raise _Blocked
        if name.startswith(_JAX_HEADS):
            if _jaxapi.is_array_op(name):
                positions = shape_positions(name)
                for index, arg in enumerate(call.args):
                    if index in positions:
                        self._static(arg)
                for keyword in call.keywords:
                    if keyword.arg in SHAPE_KEYWORDS:
                        self._static(keyword.value)
            return
        if name.startswith("math."):
            for arg in call.args:
                self._static(arg)
            return
        if name in ("functools.partial", "typing.cast"):
            return
        if name.split(".", 1)[0] in _NOT_PROJECT:
            raise _Blocked  # numpy, a host library
        self._project_call(name, call)

    def _project_call(self, callee: str, call: ast.Call) -> None:
        reads: list[tuple[str, tuple[str, ...]]] = []
        for index, arg in enumerate(call.args):
            reads.append((str(index), self._reads(arg)))
        for keyword in call.keywords:
            reads.append((keyword.arg or "", self._reads(keyword.value)))
        self.calls.append((callee, tuple(reads)))

    def _reads(self, expr: ast.expr) -> tuple[str, ...]:
        """The parameters `expr` reads (`_LOCAL` for a local of the function), for the
        callee's static parameters to make static here."""
        found: set[str] = set()
        for node in _value_reads(expr):
            if node in self.params and node not in self.values:
                found.add(node)
            elif node in self.values and node not in self.safe:
                found.add(_LOCAL)
        return tuple(sorted(found))

    def _method(self, func: ast.Attribute, call: ast.Call) -> None:
        method = func.attr
        root = _root(func.value)
        if method in _jaxapi.HOST_METHODS or method in ("item", "tolist", "numpy", "block_until_ready", "copy_to_host_async"):
            raise _Blocked
        if isinstance(func.value, ast.Subscript) and isinstance(func.value.value, ast.Attribute) and func.value.value.attr == "at":
            return  # x.at[i].set(v)
        if method == "reshape":
            for arg in call.args:
                self._static(arg)
            return
        if method in _MUTATORS:
            if root is None or root in self.params or root not in self.values:
                raise _Blocked
            return
        if method in _METHODS:
            return
        raise _Blocked

    def _callable_local(self, name: str) -> bool:
        """A local bound only to a lambda, or to a call of JAX or `functools.partial`
        (`grad_fn = jax.value_and_grad(loss)`)."""
        values = self.values.get(name)
        if not values or name in self.params:
            return False
        for value in values:
            if isinstance(value, ast.Lambda):
                continue
            if isinstance(value, ast.Call):
                resolved = self.resolve(value.func)
                if resolved is not None and (resolved.startswith(_JAX_HEADS) or resolved == "functools.partial"):
                    continue
            return False
        return True

    def _static(self, expr: ast.expr) -> None:
        """`expr` needs a Python value: parameters it reads are static; a local must come from
        parameters without array operations; an array operation there stops the answer."""
        for node in ast.walk(expr):
            if isinstance(node, ast.Call):
                name = self.resolve(node.func)
                if name is not None and _jaxapi.is_array_op(name):
                    raise _Blocked
                if isinstance(node.func, ast.Attribute) and node.func.attr in _METHODS and node.func.attr not in ("get", "items", "keys", "values"):
                    raise _Blocked
        for name in _value_reads(expr):
            self._require(name)

    def _require(self, name: str) -> None:
        if name in self.safe or name in self._seen:
            return
        if name not in self.values:
            if name in self.params:
                self.statics.add(name)
            return  # a global or builtin: a constant to jit
        self._seen.add(name)
        if name in self.params:
            self.statics.add(name)
        for value in self.values[name]:
            if value is None or not _structural(value):
                raise _Blocked
            for inner in _value_reads(value):
                self._require(inner)


# Libraries no project function comes from: an unknown call of theirs stops the answer.
_NOT_PROJECT = frozenset(
    {
        "numpy", "scipy", "torch", "tensorflow", "os", "sys", "time", "json", "pickle", "logging", "random",
        "itertools", "collections", "re", "matplotlib", "tqdm", "wandb", "absl", "pandas", "pathlib",
        "typing", "dataclasses", "copy", "shutil", "warnings", "subprocess", "argparse", "functools", "jaxlib",
    }
)  # fmt: skip


def _root(expr: ast.expr) -> str | None:
    while isinstance(expr, (ast.Attribute, ast.Subscript)):
        expr = expr.value
    return expr.id if isinstance(expr, ast.Name) else None


def _builtin(expr: ast.expr) -> str | None:
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name):
        return expr.func.id
    return None


def _names_of(target: ast.expr) -> list[str]:
    return [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]


def _value_reads(expr: ast.expr) -> Iterable[str]:
    """Names whose values `expr` needs, skipping what is static on arrays anyway (`x.shape`,
    `len(x)`, `x is None`, `isinstance(x, ...)`) and lambdas."""
    stack: list[ast.AST] = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Name):
            yield node.id
        elif isinstance(node, ast.Attribute):
            if node.attr not in _STATIC_ATTRIBUTES:
                stack.append(node.value)
        elif isinstance(node, ast.Call):
            if not (isinstance(node.func, ast.Name) and node.func.id in _NEUTRAL):
                stack.extend(node.args)
                stack.extend(k.value for k in node.keywords)
                if not isinstance(node.func, ast.Name):
                    stack.append(node.func)
        elif isinstance(node, ast.Compare) and all(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops):
            continue
        elif not isinstance(node, ast.Lambda):
            stack.extend(ast.iter_child_nodes(node))


def _structural(expr: ast.expr) -> bool:
    """Whether `expr` computes a Python value from its inputs without array operations."""
    for node in ast.walk(expr):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in (_NEUTRAL | _CONCRETE | {"tuple", "list", "dict", "zip", "sum", "abs"}):
                continue
            return False
        if isinstance(node, (ast.Lambda, ast.Await, ast.Yield)):
            return False
    return True
