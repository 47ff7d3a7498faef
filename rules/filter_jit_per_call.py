"""## What it does

Finds a function compiled with `eqx.filter_jit` (decorated, `step = eqx.filter_jit(f)`,
`@partial(eqx.filter_jit, donate=...)`, methods included, any import spelling) that is called
once per iteration of a loop over data or steps (`for batch in loader:`, `for step in
range(num_steps):`, `while ...:`) with a Module, an optimizer state or another large pytree
among its arguments: a training or evaluation step.

It stays silent for calls made once or a few times (outside loops, in a loop over a short
literal, a `range` below 100, or a model's layers, under `if step % every == 0:` or another
guard that thins the loop's iterations (`_guards.thinning_guard`: after `if step % k != 0:
continue`, paced by the clock, in an `except` handler), in tests;
in a loop that does not show it runs over data or steps, a caller's `values` or the rows of
an array: `_frequency.streams`;
in a `while not done:` loop only a Module argument counts: a solver's state is a few
arrays), for calls inside code that is itself traced (a function under
`jax.jit`, `eqx.filter_vmap`, `eqx.filter_grad`, `lax.scan`...: those calls are inlined into
the outer trace, not dispatched), and when the arguments are plain arrays and scalars only.
An argument counts as a large pytree when the code shows it: bound from an `eqx.nn` layer, a
class of the file or of another module of the project that subclasses `eqx.Module`, a
function of another module that returns one (or an optimizer state, or a tuple of them),
`eqx.nn.inference_mode`, `eqx.tree_at`, `eqx.partition`, `optimizer.init(...)`, a parameter
annotated as a Module or pytree, or named like one (`model`, `params`, `opt_state`,
`train_state`, `net`; a bare `state` only when a `for` loop's step gives it back). It stays silent when the code shows those pytrees hold fewer than 24
arrays in all (`jaxlint._size`: an `eqx.nn.MLP` of depth 1 holds 4, its Adam state 9; a
Module class of the file holds what its `__init__` assigns, or a parameter's default where
the construction passes nothing for it; a list of layers grown by `append` in a loop holds what
is appended times the loop's iterations; diffrax's solvers, step-size controllers and adjoints
hold only the arrays they are given): the per-call cost grows with the leaves, and at a few
arrays it is small.

## Why is this bad?

`eqx.filter_jit` does Python work proportional to the size of the pytrees on *every* call:
it flattens and partitions each argument into arrays and static parts, hashes the static
part, rebuilds the outputs with `eqx.combine`, and then blocks until the computation has
finished (since equinox 0.11.8), so host work never overlaps device work. On BERT-base this
added about 47 ms to every training step, 1.23-1.27x end to end (seed report 000, on an
accelerator). On CPU, `python bench/filter_jit.py` measures the per-call overhead of a
step carrying a BERT-base-shaped model and its adam state (201 + 403 array leaves) at several
times that of a `jax.jit` on a flat list of the same leaves.

The usual manual fix, `params, static = eqx.partition(model, eqx.is_array)` once and a
`jax.jit` closing over `static`, is wrong as soon as the static part changes: after
`eqx.nn.inference_mode(model)` it still applies dropout, because the old `static` was baked in.

## Example

```python
step = eqx.filter_jit(train_step)
for batch in loader:
    model, opt_state, loss = step(model, opt_state, batch)
```

Use instead:

```python
from jaxlint.runtime import filter_jit

step = filter_jit(train_step)
for batch in loader:
    model, opt_state, loss = step(model, opt_state, batch)
```

`jaxlint.runtime.filter_jit` takes the same arguments (`donate=...`, methods, keyword
arguments) and gives the same results, including when the static part changes (it compiles
again exactly where `eqx.filter_jit` would), at about the cost of a `jax.jit` on flat leaves:
it recognises the pytrees it returned on the previous step instead of flattening them again.

## Fix safety

The fix replaces `eqx.filter_jit` with `jaxlint.runtime.filter_jit` where the wrapper is made
(the decorator or the `eqx.filter_jit(...)` call; the import is added, and the equinox import
is kept). It is **unsafe**, although the results are identical (the fixtures train an MLP and
a transformer with dropout then `inference_mode`, with optax and donation, before and after
the fix, and compare exactly):

- calls no longer block: an `eqx.error_if` failure surfaces when a result is first read,
  which may be a later line or step (pass `block=True` to keep equinox's behaviour), and
  timing code that relied on the block now needs `jax.block_until_ready`;
- the wrapper is not a pytree (an `eqx.filter_jit` wrapper of a Module is a Module);
- objects are recognised by identity: a Module changed in place with `object.__setattr__`
  would not be seen (lists and dicts inside Modules are checked).

Where the name `filter_jit` is already taken (`from equinox import filter_jit`), the fix
writes `jaxlint.runtime.filter_jit` in full and adds `import jaxlint.runtime`.

With `runtime-helpers = false` in `[tool.jaxlint]` (fixes may not import `jaxlint.runtime`)
there is no fix: the drop-in is `jaxlint.runtime.filter_jit`, and plain equinox has none.
The finding is still reported.

## Runtime helper

`jaxlint.runtime.filter_jit(fn, donate=..., block=False)`; see its docstring.

## References

- equinox, "Low-overhead training loops": https://docs.kidger.site/equinox/tricks/#low-overhead-training-loops
- equinox issue #973 ("Overhead of filter_jit"): https://github.com/patrick-kidger/equinox/issues/973
- `../shared/research/jax-facts.md` §1 (what a `filter_jit` call does, and its cost).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import libcst as cst

from jaxlint._callgraph import Mode, in_test, runs_many_times
from jaxlint._guards import thinning_guard
from jaxlint._frequency import loop_evidence
from jaxlint._context import FileContext, Loop
from jaxlint._jaxapi import FILTER_JIT, PARTIAL, decorator_target
from jaxlint._pytrees import Value, classify, declared_by_callee, is_large
from jaxlint._nodes import comp_fors
from jaxlint._size import SMALL, leaf_count
from jaxlint._rule import Applicability, Edit, Fix, ImportSpec, Rule
from jaxlint._scope import target_names


__all__ = ["FilterJitPerCall"]

_RUNTIME = "jaxlint.runtime.filter_jit"
# Names of a model, its parameters or an optimizer/training state (words of a snake_case name).
_LARGE_WORDS = frozenset({"model", "params", "parameters", "net", "network", "opt_state", "optstate",
                          "optimizer_state", "optim_state", "opt_states", "train_state", "ema_params"})  # fmt: skip
_LARGE_TOKENS = frozenset({"model", "params", "parameters", "net", "network"})
_SPLIT = re.compile(r"_+")


@dataclass
class _Wrapper:
    """Where a name gets its `eqx.filter_jit` wrapper: the node that names `eqx.filter_jit`."""

    reference: cst.BaseExpression
    path: list[cst.CSTNode]  # ancestors of `reference`
    method: bool  # a decorated method of a class


@dataclass
class _Call:
    call: cst.Call
    path: list[cst.CSTNode]
    arguments: list[str]
    loop: Loop | None = None
    sizes: list[str] = field(default_factory=list)  # why each argument is large


class FilterJitPerCall(Rule):
    CODE = "JL002"
    SLUG = "filter-jit-per-call"
    MESSAGE = "an `eqx.filter_jit` function is called once per loop iteration with a large pytree"
    FIX = Applicability.UNSAFE
    TOKENS = ("filter_jit",)

    def __init__(self, ctx: FileContext, options: dict[str, object] | None = None) -> None:
        super().__init__(ctx, options)
        self._wrappers: dict[str, list[_Wrapper]] = {}
        self._calls: list[_Call] = []

    # -- where the wrappers are made -----------------------------------------------------

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if not node.decorators:
            return
        info = self.ctx.function_info(node)
        if info.jit not in FILTER_JIT:
            return
        path = [*self.ctx.ancestors, node]
        method = len(self.ctx.ancestors) >= 2 and isinstance(self.ctx.ancestors[-2], cst.ClassDef)
        for decorator, name in zip(node.decorators, info.decorators):
            if name in FILTER_JIT:
                found = self._reference(decorator.decorator, [*path, decorator])
                if found is not None:
                    self._wrappers.setdefault(node.name.value, []).append(_Wrapper(*found, method))

    def visit_Assign(self, node: cst.Assign) -> None:
        value = node.value
        if not isinstance(value, cst.Call):
            return
        path = [*self.ctx.ancestors, node]
        api = decorator_target(value.func, lambda e: self.ctx.resolve(e, [*path, value], anchor=e))
        if api not in FILTER_JIT:
            return
        found = self._reference(value.func, [*path, value])
        if found is None:
            return
        for target in node.targets:
            for name in target_names(target.target):
                self._wrappers.setdefault(name, []).append(_Wrapper(*found, False))

    def _reference(
        self, expr: cst.BaseExpression, path: list[cst.CSTNode]
    ) -> tuple[cst.BaseExpression, list[cst.CSTNode]] | None:
        """The node naming `eqx.filter_jit` in a wrapper expression (`eqx.filter_jit`,
        `eqx.filter_jit(donate=...)`, `partial(eqx.filter_jit, ...)`), and its ancestors."""
        if isinstance(expr, (cst.Name, cst.Attribute)):
            return (expr, path) if self.ctx.resolve(expr, path, anchor=expr) in FILTER_JIT else None
        if isinstance(expr, cst.Call):
            if self.ctx.resolve(expr.func, path, anchor=expr) in PARTIAL:
                if expr.args and expr.args[0].keyword is None and not expr.args[0].star:
                    return self._reference(expr.args[0].value, [*path, expr, expr.args[0]])
                return None
            return self._reference(expr.func, [*path, expr])
        return None

    # -- the calls ----------------------------------------------------------------------------

    def visit_Call(self, node: cst.Call) -> None:
        ctx = self.ctx
        path = ctx.ancestors
        if ctx.jit.callee(node, path) not in FILTER_JIT:
            return
        loops = [loop for loop in ctx.loops(node) if runs_many_times(ctx, loop, path, calls=True)]
        if not loops:
            return
        if thinning_guard(ctx, [*path, node], loops[-1]) is not None:
            return  # `if step % eval_every == 0:`: an occasional evaluation, not every step
        if in_test(ctx, path):
            return  # a test's loops are checks, not hot paths
        if isinstance(node.func, cst.Call) and node.func.args:
            made = node.func.args[0].value
            if isinstance(made, (cst.Lambda, cst.Call)):
                return  # a new function every iteration: jit-in-loop's finding
        if ctx.jit.is_traced(path) or self._maybe_traced(node, path):
            return
        sizes: list[str] = []
        arguments = self._large_arguments(node, list(path), loops[-1], sizes)
        if arguments:
            self._calls.append(_Call(node, list(path), arguments, loops[-1], sizes))

    def _maybe_traced(self, call: cst.Call, path: Sequence[cst.CSTNode]) -> bool:
        """Whether the code around `call` runs under a trace, or may: a function nested in
        another whose use jaxlint cannot follow is likely a callback (`lax.scan`'s body, a
        function handed to `filter_vmap`); a top-level function or method with a loop over
        data is a training or evaluation loop."""
        mode = self.ctx.calls.site_mode(call, path)
        if mode is Mode.TRACED:
            return True
        if mode is Mode.UNKNOWN:
            scopes = [n for n in path if isinstance(n, (cst.FunctionDef, cst.Lambda))]
            return len(scopes) >= 2 or any(isinstance(n, cst.Lambda) for n in scopes)
        return False

    def _large_arguments(self, call: cst.Call, path: list[cst.CSTNode], loop: Loop, sizes: list[str]) -> list[str]:
        """The arguments that are Modules, optimizer states or other large pytrees; `sizes`
        receives, for each, why it counts as large."""
        if isinstance(loop, cst.For):
            per_item = set(target_names(loop.target))
        elif isinstance(loop, cst.While):
            per_item = set()
        else:
            per_item = {n for f in comp_fors(loop) for n in target_names(f.target)}
        found = []
        leaves: list[int | None] = []
        for arg in call.args:
            expr = arg.value
            name = expr.value if isinstance(expr, cst.Name) else None
            if name is not None and name in per_item:
                continue  # a different object every iteration (`for model in models`)
            value = classify(self.ctx, expr, [*path, call, arg])
            declared = False
            if value is Value.UNKNOWN:  # `def make_step(model: eqx.Module, ...)` says what it takes
                value = declared_by_callee(self.ctx, call, arg, path)
                declared = is_large(value)
            if _until_flag(loop) and value is not Value.MODULE:
                continue  # `while not done:`: an iterative solver's state, a few arrays
            if is_large(value) or (value is Value.UNKNOWN and self._named_large(expr, call, path, loop)):
                text = self.ctx.module.code_for_node(expr)
                found.append(text)
                sizes.append(
                    f"`{text}` holds {'an' if value.value[0] in 'aeiou' else 'a'} {value.value}"
                    + (" (the parameter's annotation in the callee)" if declared else "") if is_large(value)
                    else f"`{text}` is named like a model, its parameters or a training state"
                )
                leaves.append(leaf_count(self.ctx, expr, [*path, call, arg]))
        if found and all(n is not None for n in leaves) and sum(leaves) < SMALL:  # type: ignore[arg-type]
            return []  # the code shows its pytrees hold a few arrays in all: a small per-leaf cost
        return found

    def _named_large(self, expr: cst.BaseExpression, call: cst.Call, path: list[cst.CSTNode], loop: Loop) -> bool:
        """Named like a model, its parameters or a training state; a bare `state` counts when
        the step gives it back (`state, loss = step(state, batch)`) in a `for` loop over data
        or steps (in `while not done:`, it is more likely a solver's few scalars)."""
        if isinstance(expr, cst.Name):
            name = expr.value
        elif isinstance(expr, cst.Attribute):
            name = expr.attr.value
        else:
            return False
        lowered = name.lower()
        words = [w for w in _SPLIT.split(lowered) if w]
        if lowered in _LARGE_WORDS or any(w in _LARGE_TOKENS for w in words):
            return True
        if "state" in words and ("opt" in words or "optimizer" in words or "train" in words):
            return True
        if words[-1:] == ["state"] and isinstance(expr, cst.Name) and not isinstance(loop, cst.While):
            return _rebinds(call, path, name)
        return False

    # -- reporting ----------------------------------------------------------------------------

    def finish(self) -> None:
        for found in self._calls:
            callee = self.ctx.module.code_for_node(found.call.func)
            listed = ", ".join(f"`{a}`" for a in found.arguments[:3]) + (", ..." if len(found.arguments) > 3 else "")
            message = (
                f"`{callee}` is an `eqx.filter_jit` function called on every loop iteration with "
                f"{listed}: each call flattens and partitions every argument, rebuilds every output "
                "and waits for the result; `jaxlint.runtime.filter_jit` is a drop-in without "
                "that per-call cost"
            )
            evidence = [loop_evidence(self.ctx, found.loop, found.path)] if found.loop is not None else []
            evidence += found.sizes
            self.report(found.call, message, fix=self._fix(found), ancestors=found.path, evidence=evidence)

    def _fix(self, found: _Call) -> Fix | None:
        func = found.call.func
        wrappers: list[_Wrapper]
        if isinstance(func, cst.Name):
            wrappers = [w for w in self._wrappers.get(func.value, []) if not w.method]
        elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
            wrappers = [w for w in self._wrappers.get(func.attr.value, []) if w.method and _same_class(w, found)]
        elif isinstance(func, cst.Call):
            reference = self._reference(func.func, [*found.path, found.call, func])
            wrappers = [_Wrapper(reference[0], reference[1], False)] if reference else []
        else:
            wrappers = []
        if not wrappers:
            return None
        edits = []
        imports: set[ImportSpec] = set()
        for wrapper in wrappers:
            spelled = self._spelling(wrapper)
            if spelled is None:
                return None
            replacement, needed = spelled
            edits.append(Edit(wrapper.reference, replacement=replacement))
            if needed is not None:
                imports.add(needed)
        return Fix(
            Applicability.UNSAFE,
            tuple(edits),
            "Use `jaxlint.runtime.filter_jit`, a drop-in without the per-call flatten, combine and block",
            imports=tuple(sorted(imports, key=lambda spec: (spec.module, spec.name or ""))),
        )

    def _spelling(self, wrapper: _Wrapper) -> tuple[cst.BaseExpression, ImportSpec | None] | None:
        """How to name `jaxlint.runtime.filter_jit` at the wrapper, and the import it needs."""
        ctx, anchor = self.ctx, wrapper.reference
        name = cst.Name("filter_jit")
        if ctx.resolve(name, wrapper.path, anchor=anchor) == _RUNTIME:
            return name, None
        if ctx.is_builtin("filter_jit", wrapper.path, anchor=anchor):
            return name, ImportSpec("jaxlint.runtime", "filter_jit")
        if ctx.is_builtin("jaxlint", wrapper.path, anchor=anchor):
            return cst.parse_expression(_RUNTIME), ImportSpec("jaxlint.runtime")
        return None


def _until_flag(loop: Loop) -> bool:
    """`while not done:`, `while running:`: a loop until a flag flips (an iterative solver or
    an interactive search), not a count of training steps (`while step < n:`, `while True:`)."""
    if not isinstance(loop, cst.While):
        return False
    test = loop.test
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test = test.expression
    return isinstance(test, (cst.Name, cst.Attribute)) and not (isinstance(test, cst.Name) and test.value == "True")


def _rebinds(call: cst.Call, path: Sequence[cst.CSTNode], name: str) -> bool:
    """Whether the statement of `call` assigns its result back to `name`."""
    parent = path[-1] if path else None
    if isinstance(parent, cst.Assign) and parent.value is call:
        return any(name in target_names(t.target) for t in parent.targets)
    return False


def _same_class(wrapper: _Wrapper, found: _Call) -> bool:
    """Whether the decorated method is in the class whose method makes the call."""
    owner = next((n for n in reversed(wrapper.path) if isinstance(n, cst.ClassDef)), None)
    return owner is not None and any(n is owner for n in found.path)
