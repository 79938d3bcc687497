"""Token usage and cost of a model call, read from the response body the provider sent.

Where the numbers are:

* OpenAI chat completions and embeddings: ``usage.prompt_tokens`` / ``usage.completion_tokens``
  (cached: ``usage.prompt_tokens_details.cached_tokens``); streamed, the last chunk carries
  ``usage`` when the request asked for ``stream_options.include_usage``.
* OpenAI responses: ``usage.input_tokens`` / ``usage.output_tokens`` (cached:
  ``usage.input_tokens_details.cached_tokens``); streamed, in the ``response`` of the
  ``response.completed`` (or ``.incomplete`` / ``.failed``) event.
* Anthropic messages: ``usage.input_tokens`` / ``usage.output_tokens``; streamed,
  ``message_start`` has the input count and ``message_delta`` the cumulative output count.
  Anthropic counts cache reads and writes apart from ``input_tokens``; ``tokens_in`` adds them
  back, so it means "prompt tokens" for both providers, and ``tokens_cached`` is the cache reads.
* ``count_tokens`` answers are not usage: counting is free, so they give no tokens.

Cost needs a price table (``{model: {input_per_mtok, output_per_mtok[, cached_input_per_mtok]}}``
in US dollars per million tokens); without one, or for a model it does not list, the cost is
None, never a guess. A model is looked up by the name the request asked for, then by the name
the response reported; there is no prefix matching (``gpt-4o`` must not price ``gpt-4o-mini``).
Cache writes are priced as input.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trialrun.base.linesplit import sse_lines
from trialrun.base.quoting import excerpt
from trialrun.base.reported import as_count
from trialrun.config.spec import Float, MapOf, Nested, Record, SpecError, keyed, parse_value

_NOT_USAGE_PATHS = frozenset({"/v1/messages/count_tokens"})


@dataclass(frozen=True)
class Usage:
    """What one response reports; None where it reports nothing."""

    model: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    tokens_cached: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "tokens_cached": self.tokens_cached,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Usage:
        return cls(
            model=_text(data.get("model")),
            tokens_in=as_count(data.get("tokens_in")),
            tokens_out=as_count(data.get("tokens_out")),
            tokens_cached=as_count(data.get("tokens_cached")),
        )


def extract_usage(provider: str, path: str, content_type: str, body: str) -> Usage:
    """The usage a response body reports (a JSON body or an SSE stream)."""
    if path in _NOT_USAGE_PATHS:
        return Usage(model=_model_of(json_or_none(body)))
    if content_type.split(";")[0].strip().lower() == "text/event-stream":
        return _from_stream(provider, body)
    data = json_or_none(body)
    if not isinstance(data, dict):
        return Usage()
    raw = data.get("usage")
    return _from_raw(provider, raw if isinstance(raw, dict) else {}, _model_of(data))


def iter_sse_data(text: str) -> Iterator[tuple[str | None, str]]:
    """``(event name, data)`` of each server-sent event, data lines joined by newlines."""
    event: str | None = None
    data: list[str] = []
    for line in sse_lines(text):
        if not line:
            if data:
                yield event, "\n".join(data)
            event, data = None, []
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "event":
            event = value
        elif field == "data":
            data.append(value)
    if data:
        yield event, "\n".join(data)


def _from_stream(provider: str, body: str) -> Usage:
    merged: dict[str, Any] = {}
    model: str | None = None
    for _, data in iter_sse_data(body):
        payload = json_or_none(data)
        if not isinstance(payload, dict):
            continue  # "[DONE]" and keep-alive comments
        # A chunk (chat), a lifecycle event's response (responses) or message_start's message.
        for holder in (payload, payload.get("response"), payload.get("message")):
            if not isinstance(holder, dict):
                continue
            model = _model_of(holder) or model
            usage = holder.get("usage")
            if isinstance(usage, dict):
                # message_delta repeats some counts as null: only reported values override.
                merged.update({k: v for k, v in usage.items() if v is not None})
    return _from_raw(provider, merged, model)


def _from_raw(provider: str, raw: Mapping[str, Any], model: str | None) -> Usage:
    if "prompt_tokens" in raw:  # chat completions, embeddings
        details = raw.get("prompt_tokens_details")
        return Usage(
            model=model,
            tokens_in=as_count(raw.get("prompt_tokens")),
            tokens_out=as_count(raw.get("completion_tokens")) or 0,
            tokens_cached=as_count(details.get("cached_tokens"))
            if isinstance(details, dict)
            else None,
        )
    if "input_tokens" not in raw and "output_tokens" not in raw:
        return Usage(model=model)
    tokens_in = as_count(raw.get("input_tokens"))
    tokens_out = as_count(raw.get("output_tokens"))
    if provider == "anthropic":
        reads = as_count(raw.get("cache_read_input_tokens"))
        writes = as_count(raw.get("cache_creation_input_tokens"))
        if tokens_in is not None:
            tokens_in += (reads or 0) + (writes or 0)
        return Usage(model, tokens_in, tokens_out, reads)
    details = raw.get("input_tokens_details")
    cached = as_count(details.get("cached_tokens")) if isinstance(details, dict) else None
    return Usage(model, tokens_in, tokens_out, cached)


def json_or_none(text: str) -> Any:
    """``text`` as JSON, or None when it is not JSON: a body read only for what it may hold."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _model_of(data: Any) -> str | None:
    return _text(data.get("model")) if isinstance(data, dict) else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


