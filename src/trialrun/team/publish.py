"""What ``trialrun publish`` decides, and the commit that follows a compare.

A receipt reaches the team only for bytes that are exactly a published version: it is stamped
with that version, so a score can never be shown against bytes it did not evaluate. Anything
else waits in the local store until ``trialrun publish`` mints those bytes as a version and
attaches every local receipt of them.
"""

from __future__ import annotations

import os
import re
import subprocess
import tomllib
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trialrun.base.fsutil import atomic_write_text, undecodable
from trialrun.base.quoting import excerpt
from trialrun.base.signedjson import loads_unique
from trialrun.config.spec import Record, SpecError, Str, keyed, parse
from trialrun.config.yamlload import load_yaml_file
from trialrun.errors import ConfigError, ConfigErrors
from trialrun.home.digest import DIGEST_PREFIX, content_digest
from trialrun.home.paths import RECEIPT_FILE, store_root, trialrun_home
from trialrun.team.store import TeamError, TeamStore, check_plain_id

__all__ = [
    "HANDLE_ENV",
    "LocalReceipt",
    "PublishResult",
    "commit_after_compare",
    "commit_compare_receipt",
    "ensure_subject_id",
    "handle",
    "local_receipts",
    "publish_subject",
    "subject_identity",
    "team_from_config",
]

HANDLE_ENV = "TRIALRUN_HANDLE"
CONFIG_FILE = "config.toml"
COMPARE_FILE = Path("evals") / "compare.yaml"
_URL_LIKE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://|^[^/]+@[^/:]+:")


def team_from_config(explicit: str | None) -> str | None:
    """``--team`` when given, else ``team = "..."`` from ``$TRIALRUN_HOME/config.toml``.

    A local path is made absolute so that every spelling of it shares one clone; one that does
    not exist is an error (a URL or ``host:path`` is left to git).
    """
    team = explicit if explicit is not None else _configured_team(trialrun_home() / CONFIG_FILE)
    if team is None:
        return None
    if _URL_LIKE.match(team):
        return team
    local = Path(team).expanduser()
    if local.is_dir() and not _is_git_repository(local):
        # git would say the repository "does not exist", which reads as a typo in the path.
        raise ConfigError(
            "expected a git repository, found a plain folder (make it the team's store with "
            f"`git init --bare {team}`, or pass the URL of an existing team)",
            file=team,
        )
    if local.exists():
        return str(local.resolve())
    if ":" not in team.split("/", 1)[0]:
        raise ConfigError(
            "expected a team repository (a git URL or an existing folder), found no such folder",
            file=team,
        )
    return team


def _is_git_repository(folder: Path) -> bool:
    """A working tree (``.git`` folder or file) or a bare repository (``HEAD`` and ``objects``)."""
    if (folder / ".git").exists():
        return True
    return (folder / "HEAD").is_file() and (folder / "objects").is_dir()


class _TeamConfig(Record):
    """``$TRIALRUN_HOME/config.toml``."""

    team: str | None = keyed(Str(min_length=1), default=None)


def _configured_team(config: Path) -> str | None:
    try:
        raw = config.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(f"cannot read the file: {exc.strerror or exc}", file=config) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        where, bad_line = undecodable(raw, exc)
        raise ConfigError(f"file is not valid UTF-8: {where}", file=config, line=bad_line) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        problem, line = _toml_problem(str(exc), text)
        raise ConfigError(f"invalid TOML: {problem}", file=config, line=line) from None
    try:
        return parse(_TeamConfig, data).team
    except SpecError as exc:
        from trialrun.config.messages import spec_errors

        errors = spec_errors(exc, _TomlFile(config, text), _TeamConfig, CONFIG_FILE)
        raise ConfigErrors(errors) from None


@dataclass(frozen=True)
class _TomlFile:
    """config.toml as ``spec_errors`` places errors in it: at the line of the top-level key."""

    path: Path
    text: str

    def error(
        self, message: str, path: Sequence[str | int] = (), key: str | None = None
    ) -> ConfigError:
        top = path[0] if path else None
        line = _toml_key_line(self.text, top) if isinstance(top, str) else None
        return ConfigError(message, file=self.path, line=line, key=key)


