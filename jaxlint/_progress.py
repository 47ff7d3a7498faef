"""A progress bar for runs that last: on standard error, on a terminal only, and only once a
run has taken `DELAY` seconds (a quick run prints nothing extra)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TextIO


__all__ = ["DELAY", "ProgressBar"]

DELAY = 1.5


class ProgressBar:
    """Counts files as they are linted; draws a rich bar once `delay` seconds have passed,
    if `stream` is a terminal. `close()` removes it (it is transient)."""

    def __init__(
        self, total: int, stream: TextIO, *, delay: float = DELAY, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.total, self.stream, self.delay, self.clock = total, stream, delay, clock
        self.start = clock()
        self.done = 0
        self._bar = None
        self._task = None
        isatty = getattr(stream, "isatty", None)
        self.enabled = bool(isatty and isatty()) and total > 1

    def advance(self) -> None:
        self.done += 1
        if not self.enabled:
            return
        if self._bar is None:
            if self.clock() - self.start < self.delay:
                return
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            console = Console(file=self.stream, force_terminal=True)
            self._bar = Progress(
                TextColumn("linting"), BarColumn(), MofNCompleteColumn(), TextColumn("files"), TimeElapsedColumn(),
                console=console, transient=True, auto_refresh=False,
            )  # fmt: skip
            self._bar.start()
            self._task = self._bar.add_task("lint", total=self.total)
        self._bar.update(self._task, completed=self.done)  # type: ignore[arg-type]
        self._bar.refresh()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