# ---- prices ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Price:
    """US dollars per million tokens."""

    input_per_mtok: float
    output_per_mtok: float
    cached_input_per_mtok: float | None = None


class _PriceEntry(Record):
    """A model's entry in a price table, as the file writes it."""

    input_per_mtok: float = keyed(Float(ge=0, finite=True))
    output_per_mtok: float = keyed(Float(ge=0, finite=True))
    cached_input_per_mtok: float | None = keyed(Float(ge=0, finite=True), default=None)


_PRICE_TABLE = MapOf(Nested(_PriceEntry))


def cost_usd(
    prices: Mapping[str, Price] | None, models: Sequence[str | None], usage: Usage
) -> float | None:
    """The call's cost from the first of ``models`` the table lists; None when unknown."""
    if not prices or usage.tokens_in is None or usage.tokens_out is None:
        return None
    price = next((prices[m] for m in models if m is not None and m in prices), None)
    if price is None:
        return None
    cached = min(usage.tokens_cached or 0, usage.tokens_in)
    cached_price = price.cached_input_per_mtok
    if cached_price is None:
        cached, cached_price = 0, 0.0
    return (
        (usage.tokens_in - cached) * price.input_per_mtok
        + cached * cached_price
        + usage.tokens_out * price.output_per_mtok
    ) / 1_000_000


def load_prices(path: Path, *, display: str | None = None) -> dict[str, Price]:
    """Read a price table (YAML or JSON); every problem is a ConfigError at its line.

    ``display``: how errors name the file (default: ``path`` as given).
    """
    from trialrun.config.messages import spec_errors
    from trialrun.config.yamlload import load_yaml_file
    from trialrun.errors import ConfigErrors

    doc = load_yaml_file(path, display=display)
    try:
        table: dict[str, _PriceEntry] = parse_value(_PRICE_TABLE, doc.data)
    except SpecError as exc:
        errors = spec_errors(exc, doc, _PRICE_TABLE, "the price table", owner=_price_owner)
        raise ConfigErrors(errors) from None
    return {
        model: Price(entry.input_per_mtok, entry.output_per_mtok, entry.cached_input_per_mtok)
        for model, entry in table.items()
    }


def _price_owner(loc: tuple[str | int, ...]) -> str | None:
    # An entry's own problems name its model; a model name that is no string is its own message.
    return f"prices of {_shown(loc[0])}" if len(loc) >= 2 and loc[-1] != "[key]" else None


def _shown(value: Any) -> str:
    """A value of the price table as a message quotes it: short, secrets redacted."""
    return excerpt(repr(value))
