"""Shared test fixtures."""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from gateway_fake_upstream import FakeUpstream
from paths import REPO_ROOT

# A shell without job control starts its background jobs with Ctrl-C ignored, and an ignored
# signal stays ignored in every program they start: the tests that interrupt a run would see
# trialrun keep ignoring it, as it rightly does for a background job.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# What trialrun keeps between runs (compiled report templates) stays out of the user's home.
_CACHE = tempfile.mkdtemp(prefix="trialrun-test-cache-")
os.environ["XDG_CACHE_HOME"] = _CACHE
atexit.register(shutil.rmtree, _CACHE, ignore_errors=True)

# No hypothesis test may fail because the machine is busy: a deadline or the too_slow health
# check measures the scheduler as much as the code. data_too_large stays on: it depends only on
# the examples drawn, and firing means a strategy builds more than its test needs.
# "ci" (what make test and CI load) also draws the same examples on every run, so a failure there
# reproduces with the same command; "dev" (plain pytest) keeps exploring new examples, even
# where CI=true is set (hypothesis would otherwise derandomize every profile there).
settings.register_profile(
    "dev", deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=False
)
settings.register_profile(
    "ci", settings.get_profile("dev"), derandomize=True, database=None, print_blob=True
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))

SHARED = REPO_ROOT.parent / "shared"


def shared_dir() -> Path:
    """The workplace's shared/ folder (peer fixtures and conformance vectors), beside the repo."""
    if SHARED.is_dir():
        return SHARED
    pytest.skip("shared/ folder with fixtures not found beside the repository")


@pytest.fixture
def peer_fixtures() -> Path:
    return shared_dir() / "peer-fixtures" / "runledger"


@pytest.fixture
def conformance() -> Path:
    return shared_dir() / "conformance" / "receipt-v0"


@pytest.fixture
def upstream() -> Iterator[FakeUpstream]:
    """A loopback stand-in for the OpenAI and Anthropic APIs (the model gateway's tests)."""
    fake = FakeUpstream()
    fake.start()
    yield fake
    fake.stop()
