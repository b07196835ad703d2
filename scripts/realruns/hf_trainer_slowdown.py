"""HF Trainer run whose throughput falls mid-run (default tqdm + dict lines).

Run as a user would, output captured whole:
    python scripts/realruns/hf_trainer_slowdown.py > hf_trainer_slowdown.log 2>&1

After ``--drop-step`` a TrainerCallback sleeps each step for ``--factor - 1``
times the mean step time it measured before, so tqdm's it/s falls to about
1/factor of the healthy rate whatever the machine's speed.

The default run spans ~30 s of tqdm elapsed (12 s at ~25 it/s, 18 s at
~8 it/s), so LABELS.json replays it with throughput windows scaled down.
For the default DetectorConfig (60 s warm-up, 300 s learning, 90 s
sustained) use ``--steps 15000 --drop-step 12000``: ~14 minutes, ~0.7 MB.
"""

from __future__ import annotations

import argparse
import tempfile
import time

from _tiny import TokenDataset, seed_everything, tiny_llama, trainer_args
from transformers import Trainer, TrainerCallback


class SlowDown(TrainerCallback):
    """A stand-in for broken bucketing / a slow data loader after step N."""

    def __init__(self, drop_step: int, factor: float, pace: float) -> None:
        self.drop_step, self.factor, self.pace = drop_step, factor, pace
        self.t_begin: float | None = None
        self.t_last: float | None = None
        self.mean: float | None = None

    def on_step_begin(self, args, state, control, **kw):
        self.t_begin = time.perf_counter()

    def on_step_end(self, args, state, control, **kw):
        took = time.perf_counter() - (self.t_begin or time.perf_counter())
        # A steady healthy pace, so the baseline is not the shared CPU's noise.
        if took < self.pace:
            time.sleep(self.pace - took)
            took = self.pace
        if state.global_step < self.drop_step:
            self.mean = took if self.mean is None else 0.9 * self.mean + 0.1 * took
        else:
            time.sleep((self.factor - 1.0) * (self.mean or took))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=450)
    ap.add_argument("--drop-step", type=int, default=300)
    ap.add_argument("--factor", type=float, default=3.0)
    ap.add_argument("--pace", type=float, default=0.04, help="healthy seconds per step (at least)")
    a = ap.parse_args()
    seed_everything(0)
    with tempfile.TemporaryDirectory() as out:
        args = trainer_args(out, a.steps, logging_steps=25)
        trainer = Trainer(
            model=tiny_llama(),
            args=args,
            train_dataset=TokenDataset(a.steps * 8),
            callbacks=[SlowDown(a.drop_step, a.factor, a.pace)],
        )
        trainer.train()


if __name__ == "__main__":
    main()
