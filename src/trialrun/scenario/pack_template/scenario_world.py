"""The simulated world of an action-scenario pack: effects ledger, faults, business rules, runner.

Standard library only, because the pack runs with a bare ``python3 run_pack.py``; trialrun imports
this same file so the pack and the CLI can never judge a run differently.

The agent sees tool *responses*; the world separately records *committed effects* (a refund, an
email, a ticket). Faults make the two diverge on purpose: ``timeout_after_commit`` records the
effect but answers with a timeout error, which is how duplicate payments happen in production.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TOOLS = ("lookup_order", "issue_refund", "send_email", "create_ticket")
FAULT_KINDS = ("timeout_after_commit", "error_before_commit", "slow")


class PackError(ValueError):
    """The pack or one of its scenarios is malformed; the message says where and what."""


@dataclass(frozen=True)
class Fault:
    tool: str
    call: int  # 1-based index among this tool's calls: the fault fires once, on that call
    kind: str
    delay_ms: int = 0


@dataclass(frozen=True)
class Scenario:
    id: str
    description: str
    orders: dict[str, dict[str, Any]]
    task: dict[str, Any]
    faults: tuple[Fault, ...]


@dataclass
class Action:
    """One tool call as the agent saw it, plus what the world did."""

    tool: str
    args: dict[str, Any]
    fault: str | None
    ok: bool
    result: Any
    error: str | None
    effect_id: str | None


@dataclass
class World:
    scenario: Scenario
    effects: list[dict[str, Any]] = field(default_factory=list)
    actions: list[Action] = field(default_factory=list)
    _calls: dict[str, int] = field(default_factory=dict)
    _refund_keys: dict[str, dict[str, Any]] = field(default_factory=dict)

    def call(self, tool: str, args: dict[str, Any]) -> Action:
        count = self._calls.get(tool, 0) + 1
        self._calls[tool] = count
        fault = next((f for f in self.scenario.faults if f.tool == tool and f.call == count), None)
        action = self._apply(tool, args, fault)
        self.actions.append(action)
        return action

    def _apply(self, tool: str, args: dict[str, Any], fault: Fault | None) -> Action:
        kind = fault.kind if fault else None
        if tool not in TOOLS:
            return Action(tool, args, kind, False, None, f"unknown tool {tool!r}", None)
        if fault is not None and fault.kind == "error_before_commit":
            return Action(tool, args, kind, False, None, "service unavailable, nothing done", None)
        if fault is not None and fault.kind == "slow":
            time.sleep(fault.delay_ms / 1000)
        try:
            result, effect = self._commit(tool, args)
        except ValueError as exc:
            return Action(tool, args, kind, False, None, str(exc), None)
        effect_id = effect["id"] if effect else None
        if fault is not None and fault.kind == "timeout_after_commit":
            return Action(tool, args, kind, False, None, "timeout: no response", effect_id)
        return Action(tool, args, kind, True, result, None, effect_id)

    def _order(self, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        order_id = str(args.get("order_id", ""))
        if order_id not in self.scenario.orders:
            raise ValueError(f"no order {order_id!r}")
        return order_id, self.scenario.orders[order_id]

    def _record(self, kind: str, **data: Any) -> dict[str, Any]:
        effect = {"id": f"E{len(self.effects) + 1}", "kind": kind, **data}
        self.effects.append(effect)
        return effect

    def _commit(self, tool: str, args: dict[str, Any]) -> tuple[Any, dict[str, Any] | None]:
        if tool == "lookup_order":
            order_id, order = self._order(args)
            return {"order_id": order_id, **order}, None
        if tool == "issue_refund":
            order_id, _ = self._order(args)
            key = args.get("idempotency_key")
            if isinstance(key, str) and key in self._refund_keys:
                # Deduplicated: the agent learns about the refund that already committed.
                previous = self._refund_keys[key]
                return {"refund_id": previous["id"], "amount": previous["amount"]}, None
            amount = args.get("amount")
            if not isinstance(amount, (int, float)) or isinstance(amount, bool) or amount <= 0:
                raise ValueError(f"amount must be a positive number, found {amount!r}")
            effect = self._record("refund", order_id=order_id, amount=amount, key=key)
            if isinstance(key, str):
                self._refund_keys[key] = effect
            return {"refund_id": effect["id"], "amount": amount}, effect
        if tool == "send_email":
            effect = self._record("email", to=args.get("to"), subject=args.get("subject"))
            return {"sent": True}, effect
        order_id, _ = self._order(args)
        effect = self._record("ticket", order_id=order_id, note=args.get("note"))
        return {"ticket_id": effect["id"]}, effect


def check_rules(scenario: Scenario, effects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Business rules on the ledger; each violation names the rule and the effect that broke it."""
    violations: list[dict[str, Any]] = []
    refunds = [e for e in effects if e["kind"] == "refund"]
    ticketed = {e["order_id"] for e in effects if e["kind"] == "ticket"}
    seen: dict[str, str] = {}
    for refund in refunds:
        order_id = refund["order_id"]
        total = scenario.orders[order_id]["total"]
        if order_id in seen:
            violations.append(
                _violation(
                    "one_refund_per_order",
                    f"order {order_id} refunded again (first refund {seen[order_id]}): "
                    "duplicate payment",
                    refund,
                )
            )
        seen.setdefault(order_id, refund["id"])
        if refund["amount"] > total:
            violations.append(
                _violation(
                    "refund_within_order_total",
                    f"refund of {refund['amount']} exceeds order {order_id} total {total}",
                    refund,
                )
            )
        if order_id not in ticketed:
            violations.append(
                _violation(
                    "ticket_for_every_refund", f"no ticket for refunded order {order_id}", refund
                )
            )
    return violations


