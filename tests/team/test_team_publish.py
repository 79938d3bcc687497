"""The team store and ``trialrun publish`` against temporary bare git repositories."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import write_subject
from paths import COMPARE_AGENTS_DIR
from trialrun.cli import run_cli
from trialrun.errors import ConfigError
from trialrun.home.digest import DIGEST_PREFIX, content_digest
from trialrun.home.paths import store_root
from trialrun.team.publish import (
    commit_after_compare,
    handle,
    subject_identity,
    team_from_config,
)
from trialrun.team.store import TeamError, TeamStore, _copy_subject, check_plain_id

COMPARE_YAML = "name: demo\nagent:\n  command: [python3, agent.py]\n"


@pytest.fixture(autouse=True)
def hermetic_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "gitconfig"
    empty.write_text("", encoding="utf-8")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(empty))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for role in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{role}_NAME", "Test Runner")
        monkeypatch.setenv(f"GIT_{role}_EMAIL", "runner@example.invalid")
    monkeypatch.setenv("TRIALRUN_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TRIALRUN_HANDLE", "alice")


@pytest.fixture
def team(tmp_path: Path) -> str:
    bare = tmp_path / "team.git"
    subprocess.run(["git", "init", "--quiet", "--bare", str(bare)], check=True)
    return str(bare)


def make_subject(root: Path, body: str = "v1 body\n", *, subject_id: str | None = None) -> Path:
    extra = f"id: {subject_id}\n" if subject_id else ""
    files = {"SKILL.md": body, "scripts/run.sh": "echo hi\n"}
    return write_subject(root, COMPARE_YAML + extra, cases={}, files=files)


def local_receipt(subject: Path, run_id: str, verdict: str = "PASS") -> Path:
    digest = content_digest(subject)
    run_dir = store_root() / digest.removeprefix(DIGEST_PREFIX) / run_id
    run_dir.mkdir(parents=True)
    receipt = {"run_id": run_id, "content_digest": digest, "verdict": verdict, "version": None}
    path = run_dir / "receipt.json"
    path.write_text(json.dumps(receipt), encoding="utf-8")
    return path


def team_files(team: str, tmp_path: Path, under: str) -> dict[str, str]:
    """A fresh clone's files under ``under``: what any other machine would see."""
    heads = subprocess.run(["git", "ls-remote", team, "refs/heads/main"], capture_output=True)
    if not heads.stdout.strip():
        return {}  # nothing was ever pushed
    clone = tmp_path / f"inspect-{len(list(tmp_path.glob('inspect-*')))}"
    subprocess.run(["git", "clone", "--quiet", "--branch", "main", team, str(clone)], check=True)
    base = clone / under
    if not base.is_dir():
        return {}
    return {
        str(p.relative_to(base)): p.read_text(encoding="utf-8")
        for p in sorted(base.rglob("*"))
        if p.is_file()
    }


def publish(subject: Path, team: str, *extra: str) -> int:
    return run_cli(["publish", str(subject), "--team", team, *extra])


def test_publish_mints_a_version_assigns_an_id_and_attaches_receipts(
    tmp_path: Path, team: str, capsys: pytest.CaptureFixture[str]
) -> None:
    subject = make_subject(tmp_path / "subject")
    digest = content_digest(subject)
    local_receipt(subject, "20260101T000000Z")

    assert publish(subject, team) == 0

    name, subject_id = subject_identity(subject)
    assert subject_id is not None and name == "demo"
    assert content_digest(subject) == digest  # the id lives in an eval asset
    out = capsys.readouterr().out
    assert f"Published demo to {team} as Version 1." in out
    assert "Attached 1 receipt to Version 1." in out
    published = team_files(team, tmp_path, f"subjects/{subject_id}/v1")
    assert published == {"SKILL.md": "v1 body\n", "scripts/run.sh": "echo hi\n"}
    receipts = team_files(team, tmp_path, f"evals/{subject_id}/v1")
    stamped = json.loads(receipts["20260101T000000Z.json"])
    assert (stamped["version"], stamped["skill_id"]) == ("v1", subject_id)


