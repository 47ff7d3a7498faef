"""Qualified names of the JAX-family APIs rules ask about, and how wrappers are spelled.

The names are data: `library.toml` beside this module, read once per process (`base_library`).
Users extend some of its sections from `[tool.jaxlint]` (`extend-jit-wrappers = [...]`); the
library in use while a file is summarised or linted is `active()`, set by `using(library)`.
The extensible tables (`JIT_WRAPPERS`, `TRANSFORMS`, `TRACING`, `BLOCKING`, `HOST_COPIES`) are
read from the active library on every access (module `__getattr__`), so code that asks
`name in _jaxapi.JIT_WRAPPERS` sees a user's wrappers; the other tables are constants.
"""

from __future__ import annotations

import fnmatch

import contextlib
import contextvars
import hashlib
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

import libcst as cst


if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


__all__ = [
    "is_array_op",
    "TRANSFORMS",
    "TRACING",
    "FILTER_JIT",
    "JIT_WRAPPERS",
    "PARTIAL",
    "PLAIN_DECORATORS",
    "TREE_AT",
    "decorator_target",
    "BLOCKING",
    "HOST_COPIES",
    "HOST_METHODS",
    "DISPLAY_METHODS",
    "HOST_BUILTINS",
    "AVERAGES",
    "LIGHT_ARRAY_OPS",
    "SETUP_ARRAY_OPS",
    "ARGUMENT_MODULES",
    "PASS_THROUGH",
    "CACHE_CLEARING",
    "STORING_METHODS",
    "is_tree_util",
    "is_host_consumer",
    "is_compiled_step",
    "is_solver_run",
    "is_host_copy",
    "IN_PLACE_JIT",
    "OPERATION_LOADERS",
    "BATCH_OPERATIONS",
    "DATA_LOADERS",
    "DATASET_MODULES",
    "LOADER_BATCH_SIZE_POSITIONS",
    "DATASET_SIZES",
    "TFDS_SIZES",
    "CHUNKERS",
    "BATCH_WRAPPERS",
    "EXTENSIBLE",
    "Library",
    "active",
    "base_library",
    "using",
]

LIBRARY_FILE = Path(__file__).with_name("library.toml")

# The sections of `library.toml` that `[tool.jaxlint]` may extend (`extend-<section>`).
EXTENSIBLE = ("jit-wrappers", "transforms", "tracing-calls", "blocking-calls", "host-copies", "per-step-methods")

# A dotted Python name: `mylib.compile`, `jax.jit`.
DOTTED_NAME = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")


@dataclass(frozen=True)
class Library:
    """The extensible sections of the library table, as one run uses them."""

    jit_wrappers: frozenset[str]
    transforms: frozenset[str]
    tracing_calls: frozenset[str]
    blocking_calls: frozenset[str]
    host_copies: frozenset[str]
    per_step_methods: frozenset[str] = frozenset()
    # The names users added (section -> names), empty for the shipped table.
    extensions: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # What the table changes in the facts and findings of a file: "" for the shipped table.
    digest: str = field(default="", compare=False)

    def extended(self, extensions: Mapping[str, Iterable[str]]) -> Library:
        """This library with the names of `extensions` (section -> names) added."""
        added = tuple(sorted((section, tuple(sorted(set(names)))) for section, names in extensions.items() if names))
        if not added:
            return self
        changes: dict[str, frozenset[str]] = {}
        for section, names in added:
            attribute = section.replace("-", "_")
            changes[attribute] = getattr(self, attribute) | frozenset(names)
        text = "\n".join(f"{section} {' '.join(names)}" for section, names in added)
        return replace(self, **changes, extensions=added, digest=hashlib.sha256(text.encode()).hexdigest()[:16])

    def per_step_method(self, method: str, bases: Iterable[str]) -> str | None:
        """The `per-step-methods` entry that makes `method` of a class with the ancestors
        `bases` (qualified names) one its framework calls over and over, or None."""
        for entry in sorted(self.per_step_methods):
            owner, _, name = entry.rpartition(".")
            if name != method:
                continue
            if owner.endswith(".*"):
                prefix = owner[:-1]
                if any(base.startswith(prefix) for base in bases):
                    return entry
            elif owner in bases:
                return entry
        return None

    @cached_property
    def tracing(self) -> frozenset[str]:
        """Every call that runs the function it is given under a trace."""
        return self.jit_wrappers | self.transforms | self.tracing_calls

    def mentioned_in(self, text: str) -> bool:
        """Whether `text` mentions the module of a name users added (a file that imports
        `mylib` for `mylib.compile` is JAX code, even if it names no JAX library)."""
        return any(names and any(name.split(".", 1)[0] in text for name in names) for _, names in self.extensions)