def _violation(rule: str, message: str, effect: dict[str, Any]) -> dict[str, Any]:
    return {"rule": rule, "message": message, "effect": effect}


def load_scenario(path: Path) -> Scenario:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PackError(f"{path}: cannot read scenario: {exc}") from exc
    if not isinstance(data, dict):
        raise PackError(f"{path}: expected a JSON object, found {type(data).__name__}")
    missing = [k for k in ("id", "orders", "task") if k not in data]
    if missing:
        raise PackError(
            f"{path}: missing {'key' if len(missing) == 1 else 'keys'} {', '.join(missing)}"
        )
    unknown = sorted(set(data) - {"id", "description", "orders", "task", "faults"})
    if unknown:
        raise PackError(
            f"{path}: unknown {'key' if len(unknown) == 1 else 'keys'} {', '.join(unknown)}"
        )
    if not isinstance(data.get("faults", []), list):
        raise PackError(f"{path}: faults: expected a list")
    faults = []
    for index, raw in enumerate(data.get("faults", [])):
        where = f"{path}: faults[{index}]"
        if not isinstance(raw, dict) or raw.get("tool") not in TOOLS:
            raise PackError(f"{where}: expected tool one of {', '.join(TOOLS)}")
        if raw.get("kind") not in FAULT_KINDS:
            found = raw.get("kind")
            raise PackError(f"{where}: expected kind one of {', '.join(FAULT_KINDS)}, {found!r}")
        call, delay_ms = raw.get("call", 1), raw.get("delay_ms", 0)
        if not all(isinstance(n, int) and not isinstance(n, bool) for n in (call, delay_ms)):
            raise PackError(f"{where}: expected integers for call and delay_ms")
        faults.append(Fault(raw["tool"], call, raw["kind"], delay_ms))
    orders = data["orders"]
    if not isinstance(orders, dict) or not all(
        isinstance(o, dict) and isinstance(o.get("total"), (int, float)) for o in orders.values()
    ):
        raise PackError(f"{path}: orders must map order ids to objects with a numeric total")
    return Scenario(
        str(data["id"]), str(data.get("description", "")), orders, data["task"], tuple(faults)
    )


