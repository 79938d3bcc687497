"""The model gateway's providers, by name: the built-ins, those installed in the entry-point
group ``trialrun.gateway_providers``, and those registered with ``register_provider``.

Kept by the same ``base.plugins.Registry`` as assertion types and incident importers: a built-in
is named here as ``module:attribute`` (and in pyproject.toml, as a third party declares its own)
and imported only when a request (or a cassette line) first names it, so a gateway that only
sees OpenAI traffic never imports the Bedrock provider.
"""

from __future__ import annotations

from collections.abc import Mapping

from trialrun.base.plugins import Registry
from trialrun.errors import ConfigError
from trialrun.gateway.provider import Provider
from trialrun.gateway.usage import Usage

ENTRY_POINT_GROUP = "trialrun.gateway_providers"

# In the order error messages list them.
BUILTIN_PROVIDERS: dict[str, str] = {
    "openai": "trialrun.gateway.providers.openai:PROVIDER",
    "anthropic": "trialrun.gateway.providers.anthropic:PROVIDER",
    "azure": "trialrun.gateway.providers.azure:PROVIDER",
    "gemini": "trialrun.gateway.providers.gemini:PROVIDER",
    "bedrock": "trialrun.gateway.providers.bedrock:PROVIDER",
}
"""Exactly as pyproject.toml declares them in ``trialrun.gateway_providers`` (a test holds the
two equal)."""


class ProviderPluginError(ConfigError):
    """A provider from an entry point cannot be loaded or is not a ``Provider``."""


def _require_provider(candidate: object, where: str) -> Provider:
    if not isinstance(candidate, Provider):
        raise ProviderPluginError(
            f"{where} is not a gateway provider: expected an instance of "
            f"trialrun.gateway.provider.Provider, found {type(candidate).__name__}"
        )
    if not candidate.name or "/" in candidate.name:
        raise ProviderPluginError(
            f"{where}: a provider needs a name without '/'; found {candidate.name!r}"
        )
    return candidate


REGISTRY = Registry(
    "gateway provider",
    ENTRY_POINT_GROUP,
    ProviderPluginError,
    _require_provider,
    builtins=BUILTIN_PROVIDERS,
)


def provider_names() -> tuple[str, ...]:
    """Every provider the gateway serves: the built-ins, installed ones, then registered ones."""
    return tuple(REGISTRY.names())


def get_provider(name: str) -> Provider | None:
    """The provider called ``name``, or None when there is none."""
    return REGISTRY.get(name)


def provider(name: str) -> Provider:
    """The provider called ``name``; ``KeyError`` when there is none (a caller's bug)."""
    found = get_provider(name)
    if found is None:
        raise KeyError(name)
    return found


def register_provider(new: Provider, *, replace: bool = False) -> None:
    """Serve ``new`` under ``/run/<run-id>/<new.name>/``; a taken name needs ``replace``."""
    REGISTRY.register(new, replace=replace)


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
