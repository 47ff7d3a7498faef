"""## What it does

Finds timing code that does not time the device work it surrounds:

- a timer read (`time.perf_counter()`, `time.time()`, `time.monotonic()`,
  `time.process_time()`, `timeit.default_timer()`) that ends a measurement while device work
  started since the first read (a call of a jitted function or of a jitted method of an
  instance, a `jnp`/`lax` op; with `--preview`, also a function or method of the project that
  starts such work, waits for none of it and returns its results, in this module or another)
  has not been waited for;
- `timeit.timeit(lambda: f(x))` / `timeit.repeat(...)` of a jitted function or JAX op that
  does not wait for its result;
- a benchmark loop whose jitted function is called for the first time inside the timed
  region: the first iteration traces and compiles it, and that is timed too. Reported when
  the figure is a time per step (the elapsed time divided by a count, or by the count spelled
  in the loop's header, `/ 100` after `for _ in range(100)`; a rate such as steps per second;
  or the figure a benchmark helper returns); the wall time of a whole run, printed as a total
  or in minutes, includes its one compile as it should, and so does a total or rate read
  after the loop from the run's own clock, one the loop also reads on its iterations without
  a restart (`elapsed = time.time() - t_start` on its logging steps, then `total_steps /
  (time.time() - t_start)` at the end);
- a timed pass that a loop repeats, whose jitted function is first called in the first pass,
  when the passes' times are averaged (`times.append(time.time() - t0)` in the loop, then
  `np.mean(times)` or `sum(times) / len(times)`): the compile is in the average. The best pass
  (`min(times)`), the passes after the first (`times[1:]`), or each pass printed on its own
  leave it out, and stay silent.

## Why is this bad?

JAX dispatches asynchronously: a jitted call returns as soon as the work is queued, long before
the device has finished. A timer read right after it measures the dispatch. On CPU we measured
20 calls of a 10 ms function at 0.2 ms without a block and 225 ms with one (~1100x
under-measured); on accelerators the gap is larger. And the first call of a jitted function
compiles: 76 ms against 10 ms steady on CPU, seconds on a big model. Seed report 003 traced a
benchmark's 2.44x "speed-up" (the honest figure was 16.32x) to compiles inside the timed
region.

Waiting means `jax.block_until_ready(out)`, `out.block_until_ready()`, or a copy to the host
(`np.asarray(out)`, `jax.device_get(out)`, `float(out)`, `out.item()`, `print(out)`) before
the second read, also in a function or a method of a class of the file called there, whatever
its arguments (`evaluate(val_set)`, `trainer.sync()` whose body blocks or copies the object's
arrays). Handing a result to a `queue.Queue` (`.put`) or wrapping it in Flax's
`freeze`/`FrozenDict` does not wait for it. A clock restarted right after each read in a loop (`print(time() - t0)`, then
`t0 = time()`, every iteration or every k steps) times the loop's body from its top to the read.
The rule stays silent when the result is waited for, for NumPy/Python work, for a running
clock (started once before a loop and read on each of its iterations without a restart: an
elapsed-time total, or a throughput over the whole run such as steps per second, off by at
most the step in flight, with the first compile amortised over the run),
for functions it does not know to dispatch device work (a helper that waits inside, copies to
the host, calls something unknown with a device value, may return `None` or only makes a set-up
array such as `jnp.zeros` is not known to), for code inside jitted functions
(or a function a factory returns to a jit wrapper: `jax.jit(jax.vmap(make_train(config)))`), and
for `eqx.filter_jit` calls: since equinox 0.11.8 they block on their own result before
returning, so their timing is (accidentally) correct. It also stays silent when the only
unwaited work is set-up too small to matter (`jnp.zeros`, `jax.random.split`, an array of
numbers written in the code), or a light pass over finished values (`jnp.mean(jnp.array(losses))`, or
a function of the file or of another module of the project, jitted or not, whose only device
work is such one-pass operations, a gradient norm, after the region waited for the steps it
timed), or copies to the device of host data the
timed code made itself, and light passes over those copies (a set-up timer around loading:
`mesh = load_mesh(path)`, then `wet = jnp.asarray(mesh.mask)`, `jnp.sum(wet)`; the host took at
least as long to make the data; reported as a total, not per step), when the unwaited work was started in a loop
of many passes that waits for the device on each (the loss of the previous step printed at
the top of the next: only the last pass is in flight at the read), or a jitted function that computes nothing (a body of `pass`,
or one returning its arguments as they came: a benchmark of the dispatch itself), and when the
log line that reports the time says it measures a compile, a warm-up or a dispatch
(`logging.info("compilation done in %.2f s", dt)`, "warmup time:", "submitted ... in"; not
"... after warmup"), the log line just before the timer starts announces one
(`print("Warming up...")`, `logging.info("Compiling model init")`), the statement just
before the timer starts empties the compilation caches (`jax.clear_caches()`: a compile timed
on purpose), or the name the time is stored in says so (`warmup_time`, `compile_s`).

## Example

```python
@jax.jit
def step(x):
    return jnp.tanh(x @ x)

x = jnp.ones((512, 512))
step(x)  # warm-up
t0 = time.perf_counter()
for _ in range(10):
    out = step(x)
elapsed = time.perf_counter() - t0
```

Use instead:

```python
@jax.jit
def step(x):
    return jnp.tanh(x @ x)

x = jnp.ones((512, 512))
step(x)  # warm-up
t0 = time.perf_counter()
for _ in range(10):
    out = step(x)
jax.block_until_ready(out)
elapsed = time.perf_counter() - t0
```

Or let `jaxlint.runtime.benchmark(step, x)` warm up, block and count compiles for you.

## Fix safety

The fix inserts `jax.block_until_ready(<results>)` before the second timer read, on the results
of the device work nobody waited for (adding `import jax` if needed), or wraps a discarded
result in place (`jax.block_until_ready(f(x))`, also inside a `timeit` lambda).
`block_until_ready` returns its argument and only waits, so the program computes the same
values; only the measured time changes, to the true one. The fix is **safe** when every
blocked name is surely bound at that point. When a result is assigned only in a loop that may
run zero times or in a branch, it is **unsafe**: the inserted line would raise `NameError`
where the original code did not read the name.

A compile inside the timed region has no automatic fix: add a warm-up call on exactly the
inputs you time before starting the timer, or use `jaxlint.runtime.benchmark`.

The fix is plain JAX (`jax.block_until_ready`): `runtime-helpers = false` in
`[tool.jaxlint]` changes nothing.

## References

- JAX, "Benchmarking JAX code": https://docs.jax.dev/en/latest/benchmarking.html
- JAX, "Asynchronous dispatch": https://docs.jax.dev/en/latest/async_dispatch.html
- `../shared/research/jax-facts.md` §9 (async dispatch and timing, measured) and §3.
"""

