"""What code trialrun runs but did not write may raise as a failure of its own.

Tools of a ``tool_module``, assertion plugins and the imports of both run inside trialrun's
process. Whatever they raise is their failure, reported where they were used (an ``ok: false``
answer, an error on the case, an ``error:`` line naming the file): a ``sys.exit()`` among them
must not end the run without its artifacts, as ``except Exception`` alone would let it.
KeyboardInterrupt is not theirs to raise: it may be the user's Ctrl-C.
"""

from __future__ import annotations

__all__ = ["FOREIGN_FAILURES"]

FOREIGN_FAILURES: tuple[type[BaseException], ...] = (Exception, SystemExit)