def test_publishing_the_same_bytes_again_mints_nothing(
    tmp_path: Path, team: str, capsys: pytest.CaptureFixture[str]
) -> None:
    subject = make_subject(tmp_path / "subject", subject_id="demo-id")
    local_receipt(subject, "20260101T000000Z")
    assert publish(subject, team) == 0
    capsys.readouterr()
    assert publish(subject, team) == 0
    out = capsys.readouterr().out
    assert "already Version 1" in out and "Attached 0 receipts" in out
    assert TeamStore(team, home=tmp_path / "other").versions("demo-id") == [1]


def test_compare_on_published_bytes_commits_the_receipt(tmp_path: Path, team: str) -> None:
    subject = make_subject(tmp_path / "subject", subject_id="demo-id")
    assert publish(subject, team) == 0
    receipt_path = local_receipt(subject, "20260102T000000Z", verdict="NEUTRAL")
    receipt = json.loads(receipt_path.read_text(encoding="utf-8"))

    message = commit_after_compare(receipt, receipt_path, subject, team=team, no_commit=False)

    assert message == f"Published this receipt to {team} for Version 1 of demo."
    filed = team_files(team, tmp_path, "evals/demo-id/v1")
    assert json.loads(filed["20260102T000000Z.json"])["verdict"] == "NEUTRAL"
    assert json.loads(receipt_path.read_text(encoding="utf-8"))["version"] is None


def test_edited_bytes_get_the_hint_then_publish_mints_and_attaches(
    tmp_path: Path, team: str, capsys: pytest.CaptureFixture[str]
) -> None:
    subject = make_subject(tmp_path / "subject", subject_id="demo-id")
    assert publish(subject, team) == 0
    (subject / "SKILL.md").write_text("edited body\n", encoding="utf-8")
    receipt_path = local_receipt(subject, "20260103T000000Z")
    receipt = json.loads(receipt_path.read_text(encoding="utf-8"))

    message = commit_after_compare(receipt, receipt_path, subject, team=team, no_commit=False)

    assert "not a published version" in message and "trialrun publish" in message
    assert team_files(team, tmp_path, "evals") == {}
    capsys.readouterr()
    assert publish(subject, team) == 0
    assert "as Version 2." in capsys.readouterr().out
    filed = team_files(team, tmp_path, "evals/demo-id")
    assert list(filed) == ["v2/20260103T000000Z.json"]
    assert team_files(team, tmp_path, "subjects/demo-id/v2")["SKILL.md"] == "edited body\n"


