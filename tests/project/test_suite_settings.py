"""The test suite's own settings: nothing in it may fail because the machine is busy."""

from __future__ import annotations

from hypothesis import HealthCheck, settings


def test_hypothesis_has_no_deadline_and_no_too_slow_check_whatever_the_profile() -> None:
    for profile in (settings.default, settings.get_profile("dev"), settings.get_profile("ci")):
        assert profile.deadline is None
        assert HealthCheck.too_slow in profile.suppress_health_check
        # Only the timing check is off: a strategy that draws too much still fails.
        assert HealthCheck.data_too_large not in profile.suppress_health_check


def test_the_ci_profile_draws_the_same_examples_every_run() -> None:
    ci = settings.get_profile("ci")
    assert ci.derandomize is True and ci.database is None
    assert settings.get_profile("dev").derandomize is False
