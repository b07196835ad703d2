"""Every state of a bar redrawn with '\\r', read alike live and in replay; and
the notice for a Lightning run whose bar leaves nothing in the log."""

from __future__ import annotations

import doctest
import random

import pytest

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


def _bar_states(rng: random.Random) -> str:
    """One line of many tqdm states, as a bar written to a file is: a
    counter that crosses digit widths (the shape changes), every rate
    format (it/s, s/it, ?it/s, 0.00it/s, k-scaled), postfixes with a loss
    or tok/s (nan and inf among them), redraws of the same state, blank
    states, HF's dict glued after a state, an eval bar's own shape, an
    epoch bar that starts again."""
    total = rng.choice((50, 999, 1200, 100000))
    n = rng.randrange(0, 40)
    out = []
    for _ in range(rng.randrange(16, 90)):
        n += rng.choice((0, 1, 1, 1, 7))
        if rng.random() < 0.03:
            n = 0  # the next epoch's bar on the same line
        pct = min(100, n * 100 // total)
        rate = rng.choice(("2.50it/s", "1.20s/it", "?it/s", "0.00it/s", "1.2kit/s", f"{rng.uniform(1, 9):.2f}it/s"))
        post = rng.choice(("", ", loss=2.31", ", loss=nan", f", loss={rng.uniform(1, 3):.3f}, tok/s={rng.randrange(9000, 9999)}",
                           ", tok/s=inf", ", lr=2e-05"))
        state = f"{pct:3d}%|{'#' * (pct // 10):<10}| {n}/{total} [00:{n % 60:02d}<01:{(total - n) % 60:02d}, {rate}{post}]"
        r = rng.random()
        if r < 0.05:
            state = " "  # a blank state
        elif r < 0.08:
            state = f"Evaluating: {n}it [00:0{n % 10}, 3.1it/s]"
        elif r < 0.10:
            state += "{'loss': 2.1, 'learning_rate': 2e-05, 'epoch': 0.5}"
        out.append(state)
        if rng.random() < 0.1:
            out.append(state)  # drawn again unchanged
    return "\r".join(out)


@pytest.mark.parametrize("seed", range(80))
def test_many_states_read_as_columns_are_the_states_read_one_by_one(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``redraw_states`` of a line of many states reads the states of each
    shape as columns (``COLUMNS_MIN``): the same values, every bit, as
    ``progress_values`` of each state, in the same order, deduplicated alike."""
    rng = random.Random(seed)
    line = _bar_states(rng)
    rank = rng.choice((None, 3))
    read: list[int] = []
    real = redraws_module.value_columns

    def counted(fast: object, lines: list[str]) -> object:
        columns = real(fast, lines)  # type: ignore[arg-type]
        if columns is not None:
            read.append(len(lines))
        return columns

    monkeypatch.setattr(redraws_module, "value_columns", counted)
    columns = [repr(v) for v in redraws_module.redraw_states(line, rank)]
    monkeypatch.setattr(redraws_module, "COLUMNS_MIN", 10**9)
    one_by_one = [repr(v) for v in redraws_module.redraw_states(line, rank)]
    assert columns == one_by_one
    if seed < 10:
        assert read, "no state was read as columns"


def test_a_line_of_few_states_is_read_state_by_state(monkeypatch: pytest.MonkeyPatch) -> None:
    """Columns cost more than they save on a line of a few states (a bar
    redrawn once): those are read one by one."""
    monkeypatch.setattr(redraws_module, "value_columns", lambda *_: pytest.fail("read as columns"))
    line = "\r".join(f" 1%|| {n}/100 [00:01<01:39, 1.00it/s]" for n in range(1, redraws_module.COLUMNS_MIN))
    assert [s[0] for s in redraw_values(line)] == list(range(1, redraws_module.COLUMNS_MIN))
