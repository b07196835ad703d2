"""Padding efficiency from the lines training logs print, through the real stream.

Each form is written into a log of 300 timestamped lines (so the stream's
column reading takes it, as on a real run), read by ``LogStream`` both
fast and line by line, and turned into ``PaddingReport``s by
``parsers.padding``.
"""

from __future__ import annotations

import pytest

from dflash_watch.parsers.events import PaddingReport, Progress
from dflash_watch.parsers.padding import padding_from_metrics, padding_report
from dflash_watch.parsers.stream import LogStream

FORMS = [
    # (line after the timestamp, with {e} the efficiency 0..1), how it states it
    ("step {i} | loss 2.31 | pad_eff {e:.3f}", "efficiency"),
    ("step {i} loss=2.31 pad_eff={e:.3f} lr=3e-4", "efficiency ="),
    ("step {i}: loss 2.31 padding_efficiency: {p:.1f}%", "percent"),
    ("iter {i} loss 2.31 padding_ratio {r:.3f}", "ratio"),
    ("step {i} | loss 2.31 | num_padding_tokens: {pad} | num_tokens: 20000", "count"),
    ("{{'loss': 2.31, 'pad_eff': {e:.3f}, 'epoch': 0.5}}", "HF dict"),
    ('{{"step": {i}, "loss": 2.31, "train/padding_efficiency": {e:.3f}}}', "JSON line"),
]


def _log(form: str, n: int = 300) -> tuple[str, list[float]]:
    lines, effs = [], []
    for i in range(n):
        e = 0.93 if i < n // 2 else 0.41
        e = round(e + (i % 7) * 0.001, 3)
        stamp = f"2026-11-29 10:{i // 60:02d}:{i % 60:02d},000"
        pad = round(20000 * (1 - e))
        lines.append(f"{stamp} {form.format(i=i, e=e, p=100 * e, r=1 - e, pad=pad)}\n")
        effs.append(e)
    return "".join(lines), effs


@pytest.mark.parametrize("form,how", FORMS, ids=[h for _, h in FORMS])
def test_each_form_is_read_the_same_fast_and_line_by_line(form: str, how: str) -> None:
    text, expected = _log(form)
    for fast in (True, False):
        stream = LogStream("train.log", fast=fast, replay=True)
        events = stream.feed(text, 1, 0.0) + stream.flush(0.0)
        progress = [e for e in events if type(e) is Progress]
        reports = [r for r in map(padding_report, progress) if r is not None]
        assert len(reports) == len(expected), (how, fast)
        for report, want in zip(reports, expected):
            assert abs(report.efficiency - want) < 1e-3, (how, fast, report)
        assert reports[0].source == "train.log:1" and reports[-1].source == f"train.log:{len(expected)}"


def test_rank_prefixed_lines_keep_their_rank() -> None:
    stream = LogStream("train.log", replay=True)
    text = "".join(f"[rank3]: 2026-11-29 10:00:{i:02d} step {i} loss 2.0 pad_eff 0.5\n" for i in range(5))
    reports = [padding_report(e) for e in stream.feed(text, 1, 0.0) if type(e) is Progress]
    assert [r.rank for r in reports] == [3] * 5 and all(r.efficiency == 0.5 for r in reports)


@pytest.mark.parametrize(
    "metrics",
    [
        (("loss", 2.0), ("grad_norm", 1.0), ("lr", 3e-4)),
        (("pad_eff", 250.0),),  # not a fraction, not a percentage
        (("pad_eff", float("nan")),),
        (("num_padding_tokens", 100.0),),  # a count without the tokens it is of
    ],
)
def test_numbers_that_say_nothing_about_padding_are_not_a_report(metrics) -> None:
    assert padding_from_metrics(metrics) is None


def test_a_padding_count_larger_than_the_token_count_is_of_real_tokens() -> None:
    # 3000 real tokens and 1000 of padding: 75%, however the pair is named.
    assert padding_from_metrics((("num_padding_tokens", 1000.0), ("ntokens", 4000.0))) == 0.75
    assert padding_from_metrics((("pad_tokens", 3000.0), ("num_tokens", 1000.0))) == 0.25


STANDALONE = [
    # Lines no progress reader takes: the stream reads them as PaddingReports.
    ("{{'pad_eff': {e:.3f}, 'epoch': 0.5}}", "HF callback dict"),
    ("INFO pad_eff {e:.3f}", "bare"),
    ("INFO padding efficiency: {p:.1f}%", "words, percent"),
    ('{{"padding_ratio": {r:.3f}}}', "JSON ratio"),
]


@pytest.mark.parametrize("form,how", STANDALONE, ids=[h for _, h in STANDALONE])
def test_lines_that_state_only_padding_are_reports_in_the_stream(form: str, how: str) -> None:
    text, expected = _log(form, n=60)
    # Step lines between them, and a tokenizer warning that names padding.
    lines = text.splitlines(keepends=True)
    mixed = []
    for i, line in enumerate(lines):
        mixed.append(line)
        mixed.append(f"{line[:23]} step {i} | loss 2.0 | tok/s 21500\n")
        if i == 3:
            mixed.append(f"{line[:23]} WARNING tokenizer padding_side='right' for 2 models\n")
    for fast in (True, False):
        stream = LogStream("train.log", fast=fast, replay=True)
        events = stream.feed("".join(mixed), 1, 0.0) + stream.flush(0.0)
        reports = [e for e in events if isinstance(e, PaddingReport)]
        assert len(reports) == len(expected), (how, fast, reports[:3])
        for report, want in zip(reports, expected):
            assert abs(report.efficiency - want) < 1e-3
        assert reports[1].source == "train.log:3" and reports[1].time == events[2].time - 0.0
        assert len([e for e in events if type(e) is Progress]) == len(expected)
        times = [e.time for e in events]
        assert times == sorted(times)


def test_a_standalone_line_keeps_its_rank_and_its_stamp() -> None:
    stream = LogStream("train.log", replay=True)
    text = "[rank5]: 2026-11-29 10:00:07 {'pad_eff': 0.4, 'epoch': 1.0}\n"
    (report,) = [e for e in stream.feed(text, 1, 0.0) + stream.flush(0.0) if isinstance(e, PaddingReport)]
    assert report.rank == 5 and report.efficiency == 0.4 and report.source == "train.log:1"
    assert report.time == stream.last_time
