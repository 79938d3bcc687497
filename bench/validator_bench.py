"""Validator benchmark for issue 16: config.spec (hand-written) against msgspec and pydantic.

Measures, in fresh subprocesses alternating the three validators, median of --repeat runs:
  * import: the library alone, then the suite and case records on top of it
    (config.spec + config.models; msgspec + bench/msgspec_records.py; pydantic + the oracle models
    that tests/test_config_spec.py held until issue 29, read from git at ORACLE_REVISION);
  * validation of a generated RunLedger-style suite (suite.yaml + 200 case files, built by
    bench/replay_bench.py's generator), parsed from YAML before the clock starts;
  * a second validation in the same process ("again"): msgspec builds its decoder on first use;
  * for context, today's whole ``load_suite`` of that suite (YAML reading included).
Each is measured twice: in a cold process, and "on the run path", after importing what a
``trialrun run`` loads whichever validator it uses, which is what start-up pays for a validator.
Then, in this process, what only facts can answer: how many problems of one document each
validator reports, which of today's messages survive when msgspec's error text is parsed back
(bench/msgspec_messages.py), and how ``msgspec.json.schema`` differs from the shipped schemas.

msgspec is installed with pip into bench/.work/msgspec-lib (throwaway, put on the children's
PYTHONPATH); the project's own dependencies do not change for an evaluation. The machines are
noisy: only ratios measured side by side in one run mean anything.

    python bench/validator_bench.py [--repeat 9]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
WORK = BENCH / ".work"
MSGSPEC_LIB = WORK / "msgspec-lib"
MSGSPEC_SPEC = "msgspec==0.23.0"
ORACLE_SOURCE = "tests/test_config_spec.py"
ORACLE_REVISION = "c5375ee"  # the last commit holding the pydantic oracle of the suite records
SHIPPED_SCHEMAS = ROOT / "src" / "trialrun" / "schemas"

# Each child prints the seconds of each step as JSON; the documents are read first so that reading
# them costs every validator the same and none of it is timed. With a prelude, the child first
# imports what a ``trialrun run`` loads whichever validator it uses (the standard-library modules
# of RUN_PATH_PRELUDE, and the trialrun and trialrun.config packages), so "import" is then what the
# validator adds to the run path's start-up, not what it shares with the rest of it.
CHILD = """\
import importlib, json, sys, time
for name in sys.argv[2:]:
    try:
        importlib.import_module(name)
    except Exception:
        pass
docs = json.loads(open(sys.argv[1], encoding="utf-8").read())
t0 = time.perf_counter()
{lib}
t1 = time.perf_counter()
{records}
t2 = time.perf_counter()
{validate}
t3 = time.perf_counter()
{validate}
t4 = time.perf_counter()
print(json.dumps({{"lib": t1 - t0, "records": t2 - t1, "validate": t3 - t2, "again": t4 - t3}}))
"""
RUN_PATH_PRELUDE = """\
import sys
from trialrun.config import load_suite
load_suite(sys.argv[1])
stdlib = sorted(m for m in sys.modules if m.split(".")[0] in sys.stdlib_module_names)
print(" ".join([*stdlib, "trialrun", "trialrun.config"]))
"""
VALIDATORS = {
    "config.spec": (
        "import trialrun.config.spec as lib",
        "from trialrun.config import models as rec",
        "lib.parse(rec.SuiteConfig, docs[0])\n"
        "for doc in docs[1:]:\n    lib.parse(rec.CaseConfig, doc)",
    ),
    "msgspec": (
        "import msgspec as lib",
        "import msgspec_records as rec",
        "lib.convert(docs[0], rec.SuiteConfig)\n"
        "for doc in docs[1:]:\n    lib.convert(doc, rec.CaseConfig)",
    ),
    "pydantic": (
        "import pydantic as lib",
        "import pydantic_oracle as rec",
        "rec.SuiteConfig.model_validate(docs[0])\n"
        "for doc in docs[1:]:\n    rec.CaseConfig.model_validate(doc)",
    ),
}
LOAD_SUITE = """\
import sys, time
t0 = time.perf_counter()
from trialrun.config import load_suite
suite = load_suite(sys.argv[1])
print(time.perf_counter() - t0, len(suite.cases))
"""


def ensure_msgspec() -> None:
    if not (MSGSPEC_LIB / "msgspec").is_dir():
        pip = [sys.executable, "-m", "pip", "install", "-q", "--target", str(MSGSPEC_LIB)]
        subprocess.run([*pip, MSGSPEC_SPEC], check=True)


def write_oracle() -> None:
    """tests/test_config_spec.py's pydantic models as an importable module, without pytest."""
    show = ["git", "show", f"{ORACLE_REVISION}:{ORACLE_SOURCE}"]
    text = subprocess.run(show, cwd=ROOT, capture_output=True, text=True, check=True).stdout
    imports = re.search(r"^from pydantic import \([^)]*\)", text, re.MULTILINE)
    start, end = text.find("class _Strict(BaseModel):"), text.find("\nPAIRS")
    if imports is None or start < 0 or end < 0:
        raise SystemExit(f"{ORACLE_SOURCE}: the oracle models moved; update write_oracle")
    body = text[start:end]
    header = "from __future__ import annotations\n\nfrom typing import Annotated, Any, Literal\n"
    (WORK / "pydantic_oracle.py").write_text(f"{header}\n{imports[0]}\n\n\n{body}\n")


