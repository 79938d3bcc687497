"""Every subcommand x every class of bad input: exit 2 and one ``error:`` line naming the file.

The matrix is enumerated from the CLI itself (``trialrun.cli.group.COMMANDS`` and the subcommands
of each click group), so a subcommand added without an entry in ``MATRIX`` fails
``test_every_subcommand_has_an_entry``. Each entry says which arguments take a file or a
directory and, for each bad-input class, how to feed that class to the command, or why the class
does not apply (then it names the bad input the command does take).

A cell passes when the command exits 2, prints no traceback, and its stderr is exactly one
``error: ...`` line that names the offending file (its path, absolute or relative to the
working folder, not only its base name), optionally followed by click's
``Try 'trialrun ... -h' for help.`` hint. A cell may also say what follows the file name: the
line at fault and the message, e.g. ``:2: unknown key 'clals' ... (did you mean 'calls'?)`` for a
file a user writes by hand.

"Unreadable directory" cells (and the commands that would serve on valid input) run in a
subprocess. Root ignores file modes through two capabilities, CAP_DAC_OVERRIDE and
CAP_DAC_READ_SEARCH; as root (CI) the subprocess drops both from its bounding set before exec, so
it still runs as uid 0 with every other file reachable, yet a mode-000 directory refuses it.
``test_unreadable_cells_really_cannot_read`` proves that refusal, so these cells cannot pass
vacuously. Doctor is the one checker: problems inside the suite it checks are its findings
(a ``fail suite:`` line naming the file on stdout, exit 2 as for any invalid input), as
tests/commands/test_doctor.py documents.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

from builders import HANG_GUARD_S, Outcome, call_cli, make_cli_inputs
from paths import DATA_DIR
from trialrun.cli import run_cli
from trialrun.cli.group import COMMANDS, cli

CLASSES = (
    "missing_file",
    "empty_file",
    "binary_file",
    "wrong_yaml_type",
    "misspelled_key",
    "nonexistent_path",
    "unreadable_dir",
)
BINARY = bytes(range(256)) * 8
"""NUL bytes and every byte that cannot start a UTF-8 sequence."""
INCIDENTS = DATA_DIR / "incidents"


@dataclass(frozen=True)
class Call:
    """One invocation: the argv and the file or directory its error line must name."""

    argv: list[str]
    names: Path
    lock: Path | None = None
    """A directory made unreadable (and unwritable) for the call: mode 000, not root."""
    says: str | None = None
    """What the error line holds right after the file name (``:LINE: message``), when set."""


@dataclass(frozen=True)
class Cell:
    build: Callable[[Assets], Call]


@dataclass(frozen=True)
class NotApplicable:
    """The class cannot be fed to the command; ``reason`` says why."""

    reason: str


@dataclass(frozen=True)
class Entry:
    inputs: str
    """Which arguments and options take a file or a directory."""
    cells: dict[str, Cell | NotApplicable]
    """Keyed by class, or ``class:variant`` for more cells of one class."""
    serves: bool = False
    """Valid input makes the command serve until a signal: always run it in a subprocess."""
    checker: bool = False
    """Content problems of the checked file are the command's findings (on stdout), see doctor."""


# -- the assets a valid call needs, built once per session and copied per cell -----------------


class Assets:
    """A fresh folder per cell with copies of the valid inputs each command needs."""

    def __init__(self, root: Path, golden: Path) -> None:
        self.root = root
        self.golden = golden

    def _copy(self, name: str) -> Path:
        target = self.root / name
        if not target.exists():
            shutil.copytree(self.golden / name, target)
        return target

    def suite(self) -> Path:
        return self._copy("suite")

    def run_dir(self) -> Path:
        return self._copy("run")

    def receipt(self) -> Path:
        return self.run_dir() / "receipt.jsonl"

    def private_key(self) -> Path:
        return self._copy("keys") / "receipt-key.pem"

    def public_key(self) -> Path:
        return self._copy("keys") / "receipt-key.pub.pem"

    def pack(self) -> Path:
        return self._copy("pack")

    def incident(self) -> Path:
        return self._copy("incident") / "incident.json"

    def subject(self) -> Path:
        return self._copy("subject")

    def plan(self) -> Path:
        self.suite()
        plan = self.root / "plan.yaml"
        if not plan.exists():
            plan.write_text("suite: suite\nrepeat: 1\nregressions: []\n", encoding="utf-8")
        return plan

    def write(self, name: str, content: str | bytes) -> Path:
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
        return path

    def blocker(self) -> Path:
        """A regular file where a directory is expected: nothing can exist beneath it."""
        return self.write("blocker", "a file, not a directory\n")

    def locked(self, name: str = "locked") -> Path:
        path = self.root / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def home(self) -> Path:
        return self.root / "home"


def _edit(path: Path, old: str, new: str) -> Path:
    text = path.read_text(encoding="utf-8")
    if old not in text:  # not an assertion: a fixture that cannot be built is a broken test
        raise LookupError(f"{old!r} not in {path}")
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return path


def _unlink(path: Path) -> Path:
    path.unlink()
    return path


