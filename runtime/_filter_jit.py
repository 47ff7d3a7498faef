"""`filter_jit`: `eqx.filter_jit`'s semantics at close to the per-call cost of a `jax.jit` on a
flat list of array leaves.

What `eqx.filter_jit` does on every call, and what this module does instead:

- It flattens and partitions every argument (`hashable_partition`): hundreds of µs on a
  BERT-sized Module, since Module flattening runs Python per node. Here an argument this module
  has flattened before (typically the model and optimizer state the previous step returned)
  is found by identity in a table of *anchors*, which holds its dynamic leaves and an interned
  signature of its static part. Tuples, lists, dicts and NamedTuples around such objects are
  walked on every call (they are shallow); anything else is flattened as equinox does, and
  becomes an anchor for the next call.
- It hashes and compares the static part as a `jax.jit` static argument. Here the static part
  is a tuple of interned signatures (hash cached, equality by identity first) that selects one
  `jax.jit` of a flat-leaf function per static part, so the `jax.jit` sees lists of arrays
  only and its C++ fast path does the rest.
- It rebuilds the output with `combine`, a `tree_map` over two trees. Here the compiled
  function returns its array leaves and an output plan made once per trace; the output is built
  by code generated from the plan (Modules are made as equinox's unflatten makes them, without
  a Python callback from jax per node), checked once against `treedef.unflatten`.
- It blocks until the computation is done (since equinox 0.11.8, for `eqx.error_if`
  messages). Here calls return at once, as with `jax.jit`, unless `block=True`.

An anchor is sound because `eqx.Module`s are frozen dataclasses and tuples, NamedTuples and
`None` are immutable: an object made of such nodes keeps its leaves and static part for as
long as it lives (it is held by a weak reference, and forgotten when it dies). Lists and dicts
inside an anchored object are checked on every use against a snapshot of their items (by
identity), so changing them in place is seen. Objects with other node types are flattened on
every call.
"""

from __future__ import annotations

import functools as ft
import gc
import inspect
import logging
import operator
import types
import warnings
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload


if TYPE_CHECKING:
    import jax


__all__ = ["filter_jit", "FilterJit"]

_F = TypeVar("_F", bound=Callable[..., Any])
Donate = Literal["all", "all-except-first", "warn", "warn-except-first", "none"]

# donate mode -> (donate the first argument, donate the rest, hide unusable-donation warnings)
_DONATE: dict[str, tuple[bool, bool, bool]] = {
    "all": (True, True, True),
    "all-except-first": (False, True, True),
    "warn": (True, True, False),
    "warn-except-first": (False, True, False),
    "none": (False, False, False),
}
_JIT_ID = b"jaxlint.runtime.filter_jit"
_UNUSABLE_DONATION = "Some donated buffers were not usable*"
_JIT_KWARGS_REJECTED = ("static_argnums", "static_argnames", "donate_argnums", "donate_argnames",
                        "in_shardings", "out_shardings")  # fmt: skip

_gc_isenabled, _gc_disable, _gc_enable = gc.isenabled, gc.disable, gc.enable

# -- lazily imported (`import jaxlint.runtime` never imports jax) ----------------------------

_jax: Any = None
_jtu: Any = None
_Module: type = object
_Tracer: type = object
_ARRAY_TYPES: tuple[type, ...] = ()


def _load() -> None:
    global _jax, _jtu, _Module, _Tracer, _ARRAY_TYPES
    if _jax is not None:
        return
    try:
        import equinox
        import equinox._filters as eqx_filters
        import jax
        import jax.numpy
        import jax.tree_util as jtu
    except ImportError as e:  # pragma: no cover - exercised only without jax
        raise ImportError('jaxlint.runtime needs jax: pip install jax jaxlib equinox (the runtime extra)') from e
    import numpy as np

    # What `eqx.is_array` accepts: JAX arrays (tracers included), NumPy arrays and scalars.
    array_types = getattr(eqx_filters, "_ARRAY_TYPES", None)
    _ARRAY_TYPES = tuple(array_types) if array_types else (jax.Array, np.ndarray, np.generic)
    _Module = equinox.Module
    _Tracer = jax.core.Tracer
    _jtu = jtu
    _jax = jax


# -- signatures of the static part -----------------------------------------------------------

# Kinds of argument nodes.
_ARRAY, _STATIC, _NONE, _TUPLE, _LIST, _NAMEDTUPLE, _DICT, _TREE = range(8)
# How far an object with a `_TREE` signature can be recognised by identity (ordered: the
# least anchorable node of a tree decides for the tree).
_NOT_ANCHORABLE, _WITH_CONTAINERS, _FROZEN = range(3)


