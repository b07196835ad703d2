"""tqdm bars and numbers exactly as tqdm writes them read back right.

``format_num`` and ``format_meter`` below re-implement tqdm 4.70's
(tqdm/std.py) for the parts the readers see: numbers in postfixes, the
rate and its unit, counts, the elapsed counter, descriptions. tqdm is no
dependency of this project; where it is installed, the re-implementation
is checked against the real thing first.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dflash_watch.parsers.numbers import parse_clock, parse_number
from dflash_watch.parsers.progress import parse_progress


def format_num(n: float) -> str:
    """tqdm.format_num: ``.3g`` with the exponent's leading zero dropped,
    unless ``str(n)`` is no longer."""
    f = f"{n:.3g}".replace("e+0", "e+").replace("e-0", "e-")
    s = str(n)
    return f if len(f) < len(s) else s


def format_interval(t: float) -> str:
    mins, s = divmod(int(t), 60)
    h, m = divmod(mins, 60)
    return f"{h:d}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


def format_sizeof(num: float) -> str:
    for unit in ["", "k", "M", "G", "T", "P", "E", "Z"]:
        if abs(num) < 999.5:
            if abs(num) < 99.95:
                if abs(num) < 9.995:
                    return f"{num:1.2f}{unit}"
                return f"{num:2.1f}{unit}"
            return f"{num:3.0f}{unit}"
        num /= 1000
    return f"{num:3.1f}Y"


def format_meter(n: int, total: int | None, elapsed: float, unit: str = "it", unit_scale: bool = False,
                 rate: float | None = None, postfix: str = "", prefix: str = "") -> str:
    """tqdm.format_meter's default layout (bar drawn in ASCII, 10 wide)."""
    if total and n >= total + 0.5:
        total = None
    if rate is None and elapsed:
        rate = n / elapsed  # the average speed, as tqdm does
    inv_rate = 1 / rate if rate else None
    rate_noinv = ((format_sizeof(rate) if unit_scale else f"{rate:5.2f}") if rate else "?") + unit + "/s"
    rate_inv = ((format_sizeof(inv_rate) if unit_scale else f"{inv_rate:5.2f}") if inv_rate else "?") + "s/" + unit
    rate_fmt = rate_inv if inv_rate and inv_rate > 1 else rate_noinv
    n_fmt = format_sizeof(n) if unit_scale else str(n)
    total_fmt = (format_sizeof(total) if unit_scale else str(total)) if total is not None else "?"
    postfix = ", " + postfix if postfix else ""
    remaining = (total - n) / rate if rate and total else 0
    remaining_str = format_interval(remaining) if rate else "?"
    l_bar = (prefix if prefix[-2:] == ": " else prefix + ": ") if prefix else ""
    elapsed_str = format_interval(elapsed)
    if total:
        frac = n / total
        filled = int(frac * 10)
        bar = "#" * filled + " " * (10 - filled)
        return f"{l_bar}{frac * 100:3.0f}%|{bar}| {n_fmt}/{total_fmt} [{elapsed_str}<{remaining_str}, {rate_fmt}{postfix}]"
    no_total_prefix = prefix + ": " if prefix else ""  # tqdm checks for ": " only with a total
    return f"{no_total_prefix}{n_fmt}{unit} [{elapsed_str}, {rate_fmt}{postfix}]"


def set_postfix(**kwargs: object) -> str:
    """tqdm.set_postfix's text: sorted keywords, numbers by format_num."""
    parts = []
    for key in sorted(kwargs):
        value = kwargs[key]
        text = format_num(value) if isinstance(value, (int, float)) else str(value)
        parts.append(key + "=" + text.strip())
    return ", ".join(parts)


# -- the re-implementation is tqdm's ---------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.floats(allow_nan=True, allow_infinity=True) | st.integers(-10**12, 10**12))
def test_format_num_is_tqdms(n: float) -> None:
    tqdm = pytest.importorskip("tqdm")
    assert format_num(n) == tqdm.tqdm.format_num(n)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 10**6), st.integers(1, 10**6) | st.none(), st.floats(0, 3 * 86400),
       st.sampled_from(["it", "tok", "samples"]), st.booleans(), st.floats(1e-4, 1e6) | st.none(),
       st.sampled_from(["", "loss=0.5", "loss=2.3, tok_s=2.02e+4"]), st.sampled_from(["", "Epoch 1", "train: "]))
def test_format_meter_is_tqdms(n, total, elapsed, unit, unit_scale, rate, postfix, prefix) -> None:
    tqdm = pytest.importorskip("tqdm")
    real = tqdm.tqdm.format_meter(n, total, elapsed, ncols=None, ascii=" 123456789#", unit=unit,
                                  unit_scale=unit_scale, rate=rate, postfix=postfix, prefix=prefix)
    ours = format_meter(n, total, elapsed, unit, unit_scale, rate, postfix, prefix)
    # The bar characters differ (tqdm draws partial blocks): compare around them.
    if "|" in ours:
        assert real.split("|")[0] == ours.split("|")[0] and real.split("|")[-1] == ours.split("|")[-1]
    else:
        assert real == ours


