"""Keep the matching linear layers of a model low-rank: project them after every update.

The projection calls `eqx.tree_at` once per matched layer, and each call rebuilds the whole
model, on every step. `jaxlint check examples/` points at it; `jaxlint fix --unsafe-fixes`
batches it.
"""

import fnmatch

import equinox as eqx
import jax
import jax.numpy as jnp


class Block(eqx.Module):
    attn: eqx.nn.Linear
    mlp: eqx.nn.Linear

    def __init__(self, width, key):
        k1, k2 = jax.random.split(key)
        self.attn = eqx.nn.Linear(width, width, key=k1)
        self.mlp = eqx.nn.Linear(width, width, key=k2)


class Encoder(eqx.Module):
    blocks: list

    def __init__(self, depth, width, key):
        self.blocks = [Block(width, k) for k in jax.random.split(key, depth)]


def named_linears(model):
    """(path, getter, layer) for every linear layer of the encoder."""
    for i, block in enumerate(model.blocks):
        for name in ("attn", "mlp"):
            yield f"blocks.{i}.{name}", (lambda m, i=i, name=name: getattr(m.blocks[i], name)), getattr(block, name)


def low_rank(layer, rank=4):
    u, s, vt = jnp.linalg.svd(layer.weight, full_matrices=False)
    return eqx.tree_at(lambda l: l.weight, layer, (u[:, :rank] * s[:rank]) @ vt[:rank])


def apply_plan(model, plan):
    for pattern, transform in plan.items():
        for path, getter, layer in named_linears(model):
            if fnmatch.fnmatchcase(path, pattern):
                model = eqx.tree_at(getter, model, transform(layer))
    return model


def main(steps=100):
    model = Encoder(depth=4, width=16, key=jax.random.PRNGKey(0))
    for _ in range(steps):
        model = jax.tree_util.tree_map(lambda w: 0.99 * w, model)  # stands for an optimiser update
        model = apply_plan(model, {"blocks.*.mlp": low_rank})
    return [block.mlp.weight for block in model.blocks]


if __name__ == "__main__":
    print([w.shape for w in main()])
