"""The network seal of a replayed agent: what the kernel offers, and the watch that sees each try.

In replay an agent's whole process tree may connect only to the case's own services (gateway,
HTTP MCP proxies, the recorder) and to what the suite's ``network: {allow: [...]}`` names. Two
kernel layers, both unprivileged, are applied by the run's agent spawner (``seal_spawner``,
driven by ``spawner.AgentSpawner``) between the agent's fork and its exec:

- **Landlock** (Linux 6.7+, ABI 4): TCP connect only to the allowed *ports* (any host); enforced
  by the kernel, race-free, but the agent only sees EACCES and trialrun sees nothing.
- **seccomp user notification** (Linux 5.5+): each ``connect`` and address-naming ``sendto``
  (TCP, UDP, so DNS too) waits while ``AgentSeal`` reads its destination from
  ``/proc/<pid>/mem``; an allowed one goes on, any other fails with EACCES and is noted as
  ``host:port``, so the case fails naming it (``network_sealed``) even if the agent swallows the
  error. The kernel re-reads the address after the answer, so a thread of the agent could swap
  it in between: Landlock is what holds against a hostile agent, this layer names the try.

``probe()`` says once per process which layers this kernel has; ``TRIALRUN_SEAL_LAYERS``
(``landlock,seccomp``, ``landlock``, ``seccomp`` or ``none``) narrows them, to check a fallback.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import re
import select
import socket
import struct
import sys
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = [
    "LAYERS_ENV",
    "AgentSeal",
    "SealLayers",
    "SealPolicy",
    "probe",
]

LAYERS_ENV = "TRIALRUN_SEAL_LAYERS"

_SYS_LANDLOCK_CREATE_RULESET = 444
_LANDLOCK_CREATE_RULESET_VERSION = 1
_LANDLOCK_NET_ABI = 4
_SECCOMP_GET_ACTION_AVAIL = 2
_SECCOMP_RET_USER_NOTIF = 0x7FC00000
_SYS_SECCOMP = {"x86_64": 317, "aarch64": 277}
_CONNECT_SENDTO = {"x86_64": (42, 44), "aarch64": (203, 206)}
_X32_BIT = 0x40000000

# ioctl numbers of the seccomp listener (_IOWR('!', 0, struct seccomp_notif) and so on); the
# same on x86_64 and aarch64.
_NOTIF_RECV = 0xC0502100
_NOTIF_SEND = 0xC0182101
_NOTIF_ID_VALID = 0x40082102
_NOTIF_SIZE = 80
_FLAG_CONTINUE = 1
_SOCKADDR_MAX = 128


@dataclass(frozen=True, slots=True)
class SealLayers:
    """The kernel layers a run applies to its replayed agents."""

    landlock: bool
    seccomp: bool

    @property
    def any(self) -> bool:
        return self.landlock or self.seccomp

    def names(self) -> list[str]:
        return [name for name, on in (("landlock", self.landlock), ("seccomp", self.seccomp)) if on]


def _landlock_abi() -> int:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return int(
        libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, None, 0, _LANDLOCK_CREATE_RULESET_VERSION)
    )


def _kernel_at_least(major: int, minor: int) -> bool:
    match = re.match(r"(\d+)\.(\d+)", os.uname().release)
    return match is not None and (int(match[1]), int(match[2])) >= (major, minor)


def _user_notification() -> bool:
    import ctypes

    number = _SYS_SECCOMP.get(os.uname().machine)
    # Letting a call go on (SECCOMP_USER_NOTIF_FLAG_CONTINUE) came in 5.5: before it, an
    # allowed connect could only be answered with a made-up result.
    if number is None or not _kernel_at_least(5, 5) or not _may_read_descendants():
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    action = ctypes.c_uint32(_SECCOMP_RET_USER_NOTIF)
    return bool(libc.syscall(number, _SECCOMP_GET_ACTION_AVAIL, 0, ctypes.byref(action)) == 0)


def _may_read_descendants() -> bool:
    """Whether Yama lets us read our children's memory (``ptrace_scope`` 0 or 1), where each
    destination is read from."""
    try:
        with open("/proc/sys/kernel/yama/ptrace_scope", "rb") as scope:
            return int(scope.read().strip() or b"0") <= 1
    except (OSError, ValueError):  # no Yama: the usual same-user rule applies
        return True


@functools.cache
def probe() -> SealLayers:
    """What this kernel offers, asked without side effects (no filter, no ruleset applied)."""
    if not sys.platform.startswith("linux"):
        return SealLayers(False, False)
    wanted = os.environ.get(LAYERS_ENV)
    names = {"landlock", "seccomp"} if wanted is None else set(wanted.replace(" ", "").split(","))
    try:
        landlock = "landlock" in names and _landlock_abi() >= _LANDLOCK_NET_ABI
        seccomp = "seccomp" in names and _user_notification()
    except OSError:  # no libc to load: nothing we can apply
        return SealLayers(False, False)
    return SealLayers(landlock, seccomp)


@dataclass(frozen=True, slots=True)
class SealPolicy:
    """Where a sealed agent may connect.

    ``loopback_ports``: any loopback address at these ports (trialrun's services, and an
    ``allow:`` entry naming a loopback host: a client trying ``::1`` before ``127.0.0.1`` is
    not an escape). ``addresses``: exact ``(ip, port)`` pairs (``allow:`` entries elsewhere).
    """

    loopback_ports: frozenset[int] = frozenset()
    addresses: frozenset[tuple[str, int]] = frozenset()

    @property
    def ports(self) -> list[int]:
        """Every port Landlock must let TCP connect to (it knows ports, not hosts)."""
        return sorted(self.loopback_ports | {port for _, port in self.addresses})

    def with_loopback(self, ports: Iterable[int]) -> SealPolicy:
        return SealPolicy(self.loopback_ports | frozenset(ports), self.addresses)

    def allows(self, ip: str, port: int) -> bool:
        import ipaddress  # only where a sealed agent connects somewhere

        if port in self.loopback_ports and ipaddress.ip_address(ip).is_loopback:
            return True
        return (ip, port) in self.addresses


_WATCH_STOP_S = 5.0
"""How long ``AgentSeal.stop`` waits for its watch to end; woken, it ends at once."""


@dataclass
class AgentSeal:
    """The seal of one agent (and everything it starts): what the spawner applies, and the
    watch that answers its seccomp notifications and notes what it refused.

    ``AgentProcess.start`` hands ``notify_fd()`` and ``ports`` to the spawner, then calls
    ``spawned()`` whether or not the spawn worked. The watching thread ends when every sealed
    process is gone, or on ``stop()``; a connect still waiting then fails (ENOSYS), never passes.
    """

    policy: SealPolicy
    layers: SealLayers
    _refused: list[str] = field(default_factory=list)
    _ours: socket.socket | None = None
    _theirs: socket.socket | None = None
    _wake: tuple[int, int] | None = None
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def ports(self) -> list[int] | None:
        """The ports Landlock lets TCP connect to; None: Landlock is off."""
        return self.policy.ports if self.layers.landlock else None

    def notify_fd(self) -> int | None:
        """The socket the agent's seccomp listener comes back over; None: seccomp is off."""
        if not self.layers.seccomp:
            return None
        if self._ours is None:
            self._ours, self._theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            self._wake = os.pipe()
        assert self._theirs is not None
        return self._theirs.fileno()

    def spawned(self) -> None:
        """The agent holds its end now (or never will): start watching."""
        if self._theirs is None:
            return
        self._theirs.close()
        self._theirs = None
        self._thread = threading.Thread(target=self._watch, name="trialrun-seal", daemon=True)
        self._thread.start()

    def attempts(self) -> list[str]:
        """The refused destinations so far, each once, in the order first tried."""
        with self._lock:
            return list(dict.fromkeys(self._refused))

    def stop(self) -> None:
        if self._wake is None:
            return
        wake_r, wake_w = self._wake
        os.write(wake_w, b"x")
        if self._thread is not None:
            # Bounded: the event loop waits here. A watch still inside a system call then keeps
            # its descriptors (closing them under it could hand their numbers to another file).
            self._thread.join(_WATCH_STOP_S)
        self._wake = None
        if self._thread is not None and self._thread.is_alive():
            return
        os.close(wake_r)
        os.close(wake_w)
        if self._theirs is not None:
            self._theirs.close()
        if self._ours is not None:
            self._ours.close()

    def _watch(self) -> None:
        assert self._ours is not None and self._wake is not None
        poller = select.poll()
        poller.register(self._ours, select.POLLIN)
        poller.register(self._wake[0], select.POLLIN)
        if not _ready(poller, self._ours.fileno()):
            return
        try:
            _, fds, _, _ = socket.recv_fds(self._ours, 1, 1)
        except OSError:
            return
        if not fds:  # the agent never ran: no listener was handed over
            return
        listener = fds[0]
        try:
            poller.unregister(self._ours)
            poller.register(listener, select.POLLIN)
            while _ready(poller, listener):
                self._answer(listener)
        finally:
            os.close(listener)

    def _answer(self, listener: int) -> None:
        import fcntl

        request = bytearray(_NOTIF_SIZE)
        try:
            fcntl.ioctl(listener, _NOTIF_RECV, request, True)
        except OSError:  # the caller was killed or its call interrupted meanwhile
            return
        ident, pid, _flags, nr, _arch, _ip, *args = struct.unpack("=QIIiIQ6Q", request)
        connect, _sendto = _CONNECT_SENDTO.get(os.uname().machine, (-1, -1))
        address, length = (args[1], args[2]) if nr & ~_X32_BIT == connect else (args[4], args[5])
        destination = _read_destination(pid, address, length)
        try:  # the memory read belongs to the call still waiting, not to a reused pid
            fcntl.ioctl(listener, _NOTIF_ID_VALID, struct.pack("=Q", ident))
        except OSError:
            return
        if destination is None or (destination != _UNREADABLE and self.policy.allows(*destination)):
            answer = struct.pack("=QqiI", ident, 0, 0, _FLAG_CONTINUE)
        else:
            with self._lock:
                self._refused.append(_shown(*destination))
            answer = struct.pack("=QqiI", ident, 0, -errno.EACCES, 0)
        with contextlib.suppress(OSError):  # the caller is gone: nothing waits for the answer
            fcntl.ioctl(listener, _NOTIF_SEND, answer)


