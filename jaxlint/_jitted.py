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


_CONFLICT = ""  # a name bound in one scope both to a jitted callable and to something else


@dataclass
class JitIndex:
    """The jitted callables of one file."""

    ctx: FileContext
    # Simple name → the jit API that compiles it (`jax.jit`, `equinox.filter_jit`, ...), for
    # names jitted (without a conflicting binding) in at least one scope.
    functions: dict[str, str] = field(default_factory=dict)
    # Names of functions handed to a jit wrapper somewhere (`jax.jit(loss)`): their bodies
    # are traced, even where the function itself is not called through the wrapper.
    traced: set[str] = field(default_factory=set)
    # Ids of the defs a factory of the file returns where a jit wrapper is handed the
    # factory's result (`jax.jit(jax.vmap(make_train(config)))`, `make_train` returning its
    # nested `def train`): their bodies run only under that trace.
    traced_defs: set[int] = field(default_factory=set)
    # (id of the scope that binds it, name) → jit API, or `_CONFLICT`.
    _scoped: dict[tuple[int, str], str] = field(default_factory=dict)
    # (id of the class, attribute) → jit API of `self.attr = jax.jit(...)` in its methods.
    _attributes: dict[tuple[int, str], str] = field(default_factory=dict)
    # (object name, attribute) → jit API of `model.apply = jax.jit(model.apply)` anywhere in
    # the file, when the file assigns that attribute nothing else.
    _rebound: dict[tuple[str, str], str] = field(default_factory=dict)
    # (id of the scope that binds it, name) → jit API of the callables an object built from
    # jitted callables alone holds (`model = Pair(jax.jit(f), jax.jit(g))`, or what a factory
    # of the file or of the project returns, `model = jit_pair(transform(net))`), when that
    # scope binds the name to nothing else: `model.apply(...)` is one of them.
    _holders: dict[tuple[int, str], str] = field(default_factory=dict)

    @classmethod
    def build(cls, ctx: FileContext) -> JitIndex:
        index = cls(ctx)
        jitted: dict[tuple[int, str], str] = {}
        others: set[tuple[int, str]] = set()
        plain_defs: set[tuple[int, str]] = set()
        self_wrapped: set[tuple[int, str]] = set()
        attributes: dict[tuple[int, str], str] = {}
        other_attributes: set[tuple[int, str]] = set()
        factory_calls: list[tuple[int, cst.Assign, Sequence[cst.CSTNode]]] = []
        rebound: dict[tuple[str, str], str] = {}
        returns: dict[int, list[cst.BaseExpression | None]] = {}
        holders: dict[tuple[int, str], str] = {}
        holder_calls: list[tuple[int, cst.Assign, Sequence[cst.CSTNode]]] = []
        functions: dict[int, tuple[cst.FunctionDef, cst.CSTNode]] = {}  # id → (def, its owner)
        made_calls: list[tuple[str, int]] = []  # factories whose result a jit wrapper is handed

        def bind(key: tuple[int, str], api: str) -> None:
            if jitted.setdefault(key, api) != api:
                jitted[key] = _CONFLICT

        for node, path in _walk_statements(ctx.module):
            owner = _owner(path, ctx.module)
            if isinstance(node, cst.FunctionDef):
                functions[id(node)] = (node, owner)
                key = (id(owner), node.name.value)
                jit = ctx.function_info(node, path).jit if node.decorators else None
                if jit is not None:
                    bind(key, jit)
                else:
                    plain_defs.add(key)
            elif isinstance(node, cst.Return):
                returns.setdefault(id(owner), []).append(node.value)
            elif isinstance(node, cst.Assign):
                api = index._wrapper_call(node.value, path)
                for target in node.targets:
                    spelled = target.target
                    if (
                        isinstance(spelled, cst.Attribute)
                        and isinstance(spelled.value, cst.Name)
                        and spelled.value.value not in ("self", "cls")
                    ):
                        key_attr = (spelled.value.value, spelled.attr.value)
                        rebound[key_attr] = api if api is not None and rebound.get(key_attr, api) == api else _CONFLICT
                        continue
                    attribute = _self_attribute(target.target, path)
                    if attribute is not None:
                        if api is not None:
                            attributes.setdefault(attribute, api)
                        else:
                            other_attributes.add(attribute)
                        continue
                    for name in target_names(target.target):
                        key = (id(owner), name)
                        if api is not None:
                            bind(key, api)
                            if _wraps_name(node.value, name):
                                self_wrapped.add(key)
                        else:
                            others.add(key)
                if api is None and isinstance(node.value, cst.Call) and isinstance(node.value.func, (cst.Name, cst.Attribute)):
                    factory_calls.append((id(owner), node, path))
                if api is None and isinstance(node.value, cst.Call):
                    holder_calls.append((id(owner), node, path))
            elif isinstance(node, cst.Call):
                api = index._wrapper_of(node.func, path)
                if api is not None and node.args:
                    handed = index._unwrap_transforms(node.args[0].value, path)
                    made = [handed]
                    if isinstance(handed, cst.Name):
                        index.traced.add(handed.value)
                        # `train = make_train(config)`, then `jax.jit(train)`
                        made = [b.value for b in ctx.bindings.of(handed.value, [*path, node]) if b.value is not None]
                    for value in made:
                        if isinstance(value, cst.Call) and isinstance(value.func, cst.Name):
                            made_calls.append((value.func.value, id(owner)))
        # Factories: `def make_step(): ...; return jax.jit(step)` (or a jitted local def, or a
        # tuple of them), so `step = make_step(cfg)` binds a jitted callable.
        factories = {
            (id(functions[key][1]), functions[key][0].name.value): made
            for key, values in returns.items()
            if key in functions and (made := index._made(values, key, jitted)) is not None
        }
        for scope, assign, path in factory_calls:
            func = assign.value.func  # type: ignore[attr-defined]
            # A factory defined in the calling scope, or at module level, or one that another
            # module of the project defines (`from .steps import make_step`).
            made = None
            if isinstance(func, cst.Name):
                made = factories.get((scope, func.value)) or factories.get((id(ctx.module), func.value))
            if made is None and ctx.project is not None:
                imported = ctx.resolve(func, path, anchor=assign.value)
                made = ctx.project.factory(imported, ctx.module_name) if imported is not None else None
            if made is None:
                continue
            for target in assign.targets:
                names = _target_list(target.target)
                if names is None or (len(made) > 1 and len(names) != len(made)):
                    continue
                for name, api in zip(names, made if len(made) > 1 else made * len(names)):
                    if api is not None and name is not None:
                        bind((scope, name), api)
                        others.discard((scope, name))
        # Objects built from jitted callables alone, made here or by a factory of the file or
        # of the project (every `return` of which builds one).
        made_holders = {
            (id(functions[key][1]), functions[key][0].name.value): api
            for key, values in returns.items()
            if key in functions and (api := index._holder_returns(values, functions[key][0])) is not None
        }
        for scope, assign, path in holder_calls:
            value = assign.value
            assert isinstance(value, cst.Call)
            api = index._holds_jitted(value, path)
            func = value.func
            if api is None and isinstance(func, cst.Name):
                api = made_holders.get((scope, func.value)) or made_holders.get((id(ctx.module), func.value))
            if api is None and ctx.project is not None and isinstance(func, (cst.Name, cst.Attribute)):
                imported = ctx.resolve(func, path, anchor=value)
                api = ctx.project.holder(imported, ctx.module_name) if imported is not None else None
            for target in assign.targets:
                if isinstance(target.target, cst.Name):
                    key = (scope, target.target.value)
                    if api is not None and holders.get(key, api) == api:
                        holders[key] = api
                    else:
                        holders[key] = _CONFLICT
        for key in list(jitted):
            if key in self_wrapped:
                continue  # `f = jax.jit(f)` after `def f` or `f = make()`: wrapped in place
            if key in others or (key in plain_defs and key[1] not in index.traced):
                jitted[key] = _CONFLICT
        for name, scope in made_calls:
            for function, owner in functions.values():
                if function.name.value == name and id(owner) in (scope, id(ctx.module)):
                    index.traced_defs.update(_returned_defs(function, returns.get(id(function), [])))
        index._scoped = jitted
        for (_, name), api in jitted.items():
            if api != _CONFLICT:
                index.functions.setdefault(name, api)
        index._attributes = {k: v for k, v in attributes.items() if k not in other_attributes}
        index._rebound = {k: v for k, v in rebound.items() if v != _CONFLICT}
        index._holders = {k: v for k, v in holders.items() if v != _CONFLICT and k not in jitted and k not in plain_defs}
        return index

    def _unwrap_transforms(self, expr: cst.BaseExpression, path: Sequence[cst.CSTNode]) -> cst.BaseExpression:
        """The function under transformations: `g` for `jax.vmap(jax.grad(g), ...)`."""
        for _ in range(8):
            if not (isinstance(expr, cst.Call) and expr.args and not expr.args[0].star):
                return expr
            name = self.ctx.resolve(expr.func, path, anchor=expr)
            if name is None or name not in _jaxapi.TRANSFORMS:
                return expr
            expr = expr.args[0].value
        return expr

    def _holder_returns(self, values: list[cst.BaseExpression | None], function: cst.FunctionDef) -> str | None:
        """The jit API of what every `return` of `function` gives, when each builds an object
        from jitted callables alone (`_holds_jitted`)."""
        path = [self.ctx.module]
        apis = {self._holds_jitted(v, path) if isinstance(v, cst.Call) else None for v in values}
        return apis.pop() if len(apis) == 1 and None not in apis else None

    def _holds_jitted(self, value: cst.Call, path: Sequence[cst.CSTNode]) -> str | None:
        """The jit API of `Pair(jax.jit(f), jax.jit(g))` (`type(f)(init=jax.jit(...), ...)`): a
        call, not itself a transform, of something other than a class of this file with methods
        of its own (which the object would also have), every argument of which is a jit wrapper's call,
        all of one API; None otherwise. Every callable such an object hands back is jitted."""
        func = value.func
        if not value.args or self._wrapper_of(func, path) is not None:
            return None
        if isinstance(func, cst.Name) and any(
            isinstance(s, cst.ClassDef)
            and s.name.value == func.value
            and any(isinstance(m, cst.FunctionDef) for m in s.body.body)
            for s in self.ctx.module.body
        ):
            return None
        apis = set()
        for arg in value.args:
            inner = arg.value
            api = self._wrapper_of(inner.func, path) if isinstance(inner, cst.Call) and inner.args and not arg.star else None
            if api is None:
                return None
            apis.add(api)
        return apis.pop() if len(apis) == 1 else None

    def _made(
        self,
        values: list[cst.BaseExpression | None],
        scope: int,
        jitted: dict[tuple[int, str], str],
    ) -> tuple[str | None, ...] | None:
        """What every `return` of a function gives, position by position (one entry unless
        it returns tuples): the jit API of a jitted callable, or None; None overall when
        the returns disagree or none is jitted."""
        shapes = []
        for value in values:
            parts = value.elements if isinstance(value, cst.Tuple) else [value] if value is not None else []
            made: list[str | None] = []
            for part in parts:
                expr = part.value if isinstance(part, cst.Element) else part
                api = None
                if isinstance(expr, cst.Name):
                    api = jitted.get((scope, expr.value)) or None
                elif isinstance(expr, cst.Call):
                    api = self._wrapper_of(expr.func, [self.ctx.module])
                made.append(api)
            shapes.append(tuple(made))
        if not shapes or len(set(shapes)) != 1 or not any(shapes[0]):
            return None
        return shapes[0]

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
        jitted: `step(x)` where the scope `step` is read from binds it to a jitted callable,
        `self.step(x)` for a jitted method of the enclosing class or an attribute its methods
        set to one, and `jax.jit(f)(x)`."""
        func = call.func
        if isinstance(func, cst.Name):
            if func.value not in self.functions:
                return self._imported(func, call, ancestors)
            owner = self.ctx.binding_owner(func.value, [*ancestors, call])
            api = self._scoped.get((id(owner), func.value)) if owner is not None else None
            return api or None
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
            if func.value.value not in ("self", "cls"):
                rebound = self._rebound.get((func.value.value, func.attr.value))
                return rebound or self._held(func.value, call, ancestors) or self._imported(func, call, ancestors)
            if func.value.value in ("self", "cls"):
                owner = _enclosing_class(ancestors)
                if owner is None:
                    return None
                attr = func.attr.value
                api = self._scoped.get((id(owner), attr)) or self._attributes.get((id(owner), attr))
                return api or None
            return None
        if isinstance(func, cst.Call):
            return self._wrapper_of(func.func, ancestors)
        return None

    def origin(self, call: cst.Call, ancestors: Sequence[cst.CSTNode]) -> str | None:
        """How the callee of `call` comes to be jitted, as evidence: "a function jitted with
        `jax.jit` (decorated at line 12)", "jitted with `jax.jit` at line 14 (`step =
        jax.jit(...)`)", "a callable that module `pkg.steps` jits"; None when it is not (known
        to be) jitted."""
        from ._bindings import Kind
        from ._positions import line_of

        api = self.callee(call, ancestors)
        if api is None:
            return None
        module = self.ctx.module
        func = call.func
        if isinstance(func, cst.Call):
            return f"a function jitted in place with `{api}` (`{_spelled(module, func)}(...)`)"
        name = func.value if isinstance(func, cst.Name) else None
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
            if func.value.value in ("self", "cls"):
                owner = _enclosing_class(ancestors)
                method = next(
                    (m for m in owner.body.body if isinstance(m, cst.FunctionDef) and m.name.value == func.attr.value),
                    None,
                ) if owner is not None and isinstance(owner.body, cst.IndentedBlock) else None
                if method is not None and method.decorators:
                    line = line_of(module, method.decorators[0], [*_path_to(ancestors, owner), owner, owner.body, method])
                    return f"a method jitted with `{api}`" + (f" (decorated at line {line})" if line else "")
                return f"an attribute its class sets to a function jitted with `{api}`"
            if self._rebound.get((func.value.value, func.attr.value)):
                return f"a method the file rebinds to a function jitted with `{api}`"
            if self._held(func.value, call, ancestors):
                return f"a function jitted with `{api}`, held by `{func.value.value}` (built from jitted functions)"
        if name is not None and name in self.functions:
            for binding in self.ctx.bindings.of(name, [*ancestors, call]):
                node = binding.node
                if binding.kind is Kind.DEF and isinstance(node, cst.FunctionDef) and node.decorators:
                    line = line_of(module, node.decorators[0], [*binding.path, node])
                    return f"a function jitted with `{api}`" + (f" (decorated at line {line})" if line else "")
                value = binding.value if binding.value is not None else binding.source
                if binding.kind is Kind.ASSIGN and value is not None:
                    line = line_of(module, node, binding.path)
                    at = f" at line {line}" if line else ""
                    return f"bound{at} to a function jitted with `{api}` (from `{_spelled(module, value)}`)"
        resolved = self.ctx.resolve(func, ancestors, anchor=call)
        if resolved is not None and self.ctx.project is not None and self.ctx.project.jitted(resolved, self.ctx.module_name):
            return f"`{resolved}`, which another module of the project jits with `{api}`"
        return f"a function jitted with `{api}`"

    def _held(self, holder: cst.Name, call: cst.Call, ancestors: Sequence[cst.CSTNode]) -> str | None:
        """The jit API of `holder.method(...)` where the scope `holder` is read from binds it
        only to an object built from jitted callables (`_holders`)."""
        from ._bindings import Kind

        if not self._holders:
            return None
        path = [*ancestors, call]
        owner = self.ctx.binding_owner(holder.value, path)
        api = self._holders.get((id(owner), holder.value)) if owner is not None else None
        bindings = self.ctx.bindings.of(holder.value, path)
        if api is None or not all(b.kind is Kind.ASSIGN and isinstance(b.value, cst.Call) for b in bindings):
            return None
        return api

    def _traced_by_callers(self, node: cst.FunctionDef) -> bool:
        """A function whose every caller runs traced: its call sites in this file are all in
        traced code, it is handed to a transform (`lax.scan(step, ...)` in a nested def), or
        other modules of the project call it only from traced code (`CallGraph.mode`, asked
        only where a call, a reference or the project could say so)."""
        from ._callgraph import Mode

        graph = self.ctx.calls
        function = graph.function(node)
        if function is None or not (function.sites or function.uses or self.ctx.project is not None):
            return False
        return graph.mode(node) is Mode.TRACED

    def _imported(self, func: cst.BaseExpression, call: cst.Call, ancestors: Sequence[cst.CSTNode]) -> str | None:
        """The jit API of a callable another module of the project jits, called through its
        import (`from .steps import train_step`; `steps.train_step(...)`)."""
        project = self.ctx.project
        if project is None:
            return None
        name = self.ctx.resolve(func, ancestors, anchor=call)
        return project.jitted(name, self.ctx.module_name) if name is not None else None

    def jitted_def(self, function: cst.FunctionDef, owner: cst.CSTNode) -> bool:
        """Whether the def's name, in the scope `owner` whose body defines it, is bound to
        a jitted callable (a jit decorator, or `f = jax.jit(f)` beside it)."""
        return bool(self._scoped.get((id(owner), function.name.value)))

    def is_traced(self, ancestors: Sequence[cst.CSTNode]) -> bool:
        """Whether code at `ancestors` runs under a trace (inside a jitted function, or one
        handed to a jit wrapper), so its calls are staged, not dispatched one by one."""
        project = self.ctx.project
        for index, node in enumerate(ancestors):
            if isinstance(node, cst.FunctionDef):
                name = node.name.value
                if name in self.traced or id(node) in self.traced_defs:
                    return True
                if name in self.functions and self.jitted_def(node, _owner(ancestors[:index], self.ctx.module)):
                    return True
                if self._traced_by_callers(node):
                    return True
        return False


def _returned_defs(function: cst.FunctionDef, values: list[cst.BaseExpression | None]) -> set[int]:
    """The ids of the defs nested in `function` that every one of its `return`s (`values`)
    gives by name (`return train`); empty when a return gives anything else."""
    if not values or not isinstance(function.body, cst.IndentedBlock):
        return set()
    nested = {s.name.value: s for s in function.body.body if isinstance(s, cst.FunctionDef)}
    names = {v.value for v in values if isinstance(v, cst.Name)}
    if len(names) != 1 or any(not isinstance(v, cst.Name) for v in values) or not names <= set(nested):
        return set()
    return {id(nested[names.pop()])}


def _spelled(module: cst.Module, node: cst.CSTNode, limit: int = 40) -> str:
    text = " ".join(module.code_for_node(node).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _path_to(ancestors: Sequence[cst.CSTNode], node: cst.CSTNode) -> list[cst.CSTNode]:
    """The part of `ancestors` above `node`."""
    index = next((i for i, n in enumerate(ancestors) if n is node), len(ancestors))
    return list(ancestors[:index])


def _owner(path: Sequence[cst.CSTNode], module: cst.Module) -> cst.CSTNode:
    """The innermost def, class or lambda among `path` (the ancestors of a statement), or
    the module: the scope that the statement's assignments bind in."""
    for node in reversed(path):
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return node
    return module