class _Sig:
    """The static part of one argument (or of a node inside one): what `eqx.filter_jit` would
    hash as a `jax.jit` static argument, and how many dynamic leaves the node holds.

    `_TREE` and `_STATIC` signatures are interned, so equal ones are the same object and compare
    by identity; container signatures compare their kind, type and children."""

    __slots__ = ("kind", "data", "children", "n", "hash", "anchorable", "paths", "__weakref__")

    def __init__(self, kind: int, data: Any, children: tuple[_Sig, ...], n: int, anchorable: int = 0) -> None:
        self.kind = kind
        self.data = data
        self.children = children
        self.n = n
        self.anchorable = anchorable
        self.paths: tuple[tuple[tuple[int, Any], ...], ...] | None = None  # to lists and dicts
        self.hash = hash((kind, data, children))

    def __hash__(self) -> int:
        return self.hash

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, _Sig) or self.hash != other.hash:
            return False
        return self.kind == other.kind and self.data == other.data and self.children == other.children

    def build(self, leaves: Iterator[Any]) -> Any:
        """The argument rebuilt from its dynamic leaves (used when tracing)."""
        kind = self.kind
        if kind == _ARRAY:
            return next(leaves)
        if kind == _STATIC:
            return self.data
        if kind == _NONE:
            return None
        if kind == _TREE:
            treedef, statics = self.data
            return treedef.unflatten([next(leaves) if s is None else s for s in statics])
        children = [c.build(leaves) for c in self.children]
        if kind == _TUPLE:
            return tuple(children)
        if kind == _LIST:
            return children
        if kind == _NAMEDTUPLE:
            return self.data(*children)
        return dict(zip(self.data, children))  # _DICT: keys sorted, as jax flattens them


_ARRAY_SIG = _Sig(_ARRAY, None, (), 1)
_NONE_SIG = _Sig(_NONE, None, (), 0)
_INTERNED: weakref.WeakValueDictionary[tuple[int, Any], _Sig] = weakref.WeakValueDictionary()


def _interned(kind: int, data: Any, n: int, anchorable: int = 0) -> _Sig:
    key = (kind, data)
    try:
        sig = _INTERNED.get(key)
    except TypeError as e:
        raise TypeError(
            f"filter_jit: a static (non-array) part of an argument is not hashable: {e}. "
            "Non-array leaves are compiled in as constants and must be hashable, as with "
            "`eqx.filter_jit`."
        ) from None
    if sig is None:
        sig = _INTERNED[key] = _Sig(kind, data, (), n, anchorable)
    return sig


def _tree_sig(treedef: Any, statics: tuple[Any, ...]) -> _Sig:
    sig = _INTERNED.get((_TREE, (treedef, statics)))
    if sig is None:
        n = sum(s is None for s in statics)
        sig = _interned(_TREE, (treedef, statics), n, _anchorable(treedef))
    return sig


# -- node kinds, decided once per type -------------------------------------------------------

_KIND: dict[type, int] = {}
_NODE_TYPES: dict[type, int] = {}
# Leaves that are never pytree nodes: static, hashed as they are.
_SCALARS = (int, float, bool, complex, str, bytes, types.FunctionType, types.BuiltinFunctionType)


def _kind_of(x: Any) -> int:
    t = type(x)
    kind = _KIND.get(t)
    if kind is None:
        kind = _KIND[t] = _classify(x)
    return kind


def _classify(x: Any) -> int:
    t = type(x)
    if isinstance(x, _ARRAY_TYPES):
        return _ARRAY
    if t in _SCALARS:
        return _STATIC
    if t is tuple:
        return _TUPLE
    if t is list:
        return _LIST
    if t is dict:
        return _DICT
    if x is None:
        return _NONE
    if _is_namedtuple(t):
        return _NAMEDTUPLE
    return _TREE


def _is_namedtuple(t: type) -> bool:
    """Whether jax flattens `t` as a NamedTuple (and not through a registration of its own)."""
    if not (issubclass(t, tuple) and hasattr(t, "_fields")):
        return False
    fields = getattr(t, "_fields", ())
    try:
        probe = t(*range(len(fields)))
    except Exception:  # noqa: BLE001 - a constructor with other needs: not a plain NamedTuple
        return False
    one_level = _jtu.tree_structure(probe, is_leaf=lambda y: y is not probe)
    return str(one_level).startswith("PyTreeDef(CustomNode(namedtuple[")


def _node_class(t: type) -> int:
    """`_FROZEN` for node types that cannot change after construction (Modules are frozen
    dataclasses), `_WITH_CONTAINERS` for lists and dicts (checked by a snapshot), otherwise
    `_NOT_ANCHORABLE` (a custom node jaxlint knows nothing about)."""
    cls = _NODE_TYPES.get(t)
    if cls is None:
        if t is tuple or t is type(None) or issubclass(t, _Module) or _is_namedtuple(t):
            cls = _FROZEN
        elif t is list or t is dict:
            cls = _WITH_CONTAINERS
        else:
            cls = _NOT_ANCHORABLE
        _NODE_TYPES[t] = cls
    return cls


def _anchorable(treedef: Any) -> int:
    """The least anchorable node class in `treedef` (leaves are arrays or static values)."""
    data = treedef.node_data()
    if data is None:
        return _FROZEN
    worst = _node_class(data[0])
    for child in treedef.children():
        if worst == _NOT_ANCHORABLE:
            break
        worst = min(worst, _anchorable(child))
    return worst


# -- anchors: objects whose leaves and signature are already known ---------------------------


class _Anchor:
    __slots__ = ("ref", "leaves", "sig", "checks")

    def __init__(self, ref: weakref.ref[Any], leaves: list[Any], sig: _Sig, checks: tuple[Any, ...]) -> None:
        self.ref = ref
        self.leaves = leaves
        self.sig = sig
        self.checks = checks  # (container, its children then) for the lists and dicts inside