def _put(path: Path, content: str | bytes) -> Path:
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def _file_cells(
    target: Callable[[Assets], Path],
    argv: Callable[[Assets, Path], list[str]],
    *,
    misspell: tuple[str, str] | None,
    wrong_type: str = "- a list\n- not a mapping\n",
    misspell_says: str | None = None,
) -> dict[str, Cell | NotApplicable]:
    """Cells for a file read by the command: missing, empty, binary, wrong type, misspelled key.

    ``target`` returns the valid file (inside its valid surroundings); ``argv`` the call that
    reads it; ``misspell`` the (old, new) text edit that misspells one key, None when the file
    has no keys to misspell; ``misspell_says`` what its error line says after the file name.
    """

    def missing(a: Assets) -> Call:
        path = target(a)
        path.unlink()
        return Call(argv(a, path), path)

    def content(data: str | bytes) -> Callable[[Assets], Call]:
        def build(a: Assets) -> Call:
            path = _put(target(a), data)
            return Call(argv(a, path), path)

        return build

    def misspelled(a: Assets) -> Call:
        assert misspell is not None
        path = _edit(target(a), *misspell)
        return Call(argv(a, path), path, says=misspell_says)

    cells: dict[str, Cell | NotApplicable] = {
        "missing_file": Cell(missing),
        "empty_file": Cell(content("")),
        "binary_file": Cell(content(BINARY)),
        "wrong_yaml_type": Cell(content(wrong_type)),
    }
    cells["misspelled_key"] = (
        Cell(misspelled) if misspell else NotApplicable("the file has no keys")
    )
    return cells


def _locked_inside(
    a: Assets, parent: Path, argv: Callable[[Path], list[str]], name: str = "locked"
) -> Call:
    """A call whose input lies in a directory ``parent/name`` that the caller may not read."""
    locked = parent / name
    locked.mkdir(parents=True, exist_ok=True)
    return Call(argv(locked), locked, lock=locked)


# -- the table ----------------------------------------------------------------------------------

NO_CONFIG = "the command reads no configuration file; its file inputs are covered by other cells"


def _writer_cells(
    created: str, argv: Callable[[Path], list[str]], unreadable: Cell
) -> dict[str, Cell | NotApplicable]:
    """The cells of a command that only writes into the folder ``argv(folder)`` names."""
    return {
        "missing_file": NotApplicable(f"a missing {created} is created, that is its purpose"),
        "empty_file": NotApplicable(NO_CONFIG),
        "binary_file": NotApplicable(NO_CONFIG),
        "wrong_yaml_type": NotApplicable(NO_CONFIG),
        "misspelled_key": NotApplicable(NO_CONFIG),
        "nonexistent_path": Cell(lambda a: Call(argv(a.blocker() / "out"), a.blocker())),
        "unreadable_dir": unreadable,
    }


def _init_entry() -> Entry:
    def argv(folder: Path) -> list[str]:
        return ["init", "--path", str(folder)]

    locked = Cell(lambda a: _locked_inside(a, a.root, lambda d: argv(d / "evals")))
    return Entry(
        inputs="--path DIR: written (created when missing), never read",
        cells=_writer_cells("--path", argv, locked),
    )


def _run_entry() -> Entry:
    cells = _file_cells(
        lambda a: a.suite() / "suite.yaml",
        lambda a, p: ["run", str(p), "--no-baseline"],
        misspell=("mode: replay", "mdoe: replay"),
    )
    cells["binary_file:case"] = Cell(
        lambda a: Call(
            ["run", str(a.suite()), "--no-baseline"],
            _put(a.suite() / "cases" / "t1.yaml", BINARY),
        )
    )
    cells["binary_file:--baseline"] = Cell(
        lambda a: Call(
            ["run", str(a.suite()), "--baseline", str(a.write("base.json", BINARY))],
            a.root / "base.json",
        )
    )
    cells["empty_file:--sign-key"] = Cell(
        lambda a: Call(
            ["run", str(a.suite()), "--no-baseline", "--sign-key", str(a.write("k.pem", ""))],
            a.root / "k.pem",
        ),
    )
    cells["nonexistent_path"] = Cell(
        lambda a: Call(
            ["run", str(_edit(a.suite() / "suite.yaml", "cases_path: cases", "cases_path: gone"))],
            a.root / "suite" / "suite.yaml",
        )
    )
    cells["nonexistent_path:--out"] = Cell(
        lambda a: Call(
            ["run", str(a.suite()), "--no-baseline", "--out", str(a.blocker() / "out")],
            a.blocker(),
        )
    )
    cells["unreadable_dir"] = Cell(
        lambda a: Call(
            ["run", str(a.suite()), "--no-baseline"],
            a.suite() / "cases",
            lock=a.suite() / "cases",
        )
    )
    return Entry(
        inputs="SUITE (suite.yaml or its folder) and the case files and cassettes it names; "
        "--baseline FILE; --sign-key PEM; --out DIR (written)",
        cells=cells,
    )


def _compare_entry() -> Entry:
    cells = _file_cells(
        lambda a: a.subject() / "evals" / "compare.yaml",
        lambda a, p: ["compare", str(a.subject())],
        misspell=("seed: 0", "sede: 0"),
    )
    cells["missing_file"] = Cell(
        lambda a: Call(["compare", str(a.root / "no-subject")], a.root / "no-subject")
    )
    cells["misspelled_key:case"] = Cell(
        lambda a: Call(
            ["compare", str(a.subject())],
            _edit(a.subject() / "evals" / "cases" / "c1.yaml", "checks:", "chekcs:"),
        )
    )
    cells["binary_file:config.toml"] = Cell(
        lambda a: Call(["compare", str(a.subject())], a.write("home/config.toml", BINARY))
    )
    cells["nonexistent_path"] = Cell(
        lambda a: Call(
            ["compare", str(a.subject())],
            _edit(
                a.subject() / "evals" / "compare.yaml",
                "seed: 0",
                "seed: 0\narms:\n  incumbent: {path: ../../gone}",
            ),
        )
    )
    cells["unreadable_dir"] = Cell(
        lambda a: Call(
            ["compare", str(a.subject())],
            a.subject() / "evals" / "cases",
            lock=a.subject() / "evals" / "cases",
        )
    )
    return Entry(
        inputs="SUBJECT folder with evals/compare.yaml, evals/cases/*.yaml (session.yaml, "
        "triggers.yaml); $TRIALRUN_HOME/config.toml",
        cells=cells,
    )


