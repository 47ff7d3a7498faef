"""Fixed-shape batches: `padded_batches` (batch + mask), `bucket` and `pad_to` for variable lengths."""

from __future__ import annotations

import functools as ft
from collections.abc import Iterator, Sequence
from typing import Any


__all__ = ["bucket", "pad_to", "padded_batches"]


def padded_batches(
    data: Any, batch_size: int, *, pad_value: Any = 0, drop_remainder: bool = False
) -> Iterator[tuple[Any, Any]]:
    """Cut `data` into batches that all have exactly `batch_size` rows, with a mask of the real ones.

    A jitted function compiles once per input shape, so the usual
    `for i in range(0, n, bs): step(x[i:i + bs])` compiles twice per epoch: once for the full
    batches and once more for the smaller last one (seed 001). This pads the last batch up to
    `batch_size` and yields a boolean mask that is `False` on the padding rows; a consumer that
    weights its per-row results by the mask computes what it computed on the ragged batch, and
    compiles once. Target of the fix of JL004 (pad-final-batch).

    !!! Example

        ```python
        import jax
        import jax.numpy as jnp
        import numpy as np
        from jaxlint.runtime import count_compiles, padded_batches

        @jax.jit
        def loss_sum(x, y, mask):
            per_row = jnp.sum((x - y) ** 2, axis=1)
            return jnp.sum(jnp.where(mask, per_row, 0.0))

        x = np.arange(70.0, dtype=np.float32).reshape(35, 2)
        y = np.ones_like(x)
        with count_compiles() as c:
            total = sum(loss_sum(xb, yb, m) for (xb, yb), m in padded_batches((x, y), 8))
        assert c.count(loss_sum) == 1  # 5 batches, the last one padded from 3 rows to 8
        assert np.isclose(total, np.sum((x - y) ** 2))
        ```

    NumPy leaves are sliced and padded on the host, before anything is transferred, so no eager
    `jnp.pad` compiles per shape. `jax.Array` leaves stay on their device: each batch is cut by
    one jitted gather (compiled once per leaf shape and dtype, whatever the batch index).

    **Arguments:**

    - `data`: an array, or a pytree of arrays (NumPy or jax), all with the same leading axis.
    - `batch_size`: rows per batch, a positive int.
    - `pad_value`: keyword-only. The value of the padding rows: a scalar for every leaf, or a
        pytree of scalars with the structure of `data`.
    - `drop_remainder`: keyword-only. Skip the last batch when it is incomplete instead of
        padding it (every mask is then all `True`).

    **Returns:**

    An iterator of `(batch, mask)`: `batch` has the structure of `data`, every leaf with
    `batch_size` rows; `mask` is a NumPy `bool` array of shape `(batch_size,)`, `True` on the
    rows that come from `data`. An empty `data` yields nothing.

    **Raises:**

    `ValueError` if `batch_size` is not a positive int, a leaf has no leading axis, the leaves
    disagree on its length, or `pad_value` does not fit `data`'s structure.

    !!! info "See also"

        `tf.data`'s `padded_batch` and grain's `batch` keep the ragged tail unless told to drop
        it; flax's `pad_shard_unpad` pads to a multiple of the device count. Measured on CPU
        (`python bench/data_loops.py`): a jitted MLP loss over 327 rows in batches of 32
        compiled twice per epoch when sliced, once with `padded_batches`; the cold epoch was
        1.86x faster and the loss the same.
    """
    import jax
    import numpy as np

    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    leaves, treedef = jax.tree_util.tree_flatten(data)
    if not leaves:
        raise ValueError("data has no array leaves")
    pads = _pad_values(pad_value, treedef, len(leaves))
    length = _leading_length(leaves, treedef)
    full, rest = divmod(length, batch_size)
    batches = full + (1 if rest and not drop_remainder else 0)
    for index in range(batches):
        start = index * batch_size
        rows = min(batch_size, length - start)
        cut = [_cut(leaf, start, batch_size, rows, pad) for leaf, pad in zip(leaves, pads)]
        mask = np.arange(batch_size) < rows
        yield jax.tree_util.tree_unflatten(treedef, cut), mask


def _pad_values(pad_value: Any, treedef: Any, count: int) -> list[Any]:
    import jax

    values, pad_def = jax.tree_util.tree_flatten(pad_value)
    if pad_def.num_leaves == 1 and pad_def.num_nodes == 1:
        return values * count
    if pad_def != treedef:
        raise ValueError(
            f"pad_value must be a scalar or a pytree shaped like data: {pad_def} vs {treedef}"
        )
    return values


def _leading_length(leaves: Sequence[Any], treedef: Any) -> int:
    import numpy as np

    lengths = []
    for leaf in leaves:
        shape = np.shape(leaf)
        if not shape:
            raise ValueError(f"every leaf of data needs a leading axis; got a scalar in {treedef}")
        lengths.append(shape[0])
    if len(set(lengths)) > 1:
        raise ValueError(f"the leaves of data disagree on their leading axis: {lengths}")
    return lengths[0]


def _cut(leaf: Any, start: int, size: int, rows: int, pad: Any) -> Any:
    import jax
    import numpy as np

    if isinstance(leaf, jax.Array):
        return _device_batch(leaf, np.int32(start), size, np.asarray(pad).item())
    leaf = np.asarray(leaf)
    batch = leaf[start : start + rows]
    if rows == size:
        return batch
    filler = np.full((size - rows, *leaf.shape[1:]), pad, dtype=leaf.dtype)
    return np.concatenate([batch, filler])


