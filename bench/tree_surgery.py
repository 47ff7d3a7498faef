"""Batched tree surgery and sharding plans against the loops they replace (seeds 002 and 004).

    python bench/tree_surgery.py [--layers 4 12 24] [--hidden 128] [--rounds 7] [--skip-shard]

Model: the BERT-like equinox encoder of shared/research/runtime-baseline.md §2 (embeddings with
LayerNorm and Dropout; N blocks of MultiheadAttention, Dropout, LayerNorm, Linear h->4h,
Linear 4h->h, Dropout, LayerNorm; pooler and classifier). Hidden size does not change the
tree-surgery times (they depend on the number of pytree nodes), so the default is 128.

Part 1, tree surgery: a tensor-parallel plan of 6 fnmatch patterns per layer
(`blocks.*.attn.{query,key,value,output}_proj`, `blocks.*.fc1`, `blocks.*.fc2`; 24/72/144
matches at 4/12/24 layers), each match wrapped in a `ParallelLinear`. Variants, all starting
from `(model, plan)`:

- `loop`: seed 002 before its fix: match paths (one walk yielding path, node and getter, as
  seed 002's `iter_module` does), then one `eqx.tree_at` per match;
- `single tree_at`: the same matching, then one hand-written `eqx.tree_at` with a list `where`
  (seed 002 after its fix);
- `tree_at_batched`: the same matching, then `jaxlint.runtime.tree_at_batched`;
- `apply_transforms`: `jaxlint.runtime.apply_transforms(model, plan)`, matching included.

A second table times the replacement step alone, with the `(getter, new node)` pairs computed
once beforehand: the loop of `eqx.tree_at`, one `eqx.tree_at`, and `tree_at_batched`.

Part 2, sharding on 8 simulated CPU devices (XLA_FLAGS is set before jax is imported): a TP
plan over array leaves (10 patterns, the rest replicated), from the same unsharded model:

- `tree_at loop`: one `jax.device_put` and one `eqx.tree_at` per array leaf;
- `tree_map put`: one `jax.device_put` per array leaf inside one `tree_map_with_path`;
- `shard_module`: `jaxlint.runtime.shard_module` (one `device_put` of a sharding pytree).

Method: every variant runs once untimed (warm-up, and a check that all variants give equal
trees), then `--rounds` interleaved rounds, alternating the order each round (A B C D, D C
B A). Reported: median ms, and the speed-up of each variant over the first one as the ratio
of medians and as the median of per-round ratios ("paired"). Compare ratios, not absolute
times: the machine may be shared.
"""

from __future__ import annotations

import os


if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
    ).strip()

import argparse  # noqa: E402
import fnmatch  # noqa: E402
import importlib.metadata  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Iterator  # noqa: E402
from typing import Any  # noqa: E402

import equinox as eqx  # noqa: E402
import jax  # noqa: E402
import jax.tree_util as jtu  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec as P  # noqa: E402

from _common import Block, speedup_rows  # noqa: E402
from jaxlint.runtime import apply_transforms, make_mesh, shard_module, tree_at_batched  # noqa: E402


# -- the model (runtime-baseline.md §2) -----------------------------------------------------


class Embeddings(eqx.Module):
    word: eqx.nn.Embedding
    position: eqx.nn.Embedding
    token_type: eqx.nn.Embedding
    norm: eqx.nn.LayerNorm
    dropout: eqx.nn.Dropout

    def __init__(self, vocab: int, hidden: int, *, key: jax.Array) -> None:
        k1, k2, k3 = jax.random.split(key, 3)
        self.word = eqx.nn.Embedding(vocab, hidden, key=k1)
        self.position = eqx.nn.Embedding(512, hidden, key=k2)
        self.token_type = eqx.nn.Embedding(2, hidden, key=k3)
        self.norm = eqx.nn.LayerNorm(hidden)
        self.dropout = eqx.nn.Dropout(0.1)


class Encoder(eqx.Module):
    embeddings: Embeddings
    blocks: tuple[Block, ...]
    pooler: eqx.nn.Linear
    classifier: eqx.nn.Linear

    def __init__(self, layers: int, hidden: int, heads: int = 2, vocab: int = 30522, *, key: jax.Array) -> None:
        keys = jax.random.split(key, layers + 3)
        self.embeddings = Embeddings(vocab, hidden, key=keys[0])
        self.blocks = tuple(Block(hidden, heads, key=k) for k in keys[1 : layers + 1])
        self.pooler = eqx.nn.Linear(hidden, hidden, key=keys[-2])
        self.classifier = eqx.nn.Linear(hidden, 2, key=keys[-1])