_ANCHORS: dict[int, _Anchor] = {}
_WEAKREFABLE: dict[type, bool] = {}
_GET_ATTR, _GET_ITEM = 0, 1


def _anchor(obj: Any, leaves: list[Any], sig: _Sig) -> None:
    """Remember `obj`'s dynamic leaves and signature until it dies."""
    t = type(obj)
    ok = _WEAKREFABLE.get(t)
    if ok is None:
        ok = _WEAKREFABLE[t] = t.__weakrefoffset__ != 0
    if not ok:
        return
    checks: tuple[Any, ...] = ()
    if sig.anchorable == _WITH_CONTAINERS:
        if sig.paths is None:
            sig.paths = _container_paths(obj)
        if not sig.paths:
            return  # a container that cannot be reached by attribute or item access
        checks = tuple(_snapshot(_follow(obj, path)) for path in sig.paths)
    key = id(obj)

    def forget(ref: weakref.ref[Any], key: int = key) -> None:
        anchor = _ANCHORS.get(key)
        if anchor is not None and anchor.ref is ref:
            del _ANCHORS[key]

    _ANCHORS[key] = _Anchor(weakref.ref(obj, forget), leaves, sig, checks)


def _container_paths(obj: Any) -> tuple[tuple[tuple[int, Any], ...], ...]:
    """Accessors from `obj` to every list and dict inside it; () when one cannot be reached."""
    found: list[tuple[tuple[int, Any], ...]] = []

    def visit(node: Any, prefix: tuple[tuple[int, Any], ...]) -> bool:
        is_container = lambda y: y is not node and type(y) in (list, dict)  # noqa: E731
        for keys, sub in _jtu.tree_flatten_with_path(node, is_leaf=is_container)[0]:
            if type(sub) not in (list, dict):
                continue
            path = list(prefix)
            for key in keys:
                if isinstance(key, _jtu.GetAttrKey):
                    path.append((_GET_ATTR, key.name))
                elif isinstance(key, _jtu.SequenceKey):
                    path.append((_GET_ITEM, key.idx))
                elif isinstance(key, _jtu.DictKey):
                    path.append((_GET_ITEM, key.key))
                else:
                    return False
            found.append(tuple(path))
            if not visit(sub, tuple(path)):
                return False
        return True

    return tuple(found) if visit(obj, ()) else ()


def _follow(obj: Any, path: tuple[tuple[int, Any], ...]) -> Any:
    for op, key in path:
        obj = getattr(obj, key) if op == _GET_ATTR else obj[key]
    return obj


def _snapshot(container: Any) -> tuple[Any, ...]:
    if type(container) is dict:
        return (container, tuple(container), tuple(container.values()))
    return (container, tuple(container))


def _unchanged(checks: tuple[Any, ...]) -> bool:
    """Whether the lists and dicts inside an anchored object still hold the same objects."""
    is_ = operator.is_
    for check in checks:
        container = check[0]
        if len(check) == 3:
            keys, values = check[1], check[2]
            if len(container) != len(keys) or not all(map(is_, container, keys)) or not all(
                map(is_, container.values(), values)
            ):
                return False
        else:
            items = check[1]
            if len(container) != len(items) or not all(map(is_, container, items)):
                return False
    return True


def _concrete(leaves: list[Any]) -> bool:
    return not any(isinstance(x, _Tracer) for x in leaves)


def _sig_of(x: Any, dynamic: list[Any]) -> _Sig:
    """`x`'s signature; appends its dynamic leaves to `dynamic` in `jax.tree_util` order."""
    kind = _KIND.get(type(x))
    if kind is None:
        kind = _kind_of(x)
    if kind == _ARRAY:
        dynamic.append(x)
        return _ARRAY_SIG
    if kind == _TREE:
        anchor = _ANCHORS.get(id(x))
        if anchor is not None and anchor.ref() is x and (not anchor.checks or _unchanged(anchor.checks)):
            dynamic.extend(anchor.leaves)
            return anchor.sig
        return _flatten_tree(x, dynamic)
    if kind == _STATIC:
        return _interned(_STATIC, x, 0)
    if kind == _NONE:
        return _NONE_SIG
    if kind == _DICT:
        try:
            keys = tuple(sorted(x))
        except TypeError:
            return _flatten_tree(x, dynamic)
        children = tuple([_sig_of(x[k], dynamic) for k in keys])
        return _Sig(_DICT, keys, children, sum([c.n for c in children]))
    # tuple, list, NamedTuple
    children = tuple([_sig_of(c, dynamic) for c in x])
    return _Sig(kind, type(x) if kind == _NAMEDTUPLE else None, children, sum([c.n for c in children]))


def _flatten_tree(x: Any, dynamic: list[Any]) -> _Sig:
    """What `eqx.filter_jit` does to every argument on every call, done once per object."""
    leaves, treedef = _jtu.tree_flatten(x)
    if treedef.num_nodes == 1 and treedef.num_leaves == 1:  # a leaf that is not an array
        if isinstance(leaves[0], _ARRAY_TYPES):
            dynamic.append(leaves[0])
            return _ARRAY_SIG
        return _interned(_STATIC, leaves[0], 0)
    is_dynamic = [isinstance(leaf, _ARRAY_TYPES) for leaf in leaves]
    statics = tuple([None if d else leaf for d, leaf in zip(is_dynamic, leaves)])
    mine = [leaf for d, leaf in zip(is_dynamic, leaves) if d]
    sig = _tree_sig(treedef, statics)
    if sig.anchorable and _concrete(mine):
        _anchor(x, mine, sig)
    dynamic.extend(mine)
    return sig


