"""Writes an fp16 run's log in DeepSpeed's or Megatron's own line formats.

Python logging with the projects' own formats: DeepSpeed's logger
(``[%(asctime)s] [%(levelname)s] [%(filename)s:%(lineno)d:%(funcName)s]
%(message)s``, its loss scaler's ``[deepspeed] OVERFLOW! Rank 0 Skipping
step. Attempted loss scale: X, reducing to Y`` and ``log_dist``'s ``[Rank 0]
step=N, skipped=M, lr=[...], mom=[...]``), or Megatron's ``training_log``
string (`` [date] iteration N/ T | ... | loss scale: S | grad norm: G |
number of skipped iterations: K | number of nan iterations: 0 |``, the
counters per log interval). The dynamic scaler is simulated: it halves on
an overflow (down to a floor of 1) and doubles after ``window`` clean steps.

``--mode storm``: fp16 warm-up halvings, a healthy stretch, then every step
overflows for a while (the scale falls to 1), then it recovers.
``--mode healthy``: the warm-up halvings, then one overflow every 300 steps.
Times are simulated (1 s a step from a fixed start) so the log is the same
on every run; ``--sleep`` slows the writing for live use.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time

START = 1796119200.0  # 2026-12-01 UTC, a fixed clock for the recorded fixtures


class _SimClock(logging.Filter):
    """Stamps each record with the simulated time instead of the wall clock."""

    def __init__(self) -> None:
        super().__init__()
        self.now = START

    def filter(self, record: logging.LogRecord) -> bool:
        record.created = self.now
        record.msecs = (self.now % 1) * 1000
        return True


class Scaler:
    def __init__(self, scale: float, window: int) -> None:
        self.scale, self.window, self.clean = scale, window, 0

    def update_scale(self, overflow: bool, log: logging.Logger) -> None:
        # DeepSpeed's DynamicLossScaler.update_scale logs from here (loss_scaler.py).
        if overflow:
            prev, self.scale = self.scale, max(1.0, self.scale / 2)
            log.info(f"[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: {prev:g}, reducing to {self.scale:g}")
            self.clean = 0
        else:
            self.clean += 1
            if self.clean % self.window == 0:
                self.scale *= 2


def log_dist(log: logging.Logger, step: int, skipped: int, lr: float) -> None:
    log.info(f"[Rank 0] step={step}, skipped={skipped}, lr=[{lr}], mom=[(0.9, 0.999)]")


def overflows(mode: str, steps: int, warmup: int) -> list[bool]:
    out = []
    for i in range(steps):
        if i < warmup:
            out.append(True)
        elif mode == "storm" and steps // 3 <= i < steps // 3 + steps // 5:
            out.append(True)
        else:
            out.append(i % 300 == 150)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--format", choices=("deepspeed", "megatron"), required=True)
    ap.add_argument("--mode", choices=("storm", "healthy"), required=True)
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--sleep", type=float, default=0.0)
    args = ap.parse_args()
    clock = _SimClock()
    handler = logging.StreamHandler(sys.stdout)
    handler.addFilter(clock)
    if args.format == "deepspeed":
        handler.setFormatter(logging.Formatter("[%(asctime)s] [%(levelname)s] [%(filename)s:%(lineno)d:%(funcName)s] %(message)s"))
        log = logging.getLogger("DeepSpeed")
        scaler, warmup = Scaler(2.0**16, 1000), 6
    else:
        handler.setFormatter(logging.Formatter("%(message)s"))
        log = logging.getLogger("megatron.training")
        scaler, warmup = Scaler(2.0**32, 1000), 16
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    skipped = interval_skipped = 0
    loss = 10.8
    for i, overflow in enumerate(overflows(args.mode, args.steps, warmup), start=1):
        clock.now = START + i
        if args.format == "deepspeed":
            scaler.update_scale(overflow, log)
        else:
            scaler.scale = max(1.0, scaler.scale / 2) if overflow else scaler.scale
        skipped += overflow
        interval_skipped += overflow
        loss = max(2.0, loss * 0.99) if not overflow else loss
        if args.format == "deepspeed" and i % 10 == 0:
            log_dist(log, i, skipped, 1e-4)
        if args.format == "megatron" and i % 10 == 0:
            stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(clock.now))
            log.info(
                f" [{stamp}] iteration {i:8d}/{args.steps:8d} | consumed samples: {i * 512:12d} | "
                f"elapsed time per iteration (ms): 1000.0 | learning rate: {1e-4:.6E} | global batch size: {512:5d} | "
                f"lm loss: {loss:.6E} | loss scale: {scaler.scale:.1f} | grad norm: {1.234:.3f} | "
                f"number of skipped iterations: {interval_skipped:3d} | number of nan iterations: {0:3d} |"
            )
            interval_skipped = 0
        if args.sleep:
            time.sleep(args.sleep)
    return 0


if __name__ == "__main__":
    sys.exit(main())
