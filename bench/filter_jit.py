"""Per-call overhead and end-to-end step time of four ways to jit a training step (seed 000).

    python bench/filter_jit.py [--sizes tiny base] [--calls 200] [--steps 20] [--rounds 5]

Model: a BERT-like equinox encoder (runtime-baseline.md §2): embeddings (word, position,
token type) with LayerNorm and Dropout; N blocks of MultiheadAttention (biases, attention
dropout), Dropout, LayerNorm, Linear h->4h, gelu, Linear 4h->h, Dropout, LayerNorm; pooler and
classifier. The blocks are held in a list, as much user code does. Sizes: `tiny` (2 layers,
hidden 128: 41 array leaves) and `base` (12 layers, hidden 768, 110M parameters: 201 array
leaves, 403 in the adam state). Optimizer `optax.adam(1e-4)`; dropout on (a fresh key each step).

Variants, each a step `(model, opt_state, batch, key) -> (model, opt_state, loss)`:

- `eqx.filter_jit`: `eqx.filter_jit(step, donate="all")` called with the Module and the adam state;
- `jaxlint filter_jit`: `jaxlint.runtime.filter_jit(step, donate="all")`, called the same way;
- `partition-once jax.jit`: `params, static = eqx.partition(model, eqx.is_array)` once, then
  `jax.jit(..., donate_argnums=(0, 1))` of a closure over `static`, called with the params
  Module (the rewrite seed 000 measured; it goes stale if `static` changes);
- `jax.jit flat leaves`: the same closure, carrying flat lists of the array leaves of the params
  and of the adam state, unflattened inside (equinox's "Low-overhead training loops").

Two measurements, all variants interleaved in one process, order alternating each round:

1. per-call overhead: the same step shape with no computation (it returns its donated inputs
   and a scalar), `--calls` calls per variant per round, each call blocked on its loss;
2. end-to-end: the real step (forward, backward, adam update) for `--steps` steps per round,
   blocked once at the end of the steps, as a training loop runs.

Reported: median and minimum µs per call (overhead: every call is a sample) or ms per step
(end to end: the mean step time of each round is a sample), and ratios against
`eqx.filter_jit` and against `jax.jit flat leaves`, of medians and of minima. Every variant's first-step
loss and updated parameters are checked equal before timing. Compare ratios, not absolute times:
the machine may be shared.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import platform
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np
import optax

from _common import Block
from jaxlint.runtime import filter_jit


SIZES = {
    # layers, hidden, heads, batch, sequence
    "tiny": (2, 128, 2, 8, 64),
    "base": (12, 768, 12, 2, 32),
}


# -- the model -------------------------------------------------------------------------------


class Encoder(eqx.Module):
    word: eqx.nn.Embedding
    position: eqx.nn.Embedding
    token_type: eqx.nn.Embedding
    norm: eqx.nn.LayerNorm
    dropout: eqx.nn.Dropout
    blocks: list[Block]
    pooler: eqx.nn.Linear
    classifier: eqx.nn.Linear

    def __init__(self, layers: int, hidden: int, heads: int, vocab: int = 30522, *, key: jax.Array) -> None:
        keys = jax.random.split(key, layers + 5)
        self.word = eqx.nn.Embedding(vocab, hidden, key=keys[0])
        self.position = eqx.nn.Embedding(512, hidden, key=keys[1])
        self.token_type = eqx.nn.Embedding(2, hidden, key=keys[2])
        self.norm = eqx.nn.LayerNorm(hidden)
        self.dropout = eqx.nn.Dropout(0.1)
        self.blocks = [Block(hidden, heads, key=k) for k in keys[3 : 3 + layers]]
        self.pooler = eqx.nn.Linear(hidden, hidden, key=keys[-2])
        self.classifier = eqx.nn.Linear(hidden, 2, key=keys[-1])

    def __call__(self, tokens: jax.Array, key: jax.Array) -> jax.Array:
        keys = jax.random.split(key, len(self.blocks) + 1)
        positions = jnp.arange(tokens.shape[0])
        x = jax.vmap(self.word)(tokens) + jax.vmap(self.position)(positions)
        x = x + jax.vmap(self.token_type)(jnp.zeros_like(tokens))
        x = self.dropout(jax.vmap(self.norm)(x), key=keys[0])
        for block, k in zip(self.blocks, keys[1:]):
            x = block(x, k)
        return self.classifier(jnp.tanh(self.pooler(x[0])))


OPTIMIZER = optax.adam(1e-4)


def loss_fn(model: Encoder, tokens: jax.Array, labels: jax.Array, key: jax.Array) -> jax.Array:
    keys = jax.random.split(key, tokens.shape[0])
    logits = jax.vmap(model)(tokens, keys)
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()


def train_step(model: Encoder, opt_state: Any, batch: tuple[jax.Array, jax.Array], key: jax.Array) -> Any:
    tokens, labels = batch
    loss, grads = eqx.filter_value_and_grad(loss_fn)(model, tokens, labels, key)
    updates, opt_state = OPTIMIZER.update(grads, opt_state, eqx.filter(model, eqx.is_array))
    return eqx.apply_updates(model, updates), opt_state, loss


def noop_step(model: Encoder, opt_state: Any, batch: tuple[jax.Array, jax.Array], key: jax.Array) -> Any:
    del key
    return model, opt_state, batch[1][0].astype(jnp.float32)


# -- the four variants -----------------------------------------------------------------------


class Variant:
    """A way to run a step: `init(model, opt_state)` gives the carried state, `call(state,
    batch, key)` runs one step and returns (new state, loss), `model(state)` the Module."""

    def __init__(self, init: Callable[..., Any], call: Callable[..., Any], model: Callable[[Any], Any]) -> None:
        self.init, self.call, self.model = init, call, model


def variants(step: Callable[..., Any], static: Any) -> dict[str, Variant]:
    """The four variants of `step`; `static` is the non-array part of the model."""
    eqx_step = eqx.filter_jit(step, donate="all")
    ours = filter_jit(step, donate="all")

    def eqx_call(state: Any, batch: Any, key: jax.Array) -> Any:
        model, opt_state, loss = eqx_step(*state, batch, key)
        return (model, opt_state), loss

    def our_call(state: Any, batch: Any, key: jax.Array) -> Any:
        model, opt_state, loss = ours(*state, batch, key)
        return (model, opt_state), loss

    @ft_partial_jit
    def partitioned(params: Any, opt_state: Any, batch: Any, key: jax.Array) -> Any:
        model, opt_state, loss = step(eqx.combine(params, static), opt_state, batch, key)
        return eqx.filter(model, eqx.is_array), opt_state, loss

    def partitioned_init(model: Any, opt_state: Any) -> Any:
        return eqx.filter(model, eqx.is_array), opt_state

    def partitioned_call(state: Any, batch: Any, key: jax.Array) -> Any:
        params, opt_state, loss = partitioned(*state, batch, key)
        return (params, opt_state), loss

    treedefs: dict[str, Any] = {}

    @ft_partial_jit
    def flat(params_leaves: list[Any], opt_leaves: list[Any], batch: Any, key: jax.Array) -> Any:
        params = jtu.tree_unflatten(treedefs["params"], params_leaves)
        opt_state = jtu.tree_unflatten(treedefs["opt"], opt_leaves)
        model, opt_state, loss = step(eqx.combine(params, static), opt_state, batch, key)
        return jtu.tree_leaves(eqx.filter(model, eqx.is_array)), jtu.tree_leaves(opt_state), loss

    def flat_init(model: Any, opt_state: Any) -> Any:
        params_leaves, treedefs["params"] = jtu.tree_flatten(eqx.filter(model, eqx.is_array))
        opt_leaves, treedefs["opt"] = jtu.tree_flatten(opt_state)
        return params_leaves, opt_leaves

    def flat_call(state: Any, batch: Any, key: jax.Array) -> Any:
        params_leaves, opt_leaves, loss = flat(*state, batch, key)
        return (params_leaves, opt_leaves), loss

    return {
        "eqx.filter_jit": Variant(lambda m, s: (m, s), eqx_call, lambda st: st[0]),
        "jaxlint filter_jit": Variant(lambda m, s: (m, s), our_call, lambda st: st[0]),
        "partition-once jax.jit": Variant(partitioned_init, partitioned_call, lambda st: eqx.combine(st[0], static)),
        "jax.jit flat leaves": Variant(
            flat_init, flat_call, lambda st: eqx.combine(jtu.tree_unflatten(treedefs["params"], st[0]), static)
        ),
    }


def ft_partial_jit(fn: Callable[..., Any]) -> Callable[..., Any]:
    return jax.jit(fn, donate_argnums=(0, 1))


# -- measuring -------------------------------------------------------------------------------


def fresh_state(model: Encoder) -> tuple[Encoder, Any]:
    """A private copy of the model and a fresh adam state (every variant donates its own)."""
    copy = jtu.tree_map(lambda x: jnp.array(x, copy=True) if eqx.is_array(x) else x, model)
    return copy, OPTIMIZER.init(eqx.filter(copy, eqx.is_array))


def check_equal(results: dict[str, tuple[float, Any]]) -> None:
    names = list(results)
    loss0, model0 = results[names[0]]
    leaves0 = [np.asarray(x) for x in jtu.tree_leaves(eqx.filter(model0, eqx.is_array))]
    for name in names[1:]:
        loss, model = results[name]
        leaves = [np.asarray(x) for x in jtu.tree_leaves(eqx.filter(model, eqx.is_array))]
        same = loss == loss0 and len(leaves) == len(leaves0) and all(
            np.array_equal(a, b) for a, b in zip(leaves, leaves0)
        )
        if not same:
            sys.exit(f"error: {name} computes something else than {names[0]} ({loss} vs {loss0})")


def run(
    model: Encoder, step: Callable[..., Any], batch: Any, rounds: int, calls: int, per_call_block: bool
) -> dict[str, list[float]]:
    """Seconds per call of every variant, one list entry per round."""
    static = eqx.filter(model, eqx.is_array, inverse=True)
    chosen = variants(step, static)
    states = {}
    results = {}
    for name, variant in chosen.items():  # compile, warm up, check
        state = variant.init(*fresh_state(model))
        state, loss = variant.call(state, batch, jax.random.PRNGKey(1))
        results[name] = (float(loss), variant.model(state))
        states[name] = state
    check_equal(results)
    del results
    times: dict[str, list[float]] = {name: [] for name in chosen}
    names = list(chosen)
    key = jax.random.PRNGKey(2)
    keys = list(jax.random.split(key, calls))
    clock = time.perf_counter
    for index in range(rounds):
        for name in names if index % 2 == 0 else reversed(names):
            call, state = chosen[name].call, states[name]
            if per_call_block:  # one sample per call
                for k in keys:
                    start = clock()
                    state, loss = call(state, batch, k)
                    loss.block_until_ready()
                    times[name].append(clock() - start)
            else:  # one sample per round: the mean step time of an unblocked loop
                start = clock()
                for k in keys:
                    state, loss = call(state, batch, k)
                jax.block_until_ready((state, loss))
                times[name].append((clock() - start) / calls)
            states[name] = state
    return times


def rows(label: str, times: dict[str, list[float]], unit: float, fmt: str) -> list[str]:
    """Median and min per variant; speed-up over `eqx.filter_jit` and cost against the flat
    `jax.jit`, each as a ratio of medians / a ratio of minima."""
    med = {name: statistics.median(t) for name, t in times.items()}
    low = {name: min(t) for name, t in times.items()}
    eqx, flat = "eqx.filter_jit", "jax.jit flat leaves"
    out = []
    for name in times:
        out.append(
            f"| {label} | {name} | {med[name] * unit:{fmt}} | {low[name] * unit:{fmt}} | "
            f"{med[eqx] / med[name]:.2f}x / {low[eqx] / low[name]:.2f}x | "
            f"{med[name] / med[flat]:.2f}x / {low[name] / low[flat]:.2f}x |"
        )
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", choices=list(SIZES), default=list(SIZES))
    parser.add_argument("--calls", type=int, default=100, help="no-op calls per variant per round")
    parser.add_argument("--steps", type=int, default=10, help="train steps per variant per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--skip-e2e", action="store_true", help="only the per-call overhead")
    args = parser.parse_args(argv)

    versions = ", ".join(f"{p} {importlib.metadata.version(p)}" for p in ("jax", "equinox", "optax"))
    print(f"python {platform.python_version()}, {versions}, {jax.device_count()} {jax.default_backend()} "
          f"device(s), {args.rounds} interleaved rounds")  # fmt: skip
    overhead = ["| model | variant | median µs/call | min µs/call | speed-up over eqx.filter_jit (medians / minima) | cost vs flat jax.jit (medians / minima) |",
                "|---|---|---|---|---|---|"]  # fmt: skip
    e2e = ["| model | variant | median ms/step | min ms/step | speed-up over eqx.filter_jit (medians / minima) | cost vs flat jax.jit (medians / minima) |",
           "|---|---|---|---|---|---|"]  # fmt: skip
    for size in args.sizes:
        layers, hidden, heads, batch_size, seq = SIZES[size]
        model = Encoder(layers, hidden, heads, key=jax.random.PRNGKey(0))
        arrays = sum(eqx.is_array(x) for x in jtu.tree_leaves(model))
        opt_arrays = len(jtu.tree_leaves(OPTIMIZER.init(eqx.filter(model, eqx.is_array))))
        label = f"{size} ({arrays} + {opt_arrays} adam array leaves)"
        tokens = jax.random.randint(jax.random.PRNGKey(3), (batch_size, seq), 0, 30522)
        labels = jax.random.randint(jax.random.PRNGKey(4), (batch_size,), 0, 2)
        batch = (tokens, labels)
        overhead += rows(label, run(model, noop_step, batch, args.rounds, args.calls, True), 1e6, ".0f")
        print(f"{size}: overhead done", file=sys.stderr)
        if not args.skip_e2e:
            e2e += rows(label, run(model, train_step, batch, args.rounds, args.steps, False), 1e3, ".2f")
            print(f"{size}: end to end done", file=sys.stderr)
    print("\nPer-call overhead (no-op step, donated, blocked on each call):\n")
    print("\n".join(overhead))
    if not args.skip_e2e:
        print(f"\nEnd to end (train step with dropout, {args.steps} steps per round, blocked at the end):\n")
        print("\n".join(e2e))


if __name__ == "__main__":
    main()