# -- outputs ---------------------------------------------------------------------------------


class _Box:
    """Carries the output plan out of the compiled function as pytree auxiliary data."""

    __slots__ = ("plan",)

    def __init__(self, plan: _OutputPlan) -> None:
        self.plan = plan


def _register_box() -> None:
    _jtu.register_pytree_node(_Box, lambda box: ((), box.plan), lambda plan, _: _Box(plan))


class _OutputPlan:
    """How to rebuild a function's output from its array leaves; made once per trace."""

    __slots__ = ("treedef", "merge", "extra", "anchors", "is_dynamic", "builder")

    def __init__(self, leaves: list[Any], treedef: Any) -> None:
        self.treedef = treedef
        is_dynamic = [isinstance(leaf, _ARRAY_TYPES) for leaf in leaves]
        self.is_dynamic = is_dynamic
        n_dynamic = sum(is_dynamic)
        statics = [leaf for d, leaf in zip(is_dynamic, leaves) if not d]
        order: list[int] = []
        next_dynamic, next_static = 0, n_dynamic
        for d in is_dynamic:
            if d:
                order.append(next_dynamic)
                next_dynamic += 1
            else:
                order.append(next_static)
                next_static += 1
        # `merge(dynamic + extra)` gives all leaves in order; None when they are all dynamic.
        self.extra = statics
        if not statics:
            self.merge = None
        elif len(order) == 1:
            self.merge = lambda seq, i=order[0]: (seq[i],)
        else:
            self.merge = operator.itemgetter(*order)
        # Frozen subtrees reachable through containers become anchors of the next call.
        self.anchors: list[tuple[tuple[Any, ...], int, int, _Sig]] = []
        self._find_anchors(treedef, (), 0, 0, is_dynamic, leaves)
        # Generated code that builds the output without a callback per node (None: not made
        # yet, False: this structure is unflattened by jax).
        self.builder: Callable[[list[Any]], Any] | None | bool = None

    def _find_anchors(
        self, treedef: Any, path: tuple[Any, ...], start: int, dyn_start: int,
        is_dynamic: list[bool], leaves: list[Any],
    ) -> None:  # fmt: skip
        data = treedef.node_data()
        if data is None:
            return
        node_type, aux = data
        if node_type in (tuple, list, dict) or _is_namedtuple(node_type):
            keys = aux if node_type is dict else range(len(treedef.children()))
            for key, child in zip(keys, treedef.children()):
                self._find_anchors(child, (*path, key), start, dyn_start, is_dynamic, leaves)
                n = child.num_leaves
                dyn_start += sum(is_dynamic[start : start + n])
                start += n
            return
        if node_type is type(None):
            return
        n = treedef.num_leaves
        span = is_dynamic[start : start + n]
        statics = tuple(None if d else leaf for d, leaf in zip(span, leaves[start : start + n]))
        sig = _tree_sig(treedef, statics)
        if sig.anchorable:
            self.anchors.append((path, dyn_start, dyn_start + sum(span), sig))

    def build(self, dynamic: list[Any]) -> Any:
        builder = self.builder
        if builder:
            out = builder(dynamic)  # type: ignore[operator]
        else:
            merged = dynamic if self.merge is None else self.merge([*dynamic, *self.extra])
            out = self.treedef.unflatten(merged)
            if builder is None and not (dynamic and isinstance(dynamic[0], _Tracer)):
                self.builder = _make_builder(self.treedef, list(merged), self.is_dynamic, out, dynamic)
        if self.anchors and dynamic and not isinstance(dynamic[0], _Tracer):
            for path, lo, hi, sig in self.anchors:
                node = out
                for key in path:
                    node = node[key]
                _anchor(node, dynamic[lo:hi], sig)
        return out


_PLAIN_LAYOUT: dict[type, bool] = {}


def _plain_layout(t: type) -> bool:
    """Whether instances of `t` keep all their state in `__dict__` (no slots)."""
    plain = _PLAIN_LAYOUT.get(t)
    if plain is None:
        plain = t.__dictoffset__ != 0 and all(
            set(getattr(c, "__slots__", ()) or ()) <= {"__dict__", "__weakref__"}
            for c in t.__mro__
            if "__slots__" in vars(c)
        )
        _PLAIN_LAYOUT[t] = plain
    return plain


