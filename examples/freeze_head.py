"""Head resets against lost plasticity: the classifier head is re-initialised on every step.

Three `eqx.tree_at` calls in a row each walk the whole model, on every step; one call with
three targets walks it once. `jaxlint fix` merges them (a safe fix: the targets are disjoint).
"""

import equinox as eqx
import jax
import jax.numpy as jnp


class Classifier(eqx.Module):
    body: eqx.nn.MLP
    head: eqx.nn.Linear
    temperature: jax.Array

    def __init__(self, key):
        k1, k2 = jax.random.split(key)
        self.body = eqx.nn.MLP(8, 32, width_size=32, depth=2, key=k1)
        self.head = eqx.nn.Linear(32, 10, key=k2)
        self.temperature = jnp.ones(())


def reset_head(model, num_classes, key):
    weight = jax.random.normal(key, (num_classes, 32)) * 0.02
    model = eqx.tree_at(lambda m: m.head.weight, model, weight)
    model = eqx.tree_at(lambda m: m.head.bias, model, jnp.zeros(num_classes))
    model = eqx.tree_at(lambda m: m.temperature, model, jnp.ones(()))
    return model


def main():
    model = Classifier(jax.random.PRNGKey(0))
    key = jax.random.PRNGKey(1)
    for step in range(1000):
        model = reset_head(model, 10, jax.random.fold_in(key, step))
    return model.head.weight, model.head.bias, model.temperature


if __name__ == "__main__":
    print([x.shape for x in main()])
