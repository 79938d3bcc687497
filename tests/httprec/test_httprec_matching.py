"""Which recording answers a request: consume-once in order, normalized JSON bodies, the
suite's rules, and misses explained against the nearest recording of the same address."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from trialrun.config.models import Normalization, ReplaceText
from trialrun.httprec.exchange import Exchange
from trialrun.httprec.matching import Replay, RequestNormalizer

BASE = "https://api.example.com"


def exchange(url: str, body: str = "", *, method: str = "GET", answer: str = "") -> Exchange:
    return Exchange(method, url, 200, body.encode(), answer.encode())


def ask(replay: Replay, url: str, body: str = "", method: str = "GET") -> Exchange | None:
    return replay.take(RequestNormalizer().normalized(method, url, body.encode()))


def test_identical_requests_get_their_recordings_in_order_each_once() -> None:
    replay = Replay(
        [exchange(f"{BASE}/n", answer=str(n)) for n in range(3)] + [exchange(f"{BASE}/m")],
        RequestNormalizer(),
    )
    answers = [ask(replay, f"{BASE}/n") for _ in range(4)]
    assert [a.response_body if a else None for a in answers] == [b"0", b"1", b"2", None]
    assert [e.url for e in replay.unused()] == [f"{BASE}/m"]


def test_json_bodies_match_whatever_their_key_order_and_spacing() -> None:
    replay = Replay(
        [exchange(f"{BASE}/q", '{"a": 1, "b": [1, 2]}', method="POST")], RequestNormalizer()
    )
    assert ask(replay, f"{BASE}/q", '{ "b":[1,2],"a":1 }', "post") is not None


def test_method_url_and_body_all_count() -> None:
    replay = Replay([exchange(f"{BASE}/q", "x", method="POST")], RequestNormalizer())
    assert ask(replay, f"{BASE}/q", "x", "PUT") is None
    assert ask(replay, f"{BASE}/q?x=1", "x", "POST") is None
    assert ask(replay, f"{BASE}/q", "y", "POST") is None
    assert ask(replay, f"{BASE}/q", "x", "POST") is not None


def test_secrets_do_not_take_part_in_matching() -> None:
    """A recording holds ``[REDACTED]``; the replayed request's own secret must still match."""
    replay = Replay([exchange(f"{BASE}/q?api_key=[REDACTED]&q=1")], RequestNormalizer())
    assert ask(replay, f"{BASE}/q?api_key=k-live-123456&q=1") is not None


def test_the_suite_rules_normalize_urls_and_bodies() -> None:
    rules = Normalization(
        strip_keys=["request_id"],
        replace_text=[ReplaceText(pattern=r"\d{4}-\d\d-\d\d", replacement="<date>")],
    )
    normalizer = RequestNormalizer(rules)
    recorded = exchange(
        f"{BASE}/day/2026-01-01", json.dumps({"request_id": "r1", "q": "x"}), method="POST"
    )
    replay = Replay([recorded], normalizer)
    request = normalizer.normalized(
        "POST", f"{BASE}/day/2026-12-04", json.dumps({"q": "x", "request_id": "r9"}).encode()
    )
    assert replay.take(request) is recorded


def test_a_miss_names_the_nearest_recording_and_where_it_differs() -> None:
    replay = Replay(
        [
            exchange(f"{BASE}/search", '{"q": "rain"}', method="POST"),
            exchange(f"{BASE}/search", '{"q": "sun"}', method="POST"),
            exchange("https://other.example/search", '{"q": "snow"}', method="POST"),
        ],
        RequestNormalizer(),
    )
    request = RequestNormalizer().normalized("POST", f"{BASE}/search", b'{"q": "sunny"}')
    assert replay.take(request) is None
    message = replay.explain_miss(request)
    assert message.startswith(f"cassette mismatch: no unused recording of POST {BASE}/search")
    assert message.endswith(
        'nearest recording: line 0; first difference at body.q: recorded "sun", requested "sunny"'
    )
    assert replay.knows("api.example.com:443") and not replay.knows("api.example.com:80")


def test_a_repeated_request_past_its_recordings_says_they_were_used() -> None:
    replay = Replay([exchange(f"{BASE}/once")], RequestNormalizer())
    assert ask(replay, f"{BASE}/once") is not None
    request = RequestNormalizer().normalized("GET", f"{BASE}/once", b"")
    assert replay.explain_miss(request).endswith(
        "; 1 identical recording was already used by an earlier call"
        "; nearest recording: line 0 (already used) has the same request"
    )


@given(st.lists(st.sampled_from(["a", "b", "c"]), max_size=12), st.randoms())
def test_every_recording_is_served_exactly_once_whatever_the_order(
    paths: list[str], rng: object
) -> None:
    recorded = [exchange(f"{BASE}/{p}", answer=str(i)) for i, p in enumerate(paths)]
    replay = Replay(recorded, RequestNormalizer())
    asked = list(paths)
    rng.shuffle(asked)  # type: ignore[attr-defined]
    served = [ask(replay, f"{BASE}/{p}") for p in asked]
    assert all(s is not None for s in served)
    assert sorted(int(s.response_body) for s in served if s) == list(range(len(paths)))
    for path in "abc":  # per path, in file order
        answers = [int(s.response_body) for s in served if s and s.url.endswith(f"/{path}")]
        assert answers == sorted(answers)
    assert replay.unused() == []
