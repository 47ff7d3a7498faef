"""Eager vs jitted activation extraction (seed 001), and jit-in-loop compile counts.

    python bench/jit_extraction.py [--sizes small base] [--trials 10] [--iterations 10]

Model: an equinox encoder (embeddings, then N blocks of MultiheadAttention + LayerNorm +
Linear h->4h->h + LayerNorm, inference mode); the extraction returns the hidden states after
every other block, as seed 001's `extract_activations_sharded` does for its chosen layers.

- `small`: hidden 64, 2 blocks, 2 heads, batch 8 x 128 tokens;
- `base`: BERT-base shapes, hidden 768, 12 blocks, 12 heads, batch 2 x 64 tokens
  (`../shared/research/runtime-baseline.md` §8 used the same two sizes).

Part 1, extraction forward, each variant on the same model and tokens:

- `eager`: the extraction function as seed 001 had it, not compiled (`jax.vmap` over the
  batch, every operation dispatched from Python);
- `eqx.filter_jit`: the same function under `eqx.filter_jit` (the layer tuple static);
- `jit_extraction`: `jaxlint.runtime.jit_extraction(layers=..., batch_axis=0)`.

"batched" calls the extraction once per batch; "per example" loops over the batch in
Python, one call per example (what a per-sample extraction loop does). Timing: the runtime's
`compare` (warm-up on the same shapes, blocked results, interleaved rounds), medians in ms;
speed-up = eager median / jitted median. Every variant is checked equal to the eager one
first; "compiles" counts the jitted function's compiles over all its calls (one batch shape,
then one per-example shape).

Part 2, jit-in-loop: `--iterations` calls of `jax.jit(lambda ...)` created inside the loop
(before the JL007 fix) against one jitted function created before the loop (after), each
run cold (a new lambda per run, so both include their compiles): compiles counted with
`jaxlint.runtime.count_compiles`, wall time of the whole loop. Compare ratios, not absolute
times: the machine may be shared.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from jaxlint.runtime import compare, count_compiles, jit_extraction


SIZES = {
    "small": {"hidden": 64, "layers": 2, "heads": 2, "batch": 8, "seq": 128},
    "base": {"hidden": 768, "layers": 12, "heads": 12, "batch": 2, "seq": 64},
}


class Block(eqx.Module):
    attn: eqx.nn.MultiheadAttention
    attn_norm: eqx.nn.LayerNorm
    fc1: eqx.nn.Linear
    fc2: eqx.nn.Linear
    mlp_norm: eqx.nn.LayerNorm

    def __init__(self, hidden: int, heads: int, *, key: jax.Array) -> None:
        k1, k2, k3 = jax.random.split(key, 3)
        self.attn = eqx.nn.MultiheadAttention(heads, hidden, use_query_bias=True, use_output_bias=True, key=k1)
        self.attn_norm = eqx.nn.LayerNorm(hidden)
        self.fc1 = eqx.nn.Linear(hidden, 4 * hidden, key=k2)
        self.fc2 = eqx.nn.Linear(4 * hidden, hidden, key=k3)
        self.mlp_norm = eqx.nn.LayerNorm(hidden)

    def __call__(self, x: jax.Array) -> jax.Array:
        x = jax.vmap(self.attn_norm)(x + self.attn(x, x, x))
        hidden = jax.vmap(self.fc2)(jax.nn.gelu(jax.vmap(self.fc1)(x)))
        return jax.vmap(self.mlp_norm)(x + hidden)


class Encoder(eqx.Module):
    embed: eqx.nn.Embedding
    position: jax.Array
    blocks: tuple[Block, ...]

    def __init__(self, hidden: int, layers: int, heads: int, vocab: int = 1000, *, key: jax.Array) -> None:
        keys = jax.random.split(key, layers + 2)
        self.embed = eqx.nn.Embedding(vocab, hidden, key=keys[0])
        self.position = jax.random.normal(keys[1], (512, hidden)) * 0.02
        self.blocks = tuple(Block(hidden, heads, key=k) for k in keys[2:])

    def __call__(self, tokens: jax.Array) -> jax.Array:
        x = jax.vmap(self.embed)(tokens) + self.position[: tokens.shape[0]]
        for block in self.blocks:
            x = block(x)
        return x


def extract_activations(model: Encoder, tokens: jax.Array, layers: tuple[int, ...]) -> dict[str, jax.Array]:
    """Seed 001's extraction: the hidden states of the selected blocks, for a batch."""

    def one(example: jax.Array) -> dict[str, jax.Array]:
        x = jax.vmap(model.embed)(example) + model.position[: example.shape[0]]
        activations = {}
        for i, block in enumerate(model.blocks):
            x = block(x)
            if i in layers:
                activations[f"blocks.{i}"] = x
        return activations

    return jax.vmap(one)(tokens)


