"""Greedy generation with a small language model: the decoding mistakes jaxlint reports.

Run `jaxlint check examples/generate.py` for what the code shows, and
`jaxlint run -- python examples/generate.py` for what they cost in a real run.
"""

import time

import jax
import jax.numpy as jnp
import numpy as np


VOCAB, WIDTH, LAYERS = 64, 512, 4


def init_params(key):
    k1, k2 = jax.random.split(key)
    return {
        "embed": jax.random.normal(k1, (VOCAB, WIDTH)) / WIDTH**0.5,
        "layers": jax.random.normal(k2, (LAYERS, WIDTH, WIDTH)) / WIDTH**0.5,
    }


@jax.jit
def next_logits(params, tokens):
    hidden = params["embed"][tokens].mean(axis=1)  # (batch, width): a bag of the tokens so far
    for layer in params["layers"]:
        hidden = jnp.tanh(hidden @ layer)
    return hidden @ params["embed"].T


def pick_greedy(logits):
    """The most likely next token of each sequence, and its probability."""
    probs = jax.nn.softmax(logits, axis=-1)
    return jnp.argmax(probs, axis=-1), jnp.max(probs, axis=-1)


def generate(params, prompts, steps):
    tokens = jnp.asarray(prompts)
    for _ in range(steps):
        logits = next_logits(params, tokens)
        next_token, confidence = pick_greedy(logits)
        print("first sequence, next token:", int(next_token[0]))
        tokens = jnp.concatenate([tokens, next_token[:, None]], axis=1)
    return tokens


def sample(params, prompts, temperatures, key):
    samples = []
    for temperature in temperatures:
        key, subkey = jax.random.split(key)
        pick = jax.jit(lambda logits, k: jax.random.categorical(k, logits / temperature))
        samples.append(pick(next_logits(params, jnp.asarray(prompts)), subkey))
    return samples


def main():
    params = init_params(jax.random.PRNGKey(0))
    prompts = np.random.default_rng(0).integers(0, VOCAB, size=(256, 4))
    tokens = generate(params, prompts, steps=6)
    start = time.perf_counter()
    samples = sample(params, prompts, [0.5, 0.8, 1.0, 1.2], jax.random.PRNGKey(1))
    print(f"sampled in {time.perf_counter() - start:.2f} s")
    print("generated", tokens.shape, "samples", [s.shape for s in samples])


if __name__ == "__main__":
    main()
