"""The engine's loop counts (`_frequency`) and pytree sizes (`_size`), asked directly."""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst
import pytest

from jaxlint._context import FileContext
from jaxlint._frequency import Often, iteration_count, loop_runs, never_runs, paced_by_clock
from jaxlint._size import leaf_count


def first_node(source: str, match: Callable[[cst.CSTNode], bool]) -> tuple[FileContext, cst.CSTNode, list[cst.CSTNode]]:
    """The file's context, and the first node (in source order) that `match` accepts with its
    ancestors: how these tests ask the engine about one loop or one call."""
    module = cst.parse_module(source)
    ctx = FileContext("x.py", source, module)
    found: list[tuple[cst.CSTNode, list[cst.CSTNode]]] = []

    def walk(node: cst.CSTNode, path: list[cst.CSTNode]) -> None:
        if match(node) and not found:
            found.append((node, path))
        for child in node.children:
            walk(child, [*path, node])

    walk(module, [])
    return ctx, *found[0]


def _first_loop(source: str) -> tuple[FileContext, cst.For | cst.While, list[cst.CSTNode]]:
    return first_node(source, lambda node: isinstance(node, (cst.For, cst.While)))  # type: ignore[return-value]


def _loop_count(source: str) -> int | None:
    ctx, loop, path = first_node(source, lambda node: isinstance(node, cst.For))
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
        ("import jax.numpy as jnp\nqs = jnp.array([0.1, 0.5, 0.9])\nfor q in qs:\n    pass\n", 3),
        ("import numpy as np\nfor t in np.linspace(0, 1, 7):\n    pass\n", 7),
        ("import jax.numpy as jnp\nfor i in jnp.arange(2, 10, 2):\n    pass\n", 4),
        ("import jax.numpy as jnp\nfor row in jnp.array([[1, 2], [3, 4], [5, 6]]):\n    pass\n", None),  # rows of a matrix: not counted
        ("import jax.numpy as jnp\nfor q in jnp.array(values):\n    pass\n", None),
        # an entry of a dict literal: `options["n_iter"]`, unless the file writes that entry
        ("opts = {'kernel': 'RBF', 'n_iter': 12}\nfor it in range(opts['n_iter']):\n    pass\n", 12),
        ("opts = {'n_iter': 12}\nfor it in range(opts['n_iter'] + 1):\n    pass\n", 13),
        ("opts = {'n_iter': 12}\nopts['n_iter'] = 40\nfor it in range(opts['n_iter']):\n    pass\n", None),
        ("opts = {'n_iter': 12}\nopts.update(extra)\nfor it in range(opts['n_iter']):\n    pass\n", None),
        ("opts = {'n': 12}\nfor it in range(opts['n_iter']):\n    pass\n", None),  # no such entry
        ("opts = load()\nfor it in range(opts['n_iter']):\n    pass\n", None),
        # a slice spelled with known bounds holds at most that many items
        ("for p, v in zip(prices[:25], volumes[:25]):\n    pass\n", 25),
        ("for p in prices[10:40]:\n    pass\n", 30),
        ("for p in prices[-5:]:\n    pass\n", None),  # counted from the end: unknown
        # the rows a subscript keeps: a slice of the first axis, or all of them
        ("x = data[:1000]\nfor row in x[:, 0]:\n    pass\n", 1000),
        ("x = data[:1000]\nfor row in x[..., ::32]:\n    pass\n", 1000),  # columns thinned, rows kept
        ("for row in data[10:40, 2]:\n    pass\n", 30),
        ("x = data[:1000]\nfor row in x[::2, 0]:\n    pass\n", None),  # a step on the rows: not counted
        ("x = data[:1000]\nfor row in x[..., 0, 1]:\n    pass\n", None),  # which axes `...` covers: unknown
        ("import numpy as np\nfrom tqdm import tqdm\nfor i in tqdm(np.arange(20)):\n    pass\n", 20),
        # a call asked for a number of the things it is named for
        ("graphs = make_graphs(images, n_graphs=2)\nfor i in range(len(graphs)):\n    pass\n", 2),
        ("N = 12\nds = sample_trajectories(env, num_trajectories=N)\nfor t in ds:\n    pass\n", 12),
        ("batches = read_batches(path, num_workers=4)\nfor b in batches:\n    pass\n", None),  # workers are not batches
        # positionally, to a parameter of a function of the file that counts what it is named for
        ("def sample_points(h, w, num_points):\n    pass\npts = sample_points(3, 3, 40)\nfor p in pts:\n    pass\n", 40),
        ("def sample_points(h, num_workers):\n    pass\npts = sample_points(3, 40)\nfor p in pts:\n    pass\n", None),
        ("pts = sample_points(3, 3, 40)\nfor p in pts:\n    pass\n", None),  # not a function of the file
        # `x.shape[0]` counts the rows of `x` as `len(x)` does
        ("def sample_points(h, num_points):\n    pass\npts = sample_points(3, 40)\nfor i in range(pts.shape[0]):\n    pass\n", 40),
        ("def sample_points(h, num_points):\n    pass\npts = sample_points(3, 40)\nfor i in range(pts.shape[1]):\n    pass\n", None),  # columns: not read
        # the value that reaches the loop: the last plain assignment before it
        ("g = make_graphs(x, n_graphs=1000)\ng = make_graphs(x, n_graphs=2)\nfor i in range(len(g)):\n    pass\n", 2),
        # a `def` in between binds its own name only, whatever its body assigns
        ("g = make_graphs(x, n_graphs=1000)\ng = make_graphs(x, n_graphs=2)\ndef f(g):\n    g = g[1:]\n    return g\nfor i in range(len(g)):\n    pass\n", 2),
        ("g = make_graphs(x, n_graphs=2)\nif big:\n    g = make_graphs(x, n_graphs=1000)\nfor i in range(len(g)):\n    pass\n", 1000),  # conditional: the largest
        # the body leaves the loop: at once, or when its counter reaches a known number
        ("for batch in loader:\n    step(batch)\n    break\n", 1),
        ("def f(xs):\n    for x in xs:\n        return g(x)\n", 1),
        ("for batch in loader:\n    if batch is None:\n        continue\n    step(batch)\n    break\n", None),  # a continue can pass the exit by
        ("K = 3\nfor i in range(n):\n    if i == K:\n        break\n", 4),
        ("for i, b in enumerate(loader):\n    if i >= 10:\n        break\n", 11),
        ("for i in range(n):\n    if i > 2:\n        return\n", 4),
        ("for i in range(2):\n    if i == 50:\n        break\n", 2),  # the header says fewer
        ("for i in range(1, n):\n    if i == 3:\n        break\n", None),  # not counted from 0
        ("for i in range(n):\n    if i == 3:\n        print(i)\n", None),  # does not leave
        ("for i in range(n):\n    if j == 3:\n        break\n", None),  # not the counter
        ("for i in range(n):\n    if i == limit:\n        break\n", None),  # unknown bound
    ],
)
def test_iteration_count(source: str, count: int | None) -> None:
    assert _loop_count(source) == count


