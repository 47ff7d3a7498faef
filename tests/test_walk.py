"""The engine's trivia-skipping walk visits every node that can hold code, in an order rules
can rely on, with the right ancestors."""

from __future__ import annotations

import textwrap
from pathlib import Path

import libcst as cst
import pytest

from jaxlint._walk import iter_children, walk


ROOT = Path(__file__).resolve().parent.parent

# Nodes that never hold code: whitespace, comments, punctuation, operators, keywords.
TRIVIA: tuple[type[cst.CSTNode], ...] = (
    cst.BaseParenthesizableWhitespace,
    cst.Comment,
    cst.EmptyLine,
    cst.Newline,
    cst.TrailingWhitespace,
    cst.Comma,
    cst.Dot,
    cst.Colon,
    cst.Semicolon,
    cst.AssignEqual,
    cst.LeftParen,
    cst.RightParen,
    cst.LeftSquareBracket,
    cst.RightSquareBracket,
    cst.LeftCurlyBrace,
    cst.RightCurlyBrace,
    cst.BaseBinaryOp,
    cst.BaseBooleanOp,
    cst.BaseCompOp,
    cst.BaseUnaryOp,
    cst.BaseAugOp,
    cst.Asynchronous,
    cst.ImportStar,
    cst.ParamStar,
    cst.ParamSlash,
    cst.MaybeSentinel,
)


def _is_trivia(node: cst.CSTNode) -> bool:
    return isinstance(node, TRIVIA)