@ft.lru_cache(maxsize=None)
def _device_batcher() -> Any:
    import jax
    import jax.numpy as jnp

    @ft.partial(jax.jit, static_argnums=(2, 3))
    def device_batch(leaf: Any, start: Any, size: int, pad: Any) -> Any:
        index = start + jnp.arange(size)
        valid = index < leaf.shape[0]
        rows = jnp.take(leaf, jnp.minimum(index, leaf.shape[0] - 1), axis=0)
        valid = valid.reshape((size,) + (1,) * (leaf.ndim - 1))
        return jnp.where(valid, rows, jnp.asarray(pad, leaf.dtype))

    return device_batch


def _device_batch(leaf: Any, start: Any, size: int, pad: Any) -> Any:
    # `start` is traced: one compile per (leaf shape, dtype, size, pad), not per batch.
    return _device_batcher()(leaf, start, size, pad)


def bucket(n: int, *, minimum: int = 16, buckets: Sequence[int] | None = None) -> int:
    """The padded length to use for a variable length `n`: few distinct lengths, few compiles.

    A jitted function compiles once per input shape. Feeding it sequences at their exact
    lengths compiles once per distinct length; padding each to `bucket(len)` compiles once per
    bucket. With the default powers of two, 64 random lengths in [1, 200) compiled 54 times at
    exact length and 5 times bucketed (jax-facts.md §6). One of the remedies JL008
    (growing-shape-loop) points to, with `pad_to` to do the padding.

    !!! Example

        ```python
        from jaxlint.runtime import bucket

        assert [bucket(n) for n in (0, 1, 16, 17, 100)] == [16, 16, 16, 32, 128]
        assert bucket(100, minimum=8) == 128
        assert bucket(100, buckets=[64, 128, 512]) == 128
        ```

    **Arguments:**

    - `n`: the length to cover, an int >= 0.
    - `minimum`: keyword-only. The smallest power-of-two bucket (default 16); ignored when
        `buckets` is given.
    - `buckets`: keyword-only. The caller's bucket lengths (any order); the result is the
        smallest one >= `n`.

    **Returns:**

    An int >= `n`: the smallest power of two >= max(n, minimum), or the smallest of `buckets`
    that fits.

    **Raises:**

    `ValueError` if `n` is negative, `minimum` is not positive, `buckets` is empty, or `n` is
    longer than every bucket.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be an int >= 0, got {n!r}")
    if buckets is not None:
        sizes = sorted(int(b) for b in buckets)
        if not sizes:
            raise ValueError("buckets is empty")
        for size in sizes:
            if size >= n:
                return size
        raise ValueError(f"n={n} is longer than the largest bucket ({sizes[-1]})")
    if minimum <= 0:
        raise ValueError(f"minimum must be positive, got {minimum!r}")
    target = max(n, minimum)
    return 1 << (target - 1).bit_length()


def pad_to(x: Any, length: int, *, axis: int = -1, value: Any = 0) -> Any:
    """Pad `x` along `axis` up to `length` with `value` (at the end).

    The companion of `bucket`: `pad_to(ids, bucket(ids.shape[-1]))` gives one of a few fixed
    lengths. The valid positions are `np.arange(length) < x.shape[axis]`.

    !!! Example

        ```python
        import numpy as np
        from jaxlint.runtime import bucket, pad_to

        ids = np.array([[5, 6, 7]])
        padded = pad_to(ids, bucket(ids.shape[-1], minimum=4))
        assert padded.tolist() == [[5, 6, 7, 0]]
        assert pad_to(np.ones(2), 3, axis=0, value=-1).tolist() == [1, 1, -1]
        ```

    NumPy input is padded on the host (no compile). A `jax.Array` is padded on its device with
    `jnp.pad`, which compiles once per input shape when called eagerly: pad before transferring
    when you can.

    **Arguments:**

    - `x`: a NumPy array, a `jax.Array`, or anything `np.asarray` accepts.
    - `length`: the size `axis` should have; at least `x.shape[axis]`.
    - `axis`: keyword-only. The axis to pad (default: the last).
    - `value`: keyword-only. The fill value (default 0).

    **Returns:**

    An array of the same kind and dtype as `x` (NumPy in, NumPy out), with `x.shape[axis] ==
    length`; `x` itself when it already has that length.

    **Raises:**

    `ValueError` if `x` is longer than `length` along `axis`, or `axis` is out of range.
    """
    import numpy as np

    jax_array = _is_jax_array(x)
    if not jax_array:
        x = np.asarray(x)
    ndim = x.ndim
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of range for an array of {ndim} dimensions")
    axis %= ndim
    current = x.shape[axis]
    if current > length:
        raise ValueError(f"x has {current} elements along axis {axis}, more than length={length}")
    if current == length:
        return x
    widths = [(0, 0)] * ndim
    widths[axis] = (0, length - current)
    if jax_array:
        import jax.numpy as jnp

        return jnp.pad(x, widths, constant_values=jnp.asarray(value, x.dtype))
    return np.pad(x, widths, constant_values=np.asarray(value, x.dtype))


def _is_jax_array(x: Any) -> bool:
    import sys

    jax = sys.modules.get("jax")
    return jax is not None and isinstance(x, jax.Array)