# -- what the readers make of it ---------------------------------------------------------

SIG = 5e-3  # .3g keeps three significant digits: a relative error of at most 0.5%


@settings(max_examples=400, deadline=None)
@given(st.floats(-1e12, 1e12, allow_nan=False) | st.integers(-10**9, 10**9),
       st.floats(0, 1e9, allow_nan=False))
def test_format_num_round_trip_in_a_postfix(loss: float, tokens: float) -> None:
    """set_postfix(loss=..., tok_s=...) reads back within format_num's rounding."""
    post = set_postfix(loss=loss, tok_s=tokens)
    line = format_meter(450, 1000, 62, postfix=post)
    p = parse_progress(line, 0.0, "x:1")
    assert p is not None, line
    assert p.loss == pytest.approx(loss, rel=SIG, abs=1e-300), line
    assert p.tokens_per_s == pytest.approx(tokens, rel=SIG, abs=1e-300), line
    assert (p.rate, p.rate_unit) == (p.tokens_per_s, "tok/s")


@settings(max_examples=300, deadline=None)
@given(st.floats(-1e300, 1e300))  # .3g of the largest floats rounds past float's range
def test_format_num_reads_as_a_number(n: float) -> None:
    text = format_num(n)
    value = parse_number(text)
    assert value == pytest.approx(n, rel=SIG, abs=1e-300), text


@settings(max_examples=400, deadline=None)
@given(st.integers(0, 10**6), st.integers(1, 10**6) | st.none(), st.integers(0, 30 * 86400),
       st.sampled_from(["it", "tok", "samples"]), st.booleans(), st.floats(1e-3, 1e6) | st.none(),
       st.sampled_from(["", "Epoch 1", "Training", "train: "]))
def test_bars_read_back(n, total, elapsed, unit, unit_scale, rate, prefix) -> None:
    line = format_meter(n, total, elapsed, unit, unit_scale, rate, prefix=prefix)
    p = parse_progress(line, 0.0, "x:1")
    if unit_scale and line == format_meter(n, total, elapsed, unit, False, rate, prefix=prefix):
        unit_scale = False  # "100it [00:00, ?it/s]": scaling changed nothing, so it reads as plain
    if rate is None and elapsed:
        rate = n / elapsed
    if not rate and unit == "it" and unit_scale:
        # A count below 1000 shows unscaled ("100/1.00k"): its step may be read, never a rate.
        assert p is None or (p.rate is None and p.step in (None, n)), line
        return
    if not rate and unit != "it":
        assert p is None, line  # nothing a detector can use: no step, no rate
        return
    assert p is not None, line
    assert p.elapsed_s == float(int(elapsed)), line
    expected_unit = {"it": "it/s", "tok": "tok/s", "samples": "samples/s"}[unit]
    if not rate:  # "?it/s"
        assert (p.rate, p.rate_unit) == (None, None)
    else:
        assert p.rate_unit == expected_unit, line
        # 5.2f keeps 0.005 of a rate of at least 1 (else of its inverse, then
        # over 1 s), format_sizeof three digits: 0.5% either way, and the
        # inverse of a rounded inverse is within the same relative error.
        assert p.rate == pytest.approx(rate, rel=0.0051), line
    if unit == "it" and not unit_scale:
        shown_total = total if total and n < total + 0.5 else None
        assert (p.step, p.total_steps) == (n, shown_total), line
        if rate:
            assert p.step_seconds == pytest.approx(1 / p.rate)
    else:
        assert p.step is None or unit == "it", line
    if unit == "tok" and rate:
        assert p.tokens_per_s == p.rate


@pytest.mark.parametrize("text, seconds", [("05:45", 345.0), ("1:02:03", 3723.0), ("00:00", 0.0),
                                           ("27:46:40", 100000.0), ("5:45", 345.0), ("x", None), ("1:2", None)])
def test_parse_clock(text: str, seconds: float | None) -> None:
    assert parse_clock(text) == seconds


def test_nan_and_inf_read_as_themselves() -> None:
    assert math.isnan(parse_number(format_num(float("nan"))))
    assert parse_number(format_num(float("inf"))) == math.inf


def test_lightning_writes_a_nan_loss_as_nan_dot_zero() -> None:
    """Lightning's TQDMProgressBar postfix reads ``train_loss=nan.0``: a
    NaN loss, not a word (it was dropped, and the NaN never alerted)."""
    import math

    from dflash_watch.parsers.numbers import VALUE
    from dflash_watch.parsers.progress import parse_progress

    assert [VALUE.fullmatch(t)["num"] for t in ("nan.0", "inf.0", "-inf.00", "2.0")] == ["nan", "inf", "-inf", "2.0"]
    assert VALUE.fullmatch("1.0.0") is None and VALUE.fullmatch("nan.5") is None
    bar = "Epoch 0:  64%|######4   | 82/128 [00:08<00:04,  9.70it/s, v_num=0, train_loss=nan.0]"
    p = parse_progress(bar, 100.0, "pl.log:1")
    assert p is not None and p.step == 82 and p.loss is not None and math.isnan(p.loss)
