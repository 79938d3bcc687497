"""Workspace snapshots against shutil.copytree, on a workspace of many small files.

    python bench/snapshot_bench.py [--files 2000] [--repeat 3]

Writes ``--files`` small files into 40 folders, then times ``shutil.copytree`` of it and
``Workspace.snapshot()`` of it (best of ``--repeat``, alternating so both see the same machine
noise) and prints their ratio. A snapshot copies what copytree copies plus a map of the files,
so the target is at most three times copytree.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from trialrun.attempt.snapshot import Workspace

TARGET_RATIO = 3.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp) / "many"
        for n in range(args.files):
            path = root / f"d{n % 40}" / f"f{n}.txt"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"content {n}\n")
        workspace = Workspace(root)
        copytree_s = snapshot_s = float("inf")
        for attempt in range(args.repeat):
            started = time.perf_counter()
            shutil.copytree(root, Path(temp) / f"copy{attempt}")
            copytree_s = min(copytree_s, time.perf_counter() - started)

            started = time.perf_counter()
            snapshot = workspace.snapshot()
            snapshot_s = min(snapshot_s, time.perf_counter() - started)
            snapshot.discard()
    ratio = snapshot_s / copytree_s
    verdict = "ok" if ratio <= TARGET_RATIO else "OVER TARGET"
    print(
        f"{args.files} files: copytree {copytree_s * 1000:.1f} ms, "
        f"snapshot {snapshot_s * 1000:.1f} ms, ratio {ratio:.2f} (target <= {TARGET_RATIO}) "
        f"{verdict}"
    )


if __name__ == "__main__":
    main()