class _Recorder(cst.CSTVisitor):
    """libcst's own visitor: every node, in order, with its ancestors."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[cst.CSTNode] = []
        self.nodes: list[tuple[cst.CSTNode, tuple[int, ...]]] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if not _is_trivia(node):
            self.nodes.append((node, tuple(id(a) for a in self.stack if not _is_trivia(a))))
        self.stack.append(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.stack.pop()


def libcst_nodes(module: cst.Module) -> list[tuple[cst.CSTNode, tuple[int, ...]]]:
    recorder = _Recorder()
    module.visit(recorder)
    return recorder.nodes


class _Any(dict):  # type: ignore[type-arg]
    """A handler table that calls `handler` for every node type."""

    def __init__(self, handler) -> None:  # type: ignore[no-untyped-def]
        super().__init__()
        self._handlers = [handler]

    def get(self, key, default=None):  # type: ignore[no-untyped-def, override]
        return self._handlers


def walk_nodes(module: cst.Module) -> list[tuple[cst.CSTNode, tuple[int, ...]]]:
    ancestors: list[cst.CSTNode] = []
    seen: list[tuple[cst.CSTNode, tuple[int, ...]]] = []

    def record(node: cst.CSTNode) -> None:
        seen.append((node, tuple(id(a) for a in ancestors)))

    walk(module, _Any(record), {}, ancestors)
    assert ancestors == []
    return seen


SYNTHETIC = textwrap.dedent(
    '''
    """Docstring."""
    from __future__ import annotations
    import jax.numpy as jnp, equinox as eqx
    from . import sibling
    from ..pkg import (a as b, c)
    from os import *

    x: int = 1; y = 2
    x += 1
    del y
    a, *rest = [1, 2, 3]
    d = {"k": 1, **other}
    s = {1, 2}
    t = (1,)
    z = not a and b or c if a is not None else -x ** 2 // 3 @ m
    sl = arr[1:2, ::3, ..., None]
    f = f"{x!r:>{width}} {y=}"
    cat = "a" "b"
    lam = lambda p, /, q=1, *args, r, s=2, **kw: (p, q)
    w = (n := 10)
    g = [i for i in range(3) if i for j in range(i)]
    gen = (i async for i in aiter())
    dc = {k: v for k, v in items}
    sc = {k for k in items}
    assert x, "message"
    global_value = yield_value = None

    @decorator(arg)
    @other.decorator
    async def function(a: int, b: "str" = "x", *, c, **kwargs) -> list[int]:
        global g
        nonlocal_value = 1
        async with open(p) as fh, lock:
            await thing()
        async for item in source():
            yield item
        return (yield from other())

    @dataclass
    class Model(Base, metaclass=Meta):
        field: int = 0

        def method(self):
            def inner():
                nonlocal self
            try:
                raise ValueError("x") from None
            except (ValueError, TypeError) as error:
                pass
            else:
                pass
            finally:
                pass
            try:
                pass
            except* OSError:
                pass
            while True:
                break
            else:
                continue
            for i in range(3):
                pass
            else:
                pass
            if a:
                pass
            elif b:
                pass
            else:
                pass
            with a as (b, c):
                pass

    match command:
        case [Point(x=0, y=0), *others] if others:
            pass
        case {"key": value, **rest}:
            pass
        case 1 | 2 | "three" as number:
            pass
        case None | True:
            pass
        case _:
            pass

    type Alias[T] = list[T]

    def generic[T: int, *Ts, **P](x: T) -> T:
        return x

    class Box[T]:
        pass
    '''
)


def _corpus() -> list[Path]:
    files = sorted((ROOT / "fixtures").rglob("*.py"))
    for folder in ("examples", "rules", "jaxlint"):
        files.extend(sorted((ROOT / folder).rglob("*.py")))
    return files


def _sources() -> list[tuple[str, str]]:
    return [("synthetic", SYNTHETIC)] + [
        (str(p.relative_to(ROOT)), p.read_text(encoding="utf-8")) for p in _corpus()
    ]


@pytest.mark.parametrize(("name", "source"), _sources(), ids=[n for n, _ in _sources()])
def test_walk_visits_every_code_node_in_libcst_order_with_its_ancestors(name: str, source: str) -> None:
    module = cst.parse_module(source)
    expected = libcst_nodes(module)
    seen = [(node, ancestors) for node, ancestors in walk_nodes(module) if not _is_trivia(node)]
    missing = {type(n).__name__ for n, _ in expected} - {type(n).__name__ for n, _ in seen}
    assert not missing, f"walk never visits {sorted(missing)}"
    assert {id(n) for n, _ in seen} == {id(n) for n, _ in expected}
    assert len(seen) == len(expected)  # each node once
    # Same ancestors as libcst's visitor (trivia never contains code).
    expected_ancestors = {id(n): a for n, a in expected}
    assert all(expected_ancestors[id(n)] == a for n, a in seen)


def test_synthetic_source_covers_many_node_types() -> None:
    module = cst.parse_module(SYNTHETIC)
    kinds = {type(n).__name__ for n, _ in libcst_nodes(module)}
    for kind in ("MatchClass", "MatchMapping", "MatchOr", "NamedExpr", "FormattedStringExpression",
                 "TypeAlias", "TypeVar", "ParamSpec", "TypeVarTuple", "ExceptStarHandler",
                 "Await", "Yield", "Decorator", "Lambda", "StarredElement", "Nonlocal", "Global"):
        assert kind in kinds, kind


def test_decorators_are_visited_before_the_body() -> None:
    module = cst.parse_module(SYNTHETIC)
    order = {id(node): index for index, (node, _) in enumerate(walk_nodes(module))}
    defs = [n for n, _ in walk_nodes(module) if isinstance(n, (cst.FunctionDef, cst.ClassDef)) and n.decorators]
    assert len(defs) >= 2
    for node in defs:
        last_decorator = max(order[id(d)] for d in node.decorators)
        first_in_body = min(order[id(child)] for child in iter_children(node.body))
        assert last_decorator < first_in_body
        assert order[id(node.name)] > last_decorator
        params = getattr(node, "params", None)
        if params is not None:
            assert order[id(params)] < first_in_body


def test_returning_false_prunes_and_leave_is_called() -> None:
    module = cst.parse_module("def f():\n    g(h(1))\nk()\n")
    visited: list[str] = []
    left: list[str] = []

    def visit_call(node: cst.Call) -> bool:
        name = node.func.value  # type: ignore[attr-defined]
        visited.append(name)
        return name != "g"  # do not look inside g(...)

    def leave_call(node: cst.Call) -> None:
        left.append(node.func.value)  # type: ignore[attr-defined]

    walk(module, {cst.Call: [visit_call]}, {cst.Call: [leave_call]}, [])
    assert visited == ["g", "k"]
    assert left == ["g", "k"]


def test_leave_runs_after_children() -> None:
    module = cst.parse_module("a(b(c()))\n")
    events: list[str] = []
    walk(
        module,
        {cst.Call: [lambda n: events.append("visit " + n.func.value)]},  # type: ignore[attr-defined]
        {cst.Call: [lambda n: events.append("leave " + n.func.value)]},  # type: ignore[attr-defined]
        [],
    )
    assert events == ["visit a", "visit b", "visit c", "leave c", "leave b", "leave a"]
