"""`replay --json` keeps no history for views: the alerts must not change."""

from __future__ import annotations

from pathlib import Path

from dflash_watch.monitor import Monitor
from dflash_watch.replay import replay

ROOT = Path(__file__).resolve().parents[2]
LOG = ROOT / "examples" / "dflash_broken_batching_fx_crash.log"
GPU = ROOT / "examples" / "dflash_broken_batching_fx_crash.gpu.jsonl"


def test_alerts_are_the_same_without_view_history() -> None:
    runs = {}
    for keep in (True, False):
        monitor = Monitor(keep_lines=0, keep_history=keep)
        result = replay([str(LOG)], gpu_samples=[str(GPU)], monitor=monitor)
        runs[keep] = (monitor, [a.to_json() for a in result.alerts])
    (full, with_history), (bare, without) = runs[True], runs[False]
    assert with_history == without and len(without) >= 5
    assert full.throughput.count > 100 and full.gpus.gpus
    assert bare.throughput.count == 0 and bare.gpus.gpus == []
    assert bare.progress_events == full.progress_events


def test_the_cli_replays_json_without_history(monkeypatch) -> None:  # noqa: ANN001
    import argparse
    import io

    from dflash_watch.commands import replay as command

    made = []
    real = Monitor.__init__

    def spy(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003
        made.append(kwargs.get("keep_history", True))
        real(self, *args, **kwargs)

    monkeypatch.setattr(Monitor, "__init__", spy)
    args = argparse.Namespace(
        logs=[str(LOG)], gpu_samples=[], json=True, config=None, baseline=None, tz="UTC", report=False
    )
    out = io.StringIO()
    monkeypatch.setattr("sys.stdout", out)
    assert command.run(args) == 0
    assert made == [False] and out.getvalue().count("\n") == 4  # the log alone: no GPU samples


def test_the_throughput_series_is_the_runs_own_rate_in_its_unit() -> None:
    """An HF Trainer run prints it/s, not tokens: the chart follows that, and
    its end-of-training average is not a point of the curve."""
    from dflash_watch.monitor import Monitor
    from dflash_watch.parsers.events import Progress

    monitor = Monitor()
    monitor.feed_events([Progress(100.0 + i, f"l:{i}", step=i, rate=3.0 + i, rate_unit="it/s") for i in range(5)])
    assert monitor.throughput_unit == "it/s" and monitor.throughput.count == 5
    assert monitor.throughput.last_value == 7.0
    summary = Progress(200.0, "l:9", rate=1.5, rate_unit="samples/s", metrics=(("train_runtime", 99.0),))
    monitor.feed_events([summary])
    assert monitor.throughput_unit == "it/s" and monitor.throughput.count == 5
    # A run that (also) logs tokens/s: the chart is in tok/s from then on,
    # and an eval bar's it/s beside it is not a point of it.
    monitor.feed_events([Progress(300.0, "l:10", step=1, tokens_per_s=21500.0)])
    assert monitor.throughput_unit == "tok/s" and monitor.throughput.count == 1
    monitor.feed_events([Progress(301.0, "l:11", step=3, rate=9.8, rate_unit="it/s")])
    assert monitor.throughput_unit == "tok/s" and monitor.throughput.last_value == 21500.0


def test_the_last_crash_is_the_root_cause_not_its_consequence() -> None:
    """torchrun's report and the siblings' peer errors follow the root cause:
    the job's exit (and a crash loop) must name the root cause."""
    from dflash_watch.monitor import Monitor
    from dflash_watch.parsers.events import Crash

    monitor = Monitor()
    root = Crash(100.0, "l:5", "crash", "cuda_oom", "torch.OutOfMemoryError", "oom", "oom @ a.py:f", rank=3)
    peer = Crash(101.0, "l:9", "crash", "exception", "RuntimeError", "Connection closed by peer", "peer",
                 rank=0, cause="peer_failure")
    monitor.feed_events([root, peer])
    assert monitor.last_crash is root


def _chunks(text: str, sizes: list[int]) -> list[tuple[str, int]]:
    """``text`` cut into pieces of whole lines (line counts from ``sizes``, cycled)."""
    lines = text.splitlines(keepends=True)
    out, i, k = [], 0, 0
    while i < len(lines):
        n = sizes[k % len(sizes)]
        out.append(("".join(lines[i:i + n]), i + 1))
        i, k = i + n, k + 1
    return out


def test_the_views_lines_and_chart_do_not_depend_on_how_the_log_was_cut() -> None:
    """A catch-up feeds chunks far larger than the log view keeps and whole
    batches of rates at once: what the view reads equals one line at a time."""
    from dflash_watch.parsers.events import Progress
    from dflash_watch.replay import log_events

    text = LOG.read_text(encoding="utf-8")
    rates = sum(1 for e in log_events(str(LOG)) if type(e) is Progress and e.tokens_per_s is not None)
    expected = None
    for sizes in ([1], [60], [60, 3, 2], [7, 200, 1, 40], [20_000]):
        monitor = Monitor(keep_lines=50)
        for piece, first in _chunks(text, sizes):
            monitor.feed_text(str(LOG), piece, first, 1.7e9)
        t, lo, hi, mean = monitor.throughput.window(1e9)
        seen = (list(monitor.lines[str(LOG)]), monitor.throughput.count, list(t), list(mean), list(hi))
        if expected is None:
            expected = seen
            assert len(seen[0]) == 50 and seen[0][-1][0] == text.count("\n") and seen[1] == rates > 100
        assert seen == expected, sizes


def test_the_log_views_ring_keeps_a_screenful_of_a_megabyte_line() -> None:
    """2000 lines of 1 MB each (a printed tensor, a tokenizer dump) held whole
    were 2 GB of the dashboard's memory; the view shows a line's start."""
    from dflash_watch.recent_lines import VIEW_LINE_MAX

    m = Monitor()
    big = "x" * (1 << 20)
    m.feed_text("/runs/train.log", f"short\n{big}\n", 1, 1000.0)
    (n1, first), (n2, kept) = m.lines["/runs/train.log"]
    assert (n1, first, n2) == (1, "short", 2)
    assert kept.startswith("x" * VIEW_LINE_MAX) and kept.endswith(f" … ({(1 << 20) - VIEW_LINE_MAX:,} more characters)")
