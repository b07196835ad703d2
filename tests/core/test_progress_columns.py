"""Every way of reading a line gives the same values, rates included.

The general runner (``progress_run.run``) is the reference; the fast plan
of a shape (``progress_fast.run_fast``) and the column reading of many
lines of one shape (``progress_columns.value_columns``) must give exactly
its values -- ``rate``, ``rate_unit``, ``elapsed_s`` and
``tokens_per_sample`` as much as the old fields -- for every digit
pattern of every line of the rate table. (The stream's own end-to-end
comparison is tests/core/test_stream_columns.py.)
"""

from __future__ import annotations

import random
from datetime import UTC

from hypothesis import given, settings
from hypothesis import strategies as st

from dflash_watch.parsers.progress import (
    _PLANS,
    column_plan,
    line_shape,
    progress_columns,
    progress_values,
    value_columns,
)
from dflash_watch.parsers.progress.fast import run_fast
from dflash_watch.parsers.progress.run import run
from tests.core.test_progress_rates import TABLE

LINES = [line for line, _ in TABLE] + [
    "2025-11-29 10:00:05,123 step 12/900 | loss 2.0 | samples/s: 100.5 | dt: 5ms | lr 1.5e-04",
    "2025-11-29 10:00:05,123 step 12/900 | loss 2.0 | 100.5 samples/s",
    "2025-11-29 10:00:05,123 step 12/900 | loss 2.0 | dt: 5ms | grad_norm 0.25",
    "2025-11-29 10:00:05,123 step 12/900 | loss 2.0 | 1234.5 ms/iteration",
    "2025-11-29 10:00:05,123 step 12/900 | loss 2.0 | tokens/s: 100.5 | step_time: 1.5s",
]
# tqdm bars of iterations: a fast plan and columns of their own (count,
# total, shown rate turned over for s/it, SI scale, ``?it/s``, the clock).
BARS = [
    "Training:   0%|          | 1/500000 [01:01<40:00, 2.9it/s, loss=2.329, tok/s=21333]",
    " 73%|\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u258e  | 2082/2850 [3:17:53<1:04:53,  5.07s/it]",
    "  0%|          | 0/950 [00:00<?, ?it/s]",
    "Epoch 1:  10%|#         | 10/100 [00:01<00:09, 1.23kit/s, loss=0.5, v_num=1]",
    "Epoch 1:  10%|#         | 10/0 [00:01<00:09, 0.00it/s, loss=0.5]",
]
LINES += BARS
# The lines whose shapes have column plans (the last five before the bars, and the bars).
COLUMN_LINES = LINES[-10:]


def variant(line: str, rnd: random.Random) -> str:
    return "".join(rnd.choice("0123456789") if c.isdigit() else c for c in line)


@given(st.sampled_from(LINES), st.randoms(use_true_random=False))
@settings(max_examples=300, deadline=None)
def test_fast_plans_answer_as_the_general_runner(line: str, rnd: random.Random) -> None:
    progress_values(line)  # plans the shape
    rank_at, ops, fast = _PLANS[line_shape(line)]
    other = variant(line, rnd)
    want = run(ops, other, None, rank_at) if ops else None
    assert repr(progress_values(other)) == repr(want)  # repr: NaN equals NaN
    if fast is not None:
        assert repr(run_fast(fast, ops, other, None, rank_at)) == repr(want)


def test_the_rate_shapes_have_fast_plans() -> None:
    """Else the test above would compare the general runner with itself."""
    for line in COLUMN_LINES:
        assert column_plan(line, line_shape(line)) is not None, line


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(COLUMN_LINES), st.randoms(use_true_random=False))
def test_value_columns_answer_as_the_fast_plan_line_by_line(line: str, rnd: random.Random) -> None:
    shape = line_shape(line)
    fast = column_plan(line, shape)
    rank_at, ops, _ = _PLANS[shape]
    lines = [variant(line, rnd) for _ in range(40)]
    columns = value_columns(fast, lines)
    if columns is None:  # a value check fails on some line: the stream reads them one by one
        assert any(_leaves_fast(fast, x) for x in lines)
        return
    rows = zip(*(c if isinstance(c, list) else [next(c) for _ in lines] for c in columns))
    for row, x in zip(rows, lines):
        steps, totals, tokens, losses, metrics, seconds, rate, unit, elapsed = row
        got = (steps, totals, tokens, losses, None, metrics, seconds, rate, unit, elapsed)
        assert repr(got) == repr(run_fast(fast, ops, x, None, rank_at)), x
    old = progress_columns(fast, lines)  # the stream's first face: the first six columns
    assert old is not None and len(old) == 6
    assert repr([c if isinstance(c, list) else None for c in old]) == repr(
        [c if isinstance(c, list) else None for c in columns[:6]])


