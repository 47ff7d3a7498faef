"""padded_batches / bucket / pad_to: fixed shapes, one compile per epoch, masks that keep results."""

from __future__ import annotations

import re

import numpy as np
import pytest


jax = pytest.importorskip("jax")
jnp = jax.numpy

from jaxlint.runtime import bucket, count_compiles, pad_to, padded_batches  # noqa: E402


def _data(n: int = 37, features: int = 3) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.normal(size=(n, features)).astype(np.float32), rng.normal(size=(n,)).astype(np.float32)


def _loss_fns():  # type: ignore[no-untyped-def]
    """A fresh jitted squared error (sum over rows), with and without a row mask."""

    @jax.jit
    def ragged_loss(w, x, y):
        return jnp.sum((x @ w - y) ** 2)

    @jax.jit
    def masked_loss(w, x, y, mask):
        return jnp.sum(jnp.where(mask, (x @ w - y) ** 2, 0.0))

    return ragged_loss, masked_loss


def test_one_compile_per_epoch_and_the_same_loss_as_ragged_slices() -> None:
    x, y = _data()
    w = np.ones(3, np.float32)
    ragged_loss, masked_loss = _loss_fns()
    with count_compiles() as ragged:
        expected = sum(float(ragged_loss(w, x[i : i + 8], y[i : i + 8])) for i in range(0, len(x), 8))
    with count_compiles() as padded:
        for _ in range(2):  # two epochs: still one compile
            total = sum(float(masked_loss(w, xb, yb, m)) for (xb, yb), m in padded_batches((x, y), 8))
    assert ragged.count(ragged_loss) == 2
    assert padded.count(masked_loss) == 1
    assert padded.total == 1  # host padding: no eager op compiled either
    np.testing.assert_allclose(total, expected, rtol=1e-5)


def test_batches_have_fixed_shapes_and_the_mask_marks_real_rows() -> None:
    x, y = _data(n=10)
    out = list(padded_batches({"x": x, "y": y}, 4, pad_value=-1))
    assert len(out) == 3
    for batch, mask in out:
        assert batch["x"].shape == (4, 3) and batch["y"].shape == (4,)
        assert mask.dtype == np.bool_ and mask.shape == (4,)
    last, mask = out[-1]
    assert mask.tolist() == [True, True, False, False]
    np.testing.assert_array_equal(last["x"][:2], x[8:])
    assert (last["x"][2:] == -1).all() and (last["y"][2:] == -1).all()
    rebuilt = np.concatenate([b["x"][m] for b, m in out])
    np.testing.assert_array_equal(rebuilt, x)


def test_exact_multiple_needs_no_padding_and_drop_remainder_skips_the_tail() -> None:
    x, _ = _data(n=12)
    exact = list(padded_batches(x, 4))
    assert len(exact) == 3 and all(m.all() for _, m in exact)
    dropped = list(padded_batches(x[:11], 4, drop_remainder=True))
    assert len(dropped) == 2 and all(m.all() for _, m in dropped)
    assert list(padded_batches(x[:0], 4)) == []
    assert list(padded_batches(x[:3], 4, drop_remainder=True)) == []


def test_pad_value_per_leaf_and_dtypes_kept() -> None:
    ids = np.arange(5, dtype=np.int32)
    flags = np.ones(5, dtype=bool)
    (batch, mask), *_ = [b for b in padded_batches((ids, flags), 8, pad_value=(7, False))]
    assert batch[0].dtype == np.int32 and batch[1].dtype == np.bool_
    assert batch[0].tolist() == [0, 1, 2, 3, 4, 7, 7, 7]
    assert batch[1].tolist() == [True] * 5 + [False] * 3
    assert mask.sum() == 5


def test_device_arrays_are_cut_on_device_with_one_compile() -> None:
    x = jax.device_put(np.arange(22.0, dtype=np.float32).reshape(11, 2))
    with count_compiles() as c:
        out = list(padded_batches(x, 4, pad_value=-5.0))
    assert c.total == 1  # one gather for every batch, the padded one included
    assert all(isinstance(b, jax.Array) and b.shape == (4, 2) for b, _ in out)
    np.testing.assert_array_equal(np.asarray(out[-1][0]), [[16, 17], [18, 19], [20, 21], [-5, -5]])
    np.testing.assert_array_equal(np.concatenate([np.asarray(b)[m] for b, m in out]), np.asarray(x))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"data": np.ones(4), "batch_size": 0}, "batch_size must be a positive int"),
        ({"data": np.ones(4), "batch_size": True}, "batch_size must be a positive int"),
        ({"data": (np.ones(4), np.ones(5)), "batch_size": 2}, "disagree on their leading axis"),
        ({"data": np.float32(1), "batch_size": 2}, "needs a leading axis"),
        ({"data": {}, "batch_size": 2}, "no array leaves"),
        ({"data": (np.ones(4), np.ones(4)), "batch_size": 2, "pad_value": (0, 1, 2)}, "pad_value"),
    ],
)
def test_padded_batches_rejects_bad_input(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        list(padded_batches(**kwargs))


def test_bucket() -> None:
    assert [bucket(n) for n in (0, 1, 15, 16, 17, 33, 200)] == [16, 16, 16, 16, 32, 64, 256]
    assert bucket(3, minimum=1) == 4 and bucket(1, minimum=1) == 1
    assert bucket(70, buckets=(512, 64, 128)) == 128
    assert bucket(64, buckets=[64]) == 64
    lengths = np.random.default_rng(0).integers(1, 200, size=64)
    assert len({bucket(int(n)) for n in lengths}) <= 5
    for bad in (lambda: bucket(-1), lambda: bucket(2, minimum=0), lambda: bucket(2, buckets=[]),
                lambda: bucket(600, buckets=[64, 512]), lambda: bucket(2.0)):  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            bad()


def test_bucketed_lengths_compile_once_per_bucket() -> None:
    @jax.jit
    def total(ids, mask):
        return jnp.sum(jnp.where(mask, ids, 0))

    lengths = [3, 5, 17, 9, 30, 2, 31, 16]
    with count_compiles() as c:
        for n in lengths:
            ids = np.arange(n, dtype=np.int32)
            size = bucket(n)
            got = total(pad_to(ids, size), np.arange(size) < n)
            assert int(got) == ids.sum()
    assert c.count(total) == 2  # buckets 16 and 32


def test_pad_to() -> None:
    x = np.arange(6).reshape(2, 3)
    assert pad_to(x, 5).shape == (2, 5)
    assert pad_to(x, 4, axis=0, value=9)[2:].tolist() == [[9, 9, 9], [9, 9, 9]]
    assert pad_to(x, 3) is x
    assert pad_to([1, 2], 3).tolist() == [1, 2, 0]
    device = pad_to(jnp.ones((2, 2)), 3, value=-1.0)
    assert isinstance(device, jax.Array) and device.tolist() == [[1, 1, -1], [1, 1, -1]]
    with pytest.raises(ValueError, match="more than length"):
        pad_to(x, 2)
    with pytest.raises(ValueError, match="out of range"):
        pad_to(x, 9, axis=2)


@pytest.mark.parametrize("name", ["padded_batches", "bucket", "pad_to"])
def test_docstring_examples_run(name: str, run_doc_examples) -> None:  # type: ignore[no-untyped-def]
    import jaxlint.runtime as runtime

    run_doc_examples(getattr(runtime, name))
