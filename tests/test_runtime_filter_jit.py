"""`jaxlint.runtime.filter_jit` against `eqx.filter_jit`: same results, same compiles."""

from __future__ import annotations

import gc
import warnings
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np
import optax
import pytest

from jaxlint.runtime import count_compiles, filter_jit
from jaxlint.runtime import _filter_jit as impl


def assert_same(a: Any, b: Any) -> None:
    """Equal structure, equal static leaves, bit-identical arrays."""
    leaves_a, tree_a = jtu.tree_flatten(a)
    leaves_b, tree_b = jtu.tree_flatten(b)
    assert tree_a == tree_b
    for x, y in zip(leaves_a, leaves_b):
        if eqx.is_array(x):
            assert eqx.is_array(y) and x.shape == y.shape and x.dtype == y.dtype
            np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
        else:
            assert x == y


def both(fn: Any, **kwargs: Any) -> tuple[Any, Any]:
    return eqx.filter_jit(fn, **kwargs), filter_jit(fn, **kwargs)


# -- models ----------------------------------------------------------------------------------


class Transformer(eqx.Module):
    """Embedding, one attention block with dropout, LayerNorms, an MLP and a head."""

    embed: eqx.nn.Embedding
    attn: eqx.nn.MultiheadAttention
    drop: eqx.nn.Dropout
    norm1: eqx.nn.LayerNorm
    mlp: eqx.nn.MLP
    norm2: eqx.nn.LayerNorm
    head: eqx.nn.Linear
    layers: list[eqx.nn.Linear]

    def __init__(self, key: jax.Array) -> None:
        keys = jax.random.split(key, 6)
        self.embed = eqx.nn.Embedding(32, 16, key=keys[0])
        self.attn = eqx.nn.MultiheadAttention(2, 16, dropout_p=0.2, key=keys[1])
        self.drop = eqx.nn.Dropout(0.3)
        self.norm1 = eqx.nn.LayerNorm(16)
        self.mlp = eqx.nn.MLP(16, 16, 32, 1, key=keys[2])
        self.norm2 = eqx.nn.LayerNorm(16)
        self.head = eqx.nn.Linear(16, 3, key=keys[3])
        self.layers = [eqx.nn.Linear(16, 16, key=k) for k in jax.random.split(keys[4], 2)]

    def __call__(self, tokens: jax.Array, key: jax.Array | None) -> jax.Array:
        k1, k2 = (None, None) if key is None else jax.random.split(key)
        x = jax.vmap(self.embed)(tokens)
        x = jax.vmap(self.norm1)(x + self.drop(self.attn(x, x, x, key=k1), key=k2))
        for layer in self.layers:
            x = jax.vmap(layer)(x)
        x = jax.vmap(self.norm2)(x + jax.vmap(self.mlp)(x))
        return self.head(x.mean(0))


def mlp(key: int = 0, **kwargs: Any) -> eqx.nn.MLP:
    options = dict(in_size=3, out_size=2, width_size=8, depth=2)
    options.update(kwargs)
    return eqx.nn.MLP(**options, key=jax.random.PRNGKey(key))  # type: ignore[arg-type]


OPT = optax.adam(1e-2)


def mlp_step(model: eqx.nn.MLP, opt_state: Any, x: jax.Array, y: jax.Array) -> Any:
    def loss(m: eqx.nn.MLP) -> jax.Array:
        return jnp.mean((jax.vmap(m)(x) - y) ** 2)

    value, grads = eqx.filter_value_and_grad(loss)(model)
    updates, opt_state = OPT.update(grads, opt_state, eqx.filter(model, eqx.is_array))
    return eqx.apply_updates(model, updates), opt_state, value


def transformer_step(model: Transformer, opt_state: Any, tokens: jax.Array, labels: jax.Array, key: jax.Array) -> Any:
    def loss(m: Transformer) -> jax.Array:
        keys = jax.random.split(key, tokens.shape[0])
        logits = jax.vmap(m)(tokens, keys)
        return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()

    value, grads = eqx.filter_value_and_grad(loss)(model)
    updates, opt_state = OPT.update(grads, opt_state, eqx.filter(model, eqx.is_array))
    return eqx.apply_updates(model, updates), opt_state, value


