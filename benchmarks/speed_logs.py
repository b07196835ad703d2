"""The test logs of issue 20, written on demand (never committed: 100+ MB).

Three shapes, each a plausible training log of US-format stamps
(``11/29/2026 10:00:00``, Python logging's as HF scripts print it):

* ``progress`` -- the issue's log: 30% progress (stamped step lines with
  Ktok/s, tqdm bars with a tok/s postfix, some redrawn with '\\r'), the rest
  data-loader lines, glog warnings, NCCL chatter and a few tracebacks;
* ``quiet`` -- quiet and data-heavy: 3% progress, long data-loader lines;
* ``ranks`` -- many ranks: 64 ranks' ``[rankN]:`` prefixed step lines
  (torchrun's ``--tee``), 40% progress;
* ``degraded`` -- the progress shape whose rate falls to a fifth halfway
  (our first user's 21.5 to 4.3 Ktok/s) and stays there: the drop fires
  and stays open (after each relaunch, it is sustained and fires again);
* ``nan`` -- the progress shape whose loss and grad norm turn NaN halfway
  and stay NaN (fp16 weights gone bad, the run going on for hours): the
  NaN alert fires once and its episode stays open to the end;
* ``legacy`` -- the earlier benchmark log (ISO stamps, 8% step lines, eval
  bars redrawn with '\\r', dynamo recompile warnings), which
  ``bench_replay.py --legacy`` times at two lengths.

    python benchmarks/speed_logs.py progress 1200000 /tmp/progress.log

The generator is seeded: one (shape, lines) gives one file.
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

SHAPES = ("quiet", "progress", "ranks", "degraded", "nan", "legacy")

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


def write_log(path: Path | str, n_lines: int, shape: str = "progress", seed: int = 1, bar: str = "\u2588") -> int:
    """Writes ``n_lines`` lines of ``shape`` to ``path``; returns the lines written.

    ``bar`` is the legacy shape's tqdm bar character ('#' for an ASCII bar).
    """
    if shape not in SHAPES:
        raise ValueError(f"shape must be one of {SHAPES}")
    if shape == "legacy":
        return _write_legacy(path, n_lines, seed, bar)
    rng = random.Random(seed)
    p_progress = {"quiet": 0.03, "progress": 0.30, "ranks": 0.40, "degraded": 0.30, "nan": 0.30}[shape]
    slow_from = n_lines // 2 if shape == "degraded" else n_lines + 1
    nan_from = n_lines // 2 if shape == "nan" else n_lines + 1
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
                if written >= slow_from:
                    tps *= 0.2
                if shape == "ranks":
                    rank = rng.randrange(64)
                    buf.append(
                        f"[rank{rank}]:{stamp} - INFO - train - step {step // 64}/80000 | loss {2.3 + rng.random():.4f}"
                        f" | {tps:.1f} Ktok/s | lr 2.0e-04\n"
                    )
                elif r < p_progress * 0.66:
                    # (the same draws either way: the lines before are the progress shape's)
                    loss, grad = f"{2.3 + rng.random():.4f}", f"{rng.uniform(0.5, 1.5):.3f}"
                    if written >= nan_from:
                        loss = grad = "nan"
                    buf.append(
                        f"{stamp} - INFO - __main__ - step {step}/500000 | loss {loss} | "
                        f"grad_norm {grad} | {tps:.1f} Ktok/s | lr 2.0e-04\n"
                    )
                else:
                    bar_i += 1
                    pct = bar_i * 100 // 500000
                    fill = "\u2588" * (pct // 10)
                    draw = rng.random()
                    loss = f"{2.3 + draw:.3f}" if written < nan_from else "nan"
                    post = f"{bar_i}/500000 [01:{bar_i % 60:02d}<40:00, 2.9it/s, loss={loss}, tok/s={tps * 1000:.0f}]"
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


LEGACY_TRACEBACK = """\
Traceback (most recent call last):
  File "/opt/dflash/train.py", line 412, in <module>
    main()
  File "/opt/dflash/train.py", line 398, in main
    trainer.train_step(batch)
  File "/opt/dflash/trainer.py", line 221, in train_step
    loss = self.model(**batch).loss
RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!
"""

RECOMPILE = (
    "[rank{r}]:W1129 {hms}.123000 4242 torch/_dynamo/convert_frame.py:1016] [0/8] torch._dynamo hit config.recompile_limit (8)\n"
    "[rank{r}]:W1129 {hms}.123000 4242 torch/_dynamo/convert_frame.py:1016] [0/8]    function: 'forward' (/opt/dflash/model.py:88)\n"
    "[rank{r}]:W1129 {hms}.123000 4242 torch/_dynamo/convert_frame.py:1016] [0/8]    last reason: 0/7: L['x'].size()[1] == 512\n"
)


def _write_legacy(path: Path | str, n_lines: int, seed: int, bar: str) -> int:
    """The earlier ISO-stamped log (``bench_replay.py --legacy``): 8% step lines, eval bars redrawn with '\\r'."""
    rng = random.Random(seed)
    t0 = 1_764_410_400  # 2025-11-29 10:00 UTC
    written = 0
    step = 0
    with open(path, "w", encoding="utf-8", newline="") as fh:
        buf: list[str] = []
        while written < n_lines:
            t = t0 + written // 20  # ~20 lines per second of run time
            stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t)) + f",{rng.randrange(1000):03d}"
            r = rng.random()
            if r < 0.08:
                step += 1
                tps = 21500 * (1 + rng.uniform(-0.05, 0.05))
                buf.append(
                    f"{stamp} - INFO - dflash.train - step {step}/500000 | loss {2.3 + rng.random():.4f} | "
                    f"acc_len 3.4 | {tps / 1000:.1f} Ktok/s | pad_eff 0.93 | lr 2.0e-04\n"
                )
                written += 1
            elif r < 0.10:
                redraws = "".join(
                    f"\rEvaluating: {p:3d}%|{bar * (p // 10):<10}| {p}/100 [00:{p % 60:02d}<00:10, 9.8it/s]" for p in range(0, 101, 20)
                )
                buf.append(redraws + "\n")
                written += 1
            elif r < 0.12:
                buf.append(f"[rank{rng.randrange(8)}]:[W1129 10:00:00.000000000 ProcessGroupNCCL.cpp:4561] NCCL INFO Channel 00/32 : 0[0] -> 1[1] via P2P/IPC\n")
                written += 1
            elif r < 0.1203:
                buf.append(LEGACY_TRACEBACK)
                written += LEGACY_TRACEBACK.count("\n")
            elif r < 0.1205:
                hms = time.strftime("%H:%M:%S", time.gmtime(t))
                text = RECOMPILE.format(r=rng.randrange(8), hms=hms)
                buf.append(text)
                written += text.count("\n")
            else:
                buf.append(
                    f"{stamp} - INFO - dflash.data - loaded shard {rng.randrange(10**6)} with "
                    f"{rng.randrange(10**5)} samples from /data/shards/part-{rng.randrange(9999):04d}.arrow\n"
                )
                written += 1
            if len(buf) >= 10000:
                fh.write("".join(buf))
                buf.clear()
        fh.write("".join(buf))
    return written


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: speed_logs.py {quiet|progress|ranks|degraded|nan|legacy} LINES OUT")
    print(write_log(sys.argv[3], int(sys.argv[2]), sys.argv[1]))
