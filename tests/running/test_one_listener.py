"""The run's model gateway answers on the HTTP recorder's listener: one address for an agent's
model calls and its other HTTP traffic (live mode, which has no recorder, gives the gateway a
listener of its own)."""

from __future__ import annotations

import json
import sys
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from builders import write_suite
from trialrun.config import load_suite
from trialrun.config.models import Mode
from trialrun.running.services import RunServices

MODEL_HEADER = '{"format": "trialrun-model-cassette", "schema_version": 1}\n'


def suite_with_gateway(tmp_path: Path, mode: str) -> Path:
    return write_suite(
        tmp_path,
        name="one-listener",
        agent=[sys.executable, "-c", "pass"],
        tools=[],
        cases={"t1": {"input": {}, "cassette": "cassettes/t1.jsonl"}},
        cassettes={"t1.jsonl": "", "t1.model.jsonl": MODEL_HEADER},
        settings="model_gateway: {upstreams: {openai: 'http://127.0.0.1:9'}}\n",
        mode=mode,
    )


@pytest.mark.parametrize("mode", ["record", "replay"])
def test_the_gateway_shares_the_recorder_address(tmp_path: Path, mode: Mode) -> None:
    suite = load_suite(suite_with_gateway(tmp_path, mode))
    services = RunServices(suite, mode)
    services.start()
    try:
        case = services.for_case(suite.cases[0])
        env = case.open({})
        try:
            base = urlsplit(env["OPENAI_BASE_URL"])
            proxy = urlsplit(env["HTTP_PROXY"])
            assert (base.hostname, base.port) == services.recorder_address
            assert (proxy.hostname, proxy.port) == services.recorder_address
            # Origin form reaches the gateway: an unknown path gets the gateway's own 404.
            root = env["OPENAI_BASE_URL"].removesuffix("/openai/v1")
            request = urllib.request.Request(f"{root}/nowhere/v1/x", data=b"{}", method="POST")
            opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
            with pytest.raises(urllib.error.HTTPError) as caught:
                opener.open(request, timeout=60)
            assert caught.value.code == 404
            assert "unknown provider" in json.loads(caught.value.read())["error"]["message"]
        finally:
            case.discard()
    finally:
        services.stop()


def test_in_live_mode_the_gateway_listens_on_its_own(tmp_path: Path) -> None:
    suite = load_suite(suite_with_gateway(tmp_path, "live"))
    services = RunServices(suite, "live")
    services.start()
    try:
        assert services.recorder_address is None
        env = services.for_case(suite.cases[0]).open({})
        assert urlsplit(env["OPENAI_BASE_URL"]).port is not None
        assert "HTTP_PROXY" not in env
    finally:
        services.stop()