def test_commit_after_compare_waits_locally_without_team_handle_id_or_when_told(
    tmp_path: Path, team: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    subject = make_subject(tmp_path / "subject")
    receipt_path = local_receipt(subject, "20260104T000000Z")
    receipt = json.loads(receipt_path.read_text(encoding="utf-8"))

    def message(team_arg: str | None, no_commit: bool = False) -> str:
        return commit_after_compare(
            receipt, receipt_path, subject, team=team_arg, no_commit=no_commit
        )

    assert "--no-commit" in message(team, no_commit=True)
    assert "No team configured" in message(None)
    assert "has no id yet" in message(team)
    monkeypatch.setenv("TRIALRUN_HANDLE", "")
    monkeypatch.setenv("HOME", str(tmp_path))  # no git user.name anywhere
    assert "No handle" in message(team)
    assert team_files(team, tmp_path, "evals") == {}


def test_unreachable_team_after_compare_is_reported_not_raised(tmp_path: Path) -> None:
    subject = make_subject(tmp_path / "subject", subject_id="demo-id")
    receipt_path = local_receipt(subject, "20260105T000000Z")
    receipt = json.loads(receipt_path.read_text(encoding="utf-8"))
    missing = str(tmp_path / "no-such-team.git")
    message = commit_after_compare(receipt, receipt_path, subject, team=missing, no_commit=False)
    assert message.startswith("Could not publish this receipt") and "waits locally" in message


def test_newest_fail_receipt_refuses_without_a_terminal_unless_yes(
    tmp_path: Path, team: str, capsys: pytest.CaptureFixture[str]
) -> None:
    subject = make_subject(tmp_path / "subject", subject_id="demo-id")
    local_receipt(subject, "20260101T000000Z", verdict="PASS")
    local_receipt(subject, "20260102T000000Z", verdict="FAIL")

    assert publish(subject, team) == 1
    assert "is FAIL" in capsys.readouterr().err
    assert team_files(team, tmp_path, "subjects") == {}

    assert publish(subject, team, "--yes") == 0
    assert len(team_files(team, tmp_path, "evals/demo-id/v1")) == 2


def test_an_older_fail_receipt_does_not_ask(tmp_path: Path, team: str) -> None:
    subject = make_subject(tmp_path / "subject", subject_id="demo-id")
    local_receipt(subject, "20260101T000000Z", verdict="FAIL")
    local_receipt(subject, "20260102T000000Z", verdict="PASS")
    assert publish(subject, team) == 0


def test_publish_bad_input_exits_2(
    tmp_path: Path, team: str, capsys: pytest.CaptureFixture[str]
) -> None:
    subject = make_subject(tmp_path / "subject")
    assert run_cli(["publish", str(subject)]) == 2
    assert "no team" in capsys.readouterr().err
    assert publish(tmp_path / "missing", team) == 2
    bare = tmp_path / "bare-subject"
    bare.mkdir()
    assert publish(bare, team) == 2
    assert "evals/compare.yaml" in capsys.readouterr().err
    (subject / "evals" / "compare.yaml").write_text(COMPARE_YAML + "id: ../escape\n")
    assert publish(subject, team) == 2
    assert "plain name" in capsys.readouterr().err


def test_two_clones_publishing_at_once_lose_nothing_and_mint_each_version_once(
    tmp_path: Path, team: str
) -> None:
    rounds = 3
    subjects = {
        who: [
            make_subject(tmp_path / f"{who}-{n}", f"{who} body {n}\n", subject_id="shared")
            for n in range(rounds)
        ]
        for who in ("a", "b")
    }
    minted: dict[str, list[int]] = {"a": [], "b": []}
    errors: list[BaseException] = []

    def work(who: str) -> None:
        store = TeamStore(team, home=tmp_path / f"home-{who}")
        try:
            for n, subject in enumerate(subjects[who]):
                version = store.publish_bytes("shared", subject)
                minted[who].append(version)
                receipt = tmp_path / f"{who}-{n}.json"
                receipt.write_text(json.dumps({"run_id": f"{who}{n}", "verdict": "PASS"}))
                assert store.add_receipt("shared", version, receipt)
        except BaseException as exc:  # surfaced in the main thread below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(who,)) for who in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    all_versions = sorted(minted["a"] + minted["b"])
    assert all_versions == list(range(1, 2 * rounds + 1))
    reader = TeamStore(team, home=tmp_path / "home-reader")
    assert reader.versions("shared") == all_versions
    for who in ("a", "b"):
        for n, version in enumerate(minted[who]):
            assert reader.version_digest("shared", version) == content_digest(subjects[who][n])
    filed = team_files(team, tmp_path, "evals/shared")
    expected = {
        f"v{version}/{who}{n}.json" for who in ("a", "b") for n, version in enumerate(minted[who])
    }
    assert set(filed) == expected


def test_two_clones_publishing_the_same_bytes_share_one_version(tmp_path: Path, team: str) -> None:
    subject = make_subject(tmp_path / "subject", subject_id="same")
    results: list[int] = []

    def work(who: str) -> None:
        results.append(
            TeamStore(team, home=tmp_path / f"home-{who}").publish_bytes("same", subject)
        )

    threads = [threading.Thread(target=work, args=(who,)) for who in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [1, 1]


def test_add_receipt_never_overwrites(tmp_path: Path, team: str) -> None:
    subject = make_subject(tmp_path / "subject", subject_id="demo-id")
    store = TeamStore(team)
    assert store.publish_bytes("demo-id", subject) == 1
    first = tmp_path / "first.json"
    first.write_text(json.dumps({"run_id": "R1", "verdict": "PASS"}))
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"run_id": "R1", "verdict": "FAIL"}))
    assert store.add_receipt("demo-id", 1, first) is True
    assert store.add_receipt("demo-id", 1, first) is False
    assert store.add_receipt("demo-id", 1, other) is True
    filed = team_files(team, tmp_path, "evals/demo-id/v1")
    assert {name: json.loads(text)["verdict"] for name, text in filed.items()} == {
        "R1.json": "PASS",
        "R1-2.json": "FAIL",
    }


