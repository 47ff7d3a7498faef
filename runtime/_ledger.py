"""Which device arrays the program dispatched since it last waited for the device: what
`profile()` needs to find JL005 (host-copy-in-loop) and JL006 (unsynced-timing) from what the
program did, not from how long it took.

JAX dispatches asynchronously: a call returns an array at once, and the device computes it
later. Whether that work has finished when Python next asks depends on the machine (on CPU,
XLA often finishes small work before the next line), so `is_ready()` cannot say whether a copy
*had* to wait or whether a clock read timed the dispatch only. The ledger answers from the
order of events instead:

- **dispatches**: arrays that appeared in `jax.live_arrays()` since the previous look. jax
  lists live arrays newest first, so each look reads only the new ones (up to the first array
  it already knows), and gives them one batch number: the count of arrays seen so far.
- **syncs**: a wait for an array (its host conversion, `block_until_ready`, `jax.device_get`)
  waits for every array dispatched up to it on an in-order device, so it marks every batch up
  to the array's own as done (`synced`).

An array is **fresh** when its batch is after the last sync: converting it waits for work
the program sent since it last waited, however fast the device was. The result of one eager
operation on values that were all synced (`if angle > 3.0:` for `angle in angles`) waits
for that operation only, not for the loop's work: it is **shallow**.

Arrays that were made and freed between two looks are never seen (a result nobody keeps was
dispatched, but nothing can wait for it); arrays dispatched together in one batch are synced
together (a wait for one of two calls made back to back counts as a wait for both): both err
on the side of reporting less. Looks are made at clock reads and syncs from any thread, and
the ledger is the process's, not a thread's.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any


_PRUNE_MIN = 256


class Ledger:
    """Arrays seen, their batches, and how far the program has synced (see the module)."""

    def __init__(self) -> None:
        self.seen = 0  # arrays seen so far; an array's batch is this count after its look
        self.synced = 0  # batches up to this count are done: the program waited for them
        self._known: dict[int, tuple[Any, int]] = {}  # id -> (weak reference, batch)
        self._shallow: dict[int, Any] = {}  # id -> weak reference, for one eager op on synced values
        self._lock = threading.RLock()
        self._newest_first = False  # set by install()
        self._ignored: set[int] = set()  # threads whose waits are jaxlint's own (the timer helper)

    # -- looking ----------------------------------------------------------------------------
    def _batch(self, array: Any) -> int | None:
        entry = self._known.get(id(array))
        if entry is None or entry[0]() is not array:
            return None
        return entry[1]

    def look(self) -> int:
        """Record the arrays dispatched since the previous look; the number of new ones."""
        import jax

        with self._lock:
            live = jax.live_arrays()
            new = []
            for array in live:
                if self._batch(array) is not None:
                    if self._newest_first:
                        break
                    continue
                new.append(array)
            if new:
                self.seen += len(new)
                for array in new:
                    try:
                        self._known[id(array)] = (weakref.ref(array), self.seen)
                    except TypeError:  # pragma: no cover - an array type without weak references
                        continue
            if len(self._known) > 2 * len(live) + _PRUNE_MIN:
                ids = {id(a) for a in live}
                self._known = {k: v for k, v in self._known.items() if k in ids and v[0]() is not None}
                self._shallow = {k: v for k, v in self._shallow.items() if k in ids and v() is not None}
            return len(new)

    # -- syncs ------------------------------------------------------------------------------
    def wait(self, arrays: list[Any]) -> tuple[bool, bool]:
        """The program waits for `arrays`: whether one of them was fresh, and whether one of
        those was more than a shallow result (the wait a loop pays for its work). Marks their
        batches and all before as synced."""
        if threading.get_ident() in self._ignored:
            return False, False
        with self._lock:
            self.look()
            fresh = deep = False
            newest = self.synced
            for array in arrays:
                batch = self._batch(array)
                if batch is None:  # not live (deleted) or not an ArrayImpl: nothing to wait for
                    continue
                if batch > self.synced:
                    fresh = True
                    ref = self._shallow.get(id(array))
                    if ref is None or ref() is not array:
                        deep = True
                newest = max(newest, batch)
            self.synced = newest
            return fresh, deep

    def ignore_thread(self) -> None:
        """The calling thread's waits are jaxlint's own: they are no sync of the program."""
        self._ignored.add(threading.get_ident())

    # -- wrappers ---------------------------------------------------------------------------
    def install(self, stack: ExitStack, patch: Callable[[ExitStack, Any, str, Any], None]) -> None:
        """Wrap `jax.block_until_ready` and `jax.Array.block_until_ready` as syncs (host
        conversions are told by `profile()`'s host-sync counter), until `stack` closes."""
        import jax

        from ._host_sync import _array_type

        array_type = _array_type()
        self._newest_first = _lists_newest_first()
        self.look()  # what exists now was dispatched before the block: not the block's work
        self.synced = self.seen
        method = array_type.block_until_ready
        function = jax.block_until_ready

        def block_until_ready_method(array: Any) -> Any:
            self.wait([array])
            return method(array)

        def block_until_ready(x: Any) -> Any:
            self.wait([leaf for leaf in jax.tree.leaves(x) if type(leaf) is array_type])
            return function(x)

        block_until_ready.__doc__ = function.__doc__
        patch(stack, array_type, "block_until_ready", block_until_ready_method)
        patch(stack, jax, "block_until_ready", block_until_ready)

    # -- eager operations -------------------------------------------------------------------
    def eager_result(self, args: tuple[Any, ...], kwargs: dict[str, Any], result: Any, array_type: type) -> None:
        """An eager operation returned `result`: remember it as shallow when every array it
        read was synced (cheap: looks only at the arguments given directly)."""
        synced = self.synced
        for value in (*args, *kwargs.values()):
            if type(value) is array_type:
                batch = self._batch(value)
                if batch is None or batch > synced:
                    return
        outputs = result if type(result) is tuple else (result,)
        for out in outputs:
            if type(out) is array_type:
                self._shallow[id(out)] = weakref.ref(out)


def _lists_newest_first() -> bool:
    """Whether `jax.live_arrays()` lists the newest arrays first (so that a look can stop at
    the first known one); otherwise every look reads the whole list."""
    import jax
    import numpy as np

    first = jax.device_put(np.zeros((), np.float32))
    second = jax.device_put(np.ones((), np.float32))
    ids = [id(a) for a in jax.live_arrays()]
    try:
        return ids.index(id(second)) < ids.index(id(first))
    except ValueError:  # pragma: no cover
        return False
    finally:
        del first, second
