"""Path arguments whose refusals read like every other error: ``error: <path>: <what>``.

click's own ``Path`` type words its refusals ``Invalid value for 'X': Path '...' is not
readable.``, with the path in the middle; scripts and editors that read ``<file>: <what>``
lines would miss it. ``PathParam`` keeps click's checks and only rewords what they refuse.
"""

from __future__ import annotations

import os
from typing import Any

import click

from trialrun.errors import ConfigError


class PathParam(click.Path):
    """``click.Path`` whose refusal is a ``ConfigError`` about the path, naming the option."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return super().convert(value, param, ctx)
        except click.BadParameter as exc:
            path = os.fsdecode(value)
            where = f" ({param.get_error_hint(ctx)})" if param is not None and ctx else ""
            raise ConfigError(self._problem(path, exc) + where, file=path) from None

    def _problem(self, path: str, exc: click.BadParameter) -> str:
        if not os.path.exists(path):
            return "not found"
        if os.path.isdir(path) and not self.dir_okay:
            return "expected a file, found a folder"
        if not os.path.isdir(path) and not self.file_okay:
            return "expected a folder, found a file"
        if self.readable and not os.access(path, os.R_OK):
            return "permission denied: it cannot be read"
        if self.writable and not os.access(path, os.W_OK):
            return "permission denied: it cannot be written"
        return exc.format_message()