@pytest.mark.parametrize(
    ("source", "often", "per_call"),
    [
        ("for i in range(50):\n    step()\n", Often.MANY, Often.MANY),  # a count is read as for any cost
        ("for i in range(150):\n    step()\n", Often.MANY, Often.MANY),
        ("for i in range(16):\n    step()\n", Often.FEW, Often.FEW),
        ("for batch in loader:\n    step(batch)\n", Often.MANY, Often.MANY),
        # paced by a sleep on every iteration: the device finishes while the host sleeps
        ("import time\nfor batch in loader:\n    step(batch)\n    time.sleep(0.05)\n", Often.MANY, Often.FEW),
        ("import time\nwhile running():\n    step()\n    time.sleep(1)\n", Often.MANY, Often.FEW),
        ("import time\nfor batch in loader:\n    step(batch)\n    if slow:\n        time.sleep(0.05)\n", Often.MANY, Often.MANY),
        ("for batch in loader:\n    step(batch)\n    sleep(0.05)\n", Often.MANY, Often.MANY),  # not time.sleep
    ],
)
def test_loop_runs_for_per_call_costs(source: str, often: Often, per_call: Often) -> None:
    ctx, loop, path = _first_loop(source)
    assert loop_runs(ctx, loop, path).often is often
    assert loop_runs(ctx, loop, path, calls=True).often is per_call


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


