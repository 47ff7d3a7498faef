"""Which values live on the device, which loops send it work, and which calls are jitted.

Three questions several rules ask (host copies in loops, growing shapes, ragged batches,
missing jit, unsynced timing), answered once per file through `FileContext.device`:

- **Is this value on the device?** A must-analysis over the statements of each function (and
  of the module), in execution order, tracks the names that certainly hold device values: the
  results of JAX array operations (`jnp.*`, `jax.lax.*`, `jax.random.*`, `jax.device_put`),
  of jitted callables (`JitIndex`), of transformed calls (`jax.vmap(f)(x)`), of model calls
  (`model.apply(params, x)`, `state.apply_fn(...)`), of functions of the file that return
  such values, and anything computed from them (`x[i]`, `x + 1`, `x.sum()`, `out.logits`).
  At a merge (after an `if`, a loop, a `try`) a name is kept only if every path makes it a
  device value. Host conversions (`np.asarray(x)`, `float(x)`, `x.item()`, `jax.device_get`,
  NumPy functions, which convert their argument: `np.sum(x)`) and metadata (`x.shape`,
  `x.dtype`) give host values; an unknown call gives an unknown value, which is never taken
  for a device value: precision first.
- **Does this loop dispatch device work?** Some call or array expression in its body, run on
  each iteration, does one of the above.
- **Is this consumer jitted?** `consumer(call)` names the jit API compiling the callee and, when
  the function is defined in this file, its parameters.

Everything is computed lazily: a scope is analysed the first time a rule asks about a node in it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import libcst as cst

from . import _jaxapi
from ._nodes import assigns_name
from ._pytrees import subclasses_module
from ._scope import dotted_name, target_names
from ._walk import iter_children, walk_with_paths


if TYPE_CHECKING:
    from ._bindings import Binding
    from ._context import FileContext


__all__ = ["Consumer", "DeviceIndex", "Forward", "HostCopy", "HOST_ATTRIBUTES", "looks_like_variables"]

State = frozenset[str]
_EMPTY: State = frozenset()

# jit arguments that place the results: an identity function compiled with them moves data.
_PLACING = frozenset({"out_shardings", "in_shardings", "device", "backend"})
# Attributes of a jax.Array that are host metadata, not arrays.
HOST_ATTRIBUTES = frozenset(
    {"shape", "dtype", "ndim", "size", "nbytes", "itemsize", "sharding", "aval", "weak_type",
     "committed", "is_fully_addressable", "is_fully_replicated", "format", "layout"}
)  # fmt: skip
# Methods of a jax.Array whose result is a host value (or nothing).
_HOST_RESULT_METHODS = frozenset(
    {"item", "tolist", "tobytes", "__array__", "copy_to_host_async", "is_ready", "devices",
     "is_deleted", "delete", "on_device_size_in_bytes", "addressable_data", "unsafe_buffer_pointer",
     "__len__", "__bool__", "__float__", "__int__", "__index__", "__format__", "__str__", "__repr__"}
)  # fmt: skip
# Methods that copy a jax.Array to the host.
_HOST_COPY_METHODS = {"item": ".item()", "tolist": ".tolist()", "tobytes": ".tobytes()", "__array__": ".__array__()"}
# `jax.numpy` functions that return host metadata rather than arrays.
_JNP_HOST_RESULTS = frozenset(
    {"shape", "ndim", "size", "dtype", "result_type", "issubdtype", "isdtype", "iinfo", "finfo",
     "promote_types", "can_cast", "isscalar", "iscomplexobj", "isrealobj", "save", "savez", "load",
     "printoptions", "set_printoptions", "get_printoptions"}
)  # fmt: skip
# Calls that copy their array argument to the host: qualified name -> how it is spelled.
HOST_COPY_FUNCTIONS = {
    name: name.replace("numpy.", "np.", 1) for name in sorted(_jaxapi.HOST_COPIES)
}
# NumPy functions that do not read the data of their first argument: metadata, shapes and
# dtypes, creation from a shape (`np.zeros(n)`, `np.zeros_like(x)`), files and settings.
# Every other `numpy.<function>` (and `numpy.linalg.<function>`) given a device array first
# converts it to a NumPy array: an implicit host copy (`np.sum(x)`, `np.argmax(x, -1)`).
_NUMPY_NO_COPY = frozenset(
    {"shape", "ndim", "size", "dtype", "result_type", "issubdtype", "isdtype", "iinfo", "finfo",
     "promote_types", "can_cast", "min_scalar_type", "isscalar", "iscomplexobj", "isrealobj",
     "iterable", "typename", "obj2sctype", "sctype2char", "broadcast_shapes", "may_share_memory",
     "shares_memory", "zeros", "ones", "empty", "full", "zeros_like", "ones_like", "empty_like",
     "full_like", "arange", "linspace", "logspace", "geomspace", "eye", "identity", "indices",
     "tri", "save", "savez", "savez_compressed", "savetxt", "load", "loadtxt", "genfromtxt",
     "fromfile", "frombuffer", "fromiter", "fromfunction", "fromstring", "memmap", "vectorize",
     "frompyfunc", "printoptions", "set_printoptions", "get_printoptions", "seterr", "geterr",
     "errstate", "deprecate", "info", "source", "who", "lookfor", "set_string_function"}
)  # fmt: skip
_NUMPY_COPY_MODULES = ("numpy.", "numpy.linalg.")
# Builtins that convert a jax.Array to a Python value (and so wait for it and copy it).
HOST_CONVERSION_BUILTINS = _jaxapi.HOST_BUILTINS - {"print"}
# A range of integers as an array: scanned over, a run of step numbers.
_ARANGES = frozenset({"jax.numpy.arange", "numpy.arange"})
# Builtins whose result holds the device values of their arguments.
_PASSING_BUILTINS = frozenset({"list", "tuple", "reversed", "iter", "sum", "max", "min", "abs", "sorted", "next"})
_TREE_MAPS = frozenset({"jax.tree.map", "jax.tree_util.tree_map", "jax.tree_map", "equinox.filter"})
_TREE_LEAVES = frozenset(
    {"jax.tree.leaves", "jax.tree_util.tree_leaves", "jax.tree_leaves", "jax.tree.flatten",
     "jax.tree_util.tree_flatten", "jax.block_until_ready"}
)  # fmt: skip
# Libraries whose functions are not model code (never device results by the params heuristic).
_KNOWN_HOST_MODULES = frozenset(
    {"jax", "numpy", "math", "os", "sys", "json", "pickle", "time", "logging", "functools",
     "itertools", "collections", "typing", "builtins", "tensorflow", "torch", "pandas", "optax",
     "equinox", "flax", "haiku", "chex", "orbax", "absl", "tqdm", "wandb", "matplotlib",
     "dataclasses", "copy", "operator", "re", "string", "random", "enum", "pathlib", "datetime"}
)  # fmt: skip
# Libraries whose decorators keep a function's device results device results.
_KNOWN_DECORATOR_MODULES = frozenset({"jax", "functools", "typing", "equinox", "chex", "flax", "haiku", "abc"})
# `lax` loops run their body as one compiled program even when called outside jit.
_COMPILED_LOOPS = frozenset({"jax.lax.scan", "jax.lax.fori_loop", "jax.lax.while_loop", "jax.lax.map", "equinox.internal.scan"})
_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)
_SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda)
# What a flax/haiku `apply` takes first: variables, not a function (pandas `df.apply(fn)`).
_VARIABLES_HINTS = ("param", "variables", "state", "weights", "vars")


@dataclass(frozen=True)
class HostCopy:
    """A call that copies a value to the host: how it is spelled and what it copies."""

    call: cst.Call
    kind: str  # "np.asarray", "jax.device_get", ".item()", "float()", "print()", "np.sum"
    value: cst.BaseExpression
    # A NumPy function that converts its argument on the way (`np.sum(x)`, `np.argmax(x)`),
    # not a conversion spelled out.
    implicit: bool = False
    # Every value a call that shows text formats (`print(a, b)`, `"{} {}".format(a, b)`,
    # `bar.set_postfix(loss=a)`); empty for a copy of one value.
    shown: tuple[cst.BaseExpression, ...] = ()


@dataclass(frozen=True)
class Consumer:
    """A jitted callable a call goes to."""

    api: str  # the jit wrapper: "jax.jit", "equinox.filter_jit", ...
    function: cst.FunctionDef | None  # its definition, when it is in this file
    params: tuple[str, ...] | None  # its parameter names (None: unknown)


@dataclass(frozen=True)
class Forward:
    """A call of a function that hands what it is given, unchanged, to a jitted callable
    (`def fit(X, y): return normalize(X, y)` called as `fit(X, y)`), in this file or, through
    the project's summaries, in another module."""

    argument: cst.BaseExpression  # what the call passes for the parameter
    helper: cst.FunctionDef | None  # the function called, when it is in this file
    inner: str  # the jitted callable in its body that receives the parameter, as written there
    consumer: Consumer


@dataclass
class _Flow:
    """Device names before each statement of one scope."""

    before: dict[int, State] = field(default_factory=dict)
    returns: list[tuple[cst.Return, State, tuple[cst.CSTNode, ...]]] = field(default_factory=list)
    yields: bool = False


