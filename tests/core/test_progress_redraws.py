"""Every state of a bar redrawn with '\\r', read alike live and in replay; and
the notice for a Lightning run whose bar leaves nothing in the log."""

from __future__ import annotations

import doctest

import dflash_watch.parsers.progress.hints as hints_module
import dflash_watch.parsers.progress.redraws as redraws_module
from dflash_watch.parsers.events import Progress
from dflash_watch.parsers.progress.hints import LIGHTNING_HINT, SilentBarHint
from dflash_watch.parsers.progress.redraws import VALUES, redraw_times, redraw_values
from dflash_watch.parsers.stream import LogStream

RATE = VALUES.index("rate")


def test_doctests() -> None:
    for module in (redraws_module, hints_module):
        assert doctest.testmod(module).failed == 0


def test_every_state_in_order_one_per_step_rank_from_the_line_start() -> None:
    line = (
        "[rank2]: \r 1%|| 1/100 [00:01<01:39, 1.00it/s]\r 1%|| 1/100 [00:01<01:39, 1.10it/s]"
        "\r 2%|| 2/100 [00:02<01:38, 1.00it/s]"
    )
    states = redraw_values(line)
    assert [(s[0], s[4], s[RATE]) for s in states] == [(1, 2, 1.1), (2, 2, 1.0)]


def test_times_follow_the_bars_counter_never_before_the_last_look_nor_after_now() -> None:
    assert redraw_times([10.0, 12.0, 13.0], since=None, now=50.0) == [47.0, 49.0, 50.0]
    assert redraw_times([10.0, 12.0, 13.0], since=48.0, now=50.0) == [48.0, 49.0, 50.0]
    # A counter that went back (the next epoch's bar on the same line).
    assert redraw_times([29.0, 30.0, 1.0, 2.0], since=40.0, now=50.0) == [48.0, 49.0, 49.0, 50.0]
    # No counter: spread since the last look, over 2 s at most; first look: now.
    assert redraw_times([None] * 4, since=40.0, now=50.0) == [48.5, 49.0, 49.5, 50.0]
    assert redraw_times([None, None], since=None, now=50.0) == [50.0, 50.0]
    assert redraw_times([], since=1.0, now=2.0) == []


RICH_LOG = (
    "GPU available: False, used: False\n"
    "TPU available: False, using: 0 TPU cores\n"
    "Total estimated model params size (MB): 0.000                                   \n"
    "`Trainer.fit` stopped: `max_epochs=2` reached.\n"
    "Epoch 1/1  \u2501\u2501\u2501\u2501\u2501 16/16 0:00:00 \u2022 0:00:00 96.04it/s loss: 0.639\n"
)


def test_a_stream_knows_lightning_and_whether_progress_came() -> None:
    stream = LogStream("train.log", replay=True)
    stream.feed(RICH_LOG, 1, 1000.0)
    # The Rich bar's one line at the end shows a loss, no step or rate read.
    assert stream.hint.framework == "lightning" and not stream.hint.done
    tqdm = LogStream("train.log", replay=True)
    bar = "\rEpoch 1: 100%|##| 16/16 [00:00<00:00, 132.08it/s, loss=1.0]"
    events = tqdm.feed(RICH_LOG.replace("Epoch 1/1", bar), 1, 0.0)
    assert any(type(e) is Progress for e in events) and tqdm.hint.done
    plain = LogStream("train.log")
    plain.feed("GPU available: True\nstep 1 | loss 2.0\n", 1, 0.0)  # a script's own print
    assert plain.hint.framework is None and plain.hint.due(1e9, 0.0) is None


def test_the_hint_is_due_once_after_the_wait_on_the_askers_clock() -> None:
    hint = SilentBarHint()
    assert hint.due(5.0, 3.0) is None  # nothing seen: never
    hint.look("LOCAL_RANK: 0 - CUDA_VISIBLE_DEVICES: [0,1]\n")
    assert [hint.due(t, 3.0) for t in (10.0, 12.0)] == [None, None]
    assert hint.due(13.0, 3.0) == LIGHTNING_HINT
    assert hint.due(100.0, 3.0) is None
    late = SilentBarHint()
    late.look("GPU available: True (cuda), used: True\n")
    late.due(0.0, 3.0)
    late.progressed()
    assert late.due(100.0, 3.0) is None