def _ready(poller: select.poll, fd: int) -> bool:
    """Wait until ``fd`` has something to read; False once it hung up or we were woken."""
    while True:
        events = dict(poller.poll())
        if len(events) > 1 or fd not in events:
            return False
        if events[fd] & select.POLLIN:
            return True
        if events[fd] & (select.POLLHUP | select.POLLERR | select.POLLNVAL):
            return False


_UNREADABLE = ("", 0)
"""A destination we could not read (a process no longer our descendant, which Yama keeps us
from reading): refused, never let through."""


def _read_destination(pid: int, address: int, length: int) -> tuple[str, int] | None:
    """The ``(ip, port)`` an Internet socket address names; None for other families (Unix)."""
    try:
        fd = os.open(f"/proc/{pid}/mem", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return _UNREADABLE
    try:
        raw = os.pread(fd, min(max(length, 0), _SOCKADDR_MAX), address)
    except OSError:
        return _UNREADABLE
    finally:
        os.close(fd)
    if len(raw) < 2:
        return _UNREADABLE
    family = struct.unpack("=H", raw[:2])[0]
    if family == socket.AF_INET and len(raw) >= 8:
        return socket.inet_ntop(socket.AF_INET, raw[4:8]), struct.unpack("!H", raw[2:4])[0]
    if family == socket.AF_INET6 and len(raw) >= 24:
        import ipaddress

        ip = ipaddress.IPv6Address(raw[8:24])
        shown = str(ip.ipv4_mapped) if ip.ipv4_mapped is not None else str(ip)
        return shown, struct.unpack("!H", raw[2:4])[0]
    if family in (socket.AF_INET, socket.AF_INET6):
        return _UNREADABLE
    return None


def _shown(ip: str, port: int) -> str:
    if (ip, port) == _UNREADABLE:
        return "an address trialrun could not read"
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"
