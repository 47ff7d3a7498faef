"""The engine's import-alias resolver, checked against libcst's `QualifiedNameProvider`, and
`FileContext.loops`.

The differential contract, for every `Call` in every fixture (plus the project's own code and
the synthetic sources below), with QNP's names split by source:

- when ours resolves `call.func` to X, QNP's import-sourced names are exactly {X}, and QNP
  sees no local (assignment) binding of it either: ours never resolves a rebound name;
- when ours gives None, QNP's import-sourced names are empty or ambiguous (more than one),
  or the name is also bound locally (rebound: unresolved on purpose, precision first).

Principled divergences, allowed below (ours None where QNP names one import):

- a callee that is not a dotted name (`Path(p).rglob`, `jax.jit(f)(x)`): QNP names the method
  of the class (`pathlib.Path.rglob`), but the call is on an instance, not on the import;
- a name that a function binds through `global x; import y as x`: that module-level binding
  only exists once the function has run;
- a name that is `del`eted somewhere in its scope (QNP does not count `del` as a binding).
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, QualifiedNameProvider, QualifiedNameSource

from jaxlint._context import FileContext
from jaxlint._scope import dotted_name, target_names
from jaxlint._walk import walk


ROOT = Path(__file__).resolve().parent.parent


def _corpus() -> list[Path]:
    files = sorted((ROOT / "fixtures").rglob("*.py"))
    for folder in ("examples", "rules", "runtime"):  # JAX code; the engine itself is not
        files.extend(sorted((ROOT / folder).rglob("*.py")))
    return files


def _calls(source: str) -> tuple[cst.Module, FileContext, list[tuple[cst.Call, list[cst.CSTNode]]]]:
    module = cst.parse_module(source)
    ctx = FileContext("<test>", source, module)
    calls: list[tuple[cst.Call, list[cst.CSTNode]]] = []
    walk(module, {cst.Call: [lambda node: calls.append((node, list(ctx.ancestors)))]}, {}, ctx.ancestors)
    return module, ctx, calls


def _global_and_deleted_names(module: cst.Module) -> set[str]:
    names: set[str] = set()

    class Collect(cst.CSTVisitor):
        def visit_Global(self, node: cst.Global) -> None:
            names.update(item.name.value for item in node.names)

        def visit_Del(self, node: cst.Del) -> None:
            names.update(target_names(node.target))

    module.visit(Collect())
    return names


def _qnp(wrapper_result, node: cst.CSTNode) -> set:  # type: ignore[no-untyped-def]
    value = wrapper_result.get(node, set())
    return set(value() if callable(value) else value)


def differences(source: str) -> Iterator[str]:
    """Every call where the engine's resolver breaks the contract in the module docstring."""
    module, ctx, calls = _calls(source)
    qualified = MetadataWrapper(module, unsafe_skip_copy=True).resolve(QualifiedNameProvider)
    unusual = _global_and_deleted_names(module)
    for call, ancestors in calls:
        ours = ctx.resolve(call.func, ancestors, anchor=call)
        names = _qnp(qualified, call.func)
        imported = {n.name for n in names if n.source is QualifiedNameSource.IMPORT}
        local = {n.name for n in names if n.source is QualifiedNameSource.LOCAL}
        text = module.code_for_node(call.func)
        if ours is not None:
            if imported != {ours}:
                yield f"{text}: ours {ours!r}, QualifiedNameProvider imports {sorted(imported)}"
            elif local:
                yield f"{text}: ours {ours!r}, but the name is rebound ({sorted(local)})"
        elif len(imported) == 1 and not local:
            name = dotted_name(call.func)
            if name is not None and name.split(".", 1)[0] not in unusual:
                yield f"{text}: ours None, QualifiedNameProvider {sorted(imported)}"


def resolved(source: str) -> dict[str, str | None]:
    """`{callee text: what ours resolves it to}` for every call in `source`."""
    module, ctx, calls = _calls(textwrap.dedent(source))
    table: dict[str, str | None] = {}
    for call, ancestors in calls:
        key = module.code_for_node(call.func)
        assert key not in table, f"give each call in the test source its own spelling: {key}"
        table[key] = ctx.resolve(call.func, ancestors, anchor=call)
    return table


