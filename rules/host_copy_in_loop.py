"""## What it does

Finds a device value copied to the host on every iteration of a loop that also sends work to
the device: `np.array(x)`, `np.asarray(x)`, `x.item()`, `float(x)`, `int(x)`, `x.tolist()`,
`jax.device_get(x)`, `print(x)` / an f-string of `x` (or `"{}".format(x)`, `"%f" % x`, a
progress bar's `bar.set_postfix(loss=x)` or `set_description`, which turn it into text at once:
`library.toml`'s `display-methods`), or a NumPy function given `x`
(`np.sum(x)`, `np.argmax(x, -1)`, `np.linalg.norm(x)`: NumPy converts its argument to a NumPy
array first), where `x` was just computed on the device (by a jitted function, a `jnp` op, a
`model.apply`, or by indexing such a result). NumPy functions that read only metadata or
build from a shape (`np.prod(x.shape)`, `np.dtype`, `np.zeros(n)`, `np.zeros_like`) and
`np.random.*` are not copies. A print or f-string of `x`, or of a copy made only to be shown
(`f"{x.tolist()}"`, `print(float(x))`), counts only in a loop that runs compiled or model code
on each iteration (a jitted step, `model.apply`, a function of the file returning device
values): one that only indexes an array made before it, or runs a few eager ops, has no
compiled work for the print to hold up.

## Why is this bad?

JAX dispatches device work asynchronously: a jitted call returns at once and the device works
while Python moves on. A host copy waits until the value is computed, then copies it, so a
copy inside the loop stops the loop on every iteration: the device idles while Python copies,
and Python idles while the device computes; on an accelerator each copy is a separate
device-to-host transfer. Seed report 001 found such a loop (`np.array(activations[layer][i])`
per sample and layer) in a TPU extraction job. Collecting on the device and copying once
after the loop lets the device run ahead and the copies overlap. On CPU, where "device"
buffers already live in host memory, the gain is smaller (`python bench/data_loops.py`, 128
jitted calls): collecting and one `to_host()` after the loop was 1.2x (matmul layer) to 1.6x
(elementwise layer) faster than `np.asarray` in the loop; against `np.array` in the loop,
collecting and `to_host(copy=True)` was 0.9x, because 128 live results need fresh buffers
where the loop reused one. The stall this rule removes is an accelerator cost; no
accelerator was available to measure it.

## Example

```python
@jax.jit
def step(params, batch):
    return jnp.tanh(batch @ params)

outputs = []
for batch in batches:
    out = step(params, batch)
    outputs.append(np.asarray(out))
```

Use instead:

```python
@jax.jit
def step(params, batch):
    return jnp.tanh(batch @ params)

outputs = []
for batch in batches:
    out = step(params, batch)
    outputs.append(out)
outputs[:] = jaxlint.runtime.to_host(outputs)
```

The rule stays silent for copies after the loop, under a guard that depends on the
iteration (`if step % 100 == 0:`; a loop under the guard that runs compiled or model code on
each of its own iterations, an eval loop over a test set, is still judged) or on the wall
clock (`if time.time() - last > 5:` whose body sets `last = time.time()` again: it runs once
every few seconds however fast the loop goes; not `if time.time() - start > warmup:`, which
holds on every iteration once it holds), for items a test picks out of a loop whose length
the code does not show (`for event in pygame.event.get(): if event.key == K_p:`: how many
pass on each iteration of the loop around it, nothing says), under a flag that is off unless somebody asks (`if verbose:` where `verbose=False` is the
parameter's default and no call in the file sets it, or a configuration field declared False),
in a condition that decides what the loop does next
(`if float(loss) < best:`, `while float(err) > tol:`, `if any(isnan(float(m)) for m in means):`),
also through the names the following statements of the iteration compute from the copy
(`dx = float(d)`, `drift += dx`, `score = a * drift`, `if score < eps:`; not past a statement
that can `continue`, `break` or `return`: a sum tested only on some iterations could stay on
the device until then),
for a value a host library computes with at once (`make_moons(random_state=int(seed))`, a
simulator state stored into the object `mujoco.mj_forward` is given, an image for
`PIL.Image.fromarray`: `library.toml`'s `host-consumers`, and the methods of an object one
made: `env = gym.make(name)`, then `env.step(action)`, also in a function every call of
which passes such an object for its parameter (`def rollout(params, env)`, called as
`rollout(p, env)`); `es = cma.CMAEvolutionStrategy(...)`, then
`es.tell(solutions, np.array(scores))`; also what the loop computes from the copy:
`log_probs = jax.device_get(out)`, `probs = np.exp(log_probs)`, then an action drawn on the
host with `np.random.choice(n, p=probs[i])`),
for a copy between two reads of a clock started in the same block (`t0 = time.perf_counter()`,
the jitted call, `v = float(out[0])`, then at once `t1 = time.perf_counter()`): the wait a
timing needs (unsynced-timing asks for one), which the loop pays on every iteration anyway;
a throughput read from a clock started before the loop is no such wait,
in a loop that waits for the device on every iteration anyway because it needs one fresh
value at once (an index `log_probs[int(action)]`, `env.step(int(action))` whose result the
next iteration uses, an `if` on a device value, `eqx.filter_jit` calls, a host library given
this iteration's device results or what a call made of them: `frame = env.render(state)`
then `Image.fromarray(frame)`, a `gym` environment stepped with the action the policy just
computed, `env.step(jnp.clip(act(params, obs), -1, 1))`; a function or method of the file
or of another module of the project called on every iteration that copies a device value it
computes itself and needs it at once, a batch sampler drawing its offsets with `jax.random`
and slicing NumPy data with them, or that returns such a copy the loop needs, an agent's
`act` returning `int(jnp.argmax(q))` for a `gym` environment: JAX runs device work in order,
so that copy waits for the step dispatched before it, `_project.samples_on_host`): the
other copies beside that wait cost a copy, not a stall;
once per iteration of a loop that runs an inner loop of device work, in its body or in a
function of the file it calls, or a method of an instance of a class of the file
(`model.train(data)` per active-learning round; a training run or an evaluation over a data
set per round: `ctx.device.runs_work_loop`; not a loop over a model's layers, nor a jitted function's
loop, which is one compiled program), or a chunk of steps as one `lax.scan` over no data
(`lax.scan(train_step, carry, None, length=log_interval)`: a copy per chunk is periodic
logging already; not a scan over each batch's sequence, nor one of a few steps); of values computed before the loop
(after the first copy jax keeps the host copy), of NumPy values, in loops that send no work
to the device, in loops whose only device work is the few array ops inside the copy itself
(`stats.append(jnp.max(batch).item())` over batches already made: nothing else is in flight
for the copy to hold up; not a compiled call, a model or a function of the file inside the
copy, nor a slice per item of a device array made before the loop, which one copy before the
loop would replace: `ctx.device.works_besides`), in loops whose device work is eager ops only
(no jitted function, `lax` loop or model's forward, no call of a Module or given one, no
library call that jits its own work such as a jaxopt solver's `update`:
`ctx.device.loop_computes`; a toy regression's unjitted `grad` step, a simulation stepped
with `jnp` ops, slices of a result finished before the loop copied item by item): Python
dispatches eager ops one by one and the device keeps up, so a copy waits for the last op, not
for a step queued behind it (missing-jit reports the eager work; jitted, the copy is
reported), and inside jitted or otherwise traced code. It also stays silent for a list of
Python values built to be used where Python values are needed right after
(`sizes = [int(n[i]) for i in range(dim)]`, then `jnp.arange(-s, s + 1)` for each, or
`jnp.zeros(sizes)`), in loops whose header says they run few times (`range(16)`,
`jnp.array([0.1, 0.5, 0.9])`, `range(1, maxiter + 1)` with `maxiter = 12` assigned in the
function or the module, `enumerate(prompts)` or `range(len(prompts))` over a literal list of a
few prompts to verify: `_frequency.loop_runs(calls=True)`), in loops that sleep on every iteration (a live display fed
at a steady pace: the device finishes while the host sleeps, so waiting for it costs nothing
more), in loops that do not show they run over data or steps (a caller's
`prompts`, `self.l2_regs`, the rows of an array: `_frequency.streams`; a `range` of a count,
a loader, a dataset or a progress bar shows it), and for results of functions behind a decorator it
does not know (`@utils.jit_cpu()`: the decorator may place or convert them), which are not
known device values.

## Fix safety

The fix is offered when the copied values are only collected: the copy is the argument of
`results.append(...)`, `results` starts as `[]` before the loop (also `losses, errors = [],
[]`, and also a list made afresh per epoch for the loop inside it) and the loop reads it
nowhere else, or the copy is the element of a list comprehension. An entry of a dict of lists
counts as such a list (`history["loss"].append(float(loss))`, `history` made before the loop as
`{"loss": [], ...}` or `defaultdict(list)`, the loop reading that entry nowhere else; other
entries it may read): after the loop the entry is converted in place, under `if "loss" in
history:` for a `defaultdict`, which would otherwise gain an entry the loop never made. The device values are appended
instead, and one `jaxlint.runtime.to_host` after the loop copies them all (`copy=True` for
`np.array`, which returns writable copies; `.item()`, `float()`, `int()`, `.tolist()` are
applied to the host arrays afterwards, so the list holds the same Python values). The list
keeps its identity (`results[:] = ...`). The fix is **unsafe**: every collected value stays
in device memory until the loop ends, which can exhaust an accelerator's memory when the
results are large (stream them with `jaxlint.runtime.prefetch_to_host` instead); while the
loop runs, the list holds device arrays; and an exception in the loop leaves the collected
values unconverted. There is no fix when the loop can `return`, `yield`, or donate the
buffers it collects.

A copy made only to be shown or logged, in a statement of the loop's own body that calls
`print`, a logger (`log.info(...)`, `logging.*`, `absl.logging.*`), a summary writer
(`writer.add_scalar(...)`, `write_scalars`), `wandb.*`, `mlflow.*` or a progress bar's
`set_postfix`/`set_description`, is fixed by running that statement one iteration late:
`later = jaxlint.runtime.one_step_late()` before the loop, the statement handed to it as
`later(lambda loss=loss, step=step: writer.add_scalar("loss", loss.item(), step))` (the
names the loop rebinds are bound where the call is made), and `later.flush()` after the
loop for the last iteration. Step `i`'s line then waits for step `i` after step `i + 1` has
been dispatched, so the device is never idle for it. It is **unsafe**: each line appears
one iteration later than before, after whatever the next iteration prints first; a value
the loop changes in place (a dict of metrics updated item by item, an attribute such as
`self.step`) is read when the line runs, not when it was handed over; and a loop left by
an exception that nothing catches logs its last line only when `flush` runs (put the loop
in `with jaxlint.runtime.one_step_late() as later:` to flush on the way out). There is no
such fix under an `if`, in a loop that can `return` or `yield` (the flush after it might not
run), or for any other call (`out.write(...)` to a file the loop also writes to elsewhere).

A running sum is fixed too: `total += float(loss)` (or `total += loss.item()` where `total`
starts as a float literal such as `0.0`), `total` set to a number before the loop and read
nowhere else in it, becomes `total += loss`, summed on the device, and `total =
float(total)` after the loop. Also **unsafe**: the sum is taken in the values' own precision
(float32, or bfloat16 for bfloat16 values) rather than in Python's float64, so a long sum
rounds differently; while the loop runs `total` is a device array; and an exception in the
loop leaves it one. `int()` terms get no fix (each is truncated before the sum), nor does
`.item()` added to an integer start (an integer array's sum would become a float).

With `runtime-helpers = false` in `[tool.jaxlint]` (fixes may not import `jaxlint.runtime`)
collected copies get no fix: the copy after the loop is `jaxlint.runtime.to_host`. The
finding is still reported. The running-sum fix needs no helper and stays.

## Runtime helper

`jaxlint.runtime.to_host(tree, copy=False)` starts every copy, then waits once;
`jaxlint.runtime.prefetch_to_host(iterable, size=2)` streams results to the host with
copies started ahead, for loops that must hand each result on as they go;
`jaxlint.runtime.one_step_late()` runs each logging call handed to it one iteration later,
each line of the loop keeping its own (`flush()` runs the last ones).

## References

- JAX, asynchronous dispatch: https://docs.jax.dev/en/latest/async_dispatch.html
- `../shared/research/jax-facts.md` §4-5 (which conversions block), §9 (async dispatch).
"""

