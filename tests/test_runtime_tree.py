"""`iter_modules`, `tree_at_batched` and `apply_transforms` against sequential `eqx.tree_at`."""

from __future__ import annotations

import fnmatch
import functools as ft
import random

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import pytest

from jaxlint.runtime import (
    UnmatchedPatternWarning,
    apply_transforms,
    iter_modules,
    tree_at_batched,
)


HIDDEN = 8


class Block(eqx.Module):
    """A small transformer block: attention + MLP + LayerNorms, one bias-free Linear."""

    attn: eqx.nn.MultiheadAttention
    norm1: eqx.nn.LayerNorm
    fc1: eqx.nn.Linear
    fc2: eqx.nn.Linear
    norm2: eqx.nn.LayerNorm
    gate: eqx.nn.Linear  # use_bias=False: a None leaf in every block
    dropout: eqx.nn.Dropout

    def __init__(self, key: jax.Array) -> None:
        k1, k2, k3, k4 = jax.random.split(key, 4)
        self.attn = eqx.nn.MultiheadAttention(2, HIDDEN, use_query_bias=True, key=k1)
        self.norm1 = eqx.nn.LayerNorm(HIDDEN)
        self.fc1 = eqx.nn.Linear(HIDDEN, 2 * HIDDEN, key=k2)
        self.fc2 = eqx.nn.Linear(2 * HIDDEN, HIDDEN, key=k3)
        self.norm2 = eqx.nn.LayerNorm(HIDDEN)
        self.gate = eqx.nn.Linear(HIDDEN, HIDDEN, use_bias=False, key=k4)
        self.dropout = eqx.nn.Dropout(0.1)


class Model(eqx.Module):
    embed: eqx.nn.Embedding
    blocks: tuple[Block, ...]
    extras: dict[str, object]
    head: eqx.nn.Linear
    name: str = eqx.field(static=True, default="tiny")


@ft.lru_cache(maxsize=None)
def make_model(layers: int = 3, seed: int = 0) -> Model:
    """Built once per arguments (modules are immutable), to keep the tests fast."""
    keys = jax.random.split(jax.random.PRNGKey(seed), layers + 2)
    return Model(
        embed=eqx.nn.Embedding(11, HIDDEN, key=keys[0]),
        blocks=tuple(Block(k) for k in keys[1:-1]),
        extras={"scale": jnp.ones(()), "empty": (), "note": None, "ids": [jnp.arange(2), 3]},
        head=eqx.nn.Linear(HIDDEN, 2, key=keys[-1]),
    )


class Wrapped(eqx.Module):
    inner: object
    tag: str = eqx.field(static=True)


def sequential(tree, updates):  # type: ignore[no-untyped-def]
    """The reference: one `eqx.tree_at` per update (None-aware, so Nones are replaceable)."""
    for where, value in updates:
        tree = eqx.tree_at(where, tree, value, is_leaf=lambda x: x is None)
    return tree


def assert_same_tree(a, b) -> None:  # type: ignore[no-untyped-def]
    """Same structure (treedef, with None as a leaf) and equal leaves, dtypes included."""
    la, ta = jtu.tree_flatten(a, is_leaf=lambda x: x is None)
    lb, tb = jtu.tree_flatten(b, is_leaf=lambda x: x is None)
    assert ta == tb
    for x, y in zip(la, lb):
        if eqx.is_array(x) or eqx.is_array(y):
            assert type(x) is type(y)
            assert x.shape == y.shape and x.dtype == y.dtype
            assert bool(jnp.all(x == y))
        else:
            assert type(x) is type(y) and x == y


def getter(path: tuple):  # type: ignore[no-untyped-def]
    """`where` for a key path, the way a user writes `lambda m: m.blocks[0].fc1`."""

    def where(tree):  # type: ignore[no-untyped-def]
        for key in path:
            if isinstance(key, jtu.GetAttrKey):
                tree = getattr(tree, key.name)
            elif isinstance(key, jtu.SequenceKey):
                tree = tree[key.idx]
            else:
                tree = tree[key.key]
        return tree

    return where


def bump(node, amount: float):  # type: ignore[no-untyped-def]
    """A replacement with the structure of `node`: arrays shifted by `amount`."""
    return jtu.tree_map(lambda x: x + amount if eqx.is_array(x) else x, node)


# -- iter_modules ---------------------------------------------------------------------------