class DeviceIndex:
    """The device-value analysis of one file (see the module docstring)."""

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self._flows: dict[int, _Flow] = {}
        self._returns_device: dict[int, bool] = {}
        # def -> whether it returns device work it does not wait for (`_waits.returns_unwaited`)
        self.unwaited_returns: dict[int, bool] = {}
        self._defs: dict[int, dict[str, list[cst.FunctionDef]]] = {}
        self._runs_compiled: dict[tuple[int, int, bool], bool] = {}
        self._work_loops: dict[tuple[int, int], bool] = {}
        self._computes: dict[int, bool] = {}  # loop_computes, per loop

    # -- public questions -------------------------------------------------------------------

    def holds(self, expr: cst.BaseExpression, ancestors: Sequence[cst.CSTNode] | None = None) -> bool:
        """Whether `expr` certainly evaluates to a device array (or a container of some) where
        it stands. `ancestors` are `expr`'s (default: those of the node being visited)."""
        path = tuple(self.ctx.ancestors if ancestors is None else ancestors)
        return self._holds(expr, self.state_at(expr, path), path)

    def state_at(self, node: cst.CSTNode, ancestors: Sequence[cst.CSTNode]) -> State:
        """The names that certainly hold device values where `node` is evaluated."""
        path = tuple(ancestors)
        scope_index = _scope_index(path)
        scope = path[scope_index] if scope_index >= 0 else self.ctx.module
        if isinstance(scope, cst.ClassDef):
            return _EMPTY
        flow = self._flow(scope, path[:scope_index] if scope_index >= 0 else ())
        state = _EMPTY
        start = scope_index + 1 if scope_index >= 0 else 0
        chain = (*path, node)
        for index in range(len(chain) - 1, start - 1, -1):
            found = flow.before.get(id(chain[index]))
            if found is not None:
                state = found
                start = index
                break
        # Comprehension targets and lambda parameters between the statement and the node.
        for index in range(start, len(chain) - 1):
            outer, inner = chain[index], chain[index + 1]
            if isinstance(outer, _COMPREHENSIONS) and inner is not outer.for_in:
                state = self._comprehension_state(outer, state, chain[: index + 1])
            elif isinstance(outer, cst.CompFor) and inner is not outer.iter:
                state = self._bind_for(outer.target, outer.iter, state, chain[:index])
            elif isinstance(outer, cst.Lambda) and inner is outer.body:
                state = state - set(_lambda_params(outer))
        return state

    def loop_dispatches(
        self,
        loop: cst.CSTNode,
        ancestors: Sequence[cst.CSTNode] | None = None,
        *,
        calls_only: bool = False,
        compiled: bool = False,
        models: bool = False,
        besides: cst.Call | None = None,
        outside: cst.CSTNode | None = None,
    ) -> bool:
        """Whether each iteration of `loop` (a `for`/`while` or a comprehension) runs code that
        sends work to the device. `ancestors` are `loop`'s (default: the visited node's).
        With `calls_only`, only calls of compiled or model code count (a jitted function, a
        transformed function, `model.apply`, a function of the file returning device
        values), not single eager ops (`jnp.sin(x)`, `x[i]`, `x + 1`). With `compiled`, only
        calls that run compiled code count (`runs_compiled`), and with `models` too, a model's
        forward pass, compiled or not. `besides`: a call of the loop that does not count (the
        one a rule asks about: is there compiled work beside it?); `outside`: a node of the
        loop none of whose subtree counts (is there device work besides a copy's own ops?)."""
        path = tuple(self.ctx.ancestors if ancestors is None else ancestors)
        for node, node_path in _per_iteration(loop, path, outside):
            if node is besides:
                continue
            if compiled:
                if isinstance(node, cst.Call) and self.runs_compiled(node, node_path, models=models):
                    return True
            elif calls_only:
                if isinstance(node, cst.Call) and self._compiled_call(node, node_path):
                    return True
            elif self.dispatches_here(node, node_path):
                return True
        return False

    def loop_computes(self, loop: cst.CSTNode, ancestors: Sequence[cst.CSTNode]) -> bool:
        """Whether each iteration of `loop` (whose ancestors are `ancestors`) runs work whose
        device time a wait exposes: compiled code or a model's forward pass
        (`loop_dispatches(compiled=True, models=True)`: a jitted step, a `lax` loop,
        `model.apply(params, x)`, or a function of the file that makes such a call), a call
        of a Module (`model(x)` with `model = eqx.nn.MLP(...)`), or a call given one
        (`loss_fn(model, batch)`: `_pytrees.classify`), or a library call that runs compiled
        work (`runs_library_step`: `solver.update(w, state)` of jaxopt). A loop of eager ops
        only (`jnp` calls, an unjitted `grad` of a function of them) is bound by Python
        dispatching them one by one: the device keeps up, and a wait there holds up the last
        op, not a step. Computed once per loop (every copy in it asks)."""
        cached = self._computes.get(id(loop))
        if cached is None:
            cached = self._computes[id(loop)] = self._loop_computes(loop, tuple(ancestors))
        return cached

    def _loop_computes(self, loop: cst.CSTNode, path: tuple[cst.CSTNode, ...]) -> bool:
        from ._pytrees import Value, classify

        if self.loop_dispatches(loop, path, compiled=True, models=True):
            return True
        models = (Value.MODULE, Value.NNX)
        for node, node_path in _per_iteration(loop, path):
            if not isinstance(node, cst.Call):
                continue
            inside = (*node_path, node)
            if self.runs_library_step(node, node_path):
                return True
            if classify(self.ctx, node.func, inside) in models:
                return True
            if any(not a.star and classify(self.ctx, a.value, (*inside, a)) in models for a in node.args):
                return True
        return False

    def works_besides(self, loop: cst.CSTNode, ancestors: Sequence[cst.CSTNode], node: cst.CSTNode) -> bool:
        """Whether each iteration of `loop` (whose ancestors are `ancestors`) may send work to
        the device outside `node`'s subtree: a dispatch there (as `loop_dispatches` reads
        one), or a call of a function or method of this file, which may do array work the
        index does not see (`out = forward(layers, batch)`). Calls that contain `node` count
        only as themselves (`save(i, np.array(images[i]))`)."""
        for inner, inner_path in _per_iteration(loop, tuple(ancestors), node):
            if self.dispatches_here(inner, inner_path):
                return True
            if not isinstance(inner, cst.Call):
                continue
            func = inner.func
            if isinstance(func, cst.Name) and self.ctx.resolve(func, inner_path, anchor=inner) is None:
                found = self._local_def(func.value, inner_path)
                if found is not None and found[0] is not None:
                    return True
            elif isinstance(func, cst.Attribute) and self.method_called(inner, inner_path) is not None:
                return True
        return False

    def runs_compiled(self, call: cst.Call, ancestors: Sequence[cst.CSTNode], depth: int = 0, *, models: bool = False) -> bool:
        """Whether `call` runs compiled device code: a jitted function (as the jit index knows
        it, imported ones included), a function wrapped where it is called (`jax.jit(f)(x)`),
        a `lax` loop (its body runs as one compiled program, jitted or not), or a function or
        method of this file that makes such a call itself. A loop that runs only eager ops
        (`jnp` calls, an unjitted `grad`) is bound by Python dispatching them one by one.
        `models`: a model's forward pass counts too, compiled or not (`model.apply(variables,
        x)`, `state.apply_fn(...)`, `jax.vmap(model)(x)`): big ops, whose device time a wait
        exposes."""
        path = tuple(ancestors)
        func = call.func
        if isinstance(func, cst.Call):
            wrapper = _jaxapi.decorator_target(func.func, lambda e: self.ctx.resolve(e, path, anchor=call))
            # `jax.vmap(model)(x)` batches a model's forward; `jax.grad(loss)(p)` is eager ops
            return wrapper in _jaxapi.JIT_WRAPPERS or (models and wrapper is not None and wrapper.endswith("vmap"))
        if models and _model_apply(call):
            return True
        if self.ctx.jit.callee(call, list(path)) is not None:
            return True
        name = self.ctx.resolve(func, path, anchor=call)
        if name in _COMPILED_LOOPS:
            return True
        if depth >= 2 or name is not None:
            return False
        target: cst.FunctionDef | None = None
        scope_path: tuple[cst.CSTNode, ...] = ()
        if isinstance(func, cst.Name):
            found = self._local_def(func.value, path)
            if found is not None:
                target, scope_path = found
        elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
            target = _method_def(func.attr.value, path)
            scope_path = path
        if target is None:
            return False
        key = (id(target), depth, models)
        cached = self._runs_compiled.get(key)
        if cached is None:
            self._runs_compiled[key] = False  # recursion
            cached = any(
                isinstance(node, cst.Call) and self.runs_compiled(node, node_path, depth + 1, models=models)
                for node, node_path in _expressions(target.body, (*scope_path, target))
            )
            self._runs_compiled[key] = cached
        return cached

    def scans_steps(self, call: cst.Call, ancestors: Sequence[cst.CSTNode]) -> bool:
        """Whether `call` is a `jax.lax.scan` over no data run for a count of steps
        (`lax.scan(train_step, carry, None, length=log_interval)`) or over step numbers
        (`jnp.arange(c * log_every, (c + 1) * log_every)`, inline or assigned just before) or
        over a key per step (`keys[1:]` with `keys = jax.random.split(rng, num_steps + 1)`):
        a chunk of steps run as one compiled loop, unless the count is known to be few. A
        scan over other `xs` (a sequence, a batch) is one pass over that data."""
        from ._frequency import FEW, integer_value, items_count, reaching_value

        path = [*ancestors, call]
        if self.ctx.resolve(call.func, tuple(ancestors), anchor=call) != "jax.lax.scan":
            return False
        length = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "length"), None)
        xs = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "xs"), None)
        positional = [a.value for a in call.args if a.keyword is None and not a.star]
        if xs is None and len(positional) >= 3:
            xs = positional[2]
        if xs is None or (isinstance(xs, cst.Name) and xs.value == "None"):
            if length is None:
                return False
            count = integer_value(self.ctx, length, path)
            return count is None or count > FEW
        # `lax.scan(step, carry, jnp.arange(start, start + log_every))`: over step numbers;
        # `lax.scan(step, carry, keys[1:])` with `keys = jax.random.split(rng, num_steps + 1)`:
        # over a key per step
        while isinstance(xs, cst.Subscript):
            xs = xs.value
        steps = reaching_value(xs.value, path) if isinstance(xs, cst.Name) else xs
        if not isinstance(steps, cst.Call):
            return False
        maker = self.ctx.resolve(steps.func, tuple(path), anchor=steps)
        if maker in _ARANGES:
            count = items_count(self.ctx, steps, path)
        elif maker == "jax.random.split":
            number = [a.value for a in steps.args if a.keyword is None and not a.star][1:2] or [
                a.value for a in steps.args if a.keyword is not None and a.keyword.value == "num"
            ]
            if not number:
                return False  # `split(key)`: two keys
            count = integer_value(self.ctx, number[0], path)
        else:
            return False
        return count is None or count > FEW

    def amortized(
        self, loop: cst.CSTNode, loop_path: Sequence[cst.CSTNode], path: Sequence[cst.CSTNode], *, spelled: bool = False
    ) -> bool:
        """Whether each iteration of `loop` (whose ancestors are `loop_path`) also runs an
        inner loop that sends device work, not around the node whose ancestors are `path`: an
        epoch loop around a batch loop, a rollout of env steps before each update; in the
        loop's body or in a function of the file that every iteration calls (a training run
        per round: `runs_work_loop`; not one some iterations call, `if step % 500 == 0:
        evaluate(...)`). A cost paid once per iteration of `loop` is paid once per such inner
        loop, next to all of its steps: not the bottleneck. `spelled`: only a Python loop
        spelled in `loop`'s body counts, whose steps each dispatch from Python (not one compiled
        call that scans many steps): for a cost counted in dispatches, such as an eager
        function's."""
        from ._guards import thinning_guard

        inside = {id(n) for n in path}
        for node, node_path in walk_with_paths(loop, list(loop_path)):
            if node is loop or id(node) in inside:
                continue
            if isinstance(node, (cst.For, cst.While)) and self.loop_dispatches(node, node_path):
                return True
            if isinstance(node, cst.Call) and not spelled and self.runs_work_loop(node, node_path):
                if thinning_guard(self.ctx, [*node_path, node], loop, counter=True) is None:
                    return True
        return False

    def runs_work_loop(self, call: cst.Call, ancestors: Sequence[cst.CSTNode], depth: int = 0) -> bool:
        """Whether `call` runs a function of this file (a `def` it can see, or a method
        called on `self`), or one that such a function calls, whose body has a loop that runs
        many times (`_frequency.loop_runs`: over data or steps, not a model's layers or a
        short table) and sends work to the device on each iteration: a training run, an
        evaluation over a data set; also a `lax.scan` of many steps (`scans_steps`), made here
        or in a jitted function of the file it calls (`run_chunk = jax.jit(run_many)`), and a
        library's whole solve or sampling run (`runs_solver`). A cost paid once per `call` is
        paid once per such loop."""
        from ._frequency import Often, loop_runs

        path = tuple(ancestors)
        if self.scans_steps(call, path) or self.runs_solver(call, path):
            return True
        func = call.func
        target: cst.FunctionDef | None = None
        scope_path: tuple[cst.CSTNode, ...] = ()
        if isinstance(func, cst.Name):
            if self.ctx.resolve(func, path, anchor=call) is not None:
                return False
            found = self._local_def(func.value, path)
            if found is not None:
                target, scope_path = found
            elif self.ctx.jit.callee(call, list(path)) is not None:
                target = self._jitted_def(func.value, path)  # `run_chunk = jax.jit(run_many)`
                scope_path = (self.ctx.module,)
        elif isinstance(func, cst.Attribute):
            # `self.fit(...)`, or `model.fit(...)` on an instance of a class of the file
            method = self.method_called(call, path)
            if method is not None:
                target, scope_path = method
        if target is None or not isinstance(target.body, cst.IndentedBlock):
            return False
        if self.is_traced((*scope_path, target, target.body)):
            # A jitted function's Python loop unrolls into the one program each call runs; a
            # `lax.scan` over many steps in it is a chunk of steps run per call.
            return any(
                isinstance(node, cst.Call) and self.scans_steps(node, node_path)
                for node, node_path in _expressions(target.body, (*scope_path, target))
            )
        key = (id(target), depth)
        cached = self._work_loops.get(key)
        if cached is not None:
            return cached
        self._work_loops[key] = False  # recursion
        inside = (*scope_path, target)
        cached = False
        for node, node_path in _expressions(target.body, inside):
            if isinstance(node, (cst.For, cst.While)):
                if loop_runs(self.ctx, node, node_path, calls=True).often is Often.MANY and self.loop_dispatches(node, node_path):
                    cached = True
                    break
            elif isinstance(node, cst.Call) and depth < 1 and self.runs_work_loop(node, node_path, depth + 1):
                cached = True
                break
        self._work_loops[key] = cached
        return cached

    def _compiled_call(self, call: cst.Call, path: tuple[cst.CSTNode, ...]) -> bool:
        func = call.func
        if isinstance(func, cst.Call):
            wrapper = _jaxapi.decorator_target(func.func, lambda e: self.ctx.resolve(e, path, anchor=call))
            return wrapper in _jaxapi.JIT_WRAPPERS or wrapper in _jaxapi.TRANSFORMS
        if self.ctx.jit.callee(call, list(path)) is not None:
            return True
        if isinstance(func, cst.Attribute):
            return _model_apply(call)
        if isinstance(func, cst.Name) and self.ctx.resolve(func, path, anchor=call) is None:
            target = self._local_def(func.value, path)
            return target is not None and target[0] is not None and self.returns_device(target[0], target[1])
        return False

    def dispatches_here(self, node: cst.CSTNode, ancestors: Sequence[cst.CSTNode]) -> bool:
        """Whether evaluating `node` itself (not its children) sends work to the device: a
        dispatching call, or indexing / arithmetic on a device value."""
        path = tuple(ancestors)
        if isinstance(node, cst.Call):
            return self._call_holds(node, self.state_at(node, path), path, dispatch=True)
        if isinstance(node, cst.Subscript):
            return not _container_lookup(node, path) and self._holds(node.value, self.state_at(node, path), path)
        if isinstance(node, cst.BinaryOperation):
            state = self.state_at(node, path)
            return self._holds(node.left, state, path) or self._holds(node.right, state, path)
        return False

    def host_copy(self, call: cst.Call, ancestors: Sequence[cst.CSTNode] | None = None) -> HostCopy | None:
        """`call` as a copy to the host (`np.asarray(x)`, `x.item()`, `float(x)`,
        `jax.device_get(x)`, or a NumPy function of `x`: `np.sum(x)`, `np.argmax(x, -1)`,
        `HostCopy.implicit`), whatever `x` holds; None for any other call."""
        path = tuple(self.ctx.ancestors if ancestors is None else ancestors)
        func = call.func
        name = self.ctx.resolve(func, path, anchor=call)
        if name is not None:
            if not call.args or call.args[0].star or call.args[0].keyword is not None:
                return None
            kind = HOST_COPY_FUNCTIONS.get(name) or (name if name in _jaxapi.HOST_COPIES else None)  # extend-host-copies
            if kind is not None:
                return HostCopy(call, kind, call.args[0].value)
            if _numpy_reads_data(name):
                return HostCopy(call, name.replace("numpy.", "np.", 1), call.args[0].value, implicit=True)
            return None
        if isinstance(func, cst.Attribute):
            kind = _HOST_COPY_METHODS.get(func.attr.value)
            if kind is not None and not call.args:
                return HostCopy(call, kind, func.value)
            method = func.attr.value
            if method == "format" and isinstance(func.value, (cst.SimpleString, cst.ConcatenatedString)):
                shown = tuple(a.value for a in call.args if not a.star)  # `"{:.3f}".format(loss)`
            elif method in _jaxapi.DISPLAY_METHODS:
                shown = _shown_values(call)  # `bar.set_postfix(loss=loss)`
            else:
                return None
            return HostCopy(call, f".{method}()", shown[0], shown=shown) if shown else None
        if (
            isinstance(func, cst.Name)
            and func.value in HOST_CONVERSION_BUILTINS | {"print"}
            and self._is_builtin(func.value, call, path)
            and len(call.args) >= 1
            and not call.args[0].star
            and call.args[0].keyword is None
        ):
            if func.value != "print" and len(call.args) != 1:
                return None
            if func.value == "print":
                shown = tuple(a.value for a in call.args if a.keyword is None and not a.star)
                return HostCopy(call, "print()", call.args[0].value, shown=shown)
            return HostCopy(call, f"{func.value}()", call.args[0].value)
        return None

    def consumer(
        self, call: cst.Call, ancestors: Sequence[cst.CSTNode] | None = None, *, instances: bool = False
    ) -> Consumer | None:
        """The jitted callable `call` goes to, or None when it is not known to be jitted.
        `instances`: also a jitted method called on an instance of a class (`instance_jit`)."""
        path = tuple(self.ctx.ancestors if ancestors is None else ancestors)
        func = call.func
        if isinstance(func, cst.Call):
            api = _jaxapi.decorator_target(func.func, lambda e: self.ctx.resolve(e, path, anchor=call))
            if api not in _jaxapi.JIT_WRAPPERS:
                return None
            wrapped = func.args[0].value if func.args and func.args[0].keyword is None else None
            found = self._local_def(wrapped.value, path) if isinstance(wrapped, cst.Name) else None
            target = found[0] if found is not None else None
            return Consumer(api, target, _params(target))
        api = self.ctx.jit.callee(call, list(path))
        if api is None and instances:
            api = self.instance_jit(call, path)
            return Consumer(api, None, None) if api is not None else None
        if api is None:
            return None
        if isinstance(func, cst.Attribute):
            target = _method_def(func.attr.value, path)
        else:
            assert isinstance(func, cst.Name)
            target = self._jitted_def(func.value, path)
        return Consumer(api, target, _params(target))

    def instance_jit(self, call: cst.Call, ancestors: Sequence[cst.CSTNode]) -> str | None:
        """The jit API compiling `holder.method(...)` where `holder` holds an instance of a
        class whose `method` is jitted: a name its scope binds, every time, to a call of such
        a class (`trainer = Trainer(cfg); trainer.step(state, batch)`), or `self.attr` that
        the enclosing class's methods set, every time, to one (`self.model = Model(cfg)` in
        `__init__`, one class per branch: each must jit the method). The class is one of this
        file (the method jitted in its body, else in a base) or of another module of the
        project (`Project.jitted_method`, through its bases). None when any is not known."""
        func = call.func
        if not isinstance(func, cst.Attribute):
            return None
        made = self._instances(func.value, tuple(ancestors))
        if not made:
            return None
        apis = [self._class_jit(cls, func.attr.value, at, call, 0) for cls, at in made]
        return apis[0] if all(apis) else None

    def method_called(
        self, call: cst.Call, ancestors: Sequence[cst.CSTNode]
    ) -> tuple[cst.FunctionDef, tuple[cst.CSTNode, ...]] | None:
        """The `def` that `holder.method(...)` runs, when it is a method of a class of this
        file: `self.method(...)` in the class (the innermost one), or `holder` a name (or
        `self.attr`) every binding of which makes an instance of one class of the file that
        defines `method` in its body or in a base class of the file. With the path to the
        method's class body. None when not known."""
        func = call.func
        if not isinstance(func, cst.Attribute):
            return None
        method = func.attr.value
        holder = func.value
        if isinstance(holder, cst.Name) and holder.value == "self":
            index = next((i for i in range(len(ancestors) - 1, -1, -1) if isinstance(ancestors[i], cst.ClassDef)), None)
            if index is None:
                return None
            owner = ancestors[index]
            assert isinstance(owner, cst.ClassDef)
            return self._class_method(owner, tuple(ancestors[:index]), method, 0)
        made = self._instances(holder, tuple(ancestors))
        if not made:
            return None
        found: tuple[cst.FunctionDef, tuple[cst.CSTNode, ...]] | None = None
        for cls, at in made:
            if not isinstance(cls, cst.Name):
                return None
            bindings = self.ctx.bindings.of(cls.value, [*at, cls])
            if len(bindings) != 1 or not isinstance(bindings[0].node, cst.ClassDef):
                return None
            this = self._class_method(bindings[0].node, tuple(bindings[0].path), method, 0)
            if this is None or (found is not None and this[0] is not found[0]):
                return None
            found = this
        return found

    def _class_method(
        self, owner: cst.ClassDef, outer: tuple[cst.CSTNode, ...], method: str, depth: int
    ) -> tuple[cst.FunctionDef, tuple[cst.CSTNode, ...]] | None:
        """`def method` of the class `owner` (whose ancestors are `outer`), or of a base class
        of this file it inherits it from."""
        if depth > 8 or not isinstance(owner.body, cst.IndentedBlock):
            return None
        for statement in owner.body.body:
            if isinstance(statement, cst.FunctionDef) and statement.name.value == method:
                return statement, (*outer, owner, owner.body)
        for base in owner.bases:
            if not isinstance(base.value, cst.Name):
                continue
            bindings = self.ctx.bindings.of(base.value.value, [*outer, owner])
            if len(bindings) == 1 and isinstance(bindings[0].node, cst.ClassDef):
                found = self._class_method(bindings[0].node, tuple(bindings[0].path), method, depth + 1)
                if found is not None:
                    return found
        return None

    def runs_solver(self, call: cst.Call, ancestors: Sequence[cst.CSTNode]) -> bool:
        """Whether `call` runs a library's whole solve, simulation or sampling run
        (`library.toml`'s `solver-runs`): `diffrax.diffeqsolve(...)`, or `solver.run(x0)` where
        every binding of `solver` calls a solver class (`solver = jaxopt.LBFGS(fun)`)."""
        return self._library_call(call, ancestors, _jaxapi.is_solver_run)

    def runs_library_step(self, call: cst.Call, ancestors: Sequence[cst.CSTNode]) -> bool:
        """Whether `call` runs compiled work that a library jits itself: a whole run
        (`runs_solver`) or one step of a solver (`solver.update(w, state)` with `solver =
        jaxopt.GradientDescent(fun)`: `library.toml`'s `compiled-steps`)."""
        return self._library_call(call, ancestors, _jaxapi.is_compiled_step)

    def _library_call(self, call: cst.Call, ancestors: Sequence[cst.CSTNode], matches: Callable[[str], bool]) -> bool:
        path = tuple(ancestors)
        name = self.ctx.resolve(call.func, path, anchor=call)
        if name is not None:
            return matches(name)
        func = call.func
        if not isinstance(func, cst.Attribute):
            return False
        makers = self.makers(func.value, path)
        return bool(makers) and all(m is not None and matches(f"{m}.{func.attr.value}") for m in makers)

    def makers(self, holder: cst.BaseExpression, path: Sequence[cst.CSTNode]) -> list[str | None] | None:
        """The qualified name of what each binding of `holder` calls to make it (`env =
        gym.make(name)`: `gym.make`; None for a callee that is not an imported name); None
        when one binding is not a call (`made_from`)."""
        made = self.made_from(holder, tuple(path))
        if made is None:
            return None
        return [self.ctx.resolve(maker, list(where), anchor=maker) for maker, where in made]

    def made_from(
        self, holder: cst.BaseExpression, path: tuple[cst.CSTNode, ...]
    ) -> list[tuple[cst.BaseExpression, tuple[cst.CSTNode, ...]]] | None:
        """What each binding of `holder` (a name, or `self.attr` set by the class's methods)
        calls to make it, with where to read that callee (`env = gym.make(name)`: `gym.make`);
        None when one binding is not a call. `path`: the ancestors of the expression reading
        `holder`."""
        return self._instances(holder, path)

    def _instances(
        self, holder: cst.BaseExpression, path: tuple[cst.CSTNode, ...], depth: int = 0
    ) -> list[tuple[cst.BaseExpression, tuple[cst.CSTNode, ...]]] | None:
        """The classes `holder` is made from (what each of its bindings calls, and where to
        read that), or None when one binding is not a call."""
        from ._bindings import Kind

        calls: list[tuple[cst.BaseExpression, tuple[cst.CSTNode, ...]]] = []
        if isinstance(holder, cst.Name) and holder.value not in ("self", "cls"):
            for binding in self.ctx.bindings.of(holder.value, [*path, holder]):
                if binding.kind is Kind.PARAM and depth < 4:
                    # `def rollout(params, env):` called as `rollout(p, env)` with `env =
                    # gym.make(name)`: what every call of the file passes makes the parameter.
                    passed = self._passed_instances(binding, depth)
                    if passed is None:
                        return None
                    calls.extend(passed)
                    continue
                if binding.kind is not Kind.ASSIGN or not isinstance(binding.value, cst.Call):
                    return None
                calls.append((binding.value.func, (*binding.path, binding.node)))
            return calls
        if not isinstance(holder, cst.Attribute):
            return None
        bindings = self.ctx.bindings.of_attribute(holder, path)  # `self.env = gym.make(name)`
        if bindings is None:
            return None
        for binding in bindings:
            if binding.value is None and isinstance(binding.path[-1], cst.SimpleStatementLine) and isinstance(binding.path[-3], cst.ClassDef):
                continue  # a field's declaration (`env: Env`), not a value
            if binding.kind is not Kind.ASSIGN or binding.source is not None or not isinstance(binding.value, cst.Call):
                return None
            calls.append((binding.value.func, (*binding.path, binding.node)))
        return calls

    def _passed_instances(self, binding: Binding, depth: int) -> list[tuple[cst.BaseExpression, tuple[cst.CSTNode, ...]]] | None:
        """What makes a parameter: the classes of what every call of its function in the file
        passes for it (a call made there, or a name made so); None when a call passes
        something else, leaves the default, or a caller may be elsewhere (`parameter_calls`)."""
        from ._callgraph import parameter_calls

        found = parameter_calls(self.ctx, binding.node, binding.path)
        if found is None:
            return None
        calls: list[tuple[cst.BaseExpression, tuple[cst.CSTNode, ...]]] = []
        for argument, where in found[1]:
            if isinstance(argument, cst.Call):
                calls.append((argument.func, tuple(where)))
                continue
            if not isinstance(argument, cst.Name):
                return None
            made = self._instances(argument, tuple(where), depth + 1)
            if not made:
                return None
            calls.extend(made)
        return calls

    def _class_jit(
        self, cls: cst.BaseExpression, method: str, path: tuple[cst.CSTNode, ...], anchor: cst.CSTNode, depth: int
    ) -> str | None:
        """The jit API of `method` of the class `cls` names (read at the end of `path`)."""
        if depth > 8:
            return None
        if isinstance(cls, cst.Name):
            bindings = self.ctx.bindings.of(cls.value, [*path, cls])
            if len(bindings) == 1 and isinstance(bindings[0].node, cst.ClassDef):
                node = bindings[0].node
                if any(isinstance(s, cst.FunctionDef) and s.name.value == method for s in node.body.body):
                    return self.ctx.jit._scoped.get((id(node), method)) or None
                at = (*bindings[0].path, node)
                return next(
                    (api for base in node.bases if (api := self._class_jit(base.value, method, at, node, depth + 1))), None
                )
        project = self.ctx.project
        name = self.ctx.resolve(cls, list(path), anchor=anchor) if project is not None else None
        if project is None or name is None:
            return None
        return project.jitted_method(name, method, self.ctx.module_name)

    def looped_consumer(
        self,
        call: cst.Call,
        loop_types: tuple[type[cst.CSTNode], ...] = (cst.For, cst.While),
        *,
        instances: bool = False,
    ) -> tuple[Consumer, list[cst.CSTNode]] | None:
        """For the call being visited: its jitted callable and the enclosing loops of
        `loop_types` (outermost first), when the call passes arguments, runs in such a loop,
        is dispatched from eager code and is not test code; None otherwise. What the data-loop
        rules look at before asking what the loop feeds the call. `instances`: as for
        `consumer`."""
        if not call.args:
            return None
        loops = [loop for loop in self.ctx.loops(call) if isinstance(loop, loop_types)]
        if not loops:
            return None
        consumer = self.consumer(call, instances=instances)
        if consumer is None:
            return None
        ancestors = self.ctx.ancestors
        if not loops or self.is_traced(ancestors) or self.in_test(ancestors):
            return None
        return consumer, loops

    def looped_forwards(
        self, call: cst.Call, *, instances: bool = False
    ) -> tuple[list[Forward], list[cst.CSTNode]] | None:
        """For the call being visited, which is not itself of a jitted callable: what it hands
        through a function of this file to a jitted one (`forwards`), and the enclosing `for`
        and `while` loops, under the conditions of `looped_consumer`. `instances`: as for
        `consumer`, in the function's body."""
        if not call.args:
            return None
        loops = [loop for loop in self.ctx.loops(call) if isinstance(loop, (cst.For, cst.While))]
        ancestors = self.ctx.ancestors
        if not loops or self.consumer(call) is not None:
            return None
        forwards = self.forwards(call, ancestors, instances=instances)
        if not forwards or self.is_traced(ancestors) or self.in_test(ancestors):
            return None
        return forwards, loops

    def forwards(self, call: cst.Call, ancestors: Sequence[cst.CSTNode], *, instances: bool = False) -> list[Forward]:
        """The arguments `call` hands on to a jitted callable through the function it calls:
        a `def` of this file (or a method of the enclosing class, called on `self`) whose body
        passes the parameter, never reassigned, as it is to a jitted call of its own
        (`self.fit(X, y)` where `def fit(self, X, y): normalize(X, y, self.bounds)`), or a
        function of another module that does (`_imported_forwards`). What that jitted
        callable compiles for, the call's argument decides."""
        from ._callgraph import passed_argument, positional_params

        path = tuple(ancestors)
        func = call.func
        if isinstance(func, cst.Name):
            found = self._local_def(func.value, path)
            helper = found[0] if found is not None else None
            method = False
            if helper is None:
                return self._imported_forwards(call, path)
        elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
            helper = _method_def(func.attr.value, path)
            method = True
        else:
            return self._imported_forwards(call, path)
        known = self.ctx.calls.function(helper) if helper is not None else None
        if helper is None or known is None:
            return []
        positional = positional_params(helper)
        if method:
            if not positional or any(dotted_name(d.decorator) == "staticmethod" for d in helper.decorators):
                return []
            positional = positional[1:]  # `self`
        forwards: list[Forward] = []
        for site in known.body:
            if site.scope is not helper:
                continue  # a nested function's or lambda's call
            inner = self.consumer(site.call, site.path, instances=instances)
            if inner is None:
                continue
            for arg in site.call.args:
                value = arg.value
                if arg.star or not isinstance(value, cst.Name) or value.value not in positional:
                    continue
                if assigns_name(helper.body, value.value):
                    continue  # rebound in the body: not what the call hands in
                passed = passed_argument(call, value.value, positional)
                if passed is not None:
                    forwards.append(Forward(passed, helper, self.ctx.module.code_for_node(site.call.func), inner))
        return forwards

    def _imported_forwards(self, call: cst.Call, path: tuple[cst.CSTNode, ...]) -> list[Forward]:
        """`forwards` for a function of another module of the project (`from .model import
        next_token`; `model.next_token(...)`), as its summary says: the positional arguments
        of the call that it hands to a jitted callable."""
        project = self.ctx.project
        name = self.ctx.resolve(call.func, path, anchor=call) if project is not None else None
        if project is None or name is None:
            return []
        positional = []
        for arg in call.args:
            if arg.keyword is not None or arg.star:
                break
            positional.append(arg.value)
        return [
            Forward(positional[index], None, target.rsplit(".", 1)[-1], Consumer(api, None, None))
            for index, api, target in project.forwarded(name, self.ctx.module_name)
            if index < len(positional)
        ]

    def is_traced(self, ancestors: Sequence[cst.CSTNode] | None = None) -> bool:
        """Whether code at `ancestors` runs under a trace, so its calls are staged and host
        conversions are impossible: inside a jitted function (`JitIndex.is_traced`), a
        function handed to a JAX transformation (`lax.scan(body, ...)`, `jax.vmap(f)`,
        `jax.grad(loss)`), or a method of a Flax/Equinox/Haiku `Module` (through the classes
        of the file and the project it subclasses)."""
        path = list(self.ctx.ancestors if ancestors is None else ancestors)
        if self.ctx.jit.is_traced(path):
            return True
        transformed = self._transformed()
        for index, node in enumerate(path):
            if isinstance(node, cst.FunctionDef) and node.name.value in transformed:
                return True
            if isinstance(node, cst.ClassDef) and subclasses_module(self.ctx, node, path[:index], _MODULE_BASES, max_depth=8):
                return True
        return False

    def in_test(self, ancestors: Sequence[cst.CSTNode] | None = None) -> bool:
        """Whether code at `ancestors` is test code, which is no hot path (`_callgraph.in_test`:
        a test file or folder, a `test*` function, a method of a test class)."""
        from ._callgraph import in_test

        return in_test(self.ctx, list(self.ctx.ancestors if ancestors is None else ancestors))

    def _transformed(self) -> frozenset[str]:
        """Names of functions handed to a JAX transformation anywhere in the file."""
        cached = getattr(self, "_transformed_names", None)
        if cached is not None:
            return cached
        names: set[str] = set()
        for call, path in _all_calls(self.ctx.module):
            if not any(isinstance(a.value, cst.Name) for a in call.args):
                continue
            name = self.ctx.resolve(call.func, path, anchor=call)
            if name is None and isinstance(call.func, cst.Call):
                name = _jaxapi.decorator_target(call.func.func, lambda e, p=path, c=call: self.ctx.resolve(e, p, anchor=c))
            if name is None or not _is_transformation(name):
                continue
            names.update(a.value.value for a in call.args if isinstance(a.value, cst.Name))
        self._transformed_names: frozenset[str] = frozenset(names)
        return self._transformed_names

    def returns_device(self, function: cst.FunctionDef, ancestors: Sequence[cst.CSTNode]) -> bool:
        """Whether every `return` of `function` (defined in this file) gives a device value."""
        key = id(function)
        cached = self._returns_device.get(key)
        if cached is not None:
            return cached
        self._returns_device[key] = False  # recursion: assume not while computing
        if not self._keeps_results(function, ancestors):
            return False
        flow = self._flow(function, tuple(ancestors))
        result = (
            not flow.yields
            and bool(flow.returns)
            and all(
                ret.value is not None and self._holds(ret.value, state, path)
                for ret, state, path in flow.returns
            )
        )
        self._returns_device[key] = result
        return result

    def _keeps_results(self, function: cst.FunctionDef, ancestors: Sequence[cst.CSTNode]) -> bool:
        """Whether calling `function` runs its body and returns what it returns: it has no
        decorator but those of JAX, functools and the JAX libraries. An unknown decorator
        (`@utils.jit_cpu`, `@cached_to_disk`) may move, convert or replace the results."""
        if not function.decorators:
            return True
        info = self.ctx.function_info(function, list(ancestors))
        return all(
            name is not None and name.split(".", 1)[0] in _KNOWN_DECORATOR_MODULES for name in info.decorators
        )

    # -- the flow analysis ------------------------------------------------------------------

    def _flow(self, scope: cst.CSTNode, ancestors: tuple[cst.CSTNode, ...]) -> _Flow:
        flow = self._flows.get(id(scope))
        if flow is None:
            flow = self._flows[id(scope)] = _Flow()
            path = (*ancestors, scope)
            if isinstance(scope, cst.Module):
                self._block(flow, scope.body, _EMPTY, path)
            elif isinstance(scope, cst.FunctionDef):
                body = scope.body
                if isinstance(body, cst.IndentedBlock):
                    self._block(flow, body.body, _EMPTY, (*path, body))
                else:
                    self._block(flow, [body], _EMPTY, path)
        return flow

    def _block(self, flow: _Flow, statements: Sequence[cst.CSTNode], state: State, path: tuple[cst.CSTNode, ...]) -> State:
        for statement in statements:
            state = self._statement(flow, statement, state, path)
        return state

    def _suite(self, flow: _Flow, suite: cst.BaseSuite, state: State, path: tuple[cst.CSTNode, ...]) -> State:
        if isinstance(suite, cst.IndentedBlock):
            return self._block(flow, suite.body, state, (*path, suite))
        return self._block(flow, [suite], state, path)

    def _statement(self, flow: _Flow, node: cst.CSTNode, state: State, path: tuple[cst.CSTNode, ...]) -> State:
        flow.before[id(node)] = state
        inner = (*path, node)
        if isinstance(node, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
            for small in node.body:
                flow.before[id(small)] = state
                state = self._small(flow, small, state, inner)
            return state
        if isinstance(node, cst.If):
            then = self._suite(flow, node.body, state, inner)
            other = self._orelse(flow, node.orelse, state, inner)
            return then & other
        if isinstance(node, (cst.For, cst.While)):
            return self._loop(flow, node, state, path)
        if isinstance(node, (cst.Try, cst.TryStar)):
            body = self._suite(flow, node.body, state, inner)
            ends = []
            for handler in node.handlers:
                start = state & body
                if handler.name is not None:
                    start = start - set(target_names(handler.name.name))
                flow.before[id(handler)] = start
                ends.append(self._suite(flow, handler.body, start, (*inner, handler)))
            if node.orelse is not None:
                body = self._suite(flow, node.orelse.body, body, (*inner, node.orelse))
            end = body
            for other_end in ends:
                end = end & other_end
            if node.finalbody is not None:
                end = self._suite(flow, node.finalbody.body, end, (*inner, node.finalbody))
            return end
        if isinstance(node, cst.With):
            for item in node.items:
                if item.asname is not None:
                    state = state - set(target_names(item.asname.name))
            return self._suite(flow, node.body, state, inner)
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            return state - {node.name.value}
        if isinstance(node, cst.Match):
            end: State | None = None
            for case in node.cases:
                start = state - _match_names(case.pattern)
                flow.before[id(case)] = start
                case_end = self._suite(flow, case.body, start, (*inner, case))
                end = case_end if end is None else end & case_end
            return state if end is None else end & state
        return state

    def _orelse(self, flow: _Flow, orelse: cst.CSTNode | None, state: State, path: tuple[cst.CSTNode, ...]) -> State:
        if orelse is None:
            return state
        if isinstance(orelse, cst.If):
            return self._statement(flow, orelse, state, path)
        assert isinstance(orelse, cst.Else)
        return self._suite(flow, orelse.body, state, (*path, orelse))

    def _loop(self, flow: _Flow, loop: cst.For | cst.While, state: State, path: tuple[cst.CSTNode, ...]) -> State:
        inner = (*path, loop)
        head = state
        for _ in range(8):  # must-analysis: the head state only shrinks, so this converges
            flow.before[id(loop)] = head
            start = head
            if isinstance(loop, cst.For):
                start = self._bind_for(loop.target, loop.iter, head, inner)
                flow.before[id(loop.body)] = start
            end = self._suite(flow, loop.body, start, inner)
            new_head = state & end
            if new_head == head:
                break
            head = new_head
        if loop.orelse is not None:
            return self._suite(flow, loop.orelse.body, head, (*inner, loop.orelse))
        return head

    def _small(self, flow: _Flow, small: cst.CSTNode, state: State, path: tuple[cst.CSTNode, ...]) -> State:
        inner = (*path, small)
        if isinstance(small, cst.Expr):
            flow.yields = flow.yields or _has_yield(small.value)
            return state
        if isinstance(small, cst.Return):
            flow.returns.append((small, state, inner))
            if small.value is not None:
                flow.yields = flow.yields or _has_yield(small.value)
            return state
        if isinstance(small, cst.Assign):
            flow.yields = flow.yields or _has_yield(small.value)
            for target in small.targets:
                state = self._assign(target.target, small.value, state, inner)
            return state
        if isinstance(small, cst.AnnAssign):
            if small.value is None:
                return state
            return self._assign(small.target, small.value, state, inner)
        if isinstance(small, cst.AugAssign):
            if isinstance(small.target, cst.Name):
                name = small.target.value
                if name in state or self._holds(small.value, state, inner):
                    return state | {name}
            return state
        if isinstance(small, cst.Del):
            return state - set(target_names(small.target))
        if isinstance(small, (cst.Import, cst.ImportFrom)):
            names = small.names if isinstance(small.names, Sequence) else ()
            bound = {
                (a.asname.name.value if a.asname and isinstance(a.asname.name, cst.Name) else (dotted_name(a.name) or "").split(".")[0])
                for a in names
            }
            return state - bound
        return state

    def _assign(self, target: cst.BaseExpression, value: cst.BaseExpression, state: State, path: tuple[cst.CSTNode, ...]) -> State:
        if isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, (cst.Tuple, cst.List)):
            targets = [e.value for e in target.elements]
            values = [e.value for e in value.elements]
            if len(targets) == len(values) and not any(isinstance(e, cst.StarredElement) for e in (*target.elements, *value.elements)):
                device = [self._holds(v, state, path) for v in values]
                for t, d in zip(targets, device):
                    state = _set(state, target_names(t), d)
                return state
        if isinstance(target, (cst.Subscript, cst.Attribute)):
            return state
        return _set(state, target_names(target), self._holds(value, state, path))

    def _bind_for(self, target: cst.BaseExpression, iterable: cst.BaseExpression, state: State, path: tuple[cst.CSTNode, ...]) -> State:
        """The state inside a loop over `iterable` whose items are bound to `target`."""
        names = set(target_names(target))
        state = state - names
        parts = self._item_parts(iterable, state, path)
        if parts is None:
            return state
        if isinstance(target, (cst.Tuple, cst.List)) and isinstance(parts, list):
            elements = target.elements
            if len(elements) == len(parts) and not any(isinstance(e, cst.StarredElement) for e in elements):
                for element, device in zip(elements, parts):
                    state = _set(state, target_names(element.value), device)
                return state
            return state
        if parts is True:
            return state | names
        return state

    def _item_parts(self, iterable: cst.BaseExpression, state: State, path: tuple[cst.CSTNode, ...]) -> bool | list[bool] | None:
        """Whether the items of `iterable` are device values: True, a list for each position of
        a tuple item (`enumerate`, `zip`, `.items()`), or None when not known to be."""
        if isinstance(iterable, (cst.List, cst.Tuple, cst.Set)):
            items = [e.value for e in iterable.elements if isinstance(e, cst.Element)]
            if not items or len(items) != len(iterable.elements):
                return None
            if all(isinstance(i, cst.Tuple) for i in items):
                arity = {len(i.elements) for i in items}  # type: ignore[attr-defined]
                if len(arity) == 1:
                    return [
                        all(self._holds(i.elements[k].value, state, path) for i in items)  # type: ignore[attr-defined]
                        for k in range(arity.pop())
                    ]
            return True if all(self._holds(i, state, path) for i in items) else None
        if isinstance(iterable, cst.Call):
            func = iterable.func
            args = [a.value for a in iterable.args if a.keyword is None and not a.star]
            if isinstance(func, cst.Name) and self._is_builtin(func.value, iterable, path):
                if func.value == "enumerate" and args:
                    return [False, self._holds(args[0], state, path)]
                if func.value == "zip":
                    return [self._holds(a, state, path) for a in args]
                if func.value == "range":
                    return None
            if isinstance(func, cst.Attribute) and func.attr.value == "items" and not args:
                if self._holds(func.value, state, path):
                    return [False, True]
                return None
            if isinstance(func, cst.Attribute) and func.attr.value == "keys" and not args:
                return None
        return True if self._holds(iterable, state, path) else None

    def _comprehension_state(self, comp: cst.CSTNode, state: State, path: tuple[cst.CSTNode, ...]) -> State:
        for_in = comp.for_in  # type: ignore[attr-defined]
        while for_in is not None:
            state = self._bind_for(for_in.target, for_in.iter, state, path)
            for_in = for_in.inner_for_in
        return state

    # -- expressions --------------------------------------------------------------------------

    def _holds(self, expr: cst.CSTNode, state: State, path: tuple[cst.CSTNode, ...]) -> bool:
        if isinstance(expr, cst.Name):
            return expr.value in state
        if isinstance(expr, cst.Attribute):
            if expr.attr.value in HOST_ATTRIBUTES:
                return False
            return self._holds(expr.value, state, path)
        if isinstance(expr, cst.Subscript):
            return self._holds(expr.value, state, path)
        if isinstance(expr, cst.Call):
            return self._call_holds(expr, state, path)
        if isinstance(expr, cst.BinaryOperation):
            return self._holds(expr.left, state, path) or self._holds(expr.right, state, path)
        if isinstance(expr, cst.UnaryOperation):
            return not isinstance(expr.operator, cst.Not) and self._holds(expr.expression, state, path)
        if isinstance(expr, cst.Comparison):
            host_ops = (cst.Is, cst.IsNot, cst.In, cst.NotIn)
            if any(isinstance(c.operator, host_ops) for c in expr.comparisons):
                return False
            return self._holds(expr.left, state, path) or any(
                self._holds(c.comparator, state, path) for c in expr.comparisons
            )
        if isinstance(expr, cst.IfExp):
            return self._holds(expr.body, state, path) and self._holds(expr.orelse, state, path)
        if isinstance(expr, (cst.Tuple, cst.List, cst.Set)):
            return any(
                self._holds(e.value, state, path) for e in expr.elements if isinstance(e, cst.Element)
            )
        if isinstance(expr, cst.Dict):
            return any(
                self._holds(e.value, state, path) for e in expr.elements if isinstance(e, cst.DictElement)
            )
        if isinstance(expr, (cst.ListComp, cst.SetComp, cst.GeneratorExp)):
            inner = self._comprehension_state(expr, state, path)
            return self._holds(expr.elt, inner, (*path, expr))
        if isinstance(expr, cst.DictComp):
            inner = self._comprehension_state(expr, state, path)
            return self._holds(expr.value, inner, (*path, expr))
        if isinstance(expr, cst.NamedExpr):
            return self._holds(expr.value, state, path)
        return False

    def _call_holds(self, call: cst.Call, state: State, path: tuple[cst.CSTNode, ...], *, dispatch: bool = False) -> bool:
        """Whether `call` returns a device value (with `dispatch`: whether it sends work to
        the device; the two differ only for calls that pass device values through)."""
        ctx = self.ctx
        func = call.func
        name = ctx.resolve(func, path, anchor=call)
        args = [a.value for a in call.args if not a.star]
        if name is not None:
            if name.startswith("jax.numpy.") and name.rsplit(".", 1)[-1] in _JNP_HOST_RESULTS:
                return False
            if _jaxapi.is_array_op(name):
                return not name.rsplit(".", 1)[-1][:1].isupper()  # classes: lax.Precision, ...
            if name in _TREE_MAPS:
                return not dispatch and self._tree_map_holds(call, state, path)
            if name in _TREE_LEAVES:
                return not dispatch and bool(args) and self._holds(args[0], state, path)
            if name.split(".", 1)[0] in _KNOWN_HOST_MODULES:
                return False
            if ctx.project is not None and ctx.jit.callee(call, list(path)) is not None:
                return True  # a callable another module of the project jits
            if ctx.project is not None and ctx.project.returns_device(name, ctx.module_name):
                return True  # `loss = compute_loss(params, batch)` of another module
            return self._model_function_call(call, state, path)
        if isinstance(func, cst.Call):
            wrapper = _jaxapi.decorator_target(func.func, lambda e: ctx.resolve(e, path, anchor=call))
            return wrapper in _jaxapi.JIT_WRAPPERS or wrapper in _jaxapi.TRANSFORMS
        if ctx.jit.callee(call, list(path)) is not None:
            return True
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            if _model_apply(call):
                return True
            if method in _HOST_RESULT_METHODS or method in HOST_ATTRIBUTES:
                return False
            if self._holds(func.value, state, path):
                return not (dispatch and method in ("get", "block_until_ready", "values", "keys", "items"))
            if self._method_returns_device(call, path):
                return True  # `diag = model.diagnostics(y)`: a method whose returns are device values
            if method in ("get", "pop") and isinstance(func.value, cst.Name):
                return False
            return False
        if isinstance(func, cst.Name):
            if self._is_builtin(func.value, call, path):
                if func.value in _PASSING_BUILTINS:
                    return not dispatch and any(self._holds(a, state, path) for a in args)
                return False
            target = self._local_def(func.value, path)
            if target is not None and target[0] is not None:
                return self.returns_device(target[0], target[1])
            return self._model_function_call(call, state, path)
        return False

    def _method_returns_device(self, call: cst.Call, path: tuple[cst.CSTNode, ...]) -> bool:
        """Whether `holder.method(...)` runs a method every `return` of which gives a device
        value: of a class of this file (`method_called`, `returns_device`), or of a project
        class every binding of `holder` makes an instance of (`Project.returns_device`)."""
        found = self.method_called(call, path)
        if found is not None:
            return self.returns_device(*found)
        project = self.ctx.project
        if project is None:
            return False
        assert isinstance(call.func, cst.Attribute)
        method = self.made_method(call.func, path)
        return method is not None and project.returns_device(method, self.ctx.module_name)

    def made_method(self, func: cst.Attribute, path: Sequence[cst.CSTNode]) -> str | None:
        """`Class.method` for `obj.method` where every binding of `obj` calls the one class
        `Class` (`ema = EMA(...)`, then `ema.update`), as the calls name it; None otherwise."""
        names = set(self.makers(func.value, path) or ())
        if len(names) != 1 or None in names:
            return None
        return f"{names.pop()}.{func.attr.value}"

    def _model_function_call(self, call: cst.Call, state: State, path: tuple[cst.CSTNode, ...]) -> bool:
        """`extract(model, params, input_ids)`: a function of another module, given the
        parameters (a name spelled like `params`/`variables`/`weights`) and a device array,
        computes on the device and returns device values."""
        args = [a.value for a in call.args if not a.star]
        if not any(_names_variables(a) for a in args):
            return False
        return any(self._holds(a, state, path) for a in args)

    def _tree_map_holds(self, call: cst.Call, state: State, path: tuple[cst.CSTNode, ...]) -> bool:
        if len(call.args) < 2:
            return False
        fn = call.args[0].value
        if isinstance(fn, cst.Lambda):
            body = fn.body
            if isinstance(body, cst.Call) and self.host_copy(body, (*path, call, call.args[0], fn)) is not None:
                return False
        elif (self.ctx.resolve(fn, path, anchor=call) or "").startswith(("numpy.", "jax.device_get")):
            return False
        return any(self._holds(a.value, state, path) for a in call.args[1:] if a.keyword is None)

    # -- names ----------------------------------------------------------------------------------

    def _is_builtin(self, name: str, node: cst.CSTNode, path: Sequence[cst.CSTNode]) -> bool:
        """`name` is not imported, and no def/assignment of the file's scopes on `path` binds it."""
        if self.ctx.resolve(cst.Name(name), path, anchor=node) is not None:
            return False
        return self._local_def(name, path) is None and not self._bound_at_module(name)

    def _bound_at_module(self, name: str) -> bool:
        return name in self._module_assignments()

    def _module_assignments(self) -> frozenset[str]:
        cached = getattr(self, "_module_names", None)
        if cached is None:
            names: set[str] = set()
            for statement in self.ctx.module.body:
                if isinstance(statement, cst.SimpleStatementLine):
                    for small in statement.body:
                        if isinstance(small, cst.Assign):
                            for t in small.targets:
                                names.update(target_names(t.target))
                elif isinstance(statement, cst.ClassDef):
                    names.add(statement.name.value)
            cached = self._module_names = frozenset(names)
        return cached

    def _local_def(self, name: str, path: Sequence[cst.CSTNode]) -> tuple[cst.FunctionDef | None, tuple[cst.CSTNode, ...]] | None:
        """The `def name` visible from `path`: in an enclosing function's body or at module
        level, defined exactly once there. (None, ...) when the name is defined more than once."""
        scopes: list[tuple[cst.CSTNode, tuple[cst.CSTNode, ...]]] = []
        for index in range(len(path) - 1, -1, -1):
            node = path[index]
            if isinstance(node, cst.FunctionDef) and isinstance(node.body, cst.IndentedBlock):
                scopes.append((node, tuple(path[: index + 1]) + (node.body,)))
        scopes.append((self.ctx.module, (self.ctx.module,)))
        for scope, scope_path in scopes:
            defs = self._defs_in(scope).get(name)
            if defs:
                if len(defs) > 1:
                    return None, scope_path
                return defs[0], scope_path
        return None

    def _defs_in(self, scope: cst.CSTNode) -> dict[str, list[cst.FunctionDef]]:
        cached = self._defs.get(id(scope))
        if cached is None:
            body = scope.body.body if isinstance(scope, cst.FunctionDef) else scope.body  # type: ignore[union-attr]
            cached = {}
            for statement in body:
                for node in _defs_of(statement):
                    cached.setdefault(node.name.value, []).append(node)
            self._defs[id(scope)] = cached
        return cached

    def computes_nothing(self, call: cst.Call, ancestors: Sequence[cst.CSTNode]) -> bool:
        """Whether `call` calls a jitted function of this file whose body computes nothing:
        only `pass`, a docstring or `...`, and at most a `return` of its parameters as they
        came (`return graphdef, state`). Its compiled program has no operation to run, so
        there is no device work to wait for; calling it costs the dispatch alone."""
        if self.ctx.jit.callee(call, ancestors) is None or not isinstance(call.func, cst.Name):
            return False
        function = self._jitted_def(call.func.value, ancestors)
        if function is None or function.name.value != call.func.value or not isinstance(function.body, cst.IndentedBlock):
            return False  # not a decorated def: `f = jax.jit(g, out_shardings=...)` may move data
        if any(
            isinstance(d.decorator, cst.Call)
            and any(a.keyword is not None and a.keyword.value in _PLACING for a in d.decorator.args)
            for d in function.decorators
        ):
            return False  # `@partial(jax.jit, out_shardings=...)`: returning x as it came reshards it
        params = function.params
        names = {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}
        for statement in function.body.body:
            if not isinstance(statement, cst.SimpleStatementLine):
                return False
            for small in statement.body:
                if isinstance(small, cst.Pass):
                    continue
                if isinstance(small, cst.Expr) and isinstance(small.value, (cst.SimpleString, cst.Ellipsis)):
                    continue
                if isinstance(small, cst.Return):
                    value = small.value
                    parts = [e.value for e in value.elements] if isinstance(value, (cst.Tuple, cst.List)) else [value]
                    if all(p is None or (isinstance(p, cst.Name) and p.value in names) for p in parts):
                        continue
                return False
        return True

    def _jitted_def(self, name: str, path: Sequence[cst.CSTNode]) -> cst.FunctionDef | None:
        """The definition of the jitted callable `name`: a jit-decorated `def name`, or the
        function wrapped by `name = jax.jit(f, ...)`."""
        found = self._local_def(name, path)
        if found is not None and found[0] is not None:
            return found[0]
        wrapped = self._wrapped_name(name)
        if wrapped is not None:
            found = self._local_def(wrapped, path)
            if found is not None:
                return found[0]
        return None

    def _wrapped_name(self, name: str) -> str | None:
        """`f` for a module-level `name = jax.jit(f, ...)` (or `partial(jax.jit, ...)(f)`)."""
        for statement in self.ctx.module.body:
            if not isinstance(statement, cst.SimpleStatementLine):
                continue
            for small in statement.body:
                if (
                    isinstance(small, cst.Assign)
                    and any(name in target_names(t.target) for t in small.targets)
                    and isinstance(small.value, cst.Call)
                    and small.value.args
                    and isinstance(small.value.args[0].value, cst.Name)
                ):
                    return small.value.args[0].value.value
        return None