from __future__ import annotations

import libcst as cst

from jaxlint._guards import periodic, thinning_guard
from jaxlint._frequency import Often, loop_evidence, loop_runs, off_by_default
from jaxlint._context import Loop
from jaxlint._device import HostCopy
from jaxlint._jaxapi import DISPLAY_METHODS, FILTER_JIT
from jaxlint._waits import hands_host_own_value
from jaxlint._host_needs import (
    carried,
    decided_on,
    ends_timing,
    feeds_host_library,
    needed_now,
    passed_to_host_library,
    statement_of,
    tested_every_round,
)
from jaxlint._nodes import comp_fors, contains_exit, free_names, iter_subtree, reads_name
from jaxlint._scope import target_names
from jaxlint._walk import path_below, walk_with_paths

from ._shapes import loop_path as _loop_path
from jaxlint._rule import Applicability, Edit, Fix, ImportSpec, Rule, unused_name


__all__ = ["HostCopyInLoop"]

_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)
# Copy kind -> the conversion applied to each host array after the loop (None: `to_host` alone).
_AFTER = {
    "np.asarray": None,
    "np.asanyarray": None,
    "jax.device_get": None,
    "np.array": "copy",
    "np.copy": "copy",
    "np.ascontiguousarray": "copy",
    ".item()": "{}.item()",
    ".tolist()": "{}.tolist()",
    "float()": "float({})",
    "int()": "int({})",
    "bool()": "bool({})",
    "complex()": "complex({})",
}


