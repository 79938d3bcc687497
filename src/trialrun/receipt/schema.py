"""Check each event of a receipt against the shipped JSON Schema (run-receipt-v0.schema.json).

The schema covers what the chain does not: the envelope's formats and the required members of
each standard event type (spec section 4). Unknown event types and members are allowed, as the
spec requires. The hash chain itself is ``verify.verify_receipt``'s job; a receipt can pass one
check and fail the other. ``jsonschema`` is imported on first use only.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from trialrun.base.redact import redact_text
from trialrun.errors import ReceiptError
from trialrun.receipt.verify import MAX_LINE_BYTES, STRICT_JSON

if TYPE_CHECKING:
    from jsonschema import ValidationError
    from jsonschema.protocols import Validator

__all__ = ["SCHEMA_PATH", "load_schema", "schema_problems"]

SCHEMA_PATH = Path(__file__).with_name("run-receipt-v0.schema.json")
_PROBLEM_CHARS = 300
_SKIP_CHUNK_BYTES = 1 << 20


def load_schema() -> dict[str, Any]:
    """The shipped Run Receipt v0 event schema (JSON Schema 2020-12)."""
    schema: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return schema


def schema_problems(path: str | Path, *, max_problems: int = 1000) -> list[str]:
    """Every schema problem of the receipt at ``path``, one ``"line N: <problem>"`` each.

    Lines follow the verifier's reading (split on ``\\n``, one final newline allowed), so a blank
    or broken line is reported as not valid JSON. After ``max_problems`` problems the list ends
    with a line saying how many more were found. Raises ``ReceiptError`` if the file cannot be
    read.
    """
    validator = _validator()
    problems: list[str] = []
    extra = 0
    try:
        with open(path, "rb") as stream:
            for line_no, line_problems in _line_problems(stream, validator):
                for problem in line_problems:
                    if len(problems) < max_problems:
                        problems.append(f"line {line_no}: {problem}")
                    else:
                        extra += 1
    except OSError as exc:
        raise ReceiptError(f"cannot read receipt {path}: {exc.strerror or exc}") from exc
    if extra:
        problems.append(f"... and {extra} more problems")
    return problems


def _line_problems(stream: BinaryIO, validator: Validator) -> Iterator[tuple[int, list[str]]]:
    line_no = 0
    while True:
        raw = stream.readline(MAX_LINE_BYTES + 1)
        if not raw:
            return
        line_no += 1
        if len(raw) > MAX_LINE_BYTES and raw[-1] != 0x0A:
            _skip_rest_of_line(stream)
            yield line_no, [f"longer than {MAX_LINE_BYTES} bytes, not checked"]
            continue
        try:
            event = STRICT_JSON.decode(raw.decode("utf-8", "replace"))
        except (ValueError, RecursionError):
            yield line_no, ["not valid JSON"]
            continue
        try:
            errors = sorted(validator.iter_errors(event), key=_error_order)
        except RecursionError:
            yield line_no, ["nested too deeply to check"]
            continue
        if errors:
            yield line_no, [_describe(error) for error in errors]


def _skip_rest_of_line(stream: BinaryIO) -> None:
    while True:
        chunk = stream.readline(_SKIP_CHUNK_BYTES)
        if not chunk or chunk.endswith(b"\n"):
            return


def _error_order(error: ValidationError) -> tuple[str, str]:
    return (error.json_path, error.message)


def _describe(error: ValidationError) -> str:
    where = error.json_path
    if error.validator == "not" and list(error.absolute_schema_path)[-2:] == ["then", "not"]:
        message = "only run_end may carry a signature"
    else:
        message = redact_text(error.message)
    if len(message) > _PROBLEM_CHARS:
        message = message[:_PROBLEM_CHARS] + "..."
    return f"{where}: {message}"


@cache
def _validator() -> Validator:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(load_schema())
