"""A stand-in for ``importlib.metadata.EntryPoint``: the plugin registries' tests install these."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class FakeEntryPoint:
    """An entry point whose ``load`` returns ``target`` or raises ``error``, counting the loads."""

    name: str
    value: str
    target: Any = None
    error: BaseException | None = None
    loads: int = 0

    def load(self) -> Any:
        self.loads += 1
        if self.error is not None:
            raise self.error
        return self.target
