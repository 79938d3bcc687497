"""Seal this process's network, then exec the agent: ``python -I -S seal_shim.py ... -- ARGV``.

Run by trialrun in place of a replayed agent's command; standard library only, nothing of
trialrun's is imported (``-I -S``: no site, no user paths, so start-up stays small). It execs the
agent, so the pid and argv the agent sees are its own, and every process the agent starts inherits
both layers:

- ``--ports P,Q``: Landlock (ABI >= 4) lets TCP connect only to these ports, any host.
- ``--notify FD``: a seccomp filter hands each ``connect`` (and ``sendto`` naming an address) to
  trialrun, which reads the destination and lets it go on or refuses it; the filter's listener
  goes to trialrun over the Unix socket ``FD`` (SCM_RIGHTS). ``io_uring_setup`` fails with ENOSYS:
  a ring's connect would not pass the filter.

A layer that was asked for and cannot be applied stops the shim (exit 126) before the agent runs:
trialrun never claims a seal that is not there. Both need ``no_new_privs``, which is set first.
"""

from __future__ import annotations

import ctypes
import os
import struct
import sys

TYPE_CHECKING = False  # not typing's: importing typing would cost every sealed agent's start
if TYPE_CHECKING:
    from typing import NoReturn

EXIT_SEAL_FAILED = 126
EXIT_EXEC_FAILED = 127

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


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    libc.prctl.restype = ctypes.c_int
    return libc


def _fail(what: str) -> NoReturn:
    errno = ctypes.get_errno()
    sys.stderr.write(f"trialrun network seal: {what} failed: {os.strerror(errno)}\n")
    sys.stderr.flush()
    sys.exit(EXIT_SEAL_FAILED)


def _landlock(libc: ctypes.CDLL, ports: list[int]) -> None:
    # struct landlock_ruleset_attr as of ABI 4: handled_access_fs, handled_access_net.
    attr = ctypes.create_string_buffer(struct.pack("=QQ", 0, _LANDLOCK_ACCESS_NET_CONNECT_TCP))
    ruleset = libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, attr, ctypes.c_size_t(16), 0)
    if ruleset < 0:
        _fail("landlock_create_ruleset")
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
            _fail(f"landlock_add_rule (port {port})")
    if libc.syscall(_SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0) < 0:
        _fail("landlock_restrict_self")
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
        _fail(f"seccomp on {machine}")
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
        _fail("seccomp (user notification)")
    if _send_fd(libc, channel_fd, listener) < 0:
        _fail("handing the seccomp listener to trialrun")
    os.close(channel_fd)
    os.close(listener)


class _Iovec(ctypes.Structure):
    _fields_ = (("base", ctypes.c_void_p), ("len", ctypes.c_size_t))


class _Msghdr(ctypes.Structure):
    _fields_ = (
        ("name", ctypes.c_void_p),
        ("namelen", ctypes.c_uint32),
        ("iov", ctypes.POINTER(_Iovec)),
        ("iovlen", ctypes.c_size_t),
        ("control", ctypes.c_void_p),
        ("controllen", ctypes.c_size_t),
        ("flags", ctypes.c_int),
    )


class _FdMessage(ctypes.Structure):
    """One ``cmsghdr`` carrying one descriptor (``SCM_RIGHTS``), padded as ``CMSG_SPACE``."""

    _fields_ = (
        ("len", ctypes.c_size_t),
        ("level", ctypes.c_int),
        ("type", ctypes.c_int),
        ("fd", ctypes.c_int),
        ("pad", ctypes.c_int),
    )


def _send_fd(libc: ctypes.CDLL, channel_fd: int, fd: int) -> int:
    """``sendmsg`` of one byte and ``fd``, through libc: the socket module costs a start-up."""
    byte = ctypes.create_string_buffer(b"L", 1)
    iov = _Iovec(ctypes.cast(byte, ctypes.c_void_p), 1)
    header_size = ctypes.sizeof(ctypes.c_size_t) + 2 * ctypes.sizeof(ctypes.c_int)
    control = _FdMessage(
        header_size + ctypes.sizeof(ctypes.c_int), 1, 1, fd, 0
    )  # SOL_SOCKET, SCM_RIGHTS
    message = _Msghdr(
        None,
        0,
        ctypes.pointer(iov),
        1,
        ctypes.cast(ctypes.pointer(control), ctypes.c_void_p),
        ctypes.sizeof(control),
        0,
    )
    libc.sendmsg.restype = ctypes.c_ssize_t
    return int(libc.sendmsg(channel_fd, ctypes.byref(message), 0))


def main(argv: list[str]) -> None:
    ports: list[int] | None = None
    notify_fd: int | None = None
    args = iter(argv)
    for arg in args:
        if arg == "--ports":
            ports = [int(p) for p in next(args).split(",") if p]
        elif arg == "--notify":
            notify_fd = int(next(args))
        elif arg == "--":
            break
    command = list(args)
    libc = _libc()
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        _fail("prctl(PR_SET_NO_NEW_PRIVS)")
    if ports is not None:
        _landlock(libc, ports)
    if notify_fd is not None:
        _seccomp(libc, notify_fd)
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        sys.stderr.write(f"trialrun: could not start the agent {command[0]!r}: {exc.strerror}\n")
        sys.stderr.flush()
        sys.exit(EXIT_EXEC_FAILED)


if __name__ == "__main__":
    main(sys.argv[1:])
