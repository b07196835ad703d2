"""A skipped-iterations counter the log writes as nan, inf or below zero is read as absent.

Megatron's ``number of skipped iterations: N`` and DeepSpeed's cumulative
``skipped=N`` count fp16 overflows. A log that writes ``nan`` there (a
formatting bug, a corrupted line) made ``int(nan)`` raise inside the loss
detector: replay ended with a traceback. Such a counter now says nothing:
the overflow lines since the previous report count instead, as for a
report without one.
"""

from __future__ import annotations

import datetime
import math
from pathlib import Path

import pytest

from dflash_watch.detectors.loss_robust import ScaleWatch
from dflash_watch.replay import replay


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_non_finite_per_interval_counter_counts_the_overflow_lines(bad: float) -> None:
    watch = ScaleWatch(window=50, floor=1.0)
    watch.overflow(65536.0, 32768.0)
    assert watch.report(10, bad, None, 32768.0)
    assert watch.total == 1 and watch.ledger.skipped == 1  # the overflow line's one, not nan's


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_a_non_finite_cumulative_counter_is_skipped_and_the_next_one_counts_from_the_last_good(bad: float) -> None:
    watch = ScaleWatch(window=50, floor=1.0)
    watch.report(10, None, 2.0, None)
    watch.report(11, None, bad, None)
    watch.report(12, None, 5.0, None)
    assert watch.total == 3  # 5 - 2: the bad report between changed nothing


def test_a_negative_counter_counts_nothing() -> None:
    watch = ScaleWatch(window=50, floor=1.0)
    watch.report(10, -3.0, None, None)
    assert watch.total == 0 and watch.ledger.skipped == 0


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_replay_of_megatron_and_deepspeed_lines_with_such_counters_ends_cleanly(value: str, tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    lines = []
    for i in range(1, 40):
        skipped = value if i % 7 == 0 else "0"
        lines.append(f"2026-11-29 10:00:{i:02d} - INFO - iteration {i}/100 | lm loss: 3.2 | "
                     f"number of skipped iterations: {skipped} | loss scale: 65536.0")
        lines.append(f"[2026-11-29 10:01:{i:02d},000] [INFO] [logging.py:96:log_dist] [Rank 0] step={i}, "
                     f"skipped={value if i % 5 == 0 else i // 10}, lr=[0.001], mom=[(0.9, 0.999)]")
    log.write_text("\n".join(lines) + "\n")
    result = replay([str(log)], tz=datetime.UTC)
    assert result.monitor.progress_events > 0