from __future__ import annotations

import libcst as cst

from jaxlint._frequency import describe_loop
from jaxlint._waits import DeviceFlow, Step, Work, dispatch_evidence, is_setup_work, lead_call
from jaxlint._rule import Applicability, Edit, Fix, ImportSpec, Rule
from jaxlint._timing import TIMEIT, TIMERS, Figure, TimedRegion, TimingIndex, clears_caches_first, measures_compile_or_dispatch


__all__ = ["UnsyncedTiming"]

_BLOCK = "jax.block_until_ready"


class UnsyncedTiming(Rule):
    CODE = "JL006"
    SLUG = "unsynced-timing"
    MESSAGE = "timer read while JAX device work may still be running"
    FIX = Applicability.SAFE
    TOKENS = ("time",)

    def __init__(self, ctx, options=None) -> None:  # type: ignore[no-untyped-def]
        super().__init__(ctx, options)
        self._regions = TimingIndex(ctx, helpers=self.preview)
        self._cold: set[int] = set()

    def visit_Call(self, node: cst.Call) -> None:
        ctx = self.ctx
        if ctx.is_call_to(node, TIMERS):
            if not ctx.jit.is_traced(ctx.ancestors):
                region = self._regions.region(node, ctx.ancestors)
                if region is not None:
                    self._check_region(node, region)
        elif ctx.is_call_to(node, TIMEIT) and not ctx.jit.is_traced(ctx.ancestors):
            self._check_timeit(node)

    def _check_region(self, read: cst.Call, region: TimedRegion) -> None:
        ctx = self.ctx
        if measures_compile_or_dispatch(region) or region.running_clock or clears_caches_first(ctx, region):
            return
        leaves = self._regions.pending(region)
        if leaves and not all(is_setup_work(ctx, work) for work in leaves):
            clock = ctx.module.code_for_node(read.func)
            work = _describe(ctx, leaves)
            self.report(
                read,
                f"`{clock}()` ends a measurement while {work} may still be running (JAX "
                f"dispatches asynchronously, so this times the dispatch, not the computation); "
                f"wait for the result with `jax.block_until_ready` before reading the clock",
                fix=_block_fix(region, leaves),
                evidence=[*_in_flight(ctx, region, leaves), _started(ctx, region), *_repeated(ctx, region)],
            )
        for call, path, callee in self._regions.cold_calls(region):
            if id(call) in self._cold:
                continue
            self._cold.add(id(call))
            if region.start_in_loop:
                where = "in the first of the timed passes, so its tracing and compile are in their average"
            else:
                where = "inside the timed loop, so its tracing and compile are timed too"
            self.report(
                call,
                f"`{callee}` is first called {where} (no call before `{region.start_name} = ...`); "
                "call it once on the same inputs before starting the timer, or use "
                "`jaxlint.runtime.benchmark`",
                ancestors=path,
                evidence=self._compiles_here(region, call, path, callee),
            )

    def _compiles_here(self, region: TimedRegion, call: cst.Call, path: tuple[cst.CSTNode, ...], callee: str) -> list[str]:
        """Why the first call of `callee` in the region compiles there, and how the figure
        that includes the compile is made a time per step or an average."""
        ctx = self.ctx
        line = self._regions.line(region, region.start)
        origin = ctx.jit.origin(call, path) or "a jitted function"
        facts = [
            f"`{callee}` is {origin}; nothing before the clock starts"
            + (f" at line {line}" if line is not None else "")
            + f" (`{region.start_name}`) calls it or hands it on, so this call traces and compiles it"
        ]
        if region.function is None:
            facts.append("the code runs at module level, once per program: no earlier run compiled it")
        else:
            facts.append(
                f"`{region.function.name.value}()` is called once in this file, outside any loop: "
                "no earlier run of it compiled the function"
            )
        if region.start_in_loop:
            loop = next(n for n in reversed(region.start_path) if isinstance(n, (cst.For, cst.While)))
            facts.append(f"the timed pass is repeated by {describe_loop(ctx, loop, region.start_path)}; only its first pass compiles")
            figure = self._regions.figure(region, across=True)
        else:
            started = {id(n) for n in region.start_path}
            loop = next((n for n in reversed(path) if isinstance(n, (cst.For, cst.While)) and id(n) not in started), None)
            if loop is not None:
                facts.append(f"the call runs on every iteration of {describe_loop(ctx, loop, path)}; only the first compiles")
            figure = self._regions.figure(region, across=False)
        if figure is not None:
            facts.append(self._figure(region, figure))
        return facts

    def _figure(self, region: TimedRegion, figure: Figure) -> str:
        """"the elapsed time is divided at line 26 (`total / n_steps`): ..."."""
        module = self.ctx.module

        def at(node: cst.CSTNode) -> str:
            line = self._regions.line(region, node)
            code = node.value if isinstance(node, cst.Return) and node.value is not None else node
            return (f"at line {line} " if line is not None else "") + f"(`{_short(module.code_for_node(code))}`)"

        gathered = ""
        if figure.gathered:
            gathered = f"each pass's time is gathered {at(figure.gathered[0])} and "
        if figure.kind == "divided":
            return f"{gathered or 'the elapsed time is '}divided by a count {at(figure.node)}: a time per step, the compile spread into it"
        if figure.kind == "rate":
            return f"{gathered or 'the elapsed time '}divides a count {at(figure.node)}: a rate, lowered by the compile"
        if figure.kind == "returned":
            return f"the function returns the elapsed time {at(figure.node)}: a benchmark's figure, the compile in it"
        return f"{gathered or 'the elapsed time is '}averaged {at(figure.node)}: the compile is in the average"

    def _check_timeit(self, call: cst.Call) -> None:
        stmt = next((a for a in call.args if a.keyword is None or a.keyword.value == "stmt"), None)
        if stmt is None or stmt.star or not isinstance(stmt.value, cst.Lambda):
            return
        fn = stmt.value
        if fn.params.params or fn.params.posonly_params or fn.params.kwonly_params:
            return
        step = Step(fn.body, (*self.ctx.ancestors, call, stmt, fn))
        flow = DeviceFlow(self.ctx, helpers=self.preview)
        flow.feed(step)
        leaves = flow.leaves()
        if not leaves:
            return
        wrapped = _block_call(fn.body.with_changes(lpar=(), rpar=()))
        fix = Fix(
            Applicability.SAFE,
            (Edit(fn.body, replacement=wrapped),),
            "Wait for the result inside the timed lambda",
            (ImportSpec("jax"),),
        )
        timer = self.ctx.module.code_for_node(call.func)
        self.report(
            fn,
            f"`{timer}` times `{self.ctx.module.code_for_node(fn)}`, which returns before its "
            "device work is done (JAX dispatches asynchronously); time "
            f"`lambda: {_BLOCK}(...)` instead",
            fix=fix,
            evidence=[
                *(
                    dispatch_evidence(self.ctx, lead_call(self.ctx, work), (*step.path, step.node))
                    + ", is what the lambda returns, and nothing in it waits for the result"
                    for work in leaves[:3]
                ),
                f"`{timer}` reads the clock as soon as the lambda returns, once per call",
            ],
        )