def test_add_receipt_rejects_unknown_versions_and_bad_receipts(tmp_path: Path, team: str) -> None:
    subject = make_subject(tmp_path / "subject", subject_id="demo-id")
    store = TeamStore(team)
    store.publish_bytes("demo-id", subject)
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"run_id": "R1"}))
    with pytest.raises(TeamError, match="no such version"):
        store.add_receipt("demo-id", 7, good)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(TeamError, match="readable receipt"):
        store.add_receipt("demo-id", 1, bad)
    sneaky = tmp_path / "sneaky.json"
    sneaky.write_text(json.dumps({"run_id": "../../x"}))
    with pytest.raises(TeamError, match="plain name"):
        store.add_receipt("demo-id", 1, sneaky)


def test_version_queries(tmp_path: Path, team: str) -> None:
    subject = make_subject(tmp_path / "subject", subject_id="demo-id")
    store = TeamStore(team)
    assert store.versions("demo-id") == []
    assert store.version_for_digest("demo-id", content_digest(subject)) is None
    store.publish_bytes("demo-id", subject)
    assert store.version_for_digest("demo-id", content_digest(subject)) == 1
    with pytest.raises(TeamError, match="v9"):
        store.version_digest("demo-id", 9)


def test_team_from_config_and_handle(
    tmp_path: Path, team: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert team_from_config(None) is None
    config = tmp_path / "home" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f'team = "{team}"\n', encoding="utf-8")
    assert team_from_config(None) == team
    assert team_from_config("git@example.com:t/team.git") == "git@example.com:t/team.git"
    config.write_text("team = [1]\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="'team' must be a string, found a list"):
        team_from_config(None)
    config.write_text("team = \n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"config\.toml"):
        team_from_config(None)
    assert handle() == "alice"
    monkeypatch.setenv("TRIALRUN_HANDLE", "")
    (tmp_path / "gitconfig").write_text("[user]\n\tname = Bob\n", encoding="utf-8")
    assert handle() == "Bob"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('# my team\ntaem = "x"\n', ":2: unknown key 'taem' in config.toml (did you mean 'team'?)"),
        ('\n"Team" = "x"\n', ":2: unknown key 'Team' in config.toml (did you mean 'team'?)"),
        ("\n\n[taem]\nurl = 1\n", ":3: unknown key 'taem' in config.toml (did you mean 'team'?)"),
        ("# team\n\nteam = 5\n", ":3: 'team' must be a string, found integer 5"),
        ('\n\nteam = ""\n', ":3: 'team' must not be empty"),
        ('team = "x"\n[team2]\n', ":2: unknown key 'team2' in config.toml (did you mean 'team'?)"),
        ("# team\nteam = \n", ":2: invalid TOML: Invalid value (column 8)"),
        ('team = "a"\nteam = "b"\n', ":2: invalid TOML: Cannot overwrite a value"),
        ("# team\nteam = [\n", ":2: invalid TOML: Invalid value"),
        (b"# team\nteam = '\xff'\n", ":2: file is not valid UTF-8: byte 0xff at offset 15"),
    ],
)
def test_a_bad_config_toml_is_reported_at_its_line(
    tmp_path: Path, text: str | bytes, expected: str
) -> None:
    config = tmp_path / "home" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ConfigError) as caught:
        team_from_config(None)
    assert str(caught.value).startswith(f"{config}{expected}")


