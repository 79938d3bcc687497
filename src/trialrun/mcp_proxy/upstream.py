"""The live MCP server behind a recording proxy: a child process spoken to over stdio.

Its stderr reaches ours unchanged, through a daemon thread that keeps its last lines (a server
that cannot start says why there); its stdout is read by a daemon thread that hands every line
to the owner, then reports the exit. Stopping closes its
stdin, waits briefly, then terminates and finally kills it.
"""

from __future__ import annotations

import collections
import contextlib
import os
import shlex
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence

from trialrun.base import leftovers
from trialrun.errors import TrialrunError
from trialrun.mcp_proxy.jsonrpc import read_lines

_KEPT_STDERR_LINES = 3
_KEPT_STDERR_BYTES = 500
"""Of the server's stderr, the last lines (and characters of each) an error message quotes."""


class UpstreamError(TrialrunError):
    """The MCP server command could not be started."""


def describe(argv: Sequence[str]) -> str:
    return shlex.join(argv)


class Upstream:
    def __init__(
        self,
        argv: Sequence[str],
        *,
        on_line: Callable[[bytes], None],
        on_exit: Callable[[int | None], None],
        env: Mapping[str, str] | None = None,
        noted: bool = True,
    ) -> None:
        """``env``: variables laid over ours for the server (not on its command line, where
        every user of the machine can read them). ``noted``: the server is noted in
        ``base.leftovers``, to be killed should we be (not needed where a group that is noted
        already holds both us and the server)."""
        self.argv = list(argv)
        self._env = dict(env) if env else None
        self._noted = noted
        self._on_line = on_line
        self._on_exit = on_exit
        self._process: subprocess.Popen[bytes] | None = None
        self._write_lock = threading.Lock()
        self._input_open = False
        self._reader: threading.Thread | None = None
        self._stderr_reader: threading.Thread | None = None
        self._last_stderr: collections.deque[bytes] = collections.deque(maxlen=_KEPT_STDERR_LINES)

    def start(self) -> None:
        if not self.argv:
            raise UpstreamError("record mode needs the MCP server command after '--'")
        try:
            process = subprocess.Popen(
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                bufsize=0,
                env={**os.environ, **self._env} if self._env else None,
            )
        except FileNotFoundError:
            raise UpstreamError(
                f"cannot start MCP server: command not found: {self.argv[0]}"
            ) from None
        except PermissionError:
            raise UpstreamError(
                f"cannot start MCP server: permission denied: {self.argv[0]}"
            ) from None
        except (OSError, ValueError) as exc:  # ValueError: the command holds a NUL
            raise UpstreamError(
                f"cannot start MCP server {describe(self.argv)}: "
                f"{getattr(exc, 'strerror', None) or exc}"
            ) from None
        assert process.stdin is not None and process.stdout is not None
        assert process.stderr is not None
        self._stderr_reader = threading.Thread(
            target=self._pass_stderr,
            args=(process.stderr.fileno(),),
            name="mcp-upstream-stderr",
            daemon=True,
        )
        self._stderr_reader.start()
        if self._noted:
            leftovers.note_process(process.pid)
        self._process = process
        self._input_open = True
        self._reader = threading.Thread(
            target=self._read, args=(process.stdout.fileno(),), name="mcp-upstream", daemon=True
        )
        self._reader.start()

    def _read(self, fd: int) -> None:
        try:
            for line in read_lines(fd):
                self._on_line(line)
        except OSError:
            pass
        code: int | None = None
        if self._process is not None:
            try:
                code = self._process.wait(timeout=2)
            except subprocess.TimeoutExpired:
                code = None  # closed its stdout but lives on; stop() will end it
        self._on_exit(code)

    def _pass_stderr(self, fd: int) -> None:
        """Copy the server's stderr to ours as it comes, keeping its last non-blank lines."""
        partial = b""
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            with contextlib.suppress(OSError):
                os.write(2, chunk)  # our stderr gone: the server must still never block on it
            lines = (partial + chunk).split(b"\n")
            partial = lines.pop()[-_KEPT_STDERR_BYTES:]
            self._last_stderr.extend(line[-_KEPT_STDERR_BYTES:] for line in lines if line.strip())
        if partial.strip():
            self._last_stderr.append(partial)

    def stderr_tail(self) -> str:
        """The server's last stderr lines once it has exited (waits for them to be read)."""
        reader = self._stderr_reader
        if reader is not None and reader is not threading.current_thread():
            reader.join(1.0)
        return " | ".join(line.decode("utf-8", "replace").strip() for line in self._last_stderr)

    def send(self, data: bytes) -> bool:
        """Forward one line; False when the server no longer reads (it exited)."""
        with self._write_lock:  # one whole line at a time, and never after close_input
            if not self._input_open or self._process is None or self._process.stdin is None:
                return False
            fd = self._process.stdin.fileno()
            view = memoryview(data)
            try:
                while view:
                    view = view[os.write(fd, view) :]
            except OSError:
                return False
        return True

    def close_input(self) -> None:
        """EOF on the server's stdin: the polite way to ask a stdio server to finish."""
        with self._write_lock:
            if self._input_open and self._process is not None and self._process.stdin is not None:
                self._input_open = False
                with contextlib.suppress(OSError):
                    self._process.stdin.close()

    def wait_finished(self, timeout: float) -> bool:
        """Wait until the server's stdout is drained (all its answers delivered)."""
        if self._reader is None:
            return True
        if self._reader is threading.current_thread():
            return False  # called from an on_line/on_exit callback: it cannot wait for itself
        self._reader.join(timeout)
        return not self._reader.is_alive()

    def stop(self, *, grace: float = 2.0) -> int | None:
        """End the server: terminate, then kill if it does not go within ``grace`` seconds."""
        process = self._process
        if process is None:
            return None
        self.close_input()
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._noted:
            leftovers.note_ended(process.pid)
        # Close our end of its stdout only once the reader is done with the descriptor.
        if process.stdout is not None and self.wait_finished(1.0):
            with contextlib.suppress(OSError):
                process.stdout.close()
        stderr_reader = self._stderr_reader
        if process.stderr is not None and stderr_reader is not None:
            stderr_reader.join(1.0)
            if not stderr_reader.is_alive():
                with contextlib.suppress(OSError):
                    process.stderr.close()
        return process.returncode

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None
