"""The shared device-value analysis: which names hold device values, which loops dispatch
device work, which calls go to jitted functions (`FileContext.device`)."""

from __future__ import annotations

import textwrap

import libcst as cst

from jaxlint._context import FileContext
from jaxlint._walk import walk


def _probes(source: str) -> dict[str, bool]:
    """{label: holds(arg)} for every `probe("label", expr)` call in `source`."""
    source = textwrap.dedent(source)
    module = cst.parse_module(source)
    ctx = FileContext("<test>", source, module)
    out: dict[str, bool] = {}

    def visit(call: cst.Call) -> None:
        if isinstance(call.func, cst.Name) and call.func.value == "probe":
            label = call.args[0].value.evaluated_value  # type: ignore[attr-defined]
            assert label not in out, f"probe label {label!r} reached twice"
            out[label] = ctx.device.holds(call.args[1].value, [*ctx.ancestors, call, call.args[1]])

    walk(module, {cst.Call: [visit]}, {}, ctx.ancestors)
    return out


def _loops(source: str) -> list[bool]:
    """loop_dispatches of every `for`/`while`, in source order."""
    source = textwrap.dedent(source)
    module = cst.parse_module(source)
    ctx = FileContext("<test>", source, module)
    out: list[bool] = []

    def visit(loop: cst.CSTNode) -> None:
        out.append(ctx.device.loop_dispatches(loop))

    walk(module, {cst.For: [visit], cst.While: [visit]}, {}, ctx.ancestors)
    return out


def test_results_of_array_ops_jitted_calls_and_model_calls_are_device_values() -> None:
    probes = _probes(
        """
        import jax
        import jax.numpy as jnp
        import numpy as np
        from functools import partial

        @jax.jit
        def step(params, x):
            return x

        fast = jax.jit(lambda x: x)

        def helper(x):
            return jnp.tanh(x) * 2

        def maybe(x):
            if x:
                return jnp.ones(3)
            return None

        def run(params, model, state, batch, df):
            a = jnp.ones(3)
            b = step(params, batch)
            c = fast(batch)
            d = model.apply({"params": params}, batch)
            e = state.apply_fn(state.params, batch)
            f = jax.vmap(helper)(batch)
            g = helper(batch)
            h, i = step(params, batch)
            j = df.apply(len)
            k = maybe(batch)
            l = np.ones(3)
            m = unknown(batch)
            probe("array op", a)
            probe("jitted", b)
            probe("jit-assigned", c)
            probe("model.apply", d)
            probe("apply_fn", e)
            probe("vmap call", f)
            probe("local fn returning device", g)
            probe("unpacked", h)
            probe("unpacked 2", i)
            probe("pandas apply", j)
            probe("may return None", k)
            probe("numpy", l)
            probe("unknown call", m)
        """
    )
    assert probes == {
        "array op": True,
        "jitted": True,
        "jit-assigned": True,
        "model.apply": True,
        "apply_fn": True,
        "vmap call": True,
        "local fn returning device": True,
        "unpacked": True,
        "unpacked 2": True,
        "pandas apply": False,
        "may return None": False,
        "numpy": False,
        "unknown call": False,
    }


def test_derived_values_host_conversions_and_metadata() -> None:
    probes = _probes(
        """
        import jax
        import jax.numpy as jnp
        import numpy as np

        def run(x):
            y = jnp.sin(x)
            probe("index", y[0])
            probe("arith", y * 2 + 1)
            probe("method", y.sum())
            probe("at", y.at[0].set(1.0))
            probe("attr", y.T)
            probe("shape", y.shape)
            probe("shape[0]", y.shape[0])
            probe("item", y.item())
            probe("float", float(y))
            probe("np", np.asarray(y))
            probe("device_get", jax.device_get(y))
            probe("jnp.shape", jnp.shape(y))
            probe("tuple", (y, 1))
            probe("dict", {"y": y})
            probe("listcomp", [v * 2 for v in y])
            probe("not", not y)
            probe("is None", y is None)
            probe("tree map host", jax.tree.map(np.asarray, {"y": y}))
            probe("tree map lambda host", jax.tree.map(lambda v: np.array(v), {"y": y}))
            probe("tree map device", jax.tree.map(lambda v: v + 1, {"y": y}))
            z = np.asarray(y)
            probe("rebound to host", z)
            y = float(y)
            probe("y rebound to host", y)
        """
    )
    expected_false = {"shape", "shape[0]", "item", "float", "np", "device_get", "jnp.shape", "not",
                      "is None", "tree map host", "tree map lambda host", "rebound to host", "y rebound to host"}
    assert {k for k, v in probes.items() if not v} == expected_false
    assert len(probes) == 22