def _target_list(target: cst.BaseAssignTargetExpression) -> list[str | None] | None:
    """`a` → [a]; `a, b` → [a, b] (None for a part that is not a plain name)."""
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [e.value.value if isinstance(e.value, cst.Name) else None for e in target.elements]
    return None


def _wraps_name(value: cst.BaseExpression, name: str) -> bool:
    """`jax.jit(name, ...)` or `partial(jax.jit, ...)(name)`."""
    return (
        isinstance(value, cst.Call)
        and bool(value.args)
        and isinstance(value.args[0].value, cst.Name)
        and value.args[0].value.value == name
    )


def _self_attribute(target: cst.BaseAssignTargetExpression, path: Sequence[cst.CSTNode]) -> tuple[int, str] | None:
    """(id of the class, attribute) for `self.attr = ...` in a method of a class."""
    if not (isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self"):
        return None
    owner = _enclosing_class(path)
    return None if owner is None else (id(owner), target.attr.value)


def _enclosing_class(ancestors: Sequence[cst.CSTNode]) -> cst.ClassDef | None:
    for node in reversed(ancestors):
        if isinstance(node, cst.ClassDef):
            return node
    return None


def _walk_statements(
    module: cst.Module,
) -> Iterator[tuple[cst.CSTNode, list[cst.CSTNode]]]:
    """Every def, assignment, call and return in the file with its ancestors."""
    from ._walk import iter_children

    # One shared ancestor list, cut back to each node's depth; a copy only for the nodes
    # yielded (a list per visited node was most of this walk's cost).
    stack: list[tuple[cst.CSTNode, int]] = [(module, 0)]
    path: list[cst.CSTNode] = []
    wanted = (cst.FunctionDef, cst.Assign, cst.Call, cst.Return)
    while stack:
        node, depth = stack.pop()
        del path[depth:]
        if isinstance(node, wanted):
            yield node, path[:]
        path.append(node)
        depth += 1
        stack.extend((child, depth) for child in reversed(list(iter_children(node))))