class HostCopyInLoop(Rule):
    CODE = "JL005"
    SLUG = "host-copy-in-loop"
    MESSAGE = "a device value is copied to the host on every loop iteration"
    FIX = Applicability.UNSAFE
    TOKENS = ("jax", "jnp", "flax", "equinox", "haiku")

    def __init__(self, ctx, options=None) -> None:  # type: ignore[no-untyped-def]
        super().__init__(ctx, options)
        self._must_wait: dict[int, bool] = {}

    def visit_Call(self, node: cst.Call) -> None:
        device = self.ctx.device
        copy = device.host_copy(node)
        if copy is None:
            return
        values = list(copy.shown) or [copy.value]
        display = copy.kind in _DISPLAY
        if not display and (needed_now(self.ctx, node) or _discarded(self.ctx.ancestors, node)):
            return
        if ends_timing(self.ctx, self.ctx.path_to(node)):
            return  # `float(out[0])`, then `time.perf_counter()`: the wait a timing needs
        for value in values:
            if _formats_text(value):
                continue  # an f-string, `"%.3f" % x` or `"{}".format(x)`: checked on its own
            # `print(f"{loss.item():.4f}")` shows the value as `print(loss)` would: judged as a display
            loop = self._repeating_loop(node, value, display=display or _shown(self.ctx.ancestors, node))
            if loop is not None:
                self._report(node, copy, value, loop)
                return

    def visit_FormattedStringExpression(self, node: cst.FormattedStringExpression) -> None:
        if ends_timing(self.ctx, self.ctx.path_to(node)):
            return  # formatted into a progress bar, then `total += time() - t0`: the timing's wait
        self._report_formatted(node, [node.expression], "in an f-string")

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        # `"loss %.3f" % loss`: %-formatting converts each value, as an f-string does
        if not _formats_text(node):
            return
        if ends_timing(self.ctx, self.ctx.path_to(node)):
            return
        right = node.right
        values = [e.value for e in right.elements if not isinstance(e, cst.StarredElement)] if isinstance(right, cst.Tuple) else [right]
        self._report_formatted(node, values, "with `%`")

    def _report_formatted(self, node: cst.CSTNode, values: list[cst.BaseExpression], how: str) -> None:
        """Report the first of `values` that text formatted at `node` copies on every
        iteration of a loop running compiled work (`how`: where it is formatted)."""
        for value in values:
            loop = self._repeating_loop(node, value, display=True)
            if loop is not None:
                text = self.ctx.module.code_for_node(value)
                self.report(
                    node,
                    f"formatting `{_short(text)}` {how} {_DISPLAY_ADVICE}",
                    fix=self._later_fix(node, loop),
                    evidence=self._why(node, loop),
                )
                return

    # -- when it is a finding -----------------------------------------------------------------

    def _repeating_loop(self, node: cst.CSTNode, value: cst.BaseExpression, *, display: bool = False) -> Loop | None:
        """The innermost loop that runs `node` on every iteration, sends device work, and
        produces `value` afresh each time; None when there is none, or `node` is excused.
        For `display` (print, f-strings), the loop must run compiled or model code."""
        ctx = self.ctx
        loops = ctx.loops(node)
        if not loops:
            return None
        path = ctx.path_to(node)
        value_path = path_below(path, value)
        if value_path is None or not ctx.device.holds(value, value_path):
            return None
        if ctx.device.is_traced(ctx.ancestors) or ctx.device.in_test(path):
            return None
        if off_by_default(ctx, path):
            return None  # `if verbose:` with `verbose=False`: runs only when somebody asks
        if _handed_late(ctx, path):
            return None  # runs one iteration late, after the next step is dispatched
        # Innermost loop first: a guard (`if step % 100 == 0:`) excuses the copy for the loops
        # around it (`_excused`), not for a loop under it (an eval loop run when it fires).
        for loop in reversed(loops):
            loop_path = path[: _index(path, loop)]
            often = loop_runs(ctx, loop, loop_path, calls=True).often
            if often is not Often.MANY:
                # A few times, or a number the code does not show, per iteration of a loop
                # around it, if any. Under a test of the items of a loop whose length the code
                # does not show (`for event in pygame.event.get(): if event.key == K_p:`), it
                # runs for the items that pass, and how many do on each iteration of a loop
                # around it nothing says: zero on most, for events.
                if often is Often.UNKNOWN and _selects_items(path, loop):
                    return None
                continue
            if self._excused(node, loop, path) or tested_every_round(loop, value):
                return None
            inner = loops[loops.index(loop) + 1 :]
            # Under such a guard only a loop that runs compiled or model code per iteration (an
            # eval loop over a test set) counts; one summarising finished results does not.
            calls_only = display or _occasional(ctx, path, loops, loop)
            if _fresh(ctx, value, value_path, loop, inner) and ctx.device.loop_dispatches(loop, loop_path, calls_only=calls_only):
                if not display and self._only_own_work(node, path, loop, loop_path):
                    continue  # `float(jnp.max(batch))` per item: nothing else for the device to do
                if not ctx.device.loop_computes(loop, loop_path):
                    continue  # eager ops only: Python dispatch bounds the loop, not the device
                if self._waits_anyway(loop, loop_path) or ctx.device.amortized(loop, loop_path, path):
                    return None
                if self._logs_results(node, value, value_path, loop, loop_path) or _copied_before(ctx, node, value, loop, loop_path):
                    return None
                return loop
        return None

    def _only_own_work(self, node: cst.CSTNode, path: list[cst.CSTNode], loop: Loop, loop_path: list[cst.CSTNode]) -> bool:
        """Whether the only device work of each iteration of `loop` is the eager ops inside the
        copy `node` itself (`stats.append(float(jnp.max(batch)))`, `np.array(samples[i])`):
        no compiled call or model in it, nothing dispatched beside it. The copy waits for its
        own few ops only; there is no other work in flight for it to hold up (a loop around
        this one may still have some)."""
        ctx = self.ctx
        if ctx.device.works_besides(loop, loop_path, node):
            return False
        for inner, inner_path in walk_with_paths(node, path):
            if isinstance(inner, cst.Name) and inner.value not in ctx.loop_bindings(loop) and ctx.device.holds(inner, inner_path):
                return False  # `int(totals[i])` per item: one copy of `totals` before the loop would do
            if isinstance(inner, cst.Call) and inner is not node:
                # only array ops of jax and NumPy, and methods of arrays (`x.sum()`): a
                # function of the file or a model may hide a whole forward pass
                name = ctx.resolve(inner.func, inner_path, anchor=inner)
                if name is None:
                    if not isinstance(inner.func, cst.Attribute) or ctx.device.runs_compiled(inner, inner_path, models=True):
                        return False
                    if ctx.device.host_copy(inner, inner_path) is None and not _array_method(inner):
                        return False
                elif not name.startswith(("jax.numpy.", "jax.lax.", "jax.random.", "jax.nn.", "numpy.")):
                    return False
        return True

    def _why(self, node: cst.CSTNode, loop: Loop) -> list[str]:
        return [loop_evidence(self.ctx, loop, self.ctx.path_to(node))]

    def _logs_results(
        self, node: cst.CSTNode, value: cst.BaseExpression, value_path: list[cst.CSTNode], loop: Loop, loop_path: list[cst.CSTNode]
    ) -> bool:
        """`for k, v in metrics.items(): history[k].append(float(jnp.mean(v)))`: a loop over
        a dict of results whose only device work is the eager op inside the copy itself (no
        compiled call, no slicing of a device array): summarising results already computed,
        not a loop that keeps the device busy."""
        if not isinstance(loop, cst.For):
            return False
        source = loop.iter
        if not (
            isinstance(source, cst.Call)
            and isinstance(source.func, cst.Attribute)
            and source.func.attr.value in ("items", "values")
            and not source.args
        ):
            return False
        device = self.ctx.device
        for inner, inner_path in walk_with_paths(loop.body, [*loop_path, loop]):
            if inner is node or any(p is node for p in inner_path):
                continue
            if device.dispatches_here(inner, inner_path):
                return False
        for inner, inner_path in walk_with_paths(value, value_path):
            if isinstance(inner, cst.Call) and device._compiled_call(inner, tuple(inner_path)):
                return False
            if isinstance(inner, cst.Subscript) and device.dispatches_here(inner, inner_path):
                return False
        return True

    def _waits_anyway(self, loop: Loop, loop_path: list[cst.CSTNode]) -> bool:
        """Whether the loop waits for the device on every iteration regardless, so other
        copies in it cost a copy, not a stall: it tests a fresh device value to decide what
        to do (`if float(loss) < tol: break`, `while not done:`), it calls an
        `eqx.filter_jit` function, which blocks until its results are ready, or a function
        that copies a device value it computes itself and needs it (`hands_host_own_value`)."""
        cached = self._must_wait.get(id(loop))
        if cached is not None:
            return cached
        self._must_wait[id(loop)] = False
        device = self.ctx.device
        found = False
        if isinstance(loop, cst.While) and _converts(self.ctx, loop.test, [*loop_path, loop], loop):
            found = True
        for node, path in walk_with_paths(loop, loop_path) if not found else ():
            full = [*path, node]
            if isinstance(node, cst.Call):
                if feeds_host_library(self.ctx, node, full) and not self._guarded(full, loop):
                    if self._hands_device_results(node, full, loop):
                        found = True  # `Image.fromarray(env.render(state))`: the host reads the state now
                        break
                consumer = device.consumer(node, path)
                if consumer is not None and consumer.api in FILTER_JIT and not self._guarded(full, loop):
                    found = True
                    break
                if _blocks(self.ctx, node, path) and not self._guarded(full, loop):
                    found = True  # `jax.block_until_ready(out)`: a benchmark's deliberate wait
                    break
                samples, returns = hands_host_own_value(self.ctx, node, path) if not self._guarded(full, loop) else (False, False)
                if samples or (returns and needed_now(self.ctx, node, full)):
                    found = True  # `x, y = get_batch(key, data)` slicing host data at offsets drawn on the device
                    break
                copy = device.host_copy(node, path)
                if copy is None or copy.kind in _DISPLAY:
                    continue
                value_path = path_below(full, copy.value)
                if value_path is None or not device.holds(copy.value, value_path):
                    continue
                if self._guarded(full, loop) or not _fresh(self.ctx, copy.value, value_path, loop):
                    continue
                if _only_items(copy.value, loop):
                    continue  # `int(angle)` for `angle in angles`: waits for a slice, not the loop's work
                if ends_timing(self.ctx, full):
                    found = True  # `float(out[0])`, then `time.perf_counter()`: the loop waits to time it
                    break
                # A copy the loop needs at once (it decides what to do next, feeds the next
                # iteration, or is a Python value a call needs now: `env.step(int(action))`)
                # waits on every iteration whatever the other copies do. An array copied and
                # handed back to compiled code (`apply(np.expand_dims(obs, 0))`) is a round
                # trip, not a need: only Python values count there.
                if copy.kind in _SCALAR_COPIES:
                    needs = needed_now(self.ctx, node, full) or self._excused(node, loop, full)
                else:
                    needs = _tested_here(full, loop) or passed_to_host_library(self.ctx, full) or _decided_through_names(full, loop)
                if needs:
                    found = True
                    break
            elif isinstance(node, (cst.If, cst.CompIf)) and node is not loop and not self._guarded(full, loop):
                if not _only_items(node.test, loop) and _converts(self.ctx, node.test, full, loop):
                    found = True
                    break
        self._must_wait[id(loop)] = found
        return found

    def _hands_device_results(self, call: cst.Call, path: list[cst.CSTNode], loop: Loop) -> bool:
        """Whether `call` (a host library's, on `path`, which ends with it) is given a fresh
        device value, or a name the loop binds to what a call given one returns (`img =
        env.render(state)`, then `Image.fromarray(img)`): the host library computes with it
        at once, so either the call read the device value on the host or its result is
        copied now; the iteration waits for the device whatever else it does."""
        device = self.ctx.device
        for arg in call.args:
            arg_path = path_below(path, arg.value)
            if arg_path is None:
                continue
            if device.holds(arg.value, arg_path) and _fresh(self.ctx, arg.value, arg_path, loop):
                return True
            if not isinstance(arg.value, cst.Name) or not isinstance(loop, (cst.For, cst.While)):
                continue
            for made, made_path in walk_with_paths(loop.body, [*_loop_path(self.ctx, loop), loop]):
                if not (
                    isinstance(made, cst.Assign)
                    and len(made.targets) == 1
                    and isinstance(made.targets[0].target, cst.Name)
                    and made.targets[0].target.value == arg.value.value
                    and isinstance(made.value, cst.Call)
                ):
                    continue
                given = [*made_path, made, made.value]
                for inner in made.value.args:
                    inner_path = path_below(given, inner.value)
                    if inner_path is not None and device.holds(inner.value, inner_path) and _fresh(self.ctx, inner.value, inner_path, loop):
                        return True
        return False

    def _guarded(self, path: list[cst.CSTNode], loop: Loop) -> bool:
        """Whether the end of `path` runs only on some iterations of `loop` (a comparison of
        its counter counts: a copy made after warm-up only is not a copy of every step)."""
        return thinning_guard(self.ctx, path, loop, counter=True) is not None

    def _excused(self, node: cst.CSTNode, loop: Loop, path: list[cst.CSTNode]) -> bool:
        """Not on every iteration (`_guarded`), or a copy the loop needs to decide what to do
        next."""
        if self._guarded(path, loop):
            return True
        start = _index(path, loop)
        for index in range(start + 1, len(path) - 1):
            parent, child = path[index], path[index + 1]
            if isinstance(parent, (cst.If, cst.While, cst.IfExp, cst.CompIf)) and child is parent.test:
                return True  # decides control flow: the loop needs the host value now
            if isinstance(parent, cst.Assert):
                return True
        if isinstance(loop, cst.While) and any(n is loop.test for n in path):
            return True
        # `x = float(v)` whose name the loop then tests (`if x < best`, `while x > tol`), or
        # that the next iteration starts from (`prompt += decode(x)`): the loop needs it.
        assigned = _assignment_on(path)
        if assigned is not None:
            statement, small = assigned
            names = _bound_names(small)
            if decided_on(loop, names, statement) or carried(loop, statement, names):
                return True
        return False

    # -- the finding and its fix --------------------------------------------------------------

    def _report(self, node: cst.Call, copy: HostCopy, value: cst.BaseExpression, loop: Loop) -> None:
        text = _short(self.ctx.module.code_for_node(value))
        if copy.shown and copy.kind != "print()":
            # `"{:.3f}".format(loss)`, `bar.set_postfix(loss=loss)`: text made of the value
            shown_by = _short(self.ctx.module.code_for_node(node.func))
            message = f"showing `{text}` with `{shown_by}(...)` {_DISPLAY_ADVICE}"
            self.report(node, message, fix=self._later_fix(node, loop), evidence=self._why(node, loop))
            return
        if copy.kind.startswith("."):
            spelled = f"{text}{copy.kind}"
        else:
            spelled = f"{copy.kind.removesuffix('()')}({text})"
        if copy.kind in _DISPLAY:
            self.report(node, f"`{spelled}` {_DISPLAY_ADVICE}", fix=self._later_fix(node, loop), evidence=self._why(node, loop))
            return
        where = "of the comprehension" if isinstance(loop, _COMPREHENSIONS) else "of the loop"
        if copy.implicit:
            self._report_numpy_function(node, copy, value, loop, where)
            return
        sliced = _slice_of_earlier_result(self.ctx, value, loop)
        iterated = _iterated_device_array(self.ctx, value, loop)
        if iterated is not None:
            advice = (
                f"each item of `{iterated}` is sliced on the device first; convert `{iterated}` "
                "to NumPy once before the loop and iterate the host copy"
            )
            sliced = iterated
        elif sliced is not None:
            advice = (
                f"copy `{sliced}` to the host once before the loop "
                f"(`{sliced}_host = jaxlint.runtime.to_host({sliced})`) and index the NumPy copy"
            )
        else:
            advice = "keep the values on the device and copy them once after the loop (`jaxlint.runtime.to_host`)"
        self.report(
            node,
            f"`{spelled}` waits for the device and copies to the host on every iteration {where}, "
            f"while the loop also dispatches device work; {advice}",
            fix=(self._fix(node, copy, loop) if copy.kind in _AFTER and sliced is None else None) or self._later_fix(node, loop),
            evidence=self._why(node, loop),
        )

    def _report_numpy_function(self, node: cst.Call, copy: HostCopy, value: cst.BaseExpression, loop: Loop, where: str) -> None:
        """`np.argmax(logits, -1)`: a NumPy function converts the device array it is given."""
        sliced = _iterated_device_array(self.ctx, value, loop)
        if sliced is None:
            operands = [value.left] if isinstance(value, (cst.Comparison, cst.BinaryOperation)) else [value]
            sliced = next((s for s in (_slice_of_earlier_result(self.ctx, o, loop) for o in operands) if s), None)
        if sliced is not None:
            advice = (
                f"copy `{sliced}` to the host once before the loop "
                f"(`{sliced}_host = jaxlint.runtime.to_host({sliced})`) and use the NumPy copy"
            )
        else:
            advice = (
                f"compute it on the device (`jnp.{copy.kind.removeprefix('np.')}`) and copy the results once "
                "after the loop (`jaxlint.runtime.to_host`)"
            )
        self.report(
            node,
            f"`{_short(self.ctx.module.code_for_node(node))}`: the NumPy function `{copy.kind}` copies the device "
            f"array `{_short(self.ctx.module.code_for_node(value))}` to the host, which waits for the device on "
            f"every iteration {where}, while the loop also dispatches device work; {advice}",
            fix=self._later_fix(node, loop),
            evidence=self._why(node, loop),
        )

    def _later_fix(self, node: cst.CSTNode, loop: Loop) -> Fix | None:
        """A copy made only to be logged (`print(f"{loss:.4f}")`, `writer.add_scalar("loss",
        loss.item(), step)`, a statement of the loop's own body): the logging call is handed
        to a `jaxlint.runtime.one_step_late` made before the loop, as a lambda binding the
        loop's names it reads, and `.flush()` after the loop runs the last one."""
        ctx = self.ctx
        if not isinstance(loop, (cst.For, cst.While)) or (isinstance(loop, cst.For) and loop.asynchronous is not None):
            return None
        path = ctx.path_to(node)
        start = _index(path, loop)
        # [..., loop, its body block, the statement line, its expression, the logging call, ...]
        if len(path) < start + 5 or path[start + 1] is not loop.body:
            return None
        line, expr, call = path[start + 2], path[start + 3], path[start + 4]
        if not (
            isinstance(line, cst.SimpleStatementLine)
            and len(line.body) == 1
            and isinstance(expr, cst.Expr)
            and expr.value is call
            and isinstance(call, cst.Call)
            and self._logs(call, path[: start + 4])
        ):
            return None
        if any(isinstance(n, (cst.NamedExpr, cst.Await, cst.Yield)) for n in iter_subtree(call)):
            return None
        if contains_exit(loop, (cst.Return, cst.Yield, cst.Await)):
            return None  # the loop may end without reaching the flush after it
        block = path[start - 1] if start >= 1 else None
        statements = list(getattr(block, "body", ()))
        index = next((i for i, n in enumerate(statements) if n is loop), None)
        if index is None:
            return None
        late = _made_late(ctx, statements, index, path[:start])
        rebound = ctx.loop_bindings(loop)
        names = [n for n in _names_in_order(call) if n in rebound]
        defaults = ", ".join(f"{n}={n}" for n in names)
        name = late or unused_name(ctx.source, "later")
        wrapped = cst.parse_expression(
            f"{name}(lambda {defaults}: {ctx.module.code_for_node(call)})" if defaults
            else f"{name}(lambda: {ctx.module.code_for_node(call)})"
        )
        edits = [Edit(expr, replacement=expr.with_changes(value=wrapped))]
        if late is None:
            edits.append(
                Edit(
                    loop,
                    before=(cst.parse_statement(f"{name} = one_step_late()\n"),),
                    after=(cst.parse_statement(f"{name}.flush()\n"),),
                )
            )
        return Fix(
            Applicability.UNSAFE,
            tuple(edits),
            f"Log one iteration late with `one_step_late`, after the next step is dispatched",
            imports=(ImportSpec("jaxlint.runtime", "one_step_late"),),
        )

    def _logs(self, call: cst.Call, path: list[cst.CSTNode]) -> bool:
        """`print(...)`, a logger's or a summary writer's method, `wandb.log`, a progress
        bar's `set_postfix`: a call whose only effect is output."""
        func = call.func
        resolved = self.ctx.resolve(func, path, anchor=call)
        if resolved is not None:
            return resolved.startswith(_LOGGING_MODULES) or resolved == "print"
        if isinstance(func, cst.Name):
            return func.value == "print" and self.ctx.is_builtin("print", path, anchor=call)
        return isinstance(func, cst.Attribute) and func.attr.value in _LOGGING_METHODS

    def _fix(self, node: cst.Call, copy: HostCopy, loop: Loop) -> Fix | None:
        if not _plain_copy(node, copy):
            return None
        parent = self.ctx.ancestors[-1] if self.ctx.ancestors else None
        if isinstance(parent, cst.AugAssign):
            return self._sum_fix(node, copy)
        if _to_host_taken(self.ctx):
            return None
        if isinstance(loop, cst.ListComp) and parent is loop and loop.elt is node:
            return self._comprehension_fix(node, copy, loop)
        return self._append_fix(node, copy)

    def _comprehension_fix(self, node: cst.Call, copy: HostCopy, comp: cst.ListComp) -> Fix | None:
        after = _AFTER[copy.kind]
        if after is not None and after != "copy":
            return None
        template = cst.parse_expression("to_host(_, copy=True)" if after == "copy" else "to_host(_)")
        assert isinstance(template, cst.Call)
        inner = comp.with_changes(elt=copy.value, lpar=[], rpar=[])
        call = template.with_changes(args=[template.args[0].with_changes(value=inner), *template.args[1:]])
        return Fix(
            Applicability.UNSAFE,
            (Edit(comp, replacement=call.with_changes(lpar=comp.lpar, rpar=comp.rpar)),),
            "Build the list on the device and copy it once with `to_host`",
            imports=(ImportSpec("jaxlint.runtime", "to_host"),),
        )

    def _append_fix(self, node: cst.Call, copy: HostCopy) -> Fix | None:
        ctx = self.ctx
        path = ctx.ancestors
        # `results.append(<copy>)` as a statement line of its own.
        if len(path) < 4:
            return None
        arg, call, expr, line = path[-1], path[-2], path[-3], path[-4]
        if not (
            isinstance(arg, cst.Arg)
            and isinstance(call, cst.Call)
            and len(call.args) == 1
            and isinstance(call.func, cst.Attribute)
            and call.func.attr.value == "append"
            and isinstance(expr, cst.Expr)
            and isinstance(line, cst.SimpleStatementLine)
            and len(line.body) == 1
        ):
            return None
        collected = call.func.value
        guard = ""
        if isinstance(collected, cst.Name):
            results = collected.value
            found = _collecting_loop(ctx, path, results, line)
        else:
            # `history["loss"].append(<copy>)`: an entry of a dict made before the loop, read
            # nowhere else in it (other entries may be)
            entry = _literal_entry(collected)
            if entry is None:
                return None
            container, key = entry
            found = _collecting_loop(ctx, path, container, line, _dict_of_lists(key), others=_other_entries(container, key))
            if found is None:
                return None
            results = ctx.module.code_for_node(collected)
            made = found[2].body[0]
            if not isinstance(getattr(made, "value", None), cst.Dict):
                # a `defaultdict(list)` gains the entry only when the loop appends to it
                guard = f"if {ctx.module.code_for_node(collected.slice[0].slice.value)} in {container}:\n    "
        if found is None:
            return None
        outer, block_path, _ = found
        if ctx.source.find("donate") >= 0 and _donated(outer, copy.value):
            return None
        after = _AFTER[copy.kind]
        host = f"to_host({results}, copy=True)" if after == "copy" else f"to_host({results})"
        if after is not None and after != "copy":
            host = f"[{after.format('v')} for v in {host}]"
        return _keep_on_device(
            node,
            copy,
            outer,
            f"{guard}{results}[:] = {host}\n",
            f"Collect the device values in `{results}` and copy them once with `to_host` after the loop",
            imports=(ImportSpec("jaxlint.runtime", "to_host"),),
        )

    def _sum_fix(self, node: cst.Call, copy: HostCopy) -> Fix | None:
        """`total += float(loss)` in the loop, `total = 0.0` before it: sum on the device,
        convert once after the loop."""
        path = self.ctx.ancestors
        if len(path) < 2:
            return None
        aug, line = path[-1], path[-2]
        if not (
            isinstance(aug, cst.AugAssign)
            and isinstance(aug.operator, cst.AddAssign)
            and aug.value is node
            and isinstance(aug.target, cst.Name)
            and isinstance(line, cst.SimpleStatementLine)
            and len(line.body) == 1
        ):
            return None
        # float() makes every term a Python float, so the sum is one whatever it starts from;
        # .item() of an integer array makes an int, so only a sum started at a float is one.
        if copy.kind not in ("float()", ".item()"):
            return None
        floats_only = copy.kind == ".item()"
        total = aug.target.value
        found = _collecting_loop(self.ctx, path, total, line, lambda value: _number_literal(value, floats_only))
        if found is None:
            return None
        return _keep_on_device(
            node,
            copy,
            found[0],
            f"{total} = float({total})\n",
            f"Sum on the device in `{total}` and convert it to a Python float once after the loop",
        )


