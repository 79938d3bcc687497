"""SIGTERM, what a cancelled CI job sends, stops a command the way Ctrl-C does."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from trialrun.base.signals import routed_signals

__all__ = ["sigterm_as_ctrl_c"]


@contextmanager
def sigterm_as_ctrl_c() -> Iterator[None]:
    """Within the block SIGTERM raises KeyboardInterrupt, so the command's Ctrl-C handling
    (partial receipt, restored workspace, exit 130) applies to it too."""

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    with routed_signals(interrupt, (signal.SIGTERM,)):
        yield