def write_documents() -> tuple[Path, Path]:
    """The generated suite's directory, and its suite + case data as one JSON list."""
    import yaml

    sys.path.insert(0, str(BENCH))
    from replay_bench import write_suite

    suite = write_suite(WORK / "validator", "wide", cases=200, calls=3)
    files = [suite / "suite.yaml", *sorted((suite / "cases").glob("*.yaml"))]
    docs = [yaml.safe_load(f.read_text(encoding="utf-8")) for f in files]
    target = WORK / "validator" / "documents.json"
    target.write_text(json.dumps(docs), encoding="utf-8")
    return suite, target


def child_env() -> dict[str, str]:
    paths = [str(MSGSPEC_LIB), str(BENCH), str(WORK)]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


def run_child(program: str, *arguments: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", program, *arguments],
        capture_output=True,
        text=True,
        env=child_env(),
        cwd=WORK,
    )
    if proc.returncode != 0:
        raise SystemExit(f"child failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc.stdout


COLUMNS = {
    "import lib": "lib",
    "+ records": "lib+records",
    "validate 201": "validate",
    "again (warm)": "again",
    "process": "wall",
}


def measure(repeat: int, suite: Path, documents: Path) -> None:
    prelude = run_child(RUN_PATH_PRELUDE, str(suite)).split()
    preludes = {"cold process": [], "on the run path": prelude}
    samples: dict[tuple[str, str], dict[str, list[float]]] = {}
    load_samples: list[float] = []
    for _ in range(repeat):
        for mode, modules in preludes.items():
            for name, (lib, records, validate) in VALIDATORS.items():
                program = CHILD.format(lib=lib, records=records, validate=validate)
                start = time.perf_counter()
                result = json.loads(run_child(program, str(documents), *modules))
                result["wall"] = time.perf_counter() - start
                result["lib+records"] = result["lib"] + result["records"]
                for part, seconds in result.items():
                    samples.setdefault((mode, name), {}).setdefault(part, []).append(seconds)
        load_samples.append(float(run_child(LOAD_SUITE, str(suite)).split()[0]))
    med = {k: {p: statistics.median(v) * 1000 for p, v in s.items()} for k, s in samples.items()}
    print(f"median of {repeat} fresh processes each; x = ratio to config.spec in the same run")
    for mode, modules in preludes.items():
        extra = f" ({len(modules)} modules preloaded)" if modules else ""
        print(f"{mode}{extra}:")
        print(f"  {'':12}" + "".join(f"{title:>19}" for title in COLUMNS))
        base = med[(mode, "config.spec")]
        for name in VALIDATORS:
            parts = med[(mode, name)]
            cells = (f"{parts[k]:8.2f}ms x{parts[k] / base[k]:5.2f}" for k in COLUMNS.values())
            print(f"  {name:12}" + "".join(f"{cell:>19}" for cell in cells))
    load = statistics.median(load_samples) * 1000
    validate = med[("cold process", "config.spec")]["validate"]
    print(
        f"context: today's load_suite of the same 201 files {load:.1f}ms (YAML reading included); "
        f"config.spec's validation is {validate / load:.0%} of it"
    )


# -- what the numbers cannot say ---------------------------------------------------------------

SUITE = """\
suite_name: demo
agent_command: ["python3", "agent/agent.py", "-u"]
mode: replay
cases_path: cases
tool_registry: [search_docs]
budgets:
  max_wall_ms: 20000
  max_tool_calls: 3
normalization:
  strip_keys: [ts]
output_dir: out
"""
CASE = "id: t\ninput:\n  ticket: hello\ncassette: cassettes/t.jsonl\n"
MCP = "mcp_servers:\n  web:\n    command: [srv]\n"
# (what is wrong, file, text replaced, replacement): the kinds of problem
# tests/config/test_config.py checks, plus the ones where msgspec's text loses something.
SCENARIOS = [
    ("misspelt required key", "suite", "agent_command:", "agnet_command:"),
    ("misspelt nested key", "suite", "  max_tool_calls: 3", "  max_tool_cals: 3"),
    ("unknown key", "suite", "output_dir: out", "colour: blue"),
    ("string for int", "suite", "max_tool_calls: 3", "max_tool_calls: '10'"),
    ("float for int", "suite", "max_tool_calls: 3", "max_tool_calls: 2.5"),
    ("bool for int", "suite", "max_tool_calls: 3", "max_tool_calls: true"),
    ("below bound", "suite", "max_wall_ms: 20000", "max_wall_ms: -5"),
    ("zero where > 0", "suite", "output_dir: out", "idle_timeout_ms: 0"),
    ("NaN cost", "suite", "max_tool_calls: 3", "max_cost_usd: .nan"),
    ("huge float", "suite", "max_tool_calls: 3", "max_cost_usd: " + "9" * 400),
    ("literal typo", "suite", "mode: replay", "mode: replai"),
    (
        "command as one string",
        "suite",
        'agent_command: ["python3", "agent/agent.py", "-u"]',
        "agent_command: python3 agent/agent.py",
    ),
    (
        "empty list",
        "suite",
        'agent_command: ["python3", "agent/agent.py", "-u"]',
        "agent_command: []",
    ),
    (
        "list item type",
        "suite",
        'agent_command: ["python3", "agent/agent.py", "-u"]',
        "agent_command: [python3, 3]",
    ),
    ("missing key", "suite", "tool_registry: [search_docs]\n", ""),
    (
        "mapping expected",
        "suite",
        "budgets:\n  max_wall_ms: 20000\n  max_tool_calls: 3\n",
        "budgets: 5\n",
    ),
    ("alias out of bound", "suite", "output_dir: out", "regression: {min_success_rate: 2}"),
    (
        "both spellings",
        "suite",
        "output_dir: out",
        "regression: {min_pass_rate: 0.5, min_success_rate: 0.5}",
    ),
    ("server name pattern", "suite", "output_dir: out", MCP.replace("web", "'a b'")),
    ("key inside a server", "suite", "output_dir: out", MCP + "    transprot: http\n"),
    ("upstream provider", "suite", "output_dir: out", "model_gateway:\n  upstreams: {azure: x}"),
    ("number as key", "case", "id: t", "id: t\n7: x"),
    ("four problems", "suite", "mode: replay\n", "mode: fast\ncolour: 1\n"),
    ("case, two problems", "case", "  ticket: hello\ncassette: cassettes/t.jsonl\n", "  - 1\n"),
]


def _scenarios() -> Iterator[tuple[str, str, str]]:
    for label, kind, old, new in SCENARIOS:
        text = SUITE if kind == "suite" else CASE
        assert old in text, old
        text = text.replace(old, new)
        if label == "four problems":
            text = text.replace("max_wall_ms: 20000", "max_wall_ms: -1").replace(
                '"agent/agent.py", "-u"', "3"
            )
        yield label, kind, text


def fidelity() -> None:
    import msgspec
    import msgspec_messages
    import msgspec_records
    import pydantic
    import pydantic_oracle

    from trialrun.config import messages, models, spec
    from trialrun.config.yamlload import parse_yaml

    counts = Counter[str]()
    same = 0
    print("\nproblems reported per document (config.spec / pydantic / msgspec) and messages:")
    for label, kind, text in _scenarios():
        doc = parse_yaml(text, file=f"{kind}.yaml")
        record = models.SuiteConfig if kind == "suite" else models.CaseConfig
        what = kind
        try:
            spec.parse(record, doc.data)
            today: list[str] = []
        except spec.SpecError as exc:
            today = [str(e) for e in messages.spec_errors(exc, doc, record, what)]
        oracle = getattr(pydantic_oracle, record.__name__)
        try:
            oracle.model_validate(doc.data)
            pydantic_count = 0
        except pydantic.ValidationError as exc:
            pydantic_count = exc.error_count()
        prototype = getattr(msgspec_records, record.__name__)
        found = msgspec_messages.messages(doc.data, doc, prototype, what)
        counts.update(today=len(today), pydantic=pydantic_count, msgspec=len(found))
        same += found == today
        verdict = "same" if found == today else "DIFF"
        print(f"  {verdict} {label} ({len(today)}/{pydantic_count}/{len(found)})")
        if found != today:
            for line in today:
                print(f"       today:   {line}")
            for line in found or ["(accepted)"]:
                print(f"       msgspec: {line}")
    try:
        msgspec.convert({}, msgspec_records.CaseConfig)
    except msgspec.ValidationError as exc:
        public = [name for name in dir(exc) if not name.startswith("_")]
        print(f"a msgspec.ValidationError offers {public}: args = {exc.args!r}")
    print(
        f"messages identical in {same} of {len(SCENARIOS)} documents; problems reported in all: "
        f"config.spec {counts['today']}, pydantic {counts['pydantic']}, "
        f"msgspec {counts['msgspec']}"
    )


_MISSING: Any = object()


def _differences(shipped: Any, produced: Any, path: tuple[str, ...]) -> Iterator[tuple[Any, ...]]:
    if isinstance(shipped, dict) and isinstance(produced, dict):
        for key in sorted(shipped.keys() | produced.keys()):
            yield from _differences(
                shipped.get(key, _MISSING), produced.get(key, _MISSING), (*path, key)
            )
    elif shipped != produced:
        yield path, shipped, produced


def _group(path: tuple[str, ...], shipped: Any, produced: Any) -> str:
    if len(path) >= 2 and path[-2] == "properties" and _MISSING in (shipped, produced):
        return "property only in " + ("msgspec" if shipped is _MISSING else "shipped")
    side = " (only msgspec)" if shipped is _MISSING else " (only shipped)"
    return path[-1] + (side if _MISSING in (shipped, produced) else "")


def _shown(value: Any) -> str:
    text = "-" if value is _MISSING else json.dumps(value, sort_keys=True)
    return text if len(text) <= 70 else text[:67] + "..."


def schema_differences() -> None:
    import msgspec
    import msgspec_records

    print("\nmsgspec.json.schema against the shipped schemas (differences grouped by keyword):")
    for file_name, record in (
        ("suite.schema.json", msgspec_records.SuiteConfig),
        ("case.schema.json", msgspec_records.CaseConfig),
    ):
        shipped = json.loads((SHIPPED_SCHEMAS / file_name).read_text(encoding="utf-8"))
        produced = msgspec.json.schema(record)
        produced_defs = produced.pop("$defs", {})
        if produced == {"$ref": f"#/$defs/{record.__name__}"}:
            produced = produced_defs.pop(record.__name__)
        shipped_defs = shipped.pop("$defs", {})
        pairs = [(record.__name__, shipped, produced)]
        pairs += [
            (name, shipped_defs.get(name, _MISSING), produced_defs.get(name, _MISSING))
            for name in sorted(shipped_defs.keys() | produced_defs.keys())
        ]
        groups: dict[str, list[tuple[Any, ...]]] = {}
        for name, left, right in pairs:
            for path, a, b in _differences(left, right, (name,)):
                groups.setdefault(_group(path, a, b), []).append((path, a, b))
        print(f"  {file_name}:")
        for group, found in sorted(groups.items()):
            path, a, b = found[0]
            print(
                f"    {group}: {len(found)}x, e.g. {'.'.join(path)}: "
                f"shipped {_shown(a)} / msgspec {_shown(b)}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()

    WORK.mkdir(exist_ok=True)
    ensure_msgspec()
    write_oracle()
    suite, documents = write_documents()
    measure(args.repeat, suite, documents)
    sys.path[:0] = [str(MSGSPEC_LIB), str(BENCH), str(WORK)]
    fidelity()
    schema_differences()


if __name__ == "__main__":
    main()