def evaluate(model: Transformer, tokens: jax.Array) -> jax.Array:
    return jax.vmap(lambda t: model(t, None))(tokens)


def train(step: Any, model: Any, batches: list[tuple[Any, ...]]) -> tuple[Any, Any, list[Any]]:
    opt_state = OPT.init(eqx.filter(model, eqx.is_array))
    losses = []
    for batch in batches:
        model, opt_state, loss = step(model, opt_state, *batch)
        losses.append(loss)
    return model, opt_state, losses


# -- equivalence ------------------------------------------------------------------------------


def test_mlp_training_matches_eqx_exactly() -> None:
    xs = jax.random.normal(jax.random.PRNGKey(1), (5, 16, 3))
    ys = jax.random.normal(jax.random.PRNGKey(2), (5, 16, 2))
    batches = list(zip(xs, ys))
    eqx_step, our_step = both(mlp_step)
    assert_same(train(eqx_step, mlp(), batches), train(our_step, mlp(), batches))


def test_transformer_dropout_then_inference_mode_matches_eqx() -> None:
    tokens = jax.random.randint(jax.random.PRNGKey(1), (4, 6, 5), 0, 32)
    labels = jax.random.randint(jax.random.PRNGKey(2), (4, 6), 0, 3)
    keys = jax.random.split(jax.random.PRNGKey(3), 4)
    batches = list(zip(tokens, labels, keys))
    results = []
    eqx_step, our_step = both(transformer_step)
    eqx_eval, our_eval = both(evaluate)
    for step, evaluate_jit in ((eqx_step, eqx_eval), (our_step, our_eval)):
        model, opt_state, losses = train(step, Transformer(jax.random.PRNGKey(0)), batches)
        eval_model = eqx.nn.inference_mode(model)
        evaluated = evaluate_jit(eval_model, tokens[0])
        # Back to training mode (the original static part) for one more step.
        model, opt_state, loss = step(model, opt_state, *batches[0])
        results.append((model, opt_state, losses, evaluated, loss))
    assert_same(results[0], results[1])
    # The inference-mode call saw the changed static part: no dropout, as without jit.
    expected = jax.vmap(lambda t: eval_model(t, None))(tokens[0])
    np.testing.assert_allclose(np.asarray(results[1][3]), np.asarray(expected), rtol=1e-5, atol=1e-6)


def test_training_reuses_the_returned_pytrees_without_flattening(monkeypatch: pytest.MonkeyPatch) -> None:
    fresh = []
    original = impl._flatten_tree
    monkeypatch.setattr(impl, "_flatten_tree", lambda x, d: fresh.append(type(x).__name__) or original(x, d))
    step = filter_jit(transformer_step)
    model = Transformer(jax.random.PRNGKey(0))
    opt_state = OPT.init(eqx.filter(model, eqx.is_array))
    tokens = jnp.zeros((6, 5), jnp.int32)  # the shapes of the test above: no new compile
    labels = jnp.zeros((6,), jnp.int32)
    for i in range(4):
        model, opt_state, _ = step(model, opt_state, tokens, labels, jax.random.PRNGKey(i))
    assert fresh == ["Transformer"] * 3  # in the first call only: the model, adam's mu and nu


def test_a_list_changed_in_place_inside_a_module_is_seen() -> None:
    eqx_eval, our_eval = both(evaluate)
    model = eqx.nn.inference_mode(Transformer(jax.random.PRNGKey(0)))
    tokens = jnp.arange(10).reshape(2, 5)
    for f in (eqx_eval, our_eval):
        f(model, tokens)
    model.layers[0] = eqx.nn.Linear(16, 16, key=jax.random.PRNGKey(9))  # mutate the list
    assert_same(eqx_eval(model, tokens), our_eval(model, tokens))
    model.layers.append(model.layers[1])
    assert_same(eqx_eval(model, tokens), our_eval(model, tokens))


