"""What one host copy per loop iteration costs (JL005's cost condition), by step size.

    python bench/sync_cost.py [--steps 200] [--rounds 7]

A training-shaped loop: `--steps` calls of a jitted step `w <- w - lr * grad(loss)(w, x)` on
a square matrix of side N, written two ways:

- copied: `losses.append(float(loss))` on every iteration (the host waits for the step);
- kept: `losses.append(loss)`, one `jax.device_get(losses)` after the loop.

Reported per side N: the median time of each loop, the speed-up, and the cost of the copies
per iteration, `(copied - kept) / steps`, in microseconds. That last figure is what
host-copy-in-loop's frequency condition weighs: a loop that runs k times loses about k times
it in total, whatever its step computes; the ratio says how much of the loop that is. On
CPU the "device" is the host, so the wait is short; on an accelerator it includes the
device-to-host transfer and the idle device while Python dispatches the next step.

Method: variants interleaved, the order alternating each round; each round warm (the step
compiled before the first round); medians. Compare ratios, not absolute times: the machine
may be shared.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time

import jax
import jax.numpy as jnp


SIDES = (8, 256, 1024, 4096)


@jax.jit
def step(w: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
    def loss_fn(w: jax.Array) -> jax.Array:
        return jnp.mean(jnp.tanh(x @ w) ** 2)

    loss, grad = jax.value_and_grad(loss_fn)(w)
    return w - 1e-3 * grad, loss


def copied(w: jax.Array, x: jax.Array, steps: int) -> list[float]:
    losses = []
    for _ in range(steps):
        w, loss = step(w, x)
        losses.append(float(loss))
    return losses


def kept(w: jax.Array, x: jax.Array, steps: int) -> list[float]:
    losses = []
    for _ in range(steps):
        w, loss = step(w, x)
        losses.append(loss)
    return [float(v) for v in jax.device_get(losses)]


def timed(loop, w: jax.Array, x: jax.Array, steps: int) -> tuple[float, list[float]]:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    out = loop(w, x, steps)
    return time.perf_counter() - start, out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--sides", type=int, nargs="*", default=list(SIDES))
    args = parser.parse_args(argv)
    device = jax.devices()[0]
    print(f"# {device.platform}: {device.device_kind}; jax {jax.__version__}; python {platform.python_version()}; {args.steps} steps, {args.rounds} rounds")
    print("| side | copied | kept | speed-up | copy cost per iteration |")
    print("|---|---|---|---|---|")
    for side in args.sides:
        key = jax.random.PRNGKey(side)
        w = jax.random.normal(key, (side, side)) / side**0.5
        x = jax.random.normal(jax.random.fold_in(key, 1), (side, side))
        jax.block_until_ready(step(w, x))  # compile once, outside the timed loops
        times: dict[str, list[float]] = {"copied": [], "kept": []}
        results = {}
        for round_ in range(args.rounds):
            order = ("copied", "kept") if round_ % 2 == 0 else ("kept", "copied")
            for name in order:
                elapsed, results[name] = timed(copied if name == "copied" else kept, w, x, args.steps)
                times[name].append(elapsed)
        if results["copied"] != results["kept"]:
            print(f"side {side}: the two loops computed different losses", file=sys.stderr)
            return 1
        a, b = statistics.median(times["copied"]), statistics.median(times["kept"])
        per = (a - b) / args.steps * 1e6
        print(f"| {side} | {a * 1e3:.2f} ms | {b * 1e3:.2f} ms | {a / b:.2f}x | {per:.1f} µs |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
