"""format_rate shows any unit the detectors judge, as their messages do."""

from __future__ import annotations

from dflash_watch.detectors.config import fmt_rate
from dflash_watch.report import format_rate


def test_tokens_keep_their_prefixes():
    assert format_rate(21500.0) == "21.5 Ktok/s" == format_rate(21500.0, "tok/s")
    assert format_rate(1_092_168.0) == "1.09 Mtok/s"
    assert format_rate(812.0) == "812 tok/s"


def test_other_units_read_plainly():
    assert format_rate(1.234, "it/s") == "1.2 it/s"
    assert format_rate(0.35, "it/s") == "0.35 it/s"
    assert format_rate(250.0, "samples/s") == "250 samples/s"
    assert format_rate(123456.0, "samples/s") == "123K samples/s"
    assert fmt_rate(3.1, "it/s") == "3.1 it/s"


def test_none_and_non_finite_are_a_dash():
    assert format_rate(None) == "-" and format_rate(None, "it/s") == "-"
    assert format_rate(float("nan"), "it/s") == "-"
    assert format_rate(5.0, None) == "5 tok/s"