def _block_call(value: cst.BaseExpression) -> cst.Call:
    return cst.Call(func=cst.parse_expression(_BLOCK), args=[cst.Arg(value)])


def _describe(ctx, leaves: list[Work]) -> str:  # type: ignore[no-untyped-def]
    calls = [f"`{_short(ctx.module.code_for_node(lead_call(ctx, w).func))}(...)`" for w in leaves]
    calls = list(dict.fromkeys(calls))
    return "device work started by " + ", ".join(calls[:3]) + (" and more" if len(calls) > 3 else "")


def _short(code: str, limit: int = 40) -> str:
    code = " ".join(code.split())
    return code if len(code) <= limit else code[: limit - 3] + "..."


def _block_fix(region: TimedRegion, leaves: list[Work]) -> Fix | None:
    """Block on the pending results before the end read's line, or wrap discarded ones."""
    edits: list[Edit] = []
    names: list[str] = []
    safe = True
    for work in leaves:
        if work.in_place and not work.targets:
            return None  # `nnx.jit` updated its arguments in place: which to wait for is unclear
        if work.bare:
            call = work.calls[0]
            edits.append(Edit(call, replacement=_block_call(call)))
        elif work.targets and all(work.names):
            names.extend(work.names)
            safe = safe and (work.step.certain or all(region.bound_before(n) for n in work.names))
        else:
            return None
    names = list(dict.fromkeys(names))
    if names:
        target = names[0] if len(names) == 1 else "(" + ", ".join(names) + ")"
        line = cst.parse_statement(f"{_BLOCK}({target})\n")
        edits.append(Edit(region.end_line, before=(line,)))
    return Fix(
        Applicability.SAFE if safe else Applicability.UNSAFE,
        tuple(edits),
        "Wait for the device work before reading the clock",
        (ImportSpec("jax"),),
    )


