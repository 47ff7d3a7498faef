"""one_step_late: each place's call runs one iteration late, in order, the last at flush; the
host waits for a step only after the next one is dispatched."""

from __future__ import annotations

import pytest

from jaxlint.runtime import OneStepLate, one_step_late


def test_each_place_runs_one_iteration_late_and_flush_runs_the_last():
    log: list[str] = []
    later = one_step_late()
    for i in range(3):
        log.append(f"work {i}")
        later(lambda i=i: log.append(f"loss {i}"))
        later(lambda i=i: log.append(f"norm {i}"))
    assert log == ["work 0", "work 1", "loss 0", "norm 0", "work 2", "loss 1", "norm 1"]
    later.flush()
    assert log[-2:] == ["loss 2", "norm 2"]
    later.flush()  # nothing left: a second flush runs nothing
    assert len(log) == 9


def test_a_context_manager_flushes_on_exit_also_after_an_error():
    log: list[int] = []
    with pytest.raises(RuntimeError), OneStepLate() as later:
        for i in range(3):
            later(lambda i=i: log.append(i))
            if i == 1:
                raise RuntimeError("step failed")
    assert log == [0, 1]  # what the loop would have logged before failing


def test_logging_waits_for_a_step_only_after_the_next_is_dispatched():
    """The fix's point, measured as order of events: step i+1 is dispatched before the value
    of step i is read on the host."""
    jax = pytest.importorskip("jax")
    events: list[str] = []

    @jax.jit
    def step(w):
        return w * 0.5, (w**2).sum()

    w = jax.numpy.ones(8)
    later = one_step_late()
    for i in range(3):
        w, loss = step(w)
        events.append(f"dispatched {i}")
        later(lambda i=i, loss=loss: events.append(f"read {i}: {float(loss):.4f}"))
    later.flush()
    assert events == [
        "dispatched 0",
        "dispatched 1",
        "read 0: 8.0000",
        "dispatched 2",
        "read 1: 2.0000",
        "read 2: 0.5000",
    ]