def test_iter_modules_paths_are_dotted_preorder_in_field_order() -> None:
    model = make_model(layers=2)
    paths = [path for path, _ in iter_modules(model)]
    assert paths[:4] == ["", "embed", "embed.weight", "blocks"]
    block = paths.index("blocks.0")
    assert paths[block : block + 8] == [
        "blocks.0",
        "blocks.0.attn",
        "blocks.0.attn.query_proj",
        "blocks.0.attn.query_proj.weight",
        "blocks.0.attn.query_proj.bias",
        "blocks.0.attn.key_proj",
        "blocks.0.attn.key_proj.weight",
        "blocks.0.attn.key_proj.bias",
    ]
    assert "blocks.1.gate.bias" in paths  # None children are nodes
    assert "extras.ids.1" in paths and "extras.empty" in paths
    assert not any(p.endswith("num_heads") or p == "name" for p in paths)  # static fields
    assert len(paths) == len(set(paths))
    assert paths == [path for path, _ in iter_modules(model)]  # deterministic


def test_iter_modules_nodes_are_the_tree_nodes() -> None:
    model = make_model(layers=1)
    nodes = dict(iter_modules(model))
    assert nodes[""] is model
    assert nodes["blocks.0.fc1"] is model.blocks[0].fc1
    assert nodes["blocks.0.fc1.weight"] is model.blocks[0].fc1.weight
    assert nodes["blocks.0.gate.bias"] is None
    assert nodes["extras.scale"] is model.extras["scale"]
    leaves = [n for p, n in iter_modules(model) if eqx.is_array(n)]
    assert len(leaves) == len(jtu.tree_leaves(eqx.filter(model, eqx.is_array)))


def test_iter_modules_of_a_leaf_and_of_an_empty_tree() -> None:
    assert list(iter_modules(1.5)) == [("", 1.5)]
    assert list(iter_modules(None)) == [("", None)]


# -- tree_at_batched: equal to the sequential loop ------------------------------------------


def test_disjoint_leaf_updates_equal_the_loop() -> None:
    model = make_model()
    updates = []
    for i, block in enumerate(model.blocks):
        for name in ("query_proj", "key_proj", "value_proj", "output_proj"):
            linear = getattr(block.attn, name)
            updates.append((lambda m, i=i, n=name: getattr(m.blocks[i].attn, n).weight, linear.weight * 2))
        updates.append((lambda m, i=i: m.blocks[i].fc1.bias, block.fc1.bias + 1))
        updates.append((lambda m, i=i: m.blocks[i].fc2, bump(block.fc2, 3.0)))
    assert len(updates) == 18
    out = tree_at_batched(model, updates)
    assert_same_tree(out, sequential(model, updates))
    assert_same_tree(out, eqx.tree_at(lambda m: [w(m) for w, _ in updates], model, [v for _, v in updates]))


def test_input_is_unchanged_and_untouched_subtrees_are_shared() -> None:
    model = make_model()
    before = jtu.tree_leaves(model)
    out = tree_at_batched(model, [(lambda m: m.blocks[1].fc1.weight, jnp.zeros((2 * HIDDEN, HIDDEN)))])
    assert all(a is b for a, b in zip(before, jtu.tree_leaves(model)))
    assert out.blocks[0] is model.blocks[0] and out.embed is model.embed
    assert out.blocks[1].fc2 is model.blocks[1].fc2
    assert out.blocks[1] is not model.blocks[1]
    assert bool(jnp.all(out.blocks[1].fc1.weight == 0)) and out.name == "tiny"


def test_empty_updates_return_the_tree_itself() -> None:
    model = make_model()
    assert tree_at_batched(model, []) is model
    assert tree_at_batched(model, iter(())) is model


def test_replacing_modules_by_other_types_equals_the_loop() -> None:
    model = make_model()
    updates = [
        (lambda m: m.blocks[0].attn.query_proj, eqx.nn.Identity()),
        (lambda m: m.blocks[1].dropout, eqx.nn.Dropout(0.5, inference=True)),
        (lambda m: m.head, eqx.nn.Sequential([eqx.nn.Identity(), model.head])),
        (lambda m: m.extras["ids"], "replaced"),
    ]
    assert_same_tree(tree_at_batched(model, updates), sequential(model, updates))


