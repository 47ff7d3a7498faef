"""The per-file call graph: who calls whom from where, how bodies run, which do array work."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from jaxlint._callgraph import Mode, runs_many_times
from jaxlint._context import FileContext
from jaxlint._walk import walk


def _context(source: str) -> FileContext:
    source = textwrap.dedent(source)
    module = cst.parse_module(source)
    ctx = FileContext("<test>", source, module)
    walk(module, {cst.Import: [ctx.note_import], cst.ImportFrom: [ctx.note_import]}, {}, ctx.ancestors)
    return ctx


def _modes(source: str) -> dict[str, str]:
    ctx = _context(source)
    graph = ctx.calls
    return {name: graph.mode(f.node).value for name, f in graph.functions.items()}


def test_modes_follow_callers_jit_and_driver_code() -> None:
    modes = _modes(
        """
        import jax
        import jax.numpy as jnp
        from absl import app

        def layer(x):
            return jnp.tanh(x)

        @jax.jit
        def forward(x):
            return layer(x)

        def scanned(c, x):
            return layer(c), None

        def run(xs):
            return jax.lax.scan(scanned, 0.0, xs)

        def library(x):
            return layer(x) * 2

        def driver(batches):
            for b in batches:
                print(library(b))

        def entry(argv):
            driver([])

        def helper(x):
            return x

        if __name__ == "__main__":
            app.run(entry)
            helper(1)
        """
    )
    assert modes["forward"] == "traced"
    assert modes["scanned"] == "traced"  # handed to lax.scan
    assert modes["layer"] == "eager"  # traced from forward, but eager when library calls it
    assert modes["run"] == "unknown"  # no caller in this file, no driver code
    assert modes["driver"] == "eager"  # prints
    assert modes["library"] == "eager"  # called from eager code
    assert modes["entry"] == "eager"  # run by absl at module level
    assert modes["helper"] == "eager"


def test_runtime_type_checkers_leave_the_mode_to_the_callers() -> None:
    modes = _modes(
        """
        import jax
        import jax.numpy as jnp
        from beartype import beartype
        from jaxtyping import jaxtyped
        from typeguard import typechecked

        typecheck = jaxtyped(typechecker=beartype)
        other = jax.jit

        @typecheck
        def fit(x):
            return jnp.tanh(x)

        @jaxtyped(typechecker=beartype)
        def checked(x):
            return jnp.tanh(x)

        @typechecked
        def guarded(x):
            return jnp.tanh(x)

        @typecheck
        def inner(x):
            return jnp.sin(x)

        @jax.jit
        def step(x):
            return inner(x)

        @other
        def aliased(x):
            return x

        def unknown(x):
            return x

        @unknown
        def wrapped(x):
            return x

        if __name__ == "__main__":
            fit(1.0), checked(1.0), guarded(1.0), wrapped(1.0), aliased(1.0)
        """
    )
    assert modes["fit"] == "eager"  # `typecheck` names the checker it is bound to
    assert modes["checked"] == "eager"
    assert modes["guarded"] == "eager"
    assert modes["inner"] == "traced"  # called only from jitted code, checked or not
    assert modes["aliased"] == "traced"  # an alias of jax.jit is jit
    assert modes["wrapped"] == "unknown"  # a decorator jaxlint does not know


@pytest.mark.parametrize(
    ("body", "many"),
    [
        ("    plt.plot(losses)\n", False),  # a curve per iteration: a handful of them
        ("    if step % 100 == 0:\n        plt.plot(losses)\n", True),  # a progress plot
        ("    show = step % 100 == 0\n    if show:\n        plt.plot(losses)\n", True),
        ("    if step % 100 == 0:\n        pass\n    else:\n        plt.plot(losses)\n", False),
        ("    if step == 0:\n        plt.plot(losses)\n", False),
    ],
)
def test_a_loop_plotting_only_now_and_then_still_runs_many_times(body: str, many: bool) -> None:
    source = f"import matplotlib.pyplot as plt\n\nfor step in range(num_steps):\n{body}"
    ctx = _context(source)
    node = ctx.module.body[-1]
    assert runs_many_times(ctx, node, [ctx.module, node], calls=True) is many  # type: ignore[arg-type]


def test_only_traced_callers_make_a_traced_body() -> None:
    modes = _modes(
        """
        import jax
        import jax.numpy as jnp

        def inner(x):
            return jnp.sin(x)

        @jax.jit
        def a(x):
            return inner(x)

        b = jax.jit(lambda x: inner(x))
        """
    )
    assert modes["inner"] == "traced"


def test_methods_of_modules_are_traced_and_plain_classes_need_driver_code() -> None:
    source = """
        import equinox as eqx
        from flax import linen as nn

        class Block(eqx.Module):
            def __call__(self, x):
                return x

        class Dense(nn.Module):
            def __call__(self, x):
                return x

        class Trainer:
            def fit(self, batches):
                for b in batches:
                    print(b)

            def helper(self):
                return 1
        """
    ctx = _context(source)
    graph = ctx.calls
    methods = {
        f.node.name.value + "@" + f.owner.name.value: graph.mode(f.node)  # type: ignore[attr-defined]
        for f in graph._defs.values()  # noqa: SLF001
    }
    assert methods["__call__@Block"] is Mode.TRACED
    assert methods["__call__@Dense"] is Mode.TRACED
    assert methods["fit@Trainer"] is Mode.EAGER
    assert methods["helper@Trainer"] is Mode.UNKNOWN


def test_names_bound_twice_or_shadowed_are_not_trusted() -> None:
    ctx = _context(
        """
        def step(x):
            return x

        def twice(x):
            return x

        twice = wrap(twice)

        def user(step):
            return step(1)

        def caller():
            return step(2)

        class A:
            def caller(self):
                return 3
        """
    )
    graph = ctx.calls
    assert "twice" not in graph.functions
    assert "caller" in graph.functions  # a method binds no module name
    sites = graph.functions["step"].sites
    assert [cst.Module([]).code_for_node(s.call) for s in sites] == ["step(2)"]


def test_array_work_counts_operations_and_skips_jitted_callees() -> None:
    ctx = _context(
        """
        import jax
        import jax.numpy as jnp

        def one(x):
            return jnp.tanh(x)

        def layout(x):
            return jnp.reshape(x, (-1,)) + jnp.zeros(3)

        def two(x):
            return jnp.tanh(one(x))

        @jax.jit
        def compiled(x):
            return jnp.sin(x) * jnp.cos(x)

        def wrapper(x):
            return compiled(x)

        def looped(xs):
            return [jnp.sin(x) for x in xs]

        def matmul(a, b):
            return a @ b
        """
    )
    graph = ctx.calls
    work = {name: graph.array_work(f.node) for name, f in graph.functions.items()}
    assert work["one"] == ("jnp.tanh", 1)
    assert work["layout"] is None
    assert work["two"] == ("jnp.tanh", 2)
    assert work["wrapper"] is None
    assert work["looped"] == ("jnp.sin", 2)
    assert work["matmul"] == ("@", 1)


def test_repeats_go_through_callers_to_a_loop_that_runs_many_times() -> None:
    ctx = _context(
        """
        import jax.numpy as jnp

        def forward(p, x):
            return jnp.tanh(x @ p)

        def process(p, x):
            out = forward(p, x)
            print(out)

        def main(p, batches):
            for batch in batches:
                process(p, batch)
            for i in range(3):
                forward(p, i)

        main(1, load_batches())
        """
    )
    graph = ctx.calls
    repeats = graph.repeats(graph.functions["forward"])
    assert len(repeats) == 1
    assert [f.name for f in repeats[0].chain] == ["process"]
    assert isinstance(repeats[0].loop, cst.For)


@pytest.mark.parametrize(
    ("loop", "many"),
    [
        ("for batch in batches:", True),
        ("for i in range(num_steps):", True),
        ("for i in range(0, n, batch_size):", True),
        ("for i, batch in enumerate(tqdm(loader)):", True),
        ("while step < total:", True),
        ("for i in range(100):", True),
        ("for i in range(3):", False),
        ("for name in ('a', 'b'):", False),
        ("for k, v in params.items():", False),
        ("for layer in model.layers:", False),
        ("for i in range(num_layers):", False),
        ("for i in range(len(self.blocks)):", False),
        ("for leaf in jax.tree.leaves(tree):", False),
        ("for d in jax.devices():", False),
        ("for epoch in range(num_epochs):", False),
        ("for ax, step in zip(axes.flatten(), steps):", False),
        ("for position in range(cfg.max_new_tokens):", True),
        ("for batch in cfg.train_loader:", True),
        ("for i in range(config.num_layers):", False),
        ("for start in range(0, len(data), batch_size):", True),
    ],
)
def test_runs_many_times(loop: str, many: bool) -> None:
    source = f"import jax\nfrom tqdm import tqdm\n\n{loop}\n    pass\n"
    ctx = _context(source)
    node = ctx.module.body[-1]
    assert runs_many_times(ctx, node, [ctx.module, node]) is many  # type: ignore[arg-type]


def test_test_folders_count_only_inside_the_project() -> None:
    from jaxlint._callgraph import _test_file

    assert _test_file("/work/tests/checkout/tests/helpers.py", "/work")
    assert _test_file("/work/tests/checkout/src/test_model.py", "/work")
    assert _test_file("tests/checkout/src/model.py", "/work")
    # Outside the current directory, a `tests` folder far above the file is not the project's.
    assert not _test_file("/elsewhere/tests/checkout/src/pkg/train.py", "/work")
    assert _test_file("/elsewhere/checkout/tests/unit/helpers.py", "/work")


@pytest.mark.parametrize(
    ("loop", "many"),
    [
        ("for layer in model.layers:", True),
        ("for i in range(num_layers):", True),
        ("for i in range(config.num_decoder_layers):", True),
        ("for b in range(len(self.blocks)):", True),
        ("for i in range(3):", False),
        ("for h in range(num_heads):", False),
        ("for leaf in jax.tree.leaves(tree):", False),
        ("for d in jax.devices():", False),
        ("for epoch in range(num_epochs):", False),
        ("for k, v in params.items():", False),
    ],
)
def test_runs_many_times_for_a_compile_per_iteration(loop: str, many: bool) -> None:
    """A compile per iteration costs seconds: a model's dozens of layers or blocks are many."""
    source = f"import jax\n\n{loop}\n    pass\n"
    ctx = _context(source)
    node = ctx.module.body[-1]
    assert runs_many_times(ctx, node, [ctx.module, node], compiles=True) is many  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("exit_", "exits", "many"),
    [
        ("return", False, False),  # any return makes a search, as every rule but missing-jit reads it
        ("return", True, True),  # a bare return ends a run early: still many steps
        ("return None", True, True),
        ("return batch", True, False),  # a search returns what it found
    ],
)
def test_a_bare_return_is_an_early_exit_only_when_asked(exit_: str, exits: bool, many: bool) -> None:
    source = f"def run(loader):\n    for batch in loader:\n        if done(batch):\n            {exit_}\n"
    ctx = _context(source)
    loop = ctx.module.body[0].body.body[0]  # type: ignore[attr-defined]
    path = [ctx.module, ctx.module.body[0], ctx.module.body[0].body, loop]  # type: ignore[attr-defined]
    assert runs_many_times(ctx, loop, path, calls=True, searches=True, exits=exits) is many


