"""The network seal of a run: whether replay seals its agents, with which layers, what it allows.

``network_seal(suite, mode)`` is decided once per run: record and live mode, and
``network: open``, are not sealed; replay is, with the kernel layers ``conversation.seal.probe``
finds. Each case then seals its agent with ``for_case(ports)``: the ports of the case's own
services (any loopback address) plus the suite's ``network: {allow: [...]}``. Every agent of
the run, sealed or not, is started by the run's one spawner (``conversation.spawner``), which
``RunSeal.close`` stops when the run ends. After the case,
``judge_seal`` fails it as ``network_sealed`` naming what the agent tried, or, where only
Landlock holds (the refusal is the agent's to see, not ours), adds a hint to a failure whose
output shows a refused connection.
"""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from trialrun.base.results import AgentRun, Failure
from trialrun.config import Suite
from trialrun.config.models import Mode, NetworkAllow
from trialrun.config.spec import split_host_port
from trialrun.conversation.seal import AgentSeal, SealLayers, SealPolicy, probe
from trialrun.conversation.spawner import AgentSpawner

__all__ = ["SEALED_HINT", "RunSeal", "judge_seal", "network_seal"]

SEALED_KIND = "network_sealed"
SEALED_HINT = (
    "the network is sealed in replay: only trialrun's services and the suite's "
    "`network: {allow: [...]}` are reachable (docs/offline.md#the-network-seal)"
)
_REFUSED = re.compile(
    r"Permission denied|Connection refused|EACCES|ECONNREFUSED|Errno 13\b|Errno 111\b", re.I
)
_CONSEQUENCES = frozenset(
    {"agent_crashed", "agent_error", "task_error", "idle_timeout", "protocol_error"}
)
"""Failures an agent shows after a refused connection it could not handle: the seal is why."""


@dataclass(frozen=True)
class RunSeal:
    """The run's decision: ``sealed`` (replay, not ``open``) and the layers that hold it."""

    sealed: bool
    layers: SealLayers
    policy: SealPolicy = field(default_factory=SealPolicy)
    problems: tuple[str, ...] = ()
    """``allow:`` entries that let nothing through (a host that does not resolve)."""
    spawner: AgentSpawner = field(default_factory=AgentSpawner, compare=False, repr=False)
    """Starts every agent of the run; started with the first one, stopped by ``close``."""

    @property
    def applied(self) -> bool:
        return self.sealed and self.layers.any

    def for_case(self, service_ports: Iterable[int]) -> AgentSeal | None:
        if not self.applied:
            return None
        return AgentSeal(self.policy.with_loopback(service_ports), self.layers)

    def close(self) -> None:
        """At the end of the run: stop the spawner (once every agent was reaped)."""
        self.spawner.close()

    def describe(self) -> str:
        """What the run says about its network: ``sealed (landlock, seccomp)``, ``open``, ..."""
        if not self.sealed:
            return "open"
        if not self.layers.any:
            return "not sealed (no kernel layer)"
        return f"sealed ({', '.join(self.layers.names())})"

    def record(self) -> dict[str, Any]:
        """The run's network as summary.json and the receipt's run_start carry it."""
        return {"sealed": self.applied, "layers": self.layers.names() if self.sealed else []}

    def warnings(self) -> list[str]:
        """Once per run: what the seal cannot do here. Never claims a seal that is not there."""
        found = [f"warning: network: {problem}" for problem in self.problems]
        if self.sealed and not self.layers.any:
            found.append(
                "warning: network: this kernel offers no unprivileged way to seal the network "
                "(Landlock ABI 4 or seccomp user notification); replayed agents are NOT sealed, "
                "only proxy variables steer them (docs/offline.md#the-network-seal)"
            )
        elif self.sealed and not self.layers.seccomp:
            found.append(
                "warning: network: sealed by Landlock only: a refused connection is refused, "
                "but trialrun cannot name its destination"
            )
        return found


def network_seal(suite: Suite, mode: Mode, layers: SealLayers | None = None) -> RunSeal:
    """The run's seal; ``layers`` None: what ``probe()`` finds on this kernel."""
    setting = suite.config.network
    if mode != "replay" or setting == "open":
        return RunSeal(False, SealLayers(False, False))
    policy, problems = _allowed(setting.allow if isinstance(setting, NetworkAllow) else [])
    return RunSeal(True, probe() if layers is None else layers, policy, tuple(problems))


def _allowed(entries: list[str]) -> tuple[SealPolicy, list[str]]:
    """Resolve each ``host:port`` once, before any agent runs (names, as the agent would)."""
    import ipaddress

    loopback: set[int] = set()
    addresses: set[tuple[str, int]] = set()
    problems: list[str] = []
    for entry in entries:
        parts = split_host_port(entry)
        assert parts is not None  # the suite's loader checked it
        host, port = parts
        try:
            found = {info[4][0] for info in socket.getaddrinfo(host, port, proto=6)}
        except OSError as exc:
            problems.append(f"allow entry {entry!r} lets nothing through: {exc.strerror or exc}")
            continue
        for address in found:
            ip = ipaddress.ip_address(str(address).split("%", 1)[0])
            if ip.is_loopback:
                loopback.add(port)
            else:
                mapped = getattr(ip, "ipv4_mapped", None)
                addresses.add((str(mapped or ip), port))
    return SealPolicy(frozenset(loopback), frozenset(addresses)), problems


def judge_seal(run: AgentRun, seal: AgentSeal | None) -> None:
    """Fail ``run`` for what the seal refused; stops the seal's watch."""
    if seal is None:
        return
    seal.stop()
    refused = seal.attempts()
    if refused:
        message = f"network: sealed: agent tried {', '.join(refused)}"
        failure = run.failure
        if failure is not None and failure.kind not in _CONSEQUENCES:
            return
        if failure is not None:
            message = f"{message} (then: {failure.message})"
        run.failure = Failure(SEALED_KIND, message, "fail", run.stderr_tail)
        event = {"type": "agent_error", "case_id": run.case_id, "timestamp": time.time()}
        run.events.append({**event, "kind": SEALED_KIND, "message": message})
        return
    failure = run.failure
    if seal.layers.seccomp or failure is None or SEALED_HINT in failure.message:
        return
    if _REFUSED.search(failure.stderr_tail or run.stderr_tail or ""):
        failure.message = f"{failure.message} ({SEALED_HINT})"