def test_ancestor_first_then_descendant_lands_in_the_new_subtree() -> None:
    model = make_model()
    new_block = bump(model.blocks[1], 10.0)
    updates = [
        (lambda m: m.blocks[1], new_block),
        (lambda m: m.blocks[1].fc1.weight, jnp.zeros((2 * HIDDEN, HIDDEN))),
        (lambda m: m.blocks[1].attn.key_proj, eqx.nn.Identity()),
    ]
    out = tree_at_batched(model, updates)
    assert_same_tree(out, sequential(model, updates))
    assert bool(jnp.all(out.blocks[1].fc2.weight == model.blocks[1].fc2.weight + 10.0))
    assert bool(jnp.all(out.blocks[1].fc1.weight == 0))


def test_descendant_then_ancestor_discards_the_descendant_like_the_loop() -> None:
    model = make_model()
    new_block = bump(model.blocks[2], 1.0)
    updates = [
        (lambda m: m.blocks[2].fc1.weight, jnp.zeros((2 * HIDDEN, HIDDEN))),
        (lambda m: m.blocks[2], new_block),
    ]
    out = tree_at_batched(model, updates)
    assert_same_tree(out, sequential(model, updates))
    assert out.blocks[2] is new_block


def test_an_update_can_walk_into_structure_an_earlier_update_created() -> None:
    model = make_model()
    mlp = eqx.nn.MLP(HIDDEN, 2, width_size=4, depth=1, key=jax.random.PRNGKey(3))
    updates = [
        (lambda m: m.head, mlp),
        (lambda m: m.head.layers[1].bias, jnp.full((2,), 7.0)),  # only exists after update 0
    ]
    assert_same_tree(tree_at_batched(model, updates), sequential(model, updates))


def test_one_object_in_two_places_then_an_update_inside_one() -> None:
    model = make_model()
    shared = bump(model.blocks[0], 1.0)
    before = jtu.tree_leaves(shared)
    updates = [
        (lambda m: m.blocks[0], shared),
        (lambda m: m.blocks[2], shared),
        (lambda m: m.blocks[2].fc1.bias, jnp.zeros(2 * HIDDEN)),
        (lambda m: m.blocks[0].fc2, bump(shared.fc2, 5.0)),
    ]
    out = tree_at_batched(model, updates)
    assert_same_tree(out, sequential(model, updates))
    assert all(a is b for a, b in zip(before, jtu.tree_leaves(shared)))  # not mutated
    assert out.blocks[1] is model.blocks[1]


def test_replacement_built_from_the_tree_then_an_update_inside_it() -> None:
    model = make_model()
    updates = [
        (lambda m: m.blocks[1], Wrapped(model.blocks[1], "w")),
        (lambda m: m.blocks[1].inner.fc1.bias, jnp.zeros(2 * HIDDEN)),
        (lambda m: m.blocks[1].inner.attn, bump(model.blocks[1].attn, 1.0)),
    ]
    out = tree_at_batched(model, updates)
    assert_same_tree(out, sequential(model, updates))
    assert_same_tree(model, make_model.__wrapped__())  # the input and its blocks are untouched
    assert out.blocks[1].inner.fc2 is model.blocks[1].fc2


def test_root_replacement_then_inner_update() -> None:
    model = make_model()
    other = make_model(seed=1)
    updates = [(lambda m: m, other), (lambda m: m.head.bias, jnp.zeros(2))]
    out = tree_at_batched(model, updates)
    assert_same_tree(out, sequential(model, updates))
    assert out.blocks[0] is other.blocks[0]


def test_duplicates_last_wins_like_the_loop() -> None:
    model = make_model()
    updates = [
        (lambda m: m.blocks[0].fc1.bias, jnp.full((2 * HIDDEN,), 1.0)),
        (lambda m: m.blocks[0].fc2.bias, jnp.full((HIDDEN,), 2.0)),
        (lambda m: m.blocks[0].fc1.bias, jnp.full((2 * HIDDEN,), 3.0)),
    ]
    out = tree_at_batched(model, updates)
    assert_same_tree(out, sequential(model, updates))
    assert float(out.blocks[0].fc1.bias[0]) == 3.0
    # a duplicate inside one `where` also resolves last-wins, as in eqx.tree_at
    pair = [(lambda m: [m.head.bias, m.head.bias], [jnp.zeros(2), jnp.ones(2)])]
    assert float(tree_at_batched(model, pair).head.bias[0]) == 1.0
    assert float(eqx.tree_at(pair[0][0], model, pair[0][1]).head.bias[0]) == 1.0


