"""Scores: the Library card (exact bytes, local first, stale after an edit) and the Marketplace
card (newest version with a usable receipt; a bad receipt fails closed for its version only).

The team is a temporary bare git repository built here with plain git commands and files.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from builders import write_subject
from trialrun.cli import run_cli
from trialrun.errors import ConfigError
from trialrun.home.digest import content_digest
from trialrun.team.scores import TeamReader, library_card, marketplace_cards, receipt_problem
from trialrun.team.store import TeamError, TeamStore

SUBJECT_ID = "deploy-check-id"


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRIALRUN_HOME", str(tmp_path / "home"))
    for role in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{role}_NAME", "Tester")
        monkeypatch.setenv(f"GIT_{role}_EMAIL", "tester@example.invalid")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def make_receipt(digest: str, run_id: str, verdict: str = "PASS", **extra: Any) -> dict[str, Any]:
    receipt: dict[str, Any] = {
        "schema_version": 2,
        "skill_name": "deploy-check",
        "version": None,
        "content_digest": digest,
        "run_id": run_id,
        "verdict": verdict,
        "attribution": "wins on execution checks",
        "execution_status": "complete",
        "expected_rows": 3,
        "scored_rows": 3,
        "comparisons": {
            "candidate-vs-baseline": {"win": 2, "loss": 0, "tie": 1, "net_lift": 2 / 3}
        },
        "provenance": {"runner_handle": "alice", "model": "sonnet", "k": 1},
    }
    receipt.update(extra)
    return receipt


def make_subject(root: Path, body: str = "v1 body") -> Path:
    return write_subject(
        root,
        f"name: deploy-check\nid: {SUBJECT_ID}\n",
        files={"SKILL.md": f"# deploy-check\n{body}\n"},
    )


def store_local(home: Path, receipt: dict[str, Any]) -> Path:
    digest_hex = receipt["content_digest"].removeprefix("sha256:")
    run_dir = home / "evals" / "local" / digest_hex / receipt["run_id"]
    run_dir.mkdir(parents=True)
    path: Path = run_dir / "receipt.json"
    path.write_text(json.dumps(receipt), encoding="utf-8")
    return path


class Team:
    """A bare repository and a working clone to push versions and receipts into it."""

    def __init__(self, tmp_path: Path) -> None:
        self.bare = tmp_path / "team.git"
        self.work = tmp_path / "team-work"
        _git(tmp_path, "init", "--quiet", "--bare", "-b", "main", str(self.bare))
        _git(tmp_path, "clone", "--quiet", str(self.bare), str(self.work))
        _git(self.work, "checkout", "--quiet", "-b", "main")

    def publish(self, subject: Path, version: int) -> str:
        target = self.work / "subjects" / SUBJECT_ID / f"v{version}"
        shutil.copytree(subject, target)
        self._push(f"publish v{version}")
        return content_digest(target)

    def attach(self, version: int, receipt: dict[str, Any] | str) -> None:
        folder = self.work / "evals" / SUBJECT_ID / f"v{version}"
        folder.mkdir(parents=True, exist_ok=True)
        run_id = receipt["run_id"] if isinstance(receipt, dict) else "broken"
        text = json.dumps(receipt) if isinstance(receipt, dict) else receipt
        (folder / f"{run_id}.json").write_text(text, encoding="utf-8")
        self._push(f"receipt {run_id}")

    def _push(self, message: str) -> None:
        _git(self.work, "add", "-A")
        _git(self.work, "commit", "--quiet", "-m", message)
        _git(self.work, "push", "--quiet", "origin", "main")


def reader(team: Team) -> TeamReader:
    return TeamReader(TeamStore(str(team.bare)))


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def team(tmp_path: Path) -> Team:
    return Team(tmp_path)


# --- receipt_problem ---------------------------------------------------------------------------

DIGEST_A = "sha256:" + "a" * 64


def test_a_complete_receipt_is_usable() -> None:
    assert receipt_problem(make_receipt(DIGEST_A, "20260101T000000Z")) is None


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("schema_version", 1, "schema_version 2"),
        ("content_digest", "sha256:short", "content_digest"),
        ("run_id", "", "run_id"),
        ("verdict", "WIN", "verdict"),
        ("verdict", ["PASS"], "verdict"),  # a list raised TypeError in the set lookup
        ("execution_status", "done", "execution_status"),
        ("execution_status", {"complete": True}, "execution_status"),
        ("scored_rows", True, "scored_rows"),
        ("expected_rows", -1, "expected_rows"),
        ("comparisons", [], "comparisons"),
    ],
)
def test_a_bad_field_is_named(key: str, value: Any, expected: str) -> None:
    receipt = make_receipt(DIGEST_A, "20260101T000000Z")
    receipt[key] = value
    problem = receipt_problem(receipt)
    assert problem is not None and expected in problem


# Any JSON value in any required field: never an exception, a usable receipt only as written.
@given(
    st.sampled_from(
        ["schema_version", "content_digest", "run_id", "verdict", "execution_status", "comparisons"]
    ),
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
        lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=2), inner),
        max_leaves=4,
    ),
)
def test_any_value_in_a_field_is_judged_without_raising(key: str, value: Any) -> None:
    receipt = make_receipt(DIGEST_A, "20260101T000000Z")
    receipt[key] = value
    problem = receipt_problem(receipt)
    assert problem is None or key.replace("_", "") in problem.replace("_", "")


REQUIRED = [
    "schema_version",
    "content_digest",
    "run_id",
    "verdict",
    "execution_status",
    "expected_rows",
    "scored_rows",
    "comparisons",
]


@given(st.sets(st.sampled_from(REQUIRED), min_size=1))
def test_any_missing_required_field_fails_closed(missing: set[str]) -> None:
    receipt = make_receipt(DIGEST_A, "20260101T000000Z")
    for key in missing:
        del receipt[key]
    assert receipt_problem(receipt) is not None


@given(st.one_of(st.none(), st.integers(), st.text(), st.lists(st.integers())))
def test_a_non_object_is_never_a_receipt(document: Any) -> None:
    assert receipt_problem(document) is not None


# --- Library card ------------------------------------------------------------------------------


def test_library_card_shows_the_local_receipt_of_the_current_bytes(
    tmp_path: Path, home: Path
) -> None:
    subject = make_subject(tmp_path / "subject")
    digest = content_digest(subject)
    store_local(home, make_receipt(digest, "20260101T000000Z", verdict="NEUTRAL"))
    store_local(home, make_receipt(digest, "20260102T000000Z"))
    card = library_card(subject)
    assert card.status == "scored" and card.receipt is not None
    assert card.receipt.run_id == "20260102T000000Z" and card.receipt.source == "local"


def test_an_edit_makes_the_score_stale_not_absent(tmp_path: Path, home: Path) -> None:
    subject = make_subject(tmp_path / "subject")
    store_local(home, make_receipt(content_digest(subject), "20260101T000000Z"))
    (subject / "SKILL.md").write_text("# deploy-check\nedited\n", encoding="utf-8")
    card = library_card(subject)
    assert card.status == "stale"
    assert card.receipt is not None and card.receipt.digest != card.digest


def test_adding_eval_files_keeps_the_score(tmp_path: Path, home: Path) -> None:
    subject = make_subject(tmp_path / "subject")
    store_local(home, make_receipt(content_digest(subject), "20260101T000000Z"))
    (subject / "evals" / "cases").mkdir()
    (subject / "evals" / "cases" / "new.yaml").write_text("task: x\n", encoding="utf-8")
    assert library_card(subject).status == "scored"


def test_no_receipt_at_all_is_unscored(tmp_path: Path, home: Path) -> None:
    other = make_receipt("sha256:" + "b" * 64, "20260101T000000Z", skill_name="someone-else")
    store_local(home, other)
    card = library_card(make_subject(tmp_path / "subject"))
    assert card.status == "unscored" and card.receipt is None


def test_a_corrupt_local_receipt_is_skipped(tmp_path: Path, home: Path) -> None:
    subject = make_subject(tmp_path / "subject")
    path = store_local(home, make_receipt(content_digest(subject), "20260101T000000Z"))
    path.write_text("{not json", encoding="utf-8")
    assert library_card(subject).status == "unscored"


def test_local_comes_before_the_team_even_when_the_team_is_newer(
    tmp_path: Path, home: Path, team: Team
) -> None:
    subject = make_subject(tmp_path / "subject")
    digest = team.publish(subject, 1)
    store_local(home, make_receipt(digest, "20260101T000000Z"))
    team.attach(1, make_receipt(digest, "20260105T000000Z", version="v1"))
    card = library_card(subject, reader(team))
    assert card.receipt is not None
    assert (card.receipt.source, card.receipt.run_id) == ("local", "20260101T000000Z")


def test_the_team_receipt_is_used_when_no_local_one_matches(tmp_path: Path, team: Team) -> None:
    subject = make_subject(tmp_path / "subject")
    digest = team.publish(subject, 1)
    team.attach(1, make_receipt(digest, "20260105T000000Z", version="v1"))
    card = library_card(subject, reader(team))
    assert card.status == "scored" and card.receipt is not None
    assert card.receipt.source == "team"
    (subject / "SKILL.md").write_text("edited\n", encoding="utf-8")
    assert library_card(subject, reader(team)).status == "stale"


def test_a_missing_subject_folder_is_invalid_input(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="expected a subject folder"):
        library_card(tmp_path / "nowhere")


# --- Marketplace card --------------------------------------------------------------------------


def _two_versions(tmp_path: Path, team: Team) -> tuple[str, str]:
    subject = make_subject(tmp_path / "subject")
    first = team.publish(subject, 1)
    (subject / "SKILL.md").write_text("# deploy-check\nv2\n", encoding="utf-8")
    second = team.publish(subject, 2)
    return first, second


def _only_card(team: Team) -> Any:
    cards = marketplace_cards(reader(team))
    assert len(cards) == 1
    return cards[0]


def test_marketplace_shows_the_latest_version_when_it_has_a_receipt(
    tmp_path: Path, team: Team
) -> None:
    first, second = _two_versions(tmp_path, team)
    team.attach(1, make_receipt(first, "20260101T000000Z", version="v1"))
    team.attach(2, make_receipt(second, "20260102T000000Z", version="v2", verdict="NEUTRAL"))
    card = _only_card(team)
    assert (card.shown_version, card.latest_version, card.stale) == (2, 2, False)
    assert card.receipt.document["verdict"] == "NEUTRAL" and card.name == "deploy-check"


def test_an_unscored_latest_version_marks_the_older_score_stale(tmp_path: Path, team: Team) -> None:
    first, _ = _two_versions(tmp_path, team)
    team.attach(1, make_receipt(first, "20260101T000000Z", version="v1"))
    card = _only_card(team)
    assert (card.shown_version, card.stale, card.rejected) == (1, True, [])


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        ("misfiled-digest", "misfiled: expected content_digest"),
        ("misfiled-stamp", "misfiled: expected version v2"),
        ("schema", "expected verdict"),
        ("not-json", "cannot read it as JSON"),
    ],
)
def test_a_bad_receipt_fails_closed_for_its_version_only(
    tmp_path: Path, team: Team, bad: str, why: str
) -> None:
    first, second = _two_versions(tmp_path, team)
    team.attach(1, make_receipt(first, "20260101T000000Z", version="v1"))
    receipts: dict[str, dict[str, Any] | str] = {
        "misfiled-digest": make_receipt(first, "20260102T000000Z", version="v2"),
        "misfiled-stamp": make_receipt(second, "20260102T000000Z", version="v1"),
        "schema": make_receipt(second, "20260102T000000Z", verdict="GREAT"),
        "not-json": "{",
    }
    team.attach(2, receipts[bad])
    card = _only_card(team)
    assert (card.shown_version, card.stale) == (1, True)
    assert len(card.rejected) == 1 and card.rejected[0][0] == 2 and why in card.rejected[0][1]


def test_one_good_receipt_beside_a_bad_one_keeps_the_version(tmp_path: Path, team: Team) -> None:
    _, second = _two_versions(tmp_path, team)
    team.attach(2, make_receipt(second, "20260101T000000Z", version="v2"))
    team.attach(2, make_receipt(second, "20260109T000000Z", verdict="BAD"))
    card = _only_card(team)
    assert (card.shown_version, card.receipt.run_id, card.rejected) == (2, "20260101T000000Z", [])


def test_a_team_without_receipts_shows_no_score(tmp_path: Path, team: Team) -> None:
    _two_versions(tmp_path, team)
    card = _only_card(team)
    assert card.receipt is None and card.shown_version is None and not card.stale


def test_an_unreachable_team_is_invalid_input(tmp_path: Path) -> None:
    with pytest.raises(TeamError, match="git clone failed"):
        marketplace_cards(TeamReader(TeamStore(str(tmp_path / "no-such-team.git"))))


# --- team resolution and the CLI ---------------------------------------------------------------


def test_cli_library_card_text_and_json(
    tmp_path: Path, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    subject = make_subject(tmp_path / "subject")
    store_local(home, make_receipt(content_digest(subject), "20260101T000000Z"))
    assert run_cli(["scores", str(subject)]) == 0
    text = capsys.readouterr().out
    assert "score: PASS  candidate-vs-baseline +67% net lift (2W / 0L / 1T)" in text
    (subject / "SKILL.md").write_text("edited\n", encoding="utf-8")
    assert run_cli(["scores", str(subject), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["status"] == "stale" and payload["receipt"]["source"] == "local"
    assert run_cli(["scores", str(subject)]) == 0
    assert "score: STALE PASS" in capsys.readouterr().out


def test_a_card_says_when_its_receipt_came_from_a_broken_setup(
    tmp_path: Path, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    subject = make_subject(tmp_path / "subject")
    receipt = make_receipt(content_digest(subject), "20260101T000000Z", "NEUTRAL")
    store_local(home, {**receipt, "broken_setup": ["judge"]})
    assert run_cli(["scores", str(subject)]) == 0
    assert "score: NEUTRAL  candidate-vs-baseline" in (text := capsys.readouterr().out)
    assert text.rstrip().splitlines()[1].endswith("  [BROKEN SETUP: judge]")


def test_cli_marketplace_with_the_configured_team(
    tmp_path: Path, home: Path, team: Team, capsys: pytest.CaptureFixture[str]
) -> None:
    first, _ = _two_versions(tmp_path, team)
    team.attach(1, make_receipt(first, "20260101T000000Z", version="v1"))
    home.mkdir(parents=True)
    (home / "config.toml").write_text(f'team = "{team.bare}"\n', encoding="utf-8")
    assert run_cli(["scores", "--team"]) == 0
    assert "score STALE (v1): PASS" in capsys.readouterr().out
    # Neither SUBJECT nor --team: the configured team, as `publish` and `compare` take it.
    assert run_cli(["scores"]) == 0
    assert "score STALE (v1): PASS" in capsys.readouterr().out
    assert run_cli(["scores", "--team", str(team.bare), "--json"]) == 0
    (card,) = json.loads(capsys.readouterr().out)
    assert (card["id"], card["shown_version"], card["latest_version"]) == (SUBJECT_ID, 1, 2)
    assert card["stale"] is True


def test_cli_without_subject_or_team_is_invalid(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["scores"]) == 2
    err = capsys.readouterr().err
    assert "expected SUBJECT, --team NAME or a team in config.toml, found none" in err
    assert run_cli(["scores", "--team"]) == 2
    assert "no team in config.toml" in capsys.readouterr().err


def test_cli_unreachable_team_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["scores", "--team", (tmp_path / "missing.git").as_uri()]) == 2
    assert "git clone failed" in capsys.readouterr().err
    # A local path that does not exist is reported before git is asked.
    assert run_cli(["scores", "--team", str(tmp_path / "missing.git")]) == 2
    assert "missing.git:" in capsys.readouterr().err


def test_cli_malformed_config_is_exit_2(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home.mkdir(parents=True)
    (home / "config.toml").write_text("team = [\n", encoding="utf-8")
    assert run_cli(["scores", "--team"]) == 2
    assert "config.toml:" in capsys.readouterr().err


def test_a_subject_without_compare_yaml_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "bare-subject").mkdir()
    assert run_cli(["scores", str(tmp_path / "bare-subject")]) == 2
    assert "compare.yaml" in capsys.readouterr().err