class ParallelLinear(eqx.Module):
    """What a TP plan turns a Linear into: the layer plus how it is split."""

    linear: eqx.nn.Linear
    style: str = eqx.field(static=True)


def column(linear: eqx.nn.Linear) -> ParallelLinear:
    return ParallelLinear(linear, "column")


def row(linear: eqx.nn.Linear) -> ParallelLinear:
    return ParallelLinear(linear, "row")


TP_PLAN: dict[str, Callable[[Any], Any]] = {
    "blocks.*.attn.query_proj": column,
    "blocks.*.attn.key_proj": column,
    "blocks.*.attn.value_proj": column,
    "blocks.*.attn.output_proj": row,
    "blocks.*.fc1": column,
    "blocks.*.fc2": row,
}

SHARD_PLAN = {
    "blocks.*.attn.query_proj.weight": P("tp", None),
    "blocks.*.attn.key_proj.weight": P("tp", None),
    "blocks.*.attn.value_proj.weight": P("tp", None),
    "blocks.*.attn.[qkv]*_proj.bias": P("tp"),
    "blocks.*.attn.output_proj.weight": P(None, "tp"),
    "blocks.*.fc1.weight": P("tp", None),
    "blocks.*.fc1.bias": P("tp"),
    "blocks.*.fc2.weight": P(None, "tp"),
    "pooler.weight": P("tp", None),
    "pooler.bias": P("tp"),
}


# -- seed 002's matching: a walk yielding (path, node, getter) --------------------------------


def iter_module(module: Any, path: str = "", getter: Callable[[Any], Any] = lambda m: m) -> Iterator[tuple[str, Any, Callable[[Any], Any]]]:
    yield path, module, getter
    if isinstance(module, eqx.Module):
        children: list[tuple[Any, Any]] = [
            (name, getattr(module, name)) for name in module.__dataclass_fields__
            if not module.__dataclass_fields__[name].metadata.get("static", False)
        ]
    elif isinstance(module, (tuple, list)):
        children = list(enumerate(module))
    else:
        return
    for name, child in children:
        if isinstance(name, int):
            child_getter = lambda m, g=getter, i=name: g(m)[i]  # noqa: E731
        else:
            child_getter = lambda m, g=getter, n=name: getattr(g(m), n)  # noqa: E731
        yield from iter_module(child, f"{path}.{name}" if path else str(name), child_getter)


def matches(module: Any, plan: dict[str, Callable[[Any], Any]]) -> list[tuple[Callable[[Any], Any], Any]]:
    """One walk; for each path, every matching pattern's transform, in plan order."""
    out = []
    for path, node, getter in iter_module(module):
        for pattern, transform in plan.items():
            if fnmatch.fnmatchcase(path, pattern):
                out.append((getter, transform(node)))
    return out


def replace_loop(model: Any, pairs: list[tuple[Callable[[Any], Any], Any]]) -> Any:
    for getter, new in pairs:
        model = eqx.tree_at(getter, model, new)
    return model


def surgery_loop(model: Any, plan: dict[str, Callable[[Any], Any]]) -> Any:
    for getter, new in matches(model, plan):
        model = eqx.tree_at(getter, model, new)
    return model


def surgery_single(model: Any, plan: dict[str, Callable[[Any], Any]]) -> Any:
    pairs = matches(model, plan)
    getters = [g for g, _ in pairs]
    return eqx.tree_at(lambda m: [g(m) for g in getters], model, [v for _, v in pairs])


def surgery_batched(model: Any, plan: dict[str, Callable[[Any], Any]]) -> Any:
    return tree_at_batched(model, matches(model, plan))


def surgery_apply(model: Any, plan: dict[str, Callable[[Any], Any]]) -> Any:
    return apply_transforms(model, plan)


# -- sharding variants ----------------------------------------------------------------------


def _spec(path: str) -> P:
    return next((spec for pattern, spec in SHARD_PLAN.items() if fnmatch.fnmatchcase(path, pattern)), P())


def shard_tree_at_loop(model: Any, mesh: Any) -> Any:
    for path, node, getter in list(iter_module(model)):
        if eqx.is_array(node):
            model = eqx.tree_at(getter, model, jax.device_put(node, NamedSharding(mesh, _spec(path))))
    return model


def shard_tree_map(model: Any, mesh: Any) -> Any:
    def put(path: Any, leaf: Any) -> Any:
        if not eqx.is_array(leaf):
            return leaf
        return jax.device_put(leaf, NamedSharding(mesh, _spec(jtu.keystr(path, simple=True, separator="."))))

    return jtu.tree_map_with_path(put, model)