def _diff_entry() -> Entry:
    cells = _file_cells(
        lambda a: a.run_dir() / "run.jsonl",
        lambda a, p: ["diff", str(a.run_dir()), str(p.parent)],
        misspell=('"type"', '"tpye"'),
        wrong_type="[1, 2]\n",
    )
    cells["missing_file"] = Cell(
        lambda a: Call(["diff", str(a.run_dir()), str(a.root / "gone")], a.root / "gone"),
    )
    cells["nonexistent_path"] = Cell(
        lambda a: Call(["diff", str(a.run_dir()), str(a.blocker() / "run")], a.blocker()),
    )
    cells["unreadable_dir"] = Cell(
        lambda a: Call(["diff", str(a.run_dir()), str(a.run_dir())], a.run_dir(), lock=a.run_dir()),
    )
    return Entry(inputs="RUN_A, RUN_B: run folders (their run.jsonl) or the files", cells=cells)


def _prune_entry() -> Entry:
    cells = _file_cells(
        lambda a: a.run_dir() / "unused-recordings.json",
        lambda a, p: ["prune", str(p.parent)],
        misspell=('"schema_version"', '"schema_versoin"'),
        wrong_type="[1, 2]\n",
    )
    # Without its list of unused recordings a folder is no replay run to prune: named as such.
    cells["missing_file"] = Cell(
        lambda a: Call(["prune", str(_gone(a.run_dir() / "unused-recordings.json"))], a.run_dir())
    )
    cells["nonexistent_path"] = Cell(
        lambda a: Call(["prune", str(a.blocker() / "run")], a.blocker()),
    )
    cells["unreadable_dir"] = Cell(
        lambda a: Call(["prune", str(a.run_dir())], a.run_dir(), lock=a.run_dir()),
    )
    return Entry(inputs="RUN_DIR: a replay run folder (its unused-recordings.json)", cells=cells)


def _gone(path: Path) -> Path:
    """The folder holding ``path``, once ``path`` is deleted."""
    path.unlink()
    return path.parent


def _gateway_entry() -> Entry:
    def gw(a: Assets, *extra: str) -> list[str]:
        return ["gateway", "--cassette-dir", str(a.locked("cassettes")), "--mode", "record", *extra]

    cells = _file_cells(
        lambda a: a.write("rules.yaml", "strip_keys: [id]\n"),
        lambda a, p: gw(a, "--rules", str(p)),
        misspell=("strip_keys", "strip_kyes"),
    )
    cells["wrong_yaml_type:--prices"] = Cell(
        lambda a: Call(
            gw(a, "--prices", str(a.write("prices.yaml", "- 1\n"))), a.root / "prices.yaml"
        )
    )
    cells["binary_file:--prices"] = Cell(
        lambda a: Call(
            gw(a, "--prices", str(a.write("prices.yaml", BINARY))), a.root / "prices.yaml"
        )
    )
    cells["nonexistent_path"] = Cell(
        lambda a: Call(
            ["gateway", "--cassette-dir", str(a.root / "gone"), "--mode", "replay"],
            a.root / "gone",
        )
    )
    cells["nonexistent_path:record"] = Cell(
        lambda a: Call(
            ["gateway", "--cassette-dir", str(a.blocker() / "c"), "--mode", "record"],
            a.blocker(),
        )
    )
    cells["unreadable_dir"] = Cell(
        lambda a: Call(
            ["gateway", "--cassette-dir", str(a.locked()), "--mode", "replay"],
            a.locked(),
            lock=a.locked(),
        )
    )
    cells["unreadable_dir:record"] = Cell(
        lambda a: Call(
            ["gateway", "--cassette-dir", str(a.locked()), "--mode", "record"],
            a.locked(),
            lock=a.locked(),
        )
    )
    return Entry(
        inputs="--rules FILE, --prices FILE (read at start); --cassette-dir DIR (read in "
        "replay, written in record); --workdir DIR (a name, never opened)",
        cells=cells,
        serves=True,
    )


def _doctor_entry() -> Entry:
    cells = _file_cells(
        lambda a: a.suite() / "suite.yaml",
        lambda a, p: ["doctor", str(a.suite())],
        misspell=("mode: replay", "mdoe: replay"),
    )
    cells["missing_file"] = Cell(lambda a: Call(["doctor", str(a.root / "gone")], a.root / "gone"))
    cells["nonexistent_path"] = Cell(
        lambda a: Call(["doctor", str(a.blocker() / "suite")], a.blocker())
    )
    cells["unreadable_dir"] = Cell(
        lambda a: Call(["doctor", str(a.suite())], a.suite(), lock=a.suite())
    )
    return Entry(
        inputs="SUITE (suite.yaml or its folder); the suite's files are what it checks",
        cells=cells,
        checker=True,
    )


def _publish_entry() -> Entry:
    def call(a: Assets) -> list[str]:
        return ["publish", str(a.subject())]

    return Entry(
        inputs="SUBJECT folder (hashed); $TRIALRUN_HOME/config.toml; --team REPO (path or URL)",
        cells=_team_cells(call)
        | {
            "missing_file": Cell(
                lambda a: Call(["publish", str(a.root / "gone")], a.root / "gone")
            ),
            "unreadable_dir": Cell(
                lambda a: Call(
                    ["publish", str(a.subject())],
                    a.subject() / "evals",
                    lock=a.subject() / "evals",
                )
            ),
        },
    )