@lru_cache(maxsize=1)
def _table() -> dict[str, Any]:
    with LIBRARY_FILE.open("rb") as stream:
        return tomllib.load(stream)


def _names(section: str) -> frozenset[str]:
    return frozenset(_table()[section])


def _prefixes(section: str) -> tuple[str, ...]:
    return tuple(_table()[section])


@lru_cache(maxsize=1)
def base_library() -> Library:
    """The library as jaxlint ships it."""
    return Library(**{section.replace("-", "_"): _names(section) for section in EXTENSIBLE})


def api_name(api: str) -> str:
    """How a message names a jit API: `jax.jit` in full, the other shipped wrappers by their
    last part (`filter_jit`, `pmap`), and a wrapper the user's `extend-jit-wrappers` adds in
    full (`mylib.compile`: `compile` alone would not say whose)."""
    if api == "jax.jit" or api not in base_library().jit_wrappers:
        return api
    return api.rsplit(".", 1)[-1]


_ACTIVE: contextvars.ContextVar[Library | None] = contextvars.ContextVar("jaxlint_library", default=None)


def active() -> Library:
    """The library of the file being summarised or linted (`using`), else the shipped one."""
    return _ACTIVE.get() or base_library()


@contextlib.contextmanager
def using(library: Library | None) -> Iterator[None]:
    """Summarise and lint with `library` (None: the shipped one) in this block."""
    token = _ACTIVE.set(library)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


_ACTIVE_TABLES = {
    "JIT_WRAPPERS": "jit_wrappers",
    "TRANSFORMS": "transforms",
    "TRACING": "tracing",
    "BLOCKING": "blocking_calls",
    "HOST_COPIES": "host_copies",
}


def __getattr__(name: str) -> frozenset[str]:
    attribute = _ACTIVE_TABLES.get(name)
    if attribute is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(active(), attribute)  # type: ignore[no-any-return]


