"""Secret redaction, shared by cassettes, receipts, run logs, reports and summaries.

Two kinds of rule, both best effort:

* **Shapes in text** (``redact_text``, applied to every string): the provider keys and tokens
  catalogued in ``secretshapes`` (OpenAI/Anthropic ``sk-``, Stripe ``sk_live_``/``rk_live_``/
  ``whsec_``, GitHub, GitLab ``glpat-``, Hugging Face ``hf_``, Slack tokens and webhook URLs,
  AWS key ids and a secret key beside one, Google ``AIza`` and ``ya29.``, npm, PyPI, SendGrid
  ``SG.``, Twilio ``SK``, Databricks ``dapi``, Discord bot tokens, Azure SAS ``sig=``), JWTs and
  PEM or PGP private key blocks become ``[REDACTED]``; ``Bearer <token>`` keeps ``Bearer``;
  ``scheme://user:pass@host`` keeps everything but the password; ``NAME=value`` /
  ``name: value`` / ``"name": "value"`` assignments (any case, shell, YAML, JSON or a Python
  dict in text) lose the value when the name is a secret's name (``AccountKey=`` of an Azure
  connection string included); quoted JSON stays JSON.
* **Secret names** (``is_sensitive_key``), for dict keys and assignment names alike. A name is
  judged on its words (split on ``_ - .`` and camelCase): it is sensitive when it holds a secret
  noun (``password``, ``passwd``, ``pwd``, ``secret``, ``token``, ``credential(s)``, ``cookie``,
  ``authorization``, ``api key``, ``private key``, ``session id``, ...) and no word after that
  noun says the value is only *about* the secret (``token_count``, ``secretCount``,
  ``reset_password_url``, ``token_type``). So ``monkey``, ``keyboard``, ``author``,
  ``auth_method``, ``max_tokens`` and ``tokens_in`` are left alone, unlike the RunLedger and
  receipt reference rules, which matched substrings.

Decisions:

* Under a sensitive key every value that holds something is replaced, whatever its type
  (numbers, lists, nested objects); ``None``, ``""``, ``[]`` and ``{}`` are kept, since they
  show only that nothing was there. An authorization scheme prefix is kept
  (``"Bearer [REDACTED]"``).
* Dict keys are never rewritten: they name fields. Some mappings are keyed by *data* instead
  (tool names, case ids): a tool called ``reset_password`` must not lose its call count. The
  mappings directly under the field names in ``data_keys`` (default ``DATA_KEYS``, the
  ``tool_calls_by_name`` / ``tool_errors_by_name`` counters of summary.json) keep their keys
  unjudged; their values are still redacted. Other data-keyed mappings are the caller's to
  pass in ``data_keys``. Values are never judged by name: ``{"tool": "reset_password"}`` stays.
* Values that are not JSON (other objects) are returned as they are.

Differences from the receipt reference's vectors (shared/conformance/receipt-v0): we fix its
false positives (``MONKEY=banana``, ``{"monkey": ..}``, ``{"keyboard": ..}`` stay) and its misses
(``aws_secret_access_key=abc``, ``Passwd=abc``, ``{"credential": {...}}`` are redacted).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from functools import lru_cache
from typing import Any

from trialrun.base import secretshapes as shapes

__all__ = [
    "DATA_KEYS",
    "REDACTED",
    "holds_nothing_to_redact",
    "is_sensitive_key",
    "json_holds_nothing_to_redact",
    "redact",
    "redact_changed",
    "redact_command",
    "redact_each",
    "redact_shared",
    "redact_text",
]

REDACTED = shapes.REDACTED
DATA_KEYS: frozenset[str] = frozenset(
    {"tool_calls_by_name", "tool_errors_by_name", "unused_recordings_by_tool"}
)

# ---- names -------------------------------------------------------------------------------


def _word_set(words: str) -> frozenset[str]:
    return frozenset(words.split())


_SECRET_WORDS = _word_set(
    "password passwords passwd passphrase pwd secret secrets token credential credentials cookie"
    " cookies authorization bearer jwt apikey privatekey secretkey accesskey sessionid"
)
# Single lowercase words such as ``accesstoken`` or ``dbpassword`` end with the noun.
_SECRET_SUFFIXES = ("token", "secret", "password", "passwd", "apikey", "credentials", "cookie")
# ``AccountKey`` is an Azure storage account's shared key.
_KEY_QUALIFIERS = _word_set("api private secret access signing encryption master account")
# ``page_token`` or ``max_token`` name a cursor or a count, not a credential.
_NOT_SECRET_BEFORE_TOKEN = _word_set(
    "page next continuation pagination cursor sync max min total num input output prompt"
    " completion cached reasoning"
)
# A word after the secret noun that makes the value metadata about the secret.
_METADATA_WORDS = _word_set(
    "count counts num number total len length size limit max min budget cost rate url uri urls"
    " link path file dir method methods type kind name names id ids index version expires expiry"
    " expiration exp ttl at in out ms sec seconds used usage field fields policy hint required"
    " enabled present provided valid status format endpoint env source location label"
)
_SHELL_VARIABLES = frozenset({"PWD", "OLDPWD"})  # the working directory, not a password
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


@lru_cache(maxsize=4096)
def is_sensitive_key(name: str) -> bool:
    """Whether a field or variable called ``name`` holds a secret (judged on its words)."""
    if name in _SHELL_VARIABLES:
        return False
    words = [word.lower() for word in _WORD.findall(name)]
    last_secret = -1
    for i, word in enumerate(words):
        previous = words[i - 1] if i else ""
        if word == "token" and previous in _NOT_SECRET_BEFORE_TOKEN:
            continue
        if (
            word in _SECRET_WORDS
            or word.endswith(_SECRET_SUFFIXES)
            or (word == "key" and previous in _KEY_QUALIFIERS)
            or (word == "id" and previous == "session")
        ):
            last_secret = i
    if last_secret < 0:
        return False
    return not any(word in _METADATA_WORDS for word in words[last_secret + 1 :])


# ---- text --------------------------------------------------------------------------------


_TOKEN_RULES = shapes.TOKEN_RULES
_BEARER = re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]{12,}")
# Short strings (most of them) skip every rule after one search for anything that could start
# a secret. Long strings skip it: an alternation has no literal to skip to.
_SHORT = 4096
_ANYTHING = shapes.ANYTHING
_MAYBE_SECRET = shapes.MAYBE_SECRET
_CACHED = 256
_SHAPES = shapes.SHAPES

# Assignments (``NAME=value``, ``name: value``, ``"name": "value"``) are found from a secret
# noun in the name and the separator after it, in the lowercased text; the whole name is then
# judged by is_sensitive_key. Two searches give the same candidates, and the cheaper one for the
# text is used: backwards from each separator (in the reversed text) when separators are rare,
# else forwards from each noun (one literal search per noun). ``bearer`` and ``jwt`` alone are
# not searched as names: their values have shapes of their own, caught above.
_NOUNS = shapes.NOUNS
_FORWARD_ASSIGNMENTS = tuple(
    re.compile(noun + r"(?P<rest>[a-z0-9_.-]*+)(?P<quote>[\"']?)\s*+[=:]") for noun in _NOUNS
)
_SEPARATORS_PER_CHAR_FOR_BACKWARDS = 1 / 50
_DENSITY_SAMPLE = 65536


def _reversed_assignment(name_chars: str, flags: int) -> re.Pattern[str]:
    reversed_nouns = "|".join(noun[::-1] for noun in _NOUNS)
    return re.compile(
        r"[=:]\s*+(?P<quote>[\"']?)(?P<name>" + name_chars + "*?(?:" + reversed_nouns + "))",
        flags,
    )


_REVERSED_ASSIGNMENT = _reversed_assignment("[a-z0-9_.-]", 0)
_REVERSED_ASSIGNMENT_ANY_CASE = _reversed_assignment("[A-Za-z0-9_.-]", re.IGNORECASE)
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
_VALUE = re.compile(
    r"\s*(?P<scheme>(?i:bearer|basic|token|digest)\s+)?"
    # an unterminated quote still hides what follows it, up to the next space
    r"(?!=)(?P<value>\"(?:[^\"\\\n]|\\.)*\"|'[^'\n]*'|[\"']?[^\s\"',;]+|[\"'])"
)
_SCHEME = re.compile(r"(?i)(?:bearer|basic|token|digest)\s+")


def redact_command(argv: Iterable[str]) -> list[str]:
    """A command's words, each redacted; the word after an option named for a secret
    (``--api-key VALUE``, ``--password VALUE``) is replaced whole, since no rule sees it alone.
    """
    out: list[str] = []
    hide_next = False
    for word in argv:
        if hide_next and word and not word.startswith("-"):
            out.append(REDACTED)
        else:
            out.append(redact_text(word))
        hide_next = word.startswith("-") and "=" not in word and is_sensitive_key(word.lstrip("-"))
    return out


def redact_text(text: str) -> str:
    """``text`` with every recognised secret replaced (see the module docstring)."""
    if len(text) <= _CACHED:
        return _redact_short_text(text)
    if len(text) > _SHORT:
        return _redact_any_text(text)
    return _redact_any_text(text) if _might_hold_a_secret(text) else text


@lru_cache(maxsize=4096)
def _redact_short_text(text: str) -> str:
    # A trace repeats its short values (event types, case ids, tool names) thousands of times.
    return _redact_any_text(text) if _might_hold_a_secret(text) else text


def _might_hold_a_secret(text: str) -> bool:
    return _MAYBE_SECRET.search(text) is not None and _ANYTHING.search(text) is not None


def _redact_any_text(text: str) -> str:
    if len(text) > _SHORT or _SHAPES.search(text):
        text = _redact_shapes(text)
    # JSON text (separators, no secret shape) skips the shapes and comes straight here.
    if "=" in text or ":" in text:
        text = _redact_assignments(text, text.lower())
    return text


def _redact_shapes(text: str) -> str:
    """``text`` with the token shapes and ``Bearer`` values replaced."""
    if ("AKIA" in text or "ASIA" in text) and shapes.AWS_KEY_ID.search(text):
        # An AWS secret access key has no prefix of its own: beside a key id, 40 characters
        # of base64 standing alone are taken for one.
        text = shapes.AWS_SECRET_BESIDE_ID.sub(REDACTED, text)
    for required, pattern, replacement in _TOKEN_RULES:
        if required in text:
            text = pattern.sub(replacement, text)
    for hint, pattern, replacement in shapes.HINTED_RULES:
        if hint.search(text):
            text = pattern.sub(replacement, text)
    if "bearer" in text.lower():
        text = _BEARER.sub(r"\g<1>" + REDACTED, text)
    return text


def _assignment_candidates(text: str, lowered: str) -> list[tuple[int, int, bool]]:
    """``(separator index, name end, name quoted)`` of every name holding a noun, in order."""
    size = len(text)
    if len(lowered) != size:
        # lower() moved offsets (U+0130 lowercases to two characters): search case-insensitively.
        matches = _REVERSED_ASSIGNMENT_ANY_CASE.finditer(text[::-1])
    elif _separator_density(text) < _SEPARATORS_PER_CHAR_FOR_BACKWARDS:
        matches = _REVERSED_ASSIGNMENT.finditer(lowered[::-1])
    else:
        found = {
            match.end() - 1: (match.end() - 1, match.end("rest"), bool(match["quote"]))
            for pattern in _FORWARD_ASSIGNMENTS
            for match in pattern.finditer(lowered)
        }
        return sorted(found.values())
    return sorted(
        (size - 1 - match.start(), size - match.start("name"), bool(match["quote"]))
        for match in matches
    )


def _separator_density(text: str) -> float:
    """Separators per character, estimated from the start of a long text (counting is slow)."""
    sample = min(len(text), _DENSITY_SAMPLE)
    return (text.count("=", 0, sample) + text.count(":", 0, sample)) / max(sample, 1)


def _redact_assignments(text: str, lowered: str) -> str:
    if len(lowered) == len(text):
        # Every candidate name holds a noun, found literally in ``lowered`` (the case-insensitive
        # search for the other case can match more, e.g. U+017F for "s"); JSON text with many
        # separators but no noun, such as most tool arguments, ends here.
        for noun in _NOUNS:
            if noun in lowered:
                break
        else:
            return text
    pieces: list[str] = []
    copied_to = 0
    for separator, name_end, name_quoted in _assignment_candidates(text, lowered):
        if separator < copied_to:
            continue  # inside a value already redacted
        name_start = name_end
        while name_start and text[name_start - 1] in _NAME_CHARS:
            name_start -= 1
        if not is_sensitive_key(text[name_start:name_end]):
            continue
        found = _VALUE.match(text, separator + 1)
        if found is None or _unquote(found["value"]).startswith(REDACTED):
            continue
        masked, end = _masked_value(found, name_quoted=name_quoted)
        if masked is None:
            continue
        pieces.append(text[copied_to : found.start("value")])
        pieces.append(masked)
        copied_to = end
    if not pieces:
        return text
    pieces.append(text[copied_to:])
    return "".join(pieces)


def _masked_value(found: re.Match[str], *, name_quoted: bool) -> tuple[str | None, int]:
    """The replacement for an assignment's value and where the replaced part ends."""
    value, start, end = found["value"], found.start("value"), found.end("value")
    if value[0] in "\"'":
        # A quoted name means JSON or a dict literal: keep it well formed. Shell-style
        # ``NAME="a b"`` drops the quotes, as the reference writer does.
        return (value[0] + REDACTED + value[0] if name_quoted else REDACTED), end
    if not name_quoted:
        return REDACTED, end
    # A bare JSON value ends before the closing bracket of its object or array.
    bare = value.replace(REDACTED, "#" * len(REDACTED))  # its "]" closes nothing
    cut = min((i for i in (bare.find("}"), bare.find("]")) if i >= 0), default=-1)
    if cut == 0:
        return None, end
    return '"' + REDACTED + '"', (start + cut if cut > 0 else end)


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