def _team_cells(call: Callable[[Assets], list[str]]) -> dict[str, Cell | NotApplicable]:
    """config.toml cells shared by publish and scores: TOML, so "wrong type" is a bad value."""

    def config(data: str | bytes, says: str | None = None) -> Callable[[Assets], Call]:
        return lambda a: Call(call(a), a.write("home/config.toml", data), says=says)

    return {
        "empty_file": Cell(
            lambda a: Call(call(a), _put(a.subject() / "evals" / "compare.yaml", ""))
        ),
        "binary_file": Cell(config(BINARY, ":2: file is not valid UTF-8: byte 0x80")),
        "wrong_yaml_type": Cell(
            config("team = 5\n", ":1: 'team' must be a string, found integer 5")
        ),
        "misspelled_key": Cell(
            config(
                '# the team\ntaem = "x"\n',
                ":2: unknown key 'taem' in config.toml (did you mean 'team'?)",
            )
        ),
        "nonexistent_path": Cell(
            lambda a: Call([*call(a), "--team", str(a.blocker() / "team")], a.blocker())
        ),
    }


def _scores_entry() -> Entry:
    def call(a: Assets) -> list[str]:
        return ["scores", str(a.subject())]

    return Entry(
        inputs="SUBJECT folder (hashed); $TRIALRUN_HOME/config.toml and local receipts; --team",
        cells=_team_cells(call)
        | {
            "missing_file": Cell(lambda a: Call(["scores", str(a.root / "gone")], a.root / "gone")),
            "unreadable_dir": Cell(
                lambda a: Call(
                    ["scores", str(a.subject())],
                    a.subject() / "evals",
                    lock=a.subject() / "evals",
                )
            ),
        },
    )


def _scenario_init_entry() -> Entry:
    def argv(folder: Path) -> list[str]:
        return ["scenario", "init", str(folder)]

    locked = Cell(lambda a: _locked_inside(a, a.root, lambda d: argv(d / "p")))
    return Entry(
        inputs="DIRECTORY: written (created when missing), never read",
        cells=_writer_cells("DIRECTORY", argv, locked),
    )


def _scenario_verify_entry() -> Entry:
    def call(a: Assets, p: Path) -> list[str]:
        return ["scenario", "verify", str(a.pack()), "--agent", "naive", "--out", str(a.root / "o")]

    cells = _file_cells(
        lambda a: a.pack() / "pack.yaml", call, misspell=('"description"', '"descripton"')
    )
    cells["missing_file:dir"] = Cell(
        lambda a: Call(
            ["scenario", "verify", str(a.root / "gone"), "--agent", "naive"], a.root / "gone"
        )
    )
    cells["binary_file:scenario"] = Cell(
        lambda a: Call(
            call(a, a.pack()), _put(sorted((a.pack() / "scenarios").iterdir())[0], BINARY)
        )
    )
    scenario = "scenarios/refund_timeout_after_commit.json"
    cells["misspelled_key:scenario"] = Cell(
        lambda a: Call(
            call(a, a.pack()),
            _edit(a.pack() / scenario, '"faults"', '"fualts"'),
            says=":6: unknown key 'fualts' in the scenario (did you mean 'faults'?)",
        )
    )
    cells["wrong_yaml_type:scenario"] = Cell(
        lambda a: Call(
            call(a, a.pack()),
            _edit(a.pack() / scenario, '"call": 1', '"call": "first"'),
            says=":6: faults[0]: 'call' must be an integer, found string 'first'",
        )
    )
    cells["nonexistent_path"] = Cell(
        lambda a: Call([*call(a, a.pack())[:-2], "--out", str(a.blocker() / "out")], a.blocker())
    )
    cells["unreadable_dir"] = Cell(
        lambda a: Call(call(a, a.pack()), a.pack() / "scenarios", lock=a.pack() / "scenarios")
    )
    return Entry(
        inputs="DIRECTORY: the pack (pack.yaml, scenarios/*.yaml, agents); --out DIR (written)",
        cells=cells,
    )


def _baseline_promote_entry() -> Entry:
    def call(a: Assets, p: Path) -> list[str]:
        return ["baseline", "promote", "--from", str(a.run_dir()), "--to", str(a.root / "b.json")]

    cells = _file_cells(
        lambda a: a.run_dir() / "summary.json",
        call,
        misspell=('"cases"', '"csaes"'),
        wrong_type="[1, 2]\n",
    )
    cells["missing_file:--from"] = Cell(
        lambda a: Call(
            ["baseline", "promote", "--from", str(a.root / "gone"), "--to", "b.json"],
            a.root / "gone",
        )
    )
    cells["nonexistent_path"] = Cell(
        lambda a: Call([*call(a, a.run_dir())[:-1], str(a.blocker() / "b.json")], a.blocker())
    )
    cells["unreadable_dir"] = Cell(
        lambda a: Call(call(a, a.run_dir()), a.run_dir(), lock=a.run_dir())
    )
    return Entry(
        inputs="--from RUN (a run folder or its summary.json); --to FILE (written)",
        cells=cells,
    )


def _merge_entry() -> Entry:
    def call(a: Assets, p: Path) -> list[str]:
        return ["merge", str(a.run_dir()), "--out", str(a.root / "merged")]

    cells = _file_cells(
        lambda a: a.run_dir() / "summary.json",
        call,
        misspell=('"cases"', '"csaes"'),
        wrong_type="[1, 2]\n",
    )
    # A run folder without its summary.json is named as the folder that is not a run.
    cells["missing_file"] = Cell(
        lambda a: Call(call(a, a.run_dir()), _unlink(a.run_dir() / "summary.json").parent)
    )
    cells["missing_file:run"] = Cell(
        lambda a: Call(["merge", str(a.root / "gone"), "--out", "m"], a.root / "gone")
    )
    cells["binary_file:--baseline"] = Cell(
        lambda a: Call(
            [*call(a, a.run_dir()), "--baseline", str(a.write("b.json", BINARY))],
            a.root / "b.json",
        )
    )
    cells["nonexistent_path"] = Cell(
        lambda a: Call(["merge", str(a.run_dir()), "--out", str(a.blocker() / "m")], a.blocker())
    )
    cells["unreadable_dir"] = Cell(
        lambda a: Call(call(a, a.run_dir()), a.run_dir(), lock=a.run_dir())
    )
    return Entry(
        inputs="RUN_DIR... (shard run folders: summary.json, run.jsonl, receipt.jsonl); "
        "--baseline FILE; --sign-key PEM; --out DIR (written)",
        cells=cells,
    )


