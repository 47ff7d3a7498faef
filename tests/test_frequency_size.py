"""The engine's loop counts (`_frequency`) and pytree sizes (`_size`), asked directly."""

from __future__ import annotations

import libcst as cst
import pytest

from jaxlint._context import FileContext
from jaxlint._frequency import iteration_count
from jaxlint._size import leaf_count


def _loop_count(source: str) -> int | None:
    module = cst.parse_module(source)
    ctx = FileContext("x.py", source, module)
    found: list[tuple[cst.For, list[cst.CSTNode]]] = []

    def walk(node: cst.CSTNode, path: list[cst.CSTNode]) -> None:
        if isinstance(node, cst.For) and not found:
            found.append((node, path))
        for child in node.children:
            walk(child, [*path, node])

    walk(module, [])
    loop, path = found[0]
    return iteration_count(ctx, loop, path)


@pytest.mark.parametrize(
    ("source", "count"),
    [
        ("for i in range(16):\n    pass\n", 16),
        ("N = 30\nfor i in range(1, N + 1):\n    pass\n", 30),
        ("P = ['a', 'b', 'c']\nfor i in range(len(P)):\n    pass\n", 3),
        ("P = ['a', 'b']\nfor i, p in enumerate(zip(P, range(1000))):\n    pass\n", 2),
        ("def f(prompts=None):\n    if prompts is None:\n        prompts = [1, 2]\n    for p in prompts:\n        pass\n", 2),
        ("def f(steps=5):\n    for s in range(steps):\n        pass\n", None),  # a caller may pass more
        ("N = 3\nN += 1\nfor i in range(N):\n    pass\n", None),  # not a plain assignment
        ("for batch in loader:\n    pass\n", None),
    ],
)
def test_iteration_count(source: str, count: int | None) -> None:
    assert _loop_count(source) == count


def _leaves(source: str, name: str) -> int | None:
    module = cst.parse_module(source)
    ctx = FileContext("x.py", source, module)
    return leaf_count(ctx, cst.Name(name), [module])


MODELS = """
import equinox as eqx
import jax
import jax.numpy as jnp
import optax

class Mix(eqx.Module):
    means: jax.Array
    scales: jax.Array

class Deep(eqx.Module):
    layers: list

    def __init__(self, key):
        self.layers = [eqx.nn.Linear(8, 8, key=key) for _ in range(12)]

class Configured(eqx.Module):
    layers: list

    def __init__(self, depth, key):
        self.layers = [eqx.nn.Linear(8, 8, key=key) for _ in range(depth)]

key = jax.random.PRNGKey(0)
mlp = eqx.nn.MLP(2, 2, 8, 1, key=key)
mix = Mix(jnp.zeros(3), jnp.ones(3))
deep = Deep(key)
configured = Configured(4, key)
state = optax.adam(1e-3).init(eqx.filter(mlp, eqx.is_array))
restored = eqx.tree_deserialise_leaves("ckpt.eqx", deep)
"""


@pytest.mark.parametrize(
    ("name", "leaves"),
    [("mlp", 4), ("mix", 2), ("deep", 24), ("state", 9), ("configured", None), ("restored", None)],
)
def test_leaf_count(name: str, leaves: int | None) -> None:
    assert _leaves(MODELS, name) == leaves


@pytest.mark.parametrize(
    ("source", "count"),
    [
        # every call in the file leaves the default, or passes a literal: the largest counts
        ("def sample(m, n=1):\n    for i in range(n):\n        pass\n\nsample(0)\nsample(0, n=3)\n", 3),
        # a call passes something the linter cannot read: unknown
        ("def sample(m, n=1):\n    for i in range(n):\n        pass\n\nsample(0, n=cfg.n)\n", None),
        # the function is handed on (a CLI, a callback): its callers are elsewhere
        ("def sample(m, n=1):\n    for i in range(n):\n        pass\n\nrun(sample)\n", None),
    ],
)
def test_iteration_count_through_call_sites(source: str, count: int | None) -> None:
    assert _loop_count(source) == count