def test_merges_keep_only_what_every_path_makes_a_device_value() -> None:
    probes = _probes(
        """
        import jax.numpy as jnp
        import numpy as np

        def run(x, flag, xs):
            a = jnp.ones(3)
            if flag:
                a = np.ones(3)
            probe("if one branch host", a)
            b = jnp.ones(3)
            if flag:
                b = b + 1
            else:
                b = jnp.zeros(3)
            probe("if both device", b)
            c = np.zeros(3)
            for v in xs:
                c = jnp.asarray(v)
                probe("in loop after binding", c)
            probe("after loop", c)
            d = jnp.zeros(3)
            for v in xs:
                probe("loop-carried", d)
                d = d + jnp.asarray(v)
            e = jnp.zeros(3)
            for v in xs:
                probe("rebound later in the body", e)
                e = np.asarray(e)
            try:
                f = jnp.ones(1)
            except ValueError:
                f = None
            probe("try/except", f)
        """
    )
    assert probes == {
        "if one branch host": False,
        "if both device": True,
        "in loop after binding": True,
        "after loop": False,
        "loop-carried": True,
        "rebound later in the body": False,
        "try/except": False,
    }


def test_loop_targets_over_device_values() -> None:
    probes = _probes(
        """
        import jax.numpy as jnp

        def run(xs, names):
            out = jnp.ones((4, 3))
            acts = {"a": jnp.ones(2)}
            for row in out:
                probe("row", row)
            for i, row in enumerate(out):
                probe("enumerate index", i)
                probe("enumerate item", row)
            for k, v in acts.items():
                probe("items key", k)
                probe("items value", v)
            for name in names:
                probe("host iterable", name)
            probe("comprehension", [r.sum() for r in out])
        """
    )
    assert probes == {
        "row": True,
        "enumerate index": False,
        "enumerate item": True,
        "items key": False,
        "items value": True,
        "host iterable": False,
        "comprehension": True,
    }


def test_loop_dispatches() -> None:
    loops = _loops(
        """
        import jax
        import jax.numpy as jnp
        import numpy as np

        @jax.jit
        def step(x):
            return x

        def run(xs, out_dict):
            for x in xs:
                y = step(x)
            for x in xs:
                print(x)
            acts = step(xs)
            for i in range(4):
                a = np.asarray(acts[i])
            for k in acts:
                a = np.asarray(acts[k])
            for k in ["a", "b"]:
                a = np.asarray(acts["a"])
            while True:
                z = jnp.ones(3)
            for x in xs:
                def inner():
                    return jnp.ones(3)
            for x in xs:
                h = np.asarray(x) + 1
        """
    )
    assert loops == [True, False, True, False, False, True, False, False]


def test_consumer_names_the_jitted_function_and_its_parameters() -> None:
    source = textwrap.dedent(
        """
        import functools
        import jax
        import equinox as eqx

        @functools.partial(jax.jit, static_argnums=0)
        def loss(model, x, mask=None):
            return x

        def raw(x, y):
            return x

        fast = jax.jit(raw)

        class Trainer:
            @eqx.filter_jit
            def step(self, x, *, mask):
                return x

            def run(self, x):
                self.step(x)

        def main(x):
            loss(None, x)
            fast(x, x)
            jax.jit(raw)(x, x)
            raw(x, x)
        """
    )
    module = cst.parse_module(source)
    ctx = FileContext("<test>", source, module)
    found = {}

    def visit(call: cst.Call) -> None:
        consumer = ctx.device.consumer(call)
        found[module.code_for_node(call)] = None if consumer is None else (consumer.api, consumer.params)

    walk(module, {cst.Call: [visit]}, {}, ctx.ancestors)
    assert found["loss(None, x)"] == ("jax.jit", ("model", "x", "mask"))
    assert found["fast(x, x)"] == ("jax.jit", ("x", "y"))
    assert found["jax.jit(raw)(x, x)"] == ("jax.jit", ("x", "y"))
    assert found["self.step(x)"] == ("equinox.filter_jit", ("self", "x", "mask"))
    assert found["raw(x, x)"] is None


def test_host_copies_and_traced_code() -> None:
    source = textwrap.dedent(
        """
        import equinox as eqx
        import jax
        import numpy as np
        from jax import lax

        def body(carry, x):
            print(x)
            return carry, x

        class Block(eqx.Module):
            def __call__(self, x):
                print(x)
                return x

        @jax.jit
        def jitted(x):
            print(x)
            return x

        def run(x, xs):
            lax.scan(body, 0, xs)
            np.asarray(x)
            np.array(x, dtype=np.float32)
            x.item()
            float(x)
            print(x, x)
            jax.device_get(x)
            x.sum()
            len(x)
        """
    )
    module = cst.parse_module(source)
    ctx = FileContext("<test>", source, module)
    kinds, traced = [], {}

    def visit(call: cst.Call) -> None:
        copy = ctx.device.host_copy(call)
        if copy is not None:
            kinds.append(copy.kind)
        if isinstance(call.func, cst.Name) and call.func.value == "print":
            function = ctx.enclosing_function()
            traced[function.name.value if function else None] = ctx.device.is_traced()

    walk(module, {cst.Call: [visit]}, {}, ctx.ancestors)
    assert traced == {"body": True, "__call__": True, "jitted": True, "run": False}
    assert [k for k in kinds if k != "print()"][-5:] == ["np.asarray", "np.array", ".item()", "float()", "jax.device_get"]


