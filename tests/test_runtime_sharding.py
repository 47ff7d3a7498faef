"""`make_mesh` and `shard_module`, on 8 simulated CPU devices (in a subprocess).

`XLA_FLAGS=--xla_force_host_platform_device_count=8` only takes effect if it is set before
jax is imported, and this pytest process has imported jax already, so the checks that need 8
devices run once in a fresh interpreter that prints its findings as JSON; the tests below
assert on them one topic at a time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import pytest
from jax.sharding import PartitionSpec as P

from jaxlint.runtime import make_mesh, shard_module


SCRIPT = textwrap.dedent(
    r'''
    import fnmatch, json, warnings
    import equinox as eqx, jax, jax.numpy as jnp
    from jax.sharding import PartitionSpec as P
    from jaxlint.runtime import UnmatchedPatternWarning, iter_modules, make_mesh, shard_module

    HIDDEN, HEADS = 32, 4
    out = {"devices": jax.device_count()}

    class Block(eqx.Module):
        attn: eqx.nn.MultiheadAttention
        norm1: eqx.nn.LayerNorm
        fc1: eqx.nn.Linear
        fc2: eqx.nn.Linear
        norm2: eqx.nn.LayerNorm
        dropout: eqx.nn.Dropout

        def __init__(self, key):
            k1, k2, k3 = jax.random.split(key, 3)
            self.attn = eqx.nn.MultiheadAttention(
                HEADS, HIDDEN, use_query_bias=True, use_key_bias=True, use_value_bias=True,
                use_output_bias=True, key=k1)
            self.norm1 = eqx.nn.LayerNorm(HIDDEN)
            self.fc1 = eqx.nn.Linear(HIDDEN, 4 * HIDDEN, key=k2)
            self.fc2 = eqx.nn.Linear(4 * HIDDEN, HIDDEN, key=k3)
            self.norm2 = eqx.nn.LayerNorm(HIDDEN)
            self.dropout = eqx.nn.Dropout(0.1)

        def __call__(self, x):
            x = jax.vmap(self.norm1)(x + self.attn(x, x, x))
            h = jax.vmap(self.fc2)(jax.nn.gelu(jax.vmap(self.fc1)(x)))
            return jax.vmap(self.norm2)(x + self.dropout(h, inference=True))

    PLAN = {  # Megatron-style tensor parallelism; eqx Linear.weight is (out, in)
        "attn.query_proj.weight": P("tp", None),
        "attn.key_proj.weight": P("tp", None),
        "attn.value_proj.weight": P("tp", None),
        "attn.[qkv]*_proj.bias": P("tp"),
        "attn.output_proj.weight": P(None, "tp"),
        "fc1.weight": P("tp", None),
        "fc1.bias": P("tp"),
        "fc2.weight": P(None, "tp"),
    }

    def expected_spec(path, plan):
        return next((spec for pattern, spec in plan.items() if fnmatch.fnmatchcase(path, pattern)), P())

    def check(module, sharded, mesh, plan):
        wrong = []
        for (path, a), (_, b) in zip(iter_modules(module), iter_modules(sharded)):
            if eqx.is_array(a):
                want = expected_spec(path, plan)
                if b.sharding.spec != want or b.sharding.mesh != mesh or not jnp.array_equal(a, b):
                    wrong.append([path, str(b.sharding)])
            elif jax.tree_util.treedef_is_leaf(jax.tree_util.tree_structure(a)) and b is not a:
                wrong.append([path, "non-array leaf changed"])
        return wrong

    block = Block(jax.random.PRNGKey(0))
    x = jax.random.normal(jax.random.PRNGKey(1), (16, HIDDEN))
    forward = eqx.filter_jit(lambda m, x: m(x))
    reference = forward(block, x)

    mesh = make_mesh((8,), ("tp",))
    out["axis_types"] = [t.name for t in mesh.axis_types]
    calls = []
    real_put = jax.device_put
    def counting_put(*args, **kwargs):
        calls.append(1)
        return real_put(*args, **kwargs)
    jax.device_put = counting_put
    sharded = shard_module(block, mesh, PLAN)
    jax.device_put = real_put
    out["device_put_calls"] = len(calls)
    out["wrong_1d"] = check(block, sharded, mesh, PLAN)
    out["q_shard_shape"] = list(sharded.attn.query_proj.weight.addressable_shards[0].data.shape)
    out["fc2_shard_shape"] = list(sharded.fc2.weight.addressable_shards[0].data.shape)
    result = forward(sharded, x)
    out["forward_1d_max_diff"] = float(jnp.max(jnp.abs(result - reference)))

    mesh2 = make_mesh((2, 4), ("dp", "tp"))
    plan2 = {"fc1.weight": P(("dp", "tp"), None), "fc2.weight": P("dp", "tp"), "norm*.weight": P("tp")}
    sharded2 = shard_module(block, mesh2, plan2)
    out["wrong_2d"] = check(block, sharded2, mesh2, plan2)
    out["forward_2d_max_diff"] = float(jnp.max(jnp.abs(forward(sharded2, x) - reference)))

    def error(fn):
        try:
            fn()
        except Exception as e:
            return [type(e).__name__, str(e)]
        return None

    explicit = jax.make_mesh((8,), ("tp",))  # jax's default: Explicit axes
    out["explicit_types"] = [t.name for t in explicit.axis_types]
    out["explicit_error"] = error(lambda: shard_module(block, explicit, PLAN))
    out["explicit_replicated_ok"] = error(lambda: shard_module(block, explicit, {})) is None
    allowed = shard_module(block, explicit, PLAN, allow_explicit=True)
    out["explicit_allowed_spec"] = str(allowed.fc1.weight.sharding.spec)

    out["rank_error"] = error(lambda: shard_module(block, mesh, {"norm1.weight": P("tp", None)}))
    out["axis_error"] = error(lambda: shard_module(block, mesh, {"fc1.weight": P("dp", None)}))
    out["divide_error"] = error(lambda: shard_module({"w": jnp.ones((6, 8))}, mesh, {"w": P("tp", None)}))
    out["mesh_count_error"] = error(lambda: make_mesh((3,), ("tp",)))
    out["mesh_names_error"] = error(lambda: make_mesh((8,), ("a", "b")))
    flat = make_mesh(8, "tp")
    out["int_str_mesh"] = [list(flat.axis_names), [t.name for t in flat.axis_types]]

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        shard_module(block, mesh, {"fc1.wieght": P("tp", None), "fc*": P(), "fc1.weight": P("tp", None),
                                   "attn.query_proj": P("tp", None)})
    out["warnings"] = [[w.category.__name__, str(w.message)] for w in caught]
    out["strict_error"] = error(lambda: shard_module(block, mesh, {"fc1.wieght": P("tp", None)}, strict=True))
    print("RESULT " + json.dumps(out))
    '''
)


@pytest.fixture(scope="module")
def eight_devices() -> dict[str, Any]:
    flags = os.environ.get("XLA_FLAGS", "")
    env = {
        **os.environ,
        "XLA_FLAGS": f"{flags} --xla_force_host_platform_device_count=8".strip(),
        "JAX_PLATFORMS": "cpu",
    }
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stdout[-3000:] + proc.stderr[-3000:]
    result: dict[str, Any] = json.loads(lines[-1][len("RESULT ") :])
    assert result["devices"] == 8
    return result


def test_every_leaf_gets_the_first_matching_spec_with_one_device_put(eight_devices: dict[str, Any]) -> None:
    assert eight_devices["axis_types"] == ["Auto"]
    assert eight_devices["device_put_calls"] == 1
    assert eight_devices["wrong_1d"] == []
    assert eight_devices["q_shard_shape"] == [4, 32]  # (32, 32) split in 8 along rows
    assert eight_devices["fc2_shard_shape"] == [32, 16]  # (32, 128) split in 8 along columns


def test_sharded_forward_equals_unsharded(eight_devices: dict[str, Any]) -> None:
    assert eight_devices["forward_1d_max_diff"] < 1e-5
    assert eight_devices["wrong_2d"] == []
    assert eight_devices["forward_2d_max_diff"] < 1e-5


def test_explicit_axes_give_a_clear_error(eight_devices: dict[str, Any]) -> None:
    assert eight_devices["explicit_types"] == ["Explicit"]
    kind, message = eight_devices["explicit_error"]
    assert kind == "ValueError"
    assert "AxisType.Explicit" in message and "jaxlint.runtime.make_mesh" in message
    assert "'attn.query_proj.weight'" in message and "allow_explicit=True" in message
    assert eight_devices["explicit_replicated_ok"]
    assert eight_devices["explicit_allowed_spec"] == str(P("tp", None))


def test_specs_that_do_not_fit_name_the_leaf_and_pattern(eight_devices: dict[str, Any]) -> None:
    kind, message = eight_devices["rank_error"]
    assert kind == "ValueError" and "'norm1.weight' has shape (32,)" in message
    kind, message = eight_devices["axis_error"]
    assert kind == "ValueError" and "no axis 'dp'" in message and "'fc1.weight'" in message
    kind, message = eight_devices["divide_error"]
    assert kind == "ValueError" and "'w' has shape (6, 8)" in message and "8 parts" in message


def test_make_mesh(eight_devices: dict[str, Any]) -> None:
    kind, message = eight_devices["mesh_count_error"]
    assert kind == "ValueError" and "needs 3 devices but 8 are available" in message
    kind, message = eight_devices["mesh_names_error"]
    assert kind == "ValueError" and "one name per dimension" in message
    assert eight_devices["int_str_mesh"] == [["tp"], ["Auto"]]


def test_unplaced_patterns_warn_and_strict_raises(eight_devices: dict[str, Any]) -> None:
    (kind, message), = eight_devices["warnings"]
    assert kind == "UnmatchedPatternWarning"
    assert "'fc1.wieght' matches no array leaf (closest array leaf: 'fc1.weight')" in message
    assert "'fc1.weight' only matches leaves that earlier patterns place" in message
    assert "'attn.query_proj' matches no array leaf (it matches 'attn.query_proj'" in message
    kind, message = eight_devices["strict_error"]
    assert kind == "ValueError" and "'fc1.wieght'" in message


# -- in this process (however many devices it has) ----------------------------------------


def test_plan_types_are_checked() -> None:
    mesh = make_mesh((jax.device_count(),), ("tp",))
    linear = eqx.nn.Linear(2, 2, key=jax.random.PRNGKey(0))
    with pytest.raises(TypeError, match="must be a PartitionSpec"):
        shard_module(linear, mesh, {"weight": ("tp", None)})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="fnmatch patterns"):
        shard_module(linear, mesh, {0: P()})  # type: ignore[dict-item]
    placed = shard_module({"w": jnp.ones(2), "n": 3, "z": None}, mesh, {"w": None})
    assert placed["w"].sharding.spec == P() and placed["n"] == 3 and placed["z"] is None


def test_make_mesh_rejects_a_device_count_mismatch_here() -> None:
    with pytest.raises(ValueError, match="devices but"):
        make_mesh((jax.device_count() + 1,), ("tp",))


@pytest.mark.parametrize("name", ["make_mesh", "shard_module"])
def test_docstring_examples_run(name: str, run_doc_examples) -> None:  # type: ignore[no-untyped-def]
    import jaxlint.runtime as runtime

    run_doc_examples(getattr(runtime, name))
