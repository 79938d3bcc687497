"""The agent spawner: one per run, it starts every agent, a replayed one inside the network seal.

``python -I -S seal_spawner.py FD``: standard library only, nothing of trialrun's is imported
(``-I -S``: no site, no user paths). Over the Unix socket ``FD`` trialrun
(``conversation/spawner.py``) sends one request per agent: a header (payload length, descriptor
count) carrying the agent's descriptors (SCM_RIGHTS), then a JSON payload: ``argv``, ``env``,
``cwd``, ``fds`` (the number each descriptor takes in the agent), ``ports`` and ``notify``. Each
agent is started by ``subprocess`` in a new session with its stdio and directory, and the other
descriptors and the seal are put in place by its ``preexec_fn`` (safe here: the spawner is
single-threaded), so the pid, argv, environment, directory and descriptors the agent sees are
its own (its parent is this spawner). An agent not sealed gets none of the layers (nor
``no_new_privs``); a sealed one gets those asked for, applied by ``seal`` between fork and exec:

- ``ports``: Landlock (ABI >= 4) lets TCP connect only to these ports, any host.
- ``notify``: a seccomp filter hands each ``connect`` (and ``sendto`` naming an address) to
  trialrun, which reads the destination and lets it go on or refuses it; the filter's listener
  goes back over the last descriptor received (a Unix socket, SCM_RIGHTS). ``io_uring_setup``
  fails with ENOSYS: a ring's connect would not pass the filter.

Both need ``no_new_privs``, which is set first. A layer asked for that cannot be applied (said
through a close-on-exec pipe), a failed ``chdir`` or ``exec``: each is reported and the agent
never runs: trialrun never claims a seal that is not there. Replies are JSON lines on ``FD``:
``{"id", "pid"}`` (started), ``{"id", "error", "errno", "message"}`` (never ran) and
``{"exited": pid, "code": c}`` (negative: killed by that signal), each exit once a SIGCHLD
woke the loop (through the signal wakeup descriptor, which works on every Unix). The layers
are Linux's; elsewhere only unsealed agents are asked for. At end of file on ``FD`` (trialrun
stopped, or died), every agent's group still running is killed and the spawner exits.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import functools
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys

TYPE_CHECKING = False  # not typing's: the spawner imports only what it uses
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

HEADER = struct.Struct("=II")
"""A request's header: payload length, number of descriptors it carries."""
MAX_FDS = 16

_PR_SET_NO_NEW_PRIVS = 38
_SYS_LANDLOCK_CREATE_RULESET = 444
_SYS_LANDLOCK_ADD_RULE = 445
_SYS_LANDLOCK_RESTRICT_SELF = 446
_LANDLOCK_ACCESS_NET_CONNECT_TCP = 1 << 1
_LANDLOCK_RULE_NET_PORT = 2

_SECCOMP_SET_MODE_FILTER = 1
_SECCOMP_FILTER_FLAG_NEW_LISTENER = 1 << 3
_SECCOMP_RET_ALLOW = 0x7FFF0000
_SECCOMP_RET_USER_NOTIF = 0x7FC00000
_SECCOMP_RET_ERRNO = 0x00050000
_ENOSYS = 38
_X32_BIT = 0x40000000

# (audit arch, seccomp, connect, sendto, io_uring_setup) per machine.
SYSCALLS: dict[str, tuple[int, int, int, int, int]] = {
    "x86_64": (0xC000003E, 317, 42, 44, 425),
    "aarch64": (0xC00000B7, 277, 203, 206, 425),
}

# Classic BPF opcodes.
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_AND_K = 0x54
_RET_K = 0x06


class SealFailed(Exception):
    """A layer asked for could not be applied; the agent must not run."""

    def __init__(self, what: str) -> None:
        super().__init__(f"trialrun network seal: {what} failed: {os.strerror(ctypes.get_errno())}")


