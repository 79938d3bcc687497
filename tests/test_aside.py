"""``base.aside``: work done by a forked child, or left to the caller where that is not safe.

pytest-xdist workers run a thread of their own, where ``Aside`` rightly refuses to fork: each
case runs in a fresh single-threaded interpreter (a small program), as ``trialrun run`` does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from trialrun.base.aside import Aside

pytestmark = pytest.mark.skipif(
    sys.platform != "linux" or len(os.sched_getaffinity(0)) < 2,
    reason="work goes aside only on Linux with two CPUs or more",
)


def run_program(body: str) -> dict[str, object]:
    """Run ``body`` in a new interpreter; its last line of output is a JSON object, returned."""
    return json.loads(program_output(body).stdout.splitlines()[-1])  # type: ignore[no-any-return]


def program_output(body: str) -> subprocess.CompletedProcess[str]:
    program = "import json, os, sys, threading, time\nfrom trialrun.base.aside import Aside\n"
    proc = subprocess.run(
        [sys.executable, "-c", program + textwrap.dedent(body)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return proc


def test_the_child_computes_the_bytes_in_another_process() -> None:
    result = run_program(
        """
        pending = Aside(lambda: f"{os.getpid()} {os.getppid()}".encode())
        forked = pending.forked
        child, parent = pending.collect().decode().split()
        print(json.dumps({"forked": forked, "child": int(child), "parent": int(parent),
                          "me": os.getpid(), "again": pending.collect()}))
        """
    )
    assert result["forked"] is True
    assert result["parent"] == result["me"] != result["child"]
    assert result["again"] is None  # collected once; the child is reaped


def test_large_and_empty_results_arrive_whole() -> None:
    result = run_program(
        """
        big = bytes(range(256)) * 20_000  # 5 MB: far more than a pipe holds
        large = Aside(lambda: big).collect()
        empty = Aside(lambda: b"").collect()
        print(json.dumps({"large": large == big, "empty": repr(empty)}))
        """
    )
    assert result == {"large": True, "empty": "b''"}


def test_the_child_finishes_before_the_parent_reads_and_leaves_no_descriptor() -> None:
    # Through a pipe (64 KB), a result of megabytes kept the child waiting for collect().
    result = run_program(
        """
        big = bytes(range(256)) * 20_000
        before = sorted(os.listdir("/proc/self/fd"))
        pending = Aside(lambda: big)
        deadline = time.monotonic() + 30
        exited = False
        while not exited and time.monotonic() < deadline:
            seen = os.waitid(os.P_PID, pending._pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            exited = seen is not None
            time.sleep(0.01)
        whole = pending.collect() == big
        discarded = Aside(lambda: (time.sleep(60), b"late")[1])
        discarded.discard()
        after = sorted(os.listdir("/proc/self/fd"))
        print(json.dumps({"exited": exited, "whole": whole, "fds": before == after}))
        """
    )
    assert result == {"exited": True, "whole": True, "fds": True}


def test_the_child_never_collects_garbage_and_the_parent_still_does() -> None:
    # A collection in the child would walk the parent's heap and copy every page it touches.
    result = run_program(
        """
        import gc
        child = Aside(lambda: json.dumps(gc.isenabled()).encode()).collect()
        print(json.dumps({"child": json.loads(child), "parent": gc.isenabled()}))
        """
    )
    assert result == {"child": False, "parent": True}


def test_a_failing_child_leaves_the_work_to_the_caller() -> None:
    result = run_program(
        """
        def boom() -> bytes:
            raise ValueError("not here")
        def exits() -> bytes:
            sys.exit(0)  # a clean exit code without the marker is still a failure
        def killed() -> bytes:
            os.kill(os.getpid(), 9)
            return b"never"
        print(json.dumps({name: Aside(work).collect() for name, work in
                          (("raises", boom), ("exits", exits), ("killed", killed))}))
        """
    )
    assert result == {"raises": None, "exits": None, "killed": None}


def test_discard_stops_and_reaps_the_child() -> None:
    result = run_program(
        """
        pending = Aside(lambda: (time.sleep(60), b"late")[1])
        pid = pending._pid
        start = time.monotonic()
        pending.discard()
        took = time.monotonic() - start
        try:
            os.waitpid(pid, os.WNOHANG)
            reaped = False
        except ChildProcessError:
            reaped = True
        print(json.dumps({"took": took, "reaped": reaped, "after": pending.collect()}))
        """
    )
    assert result["reaped"] is True
    assert result["after"] is None
    assert isinstance(result["took"], float) and result["took"] < 30  # not the 60 s sleep


def test_no_fork_where_another_thread_runs_or_off_the_main_thread() -> None:
    result = run_program(
        """
        stop = threading.Event()
        worker = threading.Thread(target=stop.wait)
        worker.start()
        with_thread = Aside(lambda: b"x")
        stop.set()
        worker.join()
        seen: list[bool] = []
        side = threading.Thread(target=lambda: seen.append(Aside(lambda: b"x").forked))
        side.start()
        side.join()
        # A joined thread may take a moment more to leave the kernel's list.
        deadline = time.monotonic() + 10
        while len(os.listdir("/proc/self/task")) > 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        alone = Aside(lambda: b"x")
        print(json.dumps({"with_thread": [with_thread.forked, with_thread.collect()],
                          "off_main": seen[0], "alone": alone.collect().decode()}))
        """
    )
    assert result == {"with_thread": [False, None], "off_main": False, "alone": "x"}


def test_no_fork_on_one_cpu() -> None:
    result = run_program(
        """
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
        pending = Aside(lambda: b"x")
        print(json.dumps({"forked": pending.forked, "collected": pending.collect()}))
        """
    )
    assert result == {"forked": False, "collected": None}


def test_the_child_leaves_without_the_parents_exit_work() -> None:
    """No atexit callback, no flush of the parent's buffered output, from the child."""
    proc = program_output(
        """
        import atexit
        atexit.register(lambda: sys.stderr.write("atexit ran\\n"))
        sys.stdout.write("buffered once\\n")  # still in the parent's buffer at the fork
        print(json.dumps({"child": Aside(lambda: b"done").collect().decode()}))
        """
    )
    assert proc.stdout == 'buffered once\n{"child": "done"}\n'
    assert proc.stderr == "atexit ran\n"


def test_the_child_holds_none_of_the_parents_descriptors() -> None:
    """An agent's stdin that the parent closes must reach its end at once, not when the child
    exits."""
    result = run_program(
        """
        read_end, write_end = os.pipe()
        pending = Aside(lambda: (time.sleep(60), b"late")[1])
        time.sleep(0.2)  # the child is running its work by now, or soon
        os.close(write_end)
        start = time.monotonic()
        eof = os.read(read_end, 1) == b""
        took = time.monotonic() - start
        pending.discard()
        print(json.dumps({"forked": True, "eof": eof, "took": took}))
        """
    )
    assert result["eof"] is True
    assert isinstance(result["took"], float) and result["took"] < 30  # not the child's 60 s


def test_the_child_is_stopped_by_a_signal_and_the_parent_goes_on() -> None:
    result = run_program(
        """
        import signal
        got: list[int] = []
        signal.signal(signal.SIGTERM, lambda signum, frame: got.append(signum))
        pending = Aside(lambda: (time.sleep(60), b"late")[1])
        os.kill(pending._pid, signal.SIGTERM)  # the child's handler is the default: it dies
        print(json.dumps({"collected": pending.collect(), "parent_handler_ran": bool(got)}))
        """
    )
    assert result == {"collected": None, "parent_handler_ran": False}


def test_in_this_test_process_nothing_is_forked_when_a_thread_runs() -> None:
    """The pytest worker itself: whatever it runs, the work is left to the caller."""
    import threading

    stop = threading.Event()
    worker = threading.Thread(target=stop.wait)
    worker.start()
    try:
        pending = Aside(lambda: b"x")
        assert pending.forked is False
        assert pending.collect() is None
        pending.discard()  # nothing to stop
    finally:
        stop.set()
        worker.join()