TAMPERED_NOT_INVALID = (
    "a receipt is not written by hand: an event with a misspelled key is a modified receipt, "
    "TAMPERED (exit 1); test_receipt_cli.py tests it"
)


def _receipt_verify_entry() -> Entry:
    cells = _file_cells(
        lambda a: a.receipt(),
        lambda a, p: ["receipt", "verify", str(p)],
        misspell=None,
        wrong_type="[1, 2]\n",
    )
    cells["nonexistent_path"] = Cell(
        lambda a: Call(
            ["receipt", "verify", str(a.receipt()), "--public-key", str(a.root / "gone.pem")],
            a.root / "gone.pem",
        ),
    )
    cells["unreadable_dir"] = Cell(
        lambda a: Call(["receipt", "verify", str(a.receipt())], a.run_dir(), lock=a.run_dir()),
    )
    cells["misspelled_key"] = NotApplicable(TAMPERED_NOT_INVALID)
    return Entry(inputs="FILE: a receipt (JSONL); --public-key PEM file or base64", cells=cells)


def _receipt_sign_entry() -> Entry:
    cells = _file_cells(
        lambda a: a.private_key(),
        lambda a, p: ["receipt", "sign", str(a.receipt()), "--key", str(p)],
        misspell=None,
        wrong_type="-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n",
    )
    cells["binary_file:receipt"] = Cell(
        lambda a: Call(
            ["receipt", "sign", str(_put(a.receipt(), BINARY)), "--key", str(a.private_key())],
            a.receipt(),
        ),
    )
    cells["nonexistent_path"] = Cell(
        lambda a: Call(
            ["receipt", "sign", str(a.blocker() / "r.jsonl"), "--key", str(a.private_key())],
            a.blocker(),
        ),
    )
    cells["unreadable_dir"] = Cell(
        lambda a: Call(
            ["receipt", "sign", str(a.receipt()), "--key", str(a.private_key())],
            a.run_dir(),
            lock=a.run_dir(),
        ),
    )
    cells["misspelled_key"] = NotApplicable("a PEM key has no keys to misspell; see the receipt")
    return Entry(inputs="FILE: a receipt, rewritten in place; --key PEM private key", cells=cells)


def _receipt_keygen_entry() -> Entry:
    def argv(folder: Path) -> list[str]:
        return ["receipt", "keygen", str(folder)]

    locked = Cell(lambda a: Call(argv(a.locked()), a.locked(), lock=a.locked()))
    return Entry(
        inputs="DIRECTORY: written (created when missing); refuses to overwrite a key",
        cells=_writer_cells("DIRECTORY", argv, locked),
    )


def _receipt_show_entry() -> Entry:
    cells = _file_cells(
        lambda a: a.receipt(),
        lambda a, p: ["receipt", "show", str(p)],
        misspell=None,
        wrong_type="[1, 2]\n",
    )
    cells["nonexistent_path"] = Cell(
        lambda a: Call(
            ["receipt", "show", str(a.receipt()), "--html", str(a.blocker() / "r.html")],
            a.blocker(),
        ),
    )
    cells["unreadable_dir"] = Cell(
        lambda a: Call(["receipt", "show", str(a.receipt())], a.run_dir(), lock=a.run_dir()),
    )
    cells["misspelled_key"] = NotApplicable(TAMPERED_NOT_INVALID)
    return Entry(inputs="FILE: a receipt (JSONL); --html OUT (written)", cells=cells)


def _attempt_entry() -> Entry:
    def call(a: Assets, *extra: str) -> list[str]:
        return [
            "attempt", "--goal", "g", "--verify", "true", "--agent", "true",
            "--workspace", str(a.locked("ws")), "--receipt", str(a.root / "r" / "receipt.jsonl"),
            *extra,
        ]  # fmt: skip

    cells = _file_cells(
        lambda a: a.private_key(),
        lambda a, p: call(a, "--sign-key", str(p)),
        misspell=None,
        wrong_type="-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n",
    )
    cells["misspelled_key"] = NotApplicable(
        "attempt reads no keyed file (goal, commands and limits are options)"
    )
    cells["nonexistent_path"] = Cell(
        lambda a: Call(
            [*call(a)[:-2], "--receipt", str(a.blocker() / "receipt.jsonl")], a.blocker()
        )
    )
    cells["missing_file:--workspace"] = Cell(
        lambda a: Call(
            [*call(a)[:-4], "--workspace", str(a.root / "gone"), *call(a)[-2:]], a.root / "gone"
        )
    )
    cells["unreadable_dir"] = Cell(lambda a: Call(call(a), a.locked("ws"), lock=a.locked("ws")))
    return Entry(
        inputs="--workspace DIR (read, snapshotted, restored); --receipt FILE (written); "
        "--sign-key PEM",
        cells=cells,
    )