TREE_AT = _names("tree-at")
FILTER_JIT = _names("filter-jit")
IN_PLACE_JIT = _names("in-place-jit")
PARTIAL = _names("partial")
# Decorators after which a function's body still runs as plain Python when called.
PLAIN_DECORATORS = _names("plain-decorators")
# Flax Linen's Module class, as a base names it (`nn.Module` with `from flax import linen as nn`).
LINEN_MODULES = frozenset({"flax.linen.Module", "flax.linen.module.Module"})
HOST_METHODS = _names("host-methods")
DISPLAY_METHODS = _names("display-methods")
HOST_BUILTINS = _names("host-builtins")
# Means of a sequence of numbers (`np.mean(times)`): a figure per item.
AVERAGES = _names("averages")
# One pass over their inputs: reductions, stacking, elementwise arithmetic.
LIGHT_ARRAY_OPS = _names("light-array-ops")
# Constructors from a shape, ranges and random keys: set-up values, microseconds each.
SETUP_ARRAY_OPS = _names("setup-array-ops")
# Library Modules whose array leaves are only those of the arguments they are built from.
ARGUMENT_MODULES = _names("argument-modules")
# Pytree plumbing that neither computes on the device values it is given nor waits for them.
PASS_THROUGH = _names("pass-through")
# Calls that empty the compilation caches (`jax.clear_caches`).
CACHE_CLEARING = _names("cache-clearing")
# Methods of library containers (`queue.Queue.put`) that store a value without waiting for it.
STORING_METHODS = _names("storing-methods")
# Data loader -> the keyword that drops its ragged last batch.
DATA_LOADERS: Mapping[str, str] = dict(_table()["data-loaders"])
# Loader applying a list of operations -> the keyword holding it; batching operation -> the
# keyword that drops its ragged last batch; modules whose calls make a `.batch()`able dataset.
OPERATION_LOADERS: Mapping[str, str] = dict(_table()["operation-loaders"])
BATCH_OPERATIONS: Mapping[str, str] = dict(_table()["batch-operations"])
DATASET_MODULES = _prefixes("dataset-modules")
# Library dataset class -> split ("train"/"test", by its `train` flag) -> number of examples.
DATASET_SIZES: Mapping[str, Mapping[str, int]] = dict(_table()["dataset-sizes"])
# TensorFlow Datasets name -> split -> number of examples.
TFDS_SIZES: Mapping[str, Mapping[str, int]] = dict(_table()["tfds-sizes"])
# Data loader -> where it takes its batch size positionally, when not second.
LOADER_BATCH_SIZE_POSITIONS: Mapping[str, int] = dict(_table()["loader-batch-size-positions"])
# Calls cutting an iterable into groups of `n` items, the last shorter -> the position of `n`.
CHUNKERS: Mapping[str, int] = dict(_table()["chunkers"])
# Wrappers yielding the batches of the stream they are given first, unchanged in size.
BATCH_WRAPPERS = _names("batch-wrappers")
# Calls making a Hugging Face dataset, whose `.iter(batch_size=...)`/`.batch(...)` keep a smaller
# last batch unless `drop_last_batch=True`.
HF_DATASETS = _prefixes("hf-datasets")
_HOST_MODULES = _prefixes("host-copy-modules")
_ARRAY_MODULES = _prefixes("array-modules")
_ARRAY_FUNCTIONS = _names("array-functions")
_HOST_NUMPY_REEXPORTS = _names("not-array-functions")
_TREE_UTIL_MODULES = _prefixes("tree-util-modules")
_HOST_CONSUMERS = _prefixes("host-consumers")
_SOLVER_RUNS = _prefixes("solver-runs")
_COMPILED_STEPS = _prefixes("compiled-steps")


def is_host_copy(qualified_name: str) -> bool:
    """Whether calling `qualified_name` copies its array arguments to the host."""
    return qualified_name in active().host_copies or qualified_name.startswith(_HOST_MODULES)


def is_tree_util(qualified_name: str) -> bool:
    """Whether `qualified_name` is a pytree utility (`jax.tree.map`, `jax.tree_util.*`)."""
    return qualified_name.startswith(_TREE_UTIL_MODULES)


def is_array_op(qualified_name: str) -> bool:
    """Whether calling `qualified_name` runs (or builds) JAX array computations."""
    if qualified_name in _HOST_NUMPY_REEXPORTS:
        return False
    return qualified_name.startswith(_ARRAY_MODULES) or qualified_name in _ARRAY_FUNCTIONS


def decorator_target(
    expr: cst.BaseExpression, resolve: Callable[[cst.BaseExpression], str | None]
) -> str | None:
    """The API a decorator applies: `@jax.jit`, `@jax.jit(...)` and
    `@functools.partial(jax.jit, static_argnums=...)` all give `"jax.jit"`."""
    if isinstance(expr, cst.Call):
        func = resolve(expr.func)
        if func in PARTIAL:
            if expr.args and expr.args[0].keyword is None and not expr.args[0].star:
                return resolve(expr.args[0].value)
            return None
        return func
    return resolve(expr)


def is_solver_run(name: str) -> bool:
    """Whether calling `name` runs a whole solve, simulation or sampling run of many device
    steps (`diffrax.diffeqsolve`, `jaxopt.LBFGS.run`: the `solver-runs` table)."""
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in _SOLVER_RUNS)


def is_compiled_step(name: str) -> bool:
    """Whether calling `name` runs compiled device work the library jits itself: a whole
    solve (`is_solver_run`) or one step of one (`jaxopt.GradientDescent.update`: the
    `compiled-steps` table)."""
    return is_solver_run(name) or any(fnmatch.fnmatchcase(name, pattern) for pattern in _COMPILED_STEPS)


def is_host_consumer(name: str) -> bool:
    """Whether `name` is a function of a host library that computes with its arguments at once
    (`sklearn.datasets.make_moons`, `PIL.Image.fromarray`: the `host-consumers` table)."""
    return name.startswith(_HOST_CONSUMERS)
