"""The deep replay case: 1 case x 5,000 distinct tool calls over a 5,000-entry cassette.

    python bench/deep_bench.py [--repeat 7] [--calls 5000]

Runs, alternately and in one process tree, the whole ``trialrun run SUITE --mode replay``
process and the bare driver of ``bench/deep_bare_driver.py`` on the same suite and agent (the
suite of ``bench/replay_bench.py``), in its asyncio form (one event loop driving agents, the
architecture trialrun uses) and in its blocking-pipes form (the floor). From session 7 until
issue 29 trialrun answered a replayed case from a thread of blocking pipes, and from session 9
held that thread and the agent on one CPU; issue 29 removed both (docs/perf.md). It prints
the median wall time of each and the ratios trialrun / bare driver; issue 17's bound is
against the blocking driver. The machines are shared and noisy: only ratios taken in the same
run mean anything, and instruction counts (valgrind) are steadier than seconds. On a quiet
machine the wall time of this case is about the CPU time of the two processes added up: the
agent and trialrun take turns.

Where the time goes (session 6, before -> after the per-message work). CPU of the trialrun
process by phase (median of runs on a shared 2-core machine), and valgrind instruction counts,
which do not move with the machine's load; the agent itself executes ~385 M instructions:

  =================================================  ===============  ===============
  phase                                              before           after
  =================================================  ===============  ===============
  start-up: imports (session 7, see below)           ~200 ms, 703 M   ~185 ms, 655 M
  load suite + preflight (cassette parsed once;       ~95 ms, 215 M    ~60 ms, 129 M
    session 7, see below)
  conversation: 5,000 x (read, parse, canonical       ~890 ms           ~650 ms
    args, look up, answer, 2 events)
      asyncio.timeout per wait (2 -> 0 per message)    ~35 k instr/wait   a lazy alarm
      canonical args of a call                         22.6 k instr       10.2 k instr
    session 7: answered on a thread of blocking       ~650 ms            ~370 ms
      pipes (3 loop iterations -> 0 per message)
  judge: redact 10,002 events                         ~150 ms, 681 M     ~100 ms, 438 M
    session 7: a walk proves events clean, no copy    ~117 ms, 444 M      ~39 ms, 162 M
  run.jsonl: encode 10,004 events                      ~78 ms, 406 M      ~78 ms, 405 M
    session 7: one C encoder per case, no frames       ~82 ms, 400 M      ~61 ms, 322 M
  receipt: 5,000 tool_call events (redact,            ~400 ms, 1,337 M   ~215 ms, 882 M
    canonical JSON, SHA-256, write)
    session 7: no redacted copies, emit_each          ~246 ms, 873 M     ~116 ms, 485 M
  summary, junit, report                               ~15 ms            ~15 ms
  whole process, instructions                         5,393 M            4,162 M
  =================================================  ===============  ===============

Session 7, until the first agent starts (instructions of the trialrun process, valgrind, its
report warm-up thread left out; CPU: median of 11 alternating runs of both trees): 957 M -> 823 M
instructions, 258 -> 230 ms of CPU. Imports are what importing the modules loaded by then costs
(the interpreter's own 39 M included); load is the rest. The assertion compiler no longer lists
the ``trialrun.assertions`` entry points for built-in types (``importlib.metadata``, ``email``,
``zipfile`` and a scan of every installed distribution: 35 fewer modules); a well-formed cassette
line is one scan of the JSON decoder (5,000 lines: 240 M -> 170 M instructions).

Session 8, the same measure (``bench/first_spawn.py`` stops the process at its first agent's spawn;
CPU: median of 25 alternating runs of both trees on a loaded machine, so higher than session 7's):
830 M -> 778 M instructions (imports 701 M -> 688 M, load 129 M -> 90 M), 323 -> 310 ms of CPU, and
the wall time ``git rev-parse`` (receipt) kept the agent waiting, ~4 ms -> ~0.2 ms:
``git_state_ahead`` starts git before the recorder is built and run_start collects the answer.
``CassetteEntry`` is a slotted dataclass, no longer a frozen one, whose ``__init__`` set each field
through ``object.__setattr__`` (5,000 entries: 57 M -> ~1 M; the same for the per-call
``ToolCallMsg`` and ``ToolOutcome``: 35 M fewer over the 5,000-call conversation);
``trialrun.tools`` exports lazily, so replay does not import the recorder; ``shutil`` (with bz2 and
lzma, ~7 M) is imported only to look up a bare ``python`` agent_command. What is left, and why:

* PyYAML's pure-Python reader compiles its ``NON_PRINTABLE`` regex at import (57 M), and cannot
  be skipped: the C extension ``yaml._yaml`` reads ``yaml.reader.ReaderError`` when it loads,
  and the pure-Python loader is our fallback for libyaml's refusals.
* asyncio imports ssl itself (``asyncio.base_events``: ~27 M), and concurrent.futures and
  logging (~28 M); click costs ~43 M (imported by ``trialrun.cli``).
* ~55 dataclass definitions: Python 3.11 compiles each generated method from source (~300 of
  the 342 source compiles before the agent, ~160 M together); defining every one of them
  without ``frozen`` would save 68 M.
* reading the 5,000-line cassette (~110 M: the JSON scanner 72 M; its SHA-256 counts 20 M under
  valgrind, which hides the CPU's SHA instructions: 0.5 ms in reality), ``base.redact``'s
  regexes, ``secrets`` (random, hmac: ~7 M) imported by ``artifacts.rundir`` and ``base.fsutil``,
  and ``tools.live`` imported by ``conversation.session`` for one exception.

The bare drivers execute 1,294 M (asyncio) and 760 M (blocking pipes) instructions for the same
5,000 answers, start-up included: an asyncio round trip alone costs about what the whole
blocking driver spends per message.

The session 7 rows (issue 17) measure the phases after the conversation with
``bench/deep_post_phases.py`` (median process CPU of 5 x 5 alternating runs against main, on a
loaded machine, so higher than session 6's; instructions of one pass under callgrind): together
~447 ms -> ~219 ms of CPU, 1,717 M -> 969 M instructions. What is left is mostly the stdlib's
C JSON encoder (about 20 k instructions per event on Python 3.11), SHA-256 over the run.jsonl
lines and over each receipt event, and the Python of one receipt event (canonical JSON of its
data, a redaction walk, the timestamp).

The session 7 conversation row: trialrun's process CPU while the case runs (``run_agent``,
its answering thread included), medians of runs at quiet moments. The wall time of the
conversation went from ~1.3 s to ~0.55-0.75 s: an asyncio round trip on subprocess pipes took
three loop iterations (the subprocess transport hands each chunk to the loop once more before
the stream reader sees it, then the reading task wakes), and each wake-up from ``epoll`` costs
more than the message's own handling. What is left per message is ~30-40 us of Python (parse,
canonical args, look up, two events, encode: ``answer_micro.py``, since removed) against ~20 us
in the blocking driver.

Session 8, the rest of the run. The interpreter's teardown (freeing the run's objects one by
one) took ~48 ms after the last line was written, ~7 ms with ``os._exit`` once the atexit
callbacks ran (``cli._leave``); garbage collections took ~55-65 ms of a deep run, ~22-25 ms once
``trialrun run`` freezes what it loaded before the first case (the one full collection is gone;
timed with ``gc.callbacks``); the lent thread reads before it polls (its CPU over the
conversation: user 0.36 -> 0.34 s, sys 0.072 -> 0.057 s, 9 alternating runs) and encodes the
answers with a C encoder built once (``protocol.encode``: ~5 -> ~2.5 us). Measured and dropped:

* Doing the artifacts' per-event work (the redaction proof, the run.jsonl line, the receipt's
  ``tool_call`` data) on the answering thread between answers, while the agent takes its turn:
  the phases after the conversation went from ~210 to ~30 ms but the conversation grew by
  ~140-280 ms, also when the work stopped as soon as the agent's next message arrived (a
  ``poll(0)`` between pieces); worse in 7 of 8 paired runs. On these machines the agent woken by
  our write runs on our core (a synchronous wake-up), so nothing overlaps: the conversation's
  wall time is trialrun's CPU per message plus the agent's. On another thread the GIL hand-back
  (up to the switch interval after every system call) cost more still.
* Spinning on a non-blocking read for 30 or 100 us before ``poll``: no better. The answering
  thread seldom sleeps (~130 voluntary switches over 5,000 messages).
* trialrun and the agent pinned to different cores (``taskset``): 1.21 -> 2.35 s; a wake-up
  across cores costs more than sharing one.

What is left per message is CPU: ~60-75 us of the answering thread in the run (user and system)
against ~20 us for the same Python in ``answer_micro.py`` (since removed); the bare driver's
~20 us grow about alike (every switch to the agent and back leaves the caches cold). After the
conversation ~230 ms of CPU remain (receipt ~130, run.jsonl ~60, the redaction proof ~38:
``bench/deep_post_phases.py``), and ~300 ms before the first agent (above).

Session 9, the scheduler. Most of the conversation's wall time was neither process's work:
trialrun's answering thread and the agent woke each other on the two vCPUs, and waking an idle
vCPU of these virtual machines costs tens of microseconds (perf: ``_raw_spin_unlock_irqrestore``
in ``anon_pipe_write`` and ``finish_task_switch`` were a third of the answering thread's samples).
With both on one CPU (``taskset``, 3 runs each) the blocking bare driver went from 1.4-1.8 s to
0.66-0.77 s and trialrun from 2.3-2.9 s to 1.3-1.45 s; pinning only one of them changed nothing,
pinning them to different CPUs doubled the time (session 8). That was also the "fast" and
"slow" host of the sessions before: the fast moments were those where the scheduler happened to
keep both on one CPU. trialrun now does it itself while it replays (``conversation/cpushare.py``,
suite key ``share_cpu``): 1.04-1.17 s against 1.24-1.32 s for the blocking bare driver
(0.84-0.89x), medians of 7 and 9. Moving a running thread to another CPU costs ~1 ms here
(``sched_setaffinity`` waits for the migration), so a conversation shares only after 32 quick
messages: sharing from the first message cost the 200 x 3 suite ~1.4 ms per case (+6%).
The ``bare one CPU`` row is a driver that shares a CPU too, the floor now: trialrun takes ~1.8x
of it. Where the difference lies (the agent's own timestamps, median of 7 at one moment, trialrun
against that driver): until the agent has ``task_start`` 283 against 149 ms (imports and the
suite's load), the conversation 469 against 302 ms, after the final output 230 against 21 ms (the
redaction proof, run.jsonl, the receipt, the reports). Measured and dropped:

* An inline fast path for a well-formed replayed call (parse, look up, record and answer in one
  function, the backend's methods bypassed): the conversation -47 ms of ~550 (median of 15).
  Spelling out the two events per call and naming the tool_result only when a failure needs it
  gave -26 ms (median of 25) and is kept.
* The answering thread's design is not the cost: a bare driver answering from a thread after
  ``poll`` on non-blocking pipes was the fastest of the four variants (blocking read or poll, on
  the main thread or another). What remains per message is the bookkeeping a bare driver does not
  do (two events, the ``ToolCall``, the encoded answer) and a larger working set to bring back
  into the caches after every switch to the agent.
* Without the report's warm-up thread the conversation is ~14 ms shorter (it holds the GIL at
  times) and the tail ~65 ms longer: kept.

Session 10, the tail on the idle CPU. After the conversation ~270 ms of Python ran on one CPU
(verdict and redaction proof ~35, run.jsonl ~65, receipt ~110, report and files ~50) while the
other CPU waited. Now the receipt's events of a case of 1,000+ calls are made by a forked child
(``base/aside.py``, ``ReceiptWriter.emit_ahead``) beside the verdict, run.jsonl and the report,
and the run's files are written before the receipt is sealed: the tail went from ~270-300 to
~190-210 ms (the agent's timestamps, medians of 9). The child takes ~1.3x the parent's time for
the same work (it copies each page it first writes to: ~2,700 page faults) and its CPU time
varies 70-170 ms from run to run at the same page faults (the host). The cassette's index
(~25 ms for 5,000 entries) is built after ``task_start`` is sent, while the agent starts up,
not at its first call; a line without whitespace around it skips the stdlib ``decode``'s two
scans. Medians of 9 on the final tree, at five moments of one evening: 0.865, 0.887, 0.980,
1.092 and 1.044 s, against 0.465, 0.448, 0.556, 0.657 and 0.567 s for the bare one-CPU driver
(1.66-1.98x): this host's speed moves by a third within an hour, and below 1 s holds only while
it is fast. At the start of the session, at a middle moment: 1.18 s (bare one CPU 0.59 s, 2.02x).
Measured and dropped:

* Forking the child at ``record`` (after the verdict) rather than as the conversation ends: the
  verdict's ~35 ms no longer overlapped; -25 ms instead of -60 ms.
* Loading the report (jinja2 and ``report.html``: ~85 ms of CPU) only once the process is idle,
  instead of on a thread from the first agent on: the conversation is ~30-65 ms shorter (the
  thread holds the GIL at times), the tail ~50-70 ms longer (the parent then loads them); no
  better in 25 alternating runs. An agent that starts in tens of milliseconds leaves no idle gap
  long enough for them.
* Spinning on the answering thread on the other CPU instead of sharing one: 570-680 ms for the
  bare driver's conversation against 410-490 ms sharing one CPU.
* orjson for run.jsonl: 40 against 57 ms for 10,000 events in a tight loop, and ~40 ms to import.

Session 11, where the rest goes (agent's timestamps and CPU, side by side with the bare one-CPU
driver, medians of 9-15): before ``task_start`` trialrun takes ~235-345 ms against ~135-185 (its
imports are ~160-200 ms, a third of it creating 55 dataclasses); the conversation ~375-580
against ~260-320; the tail ~160-230 against ~25. In the conversation the agent's own CPU is the
same (~180-200 ms) and trialrun's side costs ~20 us a message more than the bare driver's (its
answering thread ~50-60 us a message, system calls included; most of a write's wall time is the
agent's turn, which the kernel runs inside it on the shared CPU). The receipt child wrote each
``tool_call`` by walking its data twice (redaction proof, then canonical JSON); ``suite_run`` now
writes that text and the writer proves it clean in one scan (child's work ~20% less), and the
child no longer collects garbage (a collection walked the parent's heap, copying the pages it
touched: the tail ~20 ms shorter). The cassette's index is two containers instead of four
objects a recording (built in ~1 instead of ~4-7 ms, freed in ~0.1 instead of 1-6 ms as the
case ends, ~0.5 us less a call), and difflib is imported only for a miss. The whole run: ~36-62
ms of CPU less and ~2,200 fewer page faults than at the start of the session (alternating runs
of both trees); its wall time moved within the host's noise. Medians of 9: 0.945 s at the
start of the session (bare one CPU 0.545 s, 1.73x); during it 1.007, 1.102, 0.875 and 0.895 s
(1.56-1.74x); on the final tree 1.016 and 0.985 s (0.561 and 0.554 s: 1.81x, 1.78x). The ratio
to the floor moves as much with the host as with the change. Measured and dropped:

* Proving the whole trace clean on its run.jsonl text (encode once, one scan, redact only the
  lines that might hold a secret) instead of walking it: no faster. The scan of 1.6 MB takes
  ~20 ms (its literals start at frequent letters; twenty ``in`` tests take as long), as much as
  the walk with its caches, and the encoding was needed anyway.
* The collector off while a conversation is answered on a thread, its objects frozen after:
  the same CPU time (the conversation allocates little that a collection scans twice).
* Freezing the collector's objects as a conversation ends (fewer pages copied after the fork):
  -8 to -19 ms in two runs of 13-15, within the noise; it would also keep a run's cyclic garbage
  to its end.
* A switch interval of 0.5 ms (the report's warm-up thread hands the GIL back sooner): no
  better. Without resharing the CPU every 0.25 s: the same.

Session 12, the tail (timeline of the run's phases, medians of 7): the receipt child finished
its work ~60 ms after the fork, then waited for the parent to read its ~1.8 MB through a 64 KB
pipe, ~30 turns of the two waking each other (the parent's ``collect`` took ~8 ms); it now
writes to a memory file the parent reads in one call. The report's warm-up thread also imports
what only the tail used (JUnit with ElementTree, the baseline's gates, the receipt's ``aside``,
a codec; ~12 ms the tail waited for). 15 alternating runs: the tail 115 -> 104 ms, the whole
run 636 -> 621 ms, CPU 709 -> 692 ms, ~900 fewer page faults. The host was fast all session
(bare one CPU 0.36 s; trialrun 0.63-0.65 s, 1.74-1.78x). Measured and dropped:

* orjson, to read messages and cassette lines: the stdlib scanner takes ~0.8-1.2 us a line,
  orjson ~0.5-0.6 us, and it reads integers beyond 64 bits as floats, so a guard (a regex for
  19 digits, ~1.5 us) would cost more than it saves.
* orjson, to write run.jsonl: ~3 ms instead of ~28 for 10,000 events when each line is
  appended to one bytearray (kept as 10,000 separate bytes objects, its buffers cost a page
  fault each, ~30 ms: a page fault costs ~2.3 us on these VMs). Not exact: it writes NaN as
  null, a plain Enum as its value (``default=str`` writes its name) and floats below 1e-4 in
  another form, so equal bytes would need a walk of every event first.
* Where the rest goes, in page faults: a deep run takes ~21,000 (the bare driver and its agent
  ~5,000), ~6,200 of them before the first agent starts; ~2,600 are the receipt child's copies
  of the pages it touches.

Issue 29 took out the receipt's forked child (sessions 10 to 12) and the early exit (session
8): the receipt is made by the process that ran the case, and the interpreter's own exit runs
again (~40 ms more after the last line). ``--base 1b5699f``, medians of 9 and 11: 0.678 ->
0.792 s and 0.689 -> 0.704 s, per-round ratios 1.07 and 1.06 (docs/perf.md).

``PYTHONDONTWRITEBYTECODE`` (set on the project's machines) makes every ``trialrun`` start
compile its ~200 modules again (~300 ms); a user's installation has them compiled, so the
benchmark compiles them once before timing.
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import sys
import time
from pathlib import Path
from subprocess import run

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from replay_bench import WORK, write_suite  # noqa: E402


def timed(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> float:
    start = time.perf_counter()
    proc = run(argv, cwd=cwd, capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(
            f"{argv} failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr}"
        )
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument(
        "--base", help="also run trialrun from src/ of this git revision (a row of its own)"
    )
    args = parser.parse_args()

    import trialrun

    compileall.compile_dir(Path(trialrun.__file__).parent, quiet=1)
    WORK.mkdir(exist_ok=True)
    suite = write_suite(WORK, "deep", cases=1, calls=args.calls)
    ours = [
        str(Path(sys.executable).with_name("trialrun")), "run", str(suite), "--mode", "replay",
        "--no-baseline", "--out", str(WORK / "out-deep"),
    ]  # fmt: skip
    bare = [sys.executable, str(BENCH / "deep_bare_driver.py"), str(suite)]
    commands = {
        "trialrun": ours,
        "bare asyncio": bare,
        "bare sync": [*bare, "--sync"],
    }

    envs: dict[str, dict[str, str]] = {}
    if args.base:
        # The base tree's code on the same interpreter, as startup_bench.py does it.
        from startup_bench import CONSOLE_SCRIPT, export_tree

        base_src = export_tree(args.base, WORK / "deep-base")
        compileall.compile_dir(base_src / "trialrun", quiet=1)
        base = f"trialrun {args.base}"
        commands[base] = [sys.executable, "-c", CONSOLE_SCRIPT, *ours[1:]]
        commands[base][-1] = str(WORK / "out-deep-base")
        envs[base] = {**os.environ, "PYTHONPATH": str(base_src)}

    samples: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.repeat):
        for name, argv in commands.items():
            samples[name].append(timed(argv, WORK, envs.get(name)))
    med = {name: statistics.median(values) for name, values in samples.items()}
    print(f"1 case x {args.calls} calls, median of {args.repeat} alternating runs:")
    for name, seconds in med.items():
        print(f"  {name:13s} {seconds:6.3f} s")
    print(
        f"  trialrun / bare asyncio driver  {med['trialrun'] / med['bare asyncio']:.2f}\n"
        f"  trialrun / bare sync driver     {med['trialrun'] / med['bare sync']:.2f}"
        "  (issue 17 bound: <= 1.5, and trialrun < 1 s; issue 29 bound: trialrun <= 3 s)"
    )
    if args.base:
        base = f"trialrun {args.base}"
        ratios = [new / old for new, old in zip(samples["trialrun"], samples[base], strict=True)]
        low, mid, high = statistics.quantiles(ratios, n=4)
        print(f"  trialrun / {base}  {mid:.2f} (quartiles {low:.2f}-{high:.2f}, per round)")


if __name__ == "__main__":
    main()