def test_numpy_leaves_changed_in_place_are_seen() -> None:
    class Holder(eqx.Module):
        w: np.ndarray

    holder = Holder(np.ones(3, np.float32))
    f = filter_jit(lambda h: h.w * 2)
    np.testing.assert_array_equal(f(holder), [2, 2, 2])
    holder.w[:] = 5
    np.testing.assert_array_equal(f(holder), [10, 10, 10])


# -- static changes and compiles -------------------------------------------------------------


class Scaled(eqx.Module):
    linear: eqx.nn.Linear
    scale: float
    activation: Any = jax.nn.relu

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.activation(self.linear(x)) * self.scale


def apply(model: Any, x: jax.Array) -> Any:
    return jax.vmap(model)(x)


def test_static_changes_give_eqx_results_and_compile_where_eqx_does() -> None:
    x = jax.random.normal(jax.random.PRNGKey(1), (4, 3))
    base = Scaled(eqx.nn.Linear(3, 3, key=jax.random.PRNGKey(0)), 2.0)
    models = [
        base,
        base,  # the same object again
        eqx.tree_at(lambda m: m.scale, base, 3.0),  # a changed Python field
        eqx.tree_at(lambda m: m.activation, base, jax.nn.tanh),  # another activation
        eqx.tree_at(lambda m: m.linear.weight, base, base.linear.weight * 2),  # arrays only
        Scaled(eqx.nn.Linear(3, 3, use_bias=False, key=jax.random.PRNGKey(0)), 2.0),  # structure
        eqx.tree_at(lambda m: m.scale, base, 3.0),  # equal to an earlier one, new object
    ]
    counts = []
    outputs = []
    for f in both(apply):
        with count_compiles() as compiles:
            outputs.append([f(m, x) for m in models] + [f(models[0], x[:2])])
        counts.append(compiles.count("apply"))
    assert_same(outputs[0], outputs[1])
    assert counts[0] == counts[1] == 5  # base, scale 3.0, tanh, no bias, a new shape


def test_inference_mode_is_not_baked_in() -> None:
    model = eqx.nn.Dropout(0.5)
    x = jnp.ones(1000)
    f = filter_jit(lambda m, x, k: m(x, key=k))
    key = jax.random.PRNGKey(0)
    assert float((f(model, x, key) == 0).mean()) > 0.3
    assert_same(f(eqx.nn.inference_mode(model), x, key), x)
    assert float((f(model, x, key) == 0).mean()) > 0.3


def test_python_scalar_arguments_are_static_like_eqx() -> None:
    def g(x: jax.Array, n: int, flag: bool = False) -> jax.Array:
        return x * n + (1 if flag else 0)

    x = jnp.ones(3)
    counts, outputs = [], []
    for f in both(g):
        with count_compiles() as compiles:
            outputs.append([f(x, 2), f(x, 2), f(x, 3), f(x, 3, True), f(x, 3, flag=True), f(x, n=3, flag=True)])
        counts.append(compiles.count("g"))
    assert_same(outputs[0], outputs[1])
    assert counts[0] == counts[1]


def test_repeated_calls_compile_once() -> None:
    step = filter_jit(mlp_step)
    x, y = jnp.ones((4, 3)), jnp.zeros((4, 2))
    model = mlp()
    opt_state = OPT.init(eqx.filter(model, eqx.is_array))
    with count_compiles() as compiles:
        for _ in range(5):
            model, opt_state, _ = step(model, opt_state, x, y)
    assert compiles.count("mlp_step") == 1


def test_two_wrappers_of_one_function_share_compiles() -> None:
    def double(x: jax.Array) -> jax.Array:
        return x * 2

    x = jnp.ones(3)
    with count_compiles() as compiles:
        filter_jit(double)(x)
        filter_jit(double)(x)
    assert compiles.count("double") == 1


# -- calling conventions ----------------------------------------------------------------------


def test_kwargs_and_defaults_match_eqx() -> None:
    def f(a: jax.Array, b: jax.Array, *rest: jax.Array, scale: float = 1.0, **extra: jax.Array) -> Any:
        return a * scale + b + sum(rest, jnp.zeros(())) + sum(extra.values(), jnp.zeros(()))

    a, b = jnp.ones(2), jnp.arange(2.0)
    calls = [
        ((a, b), {}),
        ((a,), {"b": b}),
        ((), {"a": a, "b": b, "scale": 3.0}),
        ((a, b, a), {"z": b, "y": a}),
    ]
    for f_eqx, f_ours in [both(f)]:
        for args, kwargs in calls:
            assert_same(f_eqx(*args, **kwargs), f_ours(*args, **kwargs))
    with pytest.raises(TypeError):
        filter_jit(f)(a)


