"""What the host needs now (`_host_needs.needed_now`): a copy whose Python value the program
uses at once, asked directly on the marked call (`.item()` or `float(...)`)."""

from __future__ import annotations

import libcst as cst
import pytest

from jaxlint._host_needs import carried, converts_on_host, decided_on, ends_timing, feeds_host_library, needed_now
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
        # a name then told to an object a host library made, in the function around the loop
        ("import cma\ndef run(xs):\n    es = cma.CMAEvolutionStrategy([0.0], 0.5)\n    for x in xs:\n"
         "        r = float(loss)\n        es.tell(x, r)\n", True),
        ("def run(es, xs):\n    for x in xs:\n        r = float(loss)\n        es.tell(x, r)\n", False),  # a parameter
        ("for x in xs:\n    losses.append(loss.item())\n", False),  # only collected
        ("for x in xs:\n    total += float(loss)\n", False),
        ("for x in xs:\n    print(loss.item())\n", False),
    ],
)
def test_needed_now(body: str, needed: bool) -> None:
    assert _needed(body) is needed


def _loop_and_statement(body: str) -> tuple[cst.CSTNode, cst.CSTNode]:
    """The loop of `body`, and its statement that converts with `float(...)`."""
    _, loop, _ = first_node(_PRELUDE + body, lambda n: isinstance(n, (cst.For, cst.While)))
    statement = next(
        n for n in loop.body.body if isinstance(n, cst.SimpleStatementLine) and "float(" in cst.Module([n]).code  # type: ignore[attr-defined,list-item]
    )
    return loop, statement


@pytest.mark.parametrize(
    ("body", "decided"),
    [
        ("for x in xs:\n    dx = float(d)\n    if dx > tol:\n        break\n", True),
        # through the names the loop computes from it: summed, weighed, then tested
        ("for x in xs:\n    dx = float(d)\n    total += dx\n    score = 2 * total\n    if score > tol:\n        continue\n", True),
        ("for x in xs:\n    dx = float(d)\n    quiet = quiet + 1 if dx < tol else 0\n", True),  # a conditional expression
        ("while running:\n    dx = float(d)\n    running = dx > tol\n", True),  # the while test
        ("for x in xs:\n    dx = float(d)\n    total += dx\n    print(total)\n", False),
        # tested only on the iterations that get past a `continue`: it could wait until then
        ("for i in xs:\n    dx = float(d)\n    total += dx\n    if i % 10:\n        continue\n    if total > tol:\n        break\n", False),
        # a list it is added to, tested by its length only: no value needed
        ("for x in xs:\n    dx = float(d)\n    seen.append(dx)\n    if len(seen) > 10:\n        seen.pop(0)\n", False),
    ],
)
def test_decided_on(body: str, decided: bool) -> None:
    loop, statement = _loop_and_statement(body)
    assert decided_on(loop, {"dx"}, statement) is decided


@pytest.mark.parametrize(
    ("body", "carries"),
    [
        # decoded text re-read at the top of the next iteration
        ("for x in xs:\n    ids = tokenize(prompt)\n    tok = float(d)\n    prompt += str(tok)\n", True),
        ("for x in xs:\n    tok = float(d)\n    out.append(tok)\n", False),  # only collected
    ],
)
def test_carried(body: str, carries: bool) -> None:
    loop, statement = _loop_and_statement(body)
    assert carried(loop, statement, {"tok"}) is carries


def _feeds(source: str) -> bool:
    """`feeds_host_library` on the first call of `source` whose callee is spelled `*.step`."""
    ctx, call, ancestors = first_node(
        "import gym\n\n" + source,
        lambda n: isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value == "step",
    )
    return feeds_host_library(ctx, call, [*ancestors, call])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("source", "feeds"),
    [
        ("env = gym.make('CartPole-v1')\nenv.step(action)\n", True),  # a method of what gym made
        ("def run(name, action):\n    env = gym.wrappers.TimeLimit(gym.make(name), 10)\n    env.step(action)\n", True),
        (
            "class Runner:\n    def __init__(self):\n        self.env = gym.make('x')\n\n"
            "    def run(self, action):\n        self.env.step(action)\n",
            True,
        ),
        ("class Sim:\n    def step(self, a):\n        return a\n\nenv = Sim()\nenv.step(action)\n", False),  # the file's own
        ("def run(env, action):\n    env.step(action)\n", False),  # a parameter: unknown
        ("env = gym.make('x') if fast else Sim()\nenv.step(action)\n", False),  # not a call on every path
    ],
)
def test_methods_of_host_objects(source: str, feeds: bool) -> None:
    assert _feeds(source) is feeds