@functools.cache
def _libc() -> ctypes.CDLL:
    """Loaded for the first sealed agent only: ``prctl`` is Linux's."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    libc.prctl.restype = ctypes.c_int
    return libc


def _landlock(libc: ctypes.CDLL, ports: list[int]) -> None:
    # struct landlock_ruleset_attr as of ABI 4: handled_access_fs, handled_access_net.
    attr = ctypes.create_string_buffer(struct.pack("=QQ", 0, _LANDLOCK_ACCESS_NET_CONNECT_TCP))
    ruleset = libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, attr, ctypes.c_size_t(16), 0)
    if ruleset < 0:
        raise SealFailed("landlock_create_ruleset")
    for port in ports:
        rule = struct.pack("=QQ", _LANDLOCK_ACCESS_NET_CONNECT_TCP, port)
        added = libc.syscall(
            _SYS_LANDLOCK_ADD_RULE,
            ruleset,
            _LANDLOCK_RULE_NET_PORT,
            ctypes.create_string_buffer(rule),
            0,
        )
        if added < 0:
            raise SealFailed(f"landlock_add_rule (port {port})")
    if libc.syscall(_SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0) < 0:
        raise SealFailed("landlock_restrict_self")
    os.close(ruleset)


def filter_program(machine: str) -> bytes:
    """The seccomp filter: notify on connect and on sendto with an address; refuse io_uring."""
    arch, _seccomp, connect, sendto, io_uring_setup = SYSCALLS[machine]
    allow, notify, nosys = 11, 12, 13
    # A jump goes to the instruction after it plus its offset: offset = target - (index + 1).
    code = [
        (_LD_W_ABS, 0, 0, 4),  # 0: arch
        (_JEQ_K, 0, allow - 2, arch),  # 1: another ABI (i386): Landlock alone sees it
        (_LD_W_ABS, 0, 0, 0),  # 2: nr
        (_AND_K, 0, 0, ~_X32_BIT & 0xFFFFFFFF if machine == "x86_64" else 0xFFFFFFFF),  # 3
        (_JEQ_K, notify - 5, 0, connect),  # 4
        (_JEQ_K, nosys - 6, 0, io_uring_setup),  # 5
        (_JEQ_K, 0, allow - 7, sendto),  # 6
        (_LD_W_ABS, 0, 0, 48),  # 7: args[4] (dest_addr), low half
        (_JEQ_K, 0, notify - 9, 0),  # 8
        (_LD_W_ABS, 0, 0, 52),  # 9: high half
        (_JEQ_K, allow - 11, notify - 11, 0),  # 10
        (_RET_K, 0, 0, _SECCOMP_RET_ALLOW),  # 11: allow
        (_RET_K, 0, 0, _SECCOMP_RET_USER_NOTIF),  # 12: notify
        (_RET_K, 0, 0, _SECCOMP_RET_ERRNO | _ENOSYS),  # 13: nosys
    ]
    return b"".join(struct.pack("=HBBI", op, jt, jf, k) for op, jt, jf, k in code)


def _seccomp(libc: ctypes.CDLL, channel_fd: int) -> None:
    machine = os.uname().machine
    if machine not in SYSCALLS:
        ctypes.set_errno(_ENOSYS)
        raise SealFailed(f"seccomp on {machine}")
    program = filter_program(machine)
    instructions = ctypes.create_string_buffer(program, len(program))
    # struct sock_fprog: unsigned short len, then a pointer (aligned).
    fprog = ctypes.create_string_buffer(
        struct.pack("@HP", len(program) // 8, ctypes.addressof(instructions))
    )
    listener = libc.syscall(
        SYSCALLS[machine][1], _SECCOMP_SET_MODE_FILTER, _SECCOMP_FILTER_FLAG_NEW_LISTENER, fprog
    )
    if listener < 0:
        raise SealFailed("seccomp (user notification)")
    channel = socket.socket(fileno=channel_fd)
    try:
        socket.send_fds(channel, [b"L"], [listener])
    except OSError as exc:
        ctypes.set_errno(exc.errno or 0)
        raise SealFailed("handing the seccomp listener to trialrun") from None
    channel.close()
    os.close(listener)


def seal(libc: ctypes.CDLL, ports: list[int] | None, notify_fd: int | None) -> None:
    """Apply the layers asked for to this process (and so to all it will start)."""
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise SealFailed("prctl(PR_SET_NO_NEW_PRIVS)")
    if ports is not None:
        _landlock(libc, ports)
    if notify_fd is not None:
        _seccomp(libc, notify_fd)


def _prepare(
    libc: ctypes.CDLL | None, extra: list[tuple[int, int]], request: dict[str, Any], report_fd: int
) -> Callable[[], None]:
    """What the child does between fork and exec, after ``subprocess`` has put the agent's
    stdio in place, changed directory and started a new session: the agent's other
    descriptors (``extra``: ours, the number it takes; -1 for the seccomp hand-back socket,
    which keeps none) at their numbers, then the seal (``libc`` None: not sealed). A
    failure is written to ``report_fd`` (the exception ``subprocess`` raises for it carries no
    message) and stops the exec."""

    def prepare() -> None:
        try:
            # Out of the way first: a descriptor may sit where another must go.
            floor = max([target for _, target in extra] + [2]) + 1
            moved = [(fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, floor), to) for fd, to in extra]
            for fd, target in moved:
                if target >= 0:
                    os.dup2(fd, target)  # inheritable: the agent's own
            if libc is not None:
                notify = moved[-1][0] if request["notify"] else None
                seal(libc, request["ports"], notify)
        except SealFailed as exc:
            _report(report_fd, {"error": "seal", "errno": 0, "message": str(exc)})
            raise
        except OSError as exc:
            _report(report_fd, {"error": "setup", "errno": exc.errno or 0, "message": str(exc)})
            raise

    return prepare


def _report(fd: int, problem: dict[str, Any]) -> None:
    with contextlib.suppress(OSError):
        os.write(fd, json.dumps(problem).encode("ascii"))


def _read_all(fd: int) -> bytes:
    data = bytearray()
    while chunk := os.read(fd, 65536):
        data += chunk
    return bytes(data)


class Spawner:
    """The loop: requests in, agents started, their exits reported."""

    def __init__(self, control: socket.socket) -> None:
        self.control = control
        self.poller = select.poll()
        self.poller.register(control, select.POLLIN)
        self.children: dict[int, subprocess.Popen[bytes]] = {}
        """pid -> every agent not yet reaped."""
        # A SIGCHLD writes to the wakeup pipe, which wakes the poll; the handler itself has
        # nothing to do (the default disposition would not run it, nor write).
        self.wake, wake_w = os.pipe()
        os.set_blocking(self.wake, False)
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        signal.signal(signal.SIGCHLD, lambda _signum, _frame: None)
        self.poller.register(self.wake, select.POLLIN)

    def run(self) -> None:
        while True:
            for fd, _events in self.poller.poll():
                if fd == self.control.fileno():
                    if not self.serve():
                        self.shutdown()
                        return
                elif fd == self.wake:
                    self.reap()

    def serve(self) -> bool:
        """Take one request; False at end of file (trialrun is gone)."""
        try:
            head, fds, _flags, _addr = socket.recv_fds(self.control, HEADER.size, MAX_FDS)
        except OSError:
            return False
        for fd in fds:  # before any fork: this process is single-threaded
            os.set_inheritable(fd, False)
        if len(head) < HEADER.size:
            for fd in fds:
                os.close(fd)
            return False
        size, _count = HEADER.unpack(head)
        payload = bytearray()
        while len(payload) < size:
            chunk = self.control.recv(size - len(payload))
            if not chunk:
                return False
            payload += chunk
        request = json.loads(payload.decode("ascii"))
        try:
            self.spawn(request, fds)
        finally:
            for fd in fds:
                os.close(fd)
        return True

    def spawn(self, request: dict[str, Any], fds: list[int]) -> None:
        """Start one agent; its pid, or why it never ran, goes back to trialrun."""
        targets: list[int] = request["fds"]
        stdio = {target: fd for fd, target in zip(fds, targets, strict=False) if target <= 2}
        # The seccomp hand-back socket comes last, after the agent's own; it keeps no number.
        extra = [(fd, target) for fd, target in zip(fds, targets, strict=False) if target > 2]
        extra += [(fd, -1) for fd in fds[len(targets) :]]
        report_r, report_w = os.pipe()  # close-on-exec: EOF once the agent execs or gives up
        cwd = request["cwd"]
        sealed = request["ports"] is not None or request["notify"]
        try:
            libc = _libc() if sealed else None
            process = subprocess.Popen(
                request["argv"],
                cwd=cwd,
                env=request["env"],
                stdin=stdio.get(0),
                stdout=stdio.get(1),
                stderr=stdio.get(2),
                start_new_session=True,
                # Every descriptor of this program is close-on-exec; the agent's own are made
                # inheritable where they land, which closing the rest would undo.
                close_fds=False,
                preexec_fn=_prepare(libc, extra, request, report_w),
            )
        except (OSError, ValueError, subprocess.SubprocessError) as exc:
            os.close(report_w)
            problem = _read_all(report_r)
            os.close(report_r)
            if problem:
                reply = json.loads(problem.decode("utf-8", "surrogateescape"))
            elif isinstance(exc, ValueError):  # a NUL in the command, its environment or cwd
                reply = {"error": "value", "errno": 0, "message": str(exc)}
            elif isinstance(exc, OSError):
                stage = "cwd" if cwd is not None and exc.filename == cwd else "exec"
                reply = {"error": stage, "errno": exc.errno or 0, "message": str(exc)}
            else:
                reply = {"error": "setup", "errno": 0, "message": str(exc)}
            self.send({"id": request["id"], **reply})
            return
        os.close(report_w)
        os.close(report_r)
        self.children[process.pid] = process
        self.send({"id": request["id"], "pid": process.pid})

    def reap(self) -> None:
        """Report every agent that exited (one SIGCHLD may stand for several)."""
        with contextlib.suppress(BlockingIOError):
            while os.read(self.wake, 512):
                pass
        for pid, process in list(self.children.items()):
            code = process.poll()
            if code is not None:
                del self.children[pid]
                self.send({"exited": pid, "code": code})

    def send(self, reply: dict[str, Any]) -> None:
        line = json.dumps(reply).encode("ascii") + b"\n"
        with contextlib.suppress(OSError):  # trialrun is gone: the next poll sees end of file
            self.control.sendall(line)

    def shutdown(self) -> None:
        """trialrun is gone: nothing of the run may live on."""
        for process in self.children.values():
            with contextlib.suppress(OSError):
                os.killpg(process.pid, signal.SIGKILL)
        for process in self.children.values():
            process.wait()
        self.children.clear()


def main(argv: list[str]) -> None:
    control = socket.socket(fileno=int(argv[0]))
    control.set_inheritable(False)
    Spawner(control).run()


if __name__ == "__main__":
    main(sys.argv[1:])