def _leaves_fast(fast, line: str) -> bool:
    """Whether ``run_fast`` would hand ``line`` to ``run`` (a value check fails)."""
    import math

    cut = fast.cut(line)
    for index, scale in ((fast.tokens, fast.tokens_scale), (fast.samples, fast.samples_scale)):
        if index >= 0:
            value = float(cut[index]) * scale
            if not (value >= 0 and value != math.inf):
                return True
    if fast.seconds >= 0:
        value = float(cut[fast.seconds]) * fast.seconds_scale * fast.seconds_unit
        if not (value >= 0 and value != math.inf):
            return True
    if fast.rate >= 0:
        value = float(cut[fast.rate]) * fast.rate_scale
        if not (value >= 0 and value != math.inf):
            return True
    if fast.step >= 0 and not fast.step_is_int:
        value = float(cut[fast.step])
        if not (math.isfinite(value) and value == int(value)):
            return True
    return False


def test_rates_of_columns() -> None:
    base = "2025-11-29 10:00:05,123 step 12/900 | loss 2.0 | samples/s: 100.5 | dt: 5ms | lr 1.5e-04"
    fast = column_plan(base, line_shape(base))
    lines = [base, base.replace("100.5", "250.0"), base.replace("dt: 5ms", "dt: 0ms")]
    steps, totals, tokens, losses, metrics, seconds, rates, units, elapsed = value_columns(fast, lines)
    assert rates == [100.5, 250.0, 100.5] and list(zip(units, range(3))) == [("samples/s", 0), ("samples/s", 1),
                                                                            ("samples/s", 2)]
    assert seconds == [0.005, 0.005, 0.0]
    assert metrics[0] == (("samples/s", 100.5), ("lr", 1.5e-4))
    only_dt = "2025-11-29 10:00:05,123 step 12/900 | loss 2.0 | dt: 5ms"
    fast = column_plan(only_dt, line_shape(only_dt))
    *_, rates, units, _ = value_columns(fast, [only_dt, only_dt.replace("5ms", "0ms")])
    assert rates == [1 / 0.005, None] and units == ["it/s", None]


def test_the_stream_reads_the_rate_table_alike_in_columns_and_line_by_line() -> None:
    """Lines of the table behind ISO stamps (column lanes where their shape
    has a fast plan), between noise: the stream's column reading and its
    per-line reference give the same events, rates and counters included."""

    from dflash_watch.parsers.stream import LogStream

    rnd = random.Random(11)
    out = []
    for i in range(600):
        ts = f"2025-11-29 10:{i // 60 % 60:02d}:{i % 60:02d},{rnd.randrange(1000):03d}"
        if i % 7 == 6:
            out.append(f"{ts} - INFO - data - loaded shard {i}")
        else:
            line = variant(rnd.choice(LINES), rnd)
            out.append(f"{ts} {line}" if rnd.random() < 0.8 else line)
    text = "\n".join(out) + "\n"

    def replay(fast: bool) -> list[str]:
        stream = LogStream("t.log", tz=UTC, default_year=2025, fast=fast)
        events = stream.feed(text, 1, 0.0) + stream.flush(0.0)
        return [repr(e) for e in events]

    got, want = replay(True), replay(False)
    assert got == want
    assert sum("rate_unit='samples/s'" in e for e in want) > 20  # the new fields really are there
    assert sum("elapsed_s=None" not in e for e in want if e.startswith("Progress(")) > 20
