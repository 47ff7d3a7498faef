"""What the host needs now (`_host_needs.needed_now`): a copy whose Python value the program
uses at once, asked directly on the marked call (`.item()` or `float(...)`)."""

from __future__ import annotations

import libcst as cst
import pytest

from jaxlint._host_needs import needed_now
from test_frequency_size import first_node

_PRELUDE = "import jax\nimport jax.numpy as jnp\nimport numpy as np\nfrom sklearn.datasets import make_moons\n\n"


def _copy(node: cst.CSTNode) -> bool:
    if not isinstance(node, cst.Call):
        return False
    func = node.func
    return (isinstance(func, cst.Attribute) and func.attr.value == "item") or (isinstance(func, cst.Name) and func.value == "float")


def _needed(body: str) -> bool:
    ctx, call, ancestors = first_node(_PRELUDE + body, _copy)
    return needed_now(ctx, call, [*ancestors, call])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("body", "needed"),
    [
        ("for x in xs:\n    y = out[: n.item()]\n", True),  # a slice bound
        ("for x in xs:\n    z = jnp.zeros(n.item())\n", True),  # a shape
        ("for x in xs:\n    for i in range(n.item()):\n        pass\n", True),
        ("for x in xs:\n    assert loss.item() < 10\n", True),
        ("for x in xs:\n    if float(loss) < best:\n        break\n", True),  # decides what runs next
        ("for x in xs:\n    k = n.item()\n    y = out[:k]\n", True),  # a name then used as a bound
        ("for seed in seeds:\n    data = make_moons(100, random_state=seed.item())\n", True),  # a host library
        ("for x in xs:\n    losses.append(loss.item())\n", False),  # only collected
        ("for x in xs:\n    total += float(loss)\n", False),
        ("for x in xs:\n    print(loss.item())\n", False),
    ],
)
def test_needed_now(body: str, needed: bool) -> None:
    assert _needed(body) is needed