# Output calls a logging fix may run one iteration late (resolved, or a method of a logger,
# summary writer or progress bar).
_LOGGING_MODULES = ("logging.", "absl.logging.", "wandb.", "tqdm.", "mlflow.")
_LOGGING_METHODS = frozenset(
    {
        "info", "debug", "warning", "add_scalar", "add_scalars", "add_histogram", "add_text",
        "write_scalars", "write_summaries", "log_metrics", "log_metric", "log_dict",
        "set_postfix", "set_postfix_str", "set_description",
    }
)  # fmt: skip


def _names_in_order(node: cst.CSTNode) -> list[str]:
    """The names `node` reads (`free_names`), in order of first appearance."""
    wanted = free_names(node)
    seen: list[str] = []
    for inner in iter_subtree(node):
        if isinstance(inner, cst.Name) and inner.value in wanted and inner.value not in seen:
            seen.append(inner.value)
    return seen


def _made_late(ctx, statements: list[cst.CSTNode], index: int, path: list[cst.CSTNode]) -> str | None:  # type: ignore[no-untyped-def]
    """`later` when the loop at `statements[index]` stands between `later =
    one_step_late()` and `later.flush()` (an earlier fix of the same loop made them)."""
    if index == 0 or index + 1 >= len(statements):
        return None
    before, after = statements[index - 1], statements[index + 1]
    if not (isinstance(before, cst.SimpleStatementLine) and isinstance(after, cst.SimpleStatementLine)):
        return None
    assign, flush = before.body[0], after.body[0]
    if not (isinstance(assign, cst.Assign) and len(assign.targets) == 1 and isinstance(assign.targets[0].target, cst.Name)):
        return None
    name = assign.targets[0].target.value
    if not _makes_late(ctx, assign.value, [*path, before, assign]):
        return None
    if not (
        isinstance(flush, cst.Expr)
        and isinstance(flush.value, cst.Call)
        and isinstance(flush.value.func, cst.Attribute)
        and flush.value.func.attr.value == "flush"
        and isinstance(flush.value.func.value, cst.Name)
        and flush.value.func.value.value == name
    ):
        return None
    return name