def _incident_import_entry() -> Entry:
    def call(a: Assets, p: Path) -> list[str]:
        return ["incident", "import", str(p), "--out", str(a.root / "out")]

    cells = _file_cells(
        lambda a: a.write("export.jsonl", (INCIDENTS / "trialrun_run.jsonl").read_bytes()),
        call,
        misspell=('"type"', '"tpye"'),
        wrong_type="[1, 2]\n",
    )
    cells["nonexistent_path"] = Cell(
        lambda a: Call(
            [
                "incident",
                "import",
                str(INCIDENTS / "trialrun_run.jsonl"),
                "--out",
                str(a.blocker() / "out"),
            ],
            a.blocker(),
        )
    )
    cells["unreadable_dir"] = Cell(
        lambda a: _locked_inside(
            a, a.root, lambda d: call(a, _copy_into(INCIDENTS / "trialrun_run.jsonl", d))
        )
    )
    return Entry(inputs="EXPORT: a production trace file; --out DIR (written)", cells=cells)


def _copy_into(source: Path, directory: Path) -> Path:
    target = directory / source.name
    shutil.copyfile(source, target)
    return target


def _incident_cells(
    verb: Callable[[Assets, Path], list[str]], out: Callable[[Assets, Path], list[str]] | None
) -> dict[str, Cell | NotApplicable]:
    cells = _file_cells(
        lambda a: a.incident(),
        verb,
        misspell=('"calls"', '"clals"'),
        wrong_type="[1, 2]\n",
        misspell_says=":2: unknown key 'clals' in the incident (did you mean 'calls'?)",
    )
    cells["misspelled_key:call"] = Cell(
        lambda a: Call(
            verb(a, a.incident()),
            _edit(a.incident(), '"duration_ms"', '"duration"'),
            says=":7: unknown key 'duration' in calls[0] (did you mean 'duration_ms'?)",
        )
    )
    cells["unreadable_dir"] = Cell(
        lambda a: Call(verb(a, a.incident()), a.incident().parent, lock=a.incident().parent)
    )
    if out is not None:
        cells["nonexistent_path"] = Cell(lambda a: Call(out(a, a.blocker() / "x"), a.blocker()))
    return cells


def _incident_inspect_entry() -> Entry:
    def call(a: Assets, p: Path) -> list[str]:
        return ["incident", "inspect", str(p), "--out", str(a.root / "out")]

    cells = _incident_cells(
        call, lambda a, o: ["incident", "inspect", str(a.incident()), "--out", str(o)]
    )
    cells |= _rules_cells(lambda a: call(a, a.incident()))
    return Entry(
        inputs="INCIDENT: incident.json; --rules FILE (YAML); --out DIR (written)", cells=cells
    )


RULES = "- id: one-refund\n  tool: issue_refund\n  max_calls_per: order_id\n  at_most: 1\n"


def _rules_cells(call: Callable[[Assets], list[str]]) -> dict[str, Cell | NotApplicable]:
    """The ``--rules`` file of inspect and replay: a YAML list a user writes by hand."""

    def rules(data: str | bytes, says: str | None = None) -> Cell:
        return Cell(
            lambda a: Call(
                [*call(a), "--rules", str(a.write("r.yaml", data))], a.root / "r.yaml", says=says
            )
        )

    return {
        "misspelled_key:--rules": rules(
            RULES.replace("at_most", "at_mots"),
            ":4: unknown key 'at_mots' in rule 'one-refund' (did you mean 'at_most'?)",
        ),
        "misspelled_key:--rules-top": rules(
            "# the rules\nrulse:\n" + RULES,
            ":2: unknown key 'rulse' in the rules file (did you mean 'rules'?)",
        ),
        "wrong_yaml_type:--rules": rules("\njust text\n", ":2: expected a list of rules"),
        "wrong_yaml_type:--rules-entry": rules(
            RULES + "- just text\n", ":5: 'rule #2' must be a mapping, found string"
        ),
        "binary_file:--rules": rules(BINARY),
        "empty_file:--rules": rules("# none yet\n", ": the file is empty; expected a list"),
    }


def _incident_promote_entry() -> Entry:
    def call(a: Assets, p: Path) -> list[str]:
        return ["incident", "promote", str(p), "--to", str(a.root / "cases" / "c.yaml")]

    return Entry(
        inputs="INCIDENT: incident.json; --to FILE (the case file written, its cassette beside)",
        cells=_incident_cells(
            call, lambda a, o: ["incident", "promote", str(a.incident()), "--to", str(o)]
        ),
    )


def _incident_replay_entry() -> Entry:
    def call(a: Assets, p: Path) -> list[str]:
        return ["incident", "replay", str(p), "--agent", "true"]

    cells = _incident_cells(call, None)
    cells["nonexistent_path"] = Cell(
        lambda a: Call(
            [*call(a, a.incident()), "--rules", str(a.blocker() / "rules.yaml")], a.blocker()
        )
    )
    cells |= _rules_cells(lambda a: call(a, a.incident()))
    return Entry(inputs="INCIDENT: incident.json; --rules FILE (YAML)", cells=cells)


def _verify_entry() -> Entry:
    def call(a: Assets, p: Path) -> list[str]:
        return ["verify", str(p), "--out", str(a.root / "evidence")]

    cells = _file_cells(lambda a: a.plan(), call, misspell=("repeat:", "repaet:"))
    cells["nonexistent_path"] = Cell(
        lambda a: Call(call(a, _edit(a.plan(), "suite: suite", "suite: gone")), a.plan())
    )
    cells["unreadable_dir"] = Cell(
        lambda a: Call(call(a, a.plan()), a.suite() / "cases", lock=a.suite() / "cases")
    )
    return Entry(
        inputs="PLAN: a YAML plan and the suite it names; --out DIR (written)", cells=cells
    )


