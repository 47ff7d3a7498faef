"""Qualified names of the JAX-family APIs rules ask about, and how wrappers are spelled."""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst


__all__ = [
    "is_array_op",
    "TRANSFORMS",
    "FILTER_JIT",
    "JIT_WRAPPERS",
    "PARTIAL",
    "TREE_AT",
    "decorator_target",
    "BLOCKING",
    "HOST_COPIES",
    "HOST_METHODS",
    "HOST_BUILTINS",
    "is_tree_util",
    "is_host_copy",
    "IN_PLACE_JIT",
]

TREE_AT = frozenset({"equinox.tree_at"})

FILTER_JIT = frozenset({"equinox.filter_jit"})

# Everything that compiles the function it wraps; `jaxlint` treats a function wrapped by any
# of these as jitted.
JIT_WRAPPERS = frozenset(
    {
        "jax.jit",
        "jax.pjit",
        "jax.experimental.pjit.pjit",
        "jax.pmap",
        "equinox.filter_jit",
        "equinox.filter_pmap",
        "jaxlint.runtime.filter_jit",
        "flax.nnx.jit",
        "flax.linen.jit",
    }
)

# Jit wrappers whose functions update the objects they are given in place (Flax NNX modules
# and optimizers), so their results live in their arguments rather than their return value.
IN_PLACE_JIT = frozenset({"flax.nnx.jit"})

PARTIAL = frozenset({"functools.partial"})

# Modules whose functions operate on arrays and so dispatch device work when called eagerly.
_ARRAY_MODULES = (
    "jax.numpy.",
    "jax.lax.",
    "jax.nn.",
    "jax.random.",
    "jax.scipy.",
    "jax.image.",
    "jax.ops.",
    "jax.experimental.sparse.",
)
# Top-level `jax.*` functions that run array computations.
_ARRAY_FUNCTIONS = frozenset({"jax.device_put"})

# Transformations: `jax.vmap(f)` only builds a function; calling that (`jax.vmap(f)(x)`)
# runs it eagerly.
TRANSFORMS = frozenset(
    {
        "jax.vmap",
        "jax.grad",
        "jax.value_and_grad",
        "jax.jacfwd",
        "jax.jacrev",
        "jax.hessian",
        "equinox.filter_vmap",
        "equinox.filter_grad",
        "equinox.filter_value_and_grad",
    }
)


# Calls that wait for device work to finish (whatever their argument).
BLOCKING = frozenset({"jax.block_until_ready", "jax.effects_barrier"})
# Calls that copy device arrays to the host, so they wait for the arrays they are given.
HOST_COPIES = frozenset(
    {
        "jax.device_get",
        "numpy.asarray",
        "numpy.array",
        "numpy.asanyarray",
        "numpy.ascontiguousarray",
        "numpy.copy",
    }
)
_HOST_MODULES = ("numpy.testing.",)
# Methods of `jax.Array` that copy it to the host (or wait for it).
HOST_METHODS = frozenset({"item", "tolist", "__array__", "block_until_ready"})
# Builtins that convert an array to a host value (`float(x)`, `print(x)`, `f"{x}"`...).
HOST_BUILTINS = frozenset({"float", "int", "bool", "complex", "print", "str", "repr", "format"})


def is_host_copy(qualified_name: str) -> bool:
    """Whether calling `qualified_name` copies its array arguments to the host."""
    return qualified_name in HOST_COPIES or qualified_name.startswith(_HOST_MODULES)


def is_tree_util(qualified_name: str) -> bool:
    """Whether `qualified_name` is a pytree utility (`jax.tree.map`, `jax.tree_util.*`)."""
    return qualified_name.startswith(("jax.tree.", "jax.tree_util."))


# `jax.numpy` names that are NumPy's own functions (`jnp.savez is np.savez`): host code,
# no device work.
_HOST_NUMPY_REEXPORTS = frozenset(
    {"jax.numpy.save", "jax.numpy.savez", "jax.numpy.array_repr", "jax.numpy.array_str", "jax.numpy.can_cast", "jax.numpy.iterable"}
)


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
