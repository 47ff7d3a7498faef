"""missing-jit's inline case: a Flax/haiku `model.apply(variables, x, ...)` called directly in a
loop that runs many times, in eager code (seed 001's generation and test scripts: a decode
loop calling `model.apply` for every token).

The fix hoists one `jax.jit(model.apply, static_argnames=...)` above the loop and calls it
instead; keyword arguments given literal constants (`return_activations=False`) or named like
module options (`train=`, `layer_indices=`) are static.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from jaxlint._bindings import Kind
from jaxlint._callgraph import Mode, in_test, runs_many_times
from jaxlint._guards import has_modulo, moduli, thinning_guard
from jaxlint._frequency import integer_value
from jaxlint._scope import dotted_name
from jaxlint._device import looks_like_variables
from jaxlint._frequency import loop_evidence
from jaxlint._context import FileContext, Loop
from jaxlint._jittability import OPTION_NAME
from jaxlint._nodes import loop_header
from jaxlint._pytrees import linen_builder
from jaxlint._rule import Applicability, Edit, Fix, ImportSpec, unused_name

from ._shapes import growth


__all__ = ["ApplyCall", "apply_finding", "is_apply_call", "module_file"]

_CONSTANTS = (cst.Integer, cst.Float, cst.SimpleString, cst.ConcatenatedString)


@dataclass
class ApplyCall:
    call: cst.Call
    ancestors: list[cst.CSTNode]
    loops: list[Loop]
    module: bool = False  # a Module called directly (`model(x)`), not `model.apply(...)`


@dataclass
class ApplyFinding:
    message: str
    fix: Fix | None
    evidence: list[str]


def is_apply_call(call: cst.Call) -> bool:
    """`x.apply(variables, inputs, ...)` or `self.model.apply(...)`: two positional arguments
    at least (a pandas `df.apply(f)` has one)."""
    func = call.func
    if not (isinstance(func, cst.Attribute) and func.attr.value == "apply"):
        return False
    positional = [a for a in call.args if a.keyword is None and not a.star]
    return len(positional) >= 2 and _root(func.value) is not None


def module_file(ctx: FileContext) -> bool:
    """Whether the file imports Flax NNX or equinox."""
    imports = [t or "" for t in ctx._module_scope.imports.values()]  # noqa: SLF001
    return any(t in ("equinox", "flax.nnx") or t.startswith(("flax.nnx.", "equinox.")) for t in imports)


def apply_finding(ctx: FileContext, found: ApplyCall, taken: set[str], *, preview: bool = False) -> ApplyFinding | None:
    """The finding for a model applied in a loop, or None. `preview`: also a Linen module a
    project function builds, in a file that imports no Flax (`linen_builder`), and a loop in
    a function that is eager on its own evidence (`CallGraph.driven`): 3 true of 5 new
    findings when measured, below the rule's precision target."""
    if found.module:
        return _module_finding(ctx, found)
    imports = [t or "" for t in ctx._module_scope.imports.values()]  # noqa: SLF001
    heads = {t.split(".", 1)[0] for t in imports}
    func = found.call.func
    assert isinstance(func, cst.Attribute)
    built_by = linen_builder(ctx, func.value, found.ancestors) if preview and isinstance(func.value, cst.Name) else None
    if not heads & {"flax", "haiku"} and built_by is None and not (
        "jax" in heads and looks_like_variables(found.call) and not _decorated_def(ctx, found)
    ):
        # A model imported from the project (`from model import NN`) is applied to its
        # variables (`net.apply(params, x)`, `apply({"params": p}, x)`), not `df.apply(f)`;
        # so is a Linen module a project function builds, whatever the file imports (its
        # imports may all be inside functions).
        return None
    if ctx.resolve(func.value, found.ancestors, anchor=found.call) is not None:
        return None  # `nn.apply(...)`, `hk.experimental...`: a library function, not a model
    path = [*found.ancestors, found.call]
    many = _hot_loops(ctx, found, preview=preview)
    if not many:
        return None
    root = _root(func.value)
    if _rebuilt_or_growing(ctx, found, root, many):
        return None
    module = ctx.module
    receiver = module.code_for_node(func.value)
    loop_text = loop_header(many[-1])
    message = (
        f"`{receiver}.apply(...)` runs the whole forward eagerly, dispatching its operations one "
        f"by one from Python, on every iteration of {loop_text}; jit-compile it once before the "
        f"loop (`jax.jit({receiver}.apply)`)"
    )
    evidence = [loop_evidence(ctx, many[-1], path)]
    if built_by and not heads & {"flax", "haiku"}:
        evidence.append(f"`{receiver}` is a Flax Linen module built by `{built_by}(...)`")
    return ApplyFinding(message, _fix(ctx, found, receiver, root, taken), evidence)


