"""TimeParser: every timestamp style of CONTRACTS section 5, years, zones, cache."""

from __future__ import annotations

from datetime import UTC, datetime, timezone
from zoneinfo import ZoneInfo

import pytest

from dflash_watch.parsers.timestamps import TimeParser

UTC = UTC


def utc(*args: int, micro: int = 0) -> float:
    return datetime(*args, microsecond=micro, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    "line, expected",
    [
        ("2026-11-29T10:00:00 started", utc(2026, 11, 29, 10, 0, 0)),
        ("2026-11-29 10:00:00,123 - INFO - x", utc(2026, 11, 29, 10, 0, 0) + 0.123),
        ("2026-11-29 10:00:00.654321 | INFO", utc(2026, 11, 29, 10, 0, 0) + 0.654321),
        ("2026-11-29T10:00:00Z", utc(2026, 11, 29, 10, 0, 0)),
        ("2026-11-29T10:00:00.5+01:00 x", utc(2026, 11, 29, 9, 0, 0) + 0.5),
        ("2026-11-29T10:00:00-0530 x", utc(2026, 11, 29, 15, 30, 0)),
        ("11/29/2026 10:00:00 - INFO - __main__ - hi", utc(2026, 11, 29, 10, 0, 0)),
        ("10/17/2025 16:31:56 [INFO|DP=0|PP=0|TP=0]: iteration: 1", utc(2025, 10, 17, 16, 31, 56)),
        ("11/29/26 10:00:00 x", utc(2026, 11, 29, 10, 0, 0)),
        ("  [2025-09-11 14:09:46,954794][I][components/metrics:437:log] step", utc(2025, 9, 11, 14, 9, 46) + 0.954794),
        ("   [INFO][2025-09-11 14:09:18.390018] Reading data", utc(2025, 9, 11, 14, 9, 18) + 0.390018),
        ("[default5]:2026-01-02 03:04:05,006 x", utc(2026, 1, 2, 3, 4, 5) + 0.006),
        ("[1,3]<stdout>:2026-01-02 03:04:05 x", utc(2026, 1, 2, 3, 4, 5)),
        ('{"time": 1764410400.25, "gpu": 5}', 1764410400.25),
        ('{"timestamp": 1764410400250, "x": 1}', 1764410400.25),
        ('{"step": 3, "timestamp": "2026-11-29T10:00:00Z"}', utc(2026, 11, 29, 10, 0, 0)),
    ],
)
def test_full_timestamps(line: str, expected: float) -> None:
    assert TimeParser(tz=UTC).parse(line) == pytest.approx(expected, abs=1e-6)


def test_glog_lines_take_the_year_of_the_last_full_timestamp() -> None:
    p = TimeParser(tz=UTC, default_year=2020)
    assert p.parse("2025-05-30 23:00:00 start") == utc(2025, 5, 30, 23, 0, 0)
    assert p.parse("[rank0]:W0531 18:55:20.328000 627698 torch/_dynamo/x.py:1743] hit") == pytest.approx(
        utc(2025, 5, 31, 18, 55, 20) + 0.328
    )
    assert p.parse("W1129 10:00:00.123456 1 x.py:1] y") == pytest.approx(utc(2025, 11, 29, 10, 0, 0) + 0.123456)


def test_glog_three_digit_month_day_and_nanoseconds() -> None:
    p = TimeParser(tz=UTC, default_year=2025)
    value = p.parse("[W911 14:08:52.571468379 OperatorEntry.cpp:218] Warning: x")
    assert value == pytest.approx(utc(2025, 9, 11, 14, 8, 52) + 0.571468379, abs=1e-6)
    assert p.parse("[rank1]:[E1218 20:27:21.426415540 ProcessGroupNCCL.cpp:629] [Rank 1]") == pytest.approx(
        utc(2025, 12, 18, 20, 27, 21) + 0.426415540, abs=1e-6
    )


def test_glog_without_any_year_has_no_time() -> None:
    p = TimeParser(tz=UTC)
    assert p.parse("W1129 10:00:00.123456 1 x.py:1] y") is None
    p.parse("2024-11-01 00:00:00 x")
    assert p.parse("W1129 10:00:00 1 x.py:1] y") == utc(2024, 11, 29, 10, 0, 0)


