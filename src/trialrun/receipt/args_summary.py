"""``argsSummary``: a tool call's arguments as the receipt shows them.

Redacted before it is cut: cutting first could split a secret so that the part left behind no
longer looks like one, and the fragment would reach the receipt.
"""

from __future__ import annotations

import json
from typing import Any

from trialrun.base import canonjson
from trialrun.base.redact import json_holds_nothing_to_redact, redact_changed

SUMMARY_LIMIT = 200
_ELLIPSIS = "…"


def summarize_args(args: Any) -> tuple[str, bool]:
    """Canonical JSON of ``args``, redacted, cut to ``SUMMARY_LIMIT`` characters; and whether
    redaction changed anything (the receipt's ``tool_call.redacted``)."""
    value = {} if args is None else args
    try:
        text = canonjson.dumps(value)
    except (TypeError, ValueError, RecursionError):
        text = None
    # Most arguments hold no secret: proven so on their text, they need no redacted copy.
    if text is not None and json_holds_nothing_to_redact(text):
        return _cut(text), False
    clean, redacted = redact_changed(value)
    try:
        text = canonjson.dumps(clean)
    except (TypeError, ValueError, RecursionError):
        text = json.dumps(clean, ensure_ascii=False, sort_keys=True, default=repr)
    return _cut(text), redacted


def _cut(text: str) -> str:
    if len(text) > SUMMARY_LIMIT:
        return text[: SUMMARY_LIMIT - len(_ELLIPSIS)] + _ELLIPSIS
    return text
