"""jit_extraction on CPU: equinox encoders (tapped blocks), dict-returning forwards, Flax linen
when installed; one compile per batch shape."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest


jax = pytest.importorskip("jax")
eqx = pytest.importorskip("equinox")
jnp = jax.numpy

from jaxlint.runtime import count_compiles, jit_extraction  # noqa: E402


class Block(eqx.Module):
    weight: jax.Array
    scale: float = eqx.field(static=True, default=1.0)

    def __call__(self, x, train=False):  # type: ignore[no-untyped-def]
        y = jnp.tanh(x @ self.weight) * self.scale + x
        return y * 0.5 if train else y


class Encoder(eqx.Module):
    embed: jax.Array
    blocks: list
    activation: object  # a non-array leaf: jax.jit alone could not take this model

    def __init__(self, key, dim=8, depth=4):  # type: ignore[no-untyped-def]
        keys = jax.random.split(key, depth + 1)
        self.embed = jax.random.normal(keys[0], (16, dim))
        self.blocks = [Block(jax.random.normal(k, (dim, dim)) / dim) for k in keys[1:]]
        self.activation = jax.nn.gelu

    def __call__(self, tokens, train=False):  # type: ignore[no-untyped-def]
        x = self.embed[tokens]
        for block in self.blocks:
            x = block(x, train=train)
        return self.activation(x).sum(-1)


def _eager_hidden(model: Encoder, tokens, train=False):  # type: ignore[no-untyped-def]
    x = model.embed[tokens]
    hidden = []
    for block in model.blocks:
        x = block(x, train=train)
        hidden.append(x)
    return hidden


def _tokens(seed: int, shape=(4, 6)):  # type: ignore[no-untyped-def]
    return jax.random.randint(jax.random.PRNGKey(seed), shape, 0, 16)


def test_equinox_blocks_match_the_eager_forward_and_compile_once() -> None:
    model = Encoder(jax.random.PRNGKey(0))
    extract = jit_extraction(layers=["blocks.1", "blocks.3"])
    with count_compiles() as compiles:
        results = [extract(model, _tokens(seed)) for seed in range(3)]
    assert compiles.count("extract") == 1
    for seed, activations in enumerate(results):
        hidden = _eager_hidden(model, _tokens(seed))
        assert sorted(activations) == ["blocks.1", "blocks.3"]
        np.testing.assert_allclose(activations["blocks.1"], hidden[1], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(activations["blocks.3"], hidden[3], rtol=1e-5, atol=1e-6)
    with count_compiles() as compiles:
        extract(model, _tokens(0, shape=(2, 6)))  # a new batch shape compiles once more
    assert compiles.count("extract") == 1


def test_per_example_forward_is_vmapped_and_patterns_select_every_block() -> None:
    model = Encoder(jax.random.PRNGKey(1))
    extract = jit_extraction(lambda m, t: m(t), layers="blocks.*", batch_axis=0, return_output=True)
    tokens = _tokens(3)
    output, activations = extract(model, tokens)
    assert sorted(activations) == [f"blocks.{i}" for i in range(4)]
    hidden = _eager_hidden(model, tokens)
    for i in range(4):
        np.testing.assert_allclose(activations[f"blocks.{i}"], hidden[i], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(output, model(tokens), rtol=1e-5, atol=1e-6)


def test_keyword_arguments_are_static_and_part_of_the_key() -> None:
    model = Encoder(jax.random.PRNGKey(2))
    extract = jit_extraction(layers=("blocks.0",))
    tokens = _tokens(4)
    with count_compiles() as compiles:
        trained = extract(model, tokens, train=True)
        plain = extract(model, tokens, train=False)
        extract(model, tokens, train=True)
    assert compiles.count("extract") == 2
    np.testing.assert_allclose(trained["blocks.0"], _eager_hidden(model, tokens, train=True)[0], rtol=1e-5)
    np.testing.assert_allclose(plain["blocks.0"], _eager_hidden(model, tokens)[0], rtol=1e-5)


def test_a_new_model_with_the_same_structure_reuses_the_compile() -> None:
    extract = jit_extraction(layers=["blocks.2"])
    first, second = Encoder(jax.random.PRNGKey(5)), Encoder(jax.random.PRNGKey(6))
    tokens = _tokens(7)
    with count_compiles() as compiles:
        a = extract(first, tokens)
        b = extract(second, tokens)
    assert compiles.count("extract") == 1
    assert not np.allclose(a["blocks.2"], b["blocks.2"])


def test_a_block_called_twice_has_its_outputs_stacked() -> None:
    model = Encoder(jax.random.PRNGKey(8))

    def twice(m, t):  # type: ignore[no-untyped-def]
        x = m.embed[t]
        return m.blocks[0](m.blocks[0](x))

    activations = jit_extraction(twice, layers=["blocks.0"])(model, _tokens(9))
    assert activations["blocks.0"].shape == (2, 4, 6, 8)


def test_a_forward_returning_a_dict_is_selected_from() -> None:
    params = {"w": jnp.eye(3) * 2.0}

    def apply(p, x, return_activations=True):  # type: ignore[no-untyped-def]
        h1 = x @ p["w"]
        h2 = jnp.tanh(h1)
        return h2.sum(), {"layer_1": h1, "layer_2": h2, "layer_3": -h2}

    extract = jit_extraction(apply, layers=["layer_1", "layer_3"])
    x = jnp.ones((2, 3))
    with count_compiles() as compiles:
        for _ in range(3):
            activations = extract(params, x)
    assert compiles.count("extract") == 1
    assert sorted(activations) == ["layer_1", "layer_3"]
    np.testing.assert_allclose(activations["layer_3"], -jnp.tanh(x * 2.0), rtol=1e-6)


def test_donated_inputs() -> None:
    model = Encoder(jax.random.PRNGKey(10))
    extract = jit_extraction(layers=["blocks.1"], donate=True)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*donated buffers were not usable.*")
        activations = extract(model, _tokens(11))
    np.testing.assert_allclose(activations["blocks.1"], _eager_hidden(model, _tokens(11))[1], rtol=1e-5)


def test_bad_layer_selections_are_clear_errors() -> None:
    model = Encoder(jax.random.PRNGKey(12))
    with pytest.raises(ValueError, match="match no sub-module"):
        jit_extraction(layers=["decoder.0"])(model, _tokens(0))
    with pytest.raises(ValueError, match=re.escape("did you mean ['layer_1']")):
        jit_extraction(lambda p, x: {"layer_1": x}, layers=["layer1"])({}, jnp.ones(2))
    with pytest.raises(TypeError, match="blocks"):
        jit_extraction(layers=[1, 3])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="at least one"):
        jit_extraction(layers=[])


def test_flax_linen_model_through_capture_intermediates() -> None:
    nn = pytest.importorskip("flax.linen")

    class LinenBlock(nn.Module):
        @nn.compact
        def __call__(self, x):  # type: ignore[no-untyped-def]
            return jnp.tanh(nn.Dense(8)(x)) + x

    class LinenEncoder(nn.Module):
        @nn.compact
        def __call__(self, x):  # type: ignore[no-untyped-def]
            for i in range(3):
                x = LinenBlock(name=f"blocks_{i}")(x)
            return x.sum(-1)

    model = LinenEncoder()
    x = jnp.ones((4, 8))
    variables = model.init(jax.random.PRNGKey(0), x)
    extract = jit_extraction(model.apply, layers=["blocks_1"], return_output=True)
    with count_compiles() as compiles:
        for i in range(3):
            output, activations = extract(variables, x + i)
    assert compiles.count("extract") == 1
    _, state = model.apply(variables, x + 2, capture_intermediates=True, mutable=["intermediates"])
    assert sorted(activations) == ["blocks_1"]
    np.testing.assert_allclose(
        activations["blocks_1"], state["intermediates"]["blocks_1"]["__call__"][0], rtol=1e-5
    )
    np.testing.assert_allclose(output, model.apply(variables, x + 2), rtol=1e-5)


def test_docstring_example_runs(run_doc_examples) -> None:  # type: ignore[no-untyped-def]
    run_doc_examples(jit_extraction)
