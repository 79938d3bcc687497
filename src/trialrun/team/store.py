"""A team store reached with git subprocesses, cloned into ``$TRIALRUN_HOME/teams/<hash>/``.

Writes never merge: each one fetches, resets the clone to the team's tip, recomputes its change
on those fresh files (the next version number, whether a receipt is already there) and pushes.
A rejected push means another clone won the race, so the write starts again from the new tip.
Recomputing rather than rebasing is what keeps two clones from minting the same ``v<N>``: a
rebase would replay a stale "v2" on top of someone else's v2. A lock file serialises the clones
of one home, which share a working tree.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import random
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from trialrun.base.fsutil import atomic_write_text, dumps_json
from trialrun.base.signedjson import loads_unique
from trialrun.base.words import counted
from trialrun.errors import TrialrunError
from trialrun.home.digest import (
    EXCLUDED_NAMES_ANYWHERE,
    SUBJECT_EXCLUDED_TOP_LEVEL,
    content_digest,
)
from trialrun.home.paths import trialrun_home

__all__ = ["BRANCH", "TeamError", "TeamStore", "check_plain_id"]

BRANCH = "main"
PUSH_ATTEMPTS = 30
_PLAIN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_VERSION_DIR = re.compile(r"v([1-9][0-9]*)")
# Bytes must reach the team exactly as they are on disk, whatever the user's git settings.
_GIT_SETTINGS = ("-c", "core.autocrlf=false", "-c", "core.safecrlf=false", "-c", "gc.auto=0")


class TeamError(TrialrunError):
    """A git command against the team store failed."""


def check_plain_id(value: str, what: str) -> str:
    """``value`` when it is safe as one path component, else a TeamError naming ``what``."""
    if not _PLAIN_ID.fullmatch(value) or value in {".", ".."}:
        raise TeamError(f"{what}: expected a plain name (letters, digits, . _ -), found {value!r}")
    return value


class TeamStore:
    """One team repository and this machine's clone of it."""

    def __init__(self, url_or_path: str, *, home: Path | None = None) -> None:
        self.url = url_or_path
        key = hashlib.sha256(url_or_path.encode("utf-8")).hexdigest()[:16]
        teams = (home or trialrun_home()) / "teams"
        self.checkout = teams / key
        self._lock_file = teams / f"{key}.lock"
        self._fresh = False

    # -- reads ------------------------------------------------------------------------------

    def versions(self, subject_id: str) -> list[int]:
        """The published version numbers of ``subject_id``, ascending."""
        self._refresh_once()
        return _versions_in(self.checkout, subject_id)

    def version_digest(self, subject_id: str, version: int) -> str:
        """The content digest of ``subjects/<id>/v<N>/``."""
        return content_digest(self.version_dir(subject_id, version))

    def version_dir(self, subject_id: str, version: int) -> Path:
        """The published bytes of ``subjects/<id>/v<N>/`` in the fresh checkout."""
        self._refresh_once()
        folder = self._subject_dir(self.checkout, subject_id, version)
        if not folder.is_dir():
            raise TeamError(f"{self.url}: expected subjects/{subject_id}/v{version}, found none")
        return folder

    def version_for_digest(self, subject_id: str, digest: str) -> int | None:
        """The newest version whose bytes have ``digest``, or None when none has."""
        for version in reversed(self.versions(subject_id)):
            if self.version_digest(subject_id, version) == digest:
                return version
        return None

    # -- writes -----------------------------------------------------------------------------

    def publish_bytes(self, subject_id: str, subject: Path) -> int:
        """The version holding ``subject``'s bytes: the latest when it has them, else a new one.

        The new ``v<N+1>`` is ``subject`` minus ``evals/``, ``.git/`` and the digest's
        exclusions; symlinks and special files are left out as the digest leaves them out.
        """
        check_plain_id(subject_id, "subject id")
        wanted = content_digest(subject)
        minted: list[int] = []

        def mint(root: Path) -> str | None:
            minted.clear()
            known = _versions_in(root, subject_id)
            if known:
                latest = self._subject_dir(root, subject_id, known[-1])
                if content_digest(latest) == wanted:
                    minted.append(known[-1])
                    return None
            version = (known[-1] if known else 0) + 1
            _copy_subject(subject, self._subject_dir(root, subject_id, version))
            minted.append(version)
            return f"publish {subject_id} v{version} ({wanted})"

        self._write(mint)
        return minted[0]

    def add_receipt(self, subject_id: str, version: int, receipt_path: Path) -> bool:
        """Attach one receipt to ``evals/<id>/v<N>/``; False when it was already there."""
        return self.add_receipts(subject_id, version, [receipt_path]) == 1

    def add_receipts(self, subject_id: str, version: int, receipt_paths: Sequence[Path]) -> int:
        """Attach receipts in one commit, stamped with the id and version; how many were new.

        An existing file is never overwritten: a different receipt with the same run id is
        filed as ``<run_id>-2.json`` and so on, an identical one is left as it is.
        """
        check_plain_id(subject_id, "subject id")
        stamped = [_stamped(path, subject_id, version) for path in receipt_paths]
        added: list[int] = []

        def attach(root: Path) -> str | None:
            folder = root / "evals" / subject_id / f"v{version}"
            if not self._subject_dir(root, subject_id, version).is_dir():
                raise TeamError(
                    f"{self.url}: cannot attach to v{version} of {subject_id}: no such version"
                )
            new = [
                (run_id, text)
                for run_id, text in stamped
                if not _already_filed(folder, run_id, text)
            ]
            for run_id, text in new:
                folder.mkdir(parents=True, exist_ok=True)
                atomic_write_text(_free_name(folder, run_id), text)
            added[:] = [len(new)]
            if not new:
                return None
            return f"attach {counted(len(new), 'receipt')} to {subject_id} v{version}"

        self._write(attach)
        return added[0]

    def check_identity(self) -> None:
        """Raise ``TeamError`` when git has no name and e-mail to commit with.

        Asked before a write starts, so that a publish either writes everything or nothing.
        Asked in the team cache's folder, not in the user's repository, whose own settings the
        team's checkout would not see.
        """
        self.checkout.parent.mkdir(parents=True, exist_ok=True)
        done = self._run(["var", "GIT_COMMITTER_IDENT"], cwd=self.checkout.parent, check=False)
        author = self._run(["var", "GIT_AUTHOR_IDENT"], cwd=self.checkout.parent, check=False)
        if done.returncode == 0 and author.returncode == 0:
            return
        said = ((done.stderr or author.stderr).strip().splitlines() or ["no output"])[-1]
        raise TeamError(
            "git has no identity to commit to the team with: run `git config --global "
            "user.name NAME` and `git config --global user.email EMAIL` "
            f"(git said: {said})"
        )

    # -- git --------------------------------------------------------------------------------

    def _subject_dir(self, root: Path, subject_id: str, version: int) -> Path:
        return root / "subjects" / check_plain_id(subject_id, "subject id") / f"v{version}"

    def refresh(self) -> None:
        """Fetch the team once per store object; later reads use that checkout."""
        self._refresh_once()

    def _refresh_once(self) -> None:
        if not self._fresh:
            with self._locked():
                self._sync()
            self._fresh = True

    def _write(self, change: Callable[[Path], str | None]) -> None:
        refusal: list[str] = []
        with self._locked():
            for _ in range(PUSH_ATTEMPTS):
                self._sync()
                message = change(self.checkout)
                if message is None:
                    return
                self._git("add", "--all", "--force", "--", ".")
                self._git("commit", "--quiet", "--no-verify", "-m", message)
                pushed = self._git(
                    "push", "--quiet", "origin", f"HEAD:refs/heads/{BRANCH}", check=False
                )
                if pushed.returncode == 0:
                    return
                refusal = (pushed.stderr or pushed.stdout).strip().splitlines()
                time.sleep(random.uniform(0.01, 0.1))  # let the winner's push land, then retry
        last = refusal[-1] if refusal else "no output"
        raise TeamError(f"{self.url}: gave up after {PUSH_ATTEMPTS} rejected pushes ({last})")

    def _sync(self) -> None:
        """Clone, or fetch and reset to the team's tip, dropping anything left by a failed write."""
        if not (self.checkout / ".git").is_dir():
            shutil.rmtree(self.checkout, ignore_errors=True)
            self.checkout.parent.mkdir(parents=True, exist_ok=True)
            self._run(["clone", "--quiet", self.url, str(self.checkout)], cwd=self.checkout.parent)
        self._git("fetch", "--quiet", "origin")
        remote = self._git(
            "rev-parse", "--verify", "--quiet", f"refs/remotes/origin/{BRANCH}", check=False
        )
        if remote.returncode == 0:
            self._git("checkout", "--quiet", "-B", BRANCH, f"origin/{BRANCH}")
            self._git("reset", "--quiet", "--hard", f"origin/{BRANCH}")
        else:  # an empty team: the first write creates the branch
            self._git("symbolic-ref", "HEAD", f"refs/heads/{BRANCH}")
            # No commit to reset to: empty the index, or what a failed write added stays
            # staged, survives the clean below and reads as published.
            self._git("read-tree", "--empty")
        self._git("clean", "--quiet", "-fdx")

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self._lock_file.parent.mkdir(parents=True, exist_ok=True)
        with self._lock_file.open("a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _git(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self._run(list(args), cwd=self.checkout, check=check)

    def _run(
        self, args: list[str], *, cwd: Path, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}
        try:
            done = subprocess.run(
                ["git", *_GIT_SETTINGS, *args],
                cwd=cwd,
                env=env,
                capture_output=True,
                text=True,
                stdin=subprocess.DEVNULL,
                check=False,
            )
        except OSError as exc:
            raise TeamError(f"cannot run git for team {self.url}: {exc}") from None
        if check and done.returncode != 0:
            detail = (done.stderr or done.stdout).strip().splitlines()
            raise TeamError(
                f"team {self.url}: git {args[0]} failed (exit {done.returncode}): "
                + (detail[-1] if detail else "no output")
            )
        return done


def _versions_in(root: Path, subject_id: str) -> list[int]:
    folder = root / "subjects" / check_plain_id(subject_id, "subject id")
    if not folder.is_dir():
        return []
    found = (_VERSION_DIR.fullmatch(entry.name) for entry in folder.iterdir() if entry.is_dir())
    return sorted(int(match.group(1)) for match in found if match)


def _copy_subject(subject: Path, target: Path) -> None:
    def copy(source: Path, destination: Path, top: bool) -> None:
        destination.mkdir(parents=True, exist_ok=True)
        for entry in os.scandir(source):
            if entry.name in EXCLUDED_NAMES_ANYWHERE or entry.is_symlink():
                continue
            if top and entry.name in SUBJECT_EXCLUDED_TOP_LEVEL:
                continue
            if entry.is_dir(follow_symlinks=False):
                copy(Path(entry.path), destination / entry.name, False)
            elif entry.is_file(follow_symlinks=False):
                shutil.copy2(entry.path, destination / entry.name)

    copy(subject, target, True)


def _stamped(path: Path, subject_id: str, version: int) -> tuple[str, str]:
    try:
        receipt: Any = loads_unique(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        raise TeamError(f"{path}: expected a readable receipt JSON, found {exc}") from None
    if not isinstance(receipt, dict) or not isinstance(receipt.get("run_id"), str):
        raise TeamError(f"{path}: expected a receipt object with a string 'run_id'")
    run_id = check_plain_id(receipt["run_id"], f"{path}: run_id")
    stamped = {**receipt, "skill_id": subject_id, "version": f"v{version}"}
    return run_id, dumps_json(stamped) + "\n"


def _already_filed(folder: Path, run_id: str, text: str) -> bool:
    candidates = [folder / f"{run_id}.json", *folder.glob(f"{run_id}-*.json")]
    return any(path.is_file() and path.read_text(encoding="utf-8") == text for path in candidates)


def _free_name(folder: Path, run_id: str) -> Path:
    path = folder / f"{run_id}.json"
    suffix = 2
    while path.exists():
        path = folder / f"{run_id}-{suffix}.json"
        suffix += 1
    return path