_LATE_MAKERS = frozenset({"jaxlint.runtime.one_step_late", "jaxlint.runtime.OneStepLate"})


def _makes_late(ctx, value: cst.BaseExpression | None, path: list[cst.CSTNode]) -> bool:  # type: ignore[no-untyped-def]
    """`one_step_late()` (or `OneStepLate()`) of `jaxlint.runtime`, as `value` (whose
    ancestors are `path`) spells it."""
    return isinstance(value, cst.Call) and ctx.resolve(value.func, path, anchor=value) in _LATE_MAKERS


def _handed_late(ctx, path: list[cst.CSTNode]) -> bool:  # type: ignore[no-untyped-def]
    """Whether the node at the end of `path` is in a lambda handed to a `one_step_late`
    object (`later(lambda loss=loss: print(loss))`): it runs when the loop comes round again,
    after the next step has been dispatched."""
    for index in range(len(path) - 1, 2, -1):
        if not (isinstance(path[index], cst.Lambda) and isinstance(path[index - 1], cst.Arg)):
            continue
        call = path[index - 2]
        if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Name)):
            continue
        bindings = ctx.bindings.of(call.func.value, path[: index - 1])
        if bindings and all(_makes_late(ctx, b.value, [*b.path, b.node]) for b in bindings):
            return True
    return False