def test_methods_match_eqx() -> None:
    class Model(eqx.Module):
        linear: eqx.nn.Linear

        @eqx.filter_jit
        def eqx_call(self, x: jax.Array) -> jax.Array:
            return self.linear(x)

        @filter_jit
        def our_call(self, x: jax.Array) -> jax.Array:
            return self.linear(x)

        @filter_jit(donate="all-except-first")
        def __call__(self, x: jax.Array) -> jax.Array:
            return self.linear(x) + x

    model = Model(eqx.nn.Linear(3, 3, key=jax.random.PRNGKey(0)))
    x = jnp.ones(3)
    assert_same(model.eqx_call(x), model.our_call(x))
    out = model(jnp.ones(3))
    assert not model.linear.weight.is_deleted()  # self is the first argument: not donated
    assert_same(out, model.linear(x) + x)
    assert Model.our_call.__name__ == "our_call"


def test_non_array_outputs_are_returned() -> None:
    def f(x: jax.Array) -> Any:
        return {"y": x + 1, "name": "out", "n": 3, "none": None, "fn": jax.nn.relu, "shape": x.shape}

    f_eqx, f_ours = both(f)
    x = jnp.ones(4)
    for _ in range(2):
        assert_same(f_eqx(x), f_ours(x))
    assert f_ours(x)["fn"] is jax.nn.relu


def test_outputs_of_every_node_type_are_rebuilt_exactly() -> None:
    import collections

    class WithStatic(eqx.Module):
        weight: jax.Array
        name: str = eqx.field(static=True)
        sub: Any = None

    Pair = collections.namedtuple("Pair", ["first", "second"])

    def make(x: jax.Array) -> Any:
        return {
            "static": WithStatic(x, "w", sub=[x, (x, None)]),
            "sequential": eqx.nn.Sequential([eqx.nn.Lambda(jnp.tanh), eqx.nn.Identity()]),
            "ordered": collections.OrderedDict([("b", x), ("a", 2)]),
            "pair": Pair(x * 2, "second"),
            "partial": jtu.Partial(jnp.add, x),
            "none": None,
        }

    f_eqx, f_ours = both(make)
    x = jnp.arange(3.0)
    for _ in range(3):  # the first call unflattens; later ones use the generated builder
        expected, got = f_eqx(x), f_ours(x)
        assert_same(expected, got)
        assert type(got["ordered"]) is collections.OrderedDict and list(got["ordered"]) == ["b", "a"]
        assert vars(got["static"]).keys() == vars(expected["static"]).keys()


def test_a_module_as_the_function_matches_eqx() -> None:
    model = mlp()
    x = jnp.ones(3)
    f_eqx, f_ours = eqx.filter_jit(model), filter_jit(model)
    assert_same(f_eqx(x), f_ours(x))
    assert_same(f_eqx(x), f_ours(x))


def test_calls_under_an_outer_transform_match_eqx() -> None:
    inner_eqx, inner_ours = both(lambda m, x: m(x))
    model = mlp()
    xs = jnp.ones((5, 3))
    expected = jax.vmap(lambda x: inner_eqx(model, x))(xs)
    assert_same(jax.vmap(lambda x: inner_ours(model, x))(xs), expected)
    assert_same(jax.jit(lambda x: inner_ours(model, x))(xs[0]), inner_eqx(model, xs[0]))
    assert_same(eqx.filter_grad(lambda m: inner_ours(m, xs[0]).sum())(model),
                eqx.filter_grad(lambda m: inner_eqx(m, xs[0]).sum())(model))  # fmt: skip


def test_wrapper_metadata() -> None:
    def documented(x: jax.Array) -> jax.Array:
        """Doubles."""
        return 2 * x

    f = filter_jit(documented)
    assert f.__name__ == "documented" and f.__doc__ == "Doubles." and f.__wrapped__ is documented
    assert "documented" in repr(f)