@pytest.mark.parametrize("path", _corpus(), ids=lambda p: str(p.relative_to(ROOT)))
def test_resolver_agrees_with_qualified_name_provider_on_real_files(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    assert list(differences(source)) == []


def test_the_corpus_includes_the_fixtures() -> None:
    assert any(p.parts[-3] == "fixtures" for p in _corpus()), "no fixture files found"


# -- synthetic sources: each with what ours must say, and checked against QNP too --------


SYNTHETIC = {
    "import-as": (
        """
        import jax.numpy as jnp
        import jax
        import jax.lax
        jnp.zeros(3)
        jax.numpy.ones(3)
        jax.lax.scan(f, 0, xs)
        jax.random.split(key)
        """,
        {
            "jnp.zeros": "jax.numpy.zeros",
            "jax.numpy.ones": "jax.numpy.ones",
            "jax.lax.scan": "jax.lax.scan",
            "jax.random.split": "jax.random.split",
        },
    ),
    "from-import-as": (
        """
        from equinox import tree_at as ta
        from equinox import filter_jit
        import equinox as eqx
        ta(where, model, x)
        filter_jit(f)
        eqx.tree_at(where, model, x)
        eqx.nn.Linear(2, 3, key=k)
        """,
        {
            "ta": "equinox.tree_at",
            "filter_jit": "equinox.filter_jit",
            "eqx.tree_at": "equinox.tree_at",
            "eqx.nn.Linear": "equinox.nn.Linear",
        },
    ),
    "function-local-imports": (
        """
        def outer():
            import equinox as eqx
            from jax import jit as compile_it

            def inner():
                return eqx.filter_jit(g)

            lam = lambda: compile_it(g)
            return eqx.tree_at(w, m, x)

        def elsewhere():
            return eqx.apply_updates(m, u)
        """,
        {
            "eqx.filter_jit": "equinox.filter_jit",
            "compile_it": "jax.jit",
            "eqx.tree_at": "equinox.tree_at",
            "eqx.apply_updates": None,  # not imported in this function
        },
    ),
    "relative-imports": (
        """
        from . import helpers
        from .models import build as make_model
        from ..pkg import y
        from ... import top
        helpers.run()
        make_model()
        y()
        top.go()
        """,
        {
            "helpers.run": ".helpers.run",
            "make_model": ".models.build",
            "y": "..pkg.y",
            "top.go": "...top.go",
        },
    ),
    "rebound-names": (
        """
        import jax
        import numpy as np
        import equinox as eqx
        from jax import jit
        np = None
        for jit in wrappers:
            pass

        def f(eqx):
            return eqx.tree_at(w, m, x)

        def g():
            jax = load()
            return jax.jit(h)

        np.zeros(3)
        jit(h)
        jax.vmap(h)
        """,
        {
            "np.zeros": None,
            "jit": None,
            "eqx.tree_at": None,  # a parameter
            "load": None,
            "jax.jit": None,  # a local variable in g
            "jax.vmap": "jax.vmap",
        },
    ),
    "try-except-imports": (
        """
        try:
            import numpy as xp
        except ImportError:
            import jax.numpy as xp
        try:
            import equinox as eqx
        except ImportError:
            import equinox as eqx
        try:
            from jax import jit
        except ImportError:
            jit = None
        xp.zeros(3)
        eqx.tree_at(w, m, x)
        jit(f)
        """,
        {"xp.zeros": None, "eqx.tree_at": "equinox.tree_at", "jit": None},
    ),
    "class-body-scope": (
        """
        import jax

        class Model:
            import jax.numpy as jnp
            from equinox import tree_at
            table = jnp.arange(3)

            def method(self):
                return jnp.ones(3), tree_at(w, self, x), jax.jit(f)

            class Inner:
                values = jnp.zeros(2)

        def function():
            class Local:
                import optax
                opt = optax.adam(1e-3)
            return optax.sgd(1e-3)
        """,
        {
            "jnp.arange": "jax.numpy.arange",
            "jnp.ones": None,  # class names are not visible inside methods
            "tree_at": None,
            "jax.jit": "jax.jit",
            "jnp.zeros": None,  # ... nor inside nested classes
            "optax.adam": "optax.adam",
            "optax.sgd": None,
        },
    ),
    "global-and-nonlocal": (
        """
        import jax
        import numpy as np

        def reads_global():
            global np
            return np.zeros(3)

        def outer():
            import equinox as eqx

            def inner():
                nonlocal eqx
                return eqx.tree_at(w, m, x)

            return inner

        def shadows_then_global():
            global jax
            return jax.jit(f)
        """,
        {"np.zeros": "numpy.zeros", "eqx.tree_at": "equinox.tree_at", "jax.jit": "jax.jit"},
    ),
    "compound-statements": (
        """
        import contextlib
        if TYPE_CHECKING:
            import jax.numpy as jnp
        with contextlib.suppress(ImportError):
            import optax
        while False:
            import equinox as eqx
        jnp.zeros(3)
        optax.adam(0.1)
        eqx.tree_at(w, m, x)
        """,
        {
            "contextlib.suppress": "contextlib.suppress",
            "jnp.zeros": "jax.numpy.zeros",
            "optax.adam": "optax.adam",
            "eqx.tree_at": "equinox.tree_at",
        },
    ),
    "other-bindings": (
        """
        import jax
        import optax
        import equinox as eqx
        import numpy as np
        with open(p) as (jax, q):
            pass
        try:
            pass
        except Exception as optax:
            pass
        del eqx
        np: int = 3
        jax.jit(f)
        optax.adam(1)
        eqx.tree_at(w, m, x)
        np.zeros(3)
        """,
        {
            "open": None,
            "jax.jit": None,
            "optax.adam": None,
            "eqx.tree_at": None,
            "np.zeros": None,
        },
    ),
    "lambda-parameters": (
        """
        import jax
        import equinox as eqx
        f = lambda jax: jax.jit(g)
        h = lambda m: eqx.tree_at(w, m, x)
        """,
        {"jax.jit": None, "eqx.tree_at": "equinox.tree_at"},
    ),
    "not-names": (
        """
        import jax
        jax.jit(f)(x)
        make()[0].run()
        (lambda: 1)()
        """,
        {"jax.jit(f)": None, "jax.jit": "jax.jit", "make()[0].run": None, "make": None, "(lambda: 1)": None},
    ),
}


@pytest.mark.parametrize("name", SYNTHETIC)
def test_synthetic_resolution(name: str) -> None:
    source, expected = SYNTHETIC[name]
    assert resolved(source) == expected


@pytest.mark.parametrize("name", SYNTHETIC)
def test_synthetic_agrees_with_qualified_name_provider(name: str) -> None:
    source, _ = SYNTHETIC[name]
    assert list(differences(textwrap.dedent(source))) == []


def test_global_import_in_a_function_is_the_documented_divergence() -> None:
    source = textwrap.dedent(
        """
        def setup():
            global np
            import numpy as np

        np.zeros(3)
        """
    )
    assert resolved(source) == {"np.zeros": None}
    module, ctx, calls = _calls(source)
    qualified = MetadataWrapper(module, unsafe_skip_copy=True).resolve(QualifiedNameProvider)
    (call, _), = calls
    assert {n.name for n in _qnp(qualified, call.func)} == {"numpy.zeros"}


# -- known resolver bugs (engine: _scope.py / _context.py) -------------------------------

_SCOPING = [
    pytest.param(
        """
        import numpy as np
        total = [np.zeros(3) for np in range(3)]
        """,
        {"np.zeros": None, "range": None},
        id="comprehension-target-shadows-import",
    ),
    pytest.param(
        """
        class Model:
            import jax.numpy as jnp
            rows = [jnp.zeros(i) for i in range(3)]
        """,
        {"jnp.zeros": None, "range": None},
        id="class-names-invisible-in-comprehension",
    ),
    pytest.param(
        """
        import numpy as np
        def f(x=np.zeros(3)):
            import jax.numpy as np
            return np.ones(3)
        """,
        {"np.zeros": "numpy.zeros", "np.ones": "jax.numpy.ones"},
        id="default-value-resolved-in-the-functions-own-scope",
    ),
    pytest.param(
        """
        import functools
        @functools.lru_cache(maxsize=None)
        def f(functools=None):
            return functools
        """,
        {"functools.lru_cache": "functools.lru_cache"},
        id="decorator-resolved-in-the-functions-own-scope",
    ),
    pytest.param(
        """
        import numpy as np
        class K(np.make_base()):
            import jax.numpy as np
        """,
        {"np.make_base": "numpy.make_base"},
        id="class-bases-resolved-in-the-class-scope",
    ),
    pytest.param(
        """
        import numpy as np
        if (np := load()):
            pass
        np.zeros(3)
        """,
        {"load": None, "np.zeros": None},
        id="walrus-rebinds",
    ),
    pytest.param(
        """
        import numpy as np
        def reset():
            global np
            np = None
        np.zeros(3)
        """,
        {"np.zeros": None},
        id="global-assignment-rebinds",
    ),
    pytest.param(
        """
        import jax
        match value:
            case jax:
                pass
        jax.jit(f)
        """,
        {"jax.jit": None},
        id="match-capture-rebinds",
    ),
]


@pytest.mark.parametrize(("source", "expected"), _SCOPING)
def test_resolver_follows_python_scoping(source: str, expected: dict[str, str | None]) -> None:
    assert resolved(source) == expected


@pytest.mark.parametrize(
    "source",
    [p.values[0] for p in _SCOPING[:7]],
    ids=[p.id for p in _SCOPING[:7]],
)
def test_scoping_cases_agree_with_qualified_name_provider(source: str) -> None:
    # Every case but the match capture, which QualifiedNameProvider misses.
    assert list(differences(textwrap.dedent(source))) == []


@pytest.mark.parametrize(
    "source",
    [p.values[0] for p in _SCOPING[:5]],
    ids=[p.id for p in _SCOPING[:5]],
)
def test_differential_check_catches_a_scope_blind_resolver(
    source: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The differential check can fail: the first resolver (every def/lambda/class on the way
    # up is a scope, whichever part of it the name sits in; comprehensions are not scopes)
    # disagrees with QualifiedNameProvider on each of these cases.
    def scope_blind(self: FileContext, head: str, path: list[cst.CSTNode]) -> str | None:
        innermost = True
        for node in reversed(path[:-1]):
            if not isinstance(node, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                continue
            if isinstance(node, cst.ClassDef) and not innermost:
                continue
            innermost = False
            bound, target = self._scope_of(node).lookup(head)
            if bound:
                return target
        bound, target = self._module_scope.lookup(head)
        return target if bound else None

    monkeypatch.setattr(FileContext, "_lookup", scope_blind)
    assert list(differences(textwrap.dedent(source))) != []


# -- FileContext.loops -------------------------------------------------------------------


def _label(module: cst.Module, loop: cst.CSTNode) -> str:
    if isinstance(loop, cst.For):
        return f"for {module.code_for_node(loop.iter)}"
    if isinstance(loop, cst.While):
        return f"while {module.code_for_node(loop.test)}"
    kind = type(loop).__name__
    return f"{kind} {module.code_for_node(loop.for_in.iter)}"  # type: ignore[attr-defined]


def loops_of_calls(source: str) -> dict[str, list[str]]:
    """`{callee: labels of the loops that repeat the call}` for every call to a plain name."""
    source = textwrap.dedent(source)
    module = cst.parse_module(source)
    ctx = FileContext("<test>", source, module)
    table: dict[str, list[str]] = {}

    def probe(node: cst.CSTNode) -> None:
        assert isinstance(node, cst.Call)
        if isinstance(node.func, cst.Name):
            assert node.func.value not in table
            table[node.func.value] = [_label(module, loop) for loop in ctx.loops(node)]

    walk(module, {cst.Call: [probe]}, {}, ctx.ancestors)
    return table


def test_loops() -> None:
    table = loops_of_calls(
        """
        for a in it_for():
            body_for()
            for b in it_inner():
                body_inner()
            while w_test():
                w_body()
            else:
                w_else()
            [elt(c) for c in first_iter() for d in second_iter(c) if cond(d)]
            {key(): value() for e in dict_iter()}
            gen = (g_elt(x) for x in gen_iter())
            s = {s_elt(x) for x in set_iter()}

            def inner():
                in_def()

            lam = lambda: in_lambda()
        else:
            for_else()
        after()
        while top_test():
            top_body()
        [[nested_elt(y) for y in nested_iter(x)] for x in outer_iter()]
        async def agen():
            async for item in aiter_():
                in_async_for()
        """
    )
    assert table == {
        "it_for": [],
        "body_for": ["for it_for()"],
        "it_inner": ["for it_for()"],
        "body_inner": ["for it_for()", "for it_inner()"],
        "w_test": ["for it_for()", "while w_test()"],
        "w_body": ["for it_for()", "while w_test()"],
        "w_else": ["for it_for()"],
        "elt": ["for it_for()", "ListComp first_iter()"],
        "first_iter": ["for it_for()"],
        "second_iter": ["for it_for()", "ListComp first_iter()"],
        "cond": ["for it_for()", "ListComp first_iter()"],
        "key": ["for it_for()", "DictComp dict_iter()"],
        "value": ["for it_for()", "DictComp dict_iter()"],
        "dict_iter": ["for it_for()"],
        "g_elt": ["for it_for()", "GeneratorExp gen_iter()"],
        "gen_iter": ["for it_for()"],
        "s_elt": ["for it_for()", "SetComp set_iter()"],
        "set_iter": ["for it_for()"],
        "in_def": [],
        "in_lambda": [],
        "for_else": [],
        "after": [],
        "top_test": ["while top_test()"],
        "top_body": ["while top_test()"],
        "nested_elt": ["ListComp outer_iter()", "ListComp nested_iter(x)"],
        "nested_iter": ["ListComp outer_iter()"],
        "outer_iter": [],
        "aiter_": [],
        "in_async_for": ["for aiter_()"],
    }


def test_loops_inside_a_function_in_a_loop_start_afresh() -> None:
    table = loops_of_calls(
        """
        for i in outer():
            def step():
                for j in inner():
                    work()
        """
    )
    assert table == {"outer": [], "inner": [], "work": ["for inner()"]}


def test_loops_decorators_and_defaults_of_a_def_in_a_loop_repeat() -> None:
    table = loops_of_calls(
        """
        for i in outer():
            @decorate(i)
            def step(x=default()):
                body()
        """
    )
    assert table == {
        "outer": [],
        "decorate": ["for outer()"],
        "default": ["for outer()"],
        "body": [],
    }


def test_loops_class_body_in_a_loop_repeats() -> None:
    table = loops_of_calls(
        """
        for i in outer():
            class Step:
                table = build()
        """
    )
    assert table == {"outer": [], "build": ["for outer()"]}