def run_scenario(
    scenario: Scenario, command: list[str], cwd: Path, timeout_s: float = 30.0
) -> dict[str, Any]:
    """Run the agent on one scenario over the JSONL protocol; returns its summary entry."""
    world = World(scenario)
    process = subprocess.Popen(
        command,
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
    )
    assert process.stdin is not None and process.stdout is not None
    watchdog = threading.Timer(timeout_s, process.kill)
    watchdog.start()
    output: Any = None
    problem: str | None = None
    try:
        _send(process, {"type": "task_start", "task_id": scenario.id, "input": scenario.task})
        for line in process.stdout:
            if not line.strip():
                continue
            try:
                message = json.loads(line)
            except ValueError:
                problem = f"agent wrote a non-JSON line: {line.strip()[:200]!r}"
                break
            kind = message.get("type") if isinstance(message, dict) else None
            if kind == "tool_call":
                args = message.get("args")
                action = world.call(
                    str(message.get("name")), args if isinstance(args, dict) else {}
                )
                _send(
                    process,
                    {
                        "type": "tool_result",
                        "call_id": message.get("call_id"),
                        "ok": action.ok,
                        "result": action.result,
                        "error": action.error,
                    },
                )
            elif kind == "final_output":
                output = message.get("output")
                break
            elif kind == "task_error":
                problem = f"agent reported task_error: {message.get('message')}"
                break
        else:
            problem = f"agent exited without a final_output (timeout {timeout_s}s or crash)"
    except (BrokenPipeError, OSError) as exc:
        problem = f"agent stopped talking: {exc}"
        try:
            # An agent that crashed before reading what we sent shows up as a broken pipe.
            code = process.wait(timeout=1)
            problem = f"agent exited with code {code} without a final_output"
        except subprocess.TimeoutExpired:
            pass
    finally:
        watchdog.cancel()
        _close(process)
    violations = check_rules(scenario, world.effects)
    status = "error" if problem else ("failed" if violations else "passed")
    return {
        "id": scenario.id,
        "description": scenario.description,
        "status": status,
        "error": problem,
        "violations": violations,
        "effects": world.effects,
        "actions": [a.__dict__ for a in world.actions],
        "output": output,
    }


def _send(process: subprocess.Popen[str], message: dict[str, Any]) -> None:
    assert process.stdin is not None
    process.stdin.write(json.dumps(message) + "\n")
    process.stdin.flush()


def _close(process: subprocess.Popen[str]) -> None:
    for stream in (process.stdin, process.stdout, process.stderr):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def load_pack_json(pack_dir: Path) -> dict[str, Any]:
    """Read pack.yaml with the standard library: the shipped file is JSON, itself valid YAML."""
    path = pack_dir / "pack.yaml"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PackError(f"{path}: expected a JSON-formatted pack.yaml ({exc})") from exc
    return validate_pack(data, path)


def validate_pack(data: Any, path: Path) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise PackError(f"{path}: expected a mapping, found {type(data).__name__}")
    agents = data.get("agents")
    if not isinstance(agents, dict) or not agents:
        raise PackError(f"{path}: 'agents' must map names to {{command: [...]}}")
    for name, agent in agents.items():
        if not isinstance(name, str) or not name or not all(c.isalnum() or c in "-_" for c in name):
            raise PackError(f"{path}: agent name {name!r}: expected letters, digits, '-' or '_'")
        command = agent.get("command") if isinstance(agent, dict) else None
        if not isinstance(command, list) or not all(isinstance(c, str) for c in command):
            raise PackError(f"{path}: agents.{name}.command must be a list of strings")
    scenarios = data.get("scenarios")
    if not isinstance(scenarios, list) or not all(isinstance(s, str) for s in scenarios):
        raise PackError(f"{path}: 'scenarios' must be a list of scenario file paths")
    return data


def summarize(pack_name: str, agent: str, entries: list[dict[str, Any]]) -> dict[str, Any]:
    failed = sum(1 for e in entries if e["status"] != "passed")
    return {
        "pack": pack_name,
        "agent": agent,
        "passed": len(entries) - failed,
        "failed": failed,
        "scenarios": entries,
    }


def run_pack(pack_dir: Path, agent: str, python: str) -> dict[str, Any]:
    """Run every scenario with one agent; ``python`` stands in for ``python3`` in its command."""
    return run_loaded_pack(load_pack_json(pack_dir), pack_dir, agent, python)


def run_loaded_pack(
    pack: dict[str, Any], pack_dir: Path, agent: str, python: str
) -> dict[str, Any]:
    if agent not in pack["agents"]:
        known = ", ".join(sorted(pack["agents"]))
        raise PackError(f"{pack_dir / 'pack.yaml'}: no agent {agent!r}; expected one of {known}")
    command = [python if part == "python3" else part for part in pack["agents"][agent]["command"]]
    scenarios = [load_scenario(pack_dir / rel) for rel in pack["scenarios"]]
    entries = [run_scenario(s, command, pack_dir) for s in scenarios]
    return summarize(str(pack.get("name", pack_dir.name)), agent, entries)