SOLVED = """
import diffrax as dfx
import equinox as eqx
import jax.numpy as jnp

class Solved(eqx.Module):
    rate: jnp.ndarray
    solver: object
    controller: object

    def __init__(self, rate, solver=dfx.Tsit5(), controller=dfx.PIDController(rtol=1e-3, atol=1e-6)):
        self.rate = jnp.asarray(rate)
        self.solver = solver
        self.controller = controller

defaults = Solved(0.1)
passed = Solved(0.1, dfx.Kvaerno5(), dfx.StepTo(jnp.linspace(0.0, 1.0, 11)))
unknown = Solved(0.1, make_solver())
spread = Solved(0.1, **options)
"""


@pytest.mark.parametrize(("name", "leaves"), [("defaults", 1), ("passed", 2), ("unknown", None), ("spread", None)])
def test_leaf_count_of_solver_options(name: str, leaves: int | None) -> None:
    """diffrax's solvers and controllers hold only the arrays they are given; a field left to
    its parameter's default holds the default's."""
    assert _leaves(SOLVED, name) == leaves


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


@pytest.mark.parametrize(
    ("source", "never"),
    [
        ("def f():\n    raise SystemExit\n    g()\n", True),
        ("def f(x):\n    if x:\n        return 1\n    g()\n", False),  # the `return` ends the `if` only
        ("import sys\nif __name__ == '__main__':\n    sys.exit(main())\n    g()\n", True),
        ("for x in y:\n    continue\n    g()\n", True),
        ("raise SystemExit\ng()\n", False),  # top level: a notebook's later cells still run
    ],
)
def test_never_runs(source: str, never: bool) -> None:
    module = cst.parse_module(source)
    found: list[list[cst.CSTNode]] = []

    def walk(node: cst.CSTNode, path: list[cst.CSTNode]) -> None:
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "g":
            found.append([*path, node])
        for child in node.children:
            walk(child, [*path, node])

    walk(module, [])
    assert never_runs(found[0]) is never


@pytest.mark.parametrize(
    ("source", "paced"),
    [
        # the body sets the time it compares again: once per interval however fast the loop
        ("import time\nlast = time.time()\nfor b in data:\n    if time.time() - last > 3:\n        last = time.time()\n", True),
        ("from time import perf_counter as clock\ndef f(data):\n    t = clock()\n    for b in data:\n"
         "        now = clock()\n        if now - t >= 1:\n            t = now\n", True),
        ("import time\nstamp = time.monotonic()\nwhile True:\n    if time.monotonic() > stamp + 30:\n"
         "        stamp = time.monotonic()\n", True),
        # a start never set again: after the warm-up the test holds on every iteration
        ("import time\nstart = time.time()\nfor b in data:\n    if time.time() - start > 60:\n        g()\n", False),
        # set again, but the test reads no clock
        ("import time\nlast = 0\nfor b in data:\n    if b > last:\n        last = time.time()\n", False),
        # a function of the file called `time` is no clock
        ("def time():\n    return 0\nlast = time()\nfor b in data:\n    if time() - last > 3:\n        last = time()\n", False),
    ],
)
def test_paced_by_clock(source: str, paced: bool) -> None:
    ctx, guard, path = first_node(source, lambda node: isinstance(node, cst.If))
    assert paced_by_clock(ctx, guard, path) is paced