def _mcp_proxy_entry() -> Entry:
    def call(a: Assets, p: Path) -> list[str]:
        return ["mcp-proxy", "--mode", "replay", "--cassette", str(p)]

    def cassette(a: Assets) -> Path:
        return a.write("mcp.jsonl", '{"kind": "header", "schema_version": 1, "server": "s"}\n')

    cells = _file_cells(cassette, call, misspell=('"kind"', '"knid"'), wrong_type="[1, 2]\n")
    cells["nonexistent_path"] = Cell(
        lambda a: Call(
            [*call(a, cassette(a)), "--events", str(a.blocker() / "events.jsonl")], a.blocker()
        )
    )
    cells["unreadable_dir"] = Cell(
        lambda a: _locked_inside(a, a.root, lambda d: call(a, _copy_into(cassette(a), d)))
    )
    return Entry(
        inputs="--cassette FILE (stdio; read in replay); --events FILE (appended); "
        "--cassette-dir / --events-dir DIR (HTTP)",
        cells=cells,
        serves=True,
    )


MATRIX: dict[str, Entry] = {
    "init": _init_entry(),
    "run": _run_entry(),
    "compare": _compare_entry(),
    "diff": _diff_entry(),
    "gateway": _gateway_entry(),
    "doctor": _doctor_entry(),
    "prune": _prune_entry(),
    "publish": _publish_entry(),
    "scenario init": _scenario_init_entry(),
    "scenario verify": _scenario_verify_entry(),
    "baseline promote": _baseline_promote_entry(),
    "merge": _merge_entry(),
    "receipt verify": _receipt_verify_entry(),
    "receipt sign": _receipt_sign_entry(),
    "receipt keygen": _receipt_keygen_entry(),
    "receipt show": _receipt_show_entry(),
    "scores": _scores_entry(),
    "attempt": _attempt_entry(),
    "incident import": _incident_import_entry(),
    "incident inspect": _incident_inspect_entry(),
    "incident promote": _incident_promote_entry(),
    "incident replay": _incident_replay_entry(),
    "verify": _verify_entry(),
    "mcp-proxy": _mcp_proxy_entry(),
}


# -- enumeration --------------------------------------------------------------------------------


def _leaf_commands() -> set[str]:
    """Every runnable command path, from the CLI's own registry and its click groups."""
    ctx = click.Context(cli)
    found: set[str] = set()

    def walk(prefix: str, command: click.Command) -> None:
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                assert sub is not None
                walk(f"{prefix} {name}".strip(), sub)
        else:
            found.add(prefix)

    for name in COMMANDS:
        command = cli.get_command(ctx, name)
        assert command is not None
        walk(name, command)
    return found


def test_every_subcommand_has_an_entry() -> None:
    commands = _leaf_commands()
    assert "receipt verify" in commands and "incident import" in commands
    missing = sorted(commands - set(MATRIX))
    stale = sorted(set(MATRIX) - commands)
    assert not missing, f"subcommands without a bad-input entry in MATRIX: {missing}"
    assert not stale, f"MATRIX entries for commands that do not exist: {stale}"


def test_a_new_command_or_subcommand_without_an_entry_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The guard above sees both kinds of addition: a top-level command and a group's verb."""
    from trialrun.cli import receipt_cmd

    monkeypatch.setitem(COMMANDS, "shiny", ("trialrun.cli.init_cmd", "init", "A new command."))
    monkeypatch.setitem(receipt_cmd.receipt.commands, "rotate", click.Command("rotate"))
    assert _leaf_commands() - set(MATRIX) == {"shiny", "receipt rotate"}


@pytest.mark.parametrize("command", sorted(MATRIX))
def test_every_class_is_fed_or_explained(command: str) -> None:
    entry = MATRIX[command]
    declared = {key.split(":")[0] for key in entry.cells}
    assert declared == set(CLASSES), f"{command}: classes without a cell: {set(CLASSES) - declared}"
    assert any(isinstance(cell, Cell) for cell in entry.cells.values()), (
        f"{command}: every command takes some bad input"
    )
    for key, cell in entry.cells.items():
        assert not isinstance(cell, NotApplicable) or cell.reason, f"{command} {key}: say why"


def _cases() -> Iterator[object]:
    for command, entry in sorted(MATRIX.items()):
        for key, cell in sorted(entry.cells.items()):
            if isinstance(cell, NotApplicable):
                continue
            yield pytest.param(command, key, id=f"{command}-{key}")


# -- running a cell -----------------------------------------------------------------------------