def shard_helper(model: Any, mesh: Any) -> Any:
    return shard_module(model, mesh, SHARD_PLAN)


# -- measuring ------------------------------------------------------------------------------


def _block(tree: Any) -> None:
    jax.block_until_ready([x for x in jtu.tree_leaves(tree) if isinstance(x, jax.Array)])


def _same(a: Any, b: Any) -> bool:
    la, ta = jtu.tree_flatten(a, is_leaf=lambda x: x is None)
    lb, tb = jtu.tree_flatten(b, is_leaf=lambda x: x is None)
    if ta != tb:
        return False
    for x, y in zip(la, lb):
        if isinstance(x, jax.Array):
            if not (isinstance(y, jax.Array) and x.shape == y.shape and bool((x == y).all())):
                return False
            if x.sharding.is_equivalent_to(y.sharding, x.ndim) is False:
                return False
        elif x != y:
            return False
    return True


def measure(variants: dict[str, Callable[[], Any]], rounds: int) -> dict[str, list[float]]:
    results = {name: fn() for name, fn in variants.items()}  # warm-up + equality check
    first = next(iter(results.values()))
    for name, result in results.items():
        _block(result)
        if not _same(first, result):
            sys.exit(f"error: {name} gives a different tree than {next(iter(results))}")
    del results
    times: dict[str, list[float]] = {name: [] for name in variants}
    names = list(variants)
    for index in range(rounds):
        for name in names if index % 2 == 0 else reversed(names):
            start = time.perf_counter()
            _block(variants[name]())
            times[name].append((time.perf_counter() - start) * 1e3)
    return times


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, nargs="+", default=[4, 12, 24])
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--skip-shard", action="store_true", help="only the tree-surgery table")
    args = parser.parse_args(argv)

    versions = ", ".join(f"{p} {importlib.metadata.version(p)}" for p in ("jax", "equinox"))
    print(f"python {platform.python_version()}, {versions}, {jax.device_count()} {jax.default_backend()} devices, "
          f"hidden {args.hidden}, {args.rounds} interleaved rounds")

    header = "| model | variant | median ms | min ms | speed-up (medians) | speed-up (paired) |\n|---|---|---|---|---|---|"
    surgery, replace_only, sharding = [header], [header], [header]
    mesh = make_mesh((jax.device_count(),), ("tp",))
    for layers in args.layers:
        model = Encoder(layers, args.hidden, key=jax.random.PRNGKey(0))
        leaves = len(jtu.tree_leaves(model))
        found = len(matches(model, TP_PLAN))
        label = f"{layers} layers, {leaves} leaves, {found} matches"
        variants = {
            "loop of eqx.tree_at": lambda: surgery_loop(model, TP_PLAN),
            "single eqx.tree_at": lambda: surgery_single(model, TP_PLAN),
            "tree_at_batched": lambda: surgery_batched(model, TP_PLAN),
            "apply_transforms": lambda: surgery_apply(model, TP_PLAN),
        }
        surgery += speedup_rows(label, measure(variants, args.rounds), digits=1)
        pairs = matches(model, TP_PLAN)
        getters, values = [g for g, _ in pairs], [v for _, v in pairs]
        variants = {
            "loop of eqx.tree_at": lambda: replace_loop(model, pairs),
            "single eqx.tree_at": lambda: eqx.tree_at(lambda m: [g(m) for g in getters], model, values),
            "tree_at_batched": lambda: tree_at_batched(model, pairs),
        }
        replace_only += speedup_rows(label, measure(variants, args.rounds), digits=1)
        print(f"{label}: tree surgery done", file=sys.stderr)
        if not args.skip_shard:
            arrays = sum(eqx.is_array(x) for x in jtu.tree_leaves(model))
            variants = {
                "tree_at + device_put per leaf": lambda: shard_tree_at_loop(model, mesh),
                "tree_map, device_put per leaf": lambda: shard_tree_map(model, mesh),
                "shard_module": lambda: shard_helper(model, mesh),
            }
            sharding += speedup_rows(f"{layers} layers, {arrays} arrays", measure(variants, args.rounds), digits=1)
            print(f"{label}: sharding done", file=sys.stderr)

    print("\nTree surgery from (model, plan): matching + transforms + replacement (speed-up over the loop)\n")
    print("\n".join(surgery))
    print("\nReplacement only, (getter, new node) pairs given (speed-up over the loop)\n")
    print("\n".join(replace_only))
    if not args.skip_shard:
        print(f"\nSharding on {jax.device_count()} devices, mesh {dict(mesh.shape)} (speed-up over the tree_at loop)\n")
        print("\n".join(sharding))


if __name__ == "__main__":
    main()
