"""## What it does

Finds `jax.jit(...)`, `eqx.filter_jit(...)`, `jax.pmap(...)` (and the other jit wrappers)
applied inside a loop to a callable made in that same iteration: a `lambda`, a
`functools.partial(...)`, a `def` nested in the loop body (decorated, or wrapped by name), or
a bound method (`jax.jit(self.step)` for a method of the enclosing class,
`jax.jit(strategy.ask)` for an object built by calling a class, `strategy = OpenES(...)`, a
Flax linen `jax.jit(model.apply)`, also of a model an object holds, `jax.jit(self.model.apply)`: each read of a method makes a new object, and a loop of 5
`jax.jit(strategy.ask)(...)` compiles 5 times), when the jitted function
is also called in that iteration. A loop over a model's layers or blocks
(`for i in range(cfg.num_layers)`) counts as many here: a real model has dozens, and each
compile costs seconds.

It also finds jitted functions that the body of a function of the file makes anew and calls,
when that function runs once per iteration of a hot loop (the loop is one call up, and every
call compiles again): a wrapper built and called straight away
(`return jax.pmap(lambda x: lax.all_gather(x, "i"), "i")(x)` in a helper called per eval
batch), one stored under a name the function then calls (`scale = jax.jit(lambda w: ...)`,
`jax.jit(nested_def)`), and a `@jax.jit` def nested in the function and called there (a
weight-processing helper called once per loaded layer). The function may also run many times
from outside its file: another module of the project calls it once per iteration of a loop
(`act(weights, obs)` in `train.py`'s episode loop, `agent.score(obs)` for an `agent =
Policy(...)`; not a loop over a name assigned a literal table of a few entries, nor one whose
header names few things or a model's parts, `for level in levels`, as for the file's own
loops, unless the header also names what it runs over many times: what a call in it is named
for, `for batch in get_ds_iter(eval_split)`, `range(cfg.get_num_layers(parallel_config))`,
or a target holding a batch or step, `for params, batch in zip(...)`, but not the entries
of a table, `batches.items()`), or it is a method its framework calls on every step (`library.toml`'s
`per-step-methods`: `step` of a `gymnasium.Env` subclass, vLLM's
`process_weights_after_loading`, once per layer). These findings have no fix. A wrapper of
a callable that reads a parameter holding a function (one it calls, or one annotated
`Callable`: `def normalize(f: Callable)` jitting a closure over `f`) is not reported: each call
wraps the function it is given, a new configuration that compiles anyway.

It stays silent in tests and in benchmark functions (`@google_benchmark.register`,
`def bench_*`, a notebook's function that a `%timeit` line calls, `%timeit
g_inner_jitted_lambda(10, 20)`: they time compiles on purpose; not `%time`, one run), and when the wrapped callable is the same
object every iteration (a function
defined outside the loop, a parameter, a module's function, an attribute holding a
function): jax keys its compile cache on the function object, so re-wrapping it costs a
dictionary lookup, not a compile (`../shared/research/jax-facts.md` §3). `eqx.filter_jit`
of a method is cached too, so it is not flagged. It also stays silent when the callable captures loop
variables and the jitted function is only called in a loop nested inside (one compile per
configuration of a sweep is the point), when a `partial` captures them or a lambda or nested
`def` calls a function made in the iteration (a configuration), and when the jitted function
is stored, returned or handed on instead of called. A lambda or nested `def` that reads plain
values of the iteration (the layer index of `jnp.take(x, i, axis=0)`) is reported: they could
be arguments, and one compile would serve every iteration.

## Why is this bad?

Each iteration makes a new function object, and jax's caches are keyed on it: every call of
the new wrapper traces the Python function again and compiles it again with XLA, even though
the code is the same. A loop of N iterations costs N compiles instead of one (measured with
`jaxlint.runtime.count_compiles`: a `jax.jit(lambda ...)` or `jax.jit(partial(f, ...))` in a
loop of 3 iterations compiled 3 times; `python bench/jit_extraction.py` shows the time).
Compiles take milliseconds on CPU and seconds for a real model on an accelerator.

## Example

```python
for batch in batches:
    logits = jax.jit(lambda x: jnp.tanh(x @ x))(batch)
```

Use instead:

```python
square_tanh = jax.jit(lambda x: jnp.tanh(x @ x))
for batch in batches:
    logits = square_tanh(batch)
```

## Fix safety

The fix hoists the wrapper above the loop (the outermost one the callable does not depend
on): an inline `jax.jit(lambda ...)(x)` becomes a named jitted function created before the
loop; `f = jax.jit(...)` and a decorated nested `def` move above the loop. It is **safe**
when the callable reads no name the loop binds or visibly mutates (its closure is the same
every iteration, so one trace computes what every iteration computed). When an inline
`lambda` reads loop variables, the fix is **unsafe**: they become extra parameters of the
hoisted lambda, passed as keyword arguments, so they are traced instead of baked in as
constants, which fails when one decides a shape or Python control flow. There is no fix in
comprehensions, for `partial(...)` or nested `def`s that capture loop variables, or when the
wrapped name is bound elsewhere in the loop.

A wrapper built on every call of a function that a loop calls moves to module level, just
above the function's top-level statement: an inline `jax.pmap(lambda x: ..., "batch")(x)`
becomes a module constant (`_gather_pmap`) the function calls, and a decorated nested `def`
moves out whole. Only when everything the wrapper reads from outside itself is a builtin or
bound at module level by a statement above the function (imports, constants); **safe** then,
**unsafe** when such a global is bound more than once (the original saw its value at every
call, the module-level function sees it at its one trace). No fix when it reads the
function's parameters or locals (`self`, a scale passed in), for a wrapper stored under a
name, or for a nested `def` whose name the module or the function binds elsewhere.

The fix is plain JAX (the wrapper moved above the loop): `runtime-helpers = false` in
`[tool.jaxlint]` changes nothing.

## References

- JAX, "Just-in-time compilation", caching: https://docs.jax.dev/en/latest/jit-compilation.html#caching
- `../shared/research/jax-facts.md` §3 (what compiles, and what shares a cache).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import libcst as cst

from jaxlint import _jaxapi
from jaxlint._callgraph import in_test, runs_many_times
from jaxlint._context import FileContext, Loop
from jaxlint._frequency import call_chain_evidence, loop_evidence
from jaxlint._fresh import (
    assigned_name,
    called_once_per_call,
    calls_by_name,
    closes_over_function_parameter,
    closure_reads,
    enclosing_function,
    fresh_kind,
    hot_repeat,
    in_benchmark,
    made_in_loop,
    nested_def,
    range_indices,
    value_captures,
    wrapper_api,
)
from jaxlint._nodes import free_names, iter_subtree, loop_header
from jaxlint._positions import line_of
from jaxlint._rule import Applicability, Edit, Fix, Rule, unused_name


__all__ = ["JitInLoop"]


@dataclass
class _Wrap:
    """A jit wrapper applied in a loop to a callable made in the same iteration."""

    node: cst.CSTNode  # the wrapper call, or the decorated def
    api: str
    kind: str  # "lambda", "partial", "def", "name"
    callable: cst.CSTNode  # the Lambda / partial Call / FunctionDef
    loops: list[Loop]
    ancestors: list[cst.CSTNode]
    captured: set[str]  # names read by the callable that the innermost loop binds


class JitInLoop(Rule):
    CODE = "JL007"
    SLUG = "jit-in-loop"
    MESSAGE = "a jit wrapper is created on every loop iteration around a new function: one compile per iteration"
    FIX = Applicability.SAFE
    TOKENS = ("jit", "pmap")

    def __init__(self, ctx: FileContext, options: dict[str, object] | None = None) -> None:
        super().__init__(ctx, options)
        self._names: set[str] = set()  # names this pass's fixes introduce

    def visit_Call(self, node: cst.Call) -> None:
        api = wrapper_api(self.ctx, node)
        if api is None or not node.args or node.args[0].keyword is not None or node.args[0].star:
            return
        loops = self.ctx.loops(node)
        if not loops:
            self._per_call(node, api)
            return
        target = node.args[0].value
        ancestors = list(self.ctx.ancestors)
        if isinstance(target, cst.Name):
            made = made_in_loop(self.ctx, target.value, loops[-1])
            if made is None:
                return  # the same function object every iteration: the compile cache is shared
            self._consider(_Wrap(node, api, "name", made, loops, ancestors, set()))
            return
        kind = fresh_kind(self.ctx, node, api, ancestors)
        if kind is None:
            return  # a module's function or a stored attribute: the same object each time
        self._consider(_Wrap(node, api, kind, target, loops, ancestors, set()))

    def _per_call(self, node: cst.Call, api: str) -> None:
        """`jax.pmap(lambda x: ...)(x)` called straight away, or `step = jax.jit(<a lambda, a
        partial, a def nested here>)` then `step(x)`, in the body of a function that runs once
        per iteration of a hot loop of this file: every call of the function makes a new
        function object, so every call compiles again."""
        ancestors = list(self.ctx.ancestors)
        parent = ancestors[-1] if ancestors else None
        function = enclosing_function(ancestors)
        if function is None:
            return
        kind = fresh_kind(self.ctx, node, api, ancestors)
        target = node.args[0].value
        if isinstance(parent, cst.Call) and parent.func is node:
            if kind is None and not (isinstance(target, cst.Name) and nested_def(function, target.value)):
                return
        else:
            # Stored under a name the function then calls: `step = jax.jit(...)`, `step(x)`.
            name = assigned_name(ancestors, node)
            if name is None or not called_once_per_call(function, name):
                return  # stored, returned or handed on, or driving a loop of the function
            if kind is None and not (isinstance(target, cst.Name) and nested_def(function, target.value)):
                return
        callable_ = target if kind is not None else _nested(function, target)
        if callable_ is not None and closes_over_function_parameter(function, callable_):
            return  # each call wraps the function it is given: a new configuration
        fix = None
        if kind is None:
            assert isinstance(target, cst.Name)
            what = f"`{target.value}`, a `def` made anew on every call,"
        else:
            what = _fresh_callable(kind, target)
            if kind in ("lambda", "partial") and isinstance(parent, cst.Call) and parent.func is node:
                fix = self._module_level_wrapper(node, ancestors)
        self._report_per_call(node, api, what, function, ancestors, fix=fix)

    def _per_call_def(self, node: cst.FunctionDef, api: str) -> None:
        """A `@jax.jit` def nested in a function that calls it: every call of the function
        defines it again, so one that runs per iteration of a hot loop compiles per iteration."""
        ancestors = list(self.ctx.ancestors)
        function = enclosing_function(ancestors)
        if function is None or not called_once_per_call(function, node.name.value):
            return  # a factory, whose caller decides how often it runs, or a loop's driver
        if closes_over_function_parameter(function, node):
            return  # each call wraps the function it is given: a new configuration
        decorator = self._jit_decorator(node, api, ancestors)
        what = f"the nested `def {node.name.value}`, made anew on every call,"
        fix = self._module_level_def(node, function, ancestors)
        self._report_per_call(decorator, api, what, function, ancestors, report_path=[*ancestors, node], fix=fix)

    # -- fixes of a wrapper built on every call: build it once, at module level ---------------

    def _module_level_wrapper(self, wrapper: cst.Call, ancestors: list[cst.CSTNode]) -> Fix | None:
        """`jax.pmap(lambda x: ..., "batch")(x)` in a function: the wrapper becomes a module
        constant made before the function's top-level statement, when everything it reads is
        bound at module level before that statement (or is a builtin)."""
        top = _top_level_statement(self.ctx.module, ancestors)
        if top is None:
            return None
        applicability = self._module_level_reads(free_names(wrapper), top, [*ancestors, wrapper], wrapper)
        if applicability is None:
            return None
        function = enclosing_function(ancestors)
        api = _jaxapi.api_name(wrapper_api(self.ctx, wrapper) or "jit").rpartition(".")[2]
        base = f"_{function.name.value}_{api}" if function is not None else f"_{api}_fn"
        name = unused_name(self.ctx.source, base, self._names)
        config = self.ctx.module.config_for_parsing
        statement = cst.parse_statement(f"{name} = {self.ctx.module.code_for_node(wrapper)}\n", config=config)
        edits = (Edit(wrapper, replacement=cst.Name(name)), _insert_before(self.ctx.module, top, statement))
        return Fix(applicability, edits, f"Create the jitted function once, as the module's `{name}`")

    def _module_level_def(self, node: cst.FunctionDef, function: cst.FunctionDef, ancestors: list[cst.CSTNode]) -> Fix | None:
        """A `@jax.jit` def nested in a function moves to module level, before the function's
        top-level statement, when everything it reads from outside itself is bound at module
        level before that statement, its name is bound nowhere else in the function and not at
        module level."""
        top = _top_level_statement(self.ctx.module, ancestors)
        name = node.name.value
        if top is None or not isinstance(ancestors[-1], cst.IndentedBlock):
            return None
        if len(self.ctx.bindings.of(name, [*ancestors, node])) != 1 or self.ctx.bindings.of(name, [self.ctx.module]):
            return None  # bound again in the function, or a module name it would replace
        if any(n.value == name for n in _declared_global(function)) or name in self._names:
            return None
        applicability = self._module_level_reads(closure_reads(node), top, [*ancestors, node], node)
        if applicability is None:
            return None
        self._names.add(name)
        edits = (
            Edit(node, remove=True),
            *_close_gap(ancestors[-1], node),
            _insert_before(self.ctx.module, top, node),
        )
        return Fix(applicability, edits, f"Move `{name}` to module level, defined once")

    def _module_level_reads(
        self, reads: set[str], top: cst.BaseStatement, path: list[cst.CSTNode], anchor: cst.CSTNode
    ) -> Applicability | None:
        """SAFE when every name in `reads` is a builtin or bound once at module level by a
        statement before `top`; UNSAFE when one is bound there more than once (a module global
        the program rebinds: the original saw its value at each call, the hoisted one at its
        trace); None when one is bound anywhere else (a local of the function, a name defined
        after `top`)."""
        module = self.ctx.module
        index = module.body.index(top)
        applicability = Applicability.SAFE
        for name in reads:
            bindings = self.ctx.bindings.of(name, path)
            if not bindings:
                if self.ctx.is_builtin(name, path, anchor=anchor):
                    continue
                return None
            for binding in bindings:
                statement = _top_level_statement(module, [*binding.path, binding.node])
                if statement is None:
                    return None
                if any(isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda)) for n in binding.path):
                    return None
                if module.body.index(statement) >= index:
                    return None
            if len(bindings) > 1:
                applicability = Applicability.UNSAFE
        return applicability

    def _report_per_call(
        self,
        node: cst.CSTNode,
        api: str,
        what: str,
        function: cst.FunctionDef,
        ancestors: list[cst.CSTNode],
        report_path: list[cst.CSTNode] | None = None,
        fix: Fix | None = None,
    ) -> None:
        """Report `node` when `function` runs once per iteration of a hot loop of the file
        (`ancestors`: those of the jit wrapper or of the decorated def; `report_path`: those
        of `node` when they differ)."""
        graph = self.ctx.calls
        known = graph.function(function)
        if known is None or in_test(self.ctx, ancestors) or self.ctx.jit.is_traced(ancestors):
            return
        if in_benchmark(self.ctx, ancestors):
            return
        repeat = hot_repeat(self.ctx, known)
        short = _jaxapi.api_name(api)
        if repeat is not None:
            line = line_of(self.ctx.module, repeat.loop, repeat.site.path)
            where = f" (line {line})" if line else ""
            how = f"runs once per iteration of {loop_header(repeat.loop)}{where}"
            evidence = call_chain_evidence(
                self.ctx, repeat.site.call, repeat.site.path, repeat.loop, [f.name for f in repeat.chain]
            )
        else:
            # Run many times from outside the file: a loop of another module, or a framework.
            evidence = graph.repeated_elsewhere(known)
            if evidence is None:
                return  # not run per iteration, only under `if step % every == 0:`, or a few times
            how = "runs many times (" + evidence + ")"
        self.report(
            node,
            f"`{short}` wraps {what} on every call of `{function.name.value}()`, which {how}: jax "
            "caches compiles per function object, so every call traces and compiles it again; "
            f"build the jitted function once, outside `{function.name.value}()`",
            ancestors=report_path if report_path is not None else ancestors,
            evidence=[evidence],
            fix=fix,
        )

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if not node.decorators:
            return
        info = self.ctx.function_info(node)
        if info.jit is None:
            return
        loops = self.ctx.loops(node)
        if not loops:
            self._per_call_def(node, info.jit)
            return
        self._consider(_Wrap(node, info.jit, "def", node, loops, list(self.ctx.ancestors), set()))

    def _report_node(self, wrap: _Wrap) -> cst.CSTNode:
        """Where to report: the wrapper call, or the jit decorator of a nested def."""
        if isinstance(wrap.node, cst.FunctionDef):
            return self._jit_decorator(wrap.node, wrap.api, wrap.ancestors)
        return wrap.node

    def _jit_decorator(self, node: cst.FunctionDef, api: str, ancestors: Sequence[cst.CSTNode]) -> cst.CSTNode:
        """The decorator of `node` that applies `api` (the def itself if none is found)."""
        info = self.ctx.function_info(node, ancestors)
        for decorator, name in zip(node.decorators, info.decorators):
            if name == api:
                return decorator
        return node

    def _consider(self, wrap: _Wrap) -> None:
        innermost = wrap.loops[-1]
        path = [*wrap.ancestors, wrap.node]
        if not any(runs_many_times(self.ctx, loop, path, compiles=True) for loop in wrap.loops):
            return  # a literal table or a couple of iterations: tests, deliberate recompiles
        if in_test(self.ctx, path) or in_benchmark(self.ctx, wrap.ancestors):
            return  # tests and benchmarks of tracing and compiling recompile on purpose
        bound = set(self.ctx.loop_bindings(innermost))
        if isinstance(wrap.node, cst.Call) and any(free_names(a) & bound for a in wrap.node.args[1:]):
            return  # `in_axes=`/`static_argnums=` change per iteration: a new configuration each time
        if isinstance(wrap.node, cst.FunctionDef) and any(free_names(d) & bound for d in wrap.node.decorators):
            return
        wrap.captured = closure_reads(wrap.callable) & bound
        called = self._called_in(wrap)
        if called is None:
            return
        if wrap.captured and called == "inner":
            return  # a sweep: one compile per configuration, then many calls
        fresh_code = wrap.kind == "lambda" or (
            isinstance(wrap.callable, cst.FunctionDef) and wrap.captured <= range_indices(wrap.loops)
        )
        if wrap.captured and (not fresh_code or not value_captures(innermost, wrap.callable, wrap.captured)):
            # `partial(run, cfg)`, a nested def over an object of the iteration, or a closure
            # over a function made per iteration: one compile per configuration is likely
            # the point. A lambda that reads plain values of the iteration, or a nested def
            # that reads only the loop's integer index, could take them as arguments.
            return
        fix = _fix(self.ctx, wrap, self._names) if not isinstance(innermost, _COMPREHENSIONS) else None
        node = self._report_node(wrap)
        ancestors = wrap.ancestors if node is wrap.node else [*wrap.ancestors, wrap.node]
        many = next(loop for loop in reversed(wrap.loops) if runs_many_times(self.ctx, loop, path, compiles=True))
        self.report(node, _message(self.ctx.module, wrap), fix=fix, ancestors=ancestors, evidence=[loop_evidence(self.ctx, many, path, compiles=True)])

    def _called_in(self, wrap: _Wrap) -> str | None:
        """Where the jitted function is called: "same" (in the iteration that made it),
        "inner" (only in a loop nested inside), None (not called in the loop)."""
        parent = wrap.ancestors[-1] if wrap.ancestors else None
        if wrap.kind != "def" and isinstance(parent, cst.Call) and parent.func is wrap.node:
            return "same"
        name = self._bound_name(wrap)
        if name is None:
            return None
        innermost = wrap.loops[-1]
        body = innermost.body if isinstance(innermost, (cst.For, cst.While)) else innermost
        where: str | None = None
        for node, depth in calls_by_name(body, name):
            if depth == 0:
                return "same"
            where = "inner"
        return where

    def _bound_name(self, wrap: _Wrap) -> str | None:
        if wrap.kind == "def":
            assert isinstance(wrap.node, cst.FunctionDef)
            return wrap.node.name.value
        line = _assignment_line(wrap)
        if line is None:
            return None
        assign = line.body[0]
        assert isinstance(assign, cst.Assign)
        return assign.targets[0].target.value  # type: ignore[attr-defined]


_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)


def _assignment_line(wrap: _Wrap) -> cst.SimpleStatementLine | None:
    """The line `name = <wrapper call>` when that is all the statement does."""
    if len(wrap.ancestors) < 2:
        return None
    assign, line = wrap.ancestors[-1], wrap.ancestors[-2]
    if (
        isinstance(assign, cst.Assign)
        and assign.value is wrap.node
        and len(assign.targets) == 1
        and isinstance(assign.targets[0].target, cst.Name)
        and isinstance(line, cst.SimpleStatementLine)
        and len(line.body) == 1
    ):
        return line
    return None


def _message(module: cst.Module, wrap: _Wrap) -> str:
    api = _jaxapi.api_name(wrap.api)
    if wrap.kind == "def":
        what = f"the nested `def {getattr(wrap.node, 'name', cst.Name('f')).value}`"
    elif wrap.kind == "name":
        what = _made_name(wrap)
    else:
        what = _fresh_callable(wrap.kind, wrap.callable)
    loop = wrap.loops[-1]
    header = loop_header(loop)
    text = (
        f"`{api}` wraps {what} on every iteration of {header}: jax caches compiles per "
        "function object, so each iteration traces and compiles it again; hoist the jitted "
        "function above the loop"
    )
    if wrap.captured:
        names = ", ".join(f"`{n}`" for n in sorted(wrap.captured))
        text += f" and pass {names} as argument{'s' if len(wrap.captured) > 1 else ''}"
    return text


def _nested(function: cst.FunctionDef, target: cst.BaseExpression) -> cst.FunctionDef | None:
    """The `def` nested in `function` that the name `target` wraps."""
    if not isinstance(target, cst.Name):
        return None
    return next(
        (
            node
            for node in iter_subtree(function.body)
            if isinstance(node, cst.FunctionDef) and node.name.value == target.value
        ),
        None,
    )


def _fresh_callable(kind: str, callable_: cst.CSTNode) -> str:
    """How a message names a callable that is a new object each time: see `_fresh_kind`."""
    if kind == "method":
        return f"`{cst.Module([]).code_for_node(callable_)}`, a new bound-method object each time it is read,"
    return {"lambda": "a new `lambda`", "partial": "a new `functools.partial`"}[kind]


def _made_name(wrap: _Wrap) -> str:
    assert isinstance(wrap.node, cst.Call)
    name = cst.Module([]).code_for_node(wrap.node.args[0].value)
    kind = "a `def`" if isinstance(wrap.callable, cst.FunctionDef) else "a callable"
    return f"`{name}`, {kind} made in the loop body,"


def _hoist_target(ctx: FileContext, wrap: _Wrap) -> cst.For | cst.While | None:
    """The outermost enclosing loop statement the callable does not depend on."""
    reads = closure_reads(wrap.callable)
    target: cst.For | cst.While | None = None
    for loop in reversed(wrap.loops):
        if not isinstance(loop, (cst.For, cst.While)):
            break
        if loop is not wrap.loops[-1] and reads & set(ctx.loop_bindings(loop)):
            break
        target = loop
        if reads & set(ctx.loop_bindings(loop)):
            break  # the innermost loop, with captured values turned into arguments
    return target


def _mutated(loop: cst.CSTNode, names: set[str]) -> bool:
    """Whether the loop visibly changes an object the callable reads (`cfg.lr = ...`,
    `d[k] = ...`, `buf.append(...)`)."""
    for node in iter_subtree(loop, into_scopes=False):
        targets: Sequence[cst.BaseExpression] = ()
        if isinstance(node, cst.Assign):
            targets = [t.target for t in node.targets]
        elif isinstance(node, (cst.AugAssign, cst.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            if node.func.attr.value in ("append", "extend", "update", "insert", "pop", "clear", "setdefault", "add"):
                targets = [node.func]
        for target in targets:
            if isinstance(target, (cst.Attribute, cst.Subscript)):
                root = target
                while isinstance(root, (cst.Attribute, cst.Subscript)):
                    root = root.value
                if isinstance(root, cst.Name) and root.value in names:
                    return True
    return False


def _fix(ctx: FileContext, wrap: _Wrap, taken: set[str]) -> Fix | None:
    hoist = _hoist_target(ctx, wrap)
    if hoist is None:
        return None
    module = ctx.module
    reads = closure_reads(wrap.callable)
    captured = reads & set(ctx.loop_bindings(hoist))
    applicability = Applicability.UNSAFE if captured or _mutated(hoist, reads) else Applicability.SAFE
    if wrap.kind == "def":
        assert isinstance(wrap.node, cst.FunctionDef)
        if captured or not _statement_in_loop_body(wrap.ancestors, wrap.loops[-1]):
            return None
        edits = (
            Edit(wrap.node, remove=True),
            *_close_gap(wrap.ancestors[-1], wrap.node),
            Edit(hoist, before=(wrap.node,)),
        )
        return Fix(applicability, edits, f"Move `{wrap.node.name.value}` above the loop")
    if wrap.kind == "name":
        return None
    line = _assignment_line(wrap)
    if line is not None and not captured:
        if not _statement_in_loop_body(wrap.ancestors[:-2], wrap.loops[-1]):
            return None
        edits = (Edit(line, remove=True), *_close_gap(wrap.ancestors[-3], line), Edit(hoist, before=(line,)))
        return Fix(applicability, edits, "Move the jitted function above the loop")
    parent = wrap.ancestors[-1] if wrap.ancestors else None
    if not (isinstance(parent, cst.Call) and parent.func is wrap.node):
        return None
    call = wrap.node
    assert isinstance(call, cst.Call)
    name = unused_name(ctx.source, _base_name(wrap), taken)
    wrapper = call
    new_call: cst.Call = parent
    if captured:
        lam = wrap.callable
        if not isinstance(lam, cst.Lambda) or not _simple_params(lam):
            return None
        extra = sorted(captured)
        params = lam.params.with_changes(
            params=[*lam.params.params, *(cst.Param(cst.Name(n)) for n in extra)]
        )
        wrapper = call.with_changes(
            args=[call.args[0].with_changes(value=lam.with_changes(params=params)), *call.args[1:]]
        )
        new_call = parent.with_changes(
            args=[*_with_comma(parent.args), *(_keyword(n) for n in extra)]
        )
    config = module.config_for_parsing
    statement = cst.parse_statement(f"{name} = {module.code_for_node(wrapper)}\n", config=config)
    replacement = new_call.with_changes(func=cst.Name(name))
    edits = (Edit(parent, replacement=replacement), Edit(hoist, before=(statement,)))
    title = f"Create the jitted function once, as `{name}`, before the loop"
    return Fix(applicability, edits, title)


def _with_comma(args: Sequence[cst.Arg]) -> list[cst.Arg]:
    """`args` ready for more arguments after them."""
    args = list(args)
    if args and args[-1].comma is cst.MaybeSentinel.DEFAULT:
        args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    return args


def _simple_params(lam: cst.Lambda) -> bool:
    params = lam.params
    return (
        not params.posonly_params
        and not params.kwonly_params
        and not isinstance(params.star_arg, cst.Param)
        and params.star_kwarg is None
        and all(p.default is None for p in params.params)
    )


def _statement_in_loop_body(ancestors: Sequence[cst.CSTNode], loop: Loop) -> bool:
    """The statement whose ancestors are `ancestors` is directly in `loop`'s body, or in
    blocks of `if`s nested there (not in `try`/`with`, whose semantics moving could change)."""
    index = next((i for i, n in enumerate(ancestors) if n is loop), None)
    if index is None:
        return False
    for node in ancestors[index + 1 :]:
        if not isinstance(node, (cst.IndentedBlock, cst.SimpleStatementSuite)):
            return False
    return True


def _base_name(wrap: _Wrap) -> str:
    if wrap.kind == "method":
        assert isinstance(wrap.callable, cst.Attribute)
        return f"jitted_{wrap.callable.attr.value}"
    if wrap.kind == "partial":
        assert isinstance(wrap.callable, cst.Call)
        func = wrap.callable.args[0].value if wrap.callable.args else None
        if isinstance(func, cst.Name):
            return f"jitted_{func.value}"
        if isinstance(func, cst.Attribute):
            return f"jitted_{func.attr.value}"
    return "jitted_fn"


def _keyword(name: str) -> cst.Arg:
    no_space = cst.SimpleWhitespace("")
    equal = cst.AssignEqual(whitespace_before=no_space, whitespace_after=no_space)
    return cst.Arg(cst.Name(name), keyword=cst.Name(name), equal=equal)


def _close_gap(block: cst.CSTNode, removed: cst.CSTNode) -> tuple[Edit, ...]:
    """When `removed` leads its block, drop the blank lines above the statement after it."""
    body = getattr(block, "body", None)
    if not isinstance(body, (list, tuple)) or len(body) < 2 or body[0] is not removed:
        return ()
    following = body[1]
    leading = getattr(following, "leading_lines", ())
    if not leading or any(line.comment is not None for line in leading):
        return ()
    return (Edit(following, replacement=following.with_changes(leading_lines=[])),)


def _top_level_statement(module: cst.Module, path: Sequence[cst.CSTNode]) -> cst.BaseStatement | None:
    """The statement of `module.body` that `path` (a node's ancestors, or the node last) runs
    in."""
    body = {id(statement) for statement in module.body}
    return next((n for n in path if id(n) in body), None)  # type: ignore[return-value]


def _declared_global(function: cst.FunctionDef) -> list[cst.Name]:
    """The names the function declares `global` or `nonlocal`."""
    found: list[cst.Name] = []
    for part in iter_subtree(function.body, into_scopes=False):
        if isinstance(part, (cst.Global, cst.Nonlocal)):
            found.extend(item.name for item in part.names)
    return found


def _insert_before(module: cst.Module, top: cst.BaseStatement, statement: cst.BaseStatement) -> Edit:
    """An edit putting `statement` at module level just before `top`, two blank lines above
    it: after the statement before `top`, so the blank lines and comments above `top` stay
    with it."""
    index = module.body.index(top)
    # The comment lines just above the moved statement go with it; only the blank lines change.
    comments = [line for line in getattr(statement, "leading_lines", ()) if line.comment is not None]
    spaced = statement.with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine(), *comments])
    if index == 0:
        return Edit(top, before=(statement.with_changes(leading_lines=comments),))
    return Edit(module.body[index - 1], after=(spaced,))