_TOML_PLACE = re.compile(
    r"^(?P<problem>.*) \(at (?:line (?P<line>\d+), column (?P<column>\d+)|end of document)\)$",
    re.DOTALL,
)


def _toml_problem(message: str, text: str) -> tuple[str, int | None]:
    """tomllib's message without its place, and the line: it says "(at line L, column C)", or
    "(at end of document)" for a value left unfinished on the last line that holds anything."""
    found = _TOML_PLACE.match(message)
    if found is None:
        return message, None
    if found["line"] is not None:
        return f"{found['problem']} (column {found['column']})", int(found["line"])
    filled = [n for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    return found["problem"], filled[-1] if filled else None


def _toml_key_line(text: str, key: str) -> int | None:
    """The line that sets top-level ``key`` (``key =``, ``"key" =``, ``key.sub =``, ``[key]``).

    tomllib keeps no positions; config.toml is a few lines, so a scan finds the key.
    """
    name = rf"(?:{re.escape(key)}|\"{re.escape(key)}\"|'{re.escape(key)}')"
    assignment = re.compile(rf"\s*{name}\s*[=.]")
    header = re.compile(rf"\s*\[\[?\s*{name}\s*[\].]")
    in_table = False
    for number, line in enumerate(text.splitlines(), 1):
        if header.match(line):
            return number
        if line.lstrip().startswith("["):
            in_table = True  # keys below a table header belong to that table
        elif not in_table and assignment.match(line):
            return number
    return None


def handle() -> str | None:
    """Who runs this: ``$TRIALRUN_HANDLE``, else git's ``user.name``, else None."""
    configured = os.environ.get(HANDLE_ENV, "").strip()
    if configured:
        return configured
    try:
        done = subprocess.run(
            ["git", "config", "user.name"], capture_output=True, text=True, check=False
        )
    except OSError:
        return None
    name = done.stdout.strip()
    return name if done.returncode == 0 and name else None


def subject_identity(subject: Path) -> tuple[str, str | None]:
    """``(name, id)`` from ``evals/compare.yaml``; the id is None until publish assigns one."""
    compare_file = subject / COMPARE_FILE
    try:
        compare_file.stat()
    except FileNotFoundError:
        raise ConfigError(f"{subject}: expected {COMPARE_FILE}, found none") from None
    except OSError:
        pass  # unreadable: the loader says so, naming the file
    data = load_yaml_file(compare_file).data
    name, subject_id = data.get("name"), data.get("id")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{compare_file}: expected a string 'name', found {excerpt(repr(name))}")
    if subject_id is None:
        return name, None
    if not isinstance(subject_id, str):
        raise ConfigError(
            f"{compare_file}: expected a string 'id', found {excerpt(repr(subject_id))}"
        )
    try:
        return name, check_plain_id(subject_id, f"{compare_file}: id")
    except TeamError as exc:
        raise ConfigError(str(exc)) from None


def ensure_subject_id(subject: Path) -> str:
    """The subject's id, appending a fresh ``id:`` to compare.yaml when it has none.

    compare.yaml is an eval asset, outside the content digest, so this changes no digest.
    """
    name, subject_id = subject_identity(subject)
    if subject_id is not None:
        return subject_id
    # Replaced whole, never rewritten in place: a crash or a full disk half way through a
    # write must not leave the user's file truncated, its only other copy gone with our memory.
    # Resolved first, so that a compare.yaml linked from elsewhere stays a link.
    compare_file = (subject / COMPARE_FILE).resolve()
    text = compare_file.read_text(encoding="utf-8")
    new_id = str(uuid.uuid4())
    separator = "" if text.endswith("\n") or not text else "\n"
    atomic_write_text(compare_file, f"{text}{separator}id: {new_id}\n")
    if subject_identity(subject) != (name, new_id):
        atomic_write_text(compare_file, text)
        raise ConfigError(f"{compare_file}: cannot add 'id: {new_id}'; add an 'id:' key by hand")
    return new_id


@dataclass(frozen=True)
class LocalReceipt:
    path: Path
    run_id: str
    verdict: str | None


def local_receipts(digest: str) -> list[LocalReceipt]:
    """Every readable local receipt whose ``content_digest`` is ``digest``, oldest first."""
    folder = store_root() / digest.removeprefix(DIGEST_PREFIX)
    found: list[LocalReceipt] = []
    for run_dir in sorted(folder.iterdir()) if folder.is_dir() else []:
        try:
            receipt: Any = loads_unique((run_dir / RECEIPT_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            continue  # a run still going, or interrupted before its receipt: nothing to share
        if isinstance(receipt, dict) and receipt.get("content_digest") == digest:
            verdict = receipt.get("verdict")
            run_id = str(receipt.get("run_id", run_dir.name))
            found.append(
                LocalReceipt(
                    run_dir / RECEIPT_FILE, run_id, verdict if isinstance(verdict, str) else None
                )
            )
    return found


@dataclass(frozen=True)
class PublishResult:
    name: str
    version: int
    minted: bool
    attached: int
    """Receipts newly filed under the version (already filed ones are not counted)."""


def publish_subject(subject: Path, team: str) -> PublishResult:
    """Mint the subject's bytes as a version when they differ from the latest, then attach
    every local receipt of these bytes. The caller asks about a FAIL receipt first."""
    name, _ = subject_identity(subject)
    store = TeamStore(team)
    store.check_identity()  # before the subject gets an id: a refused publish changes nothing
    subject_id = ensure_subject_id(subject)
    before = store.versions(subject_id)
    version = store.publish_bytes(subject_id, subject)
    receipts = [receipt.path for receipt in local_receipts(content_digest(subject))]
    attached = store.add_receipts(subject_id, version, receipts) if receipts else 0
    return PublishResult(name, version, version not in before, attached)


def commit_after_compare(
    receipt: dict[str, Any],
    receipt_path: Path,
    subject: Path,
    *,
    team: str | None,
    no_commit: bool,
) -> str:
    """Commit a fresh compare receipt to the team when its bytes are a published version.

    Returns the line to print: where it went, or why it waits locally and how to share it.
    A team that cannot be reached is reported the same way; the local receipt is already safe.
    """
    return commit_compare_receipt(
        receipt,
        receipt_path,
        lambda: subject_identity(subject),
        subject=str(subject),
        team=team,
        no_commit=no_commit,
    )


def commit_compare_receipt(
    receipt: dict[str, Any],
    receipt_path: Path,
    identity: Callable[[], tuple[str, str | None]],
    *,
    subject: str,
    team: str | None,
    no_commit: bool,
) -> str:
    """``commit_after_compare`` for a subject known by ``identity()``, its ``(name, id)``, rather
    than by its folder: ``compare merge`` has only what the shards recorded. ``identity`` is
    called only once a team and a handle are known. ``subject`` names it in the hint."""
    hint = f"Run `trialrun publish {subject}` to share these bytes and their receipts."
    if no_commit:
        return f"Not committed (--no-commit); the receipt waits locally. {hint}"
    try:
        team = team_from_config(team)
    except ConfigError as exc:  # `compare` checked it before the run; a library caller may not
        return f"Could not publish this receipt ({exc}); it waits locally. {hint}"
    if team is None:
        return "No team configured (--team or team in config.toml); the receipt waits locally."
    if handle() is None:
        return f"No handle ({HANDLE_ENV} or git user.name); the receipt waits locally."
    name, subject_id = identity()
    if subject_id is None:
        return f"{name} has no id yet; the receipt waits locally. {hint}"
    digest = receipt.get("content_digest")
    if not isinstance(digest, str):
        return "The receipt has no content_digest; it waits locally."
    try:
        store = TeamStore(team)
        version = store.version_for_digest(subject_id, digest)
        if version is None:
            return f"These bytes of {name} are not a published version on {team}. {hint}"
        store.add_receipt(subject_id, version, receipt_path)
    except TeamError as exc:
        return f"Could not publish this receipt ({exc}); it waits locally. {hint}"
    return f"Published this receipt to {team} for Version {version} of {name}."