def _in_flight(ctx, region: TimedRegion, leaves: list[Work]) -> list[str]:  # type: ignore[no-untyped-def]
    """"`step(x)` at line 40, a function jitted with `jax.jit` (decorated at line 12), started
    on every iteration of the loop at line 38, ...; nothing waits for it before this read"."""
    started = {id(n) for n in region.start_path}
    facts = []
    for work in leaves[:3]:
        path = (*work.step.path, work.step.node)
        fact = dispatch_evidence(ctx, lead_call(ctx, work), path)
        loop = next(
            (n for n in reversed(path) if isinstance(n, (cst.For, cst.While)) and id(n) not in started),
            None,
        )
        if loop is not None:
            fact += f", started on every iteration of {describe_loop(ctx, loop, path)}"
        facts.append(fact + ", is in flight at this read: nothing after it waits for its result")
    return facts


def _repeated(ctx, region: TimedRegion) -> list[str]:  # type: ignore[no-untyped-def]
    """The loop that repeats the whole timed region, when there is one."""
    if region.carried or not region.start_in_loop:
        return []
    loop = next((n for n in reversed(region.start_path) if isinstance(n, (cst.For, cst.While))), None)
    return [f"the timed region is repeated by {describe_loop(ctx, loop, region.start_path)}"] if loop is not None else []


def _started(ctx, region: TimedRegion) -> str:  # type: ignore[no-untyped-def]
    """"the clock starts at line 12 (`start`) and nothing between waits for the device"."""
    from jaxlint._positions import line_of

    line = line_of(ctx.module, region.start, list(region.start_path))
    where = f" at line {line}" if line is not None else ""
    if region.carried:
        return (
            f"the clock restarts after each read{where} (`{region.start_name}`), and nothing from the top of "
            "the loop's body to this read waits for the device"
        )
    return f"the clock starts{where} (`{region.start_name}`) and nothing between the two reads waits for the device"
