"""The column reading's loops in C give what their one-value forms give.

``parsers.progress.columns`` checks and converts whole columns with ``map``
in C (``_rates_ok``, ``_clock_column``, ``_scaled``); ``parsers.clock.at_time``
rebuilds a Progress positionally. Each is compared here with the one-value
form (``run_fast``'s, ``dataclasses.replace``), on the values where they
could part: NaN, infinities, -0.0, tiny negatives, clocks with and without
hours.
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import fields, replace

from dflash_watch.parsers.clock import at_time
from dflash_watch.parsers.events import Progress
from dflash_watch.parsers.progress.columns import _clock_column, _rates_ok, _scaled
from dflash_watch.parsers.progress.fast import INF, clock_seconds

EDGES = [0.0, -0.0, 1.0, -1.0, -1e-300, 1e-300, 1e308, -1e308, math.nan, INF, -INF, 2.9, 0.345]


def _rate_ok(value: float) -> bool:
    """``run_fast``'s check of a rate."""
    return value >= 0 and value != INF


def test_rates_ok_is_run_fasts_check_on_every_value() -> None:
    for n in (1, 2, 3):
        for values in itertools.product(EDGES, repeat=n):
            column = list(values)
            assert _rates_ok(column) == all(map(_rate_ok, column)), column


def test_scaled_is_run_fasts_product() -> None:
    texts = ["2.9", "nan", "inf", "-inf", "-0.0", "1e400", "3.25", "0.1"]
    for scale in (1.0, 1000.0, 1e-3, 0.1, 1e6):
        got = _scaled(list(map(float, texts)), scale)  # (the column read, then scaled)
        want = [float(t) * scale for t in texts]
        assert list(map(repr, got)) == list(map(repr, want))


def test_clock_column_is_clock_seconds_of_every_line() -> None:
    rnd = random.Random(3)
    for width in (2, 3):
        parts = [[rnd.randrange(100) for _ in range(50)] for _ in range(width)]
        got = _clock_column(parts)
        want = [clock_seconds(tuple(line)) for line in zip(*parts)]
        assert list(map(repr, got)) == list(map(repr, want))
        assert all(type(v) is float for v in got)


def test_at_time_is_replace_of_time_and_clocked() -> None:
    event = Progress(
        1.5, "x:1", 3, 50, 2.0, math.nan, 4, (("lr", 1.0),), 0.3, False, 3.0, "it/s", 61.0,
    )
    assert [f.name for f in fields(Progress)][-4:] == ["clocked", "rate", "rate_unit", "elapsed_s"]
    for clocked in (None, True, False):
        got = at_time(event, 9.0, clocked)
        want = replace(event, time=9.0) if clocked is None else replace(event, time=9.0, clocked=clocked)
        assert repr(got) == repr(want)
        assert type(got) is Progress