def _model_apply(call: cst.Call) -> bool:
    """`state.apply_fn(...)`, `model.apply(variables, ...)`: a whole model's forward pass."""
    func = call.func
    return isinstance(func, cst.Attribute) and (
        func.attr.value == "apply_fn" or (func.attr.value == "apply" and looks_like_variables(call))
    )


def _numpy_reads_data(name: str) -> bool:
    """Whether `name` is a NumPy function (`numpy.sum`, `numpy.linalg.norm`) that converts its
    first argument to a NumPy array: not metadata, creation from a shape, or a class."""
    module, _, function = name.rpartition(".")
    if f"{module}." not in _NUMPY_COPY_MODULES or not function or function.startswith("_"):
        return False
    return not function[:1].isupper() and function not in _NUMPY_NO_COPY


_MODULE_BASES = frozenset(
    {"flax.linen.Module", "flax.linen.module.Module", "flax.nnx.Module", "equinox.Module", "haiku.Module"}
)
# The transformations that trace the functions they are given (by the last part of the name).
_TRANSFORMATIONS = frozenset(
    {"jit", "pjit", "pmap", "vmap", "grad", "value_and_grad", "jacfwd", "jacrev", "hessian", "jvp",
     "vjp", "linearize", "checkpoint", "remat", "custom_vjp", "custom_jvp", "eval_shape",
     "make_jaxpr", "shard_map", "named_call", "scan", "fori_loop", "while_loop", "cond", "switch",
     "map", "associative_scan", "custom_root", "custom_linear_solve", "filter_jit", "filter_vmap",
     "filter_pmap", "filter_grad", "filter_value_and_grad", "filter_checkpoint", "filter_eval_shape",
     "filter_jvp", "filter_vjp", "transform", "transform_with_state", "without_apply_rng"}
)  # fmt: skip
_TRANSFORMATION_MODULES = ("jax.", "equinox.", "flax.linen.", "flax.nnx.", "haiku.")


