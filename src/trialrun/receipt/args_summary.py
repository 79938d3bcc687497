"""``argsSummary``: a tool call's arguments as the receipt shows them.

Redacted before it is cut: cutting first could split a secret so that the part left behind no
longer looks like one, and the fragment would reach the receipt.
"""

from __future__ import annotations

import json
from typing import Any

from trialrun.base import canonjson
from trialrun.base.redact import holds_nothing_to_redact, redact_changed

SUMMARY_LIMIT = 200
_ELLIPSIS = "…"


def summarize_args(args: Any) -> tuple[str, bool]:
    """Canonical JSON of ``args``, redacted, cut to ``SUMMARY_LIMIT`` characters; and whether
    redaction changed anything (the receipt's ``tool_call.redacted``)."""
    value = {} if args is None else args
    # Most arguments hold no secret: proven so, they need no redacted copy.
    clean, redacted = (value, False) if holds_nothing_to_redact(value) else redact_changed(value)
    try:
        text = canonjson.dumps(clean)
    except (TypeError, ValueError, RecursionError):
        text = json.dumps(clean, ensure_ascii=False, sort_keys=True, default=repr)
    if len(text) > SUMMARY_LIMIT:
        text = text[: SUMMARY_LIMIT - len(_ELLIPSIS)] + _ELLIPSIS
    return text, redacted