def test_glog_month_far_from_the_last_one_takes_the_nearer_year() -> None:
    # Consecutive log lines are close in time: Feb 2024 then "Nov" means
    # the November before (3 months), not the one after (9 months).
    p = TimeParser(tz=UTC)
    p.parse("2024-02-01 00:00:00 x")
    assert p.parse("W1129 10:00:00 1 x.py:1] y") == utc(2023, 11, 29, 10, 0, 0)


def test_glog_year_rolls_over_new_year_and_back() -> None:
    p = TimeParser(tz=UTC)
    assert p.parse("2025-12-31 23:59:58 x") == utc(2025, 12, 31, 23, 59, 58)
    assert p.parse("I1231 23:59:59.000000 1 a.py:1] x") == utc(2025, 12, 31, 23, 59, 59)
    assert p.parse("I0101 00:00:01.000000 1 a.py:1] x") == utc(2026, 1, 1, 0, 0, 1)
    assert p.year == 2026
    # A late line from the old year, then the new year again.
    assert p.parse("W1231 23:59:59 1 a.py:1] late") == utc(2025, 12, 31, 23, 59, 59)
    assert p.parse("W0101 00:00:02 1 a.py:1] x") == utc(2026, 1, 1, 0, 0, 2)


def test_default_year_dates_glog_lines_before_any_full_timestamp() -> None:
    assert TimeParser(tz=UTC, default_year=2027).parse("E0102 03:04:05.5 1 x] y") == utc(2027, 1, 2, 3, 4, 5) + 0.5


def test_naive_times_are_local_unless_a_zone_is_given() -> None:
    line = "2026-07-01 12:00:00 x"
    assert TimeParser().parse(line) == datetime(2026, 7, 1, 12, 0, 0).timestamp()
    ny = ZoneInfo("America/New_York")
    assert TimeParser(tz=ny).parse(line) == utc(2026, 7, 1, 16, 0, 0)  # EDT, UTC-4
    assert TimeParser(tz=ny).parse("2026-01-01 12:00:00 x") == utc(2026, 1, 1, 17, 0, 0)  # EST
    # An explicit zone in the text wins over the configured one.
    assert TimeParser(tz=ny).parse("2026-07-01T12:00:00Z") == utc(2026, 7, 1, 12, 0, 0)


@pytest.mark.parametrize(
    "line",
    [
        "", "step 5 | loss 2.3", "2026-13-01 00:00:00 bad month", "2026-02-30 00:00:00 bad day",
        "W1329 10:00:00 bad month", "[rank0]: Traceback (most recent call last):", "12345",
        '{"time": 0.53, "step": 3}', '{"time": "soon"}', "I", "[", "{", "1/2", "W0000 00:00:00",
        "[INFO] no time here", "٢٠٢٦-١١-٢٩ 10:00:00",
    ],
)
def test_lines_without_a_usable_timestamp(line: str) -> None:
    assert TimeParser(tz=UTC, default_year=2026).parse(line) is None


def test_a_date_in_the_middle_of_a_line_is_not_the_line_time() -> None:
    p = TimeParser(tz=UTC)
    assert p.parse("slurmstepd: error: *** STEP 1 ON n1 CANCELLED AT 2021-05-23T08:29:53 ***") is None


def test_repeated_minute_is_converted_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = TimeParser._epoch

    def counting(self: TimeParser, *args: object) -> float:
        calls.append(args)
        return real(self, *args)

    monkeypatch.setattr(TimeParser, "_epoch", counting)
    p = TimeParser(tz=UTC)
    values = [p.parse(f"2026-11-29 10:00:00,{ms:03d} - INFO - x") for ms in range(100)]
    assert len(calls) == 1
    assert values[99] == pytest.approx(utc(2026, 11, 29, 10, 0, 0) + 0.099)
    assert p.parse("2026-11-29 10:00:59,5 - INFO - x") == utc(2026, 11, 29, 10, 0, 59) + 0.5
    assert len(calls) == 1  # another second of the same minute: arithmetic only
    assert p.parse("2026-11-29 10:00:60,000 - INFO - x") is None  # as datetime() says
    assert p.parse("2026-11-29 10:01:00,000 - INFO - x") == utc(2026, 11, 29, 10, 1, 0)
    assert len(calls) == 2
    p.parse("W1129 10:00:01.5 1 x] y")
    p.parse("W1129 10:00:01.6 1 x] y")
    assert len(calls) == 3


