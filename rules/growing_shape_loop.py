"""## What it does

Finds an array that grows inside a loop and is passed to a jitted function in the same loop:
`x = jnp.concatenate([x, t], axis=1)`, `jnp.append(x, t)`, `x = np.hstack([x, t])`, a list
that gains an item per iteration (`tokens.append(t)` then `f(jnp.array(tokens))`), a slice
whose length follows the loop index (`f(ids[:, :i])`), or an array the jitted step itself
returns longer and the loop feeds back (`x, key = step(x, key)` where `step` returns
`jnp.concatenate([x, token])`). The jitted function may also be reached through a function of
the file that hands the array on unchanged (`self.fit(X, y)` where `fit` calls the jitted
`normalize(X, y)`), or be a method of an object built from jitted callables alone (`model =
compiled(pair)` where `compiled` returns `type(pair)(jax.jit(pair.init), jax.jit(pair.apply))`,
in the file or in another module of the project).

## Why is this bad?

A jitted function is compiled once per input shape. An input that is one token longer on
every step is a new shape on every step, so the function is traced and compiled again each
time, and the cache keeps every version. Seed report 003 measured a greedy decode loop at
4.2 tokens/s that ran at 24.5 tokens/s once the shapes were compiled; on CPU, 24 decode steps
compiled 24 times where a fixed-size buffer compiled once (1358 ms vs 58 ms,
`../shared/research/jax-facts.md` §6).

## Example

```python
@jax.jit
def decode_step(params, tokens):
    return tokens.astype(jnp.float32) @ params

tokens = prompt
for _ in range(max_new_tokens):
    logits = decode_step(params, tokens)
    next_token = jnp.argmax(logits[:, -1], axis=-1)
    tokens = jnp.concatenate([tokens, next_token[:, None]], axis=1)
```

Use instead:

```python
@jax.jit
def decode_step(params, tokens, pos):
    return tokens.astype(jnp.float32) @ params  # a real model masks positions >= pos

tokens = jnp.zeros((batch, max_len), jnp.int32)
tokens = jax.lax.dynamic_update_slice(tokens, prompt, (0, 0))
for pos in range(prompt_len, max_len):
    logits = decode_step(params, tokens, pos)  # attends to positions < pos only
    next_token = jnp.argmax(logits[:, pos - 1], axis=-1)
    tokens = tokens.at[:, pos].set(next_token)
```

Pass the position as an array (or a traced int) so that it does not become a static
argument; with variable lengths that cannot share one buffer, pad each to
`jaxlint.runtime.bucket(n)` with `jaxlint.runtime.pad_to` so that only a few shapes compile.

The rule stays silent when only a fixed-size part of the growing array is passed
(`f(tokens[:, -1:])`, as KV-cache decoding does), when the array is padded before the call
(a call whose name mentions `pad` or `bucket`), when the loop runs inside jitted code (it is
unrolled at trace time), for functions that are not jitted, and when the loop is known to run
a few times (four rounds or fewer, once per epoch or seed, over a dict's entries): a few
compiles paid once, like set-up.

## Fix safety

No automatic fix: a fixed buffer changes what the function sees (padding positions it must
mask, a position argument), which needs the function's cooperation.

There is no fix, so `runtime-helpers` in `[tool.jaxlint]` changes nothing here.

## Runtime helper

`jaxlint.runtime.bucket(n, minimum=16, buckets=None)` and `jaxlint.runtime.pad_to(x, length,
axis=-1)`: on CPU, 64 random lengths compiled 54 times at exact length and 5 times bucketed;
`python bench/data_loops.py`: 24 greedy steps compiled the step 24 times growing, once with
a fixed buffer and 3 times bucketed (cold: 5.4 s, 0.42 s, 0.39 s on CPU).

## References

- Flax's decoding cache (`decode=True`): fixed-size `cached_key`/`cached_value` updated with
  `lax.dynamic_update_slice` at `cache_index`.
- `../shared/research/jax-facts.md` §6 (padding and bucketing), §9.
"""

from __future__ import annotations

import libcst as cst

from jaxlint._callgraph import counts_few_things
from jaxlint._frequency import iteration_count, loop_evidence
from jaxlint._nodes import one_line, shorten
from jaxlint._rule import Rule

from ._shapes import growth, loop_path as _loop_path


__all__ = ["GrowingShapeLoop"]



class GrowingShapeLoop(Rule):
    CODE = "JL008"
    SLUG = "growing-shape-loop"
    MESSAGE = "an array that grows in a loop is passed to a jitted function: one compile per iteration"
    TOKENS = ("jit",)

    def visit_Call(self, node: cst.Call) -> None:
        ctx = self.ctx
        found = ctx.device.looped_consumer(node)
        if found is not None:
            callee = shorten(one_line(node.func, ctx.module))
            passed = [(arg.value, f"is passed to the jitted `{callee}`") for arg in node.args]
            loops = found[1]
        else:
            # A function of this file that hands the argument on to a jitted one, unchanged:
            # the jitted callable compiles for whatever shape this call gives it.
            forwarded = ctx.device.looped_forwards(node)
            if forwarded is None:
                return
            callee = shorten(one_line(node.func, ctx.module))
            passed = [
                (f.argument, f"is passed to `{callee}`, which hands it to the jitted "
                 f"`{shorten(' '.join(f.inner.split()))}`")
                for f in forwarded[0]
            ]  # fmt: skip
            loops = forwarded[1]
        for value, where in passed:
            for loop in reversed(loops):
                found = growth(ctx, value, loop, _loop_path(ctx, loop))
                if found is not None:
                    if _few_shapes(ctx, loop):
                        return
                    what, how = found
                    self.report(
                        node,
                        evidence=[f"the call {loop_evidence(ctx, loop, ctx.path_to(node))}"],
                        message=f"`{what}` {how} and {where}: every new shape traces and compiles "
                        "it again (one compile per iteration); write into a preallocated buffer with "
                        "`.at[pos].set(...)` / `lax.dynamic_update_slice` and pass the position, "
                        "or pad to a few lengths with `jaxlint.runtime.bucket` and `pad_to`",
                    )
                    return


# A loop known to run at most this many times gives a jitted function at most this many
# new shapes: a few compiles, paid once, like set-up (a warm-up of four rounds). A compile
# costs far more than a step, so a few more than this already count (`steps=6` of a decode).
_FEW_SHAPES = 4


def _few_shapes(ctx, loop) -> bool:  # type: ignore[no-untyped-def]
    """Whether the engine knows the growing loop runs few times: once per epoch, seed or
    configuration (`counts_few_things`), or a count of `_FEW_SHAPES` or less (`range(4)`,
    `range(options["n_iter"])` with `"n_iter": 4`, a dict literal's entries)."""
    if counts_few_things(loop):
        return True
    count = iteration_count(ctx, loop, _loop_path(ctx, loop))
    return count is not None and count <= _FEW_SHAPES
