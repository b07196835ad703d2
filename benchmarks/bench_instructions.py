"""Instructions of one replay, against another checkout, counted exactly.

This machine's speed swings by 10% from minute to minute, so a change that
saves 1-3% cannot be told from noise by timing it (``bench_replay.py``,
``bench_paired.py``). Valgrind's callgrind counts the instructions a
process runs: the same code on the same input gives the same count (with
the same hash seed), whatever else the machine does. Each figure here is
the count of one in-process ``replay --json`` of a log of the speed shapes
(``speed_logs.py``): a process replaying it twice less one replaying it
once, so start-up and first-use costs cancel out.

    python benchmarks/bench_instructions.py --reference /path/to/other/checkout [--lines 120000] [--shapes progress,ranks]

The reference is another tree of this project with its kernels built
(``git worktree add`` or ``git archive | tar -x``, then
``python setup.py build_ext --inplace`` there). Each count takes about
half a minute per 100k lines (callgrind runs the code ~50x slower).
Caveat: callgrind's CPU lacks some of the host's vector units, so
Hyperscan's share is larger under it than on the machine; the ratio of the
two trees is the figure, not the absolute counts.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = (
    "import contextlib, io, sys\n"
    "from dflash_watch.cli import main\n"
    "for _ in range(int(sys.argv[1])):\n"
    "    with contextlib.redirect_stdout(io.StringIO()):\n"
    "        main(['replay', '--json', '--tz', 'UTC', sys.argv[2]])\n"
)


def instructions(tree: Path, log: Path, times: int) -> int:
    """Instructions callgrind counted for a process that replays ``log`` ``times`` times from ``tree``."""
    env = dict(os.environ, PYTHONHASHSEED="0", PYTHONPATH=str(tree))
    out = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, "-c", CHILD, str(times),
         str(log)],
        cwd=tree, env=env, capture_output=True, text=True, check=False,
    )
    found = re.search(r"Collected : (\d+)", out.stderr)
    if out.returncode != 0 or found is None:
        sys.exit(f"callgrind failed in {tree} ({out.returncode}): {out.stderr.strip()[-400:]}")
    return int(found.group(1))


def one_replay(tree: Path, log: Path) -> int:
    return instructions(tree, log, 2) - instructions(tree, log, 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reference", required=True, type=Path, help="another checkout of this project, kernels built")
    ap.add_argument("--lines", type=int, default=120_000)
    ap.add_argument("--shapes", default="progress,ranks", help="comma-separated shapes of speed_logs.py")
    args = ap.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed (apt-get install -y valgrind): no count to make")
    reference = args.reference.resolve()
    if not (reference / "dflash_watch").is_dir():
        sys.exit(f"{reference}: not a checkout of this project")
    for tree in (ROOT, reference):
        # (a tree without its kernels replays in pure Python: a ratio of two paths, not two trees)
        if not list((tree / "parsers").glob("_native*.so")):
            sys.exit(f"{tree}: its kernels are not built (python setup.py build_ext --inplace there)")
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from speed_logs import write_log

    print(f"{'shape':>9} {'lines':>8} {'this tree':>14} {'reference':>14} {'ratio':>7}")
    with tempfile.TemporaryDirectory(prefix="dflash-instructions-") as tmp:
        for shape in args.shapes.split(","):
            log = Path(tmp) / f"{shape}.log"
            lines = write_log(log, args.lines, shape)
            mine, theirs = one_replay(ROOT, log), one_replay(reference, log)
            print(f"{shape:>9} {lines:>8} {mine:>14,} {theirs:>14,} {mine / theirs:>7.4f}", flush=True)
    print("instructions of one replay (two in one process less one), PYTHONHASHSEED=0; ratio: this tree / reference")


if __name__ == "__main__":
    main()
