"""Prune's rewrite, for any file: the lines it names go, every other byte stays, in order.

Lines are counted as every cassette reader counts them (split at ``\\n`` only): a CRLF ending,
a ``\\r`` inside a line and a last line without a newline all survive as they were.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from trialrun.commands.prune import FilePlan, PrunePlan, Removal, apply

LINE = st.text(
    alphabet=st.characters(blacklist_characters="\n", blacklist_categories=("Cs",)), max_size=12
)
ENDING = st.sampled_from(["\n", "\r\n"])


@given(
    st.lists(st.tuples(LINE, ENDING), min_size=1, max_size=12),
    st.booleans(),
    st.data(),
)
def test_the_named_lines_go_and_the_rest_stay_byte_for_byte(
    lines: list[tuple[str, str]], final_newline: bool, data: st.DataObject
) -> None:
    pieces = [(text + ending).encode() for text, ending in lines]
    if not final_newline:
        pieces[-1] = lines[-1][0].encode()
    gone = data.draw(st.sets(st.integers(min_value=1, max_value=len(pieces))))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "c.jsonl"
        path.write_bytes(b"".join(pieces))
        removals = [Removal(number, "tool", "t") for number in sorted(gone)]
        apply(PrunePlan(Path(folder), [FilePlan(path, "c.jsonl", removals)]))
        kept = [piece for number, piece in enumerate(pieces, start=1) if number not in gone]
        assert path.read_bytes() == b"".join(kept)


def test_a_file_kept_for_a_reason_is_not_touched(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_bytes(b'{"a": 1}\n{"b": 2}\n')
    plan = FilePlan(path, "c.jsonl", [Removal(1, "tool", "t")], kept_because="shared")
    apply(PrunePlan(tmp_path, [plan]))
    assert path.read_bytes() == b'{"a": 1}\n{"b": 2}\n'