def _hot_loops(ctx: FileContext, found: ApplyCall, *, preview: bool = False) -> list[Loop]:
    """The loops around the call that run many times, where the call runs eagerly and is not
    compiled already; empty when there is none."""
    path = [*found.ancestors, found.call]
    if in_test(ctx, path):
        return []  # a test's loops are checks, not hot paths
    many = [loop for loop in found.loops if runs_many_times(ctx, loop, path, calls=True, searches=True, exits=True)]
    if not many:
        return []
    mode = ctx.calls.site_mode(found.call, found.ancestors)
    if mode is Mode.UNKNOWN and preview and ctx.calls.driven_at(found.call, found.ancestors):
        mode = Mode.EAGER
    if mode is not Mode.EAGER and not (mode is Mode.UNKNOWN and ctx.calls.drives_loop(found.call, found.ancestors, many[0])):
        return []
    if ctx.jit.callee(found.call, found.ancestors) is not None:
        return []  # `model.apply = jax.jit(model.apply)` earlier: the call is compiled
    return many


def _rebuilt_or_growing(ctx: FileContext, found: ApplyCall, root: str | None, many: list[Loop]) -> bool:
    if root in ctx.loop_bindings(found.loops[-1]):
        return True  # a new model each iteration: nothing to hoist, a compile per model
    return _fed_growing(ctx, found, many)  # a new input shape each iteration: a compile each


def _module_finding(ctx: FileContext, found: ApplyCall) -> ApplyFinding | None:
    """A Flax NNX or equinox Module called directly in a hot loop (`pred = model((x, t))` in
    a sampler's loop over steps): its whole forward runs eagerly, op by op. The name must
    hold a Module: what `_pytrees` reads it to hold (a Module class of the file or the project
    built, what every caller passes, a parameter annotated as one: `model: nnx.Module`), or
    an attribute the class sets to one (`self.model = model` in `__init__`)."""
    func = found.call.func
    assert isinstance(func, (cst.Name, cst.Attribute))
    path = [*found.ancestors, found.call]
    if not _holds_module(ctx, func, path):
        return None
    spelled = dotted_name(func) or ""
    many = _hot_loops(ctx, found)
    if not many or _rebuilt_or_growing(ctx, found, spelled, many) or _rarely(ctx, path, many[-1]):
        return None
    spelling = "nnx.jit" if _nnx_file(ctx) else "eqx.filter_jit"
    message = (
        f"`{spelled}(...)` runs the Module's whole forward eagerly, dispatching its operations "
        f"one by one from Python, on every iteration of {loop_header(many[-1])}; compile the call "
        f"once (a function decorated with `@{spelling}` that calls the Module)"
    )
    return ApplyFinding(message, None, [loop_evidence(ctx, many[-1], path)])


# A periodic guard `if step % k == 0:` with k at most this leaves the call frequent.
_OFTEN = 10


def _rarely(ctx: FileContext, path: list[cst.CSTNode], loop: Loop) -> bool:
    """Whether the call runs only on some iterations of `loop` (`thinning_guard`), every `k`
    with `k` above `_OFTEN` or not known (`if (i + 1) % 500 == 0:` draws a test sheet six
    times in 3000 epochs; `if i % 10 == 0:` still runs the forward hundreds of times)."""
    guard = thinning_guard(ctx, path, loop)
    if guard is None:
        return False
    start = next((i for i, n in enumerate(path) if n is loop), len(path))
    guards = [(index, node) for index, node in enumerate(path[start + 1 : -1], start + 1) if isinstance(node, cst.If) and path[index + 1] is node.body]
    if not any(node is guard for _, node in guards):
        guards.append((start + 1, guard))  # `if step % k != 0: continue` before the call
    often = False  # a guard every few iterations was seen, and no rarer one
    for index, node in guards:
        if isinstance(node, cst.If) and has_modulo(node.test):
            periods = [integer_value(ctx, op.right, list(path[:index])) for op in moduli(node.test)]
            if not periods or not all(p is not None and 0 < p <= _OFTEN for p in periods):
                return True
            often = True
    # a guard through a name the loop sets (`if should_eval:`), the clock or an `except`: rate unknown
    return not often


