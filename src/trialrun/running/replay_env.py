"""The environment an agent runs under in replay and record: what trialrun sets there, and why.

Replay is meant to give the same run on a laptop and on any CI runner, so the agent gets a fixed
time zone, hash seed, locale and seed, and the telemetry of the common agent frameworks is
switched off (it would leave the machine, and in record mode it would be recorded by the
network recorder, then never asked for in replay). Every provider credential the environment
holds is replaced by a placeholder in replay: a replayed agent never holds a real key, so a call
that escapes trialrun's services fails at the provider instead of spending money.

Record mode gets the same determinism and telemetry settings, so that what it records is what
replay will ask for, and the real keys (it calls the providers). Live mode is left untouched.

A suite's ``replay_env:`` overrides any of it: a string sets the variable, null leaves it as the
environment has it. docs/offline.md prints ``SETTINGS`` and ``CREDENTIALS`` as a table; a test
holds the page to this module.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from trialrun.config.models import Mode

PLACEHOLDER = "sk-replay"
"""What every provider credential reads in replay (``sk-`` because some SDKs check the shape)."""

Group = Literal["determinism", "telemetry"]


@dataclass(frozen=True, slots=True)
class Setting:
    """One variable trialrun sets for the agent."""

    name: str
    value: str
    group: Group
    why: str
    record: bool = True
    """Set in record mode too (else in replay only)."""


SETTINGS: tuple[Setting, ...] = (
    Setting("TZ", "UTC", "determinism", "dates and times render the same on every machine"),
    Setting(
        "PYTHONHASHSEED", "0", "determinism", "the iteration order of sets of strings is fixed"
    ),
    Setting("LC_ALL", "C.UTF-8", "determinism", "UTF-8 text and one collation everywhere"),
    Setting("LANG", "C.UTF-8", "determinism", "the same, for programs that read only LANG"),
    Setting("TRIALRUN_SEED", "0", "determinism", "a fixed seed for the agent's own randomness"),
    Setting("OPENAI_AGENTS_DISABLE_TRACING", "1", "telemetry", "OpenAI Agents SDK trace export"),
    Setting("LANGCHAIN_TRACING_V2", "false", "telemetry", "LangSmith tracing (LangChain)"),
    Setting("LANGCHAIN_TRACING", "false", "telemetry", "LangSmith tracing (older name)"),
    Setting("LANGSMITH_TRACING", "false", "telemetry", "LangSmith tracing"),
    Setting("LANGSMITH_TRACING_V2", "false", "telemetry", "LangSmith tracing (older name)"),
    Setting("LOGFIRE_SEND_TO_LOGFIRE", "false", "telemetry", "Pydantic Logfire export"),
    Setting("OTEL_SDK_DISABLED", "true", "telemetry", "any OpenTelemetry SDK exporter"),
    Setting("DO_NOT_TRACK", "1", "telemetry", "the cross-tool opt-out many CLIs and SDKs honour"),
    Setting("HF_HUB_DISABLE_TELEMETRY", "1", "telemetry", "Hugging Face Hub usage reports"),
    Setting(
        "HF_HUB_OFFLINE",
        "1",
        "telemetry",
        "Hugging Face Hub uses its local cache only (record mode may still download)",
        record=False,
    ),
    Setting(
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
        "1",
        "telemetry",
        "Claude Code's telemetry, error reports and update checks",
    ),
)

ALWAYS_SET = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")
"""Credentials set to the placeholder in replay even when the environment has none: the SDKs of
the two providers the model gateway serves refuse to start without a key."""

CREDENTIALS: tuple[str, ...] = (
    *ALWAYS_SET,
    "OPENAI_ADMIN_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "AZURE_OPENAI_API_KEY",
    "AZURE_OPENAI_AD_TOKEN",
    "AZURE_API_KEY",
    "GOOGLE_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_BEARER_TOKEN_BEDROCK",
    "MISTRAL_API_KEY",
    "COHERE_API_KEY",
    "CO_API_KEY",
    "GROQ_API_KEY",
    "TOGETHER_API_KEY",
    "FIREWORKS_API_KEY",
    "DEEPSEEK_API_KEY",
    "XAI_API_KEY",
    "OPENROUTER_API_KEY",
    "PERPLEXITY_API_KEY",
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
    "HUGGINGFACEHUB_API_TOKEN",
    "REPLICATE_API_TOKEN",
    "VOYAGE_API_KEY",
    "LANGSMITH_API_KEY",
    "LANGCHAIN_API_KEY",
    "LOGFIRE_TOKEN",
)
"""Provider (and telemetry) credentials: replaced by the placeholder in replay when present."""


def agent_env(
    mode: Mode, environ: Mapping[str, str], overrides: Mapping[str, str | None]
) -> dict[str, str]:
    """The variables to lay over ``environ`` for an agent run in ``mode``.

    ``overrides``: the suite's ``replay_env`` (a value sets the variable; None leaves it as
    ``environ`` has it). Live mode gets nothing.
    """
    if mode == "live":
        return {}
    env = {s.name: s.value for s in SETTINGS if mode == "replay" or s.record}
    if mode == "replay":
        for name in CREDENTIALS:
            if name in ALWAYS_SET or name in environ:
                env[name] = PLACEHOLDER
    for name, value in overrides.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def placeholders(env: Mapping[str, str]) -> list[str]:
    """The names in ``env`` (from ``agent_env``) that hold the credential placeholder."""
    return sorted(name for name in CREDENTIALS if env.get(name) == PLACEHOLDER)