def _is_transformation(name: str) -> bool:
    if name.startswith(("jax.tree", "jax.numpy.", "jax.debug.")):
        return False
    return name.startswith(_TRANSFORMATION_MODULES) and name.rsplit(".", 1)[-1] in _TRANSFORMATIONS


def _all_calls(module: cst.Module) -> Iterator[tuple[cst.Call, tuple[cst.CSTNode, ...]]]:
    stack: list[tuple[cst.CSTNode, tuple[cst.CSTNode, ...]]] = [(module, ())]
    while stack:
        node, path = stack.pop()
        if isinstance(node, cst.Call):
            yield node, path
        below = (*path, node)
        stack.extend((child, below) for child in iter_children(node))


def _defs_of(statement: cst.CSTNode) -> Iterator[cst.FunctionDef]:
    if isinstance(statement, cst.FunctionDef):
        yield statement
    elif isinstance(statement, (cst.If, cst.Try)):
        for child in iter_children(statement):
            if isinstance(child, (cst.IndentedBlock, cst.Else, cst.If, cst.ExceptHandler, cst.Finally)):
                body = child.body if not isinstance(child, (cst.IndentedBlock, cst.If)) else child
                if isinstance(body, cst.IndentedBlock):
                    for inner in body.body:
                        yield from _defs_of(inner)
                elif isinstance(body, cst.If):
                    yield from _defs_of(body)