def _keep_on_device(
    node: cst.Call, copy: HostCopy, loop: cst.CSTNode, after: str, title: str, imports: tuple[ImportSpec, ...] = ()
) -> Fix:
    """The copy replaced by the device value it copies, and the statement `after` put after
    `loop` to bring the values to the host once."""
    value = copy.value.with_changes(lpar=[], rpar=[]) if _bare(copy.value) else copy.value
    return Fix(
        Applicability.UNSAFE,
        (Edit(node, replacement=value), Edit(loop, after=(cst.parse_statement(after),))),
        title,
        imports=imports,
    )


def _collecting_loop(
    ctx, path: list[cst.CSTNode], results: str, line: cst.CSTNode, starts=None, others=None  # type: ignore[no-untyped-def]
) -> tuple[cst.CSTNode, list[cst.CSTNode], cst.SimpleStatementLine] | None:
    """The outermost loop around `line` that sits in the block where `results` was last set
    before it (to `[]`, or to what `starts(value)` accepts), when the loop uses `results` only
    in `line` (and in the nodes `others(loop)` lists: the other entries of a dict), with its
    ancestors and the statement that set `results`. A loop that does not qualify (the list is
    made inside it, or read elsewhere in it) leaves the loops inside it to be tried: `losses =
    []` made per epoch collects the steps of the inner loop."""
    for index, node in enumerate(path):
        if not isinstance(node, (cst.For, cst.While)) or index == 0:
            continue
        block = path[index - 1]
        if not isinstance(block, (cst.IndentedBlock, cst.Module)):
            continue
        body = list(block.body)
        position = next((i for i, s in enumerate(body) if s is node), None)
        if position is None:
            continue
        creation = None
        for earlier in range(position - 1, -1, -1):
            statement = body[earlier]
            if _sets_name(statement, results, starts or _empty_list):
                creation = earlier
                break
            if reads_name(statement, results):
                break
        if creation is None:
            continue
        if isinstance(node, cst.For) and reads_name(node.iter, results):
            continue
        if reads_name(node, results, skip=[line, *(others(node) if others else ())]):
            continue
        if any(isinstance(n, (cst.Return, cst.Yield)) for n in iter_subtree(node, into_scopes=False)):
            return None
        if node.orelse is not None:
            continue
        return node, path[:index], body[creation]
    return None


def _sets_name(statement: cst.CSTNode, name: str, accepts) -> bool:  # type: ignore[no-untyped-def]
    """`statement` is `name = value` (or `name: T = value`, or one target of
    `a, name = [], []`) with `accepts(value)`."""
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return False
    small = statement.body[0]
    if isinstance(small, cst.AnnAssign):
        target, value = small.target, small.value
    elif isinstance(small, cst.Assign) and len(small.targets) == 1:
        target, value = small.targets[0].target, small.value
    else:
        return False
    if isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, (cst.Tuple, cst.List)):
        if len(target.elements) != len(value.elements):
            return False
        if any(isinstance(e, cst.StarredElement) for e in (*target.elements, *value.elements)):
            return False
        return any(
            isinstance(t.value, cst.Name) and t.value.value == name and accepts(v.value)
            for t, v in zip(target.elements, value.elements)
        )
    return isinstance(target, cst.Name) and target.value == name and value is not None and accepts(value)


def _literal_entry(expr: cst.BaseExpression) -> tuple[str, str] | None:
    """`history["loss"]`: the dict's name and the key's text."""
    if not (isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Name) and len(expr.slice) == 1):
        return None
    index = expr.slice[0].slice
    if not (isinstance(index, cst.Index) and isinstance(index.value, cst.SimpleString)):
        return None
    return expr.value.value, index.value.evaluated_value


def _dict_of_lists(key: str):  # type: ignore[no-untyped-def]
    """What a dict collecting into its `key` entry starts as: `defaultdict(list)`, or a dict
    literal whose `key` entry is `[]`."""

    def starts(value: cst.BaseExpression) -> bool:
        if isinstance(value, cst.Dict):
            return any(
                isinstance(e, cst.DictElement) and isinstance(e.key, cst.SimpleString) and e.key.evaluated_value == key and _empty_list(e.value)
                for e in value.elements
            )
        if not (isinstance(value, cst.Call) and len(value.args) == 1 and isinstance(value.args[0].value, cst.Name)):
            return False
        func = value.func
        name = func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) else ""
        return name == "defaultdict" and value.args[0].value.value == "list"

    return starts


def _other_entries(container: str, key: str):  # type: ignore[no-untyped-def]
    """The nodes of a loop that read other literal entries of `container` (`history["acc"]`)."""

    def others(loop: cst.CSTNode) -> list[cst.CSTNode]:
        found: list[cst.CSTNode] = []
        for node in iter_subtree(loop, into_scopes=False):
            entry = _literal_entry(node) if isinstance(node, cst.Subscript) else None
            if entry is not None and entry[0] == container and entry[1] != key:
                found.append(node)
        return found

    return others


def _empty_list(value: cst.BaseExpression) -> bool:
    if isinstance(value, cst.List) and not value.elements:
        return True
    return isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "list" and not value.args


def _number_literal(value: cst.BaseExpression, floats_only: bool = False) -> bool:
    """`0`, `0.0`, `-1e-8`: a Python number to start a sum from (`floats_only`: a float)."""
    if isinstance(value, cst.UnaryOperation) and isinstance(value.operator, (cst.Minus, cst.Plus)):
        value = value.expression
    return isinstance(value, cst.Float if floats_only else (cst.Integer, cst.Float))