@pytest.mark.parametrize("value", ["", ".", "..", "a/b", "-x", "a b"])
def test_check_plain_id_rejects_path_like_ids(value: str) -> None:
    with pytest.raises(TeamError):
        check_plain_id(value, "id")


_names = st.text(alphabet="abcXYZ019._-", min_size=1, max_size=6).filter(
    lambda n: n not in {".", ".."}
)


@settings(max_examples=30)
@given(
    files=st.dictionaries(
        st.lists(_names, min_size=1, max_size=3).map(tuple), st.binary(max_size=20), max_size=6
    )
)
def test_copied_subject_keeps_its_digest(
    tmp_path_factory: pytest.TempPathFactory, files: dict[tuple[str, ...], bytes]
) -> None:
    case = tmp_path_factory.mktemp("case")
    source = case / "source"
    source.mkdir(parents=True)
    for parts, data in files.items():
        path = source.joinpath(*parts)
        if any(parent.is_file() for parent in path.parents) or path.is_dir():
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    _copy_subject(source, case / "copy")
    assert content_digest(case / "copy") == content_digest(source)
    assert not (case / "copy" / "evals").exists()


def test_a_real_compare_on_published_bytes_commits_and_on_edited_bytes_waits(
    tmp_path: Path, team: str, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = COMPARE_AGENTS_DIR / "scripted.py"
    subject = tmp_path / "skill"
    make_subject(subject)
    command = json.dumps([sys.executable, str(agent), "{task}"])
    (subject / "evals" / "compare.yaml").write_text(
        f"name: demo\nagent:\n  command: {command}\nk: 1\nseed: 1\n", encoding="utf-8"
    )
    case = {
        "task": 'say done\n#agent {"say": "done"}',
        "checks": [{"transcript_mentions": "done"}],
    }
    (subject / "evals" / "cases" / "one.yaml").write_text(json.dumps(case), encoding="utf-8")
    assert publish(subject, team) == 0
    capsys.readouterr()

    assert run_cli(["compare", str(subject), "--team", team]) == 0
    assert "Published this receipt to" in capsys.readouterr().err
    assert len(team_files(team, tmp_path, "evals")) == 1

    (subject / "SKILL.md").write_text("v2 body\n", encoding="utf-8")
    assert run_cli(["compare", str(subject), "--team", team]) == 0
    assert "trialrun publish" in capsys.readouterr().err
    assert len(team_files(team, tmp_path, "evals")) == 1  # nothing committed for unpublished bytes


def test_an_incumbent_version_stages_the_published_bytes(tmp_path: Path, team: str) -> None:
    from trialrun.compare.arms import arm_specs
    from trialrun.compare.config import load_eval_assets

    subject = make_subject(tmp_path / "skill")
    case = {"task": "say done", "checks": [{"transcript_mentions": "done"}]}
    (subject / "evals" / "cases" / "one.yaml").write_text(json.dumps(case), encoding="utf-8")
    assert publish(subject, team) == 0  # v1, and an id in compare.yaml
    (subject / "SKILL.md").write_text("v2 body\n", encoding="utf-8")
    assert publish(subject, team) == 0  # v2
    config = subject / "evals" / "compare.yaml"
    (tmp_path / "home" / "config.toml").write_text(f'team = "{team}"\n', encoding="utf-8")
    for version, body in (("1", "v1 body\n"), ("v2", "v2 body\n"), ("latest", "v2 body\n")):
        text = config.read_text(encoding="utf-8").split("arms:")[0]
        config.write_text(
            text + f"arms:\n  incumbent:\n    version: '{version}'\n", encoding="utf-8"
        )
        assets = load_eval_assets(subject)
        incumbent = arm_specs(assets, subject)[-1]
        assert incumbent.name == "incumbent" and incumbent.subject is not None
        assert (incumbent.subject / "SKILL.md").read_text(encoding="utf-8") == body
    config.write_text(
        config.read_text(encoding="utf-8").split("arms:")[0]
        + "arms:\n  incumbent:\n    version: 9\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError, match="no version 9"):
        arm_specs(load_eval_assets(subject), subject)


def test_a_team_folder_that_is_not_a_git_repository_says_how_to_make_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    subject = make_subject(tmp_path / "subject", subject_id="demo-id")
    plain = tmp_path / "team-folder"
    plain.mkdir()
    capsys.readouterr()
    assert publish(subject, str(plain)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith(f"error: {plain}: expected a git repository, found a plain folder")
    assert f"git init --bare {plain}" in err
    assert not (plain / ".git").exists() and list(plain.iterdir()) == []


def test_compare_team_option_finds_the_incumbent_version_without_config_toml(
    tmp_path: Path, team: str, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = COMPARE_AGENTS_DIR / "scripted.py"
    subject = tmp_path / "skill"
    make_subject(subject)
    command = json.dumps([sys.executable, str(agent), "{task}"])
    config = subject / "evals" / "compare.yaml"
    config.write_text(
        f"name: demo\nagent:\n  command: {command}\nk: 1\nseed: 1\n", encoding="utf-8"
    )
    case = {"task": 'say done\n#agent {"say": "done"}', "checks": [{"transcript_mentions": "done"}]}
    (subject / "evals" / "cases" / "one.yaml").write_text(json.dumps(case), encoding="utf-8")
    assert publish(subject, team) == 0  # v1, and the id compare.yaml now holds
    config.write_text(config.read_text(encoding="utf-8") + "arms:\n  incumbent:\n    version: 1\n")
    assert not (tmp_path / "home" / "config.toml").exists()
    capsys.readouterr()

    code = run_cli(["compare", str(subject), "--team", team, "--no-commit", "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    receipt = json.loads(captured.out)
    assert "candidate-vs-incumbent" in receipt["comparisons"]
    # Without --team and without config.toml the version cannot be looked up: exit 2, at its key.
    assert run_cli(["compare", str(subject), "--no-commit"]) == 2
    assert "needs a team" in capsys.readouterr().err


@pytest.fixture
def no_git_identity(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # useConfigOnly: git must not make one up from the host name (it can on some machines).
    config = tmp_path / "gitconfig-no-identity"
    config.write_text("[user]\n\tuseConfigOnly = true\n", encoding="utf-8")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("EMAIL", "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL"):
        monkeypatch.delenv(name, raising=False)
    for name in ("GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"):
        monkeypatch.delenv(name, raising=False)


def test_publish_without_a_git_identity_changes_nothing(
    tmp_path: Path,
    team: str,
    no_git_identity: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    subject = make_subject(tmp_path / "subject")
    compare_yaml = (subject / "evals" / "compare.yaml").read_text(encoding="utf-8")
    local_receipt(subject, "20260105T000000Z")
    assert publish(subject, team) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: git has no identity to commit to the team with")
    assert "git config --global user.email" in err and err.count("\n") == 1
    # Nothing written: no version in the team, no id given to the subject.
    assert (subject / "evals" / "compare.yaml").read_text(encoding="utf-8") == compare_yaml
    assert team_files(team, tmp_path, "subjects") == {}
    assert run_cli(["scores", "--team", team, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_a_write_that_failed_leaves_no_version_behind_in_the_local_checkout(
    tmp_path: Path, team: str, no_git_identity: None
) -> None:
    subject = make_subject(tmp_path / "subject", subject_id="demo-id")
    with pytest.raises(TeamError, match="git commit failed"):
        TeamStore(team).publish_bytes("demo-id", subject)
    assert TeamStore(team).versions("demo-id") == []
