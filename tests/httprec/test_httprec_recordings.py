"""The consume-once core both replays share (``matching.Recordings``) and record order."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trialrun.config.models import Normalization, ReplaceText
from trialrun.errors import ConfigError
from trialrun.gateway.normalize import RequestNormalizer as ModelNormalizer
from trialrun.httprec.arrivals import Arrivals
from trialrun.httprec.matching import Recordings, RequestNormalizer

KEYS = st.lists(st.sampled_from("abc"), max_size=12)


@given(KEYS, st.lists(st.sampled_from("abcd"), max_size=20))
def test_each_recording_answers_once_and_a_key_in_file_order(
    keys: list[str], asked: list[str]
) -> None:
    recordings = Recordings(list(range(len(keys))), keys, ["g"] * len(keys))
    served: list[int] = []
    for key in asked:
        found = recordings.take(key)
        expected = [i for i, k in enumerate(keys) if k == key and i not in served]
        assert found == (expected[0] if expected else None)
        if found is not None:
            served.append(found)
    assert recordings.unused() == [i for i in range(len(keys)) if i not in served]
    for key in "abcd":
        assert recordings.used_of(key) == sum(1 for i in served if keys[i] == key)


def test_take_next_serves_a_group_in_order_and_skips_what_a_key_took() -> None:
    recordings = Recordings(["a1", "b1", "a2"], ["x", "y", "z"], ["a", "b", "a"])
    assert recordings.take("x") == "a1"
    assert recordings.take_next("a") == "a2"  # a1 was taken by its key
    assert recordings.take_next("a") is None and recordings.take("z") is None
    assert recordings.used_of("z") == 1 and recordings.unused() == ["b1"]
    assert recordings.knows("b") and not recordings.knows("c")


def test_the_nearest_is_an_unused_one_until_every_one_was_used() -> None:
    recordings = Recordings(["close", "far"], ["k1", "k2"], ["g", "g"])
    likeness = {0: 10, 1: 1}.__getitem__
    assert recordings.nearest("g", likeness) == (0, False)
    recordings.take("k1")
    assert recordings.nearest("g", likeness) == (1, False)
    recordings.take("k2")
    assert recordings.nearest("g", likeness) == (0, True)
    assert recordings.nearest("other", likeness) is None
    fresh = Recordings(["close", "far"], ["k1", "k2"], ["g", "g"])
    assert fresh.nearest("g", {0: 1, 1: 10}.__getitem__, limit=1) == (0, False)


def test_concurrent_takes_never_serve_a_recording_twice() -> None:
    recordings = Recordings(list(range(200)), ["same"] * 200, ["g"] * 200)
    served: list[int] = []
    lock = threading.Lock()

    def take_all() -> None:
        while (found := recordings.take("same")) is not None:
            with lock:
                served.append(found)

    threads = [threading.Thread(target=take_all) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(served) == list(range(200)) and recordings.unused() == []


def test_arrivals_keep_the_order_of_arrival_and_drop_empty_places() -> None:
    arrivals: Arrivals[str] = Arrivals()
    first, second, third = arrivals.reserve(), arrivals.reserve(), arrivals.reserve()
    arrivals.fill(third, "third")
    arrivals.fill(first, "first")
    assert second == 1
    assert arrivals.filled() == ["first", "third"]
    times = [t for t, _ in arrivals.arrived()]
    assert times == sorted(times)


@pytest.mark.parametrize("normalizer", [RequestNormalizer, ModelNormalizer])
def test_a_bad_user_pattern_is_refused_when_the_normalizer_is_made(normalizer: type) -> None:
    rules = Normalization(replace_text=[ReplaceText(pattern="(unclosed", replacement="x")])
    with pytest.raises(ConfigError, match=r"\(unclosed"):
        normalizer(rules)


def test_the_model_normalizer_applies_the_user_rules_after_its_defaults() -> None:
    rules = Normalization(replace_text=[ReplaceText(pattern="<date>", replacement="DAY")])
    body = {"messages": [{"content": "today is 2026-12-04"}], "user": "u1"}
    assert ModelNormalizer(rules).normalize(body) == {"messages": [{"content": "today is DAY"}]}
    assert RequestNormalizer(rules).normalize(body) == body