def _ends(body: str) -> bool:
    ctx, call, ancestors = first_node("import time\n" + _PRELUDE + body, _copy)
    return ends_timing(ctx, [*ancestors, call])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("body", "ends"),
    [
        # the clock started in the block, the copy, the second read at once: a timing's wait
        ("for x in xs:\n    t0 = time.perf_counter()\n    out = f(x)\n    v = float(out)\n    t1 = time.perf_counter()\n", True),
        ("for x in xs:\n    t0 = time.time()\n    out = f(x)\n    v = out.item()\n    dt = time.time() - t0\n", True),
        # no clock started in the block before it
        ("t0 = time.time()\nfor x in xs:\n    out = f(x)\n    v = float(out)\n    t1 = time.time()\n", False),
        # a throughput from a clock started before the loop, not an assignment of a read
        ("t0 = time.time()\nfor i, x in enumerate(xs):\n    out = f(x)\n    log(float(out))\n    log(i / (time.time() - t0))\n", False),
        # a statement between the copy and the read
        ("for x in xs:\n    t0 = time.time()\n    v = float(f(x))\n    log(v)\n    t1 = time.time()\n", False),
        # the difference is from another clock than the one started here
        ("for x in xs:\n    t0 = time.time()\n    v = float(f(x))\n    dt = time.time() - start\n", False),
        # host bookkeeping that calls nothing, then the read summed into a total
        ("for x in xs:\n    t0 = time.time()\n    v = float(f(x))\n    n += 1\n    total += time.time() - t0\n", True),
        # the read as the first statement of an if/else branch whose test calls nothing
        ("for i, x in enumerate(xs):\n    t0 = time.time()\n    v = float(f(x))\n    if i == 0:\n"
         "        first = time.time() - t0\n    else:\n        rest += time.time() - t0\n", True),
        # ... but not when the test calls something (it may wait or dispatch)
        ("for x in xs:\n    t0 = time.time()\n    v = float(f(x))\n    if check(x):\n        dt = time.time() - t0\n", False),
        # a list of times, not a call that does more with the elapsed time
        ("for x in xs:\n    t0 = time.time()\n    v = float(f(x))\n    times.append(time.time() - t0)\n", True),
        ("for x in xs:\n    t0 = time.time()\n    v = float(f(x))\n    log(\"rate\", 1 / (time.time() - t0))\n", False),
        # a restart of the same clock is not an end
        ("for x in xs:\n    t0 = time.time()\n    v = float(f(x))\n    t0 = time.time()\n", False),
    ],
)
def test_ends_timing(body: str, ends: bool) -> None:
    assert _ends(body) is ends


def _converts(source: str) -> bool:
    """`converts_on_host` on the first call of `source` spelled `show(...)`."""
    ctx, call, ancestors = first_node(
        _PRELUDE + source, lambda n: isinstance(n, cst.Call) and isinstance(n.func, cst.Name) and n.func.value == "show"
    )
    return converts_on_host(ctx, call, ancestors)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("source", "converts"),
    [
        ("show = lambda ids: ''.join(vocab[int(t)] for t in ids)\nfor x in xs:\n    s = show(x)\n", True),
        ("def show(ids):\n    return [t.item() for t in ids]\nfor x in xs:\n    s = show(x)\n", True),
        ("def show(x):\n    return np.asarray(x).mean()\nfor x in xs:\n    s = show(x)\n", True),
        # handed to a host object's method and returned: `tokenizer.decode(ids)`
        ("from tokenizers import Tokenizer\ntok = Tokenizer.from_file('t.json')\n"
         "show = lambda ids: tok.decode(ids)\nfor x in xs:\n    s = show(x)\n", True),
        ("def show(x):\n    print(float(x))\nfor x in xs:\n    show(x)\n", False),  # returns nothing: a log
        ("def show(x):\n    return x * 2\nfor x in xs:\n    s = show(x)\n", False),  # device work, no conversion
        ("def show(x):\n    return int(n)\nfor x in xs:\n    s = show(x)\n", False),  # converts something else
        ("show = make()\nfor x in xs:\n    s = show(x)\n", False),  # not a function of the file
    ],
)
def test_converts_on_host(source: str, converts: bool) -> None:
    assert _converts(source) is converts


