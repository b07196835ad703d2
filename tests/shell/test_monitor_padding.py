"""The Monitor on a log that prints padding and probe files: padding,
alloc_thrash and the recompile rate fire and resolve through ``replay``,
and the run's figures (padding efficiency, rates, latest probe per rank)
are there for the views and for ``b``'s baseline."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from dflash_watch.baseline.store import Baseline
from dflash_watch.detectors.config import DetectorConfig
from dflash_watch.monitor import Monitor
from dflash_watch.replay import replay

T0 = datetime(2026, 11, 29, 10, 0, 0, tzinfo=UTC).timestamp()
STEP_S = 5.0
STEPS = 1440  # two hours


def _eff(i: int) -> float:
    """93% for 40 min, 41% for 40 min (broken batching), 93% again."""
    return 0.41 if 480 <= i < 960 else 0.93


def _write_run(tmp_path: Path, *, probe_padding: bool, standalone: bool = False) -> tuple[Path, list[Path]]:
    log = tmp_path / "train.log"
    lines = []
    for i in range(STEPS):
        stamp = datetime.fromtimestamp(T0 + STEP_S * i, UTC).strftime("%Y-%m-%d %H:%M:%S")
        if standalone:  # an HF callback's own dict beside the step line
            lines.append(f"{stamp} step {i} | loss 2.31 | tok/s 21500\n")
            lines.append(f"{stamp} {{'pad_eff': {_eff(i):.3f}, 'epoch': {i / STEPS:.3f}}}\n")
        else:
            lines.append(f"{stamp} step {i} | loss 2.31 | tok/s 21500 | pad_eff {_eff(i):.3f}\n")
        if i % 97 == 0:
            lines.append(f"{stamp} INFO saving nothing in particular\n")
    log.write_text("".join(lines), encoding="utf-8")
    files = []
    for rank in (0, 1):
        retries = 0
        out = []
        for i in range(STEPS):
            # Rank 1 thrashes from 20 to 50 minutes: a retry every other step.
            if rank == 1 and 240 <= i < 600 and i % 2 == 0:
                retries += 1
            line = {"time": T0 + STEP_S * i + 0.01 * rank, "rank": rank, "step": i, "alloc_retries": retries,
                    "recompiles": min(i, 10)}
            if probe_padding:
                line |= {"tokens": int(49152 * _eff(i)), "padded_tokens": 49152}
            out.append(json.dumps(line) + "\n")
        path = tmp_path / f"dflash-probe-rank{rank}.jsonl"
        path.write_text("".join(out), encoding="utf-8")
        files.append(path)
    return log, files


def _monitor(baseline: Baseline | None = None) -> Monitor:
    return Monitor(detector_config=DetectorConfig(tz="UTC"), baseline=baseline, tz=UTC, keep_lines=0)


@pytest.mark.parametrize("standalone", [False, True], ids=["on the step line", "a line of its own"])
def test_padding_from_the_log_and_thrash_from_probes_fire_and_resolve(
    tmp_path: Path, standalone: bool
) -> None:
    log, probe_files = _write_run(tmp_path, probe_padding=False, standalone=standalone)
    monitor = _monitor(Baseline(21500.0, {"padding_efficiency": 0.93}))
    result = replay([str(log)], probes=[str(p) for p in probe_files], monitor=monitor, tz=UTC)
    got = [(a.detector, a.kind, a.state, round(a.time - T0)) for a in result.alerts]
    padding = [a for a in result.alerts if a.detector == "padding"]
    thrash = [a for a in result.alerts if a.detector == "alloc_thrash"]
    assert [a.state for a in padding] == ["firing", "resolved"], got
    assert 2400 <= padding[0].time - T0 <= 2400 + 60 and 4800 <= padding[1].time - T0 <= 4800 + 120
    assert padding[0].source.startswith("train.log:") and padding[0].evidence["source"] == "log"
    assert padding[0].evidence["baseline"] == 0.93
    assert [a.state for a in thrash] == ["firing", "resolved"], got
    assert 1200 <= thrash[0].time - T0 <= 1260 and thrash[0].evidence["rank"] == 1
    assert thrash[0].source == "dflash-probe-rank1.jsonl" or thrash[0].source.startswith("dflash-probe-rank1")
    # Ten recompiles in the first steps are warm-up: no rate alert.
    assert not [a for a in result.alerts if a.detector == "recompile"], got
    # The figures the views and the metrics read.
    assert abs(monitor.padding_efficiency - 0.93) < 1e-6
    assert monitor.alloc_retries_per_hour == 0.0  # no retry in the last window
    assert monitor.recompiles_per_hour == 0.0
    latest = monitor.probes.by_rank()
    assert sorted(latest) == [0, 1] and latest[1].step == STEPS - 1 and monitor.probe_samples == 2 * STEPS


def test_probe_padding_wins_and_b_records_the_figures(tmp_path: Path) -> None:
    log, probe_files = _write_run(tmp_path, probe_padding=True)
    monitor = _monitor()  # no baseline: the 70% floor
    result = replay([str(log)], probes=[str(p) for p in probe_files], monitor=monitor, tz=UTC)
    padding = [a for a in result.alerts if a.detector == "padding"]
    assert [(a.state, a.evidence["source"]) for a in padding] == [("firing", "probe"), ("resolved", "probe")]
    assert padding[0].evidence["ranks"] == [0, 1] and "below the 70% floor" in padding[0].message
    saved = monitor.capture_baseline(window_s=600.0)
    assert saved is not None
    assert abs(saved.extra["padding_efficiency"] - 0.93) < 0.005
    assert saved.extra["recompiles_per_hour"] == 0.0 and saved.extra["alloc_retries_per_hour"] == 0.0
    # `b`: the rest of the session is judged against the new reference at once.
    monitor.set_baseline(Baseline(21500.0, {"padding_efficiency": 0.999}))
    assert abs(monitor.detectors.get("padding").threshold() - 0.899) < 1e-9
    # An older baseline file without the key: the floor again.
    monitor.set_baseline(Baseline(21500.0, {}))
    assert monitor.detectors.get("padding").threshold() == DetectorConfig().padding_floor


def test_a_run_without_padding_or_probes_has_no_figures(tmp_path: Path) -> None:
    log = tmp_path / "plain.log"
    log.write_text("".join(f"2026-11-29 10:00:{i:02d} step {i} | loss 2.0 | tok/s 21500\n" for i in range(50)))
    monitor = _monitor()
    replay([str(log)], monitor=monitor, tz=UTC)
    assert monitor.padding_efficiency is None and monitor.alloc_retries_per_hour is None
    assert monitor.recompiles_per_hour is None and len(monitor.probes) == 0
    saved = monitor.capture_baseline()
    figures = {"padding_efficiency", "alloc_retries_per_hour", "recompiles_per_hour"}
    assert saved is not None and not figures & set(saved.extra)