def test_bad_options_are_rejected() -> None:
    with pytest.raises(ValueError, match="donate"):
        filter_jit(lambda x: x, donate="some")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="static_argnums"):
        filter_jit(lambda x: x, static_argnums=0)
    with pytest.raises(TypeError, match="callable"):
        filter_jit(3)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="hashable"):
        filter_jit(lambda x, s: x)(jnp.ones(2), {1, 2})


# -- donation ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("donate", "first_deleted", "rest_deleted"),
    [("all", True, True), ("all-except-first", False, True), ("none", False, False)],
)
def test_donation_deletes_the_donated_inputs(donate: str, first_deleted: bool, rest_deleted: bool) -> None:
    def f(a: Any, b: Any) -> Any:
        return jax.tree.map(lambda x: x + 1, (a, b))

    for wrapper in (eqx.filter_jit, filter_jit):
        a, b = {"w": jnp.ones(8)}, [jnp.ones(8), jnp.ones(8)]
        out = wrapper(f, donate=donate)(a, b)  # type: ignore[operator]
        assert a["w"].is_deleted() is first_deleted
        assert [x.is_deleted() for x in b] == [rest_deleted] * 2
        assert_same(out, ({"w": jnp.full(8, 2.0)}, [jnp.full(8, 2.0)] * 2))


def test_donated_training_matches_eqx() -> None:
    xs = jax.random.normal(jax.random.PRNGKey(1), (3, 16, 3))
    ys = jax.random.normal(jax.random.PRNGKey(2), (3, 16, 2))
    batches = list(zip(xs, ys))
    eqx_step, our_step = both(mlp_step, donate="all")
    assert_same(train(eqx_step, mlp(), batches), train(our_step, mlp(), batches))


def test_unusable_donations_warn_only_with_warn() -> None:
    def total(x: jax.Array) -> jax.Array:
        return x.sum()

    filter_jit(total, donate="all")(jnp.ones(7))  # filterwarnings=error: no warning allowed
    with pytest.warns(UserWarning, match="donated buffers were not usable"):
        filter_jit(total, donate="warn")(jnp.ones(7))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        filter_jit(total, donate="all")(jnp.ones(9))
    assert not any("donated" in str(f[1] and f[1].pattern) for f in warnings.filters)


# -- blocking, errors, AOT --------------------------------------------------------------------


def test_block_true_raises_error_if_at_the_call() -> None:
    def checked(x: jax.Array) -> jax.Array:
        return eqx.error_if(x, x < 0, "negative input")

    with pytest.raises(eqx.EquinoxRuntimeError, match="negative input"):
        filter_jit(checked, block=True)(-jnp.ones(2))
    with pytest.raises(Exception, match="negative input") as raised:
        # Without block, the error comes with the value: at the call on CPU, where small
        # computations run inline, or when the result is first read.
        filter_jit(checked)(-jnp.ones(2)).block_until_ready()
    # The message shows the stack inside the jitted function, not the test runner's.
    assert "checked" in str(raised.value) and "_pytest" not in str(raised.value)


def test_garbage_collection_is_restored_after_a_failing_call() -> None:
    def fails(x: jax.Array) -> jax.Array:
        raise RuntimeError("boom")

    assert gc.isenabled()
    with pytest.raises(RuntimeError, match="boom"):
        filter_jit(fails)(jnp.ones(2))
    assert gc.isenabled()


def test_lower_and_compile_ahead_of_time() -> None:
    model = mlp()
    x = jnp.ones((4, 3))
    f = filter_jit(apply)
    lowered = f.lower(model, x)
    assert "func" in lowered.as_text()
    compiled = lowered.compile()
    assert_same(compiled(model, x), eqx.filter_jit(apply)(model, x))
    with pytest.raises(ValueError, match="lower it again"):
        compiled(eqx.tree_at(lambda m: m.activation, model, jax.nn.tanh), x)


def test_docstring_example_runs(run_doc_examples) -> None:  # type: ignore[no-untyped-def]
    run_doc_examples(filter_jit)
