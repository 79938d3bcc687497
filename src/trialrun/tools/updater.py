"""Update mode: replay what still matches, record only what does not, in call order.

An ``UpdateBackend`` is a replay backend whose miss falls through to the recorder of record mode:
a call that finds an unused recording gets it (and the recording's line is copied into the new
cassette byte for byte); any other call runs the real tool and is written down as record mode
writes it. The new cassette replaces the old one only when the case ends cleanly (the
recorder's commit), so a failed case leaves its old recordings as they were. Recordings no call
used are dropped, or, with ``keep_unused``, appended unchanged after the calls' recordings.

Which recording a new one replaced, and which were dropped, is worked out afterwards from the
old and new files (``running.recording_review``), the same way for every kind of recording.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trialrun.base.results import JsonObject
from trialrun.errors import CassetteMismatch
from trialrun.tools.base import LocalTool, ToolOutcome, normalized_outcome
from trialrun.tools.recorder import RecordingBackend

if TYPE_CHECKING:
    from trialrun.config.models import Normalization
    from trialrun.tools.cassette import Cassette


class UpdateBackend:
    """Answers from ``cassette`` where it can, else through ``recorder`` (the real tools)."""

    def __init__(
        self,
        cassette: Cassette | None,
        recorder: RecordingBackend,
        normalization: Normalization | None = None,
        *,
        keep_unused: bool = False,
    ) -> None:
        self.cassette = cassette
        """The recordings before the case; None when the case had no cassette yet."""
        self.recorder = recorder
        self._normalization = normalization
        self._keep_unused = keep_unused
        self.replayed = 0
        self.recorded = 0

    async def call(
        self, name: str, args: JsonObject, local: LocalTool | None = None
    ) -> ToolOutcome:
        if self.cassette is not None:
            try:
                entry = self.cassette.take(name, args)
            except CassetteMismatch:
                pass
            else:
                self.recorder.copy_line(self.cassette.raw_line(self.cassette.last_taken))
                self.replayed += 1
                return normalized_outcome(entry.ok, entry.result, entry.error, self._normalization)
        self.recorded += 1
        return await self.recorder.call(name, args, local)

    def close(self, *, clean: bool) -> None:
        """Commit the new cassette (``clean``) or leave the old one as it was; idempotent."""
        try:
            if clean and self._keep_unused and self.cassette is not None:
                for at in self.cassette.unused_indexes():
                    self.recorder.copy_line(self.cassette.raw_line(at))
        except BaseException:
            self.recorder.close(clean=False)
            raise
        finally:
            if self.cassette is not None:
                self.cassette.close()
        self.recorder.close(clean=clean)

    def unused(self) -> int:
        # Update drops (or keeps) them itself: the review reports them, not the unused count,
        # which says what a replay left over.
        return 0