def _method_def(name: str, path: Sequence[cst.CSTNode]) -> cst.FunctionDef | None:
    """`def name` in the innermost class enclosing `path`."""
    for node in reversed(path):
        if isinstance(node, cst.ClassDef):
            for statement in node.body.body:
                if isinstance(statement, cst.FunctionDef) and statement.name.value == name:
                    return statement
            return None
    return None


def _params(function: cst.FunctionDef | None) -> tuple[str, ...] | None:
    if function is None:
        return None
    params = function.params
    names = [p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)]
    return tuple(names)


def _lambda_params(node: cst.Lambda) -> list[str]:
    params = node.params
    names = [p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)]
    for star in (params.star_arg, params.star_kwarg):
        if isinstance(star, cst.Param):
            names.append(star.name.value)
    return names


def _names_variables(expr: cst.BaseExpression) -> bool:
    name = dotted_name(expr)
    if name is None:
        return False
    last = name.rsplit(".", 1)[-1].lower()
    return any(hint in last for hint in ("param", "variables", "weights"))


def looks_like_variables(call: cst.Call) -> bool:
    """`model.apply(params, x)` / `model.apply({"params": p}, x)`, not `df.apply(fn)`."""
    if not call.args or call.args[0].keyword is not None:
        return False
    first = call.args[0].value
    if isinstance(first, cst.Dict):
        return True
    name = dotted_name(first)
    if name is None:
        return False
    last = name.rsplit(".", 1)[-1].lower()
    return any(hint in last for hint in _VARIABLES_HINTS)