# ---- values ------------------------------------------------------------------------------


def redact(value: Any, *, data_keys: Collection[str] = DATA_KEYS) -> Any:
    """A redacted deep copy of a JSON value; the input is never mutated."""
    return _redact(value, data_keys)[0]


def redact_changed(value: Any, *, data_keys: Collection[str] = DATA_KEYS) -> tuple[Any, bool]:
    """``(redact(value), whether anything was replaced)``."""
    return _redact(value, data_keys)


def _redact(value: Any, data_keys: Collection[str]) -> tuple[Any, bool]:
    if isinstance(value, str):
        redacted = redact_text(value)
        return redacted, redacted != value
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        changed = False
        for key, item in value.items():
            if isinstance(key, str) and is_sensitive_key(key):
                out[key], item_changed = _mask(item)
            elif isinstance(item, str):
                # Inline: most members are strings or scalars, and a trace has many of them.
                redacted = out[key] = redact_text(item)
                item_changed = redacted != item
            elif key in data_keys and isinstance(item, dict):
                out[key], item_changed = _redact_data_mapping(item, data_keys)
            elif isinstance(item, dict | list | tuple):
                out[key], item_changed = _redact(item, data_keys)
            else:
                out[key] = item
                continue
            changed = changed or item_changed
        return out, changed
    if isinstance(value, list | tuple):
        results = [_redact(item, data_keys) for item in value]
        items = [item for item, _ in results]
        return (items if isinstance(value, list) else tuple(items)), any(c for _, c in results)
    return value, False


