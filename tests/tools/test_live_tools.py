"""Live tools: loading the suite's tool module and running calls with timeouts and error capture."""

from __future__ import annotations

import asyncio
import datetime
import math
import sys
import textwrap
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trialrun.base.jsonvalue import json_problem
from trialrun.base.quoting import shortened
from trialrun.config.models import Normalization, ReplaceText
from trialrun.errors import ConfigError
from trialrun.tools.base import ToolOutcome
from trialrun.tools.live import (
    LiveBackend,
    MissingToolError,
    ToolFn,
    ToolModuleError,
    builtin_tools,
    load_tool_module,
    select_tools,
)


def write_module(directory: Path, source: str) -> str:
    """A tool module with a unique name, so that Python's module cache never mixes tests."""
    name = f"tools_{uuid.uuid4().hex}"
    (directory / f"{name}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    return name


def call(backend: LiveBackend, name: str, args: dict[str, Any] | None = None) -> ToolOutcome:
    return asyncio.run(backend.call(name, args or {}))


# --- loading the tool module ---------------------------------------------------------------------


def test_tools_load_from_the_suite_directory_with_the_builtins(tmp_path: Path) -> None:
    name = write_module(
        tmp_path,
        """
        import helper_for_tools

        class CreateIssue:
            name = "create_issue"
            def call(self, args):
                return {"id": 7, "title": args["title"]}

        async def fetch(args):
            return {"fetched": args["url"]}

        TOOLS = {
            "echo": lambda args: {"echo": args},
            "create_issue": CreateIssue(),
            "fetch": fetch,
            "helper": helper_for_tools.answer,
        }
        """,
    )
    (tmp_path / "helper_for_tools.py").write_text("def answer(args):\n    return 42\n")
    tools = load_tool_module(name, tmp_path)
    assert set(tools) == {
        "echo",
        "create_issue",
        "fetch",
        "helper",
        "search_docs",
        "mock_search_docs",
    }
    backend = LiveBackend(tools, timeout_s=5)
    assert call(backend, "create_issue", {"title": "t"}).result == {"id": 7, "title": "t"}
    assert call(backend, "fetch", {"url": "u"}).result == {"fetched": "u"}
    assert call(backend, "helper").result == 42


def test_a_module_tool_overrides_a_builtin(tmp_path: Path) -> None:
    name = write_module(tmp_path, "TOOLS = {'search_docs': lambda args: 'mine'}\n")
    tools = load_tool_module(name, tmp_path)
    assert call(LiveBackend(tools, timeout_s=5), "search_docs", {"q": "x"}).result == "mine"
    assert tools["mock_search_docs"] is builtin_tools()["mock_search_docs"]


def test_the_builtin_search_fake_answers_as_runledgers() -> None:
    # A RunLedger suite recorded with the built-in must write the cassette RunLedger writes.
    backend = LiveBackend(builtin_tools(), timeout_s=5)
    outcome = call(backend, "search_docs", {"q": "  reset password "})
    assert outcome.ok
    assert outcome.result == {
        "hits": [
            {"title": "Reset password", "snippet": "Results for reset password: reset password"},
            {"title": "Account help", "snippet": "Results for reset password: account access"},
        ]
    }


@pytest.mark.parametrize("args", [{}, {"q": ""}, {"q": "   "}])
def test_the_builtin_search_fake_says_unknown_for_an_empty_query(args: dict[str, Any]) -> None:
    outcome = call(LiveBackend(builtin_tools(), timeout_s=5), "mock_search_docs", args)
    snippets = [hit["snippet"] for hit in outcome.result["hits"]]
    assert snippets == [
        "Results for unknown: reset password",
        "Results for unknown: account access",
    ]


MODULE_ERRORS = [
    ("X = 1\n", "must define TOOLS"),
    ("TOOLS = [lambda args: 1]\n", "must be a dict of tool name -> function, found list"),
    ("TOOLS = {'a': 5}\n", "TOOLS['a'] in tool_module"),
    ("TOOLS = {1: lambda args: 1}\n", "must have string keys, found int 1"),
    ("class T:\n    def call(self, args): ...\nTOOLS = {'t': T}\n", "is the class T; expected"),
    ("raise RuntimeError('no config')\nTOOLS = {}\n", "raised RuntimeError while importing"),
    ("import sys\nsys.exit('no config')\n", "raised SystemExit while importing: no config"),
    (
        "class Odd(Exception):\n    def __str__(self):\n        raise ValueError\nraise Odd\n",
        "raised Odd while importing",
    ),
    ("import package_that_is_not_installed_x\n", "failed to import: No module named"),
    (
        "def lookup(*, order_id):\n    return {}\nTOOLS = {'lookup': lookup}\n",
        "TOOLS['lookup'] in tool_module '...' cannot be called with one argument (too many "
        "positional arguments); trialrun calls each tool as lookup(args), args being one dict "
        "of the call's arguments: write def lookup(args) and read args['...'], or wrap a "
        "keyword-style function in TOOLS: 'lookup': lambda args: lookup(**args)",
    ),
    (
        "def lookup(order_id, region):\n    return {}\nTOOLS = {'lookup': lookup}\n",
        "cannot be called with one argument (missing a required argument: 'region')",
    ),
    (
        "class T:\n    def call(self):\n        return {}\nTOOLS = {'t': T()}\n",
        "TOOLS['t'] in tool_module '...' cannot be called with one argument (too many",
    ),
]


@pytest.mark.parametrize(("source", "message"), MODULE_ERRORS)
def test_a_bad_tool_module_is_a_config_error(tmp_path: Path, source: str, message: str) -> None:
    name = write_module(tmp_path, source)
    with pytest.raises(ToolModuleError) as caught:
        load_tool_module(name, tmp_path)
    assert message.replace("'...'", f"'{name}'", 1) in str(caught.value)
    assert isinstance(caught.value, ConfigError) and caught.value.key == "tool_module"


def test_a_missing_tool_module_says_where_it_looked(tmp_path: Path) -> None:
    with pytest.raises(ToolModuleError) as caught:
        load_tool_module("no_such_tools_module", tmp_path)
    assert "tool_module 'no_such_tools_module' not found" in str(caught.value)
    assert str(tmp_path.resolve()) in str(caught.value)


def test_select_tools_keeps_the_registry_and_names_every_missing_tool() -> None:
    available: dict[str, ToolFn] = {"a": lambda args: 1, **builtin_tools()}
    assert list(select_tools(available, ["a", "search_docs"])) == ["a", "search_docs"]
    with pytest.raises(MissingToolError) as caught:
        select_tools(available, ["a", "create_issue", "close_issue"])
    assert str(caught.value).startswith("Tools not found in registry: close_issue, create_issue")
    assert caught.value.missing == ["close_issue", "create_issue"]


# --- running calls -------------------------------------------------------------------------------


def test_an_unknown_tool_raises_for_the_session() -> None:
    with pytest.raises(MissingToolError, match="Tools not found in registry: nope"):
        call(LiveBackend({"a": lambda args: 1}, timeout_s=1), "nope")


def test_an_exception_becomes_a_tool_error() -> None:
    def broken(args: dict[str, Any]) -> Any:
        raise ConnectionError("upstream refused")

    def silent(args: dict[str, Any]) -> Any:
        raise KeyError

    backend = LiveBackend({"broken": broken, "silent": silent}, timeout_s=5)
    # The error names the tool and what it raised, so a record-mode failure says where to look.
    assert call(backend, "broken") == ToolOutcome(
        ok=False, error="tool 'broken' raised ConnectionError: upstream refused"
    )
    assert call(backend, "silent") == ToolOutcome(ok=False, error="tool 'silent' raised KeyError")


def test_a_keyword_style_tool_that_raises_is_told_how_to_wrap_it() -> None:
    orders = {"A1": "shipped"}

    def lookup(order_id: str) -> Any:  # keyword style: gets the whole dict as order_id
        return {"status": orders[order_id]}

    def plain(args: dict[str, Any]) -> Any:
        return {"status": orders[args["order_id"]]}

    backend = LiveBackend({"lookup": lookup, "plain": plain}, timeout_s=5)
    assert call(backend, "lookup", {"order_id": "A1"}).error == (
        "tool 'lookup' raised TypeError: unhashable type: 'dict' (its parameter 'order_id' is "
        "an argument's name; trialrun calls each tool as lookup(args), args being one dict of "
        "the call's arguments: write def lookup(args) and read args['...'], or wrap a "
        "keyword-style function in TOOLS: 'lookup': lambda args: lookup(**args))"
    )
    # A tool written as the contract says raises its own error, with no advice about keywords;
    # and neither do its parameters' names matter when none is a key of the call's arguments.
    assert call(backend, "plain", {"order_id": "B2"}).error == "tool 'plain' raised KeyError: 'B2'"
    assert call(backend, "lookup", {"id": "A1"}).error == (
        "tool 'lookup' raised TypeError: unhashable type: 'dict'"
    )
    assert call(backend, "plain", {"order_id": "A1"}).result == {"status": "shipped"}


def test_a_tool_without_a_signature_loads_and_runs(tmp_path: Path) -> None:
    # Some builtins have no signature to check: they are trusted, and their errors say no more.
    name = write_module(tmp_path, "TOOLS = {'biggest': max}\n")
    backend = LiveBackend(load_tool_module(name, tmp_path), timeout_s=5)
    assert call(backend, "biggest", {"a": 1, "b": 2}).result == "b"
    with pytest.raises(ValueError) as raised:  # its words differ between Python versions
        max({})
    assert call(backend, "biggest", {}).error == f"tool 'biggest' raised ValueError: {raised.value}"


def test_a_tools_own_timeout_error_is_not_taken_for_the_deadline() -> None:
    def reads(args: dict[str, Any]) -> Any:
        raise TimeoutError("read timed out")

    outcome = call(LiveBackend({"reads": reads}, timeout_s=5), "reads")
    error = "tool 'reads' raised TimeoutError: read timed out"
    assert outcome == ToolOutcome(ok=False, error=error)


def test_a_tool_calling_sys_exit_is_a_tool_error_not_an_exit() -> None:
    def quits(args: dict[str, Any]) -> Any:
        raise SystemExit(3)

    async def quits_async(args: dict[str, Any]) -> Any:
        sys.exit(4)

    def exits_on_reading(args: dict[str, Any]) -> Any:
        class Exits(dict[str, Any]):
            def items(self) -> Any:
                raise SystemExit(5)

        return Exits(a=1)

    tools = {"quits": quits, "quits_async": quits_async, "exits_on_reading": exits_on_reading}
    backend = LiveBackend(tools, timeout_s=5)
    outcome = call(backend, "quits")
    assert not outcome.ok and "SystemExit" in (outcome.error or "")
    assert call(backend, "quits_async") == ToolOutcome(
        ok=False, error="tool 'quits_async' raised SystemExit: 4"
    )
    outcome = call(backend, "exits_on_reading")
    assert not outcome.ok and "raised SystemExit" in (outcome.error or "")


def test_a_hung_tool_times_out_without_blocking_the_loop() -> None:
    release = threading.Event()

    def slow(args: dict[str, Any]) -> Any:
        release.wait(60)  # hung until the call has returned: a call that waited gets "late"
        return "late"

    backend = LiveBackend({"slow": slow}, timeout_s=0.05)
    try:
        outcome = call(backend, "slow")
    finally:
        release.set()
    assert outcome == ToolOutcome(ok=False, error="tool 'slow' timed out after 50 ms")


def test_a_slow_async_tool_times_out_too() -> None:
    async def slow(args: dict[str, Any]) -> Any:
        await asyncio.sleep(5)

    assert call(LiveBackend({"slow": slow}, timeout_s=0.02), "slow").error == (
        "tool 'slow' timed out after 20 ms"
    )


def test_async_tools_and_callables_returning_awaitables_are_awaited() -> None:
    async def direct(args: dict[str, Any]) -> Any:
        await asyncio.sleep(0)
        return {"n": args["n"] + 1}

    class AsyncCallable:
        async def __call__(self, args: dict[str, Any]) -> Any:
            return "object"

    def returns_coroutine(args: dict[str, Any]) -> Any:
        return direct(args)

    backend = LiveBackend(
        {"direct": direct, "object": AsyncCallable(), "indirect": returns_coroutine}, timeout_s=5
    )
    assert call(backend, "direct", {"n": 1}).result == {"n": 2}
    assert call(backend, "object").result == "object"
    assert call(backend, "indirect", {"n": 2}).result == {"n": 3}


def test_calls_run_concurrently_off_the_event_loop() -> None:
    # Each call returns only once all five are running at the same time.
    all_running = threading.Barrier(5, timeout=60)

    def meeting(args: dict[str, Any]) -> Any:
        all_running.wait()
        return args["i"]

    backend = LiveBackend({"meeting": meeting}, timeout_s=120)

    async def many() -> list[ToolOutcome]:
        return list(await asyncio.gather(*(backend.call("meeting", {"i": i}) for i in range(5))))

    outcomes = asyncio.run(many())
    assert [o.result for o in outcomes] == [0, 1, 2, 3, 4], outcomes


NOT_JSON = [
    (datetime.datetime(2024, 1, 2), "datetime at $"),
    ({"when": {"at": [1, datetime.date(2024, 1, 2)]}}, "date at $.when.at[1]"),
    ({"x": math.nan}, "nan at $.x (JSON has no NaN/Infinity)"),
    ({1: "a"}, "int key 1 at $ (JSON keys are strings)"),
    ({"s": {1, 2}}, "set at $.s"),
    (
        {"n": [10**5000]},
        f"an integer of more than {sys.get_int_max_str_digits()} digits at $.n[0] "
        "(Python cannot write it out)",
    ),
]


def _nested(levels: int) -> Any:
    value: Any = []
    for _ in range(levels - 1):
        value = [value]
    return value


def _containing_itself() -> Any:
    value: dict[str, Any] = {"a": 1}
    value["again"] = value
    return value


@pytest.mark.parametrize(
    ("value", "where"),
    [
        (_nested(101), "$" + "[0]" * 100),
        (_nested(5000), "$" + "[0]" * 100),
        (_containing_itself(), "$" + ".again" * 100),
    ],
    ids=["101 levels", "5000 levels", "contains itself"],
)
def test_a_result_nested_past_the_limit_or_containing_itself_is_a_tool_error(
    value: Any, where: str
) -> None:
    outcome = call(LiveBackend({"t": lambda args: value}, timeout_s=5), "t")
    assert outcome == ToolOutcome(
        ok=False,
        error="tool 't' returned a value that is not JSON: objects and arrays nested more "
        f"than 100 levels deep at {shortened(where, 200)} (or a value that contains itself)",
    )


def test_an_integer_past_a_lowered_digit_limit_is_found() -> None:
    old = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(640)  # the least Python allows
    try:
        assert json_problem({"n": 10**700}) == (
            "an integer of more than 640 digits at $.n (Python cannot write it out)"
        )
        assert json_problem(10**600) is None
    finally:
        sys.set_int_max_str_digits(old)


def test_where_a_problem_is_quotes_long_keys_shortened() -> None:
    key = "k" * 1000
    assert json_problem({key: {1: "x"}}) == (
        f"int key 1 at {shortened('$.' + key, 200)} (JSON keys are strings)"
    )
    assert json_problem({("t" * 500,): 1}) == (
        f"tuple key {shortened(repr(('t' * 500,)), 200)} at $ (JSON keys are strings)"
    )


def test_a_result_nested_exactly_to_the_limit_passes() -> None:
    outcome = call(LiveBackend({"t": lambda args: _nested(100)}, timeout_s=5), "t")
    assert outcome.ok
    assert outcome.result == _nested(100)


def test_a_result_whose_own_methods_raise_is_a_tool_error() -> None:
    class Broken(dict[str, Any]):
        def items(self) -> Any:
            raise RuntimeError("no items")

    outcome = call(LiveBackend({"t": lambda args: Broken(a=1)}, timeout_s=5), "t")
    assert outcome == ToolOutcome(
        ok=False,
        error="tool 't' returned a value that is not JSON: reading it raised RuntimeError: "
        "no items",
    )


def test_an_exception_that_cannot_say_what_it_is_is_named() -> None:
    class Mute(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no words")

    def raises(args: dict[str, Any]) -> Any:
        raise Mute

    outcome = call(LiveBackend({"t": raises}, timeout_s=5), "t")
    assert outcome == ToolOutcome(ok=False, error="tool 't' raised Mute")


@pytest.mark.parametrize(("value", "problem"), NOT_JSON)
def test_a_result_that_is_not_json_is_a_tool_error(value: Any, problem: str) -> None:
    outcome = call(LiveBackend({"t": lambda args: value}, timeout_s=5), "t")
    assert outcome == ToolOutcome(
        ok=False, error=f"tool 't' returned a value that is not JSON: {problem}"
    )


def test_results_are_copied_and_tuples_become_lists() -> None:
    shared: dict[str, tuple[int, ...]] = {"items": (1, 2)}
    outcome = call(LiveBackend({"t": lambda args: shared}, timeout_s=5), "t")
    assert outcome.result == {"items": [1, 2]}
    shared["items"] = (3,)
    assert outcome.result == {"items": [1, 2]}


def test_results_and_errors_are_normalized() -> None:
    rules = Normalization(
        strip_keys=["request_id"],
        replace_text=[ReplaceText(pattern="req-[0-9]+", replacement="<req>")],
    )

    def failing(args: dict[str, Any]) -> Any:
        raise RuntimeError("req-991 failed")

    backend = LiveBackend(
        {"ok": lambda args: {"request_id": 5, "msg": "req-12 done"}, "failing": failing},
        timeout_s=5,
        normalization=rules,
    )
    assert call(backend, "ok").result == {"msg": "<req> done"}
    assert call(backend, "failing").error == "tool 'failing' raised RuntimeError: <req> failed"


def test_the_timeout_must_be_positive() -> None:
    with pytest.raises(ValueError, match="timeout_s must be positive"):
        LiveBackend({}, timeout_s=0)


def test_a_live_backend_has_nothing_unused_and_nothing_to_close() -> None:
    backend = LiveBackend(builtin_tools(), timeout_s=1)
    backend.close(clean=False)
    assert backend.unused() == 0


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@given(json_values)
def test_every_json_value_passes_the_json_check(value: Any) -> None:
    assert json_problem(value) is None
