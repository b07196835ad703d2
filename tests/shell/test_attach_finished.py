"""Attaching to a run that already ended: its crash is an alert while the
watcher runs, not only when it stops.

Someone comes back to a run that died overnight and starts the watcher on
its log. The log is read on its own clock (a catch-up, as replay reads
it), the traceback that ended it is complete once the log is found quiet,
and the crash must come out then, within seconds, at the real speed of the
live clock. ``test_live_equals_replay`` cannot see this: its clock is held
still and the session is stopped when the log is quiet, which releases
whatever is held. A log whose opening lines (a tqdm bar before the first
record) were dated on the wall clock held its crash until the data's
clock reached the wall clock (``parsers/clock.py``, ``at_first_reading``).

For every log fixture and shared real-world log: the firing crash alerts
(``crash``, ``fx_tracing``) of a live session attached to the finished
file, before it stops, are replay's (none where replay has none).
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from fake_nvml import FakeNvml

from dflash_watch.detectors.base import Alert
from dflash_watch.live import LiveSession
from dflash_watch.monitor import Monitor
from dflash_watch.parsers.events import GpuSample
from dflash_watch.replay import replay
from dflash_watch.sources.samples import format_sample_line
from tests.shell.live_read import fixture_logs

CRASHES = frozenset({"crash", "fx_tracing"})
# A loaded two-core machine reads a fixture and finds it quiet within a
# second or two; the crash follows at once.
WAIT_S = 10.0
# With no crash to wait for: long enough that a spurious one would be out.
QUIET_LOOK_S = 1.0


def _crashes(alerts: list[Alert]) -> list[tuple[str, str | None]]:
    return sorted((a.detector, a.kind) for a in alerts if a.detector in CRASHES and a.state == "firing")


@pytest.mark.slow
@pytest.mark.parametrize("log", fixture_logs(), ids=lambda p: p.name[:48])
def test_a_finished_logs_crash_is_an_alert_before_the_watcher_stops(log: Path) -> None:
    expected = _crashes(replay([str(log)]).alerts)
    monitor = Monitor(keep_lines=0)
    got: list[Alert] = []
    monitor.subscribe(got.append)
    session = LiveSession(monitor, logs=(str(log),), use_nvml=False)
    with session:
        deadline = time.monotonic() + (WAIT_S if expected else QUIET_LOOK_S)
        while time.monotonic() < deadline and _crashes(got) != expected:
            time.sleep(0.05)
        if not expected:
            time.sleep(max(0.0, deadline - time.monotonic()))
        live = _crashes(got)  # before the session stops (a stop releases what is held)
    assert live == expected


# With NVML, every log; with a sample file too, logs whose crash comes out
# at the quiet (a traceback that ended the file).
SAMPLED = ("02_olora_llama2", "06_chatglm2", "hf_trainer_crash.log")
SAMPLED_CASES = [pytest.param(log, "nvml", id=f"{log.name[:48]}-nvml") for log in fixture_logs()] + [
    pytest.param(log, "sample_file", id=f"{log.name[:48]}-sample_file")
    for log in fixture_logs() if log.name.startswith(SAMPLED)
]


@pytest.mark.slow
@pytest.mark.parametrize(("fixture", "source"), SAMPLED_CASES)
def test_a_finished_logs_crash_is_an_alert_while_the_gpus_are_sampled(
    fixture: Path, source: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The same, with the GPUs sampled every 50 ms beside it: by NVML (the
    fake driver) or read from a GPU sample file another process appends to
    (``--samples``). Each sample is put on the live clock, and the log's
    clock is months or a year from this machine's. A sample must not make
    the clock forget that the caught-up log was written at its mtime (the
    file is made 2 hours old here): before, one between the catch-up and
    the quiet made the crash that came out at the quiet take the clock back
    by the whole silence, and its alert was held that long. Nor may a
    sample taken before the log's first text put the Monitor on this
    machine's clock (02_olora: none of its 4 crashes came)."""
    log = tmp_path / fixture.name
    log.write_bytes(fixture.read_bytes())
    os.utime(log, (time.time() - 7200, time.time() - 7200))
    replayed = replay([str(log)])  # (a log without stamps is dated by its mtime)
    expected = _crashes(replayed.alerts)
    monitor = Monitor(keep_lines=0)
    got: list[Alert] = []
    monitor.subscribe(got.append)
    samples = tmp_path / "gpu.jsonl"
    stop = threading.Event()

    def write_samples() -> None:
        with open(samples, "a", encoding="utf-8") as fh:
            while not stop.wait(0.05):
                fh.write(format_sample_line(GpuSample(time.time(), 0, 60 << 30, 80 << 30)) + "\n")
                fh.flush()

    if source == "nvml":
        FakeNvml.eight().install(monkeypatch)
        session = LiveSession(monitor, logs=(str(log),), use_nvml=True, gpu_interval_s=0.05)
    else:
        session = LiveSession(monitor, logs=(str(log),), use_nvml=False, samples_file=str(samples))
    writer = threading.Thread(target=write_samples, daemon=True)
    writer.start()
    try:
        last = replayed.monitor.now
        assert last is not None
        with session:
            start = time.monotonic()
            deadline = start + WAIT_S
            while time.monotonic() < deadline and (
                _crashes(got) != expected or not monitor.gpus.gpus
            ):
                time.sleep(0.05)
            if not expected:  # long enough that a spurious crash would be out
                time.sleep(max(0.0, start + QUIET_LOOK_S - time.monotonic()))
            live = _crashes(got)
            sampled = sorted(monitor.gpus.gpus)
            now = monitor.now
    finally:
        stop.set()
        writer.join()
    assert sampled, "the GPUs were sampled"
    assert live == expected
    # The Monitor's time is the log's, run on by at most its 2 hours of
    # silence (the data is months or a year from this machine's clock):
    # samples stamped on the bare wall clock and fed as they were would
    # have put it there, and a sample whose alert read the clock while it
    # was fed ran it on by the silence twice (06_chatglm2: +14393 s).
    assert now is not None and now <= last + 7200 + 600, (now, last)


@pytest.mark.slow
def test_two_finished_logs_without_stamps_run_the_clock_on_by_their_silence_once(tmp_path: Path) -> None:
    """Two logs without stamps (a run's rank files), both silent for 2
    hours: each one's first text is dated at its own mtime, as replay dates
    it. The second file's was dated on the clock the first had anchored (its
    data run on by the silence), and the clock then ran on by the silence
    once more: the Monitor 2 hours ahead of this machine."""
    names = ("lightning_spike.log", "hf_trainer_lr_blowup.log")
    logs = []
    for name in names:
        (fixture,) = [p for p in fixture_logs() if p.name == name]
        log = tmp_path / name
        log.write_bytes(fixture.read_bytes())
        os.utime(log, (time.time() - 7200, time.time() - 7200))
        logs.append(str(log))
    last = replay(logs).monitor.now
    assert last is not None
    monitor = Monitor(keep_lines=0)
    session = LiveSession(monitor, logs=tuple(logs), use_nvml=False)
    with session:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline and (monitor.now or 0.0) < last - 60:
            time.sleep(0.05)
        time.sleep(QUIET_LOOK_S)
        now = monitor.now
    assert now is not None and last - 60 <= now <= last + 7200 + 600, (now - last)
