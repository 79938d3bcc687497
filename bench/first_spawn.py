"""Runs a ``trialrun`` command line and stops the process as it spawns its first agent.

    python bench/first_spawn.py run bench/.work/deep --mode replay --no-baseline --out /tmp/x
    valgrind --tool=callgrind --callgrind-out-file=/tmp/x.cg python bench/first_spawn.py run ...

Prints the process CPU time and the modules loaded at that moment (the run's agent spawner,
``seal_spawner.py``, starts with the first agent and starts every agent; an agent started
directly is recognized by ``agent.py`` in its command, as in the suites of
``bench/replay_bench.py``), then leaves with
``os._exit``: valgrind's instruction count is then what the run costs before its conversation can
start. Other processes it starts first (``git``) are spawned as usual. Set ``PYTHONPATH`` to
another tree's ``src`` to measure that tree, alternating the two (the machines are noisy), and
compile both trees' bytecode first where ``PYTHONDONTWRITEBYTECODE`` is set.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Any

_execute_child = subprocess.Popen._execute_child  # type: ignore[attr-defined]


def _stop_at_agent(self: subprocess.Popen[Any], args: Any, *rest: Any, **options: Any) -> Any:
    if any("agent.py" in str(arg) or "seal_spawner.py" in str(arg) for arg in args):
        cpu_ms = time.process_time() * 1000
        print(f"first agent: {cpu_ms:.1f} ms of CPU, {len(sys.modules)} modules", file=sys.stderr)
        sys.stderr.flush()
        os._exit(0)
    return _execute_child(self, args, *rest, **options)


subprocess.Popen._execute_child = _stop_at_agent  # type: ignore[attr-defined]

if __name__ == "__main__":
    from trialrun.cli import main

    sys.argv[0] = "trialrun"
    main()
