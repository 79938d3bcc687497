"""ECMAScript canonical JSON: the one serializer used for hashing and replay matching.

The output is what JavaScript's ``JSON.stringify`` writes for the same value once object keys
are sorted (UTF-16 code-unit order, as ``Array.prototype.sort`` and RFC 8785 do), with no
whitespace. That is what Run Receipt v0 reference receipts hash, so it must match byte for byte:

* numbers are IEEE doubles printed as ECMAScript ``Number::toString`` (``1e+21``, ``1e-7``,
  ``0`` for -0.0, ``1`` for 1.0); Python ints of 2**53 or more are first rounded to the double
  JavaScript would read (2**64 -> ``18446744073709552000``);
* strings use JSON.stringify escapes: ``\\b \\f \\n \\r \\t \\" \\\\``, other C0 controls as
  lowercase ``\\u00xx``, lone surrogates as lowercase ``\\udxxx``, everything else literal.

NaN and infinities raise ``ValueError``. JSON.stringify would silently write ``null`` and the
reference writer throws; a hash or a matching key built over a silently changed value is worse
than an error, so we throw too. Non-str dict keys and non-JSON values raise ``TypeError``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["dumps", "dumps_codepoint"]

_EXACT_INT_LIMIT = 2**53
_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_OR_PAIR = re.compile("([\ud800-\udbff][\udc00-\udfff])|[\ud800-\udfff]")
_NEEDS_ESCAPE = re.compile('[\x00-\x1f"\\\\\ud800-\udfff]')


# The stdlib encoder, compact and sorted: it writes what JSON.stringify writes for every value
# the fast path admits. Built once: json.dumps with options builds a new one for every call. No
# circular check: the fast path has already recursed through the value, so a cycle raised
# RecursionError before encoding.
_compact = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), sort_keys=True, check_circular=False
).encode

_SortKey = Callable[[str], Any]


def dumps(value: Any) -> str:
    """Canonical JSON text of ``value`` with object keys in UTF-16 code-unit order."""
    if _fast_path_exact(value):
        text = _compact(value)
        if text.isascii() or not _SURROGATE.search(text):  # isascii is a flag, no scan
            return text
    return _write(value, _utf16_units)


def dumps_codepoint(value: Any) -> str:
    """Like ``dumps`` with keys in code-point order (what the receipt spec text says)."""
    if _fast_path_exact(value):
        text = _compact(value)
        if text.isascii() or not _SURROGATE.search(text):
            return text
    return _write(value, None)


def _fast_path_exact(value: Any) -> bool:
    """Whether the stdlib encoder provably writes the canonical text for ``value``.

    True for ASCII keys (code-point and UTF-16 order agree), ints below 2**53, and floats that
    are not integral with 1e-4 <= |x| < 1e16 (there ``repr`` and Number::toString print the same
    shortest digits in plain decimal). Lone surrogates are caught afterwards on the output text.
    """
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return True
    if kind is int:
        return bool(-_EXACT_INT_LIMIT < value < _EXACT_INT_LIMIT)
    if kind is float:
        return not value.is_integer() and 1e-4 <= abs(value) < 1e16
    if kind is dict:
        # Written out rather than a call to _members_exact: objects are the common case.
        for key, item in value.items():
            if type(key) is not str or not key.isascii():
                return False
            member = type(item)
            if member is str or member is bool or item is None:
                continue
            if member is int:
                if not -_EXACT_INT_LIMIT < item < _EXACT_INT_LIMIT:
                    return False
            elif member is float:
                if item.is_integer() or not 1e-4 <= abs(item) < 1e16:
                    return False
            elif not _fast_path_exact(item):
                return False
        return True
    if kind is list or kind is tuple:
        return _members_exact(value)
    return False


def _members_exact(items: Iterable[Any]) -> bool:
    """``_fast_path_exact`` of every item, the scalars tested inline.

    This runs on every tool call's arguments and on every receipt event: a call per member (or
    a generator) costs more than the checks themselves.
    """
    for item in items:
        kind = type(item)
        if kind is str or kind is bool or item is None:
            continue
        if kind is int:
            if not -_EXACT_INT_LIMIT < item < _EXACT_INT_LIMIT:
                return False
        elif kind is float:
            if item.is_integer() or not 1e-4 <= abs(item) < 1e16:
                return False
        elif not _fast_path_exact(item):
            return False
    return True


def _write(value: Any, sort_key: _SortKey | None) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, int):
        if -_EXACT_INT_LIMIT < value < _EXACT_INT_LIMIT:
            return str(int(value))
        try:
            return _number(float(value))
        except OverflowError:
            raise ValueError(f"canonical JSON: integer too large for a double: {value}") from None
    if isinstance(value, float):
        return _number(value)
    if isinstance(value, dict):
        for key in value:
            if not isinstance(key, str):
                raise TypeError(
                    f"canonical JSON: object keys must be str, found {type(key).__name__} {key!r}"
                )
        keys = sorted(value, key=sort_key)
        members = (_string(k) + ":" + _write(value[k], sort_key) for k in keys)
        return "{" + ",".join(members) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(_write(item, sort_key) for item in value) + "]"
    raise TypeError(f"canonical JSON: expected a JSON value, found {type(value).__name__}")


def _utf16_units(key: str) -> bytes:
    # Big-endian UTF-16 bytes compare exactly like the sequence of code units.
    return key.encode("utf-16-be", "surrogatepass")


def _string(text: str) -> str:
    if not _NEEDS_ESCAPE.search(text):
        return '"' + text + '"'
    escaped = json.dumps(text, ensure_ascii=False)
    if _SURROGATE.search(escaped):
        escaped = _SURROGATE_OR_PAIR.sub(_surrogate_text, escaped)
    return escaped


def _surrogate_text(match: re.Match[str]) -> str:
    # A high+low pair held as two code points is one character to JavaScript (UTF-16 strings).
    pair = match.group(1)
    if pair is not None:
        return pair.encode("utf-16-be", "surrogatepass").decode("utf-16-be")
    return f"\\u{ord(match.group(0)):04x}"


def _number(x: float) -> str:
    """ECMAScript Number::toString(x) for a finite double, from repr's shortest digits."""
    if not math.isfinite(x):
        raise ValueError(f"canonical JSON: non-finite number {x!r} has no JSON form")
    if x == 0:
        return "0"
    sign = "-" if x < 0 else ""
    mantissa, _, exponent = repr(abs(x)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    # n: where the decimal point sits after the first significant digit run (value = 0.d * 10**n)
    n = len(whole) + (int(exponent) if exponent else 0)
    significant = digits.lstrip("0")
    n -= len(digits) - len(significant)
    digits = significant.rstrip("0")
    k = len(digits)
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * -n + digits
    e = n - 1
    exp_text = ("e+" if e >= 0 else "e-") + str(abs(e))
    if k == 1:
        return sign + digits + exp_text
    return sign + digits[0] + "." + digits[1:] + exp_text