def test_where_returning_several_nodes_equals_one_tree_at_call() -> None:
    model = make_model()
    where = lambda m: [b.attn.query_proj.weight for b in m.blocks]  # noqa: E731
    values = [jnp.full((HIDDEN, HIDDEN), float(i)) for i in range(3)]
    out = tree_at_batched(model, [(where, values)])
    assert_same_tree(out, eqx.tree_at(where, model, values))
    with pytest.raises(ValueError, match="returned 3 nodes but the replacement has 2"):
        tree_at_batched(model, [(where, values[:2])])
    with pytest.raises(TypeError, match="must be a sequence of 3 values"):
        tree_at_batched(model, [(where, 1.0)])


def test_overlap_inside_one_where_raises_naming_both_paths() -> None:
    model = make_model()
    where = lambda m: [m.blocks[0].fc1.weight, m.blocks[0]]  # noqa: E731
    values = [jnp.zeros((2 * HIDDEN, HIDDEN)), model.blocks[0]]
    with pytest.raises(ValueError, match=r"'blocks\.0' and 'blocks\.0\.fc1\.weight'"):
        tree_at_batched(model, [(where, values)])
    with pytest.raises(ValueError):  # eqx.tree_at refuses it too
        eqx.tree_at(where, model, values)


def test_none_leaves() -> None:
    linear = eqx.nn.Linear(3, 4, use_bias=False, key=jax.random.PRNGKey(0))
    # the only None of the tree: plain eqx.tree_at works too
    out = tree_at_batched(linear, [(lambda l: l.bias, jnp.zeros(4))])
    assert_same_tree(out, eqx.tree_at(lambda l: l.bias, linear, jnp.zeros(4)))
    # many Nones (one per block, one in extras): the loop needs is_leaf, the helper does not
    model = make_model()
    updates = [(lambda m, i=i: m.blocks[i].gate.bias, jnp.full((HIDDEN,), float(i))) for i in range(3)]
    updates.append((lambda m: m.extras["note"], "set"))
    with pytest.raises(ValueError, match="uniquely identify"):
        eqx.tree_at(updates[0][0], model, updates[0][1])
    out = tree_at_batched(model, updates)
    assert_same_tree(out, sequential(model, updates))
    assert out.extras["note"] == "set" and out.blocks[1].gate.bias is updates[1][1]
    # and a node can be set to None, then replaced again
    back = [(lambda m: m.blocks[0].fc1.bias, None), (lambda m: m.blocks[0].fc1.bias, jnp.ones(2 * HIDDEN))]
    assert_same_tree(tree_at_batched(model, back), sequential(model, back))
    assert tree_at_batched(model, back[:1]).blocks[0].fc1.bias is None


def test_empty_tuple_and_shared_nodes() -> None:
    shared = eqx.nn.Linear(2, 2, key=jax.random.PRNGKey(0))
    tree = {"a": shared, "b": shared, "c": (), "d": ()}
    updates = [(lambda t: t["a"].bias, jnp.zeros(2)), (lambda t: t["d"], (1, 2))]
    out = tree_at_batched(tree, updates)
    assert_same_tree(out, sequential(tree, updates))
    assert out["b"] is shared and out["c"] == () and out["d"] == (1, 2)


def test_errors_for_what_is_not_a_node() -> None:
    model = make_model()
    with pytest.raises(ValueError, match="not a node of the tree"):
        tree_at_batched(model, [(lambda m: m.name, "other")])  # a static field
    with pytest.raises(ValueError, match="not a node of the tree"):
        tree_at_batched(model, [(lambda m: model.head, None)])  # the input, not the tree given
    with pytest.raises(TypeError, match="update 0 must be a"):
        tree_at_batched(model, [lambda m: m.head])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="must be a callable"):
        tree_at_batched(model, [("head", None)])  # type: ignore[list-item]


