"""Headless keeps no chart series, and says and exports the same.

``dflash-watch headless`` builds its Monitor with ``keep_charts=False``:
the throughput and loss series keep only their count and latest sample
(``history.LATEST_ONLY``), since nothing draws them there. What headless
does read of them (the unit a rate is in, the latest rate and loss its
gauges export) and every alert must come out as with the dashboard's full
series, on every fixture log and on seeded random logs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dflash_watch.metrics.collector import AlertCounter, MonitorCollector
from dflash_watch.monitor import Monitor
from dflash_watch.replay import replay
from tests.random_logs import random_log

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"


def _fixture_logs() -> list[Path]:
    return sorted(p for p in FIXTURES.rglob("*") if p.suffix in (".log", ".txt"))


def _seen(path: Path, *, keep_charts: bool) -> tuple:
    monitor = Monitor(keep_lines=0, keep_charts=keep_charts)
    result = replay([str(path)], monitor=monitor)
    snap = MonitorCollector(monitor, AlertCounter())._snapshot()
    series = [(s.count, s.last_time, s.last_value) for s in (monitor.throughput, monitor.loss)]
    return [a.to_json() for a in result.alerts], monitor.throughput_unit, series, snap["rate"], snap["unit"], repr(snap["health"])  # (repr: NaN == NaN)


@pytest.mark.parametrize("path", _fixture_logs(), ids=lambda p: str(p.relative_to(FIXTURES)))
def test_headless_without_charts_reads_a_log_as_the_dashboard_does(path: Path) -> None:
    assert _seen(path, keep_charts=False) == _seen(path, keep_charts=True)


@pytest.mark.parametrize("seed", range(6))
def test_headless_without_charts_on_random_logs(seed: int, tmp_path: Path) -> None:
    path = random_log(tmp_path / "random.log", seed)
    charts = _seen(path, keep_charts=True)
    assert charts[2][0][0] > 0  # the log had rates
    assert _seen(path, keep_charts=False) == charts


def test_headless_builds_its_monitor_without_charts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The commands' own Monitors: headless's keeps no chart series, the dashboard's does."""
    import io

    from dflash_watch.cli import build_parser
    from dflash_watch.commands import headless, live_setup
    from dflash_watch.config import ConfigError

    log = tmp_path / "train.log"
    log.write_text("step 1 | loss 2.0 | 1000 tok/s\n")
    built = []

    def spy(args, **kwargs):  # type: ignore[no-untyped-def]
        built.append(live_setup.__dict__["_real_build_live"](args, **kwargs))
        built[-1].close(1.0)
        raise ConfigError("stop here")

    monkeypatch.setitem(live_setup.__dict__, "_real_build_live", live_setup.build_live)
    monkeypatch.setattr(live_setup, "build_live", spy)
    err = io.StringIO()
    assert headless.run(build_parser().parse_args(["headless", "--log", str(log), "--no-gpu"]), io.StringIO(), err) == 2
    assert "stop here" in err.getvalue()
    assert built[0].monitor.throughput._tiers == [] and built[0].monitor.loss._tiers == []
    watch = live_setup.__dict__["_real_build_live"](build_parser().parse_args(["watch", "--log", str(log), "--no-gpu"]))
    try:
        assert len(watch.monitor.throughput._tiers) == 3 and len(watch.monitor.loss._tiers) == 3
    finally:
        watch.close(1.0)
