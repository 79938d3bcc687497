"""The exception tree's location prefix: a line only where an error has a place in the file."""

from __future__ import annotations

from trialrun.errors import ConfigError, ConfigErrors


def test_an_error_about_a_whole_file_has_no_line() -> None:
    assert (
        str(ConfigError("cannot read file: gone", file="a.yaml"))
        == "a.yaml: cannot read file: gone"
    )


def test_an_error_at_a_place_names_its_line() -> None:
    assert str(ConfigError("bad key", file="a.yaml", line=3)) == "a.yaml:3: bad key"


def test_an_error_without_a_file_has_no_prefix() -> None:
    assert str(ConfigError("--k must be at least 1")) == "--k must be at least 1"


def test_collected_errors_keep_each_location() -> None:
    errors = ConfigErrors([ConfigError("empty", file="b.yaml"), ConfigError("x", file="c", line=2)])
    assert str(errors) == "b.yaml: empty\nc:2: x"