def test_where_failing_after_an_earlier_update_fails_like_the_loop() -> None:
    model = make_model()
    updates = [(lambda m: m.head, eqx.nn.Identity()), (lambda m: m.head.weight, jnp.zeros((2, HIDDEN)))]
    with pytest.raises(AttributeError):
        sequential(model, updates)
    with pytest.raises(AttributeError) as info:
        tree_at_batched(model, updates)
    if hasattr(info.value, "__notes__"):
        assert "update 1" in info.value.__notes__[-1]


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_inside_jit(jit: bool) -> None:
    model = make_model()

    def surgery(model):  # type: ignore[no-untyped-def]
        updates = [(lambda m, i=i: m.blocks[i].fc1.weight, 2 * b.fc1.weight) for i, b in enumerate(model.blocks)]
        updates.append((lambda m: m.blocks[0], bump(model.blocks[0], 1.0)))
        return tree_at_batched(model, updates), sequential(model, updates)

    fn = eqx.filter_jit(surgery) if jit else surgery
    batched, looped = fn(model)
    assert_same_tree(batched, looped)


def _all_paths(tree):  # type: ignore[no-untyped-def]
    out = []
    stack = [((), tree)]
    while stack:
        path, node = stack.pop()
        out.append((path, node))
        kids = jtu.default_registry.flatten_one_level_with_keys(node)
        if kids is not None:
            stack.extend((path + (k,), c) for k, c in kids[0])
    return out


@pytest.mark.parametrize("seed", range(12))
def test_random_update_sequences_equal_the_loop(seed: int) -> None:
    """Random mixes of leaves, modules, containers, Nones, duplicates and nesting."""
    rng = random.Random(seed)
    model = make_model(layers=2)
    nodes = _all_paths(model)
    updates = []
    for step in range(rng.randint(5, 25)):
        path, node = rng.choice(nodes)
        if updates and rng.random() < 0.15:
            value = rng.choice(updates)[1]  # the same object in two places
        elif node is None or (rng.random() < 0.1 and eqx.is_array(node)):
            value = None if rng.random() < 0.3 else jnp.full((2,), float(step))
        else:
            value = bump(node, float(step + 1))  # same structure: later inner updates still fit
        updates.append((getter(path), value))
    snapshots = [jtu.tree_flatten(v, is_leaf=lambda x: x is None) for _, v in updates]
    try:
        expected = sequential(model, updates)
    except (AttributeError, KeyError, IndexError, TypeError) as error:
        with pytest.raises(type(error)):
            tree_at_batched(model, updates)
    else:
        assert_same_tree(tree_at_batched(model, updates), expected)
    for (_, value), (leaves, treedef) in zip(updates, snapshots):  # replacements not mutated
        after, after_def = jtu.tree_flatten(value, is_leaf=lambda x: x is None)
        assert after_def == treedef and all(a is b for a, b in zip(after, leaves))


# -- apply_transforms -----------------------------------------------------------------------


def seed_loop(module, plan):  # type: ignore[no-untyped-def]
    """Seed 002's loop: one `eqx.tree_at` per match, patterns in plan order."""
    for pattern, transform in plan.items():
        for path, sub in [(p, n) for p, n in _all_paths(module)]:
            dotted = ".".join(str(getattr(k, "name", getattr(k, "idx", getattr(k, "key", k)))) for k in path)
            if fnmatch.fnmatchcase(dotted, pattern):
                module = eqx.tree_at(getter(path), module, transform(sub), is_leaf=lambda x: x is None)
    return module


def halve(linear):  # type: ignore[no-untyped-def]
    return eqx.tree_at(lambda l: l.weight, linear, linear.weight * 0.5)


def shift(linear):  # type: ignore[no-untyped-def]
    return eqx.tree_at(lambda l: l.bias, linear, linear.bias + 1.0)


def test_disjoint_plan_equals_the_seed_loop() -> None:
    model = make_model()
    plan = {
        "blocks.*.attn.query_proj": halve,
        "blocks.*.attn.value_proj": halve,
        "blocks.*.attn.output_proj": halve,
        "blocks.*.fc[12]": shift,
        "head": halve,
    }
    out = apply_transforms(model, plan)
    assert_same_tree(out, seed_loop(model, plan))
    assert out.blocks[0].attn.key_proj is model.blocks[0].attn.key_proj


def test_plan_order_and_tree_order_are_deterministic() -> None:
    model = make_model()
    calls = []

    def record(tag):  # type: ignore[no-untyped-def]
        def transform(node):  # type: ignore[no-untyped-def]
            calls.append(tag)
            return node

        return transform

    plan = {"blocks.*.fc2": record("fc2"), "blocks.*.attn": record("attn"), "head": record("head")}
    assert apply_transforms(model, plan) is not None
    assert calls == ["fc2"] * 3 + ["attn"] * 3 + ["head"]


