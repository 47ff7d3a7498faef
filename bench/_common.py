"""What the benchmark scripts share: the BERT-like block of runtime-baseline.md §2, and the
speed-up rows of their tables. Each script runs as `python bench/<name>.py`, so this module is
imported as `_common` from the script's folder."""

from __future__ import annotations

import statistics

import equinox as eqx
import jax


class Block(eqx.Module):
    """One BERT encoder block: attention with biases and dropout, then an h -> 4h -> h MLP,
    each with dropout, a residual and LayerNorm. Takes one example `(seq, hidden)`."""

    attn: eqx.nn.MultiheadAttention
    attn_dropout: eqx.nn.Dropout
    attn_norm: eqx.nn.LayerNorm
    fc1: eqx.nn.Linear
    fc2: eqx.nn.Linear
    mlp_dropout: eqx.nn.Dropout
    mlp_norm: eqx.nn.LayerNorm

    def __init__(self, hidden: int, heads: int, *, key: jax.Array) -> None:
        k1, k2, k3 = jax.random.split(key, 3)
        self.attn = eqx.nn.MultiheadAttention(
            heads, hidden, use_query_bias=True, use_key_bias=True, use_value_bias=True,
            use_output_bias=True, dropout_p=0.1, key=k1,
        )  # fmt: skip
        self.attn_dropout = eqx.nn.Dropout(0.1)
        self.attn_norm = eqx.nn.LayerNorm(hidden)
        self.fc1 = eqx.nn.Linear(hidden, 4 * hidden, key=k2)
        self.fc2 = eqx.nn.Linear(4 * hidden, hidden, key=k3)
        self.mlp_dropout = eqx.nn.Dropout(0.1)
        self.mlp_norm = eqx.nn.LayerNorm(hidden)

    def __call__(self, x: jax.Array, key: jax.Array) -> jax.Array:
        k1, k2, k3 = jax.random.split(key, 3)
        x = jax.vmap(self.attn_norm)(x + self.attn_dropout(self.attn(x, x, x, key=k1), key=k2))
        h = jax.vmap(self.fc2)(jax.nn.gelu(jax.vmap(self.fc1)(x)))
        return jax.vmap(self.mlp_norm)(x + self.mlp_dropout(h, key=k3))


def speedup_rows(label: str, times: dict[str, list[float]], digits: int = 2) -> list[str]:
    """Markdown rows `| label | variant | median | min | speed-up | paired speed-up |`: the
    first variant is the baseline; "paired" is the median of the per-round ratios."""
    names = list(times)
    base = times[names[0]]
    rows = []
    for name in names:
        median = statistics.median(times[name])
        ratio = statistics.median(base) / median
        paired = statistics.median(b / t for b, t in zip(base, times[name]))
        rows.append(
            f"| {label} | {name} | {median:.2f} | {min(times[name]):.2f} | "
            f"{ratio:.{digits}f}x | {paired:.{digits}f}x |"
        )
    return rows