def _container_lookup(node: cst.Subscript, path: Sequence[cst.CSTNode]) -> bool:
    """`out["loss"]`, `out[f"layer_{i}"]`, or `out[k]` in `for k in out` / `out.keys()` /
    `out.items()`: a lookup in a dict of results, not an array operation."""
    if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
        return False
    index = node.slice[0].slice.value
    if isinstance(index, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)):
        return True
    if not isinstance(index, cst.Name):
        return False
    if _string_valued(index.value, path):
        return True
    base = dotted_name(node.value)
    if base is None:
        return False
    for ancestor in path:
        loop_target, iterable = None, None
        if isinstance(ancestor, cst.For):
            loop_target, iterable = ancestor.target, ancestor.iter
        elif isinstance(ancestor, cst.CompFor):
            loop_target, iterable = ancestor.target, ancestor.iter
        if loop_target is None or iterable is None:
            continue
        first = loop_target.elements[0].value if isinstance(loop_target, cst.Tuple) and loop_target.elements else loop_target
        if not (isinstance(first, cst.Name) and first.value == index.value):
            continue
        if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Attribute):
            if iterable.func.attr.value in ("keys", "items") and dotted_name(iterable.func.value) == base:
                return True
        elif dotted_name(iterable) == base:
            return True
    return False


