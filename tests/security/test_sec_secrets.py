"""Secrets never reach disk: every credential shape, in every channel, is redacted before writing.

The secrets are fake but shaped like real ones (prefix, alphabet, length), built here at test time
from pieces so the repository itself holds nothing a secret scanner would flag. A file written
by trialrun "holds" a secret when a 12-character piece of the secret's random part (one starts
every 4 characters) appears in it: a secret cut in two and left partly visible is a leak too.
"""

from __future__ import annotations

import json
import random
import string
import subprocess
import sys
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from builders import run_trialrun
from gateway_fake_upstream import FakeUpstream
from trialrun.base import redact as redact_module
from trialrun.base.assertion_api import describe_value
from trialrun.base.linesredact import LineRedactor
from trialrun.base.quoting import shortened
from trialrun.base.redact import (
    holds_nothing_to_redact,
    json_holds_nothing_to_redact,
    redact,
    redact_command,
    redact_text,
)
from trialrun.cli import run_cli
from trialrun.compare import evaluate
from trialrun.compare import report as compare_report
from trialrun.compare.checkspec import Check
from trialrun.compare.evaluate import evaluate_checks
from trialrun.compare.requires import probe_requirement
from trialrun.conversation import protocol
from trialrun.conversation.process import StderrRing
from trialrun.gateway.exchange import error_of
from trialrun.httprec import jsonl
from trialrun.incident import model as incident_model
from trialrun.receipt import verify
from trialrun.receipt.envelope import ZERO_HASH, event_hash
from trialrun.receipt.show import render_html, summarize
from trialrun.report.summary import bound_tail

_RNG = random.Random(28)
_ALNUM = string.ascii_letters + string.digits
_URLSAFE = _ALNUM + "-_"
_B64 = _ALNUM + "+/"
_HEX = "0123456789abcdef"
_UPPER = string.ascii_uppercase + string.digits


def _pick(alphabet: str, count: int) -> str:
    return "".join(_RNG.choice(alphabet) for _ in range(count))


def _block(kind: str, lines: int) -> tuple[str, list[str]]:
    """A PEM or PGP private key block of ``lines`` base64 lines, and those lines."""
    body = [_pick(_B64, 64) for _ in range(lines)]
    label = f"{kind} PRIVATE KEY" + (" BLOCK" if kind == "PGP" else "")
    dashes = "-" * 5
    text = "\n".join([f"{dashes}BEGIN {label}{dashes}", *body, f"{dashes}END {label}{dashes}"])
    return text, body


