"""How a message quotes text it did not write: whole when short, else cut with ``...``.

An agent, an upstream or a user's file chooses that text, and it can be of any length: a
message quoting it whole would be as long (a 100,000-character tool name made every failure
message that long). Each caller picks its own bound; ``trialrun.errors``, below this layer,
keeps a copy of its own.

The text is redacted before it is cut: a secret that the cut would split is no longer
recognisable afterwards, so its first characters would reach the message.
"""

from __future__ import annotations

from trialrun.base.redact import redact_text

__all__ = ["exception_text", "excerpt", "shortened"]

EXCERPT_CHARS = 40
"""How much of a file's text an error message quotes: enough to recognise the spot."""


def shortened(text: str, limit: int) -> str:
    """``text`` redacted, whole if it has at most ``limit`` characters, else its start and
    ``...`` in ``limit``."""
    text = redact_text(text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def exception_text(exc: BaseException) -> str:
    """What an exception of a user's code says, or "" when its ``__str__`` raises instead."""
    try:
        return str(exc)
    except Exception:
        return ""


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """At most ``limit`` characters of ``text`` a file held, secrets redacted, on one line.

    For messages that quote a file: the file may be a credentials file a path pointed at by
    mistake, and its text may be a megabyte long. Redacted before it is cut, since a cut secret
    no longer has the shape that redaction recognises; line breaks become spaces so that the
    message stays one line.
    """
    from trialrun.base.redact import redact_text  # its patterns cost start-up; errors are rare

    redacted = redact_text(text)
    head = redacted[: limit * 2]
    flat = " ".join(head.split())
    if len(head) < len(redacted):
        flat += "..."
    return shortened(flat, limit)
