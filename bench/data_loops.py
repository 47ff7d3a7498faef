"""Data loops before and after the fixes of JL004, JL005 and JL008 (seeds 001 and 003).

    python bench/data_loops.py [--rounds 9] [--items 128] [--parts 1,2,3]

Part 1, ragged batches vs `padded_batches` (JL004): a jitted MLP loss over 327 rows in
batches of 32 (10 full batches and one of 7). Each trial starts cold (`jax.clear_caches()`
and a freshly defined jitted function), runs one epoch (timed: compiles included), then a
second, warm epoch. Reported: compiles of the loss per epoch (`count_compiles`), cold and
warm epoch ms, and the total loss of both variants (the masked padding must not change it).

Part 2, per-item host copies vs `to_host` (JL005), `--items` arrays of 128x768 float32:

- transfer only: fresh device arrays every round (a `jax.Array` caches its host copy), copied
  with `np.array` one by one, with `jax.device_get` of the list, and with `to_host` (default
  and `copy=True`);
- extraction loop: `--items` calls of a jitted layer (a 768x768 matmul, or elementwise), each
  result copied inside the loop (`np.array`, `np.asarray`), against collecting the results
  and one `to_host` after the loop (`copy=True` gives what `np.array` gives: writable copies;
  the default gives what `np.asarray` gives: read-only views where the platform allows);
- logging loop: `--items` chained jitted steps (a 768x768 matmul), each step's loss
  formatted into a log line with `float(loss)` in the loop, against the same line handed to
  `one_step_late` (it runs after the next step is dispatched; `flush` after the loop).

Part 3, decode compiles (JL008): 24 greedy steps of a jitted toy decoder (embedding, masked
mean over the context, projection) from a 5-token prompt, with the input growing by
`jnp.concatenate`, in a fixed buffer of 32 written with `.at[pos].set`, and padded to
`jaxlint.runtime.bucket` lengths; all three must produce the same tokens. Then 64 random
prompt lengths in [1, 200): compiles at exact length vs bucketed.

Method: variants interleaved, the order alternating each round (A B, B A); medians; the
speed-up as the ratio of medians and the median of per-round ratios ("paired"). Compare
ratios, not absolute times: the machine may be shared.
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

import jax
import jax.numpy as jnp
import numpy as np

from _common import speedup_rows
from jaxlint.runtime import bucket, count_compiles, one_step_late, pad_to, padded_batches, to_host


ROWS, FEATURES, HIDDEN, BATCH = 327, 256, 512, 32


# -- part 1: ragged vs padded batches -------------------------------------------------------------


def make_loss() -> Callable[..., Any]:
    """A fresh jitted function (a new function object: nothing cached from earlier trials)."""

    def mlp_loss(params, x, y, mask):
        w1, w2 = params
        h = jnp.tanh(x @ w1)
        per_row = jnp.sum((h @ w2 - y) ** 2, axis=-1)
        return jnp.sum(jnp.where(mask, per_row, 0.0))

    return jax.jit(mlp_loss)


def ragged_epoch(loss, params, xs, ys) -> float:
    total = 0.0
    for i in range(0, len(xs), BATCH):
        x, y = xs[i : i + BATCH], ys[i : i + BATCH]
        total += float(loss(params, x, y, np.ones(len(x), bool)))
    return total


def padded_epoch(loss, params, xs, ys) -> float:
    total = 0.0
    for (x, y), mask in padded_batches((xs, ys), BATCH):
        total += float(loss(params, x, y, mask))
    return total


def part1(rounds: int) -> list[str]:
    rng = np.random.default_rng(0)
    xs = rng.normal(size=(ROWS, FEATURES)).astype(np.float32)
    ys = rng.normal(size=(ROWS, 8)).astype(np.float32)
    params = (
        jax.device_put(rng.normal(size=(FEATURES, HIDDEN)).astype(np.float32) / 16),
        jax.device_put(rng.normal(size=(HIDDEN, 8)).astype(np.float32) / 16),
    )
    variants = {"ragged slices": ragged_epoch, "padded_batches": padded_epoch}
    stats: dict[str, dict[str, list[float]]] = {n: {"compiles": [], "cold": [], "warm": [], "loss": []} for n in variants}
    names = list(variants)
    for index in range(rounds):
        for name in names if index % 2 == 0 else reversed(names):
            jax.clear_caches()
            loss = make_loss()
            with count_compiles() as counter:
                start = time.perf_counter()
                total = variants[name](loss, params, xs, ys)
                cold = time.perf_counter() - start
            start = time.perf_counter()
            variants[name](loss, params, xs, ys)
            warm = time.perf_counter() - start
            record = stats[name]
            record["compiles"].append(counter.count("mlp_loss"))
            record["cold"].append(cold * 1e3)
            record["warm"].append(warm * 1e3)
            record["loss"].append(total)
    rows = [
        "| variant | compiles of the loss per epoch | cold epoch ms (median) | warm epoch ms (median) | total loss |",
        "|---|---|---|---|---|",
    ]
    for name in names:
        record = stats[name]
        rows.append(
            f"| {name} | {int(statistics.median(record['compiles']))} | {statistics.median(record['cold']):.1f} "
            f"| {statistics.median(record['warm']):.1f} | {record['loss'][0]:.4f} |"
        )
    base, new = stats[names[0]], stats[names[1]]
    cold = statistics.median(b / n for b, n in zip(base["cold"], new["cold"]))
    warm = statistics.median(b / n for b, n in zip(base["warm"], new["warm"]))
    rows.append(f"\ncold epoch ragged/padded (paired median): {cold:.2f}x; warm: {warm:.2f}x; "
                f"same loss: {np.isclose(base['loss'][0], new['loss'][0], rtol=1e-5)}")
    return rows


# -- part 2: per-item copies vs to_host -----------------------------------------------------------


@jax.jit
def layer(x, w):
    return jnp.tanh(x @ w)


@jax.jit
def elementwise(x, w):
    return jnp.tanh(x) * w[0] + 1.0


@jax.jit
def fresh(seed):
    return jnp.full((128, 768), seed, jnp.float32) + jnp.arange(768, dtype=jnp.float32)


def interleave(variants: dict[str, Callable[[], Any]], rounds: int, setup: Callable[[], Any] | None = None) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in variants}
    names = list(variants)
    for index in range(rounds):
        for name in names if index % 2 == 0 else reversed(names):
            arg = setup() if setup is not None else None
            start = time.perf_counter()
            variants[name](arg) if setup is not None else variants[name]()  # type: ignore[call-arg]
            times[name].append((time.perf_counter() - start) * 1e3)
    return times


def part2(rounds: int, items: int) -> list[str]:
    rows = ["| part | variant | median ms | min ms | speed-up (medians) | speed-up (paired) |", "|---|---|---|---|---|---|"]
    counter = iter(range(10**9))

    def arrays() -> list[jax.Array]:
        out = [fresh(np.float32(next(counter))) for _ in range(items)]
        jax.block_until_ready(out)
        return out

    transfer = {
        "per-item np.array": lambda xs: [np.array(x) for x in xs],
        "per-item np.asarray": lambda xs: [np.asarray(x) for x in xs],
        "jax.device_get(list)": lambda xs: jax.device_get(xs),
        "to_host(list)": lambda xs: to_host(xs),
        "to_host(list, copy=True)": lambda xs: to_host(xs, copy=True),
    }
    check = arrays()
    reference = [np.array(x) for x in check]
    for name, fn in transfer.items():
        got = fn(arrays())
        if not all(a.shape == b.shape for a, b in zip(got, reference)):
            sys.exit(f"error: {name} changed the shapes")
    rows += speedup_rows(f"transfer only, {items} arrays", interleave(transfer, rounds, setup=arrays))

    rng = np.random.default_rng(0)
    w = jax.device_put(rng.normal(size=(768, 768)).astype(np.float32) / 28)
    xs = [jax.device_put(rng.normal(size=(128, 768)).astype(np.float32)) for _ in range(items)]
    for label, fn in (("matmul layer", layer), ("elementwise layer", elementwise)):

        def in_loop(convert=np.array, fn=fn) -> list[np.ndarray]:
            acts = []
            for x in xs:
                acts.append(convert(fn(x, w)))
            return acts

        def after_loop(copy=True, fn=fn) -> list[np.ndarray]:
            acts = []
            for x in xs:
                acts.append(fn(x, w))
            acts[:] = to_host(acts, copy=copy)
            return acts

        for a, b in zip(in_loop(), after_loop()):
            np.testing.assert_array_equal(a, b)
        loop = {
            "np.array in the loop": in_loop,
            "collect, to_host(copy=True) after": after_loop,
            "np.asarray in the loop": lambda in_loop=in_loop: in_loop(np.asarray),
            "collect, to_host() after": lambda after_loop=after_loop: after_loop(False),
        }
        rows += speedup_rows(f"extraction loop, {items} calls, {label}", interleave(loop, rounds))

    # A training-like loop whose every step's loss is formatted into a log line: the line
    # waits for its step before the next is dispatched, or, handed to `one_step_late`, after.
    x0 = xs[0]

    def log_each_step() -> list[str]:
        lines, x = [], x0
        for i in range(items):
            x, loss = chained(x, w)
            lines.append(f"step {i}: {float(loss):.6f}")
        return lines

    def log_one_step_late() -> list[str]:
        lines, x = [], x0
        later = one_step_late()
        for i in range(items):
            x, loss = chained(x, w)
            later(lambda i=i, loss=loss: lines.append(f"step {i}: {float(loss):.6f}"))
        later.flush()
        return lines

    if log_each_step() != log_one_step_late():
        sys.exit("error: one_step_late changed the logged lines")
    logged = {"float(loss) logged each step": log_each_step, "one_step_late": log_one_step_late}
    rows += speedup_rows(f"logging loop, {items} matmul steps", interleave(logged, rounds))
    return rows


@jax.jit
def chained(x, w):
    y = jnp.tanh(x @ w)
    return y, jnp.mean(y)


# -- part 3: decode compiles ------------------------------------------------------------------------

VOCAB, DIM, STEPS, MAXLEN = 64, 32, 24, 32


def make_decoder() -> Callable[..., Any]:
    def decode(params, tokens, valid):
        emb, out = params
        h = emb[tokens] * valid[..., None]
        context = h.sum(axis=1) / valid.sum(axis=1, keepdims=True)
        return jnp.argmax(context @ out, axis=-1).astype(jnp.int32)

    return jax.jit(decode)


def growing(decode, params, prompt) -> np.ndarray:
    tokens = jnp.asarray(prompt)
    for _ in range(STEPS):
        nxt = decode(params, tokens, jnp.ones(tokens.shape, jnp.float32))
        tokens = jnp.concatenate([tokens, nxt[:, None]], axis=1)
    return np.asarray(tokens)


def fixed_buffer(decode, params, prompt) -> np.ndarray:
    n = prompt.shape[1]
    tokens = jnp.asarray(pad_to(prompt, MAXLEN))
    positions = jnp.arange(MAXLEN)
    for pos in range(n, n + STEPS):
        valid = (positions < pos).astype(jnp.float32)[None, :]
        nxt = decode(params, tokens, valid)
        tokens = tokens.at[:, pos].set(nxt)
    return np.asarray(tokens[:, : n + STEPS])


def bucketed(decode, params, prompt) -> np.ndarray:
    tokens = np.asarray(prompt)
    for _ in range(STEPS):
        n = tokens.shape[1]
        size = bucket(n, minimum=8)
        valid = (np.arange(size) < n).astype(np.float32)[None, :]
        nxt = decode(params, pad_to(tokens, size), valid)
        tokens = np.concatenate([tokens, np.asarray(nxt)[:, None]], axis=1)
    return tokens


def part3(rounds: int) -> list[str]:
    rng = np.random.default_rng(0)
    params = (
        jax.device_put(rng.normal(size=(VOCAB, DIM)).astype(np.float32)),
        jax.device_put(rng.normal(size=(DIM, VOCAB)).astype(np.float32)),
    )
    prompt = rng.integers(0, VOCAB, size=(1, 5)).astype(np.int32)
    variants = {"growing (concatenate)": growing, "fixed buffer (.at[pos].set)": fixed_buffer, "buckets (pad_to)": bucketed}
    stats: dict[str, dict[str, list[Any]]] = {n: {"compiles": [], "total": [], "ms": [], "tokens": []} for n in variants}
    names = list(variants)
    for index in range(rounds):
        for name in names if index % 2 == 0 else reversed(names):
            jax.clear_caches()
            decode = make_decoder()
            with count_compiles() as counter:
                start = time.perf_counter()
                tokens = variants[name](decode, params, prompt)
                elapsed = time.perf_counter() - start
            stats[name]["compiles"].append(counter.count("decode"))
            stats[name]["total"].append(counter.total)
            stats[name]["ms"].append(elapsed * 1e3)
            stats[name]["tokens"].append(tokens)
    reference = stats[names[0]]["tokens"][0]
    rows = ["| variant | compiles of the step | all compiles (eager ops included) | cold decode ms (median) | same tokens |", "|---|---|---|---|---|"]
    for name in names:
        record = stats[name]
        same = all(np.array_equal(t, reference) for t in record["tokens"])
        rows.append(
            f"| {name} | {int(statistics.median(record['compiles']))} | {int(statistics.median(record['total']))} "
            f"| {statistics.median(record['ms']):.1f} | {same} |"
        )
    lengths = np.random.default_rng(1).integers(1, 200, size=64)
    step = make_decoder()
    with count_compiles() as exact:
        for n in lengths:
            ids = np.zeros((1, int(n)), np.int32)
            step(params, ids, np.ones((1, int(n)), np.float32))
    step = make_decoder()
    with count_compiles() as bucketed_counter:
        for n in lengths:
            size = bucket(int(n))
            ids = pad_to(np.zeros((1, int(n)), np.int32), size)
            step(params, ids, (np.arange(size) < n).astype(np.float32)[None, :])
    rows.append(
        f"\n64 random lengths in [1, 200): {exact.count('decode')} compiles at exact length, "
        f"{bucketed_counter.count('decode')} with power-of-two buckets"
    )
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--items", type=int, default=128)
    parser.add_argument("--parts", default="1,2,3", help="which parts to run, comma-separated")
    args = parser.parse_args(argv)
    parts = {int(p) for p in args.parts.split(",")}
    versions = ", ".join(f"{p} {importlib.metadata.version(p)}" for p in ("jax", "jaxlib"))
    print(f"python {platform.python_version()}, {versions}, {jax.device_count()} {jax.default_backend()} "
          f"device(s) ({jax.devices()[0].device_kind}), {args.rounds} interleaved rounds\n")
    if 1 in parts:
        print("Part 1: compiles per epoch, ragged vs padded batches (JL004)\n")
        print("\n".join(part1(max(3, args.rounds // 2))))
    if 2 in parts:
        print("\nPart 2: per-item np.array vs to_host, logging each step vs one_step_late (JL005)\n")
        print("\n".join(part2(args.rounds, args.items)))
    if 3 in parts:
        print("\nPart 3: decode compiles, growing vs fixed buffer vs buckets (JL008)\n")
        print("\n".join(part3(max(3, args.rounds // 3))))


if __name__ == "__main__":
    main()