def _secret_table() -> list[tuple[str, str, list[str]]]:
    """``(shape, text holding the secret, the secret's random parts)``."""
    table: list[tuple[str, str, list[str]]] = []

    def add(shape: str, prefix: str, body: str, suffix: str = "") -> None:
        table.append((shape, prefix + body + suffix, [body]))

    add("openai", "sk-" + "proj-", _pick(_URLSAFE, 48))
    add("anthropic", "sk-" + "ant-api03-", _pick(_URLSAFE, 48))
    add("github", "gh" + "p_", _pick(_ALNUM, 36))
    add("github_pat", "github" + "_pat_", _pick(_ALNUM, 22) + "_" + _pick(_ALNUM, 59))
    add("slack_token", "xo" + "xb-" + _pick(string.digits, 12) + "-", _pick(_ALNUM, 24))
    add(
        "slack_webhook",
        "https://hooks.slack.com/services/T" + _pick(_UPPER, 10) + "/B" + _pick(_UPPER, 10) + "/",
        _pick(_ALNUM, 24),
    )
    add("google_api_key", "AI" + "za", _pick(_URLSAFE, 35))
    add("google_oauth", "ya" + "29.", _pick(_URLSAFE, 60))
    key_id, secret_key = "AK" + "IA" + _pick(_UPPER, 16), _pick(_ALNUM, 20) + "/" + _pick(_B64, 19)
    table.append(("aws_key_pair", f"{key_id} {secret_key}", [key_id[4:], secret_key]))
    add("stripe_secret", "sk_" + "live_", _pick(_ALNUM, 24))
    add("stripe_restricted", "rk_" + "live_", _pick(_ALNUM, 24))
    add("stripe_webhook", "wh" + "sec_", _pick(_ALNUM, 32))
    add("huggingface", "h" + "f_", _pick(string.ascii_letters, 34))
    add("gitlab", "gl" + "pat-", _pick(_URLSAFE, 20))
    add(
        "azure_account_key",
        "DefaultEndpointsProtocol=https;AccountName=acme;Account" + "Key=",
        _pick(_B64, 86),
        "==;EndpointSuffix=core.windows.net",
    )
    sas = _pick(_ALNUM, 20) + "%2B" + _pick(_ALNUM, 20)
    table.append(
        (
            "azure_sas",
            "https://acme.blob.core.windows.net/c/f.txt?sv=2022-11-02&sp=r&s" + "ig=" + sas + "%3D",
            [sas[:20], sas[23:]],
        )
    )
    add("sendgrid", "S" + "G.", _pick(_URLSAFE, 22) + "." + _pick(_URLSAFE, 43))
    add("twilio", "S" + "K", _pick(_HEX, 32))
    add("discord", "M", _pick(_ALNUM, 25) + "." + _pick(_URLSAFE, 6) + "." + _pick(_URLSAFE, 38))
    add("databricks", "da" + "pi", _pick(_HEX, 32))
    add("pypi", "py" + "pi-AgEIcHlwaS5vcmc", _pick(_URLSAFE, 70))
    add("npm", "np" + "m_", _pick(_ALNUM, 36))
    add("jwt", "eyJhbGciOiJIUzI1NiJ9.eyJ", _pick(_URLSAFE, 30) + "." + _pick(_URLSAFE, 43))
    add("bearer", "Authorization: Bea" + "rer ", _pick(_ALNUM, 40))
    add("url_password", "postgres://app:", _pick(_ALNUM, 20), "@db.internal:5432/app")
    add("assignment", "DB_PASS" + "WORD=", _pick(_ALNUM, 20))
    add("service_key", "http://127.0.0.1:8321/k" + "ey/", _pick(_URLSAFE, 43), "/run/1/openai")
    add("service_key_path", "POST /k" + "ey/", _pick(_ALNUM, 43), "/run/1/v1/messages")
    for kind in ("RSA", "OPENSSH", "PGP"):
        text, body = _block(kind, 22)
        table.append((f"{kind.lower()}_private_key", text, body))
    return table


SECRETS = _secret_table()
SHAPE_IDS = [shape for shape, _, _ in SECRETS]
# Shapes redacted before issue 28: the unit tests below take the new ones; every shape stays in
# the end-to-end tests (compare --out copied each of them raw).
_KNOWN_BEFORE = {
    "openai", "anthropic", "github", "github_pat", "slack_token", "google_api_key", "npm", "jwt",
    "bearer", "url_password", "assignment", "rsa_private_key", "openssh_private_key",
}  # fmt: skip
NEW_SECRETS = [entry for entry in SECRETS if entry[0] not in _KNOWN_BEFORE]
NEW_IDS = [shape for shape, _, _ in NEW_SECRETS]
_WINDOW = 12


def _windows(parts: list[str]) -> set[str]:
    return {
        part[start : start + _WINDOW]
        for part in parts
        for start in range(0, max(1, len(part) - _WINDOW + 1), 4)
    }


ALL_WINDOWS = {window: shape for shape, _, parts in SECRETS for window in _windows(parts)}


def holds_part(text: str, parts: list[str]) -> bool:
    """Whether some 12-character window of ``parts`` appears in ``text``."""
    return any(window in text for window in _windows(parts))


def leaks_in(text: str) -> list[str]:
    """The shapes of which some piece appears in ``text``."""
    return sorted({shape for window, shape in ALL_WINDOWS.items() if window in text})


def leaks_in_files(root: Path, skip: Collection[Path] = ()) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and path not in skip:
            leaked = leaks_in(path.read_bytes().decode("utf-8", "replace"))
            if leaked:
                found[str(path.relative_to(root))] = leaked
    return found


# ---- the redactor and its gates, shape by shape -------------------------------------------


