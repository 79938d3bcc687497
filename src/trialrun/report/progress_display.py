"""Where the progress of ``run`` and ``compare`` goes: a live line, plain log lines, or nowhere.

* **stderr is a terminal** (and ``TERM`` is not ``dumb``): one status line redrawn in place by
  rich, imported here only then, so commands that show no live line never pay for it. While it
  is up, whatever else the process writes to stderr (warnings, proxy messages) is printed above
  it instead of through it; it is erased when the work ends, before the report is printed.
  rich leaves colour out under ``NO_COLOR``; the line has none to begin with.
* **anything else** (CI logs, pipes, files, ``TERM=dumb``): one plain line per finished case or
  unit, flushed at once, never a carriage return or an escape sequence.
* **``--quiet``**: nothing.

Progress never touches stdout: the printed report stays the same byte for byte.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from rich.live import Live
    from rich.text import Text

__all__ = ["ProgressDisplay", "progress_display"]

_REFRESHES_PER_SECOND = 4


class ProgressDisplay:
    """Says nothing; the base of the log and terminal displays (``--quiet`` uses it as is)."""

    def bind(self, status: Callable[[], str]) -> None:
        """The status line's source (a tracker's ``status_line``), polled while the line is up."""

    def changed(self) -> None:
        pass

    def finished(self, line: str) -> None:
        pass

    def close(self) -> None:
        pass


class _LogDisplay(ProgressDisplay):
    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def finished(self, line: str) -> None:
        with self._lock:
            try:
                self._stream.write(line + "\n")
                self._stream.flush()
            except (OSError, ValueError):  # a closed or broken stderr must not fail the run
                pass


class _LiveDisplay(ProgressDisplay):
    """rich's Live, started at the first change so that a refusal before any work draws nothing."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._status: Callable[[], str] = lambda: ""
        self._lock = threading.Lock()
        self._live: Live | None = None
        self._closed = False

    def bind(self, status: Callable[[], str]) -> None:
        self._status = status

    def changed(self) -> None:
        with self._lock:
            if self._live is not None or self._closed:
                return
            from rich.console import Console
            from rich.live import Live

            self._live = Live(
                get_renderable=self._render,
                console=Console(file=self._stream),
                refresh_per_second=_REFRESHES_PER_SECOND,
                transient=True,
                redirect_stdout=False,  # stdout carries the report and only the report
                redirect_stderr=True,
            )
            self._live.start()

    def _render(self) -> Text:
        from rich.text import Text

        return Text(self._status(), no_wrap=True, overflow="ellipsis")

    def close(self) -> None:
        with self._lock:
            self._closed = True
            live, self._live = self._live, None
        if live is not None:
            live.stop()


def live_terminal(stream: TextIO) -> bool:
    """Whether ``stream`` is a terminal that can redraw a line in place."""
    try:
        is_tty = stream.isatty()
    except (AttributeError, ValueError):
        return False
    return is_tty and os.environ.get("TERM", "") != "dumb"


@contextmanager
def progress_display(*, quiet: bool, stream: TextIO | None = None) -> Iterator[ProgressDisplay]:
    """The display for stderr (or ``stream``); closed, its line erased, when the block ends."""
    target: TextIO | None = stream if stream is not None else sys.stderr
    display: ProgressDisplay
    if quiet or target is None:  # None: started with its stderr closed
        display = ProgressDisplay()
    elif live_terminal(target):
        display = _LiveDisplay(target)
    else:
        display = _LogDisplay(target)
    try:
        yield display
    finally:
        display.close()
