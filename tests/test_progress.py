"""The progress bar: on a terminal, for runs that last; never in a pipe or a file."""

from __future__ import annotations

import io

from jaxlint._progress import ProgressBar


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_run_that_lasts_shows_a_bar_on_a_terminal() -> None:
    stream, clock = Terminal(), Clock()
    bar = ProgressBar(10, stream, delay=1.5, clock=clock)
    bar.advance()
    assert stream.getvalue() == ""  # quick so far: nothing drawn
    clock.now = 2.0
    bar.advance()
    assert "linting" in stream.getvalue() and "2/10" in stream.getvalue()
    bar.close()


def test_no_bar_in_a_pipe_or_for_one_file() -> None:
    piped, clock = io.StringIO(), Clock()
    bar = ProgressBar(10, piped, delay=0, clock=clock)
    for _ in range(10):
        bar.advance()
    bar.close()
    assert piped.getvalue() == ""
    single = Terminal()
    one = ProgressBar(1, single, delay=0, clock=clock)
    one.advance()
    assert single.getvalue() == ""


def test_check_counts_every_file_on_the_bar(tmp_path, run_cli, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import jaxlint._cli as cli

    seen = []

    class Recorder(ProgressBar):
        def close(self) -> None:
            seen.append((self.total, self.done))
            super().close()

    monkeypatch.setattr(cli, "ProgressBar", Recorder)
    for index in range(20):  # enough files for the process pool
        (tmp_path / f"m{index}.py").write_text("import jax\nx = 1\n", encoding="utf-8")
    assert run_cli("check", "--no-cache", "-j", "2", ".").exit_code == 0
    assert run_cli("check", "--no-cache", "-j", "1", ".").exit_code == 0
    assert seen == [(20, 20), (20, 20)]
