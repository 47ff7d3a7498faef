"""`one_step_late`: run a loop's logging one iteration late, after the next step is dispatched."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any


__all__ = ["OneStepLate", "one_step_late"]


class OneStepLate:
    """Runs each call handed to it one iteration late: the call made at a place in the loop
    runs when the loop reaches that place again, or at `flush()` after the loop.

    `print(f"{loss:.4f}")` or `writer.add_scalar("loss", loss.item(), step)` in a training
    loop waits for the step that made `loss` before Python can dispatch the next one: the
    device idles while the host formats and logs. Handed to a `OneStepLate` as a function of
    no arguments, the logging of step `i` runs after step `i + 1` has been dispatched, so the
    host waits for step `i` while the device already runs step `i + 1`. Target of the fix of
    JL005 (host-copy-in-loop) for a copy made only to be printed or logged.

    Each place that hands it calls (a line of the loop, told apart by where it is called
    from) keeps its own pending call, so several logging lines per iteration each lag one
    iteration, in their order. Bind the loop's values when making the call (`lambda
    loss=loss: ...`): a closure reads a name when it runs, one iteration late, and would see
    the next iteration's value.

    !!! Example

        ```python
        import jax
        import jax.numpy as jnp
        from jaxlint.runtime import one_step_late

        @jax.jit
        def step(w):
            return w * 0.9, jnp.sum(w**2)

        w = jnp.ones(4)
        later = one_step_late()
        for i in range(3):
            w, loss = step(w)
            later(lambda i=i, loss=loss: print(f"step {i}: {float(loss):.3f}"))
        later.flush()  # the last iteration's line
        ```
    """

    def __init__(self) -> None:
        self._pending: dict[tuple[Any, int], Callable[[], object]] = {}

    def __call__(self, call: Callable[[], object]) -> None:
        """Run the call this place handed over on the previous iteration, if any, and keep
        `call` for the next one (or for `flush`)."""
        frame = sys._getframe(1)
        place = (frame.f_code, frame.f_lasti)
        previous = self._pending.pop(place, None)
        if previous is not None:
            previous()
        self._pending[place] = call

    def flush(self) -> None:
        """Run every call still waiting, in the order they were handed over (after the loop,
        for its last iteration)."""
        pending, self._pending = self._pending, {}
        for call in pending.values():
            call()

    def __enter__(self) -> OneStepLate:
        return self

    def __exit__(self, *exc: object) -> None:
        self.flush()

    def __repr__(self) -> str:
        return f"OneStepLate({len(self._pending)} waiting)"


def one_step_late() -> OneStepLate:
    """A new `OneStepLate`: make it before the loop, hand it the loop's logging calls, and
    call its `flush()` after the loop (or use it as a context manager around the loop)."""
    return OneStepLate()