def _make_builder(
    treedef: Any, merged: list[Any], is_dynamic: list[bool], reference: Any, dynamic: list[Any]
) -> Callable[[list[Any]], Any] | bool:
    """Python code that builds what `treedef.unflatten` builds from these leaves, for any
    dynamic leaves: Modules are made as equinox's unflatten makes them (`object.__new__`,
    then their attributes), copying the `__dict__` layout of `reference`, the real
    unflatten's result. Returns False when some node is not understood, or when the code
    does not rebuild `reference` exactly."""
    dyn_index: list[int | None] = []
    count = 0
    for d in is_dynamic:
        dyn_index.append(count if d else None)
        count += d
    names: dict[str, Any] = {"new": object.__new__, "ga": object.__getattribute__}
    lines: list[str] = []

    def const(value: Any) -> str:
        name = f"K{len(names)}"
        names[name] = value
        return name

    def leaf(pos: int) -> str:
        index = dyn_index[pos]
        return f"L[{index}]" if index is not None else const(merged[pos])

    def gen_all(tds: Sequence[Any], objs: Sequence[Any], pos: int) -> tuple[list[str], int] | None:
        """Expressions for sibling subtrees, their leaves numbered from `pos` on."""
        exprs = []
        for td, obj in zip(tds, objs):
            made = gen(td, obj, pos)
            if made is None:
                return None
            exprs.append(made[0])
            pos = made[1]
        return exprs, pos

    def gen(td: Any, obj: Any, pos: int) -> tuple[str, int] | None:
        data = td.node_data()
        if data is None:
            return leaf(pos), pos + 1
        node_type, aux = data
        children = td.children()
        if node_type is type(None):
            return "None", pos
        if node_type in (tuple, list, dict) or _is_namedtuple(node_type):
            subs = list(obj.values()) if node_type is dict else list(obj)
            if len(subs) != len(children):
                return None
            made_children = gen_all(children, subs, pos)
            if made_children is None:
                return None
            exprs, pos = made_children
            if node_type is tuple:
                return "(" + "".join(f"{e}, " for e in exprs) + ")", pos
            if node_type is list:
                return "[" + ", ".join(exprs) + "]", pos
            if node_type is dict:
                return "{" + ", ".join(f"{const(k)}: {e}" for k, e in zip(aux, exprs)) + "}", pos
            return f"{const(node_type)}({', '.join(exprs)})", pos
        if isinstance(node_type, type) and issubclass(node_type, _Module) and _plain_layout(node_type):
            subs = _jtu.tree_flatten(obj, is_leaf=lambda y: y is not obj)[0]
            if len(subs) != len(children) or type(obj) is not node_type:
                return None
            made_children = gen_all(children, subs, pos)
            if made_children is None:
                return None
            exprs, pos = made_children
            var = f"o{len(lines)}"
            # `object.__new__`, then the instance dict filled in the reference's order (faster
            # than `object.__setattr__` per field, or than assigning a new `__dict__`).
            line = [f"{var} = new({const(node_type)})", f"d = ga({var}, '__dict__')"]
            for attr, value in vars(obj).items():
                match = next((e for e, c in zip(exprs, subs) if c is value), None)
                line.append(f"d[{attr!r}] = {match if match is not None else const(value)}")
            lines.append("  " + "; ".join(line))
            return var, pos
        # Any other node: jax's own unflatten of this subtree.
        n = td.num_leaves
        exprs = [leaf(p) for p in range(pos, pos + n)]
        return f"{const(td)}.unflatten([{', '.join(exprs)}])", pos + n

    made = gen(treedef, reference, 0)
    if made is None:
        return False
    # Constants are closure cells of a factory (faster to read than globals).
    body = "\n".join("    " + line for line in lines)
    source = (
        f"def factory({', '.join(names)}):\n"
        f"  def build(L):\n{body}\n      return {made[0]}\n"
        "  return build\n"
    )
    try:
        scope: dict[str, Any] = {}
        exec(compile(source, "<jaxlint.runtime.filter_jit output builder>", "exec"), scope)  # noqa: S102
        builder = scope["factory"](**names)
        rebuilt = builder(dynamic)
        leaves, rebuilt_def = _jtu.tree_flatten(rebuilt)
    except Exception:  # noqa: BLE001 - fall back to jax's unflatten
        return False
    if rebuilt_def != treedef or len(leaves) != len(merged) or not all(map(operator.is_, leaves, merged)):
        return False
    return builder


# -- compiled functions, shared by every wrapper of one function ----------------------------


class _Entry:
    """One static part of the arguments: its `jax.jit` over flat lists of array leaves."""

    __slots__ = ("jitted", "key")

    def __init__(self, jitted: Any, key: tuple[Any, ...]) -> None:
        self.jitted = jitted
        self.key = key


# function (weakly) -> (donate mode, jit kwargs) -> {static key: _Entry}; like equinox, two
# wrappers of the same function share their compiled code.
_TABLES: weakref.WeakKeyDictionary[Any, dict[Any, dict[Any, _Entry]]] = weakref.WeakKeyDictionary()
_SHARED_TABLES: dict[Any, dict[Any, _Entry]] = {}
_pending_filters: list[Any] = []


def _table_for(fun: Any, config: Any) -> dict[Any, _Entry]:
    if type(fun) is types.FunctionType:
        per_config = _TABLES.setdefault(fun, {})
        return per_config.setdefault(config, {})
    # Other callables (Modules, partials, callable objects) are keyed by their static part,
    # which is already in every static key.
    return _SHARED_TABLES.setdefault(config, {})


def _names(fun: Any) -> tuple[str, str]:
    while True:
        if hasattr(fun, "__wrapped__"):
            fun = fun.__wrapped__
        elif isinstance(fun, ft.partial):
            fun = fun.func
        else:
            break
    try:
        return fun.__name__, fun.__qualname__
    except AttributeError:
        return type(fun).__name__, type(fun).__qualname__