@pytest.fixture(scope="session")
def golden(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Valid inputs for every command, made once by the CLI itself."""
    root = make_cli_inputs(tmp_path_factory.mktemp("golden"))
    assert run_cli(["scenario", "init", str(root / "pack")]) == 0
    export = INCIDENTS / "trialrun_run.jsonl"
    assert run_cli(["incident", "import", str(export), "--out", str(root / "incident")]) == 0
    evals = root / "subject" / "evals"
    (evals / "cases").mkdir(parents=True)
    (evals / "compare.yaml").write_text(
        "name: demo\nagent:\n  command: [python3, -c, 'print(1)', '{task}']\nk: 1\nseed: 0\n",
        encoding="utf-8",
    )
    (evals / "cases" / "c1.yaml").write_text(
        "task: say hi\nchecks:\n  - transcript_mentions: hi\n", encoding="utf-8"
    )
    return root


@pytest.mark.parametrize(("command", "key"), list(_cases()))
def test_bad_input_gives_exit_2_and_one_error_line(
    command: str,
    key: str,
    golden: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    entry = MATRIX[command]
    cell = entry.cells[key]
    assert isinstance(cell, Cell)
    if key.startswith("unreadable_dir") or entry.serves:
        call = cell.build(Assets(tmp_path, golden))
        outcome = _run_subprocess(call, tmp_path)
    else:
        call = cell.build(Assets(tmp_path, golden))
        outcome = _run_in_process(call, tmp_path, monkeypatch, capsys)
    checked_content = entry.checker and key.split(":")[0] in _CONTENT_CLASSES
    _assert_rejected(outcome, call, tmp_path, checked=checked_content)


_CONTENT_CLASSES = {"empty_file", "binary_file", "wrong_yaml_type", "misspelled_key"}


def _names(line: str, path: Path, root: Path) -> bool:
    """``line`` shows ``path`` as given (absolute) or relative to the working folder."""
    return str(path) in line or os.path.relpath(path, root) in line


def _assert_rejected(outcome: Outcome, call: Call, root: Path, *, checked: bool) -> None:
    shown = f"exit {outcome.code}\nstdout:\n{outcome.out}\nstderr:\n{outcome.err}"
    assert "Traceback" not in outcome.out + outcome.err, shown
    if checked:
        # doctor's subject is the suite: a file that does not load is a failed check listed
        # with the others on stdout, and invalid input (exit 2).
        assert outcome.code == 2, shown
        failures = [line for line in outcome.out.splitlines() if line.startswith("fail suite:")]
        assert failures and _names(failures[0], call.names, root), shown
        return
    assert outcome.code == 2, shown
    lines = [line for line in outcome.err.splitlines() if line.strip()]
    assert lines and lines[0].startswith("error: "), shown
    assert [line for line in lines if line.startswith("error:")] == lines[:1], shown
    assert all(line.startswith("Try 'trialrun ") for line in lines[1:]), shown
    assert _names(lines[0], call.names, root), f"the error line does not name {call.names}\n{shown}"
    # The house format puts the place first: the offending path, or the line of the file that
    # names it (``suite.yaml:6: cases_path 'cases' cannot be read``).
    where = re.match(r"error: (.+?)(:\d+)?: ", lines[0])
    assert where, f"the line does not start with <file>: \n{shown}"
    placed = where.group(2) is not None or _names(where.group(1), call.names, root)
    assert placed, f"the offending path or the line naming it comes first\n{shown}"
    if call.says is not None:
        assert f"{call.names}{call.says}" in lines[0], f"expected {call.says!r} there\n{shown}"


def _run_in_process(
    call: Call, root: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Outcome:
    monkeypatch.chdir(root)
    monkeypatch.setenv("TRIALRUN_HOME", str(root / "home"))
    monkeypatch.setenv("TRIALRUN_HANDLE", "tester")
    monkeypatch.delenv("TRIALRUN_SIGN_KEY", raising=False)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    return call_cli(call.argv, capsys)


def _as_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


# Linux capability numbers (linux/capability.h) and prctl(PR_CAPBSET_DROP).
_CAP_DAC_OVERRIDE = 1
_CAP_DAC_READ_SEARCH = 2
_PR_CAPBSET_DROP = 24


def _obey_file_modes() -> None:
    """In the child, before exec: root without the two capabilities that let it ignore modes.

    Dropped from the bounding set, they are not regained by exec, so the command runs as uid 0
    (its interpreter and files stay reachable) yet a mode-000 directory refuses it.
    """
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH):
        if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP) failed")


def _subprocess_env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRIALRUN_", "GITHUB_"))}
    env.update(HOME=str(root), TRIALRUN_HOME=str(root / "home"), TRIALRUN_HANDLE="tester")
    return env


def _run_subprocess(call: Call, root: Path) -> Outcome:
    if call.lock is not None:
        os.chmod(call.lock, 0)
    try:
        completed = subprocess.run(
            [sys.executable, "-m", "trialrun", *call.argv],
            cwd=root,
            env=_subprocess_env(root),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=HANG_GUARD_S,
            preexec_fn=_obey_file_modes if _as_root() else None,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{call.argv} did not stop on bad input (it served or hung): {exc}")
    finally:
        if call.lock is not None:
            os.chmod(call.lock, 0o755)
    return Outcome(completed.returncode, completed.stdout, completed.stderr)


def test_unreadable_cells_really_cannot_read(tmp_path: Path) -> None:
    """The subprocess an unreadable_dir cell runs in is refused by a mode-000 directory."""
    locked = tmp_path / "locked"
    locked.mkdir()
    secret = locked / "file"
    secret.write_text("x", encoding="utf-8")
    os.chmod(locked, 0)
    try:
        probe = subprocess.run(
            [sys.executable, "-c", f"import trialrun.cli; open({str(secret)!r})"],
            capture_output=True,
            text=True,
            preexec_fn=_obey_file_modes if _as_root() else None,
            check=False,
        )
    finally:
        os.chmod(locked, 0o755)
    assert probe.returncode == 1 and "PermissionError" in probe.stderr, probe.stderr


@pytest.mark.parametrize(
    ("argv", "message", "command"),
    [
        (["run"], "error: Missing argument 'SUITE'.", "trialrun run"),
        (["run", "s", "--bogus"], "error: No such option '--bogus'", "trialrun run"),
        (["receipt", "frob"], "error: No such command 'frob'.", "trialrun receipt"),
        (["run", "s", "-j", "0"], "error: Invalid value for '-j' / '--jobs'", "trialrun run"),
    ],
    ids=["missing-argument", "unknown-option", "unknown-command", "bad-value"],
)
def test_usage_errors_are_one_error_line_and_a_hint(
    argv: list[str], message: str, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """click's own errors: one ``error:`` line (not ``Usage:`` + ``Error:``), then the hint."""
    assert run_cli(argv) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2, lines
    assert lines[0].startswith(message), lines
    assert lines[1] == f"Try '{command} --help' for help."