def _donated(loop: cst.CSTNode, value: cst.BaseExpression) -> bool:
    """Whether a name the collected value reads is passed to a call in the loop (a jitted
    call that donates its arguments would delete the collected buffer)."""
    names = free_names(value)
    for node in iter_subtree(loop, into_scopes=False):
        if isinstance(node, cst.Call) and any(free_names(a.value) & names for a in node.args):
            if node is not value and not any(n is node for n in iter_subtree(value)):
                return True
    return False


def _plain_copy(node: cst.Call, copy: HostCopy) -> bool:
    """One positional argument (no `dtype=`, `copy=`...) or a method call without arguments."""
    if copy.kind.startswith("."):
        return not node.args
    return len(node.args) == 1 and node.args[0].keyword is None and not node.args[0].star


def _bare(expr: cst.BaseExpression) -> bool:
    return bool(getattr(expr, "lpar", None))


def _to_host_taken(ctx) -> bool:  # type: ignore[no-untyped-def]
    """`to_host` already means something at module level other than jaxlint's helper."""
    if "to_host" not in ctx.source:
        return False
    resolved = ctx.resolve(cst.Name("to_host"), [], anchor=ctx.module)
    if resolved is not None:
        return resolved != "jaxlint.runtime.to_host"
    for statement in ctx.module.body:
        if isinstance(statement, (cst.FunctionDef, cst.ClassDef)) and statement.name.value == "to_host":
            return True
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, (cst.Assign, cst.AnnAssign, cst.Import, cst.ImportFrom)):
                    if "to_host" in {n.value for n in iter_subtree(small) if isinstance(n, cst.Name)}:
                        return True
    return False


_DISPLAY = frozenset({"print()", "str()", "repr()", "format()", ".format()"} | {f".{m}()" for m in DISPLAY_METHODS})
# Copies that make a Python value (a number or a list), not a host array.
_SCALAR_COPIES = frozenset({"float()", "int()", "bool()", "complex()", ".item()", ".tolist()"})
_DISPLAY_ADVICE = (
    "waits for the device and copies to the host on every iteration of a loop that runs "
    "compiled device work, so the device idles while Python prints; log every N steps, or "
    "log the previous step's values after dispatching the next step"
)


def _formats_text(expr: cst.BaseExpression) -> bool:
    """An f-string, `"..." % values` or `"...".format(values)`: text whose values are checked
    where they are formatted."""
    if isinstance(expr, cst.FormattedString):
        return True
    strings = (cst.SimpleString, cst.ConcatenatedString)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Modulo):
        return isinstance(expr.left, strings)
    return isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "format" and isinstance(expr.func.value, strings)


def _iterated_device_array(ctx, value: cst.BaseExpression, loop: Loop) -> str | None:  # type: ignore[no-untyped-def]
    """`quantiles` for `float(q)` in `for q in quantiles` (or a comprehension over it), when
    `quantiles` is a device array computed before the loop."""
    if isinstance(loop, cst.For):
        target, iterable = loop.target, loop.iter
    elif isinstance(loop, _COMPREHENSIONS):
        target, iterable = loop.for_in.target, loop.for_in.iter
    else:
        return None
    if not isinstance(iterable, cst.Name) or not isinstance(target, cst.Name):
        return None
    if target.value not in free_names(value):
        return None
    path = [*_loop_path(ctx, loop), loop]
    holds = ctx.device.holds(iterable, [*path, loop.for_in] if isinstance(loop, _COMPREHENSIONS) else path)
    return iterable.value if holds else None


def _slice_of_earlier_result(ctx, value: cst.BaseExpression, loop: Loop) -> str | None:  # type: ignore[no-untyped-def]
    """`acts` for `acts[layer][i]` when `acts` was computed before the loop: the loop only
    slices a finished device result, which is better copied once, whole."""
    if isinstance(value, cst.Name) and isinstance(loop, (cst.For, cst.While)):
        # `layer_act = acts[key][i]` then `np.array(layer_act)`
        assigned = [
            n.value
            for n in iter_subtree(loop.body, into_scopes=False)
            if isinstance(n, cst.Assign) and any(value.value in target_names(t.target) for t in n.targets)
        ]
        if len(assigned) == 1 and isinstance(assigned[0], cst.Subscript):
            value = assigned[0]
    base = value
    while isinstance(base, cst.Subscript):
        base = base.value
    if base is value or not isinstance(base, cst.Name):
        return None
    if base.value in ctx.loop_bindings(loop):
        return None
    return base.value