def _redact_data_mapping(mapping: dict[Any, Any], data_keys: Collection[str]) -> tuple[Any, bool]:
    """A mapping keyed by data (tool names): keys are not judged, values are redacted."""
    out: dict[Any, Any] = {}
    changed = False
    for key, item in mapping.items():
        out[key], item_changed = _redact(item, data_keys)
        changed = changed or item_changed
    return out, changed


def _mask(value: Any) -> tuple[Any, bool]:
    """The value of a sensitive field: anything that holds something becomes REDACTED."""
    if value is None or (isinstance(value, str | list | tuple | dict) and not value):
        return value, False
    if isinstance(value, str):
        scheme = _SCHEME.match(value)
        prefix = scheme.group(0) if scheme else ""
        if value[len(prefix) :] == REDACTED:
            return value, False
        return prefix + REDACTED, True
    return REDACTED, True


# ---- whole values at once ------------------------------------------------------------------

# Every rule above changes only text whose lowercase holds one of these (secretshapes).
_NEEDED_LITERALS = shapes.NEEDED_LITERALS
_GITHUB = shapes.GITHUB
_ANY_NEEDED_LITERAL = shapes.ANY_NEEDED_LITERAL


def _holds_no_needed_literal(text: str) -> bool:
    """Whether ``redact_text`` provably returns ``text`` unchanged (False: a rule might apply)."""
    return _ANY_NEEDED_LITERAL.search(text.lower()) is None