def _string_valued(name: str, path: Sequence[cst.CSTNode]) -> bool:
    """Whether every assignment to `name` in the innermost function (or module) on `path`
    gives a string (`key = f"layer_{i}"`, `key = "loss"`, `key = str(i)`): `out[key]` is then
    a dict lookup, not array indexing."""
    scope: cst.CSTNode | None = None
    for node in reversed(path):
        if isinstance(node, (cst.FunctionDef, cst.Module)):
            scope = node
            break
    if scope is None:
        scope = path[0] if path else None
    if scope is None:
        return False
    values: list[cst.BaseExpression] = []
    stack: list[cst.CSTNode] = [scope]
    while stack:
        node = stack.pop()
        if node is not scope and isinstance(node, _SCOPES):
            continue
        if isinstance(node, cst.Assign) and any(name in target_names(t.target) for t in node.targets):
            values.append(node.value)
        elif isinstance(node, (cst.AugAssign, cst.AnnAssign)) and name in target_names(node.target):
            values.append(node.value if node.value is not None else cst.Name("None"))
        elif isinstance(node, (cst.For, cst.CompFor)) and name in target_names(node.target):
            return False
        stack.extend(iter_children(node))
    return bool(values) and all(_is_string(v) for v in values)


def _is_string(expr: cst.BaseExpression) -> bool:
    if isinstance(expr, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)):
        return True
    if isinstance(expr, cst.Call):
        func = expr.func
        if isinstance(func, cst.Name) and func.value == "str":
            return True
        if isinstance(func, cst.Attribute) and func.attr.value in ("format", "join") and isinstance(
            func.value, (cst.SimpleString, cst.FormattedString)
        ):
            return True
    return False


