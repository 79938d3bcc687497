"""The model gateway's providers, by name: the built-ins loaded on first use, plus any
registered with ``register_provider``.

A built-in is named here as ``module:attribute`` and imported only when a request (or a
cassette line) first names it, the way ``base.plugins`` loads built-in assertion types: a
gateway that only sees OpenAI traffic never imports the Bedrock provider.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

from trialrun.base.plugins import BuiltinEntryPoint
from trialrun.gateway.provider import Provider
from trialrun.gateway.usage import Usage

# In the order error messages list them.
BUILTIN_PROVIDERS: dict[str, str] = {
    "openai": "trialrun.gateway.providers.openai:PROVIDER",
    "anthropic": "trialrun.gateway.providers.anthropic:PROVIDER",
    "azure": "trialrun.gateway.providers.azure:PROVIDER",
    "gemini": "trialrun.gateway.providers.gemini:PROVIDER",
    "bedrock": "trialrun.gateway.providers.bedrock:PROVIDER",
}

_lock = threading.Lock()
_loaded: dict[str, Provider] = {}
_registered: dict[str, Provider] = {}


def provider_names() -> tuple[str, ...]:
    """Every provider the gateway serves: the built-ins, then registered ones."""
    return (*BUILTIN_PROVIDERS, *(n for n in _registered if n not in BUILTIN_PROVIDERS))


def get_provider(name: str) -> Provider | None:
    """The provider called ``name``, or None when there is none."""
    found = _loaded.get(name)
    if found is not None:
        return found
    with _lock:
        found = _registered.get(name)
        if found is None:
            target = BUILTIN_PROVIDERS.get(name)
            if target is None:
                return None
            loaded = BuiltinEntryPoint(name, target).load()
            if not isinstance(loaded, Provider):
                raise TypeError(f"{target} is not a gateway Provider")
            found = loaded
        _loaded[name] = found
        return found


def provider(name: str) -> Provider:
    """The provider called ``name``; ``KeyError`` when there is none (a caller's bug)."""
    found = get_provider(name)
    if found is None:
        raise KeyError(name)
    return found


def register_provider(new: Provider, *, replace: bool = False) -> None:
    """Serve ``new`` under ``/run/<run-id>/<new.name>/``; a taken name needs ``replace``."""
    if not new.name or "/" in new.name:
        raise ValueError(f"a provider needs a name without '/'; found {new.name!r}")
    with _lock:
        if not replace and (new.name in BUILTIN_PROVIDERS or new.name in _registered):
            raise ValueError(f"provider {new.name!r} is already registered")
        _registered[new.name] = new
        _loaded.pop(new.name, None)


def extract_usage(
    provider_name: str,
    path: str,
    content_type: str,
    body: str,
    headers: Mapping[str, str] | None = None,
    *,
    method: str = "POST",
) -> Usage:
    """The usage a response of ``provider_name``'s ``path`` reports (a JSON body or a stream)."""
    found = get_provider(provider_name)
    if found is None:
        return Usage()
    return found.usage(method, path, content_type, body, headers or {})
