"""The test logs of issue 20, written on demand (never committed: 100+ MB).

Three shapes, each a plausible training log of US-format stamps
(``11/29/2026 10:00:00``, Python logging's as HF scripts print it):

* ``progress`` -- the issue's log: 30% progress (stamped step lines with
  Ktok/s, tqdm bars with a tok/s postfix, some redrawn with '\\r'), the rest
  data-loader lines, glog warnings, NCCL chatter and a few tracebacks;
* ``quiet`` -- quiet and data-heavy: 3% progress, long data-loader lines;
* ``ranks`` -- many ranks: 64 ranks' ``[rankN]:`` prefixed step lines
  (torchrun's ``--tee``), 40% progress.

    python benchmarks/speed_logs.py progress 1200000 /tmp/progress.log

The generator is seeded: one (shape, lines) gives one file.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

SHAPES = ("quiet", "progress", "ranks")

TRACEBACK = """\
Traceback (most recent call last):
  File "/opt/dflash/train.py", line 412, in <module>
    main()
  File "/opt/dflash/train.py", line 398, in main
    batch = next(loader)
  File "/opt/dflash/data.py", line 88, in __next__
    return self._fetch()
ConnectionResetError: [Errno 104] Connection reset by peer
"""


def _stamp(t: int) -> str:
    # 11/29/2026 10:00:00 onwards; no calendar needed within a few days.
    day, rest = divmod(t, 86400)
    h, rest = divmod(rest, 3600)
    m, s = divmod(rest, 60)
    return f"11/{29 + day:02d}/2026 {h:02d}:{m:02d}:{s:02d}"


def write_log(path: Path | str, n_lines: int, shape: str = "progress", seed: int = 1) -> int:
    """Writes ``n_lines`` lines of ``shape`` to ``path``; returns the lines written."""
    if shape not in SHAPES:
        raise ValueError(f"shape must be one of {SHAPES}")
    rng = random.Random(seed)
    p_progress = {"quiet": 0.03, "progress": 0.30, "ranks": 0.40}[shape]
    written = 0
    step = 0
    bar_i = 0
    t = 36000  # 10:00:00
    with open(path, "w", encoding="utf-8", newline="") as fh:
        buf: list[str] = []
        while written < n_lines:
            if written % 25 == 0:
                t += 1
            stamp = _stamp(t)
            r = rng.random()
            if r < p_progress:
                step += 1
                tps = 21.5 * (1 + rng.uniform(-0.05, 0.05))
                if shape == "ranks":
                    rank = rng.randrange(64)
                    buf.append(
                        f"[rank{rank}]:{stamp} - INFO - train - step {step // 64}/80000 | loss {2.3 + rng.random():.4f}"
                        f" | {tps:.1f} Ktok/s | lr 2.0e-04\n"
                    )
                elif r < p_progress * 0.66:
                    buf.append(
                        f"{stamp} - INFO - __main__ - step {step}/500000 | loss {2.3 + rng.random():.4f} | "
                        f"grad_norm {rng.uniform(0.5, 1.5):.3f} | {tps:.1f} Ktok/s | lr 2.0e-04\n"
                    )
                else:
                    bar_i += 1
                    pct = bar_i * 100 // 500000
                    fill = "\u2588" * (pct // 10)
                    post = f"{bar_i}/500000 [01:{bar_i % 60:02d}<40:00, 2.9it/s, loss={2.3 + rng.random():.3f}, tok/s={tps * 1000:.0f}]"
                    if rng.random() < 0.2:
                        buf.append(f"Training: {pct:3d}%|{fill:<10}| {post}\rTraining: {pct:3d}%|{fill:<10}| {post}\n")
                    else:
                        buf.append(f"Training: {pct:3d}%|{fill:<10}| {post}\n")
                written += 1
                continue
            r2 = rng.random()
            if r2 < 0.04:
                buf.append(
                    f"W1129 {stamp[11:]}.{rng.randrange(10**6):06d} {4242 + rng.randrange(8)} "
                    f"dataloader.cc:{rng.randrange(900)}] slow worker {rng.randrange(16)}: queue depth 0\n"
                )
            elif r2 < 0.06:
                buf.append(f"NCCL INFO Channel {rng.randrange(32):02d}/32 : 0[0] -> 1[1] via P2P/IPC\n")
            elif r2 < 0.0603:
                buf.append(TRACEBACK)
                written += TRACEBACK.count("\n") - 1
            else:
                pad = " " * rng.randrange(40) if shape == "quiet" else ""
                buf.append(
                    f"{stamp} - INFO - data.loader - loaded shard {rng.randrange(10**6)} with "
                    f"{rng.randrange(10**5)} samples from /data/shards/part-{rng.randrange(9999):04d}.arrow{pad}\n"
                )
            written += 1
            if len(buf) >= 10000:
                fh.write("".join(buf))
                buf.clear()
        fh.write("".join(buf))
    return written


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: speed_logs.py {quiet|progress|ranks} LINES OUT")
    print(write_log(sys.argv[3], int(sys.argv[2]), sys.argv[1]))