class FilterJit:
    """A function compiled by `filter_jit`. Call it like the function; see `filter_jit`."""

    def __init__(self, fun: Callable[..., Any], donate: str, block: bool, jitkwargs: dict[str, Any]) -> None:
        _load()
        if not _BOX_REGISTERED:
            _register_once()
        self.__wrapped__ = fun
        ft.update_wrapper(self, fun, updated=())
        self._fun = fun
        self._block = block
        self._donate_first, self._donate_rest, self._hide_warning = _DONATE[donate]
        self._jitkwargs = jitkwargs
        self._name, self._qualname = _names(fun)
        self._signature = inspect.signature(fun)
        self._fast_arity = _positional_arity(self._signature)
        fun_dynamic: list[Any] = []
        self._fun_sig = _sig_of(fun, fun_dynamic)
        self._fun_dynamic = fun_dynamic
        config = (donate, block, tuple(sorted((k, _hashable(v)) for k, v in jitkwargs.items())))
        self._table = _table_for(fun, config)

    # -- calling -----------------------------------------------------------------------------

    def _flatten(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], list[Any], int]:
        """The static key of a call, its dynamic leaves, and how many belong to the first argument."""
        lo_hi = self._fast_arity
        if kwargs or lo_hi is None or not (lo_hi[0] <= len(args) <= lo_hi[1]):
            bound = self._signature.bind(*args, **kwargs)
            args, kwargs = bound.args, bound.kwargs
        dynamic: list[Any] = []
        sigs: list[Any] = [self._fun_sig]
        n_first = 0
        if args:
            sigs.append(_sig_of(args[0], dynamic))
            n_first = len(dynamic)
            for arg in args[1:]:
                sigs.append(_sig_of(arg, dynamic))
        if kwargs:
            names = tuple(sorted(kwargs))
            sigs.append(names)
            for name in names:
                sigs.append(_sig_of(kwargs[name], dynamic))
        if self._fun_dynamic:
            dynamic.extend(self._fun_dynamic)
        return tuple(sigs), dynamic, n_first

    def _groups(self, dynamic: list[Any], n_first: int) -> tuple[list[Any], ...]:
        if self._donate_first == self._donate_rest:
            return (dynamic,)
        return (dynamic[:n_first], dynamic[n_first:])

    def __call__(self, /, *args: Any, **kwargs: Any) -> Any:
        # Marks this frame for `eqx.error_if`, which records the stack when it is traced.
        __equinox_jit_id__ = _JIT_ID  # noqa: F841
        # The call makes a new model and optimizer state (hundreds of objects) before the
        # caller drops the old ones; collecting garbage in between would traverse them all
        # for nothing, so collection waits until the call returns.
        collecting = _gc_isenabled()
        if collecting:
            _gc_disable()
        try:
            key, dynamic, n_first = self._flatten(args, kwargs)
            entry = self._table.get(key)
            if entry is None:
                entry = self._table[key] = self._compile(key)
            depth = len(_pending_filters)
            try:
                if self._donate_first == self._donate_rest:
                    out = entry.jitted(dynamic)
                else:
                    out = entry.jitted(dynamic[:n_first], dynamic[n_first:])
                if self._block:
                    marker = out[2]
                    if not isinstance(marker, _Tracer):
                        _CALLBACK_LOGGER.addFilter(_QUIET_CALLBACK)
                        try:
                            marker.block_until_ready()
                        finally:
                            _CALLBACK_LOGGER.removeFilter(_QUIET_CALLBACK)
            except Exception as error:  # noqa: BLE001 - re-raised
                _raise_equinox_error(error)
                raise
            finally:
                if len(_pending_filters) > depth:
                    _restore_filters(depth)
            return out[1].plan.build(out[0])
        finally:
            if collecting:
                _gc_enable()


    def _compile(self, key: tuple[Any, ...]) -> _Entry:
        hide_warning = self._hide_warning
        block = self._block

        def flat(*groups: list[Any]) -> tuple[Any, ...]:
            """The function on flat lists of array leaves (traced once per compile)."""
            if hide_warning:
                _hide_unusable_donation_warning()
            leaves = iter([leaf for group in groups for leaf in group])
            sigs = list(key)
            fn = sigs[0].build(iter(_fun_leaves(key, groups)))
            args: list[Any] = []
            kwargs: dict[str, Any] = {}
            for index, sig in enumerate(sigs[1:], start=1):
                if isinstance(sig, tuple):  # keyword names, then their signatures
                    for name, kw_sig in zip(sig, sigs[index + 1 :]):
                        kwargs[name] = kw_sig.build(leaves)
                    break
                args.append(sig.build(leaves))
            out_leaves, out_treedef = _jtu.tree_flatten(fn(*args, **kwargs))
            plan = _OutputPlan(out_leaves, out_treedef)
            dynamic_out = [leaf for leaf in out_leaves if isinstance(leaf, _ARRAY_TYPES)]
            if block:
                return dynamic_out, _Box(plan), _jax.numpy.zeros((), "int32")
            return dynamic_out, _Box(plan)

        flat.__name__ = self._name
        flat.__qualname__ = self._qualname
        if self._donate_first == self._donate_rest:
            donate = (0,) if self._donate_first else ()
        else:
            donate = (1,)
        jitted = _jax.jit(flat, donate_argnums=donate, **self._jitkwargs)
        return _Entry(jitted, key)

    # -- methods and AOT ---------------------------------------------------------------------

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        if instance is None:
            return self
        import equinox

        return equinox.Partial(self, instance)

    def lower(self, /, *args: Any, **kwargs: Any) -> Lowered:
        """Trace and lower for these arguments (ahead-of-time compilation), like
        `eqx.filter_jit(f).lower(...)`; `.compile()` gives a callable that accepts arguments
        with the same static part."""
        key, dynamic, n_first = self._flatten(args, kwargs)
        entry = self._table.get(key)
        if entry is None:
            entry = self._table[key] = self._compile(key)
        depth = len(_pending_filters)
        try:
            lowered = entry.jitted.lower(*self._groups(dynamic, n_first))
        finally:
            if len(_pending_filters) > depth:
                _restore_filters(depth)
        return Lowered(self, key, lowered)

    def __repr__(self) -> str:
        return f"<jaxlint.runtime.filter_jit of {self._qualname}>"


