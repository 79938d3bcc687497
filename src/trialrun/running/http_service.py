"""The run's HTTP recorder as the agents see it: proxy variables, CA bundles, one case's traffic.

In record and replay mode every agent gets the run's HTTP recorder (``trialrun.httprec``)
through the standard proxy variables, and the CA variables where its case needs the run's
authority (record mode, or a replay of https exchanges; ``http_env``): its exchanges go to
``<stem>.http.jsonl``; in replay a miss fails the case, a host with no recording as the network
seal words it, and recordings no request used are reported as ``http:<METHOD> <url>``.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from trialrun.base.accesskey import new_key
from trialrun.base.fsutil import atomic_write_bytes
from trialrun.base.leftovers import remove_tree
from trialrun.base.results import AgentRun, RecordingPlace
from trialrun.base.words import counted
from trialrun.config import Case, Suite
from trialrun.config.models import Mode
from trialrun.running.recording_paths import http_cassette_path
from trialrun.running.scratch import scratch_dir
from trialrun.running.tool_bodies import ToolBodies
from trialrun.running.trace_merge import fail_mismatch

if TYPE_CHECKING:
    import ssl

    from trialrun.httprec.authority import RunAuthority
    from trialrun.httprec.exchange import Exchange
    from trialrun.httprec.front import HttpRecorder
    from trialrun.httprec.traffic import CaseTraffic

PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")
NO_PROXY_VARIABLES = ("NO_PROXY", "no_proxy")
CA_VARIABLES = ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS")
DIRECT = "127.0.0.1,localhost,::1"
"""What agents reach without the recorder: trialrun's own services, which listen on loopback."""


class RunHttp:
    """The run's HTTP recorder, the authority it makes when a case needs one, and the CA
    bundles handed to agents (one per ``SSL_CERT_FILE`` they already had)."""

    def __init__(self, mode: Mode) -> None:
        self._mode = mode
        self._recorder: HttpRecorder | None = None
        self._recorder_dir: Path | None = None
        self._bundles: dict[str, Path] = {}
        self._upstream_tls: ssl.SSLContext | None = None

    def start(self) -> None:
        if self._recorder is not None:
            return
        from trialrun.httprec.front import HttpRecorder

        # The authority is made only when a case needs it (see CaseHttp.open).
        self._recorder = HttpRecorder(self._make_authority)
        if self._mode == "record":
            from trialrun.httprec.upstream import upstream_tls

            self._upstream_tls = upstream_tls()

    def _make_authority(self) -> RunAuthority:
        """The run's certificate authority, and the private directory it and the CA bundles
        use (made once, by the recorder, under its lock)."""
        from trialrun.httprec.authority import RunAuthority

        directory = scratch_dir("trialrun-http-")
        self._recorder_dir = directory
        return RunAuthority(directory)

    @property
    def recorder(self) -> HttpRecorder | None:
        return self._recorder

    @property
    def upstream_tls(self) -> ssl.SSLContext | None:
        return self._upstream_tls

    @property
    def address(self) -> tuple[str, int] | None:
        """Where the recorder listens (None: not started)."""
        return None if self._recorder is None else self._recorder.address

    def ca_bundle(self, agent_env: Mapping[str, str]) -> Path:
        """The CA bundle for an agent whose environment is ``agent_env``: the system's
        authorities, the file its ``SSL_CERT_FILE`` named (if any), the run's authority."""
        from trialrun.httprec.authority import bundle

        assert self._recorder is not None
        authority = self._recorder.authority
        assert self._recorder_dir is not None
        extra = agent_env.get("SSL_CERT_FILE") or ""
        path = self._bundles.get(extra)
        if path is None:
            path = self._recorder_dir / f"ca-bundle-{len(self._bundles)}.pem"
            data = bundle(authority, Path(extra) if extra else None)
            atomic_write_bytes(path, data)
            self._bundles[extra] = path
        return path

    def stop(self) -> None:
        if self._recorder is not None:
            self._recorder.stop()
            self._recorder = None
        if self._recorder_dir is not None:
            remove_tree(self._recorder_dir)
            self._recorder_dir = None
            self._bundles.clear()


