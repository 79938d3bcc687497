"""What makes two model calls "the same request": normalization and the recording key.

A recording is found again by its key, the SHA-256 of the provider, the endpoint path and the
*normalized, redacted* request body (canonical JSON). Normalizing removes what changes from one
run to the next without changing what the model is asked.

Default rules (``defaults=True``), applied first (after redaction):

* Top-level keys dropped: ``metadata`` (Claude Code puts a device and session id there),
  ``user``, ``stream_options``, ``prompt_cache_key``, ``safety_identifier``, ``service_tier``.
  ``seed`` is kept: an agent that changes its seed asks for a different sample. ``stream`` is
  kept: a streamed and a non-streamed call are different recordings (different bodies).
* Inside message text only (the ``messages``, ``input``, ``system``, ``instructions`` and
  ``prompt`` fields, Gemini's ``contents`` and ``systemInstruction``, at any depth below
  them): the run's working directory becomes ``<workdir>``, temporary paths ``<tmp>`` (the
  whole path), ISO date-times ``<datetime>``, ISO dates ``<date>``, UUIDs ``<uuid>``, and
  Claude Code's ``x-anthropic-billing-header`` line loses its value. Only message text,
  because model names carry dates too (``gpt-4o-2024-08-06``) and must keep them.

The user's rules come last, in the suite's ``normalization:`` language
(``trialrun.config.models.Normalization``: ``strip_keys``, ``strip_paths``, ``replace_paths``,
``replace_text``) and with its semantics, over the whole body. Before any of this the body is
redacted (``trialrun.base.redact``), so neither the stored request nor the key depends on a secret.

The whole sequence is repeated until a pass changes nothing (at most ``MAX_PASSES``), so
``normalize(normalize(x)) == normalize(x)``: a stored request is normalized again when a
cassette is loaded, which gives the same key under the same rules and the
key new rules would give after a rule was added (no need to re-record).
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trialrun.base import canonjson
from trialrun.base.redact import redact
from trialrun.config.normalize import compile_text_rules, normalize_text
from trialrun.httprec import matching

if TYPE_CHECKING:
    from trialrun.config.models import Normalization

VOLATILE_KEYS: frozenset[str] = frozenset(
    {
        "metadata",
        "user",
        "stream_options",
        "prompt_cache_key",
        "safety_identifier",
        "service_tier",
    }
)
CONTENT_FIELDS: frozenset[str] = frozenset(
    # Gemini's conversation is "contents", its system prompt "systemInstruction" (the REST API
    # also takes the snake_case spelling).
    {
        "messages",
        "input",
        "system",
        "instructions",
        "prompt",
        "contents",
        "systemInstruction",
        "system_instruction",
    }
)

_PATH_CHAR = r"""[^\s"'`<>|;,:)\]}\\]"""
# A path in prose may end a sentence: its last character is not a ".".
_PATH_REST = f"(?:{_PATH_CHAR}*" + r"""[^\s"'`<>|;,:)\]}\\.])?"""
# (pattern, flags, replacement), in the order they are applied; the workdir rule goes first.
DEFAULT_TEXT_RULES: tuple[tuple[str, str, str], ...] = (
    (
        r"(?<![\w.~/-])(?:/private)?/(?:tmp|var/tmp|var/folders)/" + _PATH_REST,
        "",
        "<tmp>",
    ),
    (
        r"(?<![\w\\])[a-z]:\\(?:users\\[^\\\s\"']+\\appdata\\local\\temp|windows\\temp)"
        r"\\(?:[^\s\"'`<>|;,)\]}]*[^\s\"'`<>|;,)\]}.:])?",
        "i",
        "<tmp>",
    ),
    (
        r"(?<![0-9a-fA-F])[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}(?![0-9a-fA-F])",
        "",
        "<uuid>",
    ),
    (
        r"(?<!\d)\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?"
        r"(?:Z|[+-]\d{2}:?\d{2})?(?!\d)",
        "",
        "<datetime>",
    ),
    (r"(?<!\d)\d{4}-\d{2}-\d{2}(?!\d)", "", "<date>"),
    (r"x-anthropic-billing-header:[^\n]*", "", "x-anthropic-billing-header: <normalized>"),
)
# Text none of the default rules can change lacks all of these; checking them first skips the
# rules (a scan each, from every position) for most message text, which is long and seldom
# holds anything volatile.
_MAY_BE_VOLATILE = re.compile(
    r"-(?:\d\d-|[0-9a-fA-F]{4}-)|/tmp/|/var/|:\\|x-anthropic-billing-header"
)
# Each pass is idempotent on its own, but one step can expose work for an earlier one (a date
# replaced before "sk-..." gives the redactor the word boundary it needs): passes repeat until
# nothing changes.
MAX_PASSES = 4


class RequestNormalizer(matching.RequestNormalizer):
    """Normalizes request bodies under one rule set (defaults + user rules + workdir)."""

    def __init__(
        self,
        rules: Normalization | None = None,
        *,
        defaults: bool = True,
        workdir: str | Path | None = None,
    ) -> None:
        super().__init__(rules)
        self.defaults = defaults
        self.workdir = str(workdir) if workdir is not None else None
        text_rules: list[tuple[str, str, str]] = []
        if defaults:
            text_rules.extend(
                (re.escape(spelling) + r"(?![\w-])", "", "<workdir>")
                for spelling in _workdir_spellings(workdir)
            )
            text_rules.extend(DEFAULT_TEXT_RULES)
        self._text_rules = compile_text_rules(tuple(text_rules))
        self._workdirs = _workdir_spellings(workdir) if defaults else []

    def normalize(self, body: Any) -> Any:
        """The normalized, redacted copy of a JSON request body (or of a non-JSON body's text)."""
        value = self._pass(body)
        for _ in range(MAX_PASSES - 1):
            again = self._pass(value)
            if again == value:
                break
            value = again
        return value

    def _pass(self, body: Any) -> Any:
        # Redaction first, so the user's rules have the last word (and cannot leave a secret).
        value = redact(body)
        if self.defaults and isinstance(value, dict):
            value = {
                key: (self._content(item) if key in CONTENT_FIELDS else item)
                for key, item in value.items()
                if key not in VOLATILE_KEYS
            }
        return super().normalize(value)

    def _content(self, value: Any) -> Any:
        return _map_strings(value, self._text)

    def _text(self, text: str) -> str:
        if _MAY_BE_VOLATILE.search(text) or any(w in text for w in self._workdirs):
            return normalize_text(text, self._text_rules)
        return text


def request_key(provider: str, path: str, normalized: Any) -> str:
    """The recording key: SHA-256 hex of the canonical JSON of provider, path and request."""
    text = canonjson.dumps([provider, path, normalized])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _workdir_spellings(workdir: str | Path | None) -> list[str]:
    """The working directory as given and resolved (``/var`` is ``/private/var`` on macOS)."""
    if workdir is None or not str(workdir).strip("/\\"):
        return []
    given = str(workdir).rstrip("/\\")
    spellings = {given}
    with contextlib.suppress(OSError):
        spellings.add(str(Path(given).resolve()))
    # The longest first, so a resolved path is not half replaced by its shorter spelling.
    return sorted(spellings, key=len, reverse=True)


def _map_strings(value: Any, change: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return change(value)
    if isinstance(value, dict):
        return {key: _map_strings(item, change) for key, item in value.items()}
    if isinstance(value, list):
        return [_map_strings(item, change) for item in value]
    return value


def load_rules(path: Path) -> Normalization:
    """Read a rules file (YAML or JSON, the shape of a suite's ``normalization:``).

    Every problem is a ``ConfigError`` at its line, including a regex that does not compile.
    """
    from trialrun.config.messages import spec_errors
    from trialrun.config.models import Normalization
    from trialrun.config.spec import SpecError, parse
    from trialrun.config.yamlload import load_yaml_file
    from trialrun.errors import ConfigError, ConfigErrors

    doc = load_yaml_file(path)
    try:
        rules = parse(Normalization, doc.data)
    except SpecError as exc:
        raise ConfigErrors(spec_errors(exc, doc, Normalization, "rules")) from None
    for index, rule in enumerate(rules.replace_text):
        try:
            compile_text_rules(((rule.pattern, rule.flags, rule.replacement),))
        except ConfigError as exc:
            where: list[str | int] = ["replace_text", index, exc.key or "pattern"]
            raise doc.error(exc.message, where, exc.key) from None
    return rules
