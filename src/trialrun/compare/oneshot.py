"""One JSON request to a user's command (the judge, the trigger selector), in its own group.

The command reads the request on stdin and answers on stdout. It runs in a new session, so its
process id is its group id: on a timeout, and after every answer too, the whole group is killed,
and a helper it left in the background never outlives the call.
"""

from __future__ import annotations

import contextlib
import errno
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass

from trialrun.base import leftovers
from trialrun.base.signals import signal_group

REAP_S = 5.0
"""How long to wait for the pipes after a kill; a grandchild that left the group may hold them."""


class CommandTimeout(Exception):
    """The command gave no answer in time; its process group was killed."""


@dataclass(frozen=True)
class Answer:
    stdout: str
    stderr: str
    returncode: int


def ask_command(
    argv: list[str], payload: str, *, timeout_s: float, env: Mapping[str, str] | None = None
) -> Answer:
    """Send ``payload`` to ``argv`` and collect its answer. ``OSError`` when it cannot start,
    a NUL in ``argv`` or ``env`` included (``EINVAL``; ``Popen`` raises ValueError for it)."""
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=None if env is None else dict(env),
            start_new_session=True,
        )
    except ValueError as exc:
        raise OSError(errno.EINVAL, str(exc)) from None
    leftovers.note_group(proc.pid)
    try:
        out, err = proc.communicate(payload.encode("utf-8"), timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise CommandTimeout from None
    except BaseException:
        _kill_group(proc)
        raise
    finally:
        signal_group(proc.pid)
        leftovers.note_ended(proc.pid)
    return Answer(out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), proc.returncode)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    signal_group(proc.pid)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.communicate(timeout=REAP_S)