def _copied_before(ctx, node: cst.CSTNode, value: cst.BaseExpression, loop: Loop, loop_path: list[cst.CSTNode]) -> bool:  # type: ignore[no-untyped-def]
    """Whether the same value was already copied to the host earlier in the same iteration
    (`text = decode(np.array(ids))` then `np.array(ids).tolist()`): jax keeps the host copy of
    an array, so the second copy does not wait."""
    if not isinstance(loop, (cst.For, cst.While)):
        return False
    from jaxlint._walk import iter_children

    text = "".join(ctx.module.code_for_node(value).split())
    names = free_names(value)
    earlier = False
    stack: list[tuple[cst.CSTNode, list[cst.CSTNode]]] = [(loop.body, [*loop_path, loop])]
    while stack:
        inner, path = stack.pop()
        if inner is node:
            return earlier
        if isinstance(inner, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
            targets = inner.targets if isinstance(inner, cst.Assign) else [inner]
            if any(set(target_names(t.target)) & names for t in targets):
                earlier = False
        elif isinstance(inner, cst.Call) and (_is_copy_spelling(inner) or isinstance(inner.func, cst.Attribute)):
            copy = ctx.device.host_copy(inner, path)
            if copy is not None and copy.kind not in _DISPLAY and "".join(ctx.module.code_for_node(copy.value).split()) == text:
                earlier = True
        if isinstance(inner, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        below = [*path, inner]
        stack.extend((child, below) for child in reversed(list(iter_children(inner))))
    return False


def _is_copy_spelling(call: cst.Call) -> bool:
    func = call.func
    last = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
    return last in ("array", "asarray", "asanyarray", "ascontiguousarray", "copy", "device_get", "item", "tolist",
                    "float", "int", "bool", "complex")


def _blocks(ctx, call: cst.Call, path: list[cst.CSTNode]) -> bool:  # type: ignore[no-untyped-def]
    """`jax.block_until_ready(x)` or `x.block_until_ready()`."""
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value == "block_until_ready":
        return ctx.resolve(func, path, anchor=call) in (None, "jax.block_until_ready")
    return ctx.resolve(func, path, anchor=call) == "jax.block_until_ready"


def _shown(ancestors: list[cst.CSTNode], node: cst.Call) -> bool:
    """`f"{loss.item():.4f}"`, `print(x.tolist())`: a copy made only to be shown, formatted in
    an f-string or printed, as the device value itself would be."""
    if not ancestors:
        return False
    parent = ancestors[-1]
    if isinstance(parent, cst.FormattedStringExpression):
        return parent.expression is node
    if isinstance(parent, cst.Arg) and len(ancestors) > 1 and parent.value is node and parent.keyword is None:
        call = ancestors[-2]
        return isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and call.func.value == "print"
    return False


def _discarded(ancestors: list[cst.CSTNode], node: cst.Call) -> bool:
    """`jax.device_get(f(x))` as a statement of its own: a deliberate wait, not a copy."""
    return bool(ancestors) and isinstance(ancestors[-1], cst.Expr) and ancestors[-1].value is node


def _occasional(ctx, path: list[cst.CSTNode], loops: list[Loop], loop: Loop) -> bool:  # type: ignore[no-untyped-def]
    """Whether `loop` runs only on some iterations of a loop around it: it sits under
    `if step % eval_every == 0:` (or another thinning guard, `_guards`), in this function or
    around its body (`if self.step % self.log_every == 0:` in a method called once per
    step)."""
    end = _index(path, loop)
    function = next((n for n in reversed(path[:end]) if isinstance(n, cst.FunctionDef)), None)
    if function is not None and periodic(path[: end + 1], function):
        return True
    return any(thinning_guard(ctx, path[: end + 1], outer, counter=True) is not None for outer in loops[: loops.index(loop)])


def _converts(ctx, test: cst.BaseExpression, path: list[cst.CSTNode], loop: Loop) -> bool:  # type: ignore[no-untyped-def]
    """`if done:`, `while not done:`, `if loss > best:`: Python takes the truth value of a
    fresh device value, which waits for it."""
    parts: list[cst.BaseExpression] = []
    pending = [test]
    while pending:  # `if not a or not b:` tests each of `a` and `b`
        expr = pending.pop()
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
            pending.append(expr.expression)
        elif isinstance(expr, cst.BooleanOperation):
            pending.extend((expr.right, expr.left))
        elif isinstance(expr, cst.Comparison):
            parts.extend((expr.left, *(c.comparator for c in expr.comparisons)))
        else:
            parts.append(expr)
    for part in parts:
        part_path = path_below([*path, test], part) if part is not test else path
        if part_path is None:
            continue
        if isinstance(part, cst.Call) and isinstance(part.func, cst.Attribute):
            # `while not timestep.last():`, `if (a[:2] == b[:2]).all():`: a method of a fresh
            # device value, whose result Python takes the truth value of.
            receiver = part.func.value
            receiver_path = path_below([*part_path, part, part.func], receiver)
            if receiver_path is not None and ctx.device.holds(receiver, receiver_path) and _fresh(ctx, receiver, receiver_path, loop):
                return True
        if ctx.device.holds(part, part_path) and _fresh(ctx, part, part_path, loop):
            return True  # `if done:`, `if step(x) > best:`
        if isinstance(part, cst.Call) and ctx.device.host_copy(part, part_path) is None:
            # `if allclose(out, expected):`, `if jnp.isnan(loss):`: the test takes the truth
            # value of something computed from a fresh device value, which waits for it.
            call_path = [*part_path, part]
            for arg in part.args:
                arg_path = path_below(call_path, arg.value)
                if (
                    arg_path is not None
                    and isinstance(arg.value, (cst.Name, cst.Attribute, cst.Subscript))
                    and ctx.device.holds(arg.value, arg_path)
                    and _fresh(ctx, arg.value, arg_path, loop)
                ):
                    return True
        if isinstance(part, cst.Name) and isinstance(loop, cst.While) and _assigned_device(ctx, loop, part.value):
            return True  # `while not done:` with `done = loss < tol` in the body
    return False


def _assigned_device(ctx, loop: cst.While, name: str) -> bool:  # type: ignore[no-untyped-def]
    """Whether the loop body assigns `name` a device value."""
    loop_path = _loop_path(ctx, loop)
    for node, path in walk_with_paths(loop.body, [*loop_path, loop]):
        if isinstance(node, cst.Assign) and any(name in target_names(t.target) for t in node.targets):
            value_path = path_below([*path, node], node.value)
            if value_path is not None and ctx.device.holds(node.value, value_path):
                return True
    return False


def _only_items(expr: cst.BaseExpression, loop: Loop) -> bool:
    """Whether `expr` reads nothing the loop computes but the items it iterates (`angle % 30`
    in `for angle in angles`): waiting for it waits for a slice of an array made before the
    loop, not for the device work of the iteration."""
    names = free_names(expr)
    items = _item_names(loop)
    return bool(names) and items is not None and names <= items


def _item_names(loop: Loop) -> set[str] | None:
    """The names a `for` loop or comprehension binds to the items it iterates (None for a
    `while` loop)."""
    if isinstance(loop, cst.For):
        return set(target_names(loop.target))
    if isinstance(loop, _COMPREHENSIONS):
        return {n for f in comp_fors(loop) for n in target_names(f.target)}
    return None


def _selects_items(path: list[cst.CSTNode], loop: Loop) -> bool:
    """Whether the end of `path` runs only for some items of `loop`: it sits (in `loop`'s
    body) under an `if` whose test compares an item the loop iterates (`if event.type ==
    KEYDOWN:`, `elif event.key in keys:`), or in the `else` of one, or after such an `if`
    that skips the rest of the iteration (`if request.kind != "predict": continue`)."""
    items = _item_names(loop)
    if not items:
        return False

    def compares_items(test: cst.BaseExpression) -> bool:
        return any(
            isinstance(node, cst.Comparison) and free_names(node) & items
            for node in iter_subtree(test, into_scopes=False)
        )

    start = _index(path, loop)
    for parent, child in zip(path[start + 1 :], path[start + 2 :]):
        if isinstance(parent, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            return False
        if isinstance(parent, (cst.If, cst.IfExp)) and child is not parent.test and compares_items(parent.test):
            return True
    block = getattr(loop, "body", None)
    if isinstance(loop, cst.For) and isinstance(block, cst.IndentedBlock) and len(path) > start + 2 and path[start + 1] is block:
        for statement in block.body:
            if statement is path[start + 2]:
                break
            if isinstance(statement, cst.If) and compares_items(statement.test) and any(
                isinstance(n, cst.Continue) for n in iter_subtree(statement.body, into_scopes=False)
            ):
                return True
    return False


def _tested_here(path: list[cst.CSTNode], loop: Loop) -> bool:
    """Whether the end of `path` is inside a test that `loop` evaluates on each iteration
    (an `if`, `while`, conditional expression or comprehension `if`)."""
    start = _index(path, loop)
    return any(
        isinstance(p, (cst.If, cst.While, cst.IfExp, cst.CompIf)) and c is p.test
        for p, c in zip(path[start:], path[start + 1 :])
    )


def _assignment_on(path: list[cst.CSTNode]) -> tuple[cst.SimpleStatementLine, cst.Assign | cst.AugAssign] | None:
    """The statement line at the end of `path` and its assignment that `path` runs through
    (`x = float(v)`, `total += float(v)`), if any."""
    statement = statement_of(path)
    if not isinstance(statement, cst.SimpleStatementLine):
        return None
    small = next((s for s in statement.body if isinstance(s, (cst.Assign, cst.AugAssign)) and any(n is s for n in path)), None)
    return None if small is None else (statement, small)


def _bound_names(small: cst.Assign | cst.AugAssign) -> set[str]:
    targets = small.targets if isinstance(small, cst.Assign) else [small]
    return {n for t in targets for n in target_names(t.target)}


def _decided_through_names(path: list[cst.CSTNode], loop: Loop) -> bool:
    """`scores = np.array(out)`, then `best = np.argmax(scores)` and `if scores[best] > record:`:
    the statement at the end of `path` assigns a copy that the loop decides on through the
    names it computes from it (`_host_needs.decided_on`), so the host needs it on the
    iteration that computes it."""
    assigned = _assignment_on(path)
    if assigned is None or not isinstance(assigned[1], cst.Assign):
        return False
    statement, small = assigned
    return decided_on(loop, _bound_names(small), statement)


def _fresh(ctx, value: cst.BaseExpression, value_path: list[cst.CSTNode], loop: Loop, inner: list[Loop] = ()) -> bool:  # type: ignore[no-untyped-def,assignment]
    """Whether `value` is computed anew on each iteration of `loop`: it reads a name the
    loop binds (not one that a comprehension inside it binds anew), or it contains device
    work itself."""
    shadowed: set[str] = set()
    for comp in inner:
        if isinstance(comp, _COMPREHENSIONS):
            shadowed |= ctx.loop_bindings(comp)
    if (free_names(value) - shadowed) & ctx.loop_bindings(loop):
        return True
    for node in iter_subtree(value, into_scopes=False):
        if isinstance(node, cst.Call):
            sub_path = path_below([*value_path, value], node)
            if sub_path is not None and ctx.device.dispatches_here(node, sub_path):
                return True
    return False


def _index(path: list[cst.CSTNode], node: cst.CSTNode) -> int:
    return next(i for i, n in enumerate(path) if n is node)


def _short(text: str, limit: int = 40) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _array_method(call: cst.Call) -> bool:
    """`x.sum()`, `x.max(axis=0)`, `x.astype(np.float32)`: a method every array has."""
    return isinstance(call.func, cst.Attribute) and call.func.attr.value in _ARRAY_METHODS


_ARRAY_METHODS = frozenset(
    {"sum", "mean", "max", "min", "std", "var", "prod", "argmax", "argmin", "any", "all", "astype", "reshape", "ravel",
     "flatten", "squeeze", "transpose", "clip", "round", "cumsum", "dot", "copy", "__array__"}
)