def test_driver_loops_count_only_when_asked_and_only_over_data_or_steps() -> None:
    ctx = _context(
        """
        import jax.numpy as jnp

        def forward(p, x):
            return jnp.tanh(x @ p) + jnp.mean(x)

        def rollout(p, env):
            done = False
            while not done:
                obs, done = env.step(forward(p, env.obs))

        def groups(p, xs, bins):
            for i in range(len(bins) - 1):
                forward(p, xs[bins[i]])
        """
    )
    graph = ctx.calls
    forward = graph.functions["forward"]
    assert graph.repeats(forward) == []  # nothing shows how `rollout` runs
    found = graph.repeats(forward, drivers=True)
    assert [r.site.scope.name.value for r in found] == ["rollout"]  # type: ignore[union-attr]


def test_calls_traced_reads_callees_the_file_runs_under_a_trace() -> None:
    ctx = _context(
        """
        import jax
        import jax.numpy as jnp
        import metrics
        from losses import *

        @jax.jit
        def score(p, x):
            return metrics.accuracy(p, x)

        def step(p, x):
            def loss_fn(p):
                return reconstruction(p, x) + jitter_local(p)

            return jax.grad(loss_fn)(p)

        def evaluate(p, x):
            def loss_fn(p):
                return penalty(p, x)

            return loss_fn(p) + logged(p)

        def run(p, x, sampler):
            @jax.jit
            def inner(q):
                return sampler(q)

            return inner(p)
        """
    )
    graph = ctx.calls
    assert graph.calls_traced("metrics.accuracy")  # in a jitted function
    assert graph.calls_traced("reconstruction")  # in a def handed to jax.grad (`loss_fn` twice in the file)
    assert not graph.calls_traced("penalty")  # its `loss_fn` is called eagerly
    assert not graph.calls_traced("logged")
    assert not graph.calls_traced("sampler")  # a parameter, not a module-level callable