def _fun_leaves(key: tuple[Any, ...], groups: tuple[list[Any], ...]) -> list[Any]:
    """The function's own dynamic leaves: the last `n` of the call's leaves."""
    n = key[0].n
    if not n:
        return []
    flat = [leaf for group in groups for leaf in group]
    return flat[len(flat) - n :]


class Lowered:
    """`filter_jit(f).lower(...)`: call `.compile()`, or read `.as_text()`."""

    def __init__(self, wrapper: FilterJit, key: tuple[Any, ...], lowered: Any) -> None:
        self._wrapper = wrapper
        self._key = key
        self.lowered = lowered

    def as_text(self) -> str:
        return self.lowered.as_text()

    def compile(self, compiler_options: dict[str, Any] | None = None) -> Compiled:
        return Compiled(self._wrapper, self._key, self.lowered.compile(compiler_options=compiler_options))


class Compiled:
    """A compiled `filter_jit` function; accepts arguments with the static part it was
    lowered for, and raises `ValueError` for any other."""

    def __init__(self, wrapper: FilterJit, key: tuple[Any, ...], compiled: Any) -> None:
        self._wrapper = wrapper
        self._key = key
        self.compiled = compiled

    def __call__(self, /, *args: Any, **kwargs: Any) -> Any:
        wrapper = self._wrapper
        key, dynamic, n_first = wrapper._flatten(args, kwargs)
        if key != self._key:
            raise ValueError(
                "filter_jit: these arguments differ in their static (non-array) part or "
                "structure from those the function was lowered for; lower it again"
            )
        try:
            out = self.compiled(*wrapper._groups(dynamic, n_first))
            if wrapper._block:
                out[2].block_until_ready()
        except Exception as error:  # noqa: BLE001 - re-raised
            _raise_equinox_error(error)
            raise
        return out[1].plan.build(out[0])


# -- helpers ---------------------------------------------------------------------------------

_BOX_REGISTERED = False


def _register_once() -> None:
    global _BOX_REGISTERED
    if not _BOX_REGISTERED:
        _register_box()
        _BOX_REGISTERED = True


def _positional_arity(signature: inspect.Signature) -> tuple[int, int] | None:
    """(required, most) positional arguments when a call with only positional arguments in
    that range binds to itself, so `Signature.bind` can be skipped; None otherwise."""
    required = most = 0
    for parameter in signature.parameters.values():
        kind = parameter.kind
        if kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD):
            most += 1
            if parameter.default is parameter.empty:
                required = most
        elif kind is parameter.VAR_POSITIONAL:
            most = 1 << 30
        elif kind is parameter.KEYWORD_ONLY and parameter.default is parameter.empty:
            return None
    return required, most


def _hashable(value: Any) -> Any:
    try:
        hash(value)
    except TypeError:
        return id(value)
    return value


def _hide_unusable_donation_warning() -> None:
    """Called while tracing: hide the warning jax emits when it lowers this trace (the
    same call), as `eqx.filter_jit(donate="all")` does, without a `catch_warnings` per call."""
    _pending_filters.append(list(warnings.filters))
    warnings.filterwarnings("ignore", message=_UNUSABLE_DONATION)


def _restore_filters(depth: int) -> None:
    """Undo the filters pushed while tracing inside the call that started at `depth`."""
    saved = _pending_filters[depth]
    del _pending_filters[depth:]
    warnings.filters[:] = saved
    warnings._filters_mutated()  # type: ignore[attr-defined]


class _QuietCallbackFailure(logging.Filter):
    """Drops jax's log of the failed callback behind an `eqx.error_if` (as equinox does),
    while a blocking call waits; the error is raised with a better message instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != "jax.pure_callback failed"


_CALLBACK_LOGGER = logging.getLogger("jax._src.callback")
_QUIET_CALLBACK = _QuietCallbackFailure()


def _raise_equinox_error(error: Exception) -> None:
    """Re-raise an `eqx.error_if` failure as equinox's own `filter_jit` does."""
    try:
        from equinox import _jit as eqx_jit
    except ImportError:  # pragma: no cover
        return
    info = getattr(eqx_jit, "last_error_info", None)
    if info is None or "_EquinoxRuntimeError: " not in str(error):
        return
    message, stack = info
    pieces = []
    for piece in stack:  # innermost frame first, up to the call of this wrapper
        if piece == _JIT_ID:
            break
        if type(piece) is str:
            pieces.append(piece)
    raise eqx_jit.EquinoxRuntimeError(
        eqx_jit._on_error_msg.format(msg=message, stack="".join(reversed(pieces)))
    ) from None