def _nnx_file(ctx: FileContext) -> bool:
    imports = [t or "" for t in ctx._module_scope.imports.values()]  # noqa: SLF001
    return any(t == "flax.nnx" or t.startswith("flax.nnx.") for t in imports)


def _holds_module(ctx: FileContext, func: cst.Name | cst.Attribute, path: list[cst.CSTNode]) -> bool:
    from jaxlint._pytrees import Value, classify

    kind = classify(ctx, func, path)
    if kind is Value.NNX or (kind is Value.MODULE and not _nnx_file(ctx)):
        return True
    if not isinstance(func, cst.Name):
        return False
    bindings = ctx.bindings.of(func.value, path)
    if len(bindings) != 1 or bindings[0].kind is not Kind.PARAM or bindings[0].annotation is None:
        return False
    annotation = bindings[0].annotation
    resolved = ctx.resolve(annotation, list(bindings[0].path), anchor=annotation)
    return resolved == "equinox.Module"


def _decorated_def(ctx: FileContext, found: ApplyCall) -> bool:
    """Whether the receiver's name is bound by a `def` of this file (`@streaming_transform
    def system(x): ...`): its `.apply` is whatever the decorators of a library jaxlint does
    not know made of it, not a model's."""
    func = found.call.func
    assert isinstance(func, cst.Attribute)
    if not isinstance(func.value, cst.Name):
        return False
    return any(b.kind is Kind.DEF for b in ctx.bindings.of(func.value.value, [*found.ancestors, found.call]))


def _fed_growing(ctx: FileContext, found: ApplyCall, loops: list[Loop]) -> bool:
    """Whether the call is given an array whose shape changes every iteration of one of
    `loops` without bound (`_shapes.growth`: a context grown by `concatenate`, not a window
    of the last `block_size` tokens taken from it): growing-shape-loop's finding once the
    apply is jitted, and no gain from jitting it alone."""
    path = found.ancestors
    for loop in loops:
        if not isinstance(loop, (cst.For, cst.While)):
            continue
        index = next((i for i, n in enumerate(path) if n is loop), None)
        if index is None:
            continue
        if any(growth(ctx, arg.value, loop, list(path[:index]), windows=False) for arg in found.call.args):
            return True
    return False


def _fix(ctx: FileContext, found: ApplyCall, receiver: str, root: str | None, taken: set[str]) -> Fix | None:
    hoist: cst.For | cst.While | None = None
    for loop in reversed(found.loops):
        if not isinstance(loop, (cst.For, cst.While)) or root in ctx.loop_bindings(loop):
            break
        hoist = loop
    if hoist is None:
        return None
    statics: list[str] = []
    for arg in found.call.args:
        if arg.star:
            return None
        if arg.keyword is None:
            continue
        name = arg.keyword.value
        value = arg.value
        literal = isinstance(value, _CONSTANTS) or (
            isinstance(value, cst.Name) and value.value in ("True", "False", "None")
        )
        if literal or name in ("mutable", "method", "capture_intermediates") or OPTION_NAME.search(name):
            if isinstance(value, (cst.List, cst.Dict, cst.Set, cst.ListComp, cst.DictComp)):
                return None  # unhashable: cannot be a static argument
            statics.append(name)
    module = ctx.module
    jit, imports = _jit_spelling(ctx)
    name = unused_name(ctx.source, f"jitted_{_last(receiver)}_apply", taken)
    options = ""
    if statics:
        names = ", ".join(f'"{n}"' for n in dict.fromkeys(statics))
        options = f", static_argnames=({names}{',' if len(set(statics)) == 1 else ''})"
    statement = cst.parse_statement(f"{name} = {jit}({receiver}.apply{options})\n", config=module.config_for_parsing)
    replacement = found.call.with_changes(func=cst.Name(name))
    return Fix(
        Applicability.UNSAFE,
        (Edit(found.call, replacement=replacement), Edit(hoist, before=(statement,))),
        f"Jit-compile `{receiver}.apply` once, as `{name}`, before the loop",
        imports,
    )


def _jit_spelling(ctx: FileContext) -> tuple[str, tuple[ImportSpec, ...]]:
    for local, target in ctx._module_scope.imports.items():  # noqa: SLF001
        if target == "jax":
            return f"{local}.jit", ()
    return "jax.jit", (ImportSpec("jax"),)


def _root(expr: cst.BaseExpression) -> str | None:
    while isinstance(expr, cst.Attribute):
        expr = expr.value
    return expr.value if isinstance(expr, cst.Name) else None


def _last(receiver: str) -> str:
    return receiver.rsplit(".", 1)[-1]