def json_holds_nothing_to_redact(text: str) -> bool:
    """Whether ``redact`` provably changes nothing in the value ``text`` encodes.

    ``text`` is the value's JSON with non-ASCII characters as they are (``ensure_ascii=False``,
    as ``canonjson`` and run.jsonl write it). Every key and string appears in it literally, since
    JSON escapes only quotes, backslashes and control characters and no needed literal holds
    one; so one scan of the whole text does what ``holds_nothing_to_redact`` does string by
    string, in C. A literal made by joining two strings, or in the text a ``default=`` hook wrote
    for some object, only gives a False, which means that a rule might apply.
    """
    return _holds_no_needed_literal(text)


# Strings and keys already scanned, and found clean: a trace repeats its keys, event types,
# tool names and often its results thousands of times. Bounded: cleared when full.
_CLEAN_TEXTS: dict[str, bool] = {}
_CLEAN_KEYS: set[Any] = set()
_CACHED_TEXT_CHARS = 256  # with _CACHE_ENTRIES: at most ~8 M characters held
_SCALARS = frozenset({int, float, bool, type(None)})
_CACHE_ENTRIES = 32768


def _text_is_clean(text: str) -> bool:
    """``_holds_no_needed_literal(text)``, remembered."""
    clean = _holds_no_needed_literal(text)
    if len(text) <= _CACHED_TEXT_CHARS:
        if len(_CLEAN_TEXTS) >= _CACHE_ENTRIES:
            _CLEAN_TEXTS.clear()
        _CLEAN_TEXTS[text] = clean
    return clean