def test_container_first_then_inner_pattern_applies_inside_the_new_container() -> None:
    model = make_model()
    plan = {"blocks.*.attn": lambda a: bump(a, 10.0), "blocks.*.attn.query_proj": halve}
    out = apply_transforms(model, plan)
    assert_same_tree(out, seed_loop(model, plan))  # the loop agrees here
    expected = halve(bump(model.blocks[1].attn.query_proj, 10.0))
    assert bool(jnp.allclose(out.blocks[1].attn.query_proj.weight, expected.weight))


def test_inner_first_then_container_receives_the_transformed_inner() -> None:
    model = make_model()
    seen = []

    def wrap(block):  # type: ignore[no-untyped-def]
        seen.append(block.fc1.weight)
        return Wrapped(block, "w")

    out = apply_transforms(model, {"blocks.*.fc1": halve, "blocks.?": wrap})
    assert isinstance(out.blocks[0], Wrapped)
    assert bool(jnp.allclose(seen[0], model.blocks[0].fc1.weight * 0.5))
    assert_same_tree(out, seed_loop(model, {"blocks.*.fc1": halve, "blocks.?": wrap}))


def test_same_path_matched_by_two_patterns_composes_in_plan_order() -> None:
    model = make_model()
    out = apply_transforms(model, {"head": shift, "hea?": halve})
    assert_same_tree(out.head, halve(shift(model.head)))


def test_overlap_within_one_pattern_is_ancestor_first() -> None:
    model = make_model(layers=1)
    out = apply_transforms(model, {"blocks.0*": lambda n: bump(n, 1.0)})
    # the block is bumped once, then every node inside the new block once more
    w = model.blocks[0].fc1.weight
    assert bool(jnp.allclose(out.blocks[0].fc1.weight, w + 3.0))  # blocks.0, .fc1, .fc1.weight


def test_inner_match_missing_from_the_new_container_raises_naming_both() -> None:
    model = make_model()
    plan = {"blocks.?": lambda b: Wrapped(b, "w"), "blocks.*.fc1": halve}
    with pytest.raises(ValueError, match=r"'blocks\.0\.fc1'.*inside 'blocks\.0'.*'blocks\.\?'"):
        apply_transforms(model, plan)
    # fnmatch's `*` crosses dots: 'blocks.*' also matches everything inside each block
    with pytest.raises(ValueError, match=r"'blocks\.0\.attn'.*also matches dots"):
        apply_transforms(model, {"blocks.*": lambda b: Wrapped(b, "w")})


def test_unmatched_pattern_warns_with_the_closest_path_and_strict_raises() -> None:
    model = make_model()
    calls = []
    plan = {"blocks.*.atn.query_proj": halve, "head": lambda h: calls.append(1) or h}
    with pytest.warns(UnmatchedPatternWarning, match=r"'blocks\.\*\.atn\.query_proj'.*closest path"):
        apply_transforms(model, plan)
    assert calls == [1]
    with pytest.raises(ValueError, match="matched no path"):
        apply_transforms(model, plan, strict=True)
    assert calls == [1]  # strict refuses before any transform runs


def test_apply_transforms_edge_cases() -> None:
    model = make_model()
    assert apply_transforms(model, {}) is model
    with pytest.raises(TypeError, match="must be callable"):
        apply_transforms(model, {"head": 3})  # type: ignore[dict-item]
    with pytest.raises(ZeroDivisionError) as info:
        apply_transforms(model, {"head": lambda h: 1 / 0})
    if hasattr(info.value, "__notes__"):
        assert "'head'" in info.value.__notes__[-1]
    # None nodes and the root can be matched too
    out = apply_transforms(model, {"blocks.*.gate.bias": lambda _: jnp.zeros(HIDDEN), "": lambda m: m})
    assert out.blocks[2].gate.bias.shape == (HIDDEN,)


# -- docstring examples run ------------------------------------------------------------------


@pytest.mark.parametrize("name", ["iter_modules", "tree_at_batched", "apply_transforms"])
def test_docstring_examples_run(name: str, run_doc_examples) -> None:  # type: ignore[no-untyped-def]
    import jaxlint.runtime as runtime

    run_doc_examples(getattr(runtime, name))
