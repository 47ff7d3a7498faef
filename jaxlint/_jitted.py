"""Which callables in a file are jit-compiled, and which calls dispatch device work.

Built once per file, on the first question a rule asks (a scan of statements, not of every
expression), and shared by every rule through `FileContext.jit`. Names are tracked by their
simple spelling file-wide: `step` is jitted when a `def step` carries a jit decorator
anywhere in the file or `step = jax.jit(...)` appears; `self.step(...)` when a method `step`
of an enclosing class is. A name that is also bound to something else is not trusted.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import libcst as cst

from . import _jaxapi
from ._scope import target_names


if TYPE_CHECKING:
    from ._context import FileContext


__all__ = ["JitIndex"]


@dataclass
class JitIndex:
    """The jitted callables of one file."""

    ctx: FileContext
    # Simple name → the jit API that compiles it (`jax.jit`, `equinox.filter_jit`, ...).
    functions: dict[str, str] = field(default_factory=dict)
    # Names of functions handed to a jit wrapper somewhere (`jax.jit(loss)`): their bodies
    # are traced, even where the function itself is not called through the wrapper.
    traced: set[str] = field(default_factory=set)
    _conflicts: set[str] = field(default_factory=set)

    @classmethod
    def build(cls, ctx: FileContext) -> JitIndex:
        index = cls(ctx)
        plain_defs: set[str] = set()
        other_bindings: set[str] = set()
        for node, path in _walk_statements(ctx.module):
            if isinstance(node, cst.FunctionDef):
                jit = ctx.function_info(node, path).jit if node.decorators else None
                if jit is not None:
                    index._add(node.name.value, jit)
                else:
                    plain_defs.add(node.name.value)
            elif isinstance(node, cst.Assign):
                api = index._wrapper_call(node.value, path)
                for target in node.targets:
                    for name in target_names(target.target):
                        if api is not None:
                            index._add(name, api)
                        else:
                            other_bindings.add(name)
            elif isinstance(node, cst.Call):
                api = index._wrapper_of(node.func, path)
                if api is not None and node.args and isinstance(node.args[0].value, cst.Name):
                    index.traced.add(node.args[0].value.value)
        # `def f` plus `f = jax.jit(f)` is the wrap-in-place idiom, not a conflict; any
        # other second binding makes the name untrustworthy.
        index._conflicts |= other_bindings & set(index.functions)
        index._conflicts |= {n for n in plain_defs & set(index.functions) if n not in index.traced}
        for name in index._conflicts:
            index.functions.pop(name, None)
        return index

    def _add(self, name: str, api: str) -> None:
        previous = self.functions.setdefault(name, api)
        if previous != api:
            self._conflicts.add(name)

    def _wrapper_of(
        self, expr: cst.BaseExpression, path: Sequence[cst.CSTNode]
    ) -> str | None:
        """The jit API `expr` evaluates to: `jax.jit`, `partial(jax.jit, ...)`,
        `eqx.filter_jit(donate=...)`; `path` is the ancestors of `expr`'s statement."""
        api = _jaxapi.decorator_target(expr, lambda e: self.ctx.resolve(e, path, anchor=e))
        return api if api in _jaxapi.JIT_WRAPPERS else None

    def _wrapper_call(
        self, value: cst.BaseExpression, path: Sequence[cst.CSTNode]
    ) -> str | None:
        """The API of `jax.jit(f, ...)`/`partial(jax.jit, ...)(f)` as an assigned value."""
        if isinstance(value, cst.Call):
            return self._wrapper_of(value.func, path)
        return None

    def callee(self, call: cst.Call, ancestors: Sequence[cst.CSTNode]) -> str | None:
        """The jit API compiling what `call` calls, or None when it is not (known to be)
        jitted: `step(x)`, `self.step(x)` for a jitted method of the enclosing class, and
        `jax.jit(f)(x)`."""
        func = call.func
        if isinstance(func, cst.Name):
            return self.functions.get(func.value)
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
            if func.value.value in ("self", "cls") and _in_class_defining(ancestors, func.attr.value):
                return self.functions.get(func.attr.value)
            return None
        if isinstance(func, cst.Call):
            return self._wrapper_of(func.func, ancestors)
        return None

    def is_traced(self, ancestors: Sequence[cst.CSTNode]) -> bool:
        """Whether code at `ancestors` runs under a trace (inside a jitted function, or one
        handed to a jit wrapper), so its calls are staged, not dispatched one by one."""
        for node in ancestors:
            if isinstance(node, cst.FunctionDef):
                name = node.name.value
                if name in self.functions or name in self.traced:
                    return True
        return False


def _walk_statements(
    module: cst.Module,
) -> Iterator[tuple[cst.CSTNode, list[cst.CSTNode]]]:
    """Every def, assignment and call in the file with its ancestors."""
    from ._walk import iter_children

    # One shared ancestor list, cut back to each node's depth; a copy only for the nodes
    # yielded (a list per visited node was most of this walk's cost).
    stack: list[tuple[cst.CSTNode, int]] = [(module, 0)]
    path: list[cst.CSTNode] = []
    wanted = (cst.FunctionDef, cst.Assign, cst.Call)
    while stack:
        node, depth = stack.pop()
        del path[depth:]
        if isinstance(node, wanted):
            yield node, path[:]
        path.append(node)
        depth += 1
        stack.extend((child, depth) for child in reversed(list(iter_children(node))))


def _in_class_defining(ancestors: Sequence[cst.CSTNode], method: str) -> bool:
    for node in reversed(ancestors):
        if isinstance(node, cst.ClassDef):
            return any(
                isinstance(stmt, cst.FunctionDef) and stmt.name.value == method
                for stmt in node.body.body
            )
    return False