@pytest.mark.parametrize(("shape", "text", "parts"), NEW_SECRETS, ids=NEW_IDS)
def test_every_shape_is_redacted_and_passes_every_gate(
    shape: str, text: str, parts: list[str]
) -> None:
    assert leaks_in(redact_text(f"saw {text} here")) == []
    assert leaks_in(json.dumps(redact({"args": {"q": text}, "list": [text]}))) == []
    assert leaks_in(json.dumps(redact_text(json.dumps({"q": text})))) == []
    # No fast gate waves it through as clean.
    for embedded in (text, f"x {text} y", f'{{"q": "{text}"}}'):
        assert redact_module._might_hold_a_secret(embedded)
        assert not holds_nothing_to_redact(embedded)
        assert not holds_nothing_to_redact({"q": [embedded]})
        assert not json_holds_nothing_to_redact(json.dumps({"q": embedded}, ensure_ascii=False))
        assert not redact_module._holds_no_needed_literal(embedded)


_AROUND = st.text(alphabet=string.printable, max_size=30)


@given(st.sampled_from(SECRETS), _AROUND, _AROUND, st.sampled_from([" ", "\n", "\t", "(", "'"]))
def test_a_shape_amid_any_text_passes_every_gate_and_is_redacted(
    entry: tuple[str, str, list[str]], before: str, after: str, gap: str
) -> None:
    _, secret, _ = entry
    text = before + gap + secret + gap + after
    assert leaks_in(redact_text(text)) == []
    assert not holds_nothing_to_redact(text)
    assert not json_holds_nothing_to_redact(json.dumps(text, ensure_ascii=False))
    # The long-text path (no cache, no short-text gate) gives the same answer.
    padded = text + " padding" * (redact_module._SHORT // 8 + 1)
    assert leaks_in(redact_text(padded)) == []


def test_an_aws_secret_key_needs_its_key_id_beside_it() -> None:
    lone = _pick(_ALNUM, 20) + "/" + _pick(_ALNUM, 19)
    assert redact_text(f"value {lone}") == f"value {lone}"
    assert lone not in redact_text(f"AKIA{_pick(_UPPER, 16)} {lone}")
    digest = "0123456789abcdef" * 2 + "01234567"  # a SHA-1 beside a key id is no secret key
    assert redact_text(f"AKIA{_pick(_UPPER, 16)} at commit {digest}").endswith(digest)


# ---- redact first, then cut ---------------------------------------------------------------


def test_the_stderr_ring_drops_a_private_key_whose_first_line_fell_out() -> None:
    text, body = _block("RSA", 30)
    ring = StderrRing(max_lines=10, max_bytes=64 * 1024)
    ring.feed((text + "\nafter the key\n").encode())
    assert not holds_part(ring.text(), body)
    assert ring.text().endswith("after the key")


def test_the_stderr_ring_redacts_an_endless_line_before_its_byte_bound_cuts_it() -> None:
    body = _pick(_URLSAFE, 40)
    ring = StderrRing(max_lines=10, max_bytes=30)
    ring.feed(b"y" * 20 + b" sk-" + body.encode() + b" tail")  # no newline yet
    assert not holds_part(ring.text(), [body])
    ring.feed(b" and the end\n")
    assert not holds_part(ring.text(), [body])


def test_a_private_key_block_is_dropped_line_by_line_and_only_it() -> None:
    text, body = _block("EC", 5)
    assert LineRedactor().lines(["before", *text.splitlines(), "after"]) == [
        "before", "[REDACTED]", "after",
    ]  # fmt: skip
    # Cut short (``head -4 key.pem``): the key's lines go, the next log line stays.
    cut = LineRedactor().lines([*text.splitlines()[:4], "", "Error: bad key", "retry 1"])
    assert cut == ["[REDACTED]", "retry 1"]
    assert not holds_part("\n".join(cut), body)
    # An encrypted key's headers are part of the block.
    headers = ["Proc-Type: 4,ENCRYPTED", "DEK-Info: AES-128-CBC,0123456789ABCDEF", ""]
    lines = text.splitlines()
    assert LineRedactor().lines([lines[0], *headers, *lines[1:], "done"]) == ["[REDACTED]", "done"]


def test_a_key_inside_one_json_line_does_not_swallow_the_next_lines() -> None:
    text, body = _block("OPENSSH", 4)
    cut_key = "\n".join(text.splitlines()[:3])  # a tool's output that ends inside the key
    transcript = [
        json.dumps({"type": "tool_result", "content": cut_key}),
        json.dumps({"type": "assistant", "text": "the key file is truncated"}),
    ]
    redacted = LineRedactor().lines(transcript)
    assert len(redacted) == 2 and "truncated" in redacted[1]
    assert not holds_part("\n".join(redacted), body)


def test_a_stored_stderr_tail_is_redacted_before_it_is_cut_to_its_last_lines() -> None:
    # A tail read back from an older run or a shard document was never through the ring.
    text, body = _block("RSA", 30)
    stored = "\n".join(["starting", text, *(f"retrying {n}" for n in range(40))])
    shown = bound_tail(stored)
    assert shown.endswith("retrying 39") and not holds_part(shown, body)


_QUOTERS: dict[str, Callable[[str], str]] = {
    "quoting.shortened": lambda text: shortened(text, 100),
    "protocol preview": protocol._preview,
    "gateway error": lambda text: error_of(401, json.dumps({"error": {"message": text}})) or "",
    "cassette value kind": jsonl.kind,
    "assertion value": describe_value,
    "incident field": lambda text: str(incident_model._invalid(("calls", 0), "an object", text)),
    "receipt verify value": verify._js_text,
    "compare trigger error": compare_report._preview,
    "compare check detail": evaluate._shown,
}


@pytest.mark.parametrize("quote", _QUOTERS.values(), ids=list(_QUOTERS))
def test_a_message_that_quotes_text_cuts_it_after_redacting_it(
    quote: Callable[[str], str],
) -> None:
    # Wherever the cut falls, no start of the key shows: cut first, its first characters were
    # too few for the rule to see a key and stayed.
    body = _pick(_ALNUM, 40)
    for filler in range(0, 320, 3):
        shown = quote("x" * filler + " sk-" + body)
        assert not holds_part(shown, [body[:8]]), (filler, shown)


def test_shortened_redacts_before_it_cuts() -> None:
    body = _pick(_ALNUM, 36)
    assert not holds_part(shortened(f"call with gh{'p'}_{body}", 30), [body[:10]])


def test_an_option_named_for_a_secret_hides_the_next_word() -> None:
    plain = _pick(_ALNUM, 20)
    command = ["agent", "--api-key", plain, "--token=" + plain, "-v", "--password"]
    assert redact_command(command) == [
        "agent", "--api-key", "[REDACTED]", "--token=[REDACTED]", "-v", "--password",
    ]  # fmt: skip


def test_a_failing_check_command_quotes_no_line_of_the_key_it_printed(tmp_path: Path) -> None:
    text, body = _block("RSA", 24)
    (tmp_path / "key.pem").write_text(text + "\nchecking done\n", encoding="utf-8")
    check = Check("command_succeeds", "cat key.pem; exit 1", None, 1)
    _, _, [outcome] = evaluate_checks(
        [check], transcript="", transcript_format="text", sandbox=tmp_path
    )
    assert not outcome.passed and "checking done" in outcome.detail
    assert not holds_part(outcome.detail, body)


def test_a_requirement_probe_quotes_no_secret_its_import_error_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = _pick(_ALNUM, 40)
    # The probe quotes the error's last line cut at 200 characters, here inside the key.
    message = "x" * 160 + " sk_" + "live_" + body
    (tmp_path / "leaky_module.py").write_text(f"raise RuntimeError({message!r})\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    reason = probe_requirement("python3:leaky_module")
    assert reason is not None and "RuntimeError" in reason
    assert not holds_part(reason, [body[:10]])


# ---- end to end: a run that leaks everything everywhere -----------------------------------

AGENT = r"""
import json, os, subprocess, sys, urllib.request

def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()

task = json.loads(sys.stdin.readline())["input"]
if task.get("noise"):
    print(task["noise"], flush=True)  # not a protocol message: the failure quotes it
    sys.stdin.readline()
if task.get("pem"):
    print("loading the deploy key", file=sys.stderr)
    print(task["pem"], file=sys.stderr)
    for number in range(40):
        print(f"retrying connection {number}", file=sys.stderr)
    sys.stderr.flush()
    sys.exit(3)
secrets = task["secrets"]
for shape, text in secrets:
    print(f"debug {shape}: {text}", file=sys.stderr, flush=True)
    send({"type": "log", "level": "info", "message": f"using {text}", "data": {"v": text}})
    send({"type": "tool_call", "name": "lookup", "call_id": shape, "args": {"q": text}})
    sys.stdin.readline()
server = json.loads(os.environ["TRIALRUN_MCP_SERVERS"])["mcpServers"]["docs"]
proxy = subprocess.Popen(
    [server["command"], *server["args"]], stdin=subprocess.PIPE, stdout=subprocess.PIPE
)
for number, (shape, text) in enumerate(secrets, 1):
    request = {"jsonrpc": "2.0", "id": number, "method": "tools/call",
               "params": {"name": "search_docs", "arguments": {"q": text}}}
    proxy.stdin.write((json.dumps(request) + "\n").encode())
    proxy.stdin.flush()
    proxy.stdout.readline()
proxy.stdin.close()
proxy.wait(timeout=60)
for shape, text in secrets:
    body = json.dumps({"model": "gpt-4o-mini",
                       "messages": [{"role": "user", "content": text}]}).encode()
    http = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=body,
        headers={"Content-Type": "application/json", "Authorization": "Bearer " + task["key"]},
    )
    with urllib.request.urlopen(http, timeout=60) as response:
        response.read()
send({"type": "final_output", "output": {"secrets": secrets}})
"""

ECHO_SERVER = r"""
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    result = {}
    if message.get("method") == "tools/call":
        text = "found " + message["params"]["arguments"]["q"]
        result = {"content": [{"type": "text", "text": text}], "isError": False}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}) + "\n")
    sys.stdout.flush()
"""

TOOLS = """
def lookup(args):
    return {"found": args["q"], "note": "echoed " + args["q"]}

TOOLS = {"lookup": lookup}
"""


def _trialrun(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # As on a GitHub runner: annotations on stdout, the step summary in a file of the project.
    github = {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(root / "step-summary.md")}
    return run_trialrun(*args, cwd=root, env={"COLUMNS": "200", **github}, timeout=240)


@pytest.fixture
def leaky_project(tmp_path: Path, upstream: FakeUpstream) -> Iterator[tuple[Path, set[Path]]]:
    pytest.importorskip("mcp")
    suite = tmp_path / "evals" / "leaks"
    (suite / "cases").mkdir(parents=True)
    (suite / "cassettes").mkdir()
    (suite / "agent.py").write_text(AGENT, encoding="utf-8")
    (suite / "echo_server.py").write_text(ECHO_SERVER, encoding="utf-8")
    (suite / "leak_tools.py").write_text(TOOLS, encoding="utf-8")
    plain = SECRETS[SHAPE_IDS.index("assignment")][2][0]
    single_line = [text for _, text, _ in SECRETS if "\n" not in text]
    command = [sys.executable, "agent.py", "--api-key", plain, "--token=" + plain, *single_line]
    server = [sys.executable, str(suite / "echo_server.py")]
    (suite / "suite.yaml").write_text(
        "suite_name: leaks\n"
        f"agent_command: {json.dumps(command)}\n"
        "mode: record\ncases_path: cases\ntool_registry: [lookup]\ntool_module: leak_tools\n"
        f"mcp_servers:\n  docs:\n    command: {json.dumps(server)}\n"
        f"model_gateway:\n  upstreams: {{openai: {json.dumps(upstream.url)}}}\n",
        encoding="utf-8",
    )
    key = SECRETS[SHAPE_IDS.index("openai")][1]
    everything = {
        "id": "everything",
        "input": {"secrets": [[shape, text] for shape, text, _ in SECRETS], "key": key},
        "cassette": "cassettes/everything.jsonl",
    }
    pem = {
        "id": "pem",
        "input": {"pem": SECRETS[SHAPE_IDS.index("rsa_private_key")][1]},
        "cassette": "cassettes/pem.jsonl",
    }
    # One line of every single-line secret on stdout: the protocol error quotes its start, cut
    # through one of them.
    line = " ".join(text for _, text, _ in SECRETS if "\n" not in text)
    noise = {"id": "noise", "input": {"noise": line}, "cassette": "cassettes/noise.jsonl"}
    for case in (everything, pem, noise):
        (suite / "cases" / f"{case['id']}.yaml").write_text(json.dumps(case), encoding="utf-8")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    inputs = {path for path in tmp_path.rglob("*") if path.is_file()}
    yield tmp_path, inputs


def test_a_run_that_leaks_every_secret_everywhere_writes_none_of_them(
    leaky_project: tuple[Path, set[Path]],
) -> None:
    root, inputs = leaky_project
    done = _trialrun(root, "run", "evals/leaks", "--no-baseline", "--out", "out")
    assert done.returncode == 1, done.stdout + done.stderr  # the pem case errors
    [run_dir] = (root / "out" / "leaks").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    statuses = {case["id"]: case["status"] for case in summary["cases"]}
    assert statuses == {"everything": "pass", "pem": "error", "noise": "error"}, done.stdout
    [noise] = [case for case in summary["cases"] if case["id"] == "noise"]
    assert "print logs to stderr" in noise["failure_reason"]
    # Every channel was really exercised: the calls and recordings exist.
    trace = (run_dir / "run.jsonl").read_text(encoding="utf-8")
    assert trace.count('"type":"log"') + trace.count('"type": "log"') >= len(SECRETS)
    cassettes = root / "evals" / "leaks" / "cassettes"
    written = {path.name for path in cassettes.iterdir()}
    assert {"everything.jsonl", "everything.mcp-docs.jsonl", "everything.model.jsonl"} <= written
    model = (cassettes / "everything.model.jsonl").read_text(encoding="utf-8")
    assert model.count("echo: ") >= len(SECRETS)  # the upstream answered every call
    stderr_tail = {case["id"]: case["stderr_tail"] for case in summary["cases"]}
    assert "retrying connection 39" in stderr_tail["pem"]
    assert "debug" in stderr_tail["everything"]
    assert summary["suite"]["agent_command"][2:5] == [
        "--api-key",
        "[REDACTED]",
        "--token=[REDACTED]",
    ]

    assert (root / "step-summary.md").is_file()
    assert "::error" in done.stdout  # the annotations were printed
    assert leaks_in_files(root, skip=inputs) == {}
    assert leaks_in(done.stdout) == [] and leaks_in(done.stderr) == []
    assert "retrying connection 39" in done.stdout  # the console showed the stderr tail


def test_a_private_key_cut_by_the_stderr_tail_reaches_no_view(
    leaky_project: tuple[Path, set[Path]],
) -> None:
    root, _ = leaky_project
    done = _trialrun(root, "run", "evals/leaks", "--no-baseline", "--out", "out", "--case", "pem")
    assert done.returncode == 1, done.stdout + done.stderr
    [run_dir] = (root / "out" / "leaks").iterdir()
    _, _, body = SECRETS[SHAPE_IDS.index("rsa_private_key")]
    for name in ("summary.json", "junit.xml", "report.html"):
        text = (run_dir / name).read_text(encoding="utf-8")
        assert "retrying connection 39" in text, name
        assert not [line for line in body if line[:_WINDOW] in text], name
    assert "retrying connection 39" in done.stdout
    assert not [line for line in body if line[:_WINDOW] in done.stdout]


def test_showing_another_harness_receipt_shows_no_secret(tmp_path: Path) -> None:
    # trialrun's writer redacts; a receipt written elsewhere may not have.
    texts = [text for _, text, _ in SECRETS]
    events = [
        ("run_start", {"goal": " ".join(texts), "verifyCommand": "pytest", "repoHead": None,
                       "branch": "main", "tool": {"name": "other", "version": "1"}}),
        ("verify", {"attempt": 1, "passed": False, "command": "make test",
                    "output": "\n".join(texts)}),
        ("custom_probe", {"notes": texts}),
    ]  # fmt: skip
    prev, lines = ZERO_HASH, []
    for seq, (kind, data) in enumerate(events):
        event: dict[str, Any] = {"v": "0", "seq": seq, "ts": f"2026-01-01T00:00:0{seq}.000Z"}
        event |= {"type": kind, "data": data, "prev": prev}
        event["hash"] = prev = event_hash(event)
        lines.append(json.dumps(event))
    path = tmp_path / "foreign.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert leaks_in(summarize(path)) == []
    assert leaks_in(render_html(path)) == []


# ---- incident import and compare --out ----------------------------------------------------


def test_an_imported_incident_holds_no_secret(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    export = tmp_path / "export.jsonl"
    events: list[dict[str, Any]] = [
        {"type": "task_start", "case_id": "leak", "timestamp": 1.0, "task_id": "leak",
         "input": {"secrets": [text for _, text, _ in SECRETS]}},
    ]  # fmt: skip
    for number, (shape, text, _) in enumerate(SECRETS, 1):
        call = f"c{number}"
        events.append(
            {"type": "tool_call", "case_id": "leak", "timestamp": 1.0 + number, "name": "fetch",
             "call_id": call, "args": {"q": text, "shape": shape}}
        )  # fmt: skip
        events.append(
            {"type": "tool_result", "case_id": "leak", "timestamp": 1.5 + number,
             "call_id": call, "ok": True, "result": {"body": text}, "error": None}
        )  # fmt: skip
    events.append(
        {"type": "final_output", "case_id": "leak", "timestamp": 99.0,
         "output": {"said": [text for _, text, _ in SECRETS]}}
    )  # fmt: skip
    export.write_text("".join(json.dumps(event) + "\n" for event in events), encoding="utf-8")
    out = tmp_path / "incident"
    code = run_cli(["incident", "import", str(export), "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert (out / "incident.json").is_file()
    assert leaks_in_files(out) == {}
    assert leaks_in(captured.out + captured.err) == []


COMPARE_AGENT = r"""
import json, sys
secrets = json.load(open(sys.argv[2]))
events = [{"type": "system", "subtype": "init", "skills": []}]
for text in secrets:
    block = {"type": "tool_use", "id": "t", "name": "Bash", "input": {"command": "echo " + text}}
    events.append({"type": "assistant", "message": {"content": [block]}})
    events.append({"type": "assistant", "message": {"content": [{"type": "text", "text": text}]}})
events.append({"type": "result", "subtype": "success", "num_turns": 2, "duration_ms": 100,
               "total_cost_usd": 0.01, "result": "done"})
for event in events:
    print(json.dumps(event))
"""

COMPARE_YAML = """\
name: leaky
agent:
  command: [{python}, "{{evals}}/agent.py", "{{task}}", {secrets}]
  stage: .claude/skills/{{name}}
  transcript: stream-json
  timeout_minutes: 1
k: 1
judge:
  command: [{python}, -m, trialrun.compare.fake_judge, --prefer, longer]
seed: 7
"""


def test_compare_out_copies_no_secret_for_upload(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TRIALRUN_HOME", str(tmp_path / "home"))
    secrets_file = tmp_path / "secrets.json"
    secrets_file.write_text(json.dumps([text for _, text, _ in SECRETS]), encoding="utf-8")
    subject = tmp_path / "leaky"
    (subject / "evals" / "cases").mkdir(parents=True)
    (subject / "SKILL.md").write_text("candidate skill\n", encoding="utf-8")
    (subject / "evals" / "agent.py").write_text(COMPARE_AGENT, encoding="utf-8")
    (subject / "evals" / "compare.yaml").write_text(
        COMPARE_YAML.format(
            python=json.dumps(sys.executable), secrets=json.dumps(str(secrets_file))
        ),
        encoding="utf-8",
    )
    (subject / "evals" / "cases" / "talk.yaml").write_text(
        "task: say everything\nchecks:\n  - transcript_mentions: done\n", encoding="utf-8"
    )
    out = tmp_path / "upload"
    code = run_cli(["compare", str(subject), "--out", str(out)])
    captured = capsys.readouterr()
    assert code in (0, 1), captured.err
    transcripts = list(out.rglob("transcripts/*"))
    assert transcripts, sorted(str(path) for path in out.rglob("*"))
    assert leaks_in_files(out) == {}
    # The local store keeps what the agent printed, for --rescore.
    stored = list((tmp_path / "home").rglob("transcripts/*"))
    assert stored and leaks_in(stored[0].read_text(encoding="utf-8"))

    # A shard's directory is uploaded for the merge: its transcripts are redacted as written.
    shards = tmp_path / "shards"
    code = run_cli(["compare", str(subject), "--shard", "1/1", "--out", str(shards)])
    captured = capsys.readouterr()
    assert code in (0, 1), captured.err
    assert list(shards.rglob("transcripts/*"))
    assert leaks_in_files(shards) == {}
    merged = tmp_path / "merged"
    [shard_dir] = shards.iterdir()
    code = run_cli(["compare", "merge", str(shard_dir), "--out", str(merged)])
    captured = capsys.readouterr()
    assert code in (0, 1), captured.err
    assert list(merged.rglob("transcripts/*"))
    assert leaks_in_files(merged) == {}