def _set(state: State, names: object, device: bool) -> State:
    names = set(names)  # type: ignore[call-overload]
    return state | names if device else state - names


def _scope_index(path: tuple[cst.CSTNode, ...]) -> int:
    """The index in `path` of the innermost function or class whose body holds the end of it
    (-1: the module)."""
    for index in range(len(path) - 1, -1, -1):
        node = path[index]
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            if index + 1 < len(path) and path[index + 1] is node.body:
                return index
    return -1


def _has_yield(expr: cst.CSTNode) -> bool:
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Yield):
            return True
        if isinstance(node, (cst.Lambda, *_COMPREHENSIONS)):
            continue
        stack.extend(iter_children(node))
    return False


def _match_names(pattern: cst.CSTNode) -> set[str]:
    names: set[str] = set()
    stack = [pattern]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.MatchAs) and node.name is not None:
            names.add(node.name.value)
        elif isinstance(node, cst.MatchStar) and node.name is not None:
            names.add(node.name.value)
        elif isinstance(node, cst.MatchMapping) and node.rest is not None:
            names.add(node.rest.value)
        stack.extend(iter_children(node))
    return names



def _per_iteration(
    loop: cst.CSTNode, path: tuple[cst.CSTNode, ...], outside: cst.CSTNode | None = None
) -> Iterator[tuple[cst.CSTNode, tuple[cst.CSTNode, ...]]]:
    """Every node that runs on each iteration of `loop` (whose ancestors are `path`), with its
    ancestors: a `for` loop's body, a `while` loop's body and test, everything in a
    comprehension but its first iterable. Not `outside`'s subtree, nor nested scopes."""
    inner = (*path, loop)
    if isinstance(loop, (cst.For, cst.While)):
        parts: list[tuple[cst.CSTNode, tuple[cst.CSTNode, ...]]] = [(loop.body, inner)]
        if isinstance(loop, cst.While):
            parts.append((loop.test, inner))
    elif isinstance(loop, _COMPREHENSIONS):
        parts = [(c, inner) for c in iter_children(loop) if c is not loop.for_in]  # type: ignore[attr-defined]
        first = loop.for_in  # type: ignore[attr-defined]
        parts += [(c, (*inner, first)) for c in iter_children(first) if c is not first.iter]
    else:
        return
    for part, part_path in parts:
        for node, node_path in _expressions(part, part_path):
            if outside is not None and (node is outside or any(p is outside for p in node_path)):
                continue
            yield node, node_path

def _expressions(root: cst.CSTNode, path: tuple[cst.CSTNode, ...]) -> Iterator[tuple[cst.CSTNode, tuple[cst.CSTNode, ...]]]:
    """Every node under `root` (itself included) that runs when `root` runs, with its
    ancestors: nested defs, classes and lambdas are not entered."""
    stack: list[tuple[cst.CSTNode, tuple[cst.CSTNode, ...]]] = [(root, path)]
    while stack:
        node, ancestors = stack.pop()
        yield node, ancestors
        if node is not root and isinstance(node, _SCOPES):
            continue
        below = (*ancestors, node)
        stack.extend((child, below) for child in reversed(list(iter_children(node))))


def _shown_values(call: cst.Call) -> tuple[cst.BaseExpression, ...]:
    """What a progress bar's `set_postfix`/`set_description` call turns into text: its
    keyword values (not `refresh=`), the values of a dict literal it is given, and any other
    positional argument (a string or a value `str` is called on)."""
    shown: list[cst.BaseExpression] = []
    for arg in call.args:
        if arg.star:
            continue
        if arg.keyword is not None:
            if arg.keyword.value != "refresh":
                shown.append(arg.value)
        elif isinstance(arg.value, cst.Dict):
            shown.extend(e.value for e in arg.value.elements if isinstance(e, cst.DictElement))
        else:
            shown.append(arg.value)
    return tuple(shown)
