"""Headless Chromium for the tests of the HTML pages: open a file, see what the browser saw.

``render`` opens a page the way a reviewer opens a CI artifact (a ``file://`` URL, no server)
and returns its DOM, every console message (script errors, and CSP refusals, which Chromium
reports on the console) and every request the page itself made (read from Chromium's net log;
the browser's own background traffic, update checks and the like, carries no ``file://``
isolation key and is left out). Tests call ``require_chromium()`` first: where Debian's
``chromium`` package is absent they skip with the reason; nothing is installed.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

__all__ = [
    "Rendered",
    "chromium_path",
    "external_references",
    "render",
    "require_chromium",
    "screenshot",
]

NAMES = ("chromium", "chromium-browser")
TIMEOUT_S = 120.0
# Headless, no GPU, and nothing the browser would fetch for itself on start.
QUIET = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
)


# Any absolute web address a page could load: in src/href attributes or CSS url(...).
_EXTERNAL = re.compile(
    r"""(?:\b(?:src|href|xlink:href)\s*=\s*["']?\s*|url\(\s*["']?\s*)(?:https?:)?//""",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Rendered:
    dom: str
    console: list[str]
    """Each ``CONSOLE`` line Chromium logged: any of them is a message the page caused."""
    requests: list[str]
    """URLs the page requested, other than ``file:`` ones."""


def chromium_path() -> str | None:
    for name in NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def require_chromium() -> str:
    found = chromium_path()
    if found is None:
        pytest.skip(
            "chromium is not on PATH (Debian package 'chromium'): the headless-browser check "
            "of the HTML pages needs it; nothing is installed by the tests"
        )
    return found


def render(page: Path, workdir: Path) -> Rendered:
    """Open ``page`` headless; its DOM after load, console messages and requests."""
    browser = require_chromium()
    workdir.mkdir(parents=True, exist_ok=True)
    netlog = workdir / "net.json"
    command = [
        browser,
        *QUIET,
        f"--user-data-dir={workdir / 'profile'}",  # never share a profile with a parallel test
        "--enable-logging=stderr",
        "--v=0",
        f"--log-net-log={netlog}",
        "--dump-dom",
        page.resolve().as_uri(),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    return Rendered(done.stdout, console, _page_requests(netlog))


def screenshot(
    page: Path,
    out: Path,
    workdir: Path,
    *,
    width: int = 1200,
    height: int = 1600,
    dark: bool = False,
) -> None:
    """A PNG of ``page``; ``dark`` asks for the dark colour scheme (prefers-color-scheme)."""
    browser = require_chromium()
    scheme = ["--force-dark-mode", "--blink-settings=preferredColorScheme=0"] if dark else []
    command = [
        browser,
        *QUIET,
        *scheme,
        f"--user-data-dir={workdir / 'profile'}",
        f"--screenshot={out}",
        f"--window-size={width},{height}",
        page.resolve().as_uri(),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    assert done.returncode == 0 and out.is_file(), done.stderr[-2000:]


def _page_requests(netlog: Path) -> list[str]:
    log = json.loads(_closed_json(netlog.read_text(encoding="utf-8")))
    start = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    urls = []
    for event in log.get("events", []):
        params = event.get("params") or {}
        if event.get("type") != start or "file://" not in str(params.get("network_isolation_key")):
            continue
        url = str(params.get("url", ""))
        if not url.startswith("file:"):
            urls.append(url)
    return urls


def _closed_json(text: str) -> str:
    """Chromium may leave the net log's event list unterminated when it exits in a hurry."""
    try:
        json.loads(text)
    except ValueError:
        return text.rstrip().rstrip(",") + "]}"
    return text


def external_references(html: str) -> list[str]:
    """Each place ``html`` points at a web address it would load (none on a self-contained page)."""
    return [html[m.start() : m.end() + 40] for m in _EXTERNAL.finditer(html)]
