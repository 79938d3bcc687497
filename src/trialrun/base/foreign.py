"""What code trialrun runs but did not write may raise as a failure of its own.

Tools of a ``tool_module``, assertion plugins and the imports of both run inside trialrun's
process. Whatever they raise is their failure, reported where they were used (an ``ok: false``
answer, an error on the case, an ``error:`` line naming the file): a ``sys.exit()`` among them
must not end the run without its artifacts, as ``except Exception`` alone would let it.
KeyboardInterrupt is not theirs to raise: it may be the user's Ctrl-C.
"""

from __future__ import annotations

from trialrun.base.quoting import exception_text

__all__ = ["FOREIGN_FAILURES", "failure_text"]

FOREIGN_FAILURES: tuple[type[BaseException], ...] = (Exception, SystemExit)


def failure_text(exc: BaseException) -> str:
    """``ValueError: what it says``, or the type's name alone when it says nothing (or cannot)."""
    said = exception_text(exc)
    return f"{type(exc).__name__}: {said}" if said else type(exc).__name__
