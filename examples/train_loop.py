"""Train an equinox classifier (an MLP, four hidden layers by default): the training-loop
mistakes jaxlint reports.

Run `jaxlint check examples/train_loop.py`, then `jaxlint rule <slug>` for any finding.
"""

import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax


class Classifier(eqx.Module):
    hidden: list[eqx.nn.Linear]
    out: eqx.nn.Linear

    def __init__(self, features: int, classes: int, *, depth: int = 4, width: int = 64, key: jax.Array) -> None:
        keys = jax.random.split(key, depth + 1)
        sizes = [features] + [width] * depth
        self.hidden = [eqx.nn.Linear(a, b, key=k) for a, b, k in zip(sizes[:-1], sizes[1:], keys[:-1])]
        self.out = eqx.nn.Linear(width, classes, key=keys[-1])

    def __call__(self, x: jax.Array) -> jax.Array:
        for layer in self.hidden:
            x = jax.nn.relu(layer(x))
        return self.out(x)


optimizer = optax.adam(1e-3)


@eqx.filter_jit
def train_step(model, opt_state, x, y):
    def loss_fn(model):
        logits = jax.vmap(model)(x)
        return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

    loss, grads = eqx.filter_value_and_grad(loss_fn)(model)
    updates, opt_state = optimizer.update(grads, opt_state, eqx.filter(model, eqx.is_array))
    return eqx.apply_updates(model, updates), opt_state, loss


def main() -> None:
    rng = np.random.default_rng(0)
    x_train = rng.normal(size=(10000, 20)).astype(np.float32)
    y_train = (x_train[:, 0] > 0).astype(np.int32)
    batch_size = 64

    model = Classifier(20, 2, key=jax.random.PRNGKey(0))
    opt_state = optimizer.init(eqx.filter(model, eqx.is_array))
    losses = []
    start = time.perf_counter()
    for epoch in range(3):
        for i in range(0, len(x_train), batch_size):
            model, opt_state, loss = train_step(
                model, opt_state, x_train[i : i + batch_size], y_train[i : i + batch_size]
            )
            losses.append(loss.item())
    elapsed = time.perf_counter() - start

    params, static = eqx.partition(model, eqx.is_array)

    @jax.jit
    def accuracy(params, x, y):
        logits = jax.vmap(eqx.combine(params, static))(x)
        return jnp.mean(jnp.argmax(logits, axis=-1) == y)

    for i in range(0, len(x_train), 128):
        print(accuracy(params, x_train[i : i + 128], y_train[i : i + 128]))
    print(f"trained in {elapsed:.2f} s ({len(losses) / elapsed:.0f} steps/s), last loss {losses[-1]:.4f}")


if __name__ == "__main__":
    main()