def _runs_solver(source: str) -> bool:
    """`DeviceIndex.runs_solver` on the first call of `source` whose callee ends in `run` or `solve`."""

    def match(n: cst.CSTNode) -> bool:
        if not isinstance(n, cst.Call):
            return False
        last = n.func.attr.value if isinstance(n.func, cst.Attribute) else getattr(n.func, "value", "")
        return last in ("run", "diffeqsolve", "update")

    ctx, call, ancestors = first_node("import diffrax\nimport jaxopt\nfrom numpyro.infer import MCMC, NUTS\n" + source, match)
    return ctx.device.runs_solver(call, ancestors)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("source", "runs"),
    [
        ("sol = diffrax.diffeqsolve(term, solver, 0.0, 1.0, 0.1, y0)\n", True),
        ("solver = jaxopt.LBFGS(fun=f)\nres = solver.run(x0)\n", True),
        ("mcmc = MCMC(NUTS(model), num_warmup=500, num_samples=1000)\nmcmc.run(key, x)\n", True),
        ("solver = jaxopt.LBFGS(fun=f)\nx, state = solver.update(x, state)\n", False),  # one step
        ("runner = make_runner()\nrunner.run(x0)\n", False),  # not a solver class
    ],
)
def test_runs_solver(source: str, runs: bool) -> None:
    assert _runs_solver(source) is runs


def _own_value(body: str, *, returned: bool) -> bool:
    """`samples_on_host` / `returns_on_host` of the function `f` in `body` (the prelude's
    imports resolved as a project summary resolves them)."""
    import ast

    from jaxlint._project import returns_on_host, samples_on_host

    tree = ast.parse(_PRELUDE + body)
    aliases = {"jax": "jax", "jnp": "jax.numpy", "np": "numpy"}

    def resolve(expr: ast.expr) -> str | None:
        parts = []
        while isinstance(expr, ast.Attribute):
            parts.insert(0, expr.attr)
            expr = expr.value
        if not isinstance(expr, ast.Name) or expr.id not in aliases:
            return None
        return ".".join([aliases[expr.id], *parts])

    function = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "f")
    return (returns_on_host if returned else samples_on_host)(function, resolve)


@pytest.mark.parametrize(
    ("body", "samples"),
    [
        # offsets drawn on the device, then iterated on the host: every call waits
        ("def f(key, data):\n    s = jax.random.randint(key, (4,), 0, 9)\n    return [data[i] for i in np.asarray(s)]\n", True),
        ("def f(key, data):\n    s = jax.random.randint(key, (4,), 0, 9)\n    for i in np.asarray(s):\n        print(data[i])\n", True),
        ("def f(key, data):\n    i = int(jax.random.randint(key, (), 0, 9))\n    return data[i]\n", True),  # an index
        ("def f(key):\n    if float(jax.random.uniform(key)) < 0.5:\n        return 1\n    return 0\n", True),  # a test
        # traps: a copy of an argument (host data, maybe), a copy only on one branch, no copy
        ("def f(starts, data):\n    return [data[i] for i in np.asarray(starts)]\n", False),
        ("def f(key, data, flag):\n    if flag:\n        s = np.asarray(jax.random.randint(key, (4,), 0, 9))\n        return data[s]\n    return data\n", False),
        ("def f(key, data):\n    s = jax.random.randint(key, (4,), 0, 9)\n    return data[s]\n", False),
        ("def f(key, rng, data):\n    s = rng.integers(0, 9, size=4)\n    return [data[i] for i in np.asarray(s)]\n", False),
    ],
)
def test_samples_on_host(body: str, samples: bool) -> None:
    assert _own_value(body, returned=False) is samples


@pytest.mark.parametrize(
    ("body", "returns"),
    [
        ("def f(q):\n    return int(jnp.argmax(q))\n", True),
        ("def f(key, logits):\n    a = jax.random.categorical(key, logits)\n    return np.asarray(a), logits\n", True),
        # traps: a device array returned, an argument copied, one path returning a device value,
        # a generator
        ("def f(q):\n    return jnp.argmax(q)\n", False),
        ("def f(q):\n    return np.asarray(q)\n", False),
        ("def f(q, greedy):\n    if greedy:\n        return int(jnp.argmax(q))\n    return jnp.argmax(q)\n", False),
        ("def f(q):\n    yield int(jnp.argmax(q))\n", False),
    ],
)
def test_returns_on_host(body: str, returns: bool) -> None:
    assert _own_value(body, returned=True) is returns