class CaseHttp:
    """One case's traffic through the run's recorder: its proxy URL, then judging and writing
    what went through."""

    def __init__(
        self,
        suite: Suite,
        case: Case,
        mode: Mode,
        run_http: RunHttp,
        run_id: str,
        *,
        update: bool = False,
        keep_unused: bool = False,
    ) -> None:
        """``update`` (record mode, ``--mode update``): requests that match an unused old
        exchange are answered from it, its line kept; ``keep_unused`` keeps the unused ones."""
        self._update = update and mode == "record"
        self._keep_unused = keep_unused
        self._suite = suite
        self._case = case
        self._mode = mode
        self._run_http = run_http
        self._run_id = run_id
        self._open = False

    def open(self, agent_env: Mapping[str, str]) -> dict[str, str]:
        recorder = self._run_http.recorder
        if recorder is None:
            return {}
        path = http_cassette_path(self._case)
        if self._mode == "replay" and not path.exists():
            # Nothing was recorded: every request is refused as the seal would, a CONNECT
            # before any TLS. Nothing is loaded unless a request comes, and no authority made.
            url = recorder.open_case(self._run_id, new_key(), self._refusing_traffic)
            self._open = True
            return http_env(url, None)
        traffic = self._traffic_of(path)
        url = recorder.open_case(self._run_id, new_key(), traffic)
        self._open = True
        return http_env(url, self._run_http.ca_bundle(agent_env) if traffic.tls else None)

    def _traffic_of(self, path: Path) -> CaseTraffic:
        """The case's traffic; in replay its recording, whose https exchanges (if any) are
        why the agent is given the run's authority."""
        from trialrun.httprec.cassette import load_cassette
        from trialrun.httprec.matching import Replay, RequestNormalizer
        from trialrun.httprec.traffic import CaseTraffic

        normalizer = RequestNormalizer(self._suite.config.normalization)
        traffic = CaseTraffic(self._mode, path, normalizer, self._run_http.upstream_tls)
        if self._mode == "replay":
            exchanges = load_cassette(path)
            traffic.replay = Replay(exchanges, normalizer)
            traffic.tls = any(e.url.lower().startswith("https:") for e in exchanges)
        elif self._update and path.exists():
            from trialrun.httprec.jsonl import raw_lines

            traffic.replay = Replay(load_cassette(path), normalizer)
            traffic.old_lines = raw_lines(path)
        return traffic

    def _refusing_traffic(self) -> CaseTraffic:
        """A replay with no recording: made by the recorder when a first request comes."""
        from trialrun.httprec.matching import Replay, RequestNormalizer
        from trialrun.httprec.traffic import CaseTraffic

        normalizer = RequestNormalizer(self._suite.config.normalization)
        path = http_cassette_path(self._case)
        return CaseTraffic(self._mode, path, normalizer, replay=Replay([], normalizer), tls=False)

    def close_traffic(self) -> CaseTraffic | None:
        """The case's traffic, its credentials closed; None: no request ever needed it."""
        opened, self._open = self._open, False
        recorder = self._run_http.recorder
        if not opened or recorder is None:
            return None
        return recorder.close_case(self._run_id)

    def finish(self, run: AgentRun, *, clean: bool, bodies: ToolBodies) -> list[str]:
        """Judge replay misses, write a clean recording; the unused recordings' names.

        Record marks each exchange a tool's body sent with that tool; ``bodies`` hears of
        them, and of the recordings replay left alone because the tool was answered from its
        cassette.
        """
        traffic = self.close_traffic()
        if traffic is None:
            return []
        run.http_exchanges += traffic.served
        if traffic.misses:
            first = traffic.misses[0]
            more = len(traffic.misses) - 1
            message = first.message + (
                f" (and {counted(more, 'more refused request')})" if more else ""
            )
            fail_mismatch(run, message, kind=first.kind)
        if self._mode == "record":
            exchanges = _marked_exchanges(traffic, bodies)
            if clean and traffic.replay is not None:
                exchanges += [
                    e
                    for e in traffic.replay.unused()
                    if self._keep_unused or bodies.kept_by_update(e)
                ]
            if clean:
                if exchanges:
                    from trialrun.httprec.cassette import write_cassette

                    write_cassette(traffic.cassette, exchanges, traffic.old_lines)
                else:  # the case no longer calls any HTTP API: no stale recording stays
                    with contextlib.suppress(FileNotFoundError):
                        traffic.cassette.unlink()
            return []
        assert traffic.replay is not None
        unused = bodies.unused("http", traffic.replay.unused(), _exchange_inside)
        path = str(traffic.cassette.resolve())
        run.unused_places += [
            RecordingPlace("http", path, e.line, f"http:{e.method} {e.url}")
            for e in unused
            if e.line
        ]
        return [f"http:{e.method} {e.url}" for e in unused]


def _exchange_inside(exchange: Exchange) -> str | None:
    return exchange.inside_tool


def _marked_exchanges(traffic: CaseTraffic, bodies: ToolBodies) -> list[Exchange]:
    """Record mode: the case's exchanges, each sent inside a tool's body marked with that tool
    (``bodies`` hears of them)."""
    inside = bodies.inside
    if inside is None:
        return traffic.recorded_exchanges()
    traffic.wait_idle()  # as recorded_exchanges(): a request still being served is kept too
    marked = [
        dataclasses.replace(exchange, inside_tool=inside(arrived))
        for arrived, exchange in traffic.arrivals.arrived()
    ]
    bodies.made("http", [exchange.inside_tool for exchange in marked])
    return marked


def http_env(proxy_url: str, ca_bundle: Path | None) -> dict[str, str]:
    """The variables through which clients find the recorder and trust its authority.

    They replace whatever the suite's or the user's environment set for the same names: an
    agent that could go around the recorder would reach the network in replay. ``ca_bundle``
    None (a replay with no https recording): no CA variables, the agent's TLS settings stay.
    """
    env = dict.fromkeys(PROXY_VARIABLES, proxy_url)
    env.update(dict.fromkeys(NO_PROXY_VARIABLES, DIRECT))
    if ca_bundle is not None:
        env.update(dict.fromkeys(CA_VARIABLES, str(ca_bundle)))
    return env