def test_minute_cache_answers_as_a_fresh_parser() -> None:
    """The cached fast path (same minute: seconds and fraction added) must
    give exactly what a parser that has seen nothing gives, for stamps with
    and without fractions, zones, odd fraction lengths, second 60 and
    trailing digits, in UTC, the local zone and a fixed offset."""
    import random
    from datetime import timedelta

    rng = random.Random(5)
    for tz in (UTC, None, timezone(timedelta(hours=-7))):
        cached = TimeParser(tz=tz)
        for _ in range(3000):
            line = (
                f"{rng.choice([2024, 2025])}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
                f"{rng.choice([' ', 'T'])}{rng.randint(0, 23):02d}:{rng.choice([0, 1, 59]):02d}:"
                f"{rng.choice(['00', '30', '59', '60', '5x'])}"
                f"{rng.choice(['', ',' + '1' * rng.randint(1, 10), '.123', '.123456', '.'])}"
                f"{rng.choice(['', ' - INFO', 'Z', '+02:00', '5'])} x"
            )
            for _ in range(2):  # the second time through the cache
                assert cached.parse(line) == TimeParser(tz=tz).parse(line), line


@pytest.mark.parametrize(
    "line",
    [
        "11/29/2026 10:00:5",  # one seconds digit: no stamp
        "11/29/2026 10:00:5 x",
        "11/29/2026 10:00:059",  # three: no stamp either
        "11/29/2026 10:00:61",
        "11/29/2026 10:00:07",
        "11/29/2026 10:00:07.5 x",
        "11/29/2026 10:00:07,123456789 x",
        "11/29/2026 10:00:07.1234567890 x",  # ten fraction digits: no fraction
        "11/29/2026 10:00:07. x",
        "11/29/2026 10:00:0\u0663",  # an Arabic-Indic digit is no second
        "1/29/2026  10:00:07.25",
    ],
)
def test_a_us_stamp_in_the_minute_just_read_reads_as_on_its_own(line: str) -> None:
    """``_us`` adds seconds to the minute it read last (no regex), and
    must answer exactly what a parser that never saw that minute answers."""
    warm = TimeParser(tz=UTC)
    warm.parse(line[:16] + ":00 - INFO - before")
    cold = TimeParser(tz=UTC)
    assert warm.parse(line) == cold.parse(line)
    assert warm.year == cold.year or cold.parse(line) is None


@pytest.mark.parametrize(
    "line",
    [
        "2026-11-29 10:00:5",
        "2026-11-29 10:00:5 x",
        "2026-11-29 10:00:07",
        "2026-11-29 10:00:07.5",
        "2026-11-29 10:00:07,123456 msg",
        "2026-11-29 10:00:07Z",
        "2026-11-29 10:00:07+02:00 msg",
        "2026-11-29 10:00:61",
    ],
)
def test_an_iso_stamp_in_the_minute_just_read_reads_as_on_its_own(line: str) -> None:
    """``_iso``'s fast path adds seconds to the minute it read last; a
    one-digit seconds field at the end of a line ("10:00:5") is no stamp to
    the regex, so it must be none after a stamp of that minute too."""
    warm = TimeParser(tz=UTC)
    warm.parse(line[:16] + ":00 - INFO - before")
    cold = TimeParser(tz=UTC)
    assert warm.parse(line) == cold.parse(line)


def test_torch_logs_verbose_and_critical_lines_are_glog_stamps() -> None:
    """``TORCH_LOGS=recompiles`` writes glog's shape with DEBUG as ``V``
    (and CRITICAL as ``C``): its recompile lines took the time of the line
    before them, so 8 recompiles over 3.5 min read as 8 in 0 s."""
    p = TimeParser(tz=UTC, default_year=2026)
    line = "V1205 10:04:00.000000 21372 torch/_dynamo/guards.py:5396] [0/8] [__recompiles] Recompiling function forward"
    assert p.parse(line) == pytest.approx(utc(2026, 12, 5, 10, 4, 0), abs=1e-6)
    critical = p.parse("[rank0]:C1205 10:04:01.500000 1 torch/x.py:1] y")
    assert critical == pytest.approx(utc(2026, 12, 5, 10, 4, 1) + 0.5, abs=1e-6)
    assert TimeParser.stampless(b"V0000 00:00:00.000000 0 x") is False
    assert p.parse("Validation 1205 10:04:00.000000") is None  # a word, not a level letter before the digits
