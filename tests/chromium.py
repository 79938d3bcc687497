"""Open a page in headless Chromium (Debian's ``chromium``): its DOM, console messages, screenshot.

Tests that need a browser call ``require_chromium()``, which skips them with the reason where no
``chromium`` is on PATH (``make test`` installs nothing system-wide). Chromium prints every
console message, CSP violations included, to stderr as ``INFO:CONSOLE`` lines with
``--enable-logging=stderr``; ``console_messages`` collects them. The network is mapped to
nowhere (``--host-resolver-rules``), so a page that tried to fetch anything would show it too.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

TIMEOUT_S = 90
_CONSOLE = re.compile(r":INFO:CONSOLE[^\]]*\] (.*)")
# Any absolute web address a page could load: in src/href attributes or CSS url(...).
_EXTERNAL = re.compile(
    r"""(?:\b(?:src|href|xlink:href)\s*=\s*["']?\s*|url\(\s*["']?\s*)(?:https?:)?//""",
    re.IGNORECASE,
)


def chromium_binary() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def require_chromium() -> str:
    found = chromium_binary()
    if found is None:
        pytest.skip("headless Chromium is not installed (apt-get install chromium to run this)")
    return found


@dataclass(frozen=True)
class Opened:
    dom: str
    console: list[str]
    stderr: str


def _run(page: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    binary = require_chromium()
    with tempfile.TemporaryDirectory(prefix="trialrun-chromium-") as profile:
        return subprocess.run(
            [
                binary,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                f"--user-data-dir={profile}",
                "--host-resolver-rules=MAP * ~NOTFOUND",
                "--enable-logging=stderr",
                "--v=0",
                *flags,
                page.resolve().as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=False,
        )


def open_page(page: Path) -> Opened:
    """The DOM Chromium built for ``page`` and the console messages it logged meanwhile."""
    done = _run(page, "--dump-dom")
    assert done.returncode == 0, done.stderr[-2000:]
    return Opened(dom=done.stdout, console=console_messages(done.stderr), stderr=done.stderr)


def screenshot(
    page: Path, out: Path, *, width: int = 1200, height: int = 1600, dark: bool = False
) -> None:
    flags = [f"--screenshot={out}", f"--window-size={width},{height}", "--hide-scrollbars"]
    if dark:
        flags.append("--force-dark-mode")
    done = _run(page, *flags)
    assert done.returncode == 0 and out.is_file(), done.stderr[-2000:]


def console_messages(stderr: str) -> list[str]:
    return [match.group(1) for match in _CONSOLE.finditer(stderr)]


def external_references(html: str) -> list[str]:
    """Each place ``html`` points at a web address it would load (none on a self-contained page)."""
    return [html[m.start() : m.end() + 40] for m in _EXTERNAL.finditer(html)]