def holds_nothing_to_redact(value: Any) -> bool:
    """Whether ``redact_changed(value) == (value, False)``, proven without copying ``value``.

    False means only that a rule might apply (``redact`` decides). Keys are judged by name as
    ``redact`` judges them, strings by the literals every text rule needs; both are remembered,
    so the keys, types and names a trace repeats cost a lookup. Subclasses of str and of the
    containers answer False, for ``redact`` to handle as it does. Raises RecursionError on a
    cycle, as ``redact`` does.
    """
    kind = type(value)
    if kind is dict:
        # One loop, the common members decided inline: a trace has a great many of them.
        for key, item in value.items():
            if key not in _CLEAN_KEYS and not _key_is_clean(key):
                return False
            kind = type(item)
            if kind is str:
                clean = _CLEAN_TEXTS.get(item)
                if not (_text_is_clean(item) if clean is None else clean):
                    return False
            elif kind not in _SCALARS and not holds_nothing_to_redact(item):
                return False
        return True
    if kind is list or kind is tuple:
        for item in value:
            kind = type(item)
            if kind is str:
                clean = _CLEAN_TEXTS.get(item)
                if not (_text_is_clean(item) if clean is None else clean):
                    return False
            elif kind not in _SCALARS and not holds_nothing_to_redact(item):
                return False
        return True
    if kind is str:
        return _text_is_clean(value)
    # Other scalars and objects are never changed; subclasses of str and containers are
    # left to redact's own walk.
    return not isinstance(value, str | dict | list | tuple)


def _key_is_clean(key: Any) -> bool:
    if type(key) is str and is_sensitive_key(key):
        return False
    if isinstance(key, str) and type(key) is not str:
        return False  # redact judges a str subclass too: let it
    if len(_CLEAN_KEYS) >= _CACHE_ENTRIES:
        _CLEAN_KEYS.clear()
    _CLEAN_KEYS.add(key)
    return True


def redact_shared(value: Any, *, data_keys: Collection[str] = DATA_KEYS) -> Any:
    """``redact(value)``, except that a value with nothing to redact is returned itself.

    For values nobody mutates afterwards (a finished run's events): a walk that looks up the
    strings and keys it has seen before, instead of a walk that copies everything.
    """
    return value if holds_nothing_to_redact(value) else redact(value, data_keys=data_keys)


def redact_each(values: Iterable[Any]) -> list[Any]:
    """``[redact_shared(value) for value in values]``, without a call to it per value."""
    return [value if holds_nothing_to_redact(value) else redact(value) for value in values]