def per_example(extract: Any) -> Any:
    """Call `extract` once per example, as a per-sample extraction loop does."""

    def loop(model: Encoder, tokens: jax.Array, *rest: Any) -> list[Any]:
        return [extract(model, tokens[i : i + 1], *rest) for i in range(tokens.shape[0])]

    return loop


def _check(results: list[Any]) -> None:
    # A GPU fuses the jitted variant's float32 arithmetic differently from the eager ops (seen on
    # an H200: 1 of 65,536 values 2.3e-4 apart), so its tolerance is looser than the CPU's.
    tolerance = 2e-4 if jax.default_backend() == "cpu" else 2e-3
    reference = jax.tree.leaves(results[0])
    for other in results[1:]:
        for a, b in zip(reference, jax.tree.leaves(other)):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tolerance, atol=tolerance)


def bench_extraction(size: str, trials: int) -> list[tuple[str, str, str, float, float, float, int, int]]:
    cfg = SIZES[size]
    model = Encoder(cfg["hidden"], cfg["layers"], cfg["heads"], key=jax.random.PRNGKey(0))
    tokens = jax.random.randint(jax.random.PRNGKey(1), (cfg["batch"], cfg["seq"]), 0, 1000)
    layers = tuple(range(1, cfg["layers"], 2))
    paths = [f"blocks.{i}" for i in layers]
    filter_jitted = eqx.filter_jit(extract_activations)
    helper = jit_extraction(layers=paths, batch_axis=0)

    def eager(m: Encoder, t: jax.Array) -> Any:
        return extract_activations(m, t, layers)

    def with_filter_jit(m: Encoder, t: jax.Array) -> Any:
        return filter_jitted(m, t, layers)

    rows = []
    for mode, wrap in (("batched", lambda f: f), ("per example", per_example)):
        for name, jitted, compiled_name in (
            ("eqx.filter_jit", with_filter_jit, "extract_activations"),
            ("jit_extraction", helper, "extract"),
        ):
            with count_compiles() as compiles:
                _check([wrap(eager)(model, tokens), wrap(jitted)(model, tokens)])
                c = compare(wrap(eager), wrap(jitted), model, tokens, trials=trials, names=("eager", name))
            calls = (1 + len(c.b.warmup_times) + c.b.trials) * (1 if mode == "batched" else cfg["batch"])
            rows.append((size, mode, name, c.a.median * 1e3, c.b.median * 1e3, c.ratio, compiles.count(compiled_name), calls))
    return rows


def bench_jit_in_loop(iterations: int, rounds: int = 3) -> list[tuple[str, int, float]]:
    xs = jax.random.normal(jax.random.PRNGKey(2), (iterations, 64, 64))

    def before() -> list[jax.Array]:
        out = []
        for x in xs:
            out.append(jax.jit(lambda v: jnp.tanh(v @ v.T).sum())(x))
        return out

    def after() -> list[jax.Array]:
        step = jax.jit(lambda v: jnp.tanh(v @ v.T).sum())
        out = []
        for x in xs:
            out.append(step(x))
        return out

    jax.block_until_ready(after())  # warm the eager helpers (indexing) outside the timing
    rows = []
    for name, run in (("jit in the loop", before), ("hoisted", after)):
        times, compiles = [], 0
        for _ in range(rounds):
            with count_compiles() as counter:
                start = time.perf_counter()
                jax.block_until_ready(run())
                times.append(time.perf_counter() - start)
            compiles = counter.count("<lambda>")
        rows.append((name, compiles, statistics.median(times) * 1e3))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["small", "base"], choices=sorted(SIZES))
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--iterations", type=int, default=10)
    args = parser.parse_args()
    device = jax.devices()[0]
    print(f"jax {jax.__version__}, equinox {eqx.__version__}, {device.platform} ({device.device_kind}), "
          f"{platform.processor() or platform.machine()}")
    print("\n| size | mode | jitted with | eager ms | jitted ms | eager/jitted | compiles (calls) |")
    print("|---|---|---|---|---|---|---|")
    for size in args.sizes:
        for row in bench_extraction(size, args.trials):
            s, mode, name, eager_ms, jit_ms, ratio, compiles, calls = row
            print(f"| {s} | {mode} | {name} | {eager_ms:.1f} | {jit_ms:.1f} | **{ratio:.2f}x** | {compiles} ({calls}) |")
    print(f"\njit-in-loop, {args.iterations} iterations (cold, median of 3 runs):\n")
    print("| variant | compiles | ms |")
    print("|---|---|---|")
    for name, compiles, ms in bench_jit_in_loop(args.iterations):
        print(f"| {name} | {compiles} | {ms:.1f} |")


if __name__ == "__main__":
    main()