def test_a_dict_lookup_by_a_string_valued_name_sends_no_work() -> None:
    loops = _loops(
        """
        import jax

        @jax.jit
        def forward(x):
            return {"layer_0": x, "layer_1": x + 1}

        acts = forward(1.0)
        for layer in range(2):
            key = f"layer_{layer}"
            host = jax.device_get(acts[key])
        for layer in range(2):
            row = acts["layer_0"][layer]
        """
    )
    assert loops == [False, True]


def test_dataclasses_replace_is_no_model_call() -> None:
    probes = _probes(
        """
        import dataclasses
        import jax

        seq_params = make()
        key = jax.random.PRNGKey(0)
        child_params = dataclasses.replace(seq_params, key=jax.random.fold_in(key, 1))
        probe("replaced", child_params)
        """
    )
    assert probes == {"replaced": False}


def test_test_code_is_recognised() -> None:
    source = textwrap.dedent(
        """
        def test_one():
            a = 1

        class LoaderTest:
            def check(self):
                b = 2

        def train():
            c = 3
        """
    )
    found: dict[str, bool] = {}
    for path, expected in (("pkg/train.py", None), ("pkg/tests/train.py", True), ("pkg/train_test.py", True)):
        module = cst.parse_module(source)
        ctx = FileContext(path, source, module)

        def visit(node: cst.Assign, ctx: FileContext = ctx, path: str = path) -> None:
            name = node.targets[0].target.value  # type: ignore[attr-defined]
            found[f"{path}:{name}"] = ctx.device.in_test(ctx.ancestors)

        walk(module, {cst.Assign: [visit]}, {}, ctx.ancestors)
    assert found == {
        "pkg/train.py:a": True,
        "pkg/train.py:b": True,
        "pkg/train.py:c": False,
        "pkg/tests/train.py:a": True,
        "pkg/tests/train.py:b": True,
        "pkg/tests/train.py:c": True,
        "pkg/train_test.py:a": True,
        "pkg/train_test.py:b": True,
        "pkg/train_test.py:c": True,
    }


def test_a_function_behind_an_unknown_decorator_returns_unknown_values() -> None:
    probes = _probes(
        """
        import functools
        import jax
        import jax.numpy as jnp
        from mylib import utils, cached_to_disk

        @utils.jit_cpu(static_argnums=(1,))
        def resize(image, shape):
            return jax.image.resize(image, shape, "nearest")

        @cached_to_disk
        def features(x):
            return jnp.tanh(x)

        @functools.lru_cache
        def table(n):
            return jnp.arange(n)

        @functools.partial(jax.jit, static_argnums=(1,))
        def resize_jit(image, shape):
            return jax.image.resize(image, shape, "nearest")

        def plain(x):
            return jnp.tanh(x)

        probe("unknown decorator", resize(img, (2, 2)))
        probe("unknown local decorator", features(img))
        probe("functools cache", table(3))
        probe("jit", resize_jit(img, (2, 2)))
        probe("undecorated", plain(img))
        """
    )
    assert probes == {
        "unknown decorator": False,
        "unknown local decorator": False,
        "functools cache": True,
        "jit": True,
        "undecorated": True,
    }


def test_loop_computes_needs_compiled_work_a_model_or_a_library_step() -> None:
    source = textwrap.dedent(
        """
        import equinox as eqx
        import jax
        import jax.numpy as jnp
        import jaxopt

        @jax.jit
        def step(w, x):
            return w - 0.1 * x.mean(), jnp.mean(x)

        def loss(w, x):
            return jnp.mean((x @ w) ** 2)

        grad_loss = jax.grad(loss)

        def run(w, xs, key):
            for x in xs:
                w, l = step(w, x)
            for x in xs:
                w = w - 0.1 * grad_loss(w, x)
            for x in xs:
                y = jnp.sin(x) + 1.0
            model = eqx.nn.MLP(2, 2, 8, 2, key=key)
            for x in xs:
                y = model(x)
            for x in xs:
                y = jax.lax.fori_loop(0, 10, lambda i, v: v + 1, x)
            solver = jaxopt.GradientDescent(fun=loss)
            state = solver.init_state(w, xs[0])
            for x in xs:
                w, state = solver.update(w, state, x)
        """
    )
    module = cst.parse_module(source)
    ctx = FileContext("<test>", source, module)
    found: list[bool] = []

    def visit(loop: cst.CSTNode) -> None:
        found.append(ctx.device.loop_computes(loop, list(ctx.ancestors)))

    walk(module, {cst.For: [visit]}, {}, ctx.ancestors)
    # a jitted step; an unjitted grad of eager ops; eager ops; a Module's forward; a lax loop;
    # a jaxopt solver's update (jitted by the library)
    assert found == [True, False, False, True, True, True]