@overload
def filter_jit(
    *, donate: Donate = "none", block: bool = False, **jitkwargs: Any
) -> Callable[[_F], _F]: ...


@overload
def filter_jit(fun: _F, *, donate: Donate = "none", block: bool = False, **jitkwargs: Any) -> _F: ...


def filter_jit(
    fun: Any = None, *, donate: Donate = "none", block: bool = False, **jitkwargs: Any
) -> Any:
    """`eqx.filter_jit` without the per-call overhead: same arguments, same results.

    Target of JL002 (filter-jit-per-call). Use it for a function called once per training step
    with a Module and an optimizer state: `eqx.filter_jit` flattens, partitions and recombines
    every argument and output on every call and then waits for the result; this wrapper
    recognises the pytrees it has seen before (usually the ones it returned last step) and
    costs about what a `jax.jit` over a flat list of the array leaves costs.

    !!! Example

        ```python
        import equinox as eqx
        import jax
        import jax.numpy as jnp
        from jaxlint.runtime import filter_jit

        model = eqx.nn.MLP(2, 1, 8, 2, key=jax.random.PRNGKey(0))

        @filter_jit(donate="all-except-first")
        def step(batch, model):
            grads = eqx.filter_grad(lambda m: jnp.mean(jax.vmap(m)(batch) ** 2))(model)
            return eqx.apply_updates(model, jax.tree.map(lambda g: -0.1 * g, grads))

        batch = jnp.ones((4, 2))
        for _ in range(3):
            model = step(batch, model)
        ```

    Arrays (JAX and NumPy) in the arguments are traced and everything else is static (a
    compile-time constant, hashed), exactly as with `eqx.filter_jit`, so the same calls compile
    and the same calls reuse a compilation: a changed Python field, `eqx.nn.inference_mode`,
    another activation function or another structure compiles anew.

    **Arguments:**

    - `fun`: the function to compile. Without it, returns a decorator.
    - `donate` (keyword-only): as `eqx.filter_jit`: `"all"` (donate every array argument, hide
      jax's warning about unusable donations), `"all-except-first"`, `"warn"`,
      `"warn-except-first"` (the same, keeping the warnings) or `"none"` (the default).
    - `block` (keyword-only): wait for the computation to finish before returning, as
      `eqx.filter_jit` does since equinox 0.11.8, and turn `eqx.error_if` failures into
      `EquinoxRuntimeError` at the call. Default False: calls return at once, as with
      `jax.jit`, and an `eqx.error_if` failure surfaces when a result is first read (as a
      `JaxRuntimeError`), which may be a later line or a later step.
    - `**jitkwargs`: passed to `jax.jit` (not `static_argnums`, `donate_argnums`,
      `in_shardings` or `out_shardings`, which `eqx.filter_jit` rejects too).

    **Returns:**

    A `FilterJit` callable with the function's name and docstring. It works as a method
    decorator (the instance is the first argument, as with `eqx.filter_jit`), and
    `.lower(*args, **kwargs)` gives an ahead-of-time `Lowered` (`.as_text()`, `.compile()`).

    **Raises:**

    `ValueError` for an unknown `donate` or a rejected jit keyword; `TypeError` when a static
    part is not hashable or the arguments do not fit the function's signature.

    !!! info "Differences from `eqx.filter_jit`"

        - Calls do not block unless `block=True` (see above). Timing code that relied on the
          block must now call `jax.block_until_ready` on the result.
        - The wrapper is not a pytree: `eqx.filter_jit(f)` is a Module whose leaves are the
          arrays of `f` (when `f` is a Module); this one is a static leaf.
        - Arguments are recognised by identity only when their whole pytree is made of
          frozen nodes (`eqx.Module`s, tuples, NamedTuples, `None`); do not change such an
          object in place with `object.__setattr__`. Lists and dicts are read on every call.

    !!! info "See also"

        `eqx.filter_jit`. Measured on CPU with `python bench/filter_jit.py` (a BERT-base-shaped
        encoder, 201 array leaves, adam state in and out): see the README's table for the
        per-call overhead against `eqx.filter_jit` and a `jax.jit` on flat leaves.
    """
    if donate not in _DONATE:
        raise ValueError(
            f"filter_jit(donate={donate!r}): must be one of 'all', 'all-except-first', 'warn', "
            "'warn-except-first' or 'none'"
        )
    rejected = [k for k in _JIT_KWARGS_REJECTED if k in jitkwargs]
    if rejected:
        raise ValueError(
            f"filter_jit: {', '.join(rejected)} cannot be passed; arrays are traced and "
            "everything else is static, and `donate=` chooses the donated arguments"
        )
    if fun is None:
        return ft.partial(filter_jit, donate=donate, block=block, **jitkwargs)
    if not callable(fun):
        raise TypeError(f"filter_jit: expected a callable, got {type(fun).__name__}")
    return FilterJit(fun, donate, block, jitkwargs)
