"""Probe lines reach the Monitor: replay (merged in time order), check, and live.

A Monitor that records what it is fed (``Spy``) stands in for the state
the padding / allocator / recompile detectors will keep: these tests prove
the samples arrive, in order, from real files through the real readers.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from dflash_watch import cli
from dflash_watch.live import LiveSession
from dflash_watch.monitor import Monitor
from dflash_watch.parsers.events import ProbeSample, Progress
from dflash_watch.probe import ProbeWriter
from dflash_watch.replay import replay
from tests.shell.polling import polled

T0 = 1764410400.0  # 2025-11-29T10:00:00Z


class Spy(Monitor):
    """A Monitor that keeps every event it is fed, in order."""

    def __init__(self, **kwargs) -> None:  # noqa: ANN003
        super().__init__(**kwargs)
        self.fed: list = []

    def feed_events(self, events):  # noqa: ANN001, ANN201
        events = list(events)
        with self.lock:
            self.fed.extend(events)
        return super().feed_events(events)

    def fed_probes(self) -> list[ProbeSample]:
        with self.lock:
            return [e for e in self.fed if isinstance(e, ProbeSample)]


@pytest.fixture
def spies(monkeypatch) -> list[Spy]:  # noqa: ANN001
    """Every Monitor the CLI makes is a Spy, kept here in the order made."""
    made: list[Spy] = []

    class Recorded(Spy):
        def __init__(self, **kwargs) -> None:  # noqa: ANN003
            super().__init__(**kwargs)
            made.append(self)

    monkeypatch.setattr("dflash_watch.monitor.Monitor", Recorded)
    return made


def _log(path: Path, seconds: range) -> Path:
    """Progress lines with UTC timestamps, one per second given."""
    with open(path, "w", encoding="utf-8") as fh:
        for s in seconds:
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(T0 + s))
            fh.write(f"{stamp}Z step {s} loss 1.0 tokens/s 20000\n")
    return path


def _probe(path: Path, seconds: range, **extra) -> Path:  # noqa: ANN003
    writer = ProbeWriter(path)
    writer.write_lines({"time": T0 + s + 0.5, "step": s, "tokens": 900, "padded_tokens": 1000, **extra}
                       for s in seconds)
    writer.close()
    return path


def test_replay_merges_probe_lines_in_time_order(tmp_path: Path) -> None:
    log = _log(tmp_path / "train.log", range(0, 20))
    probe = _probe(tmp_path / "dflash-probe-rank0.jsonl", range(0, 20, 2))
    with open(probe, "a", encoding="utf-8") as fh:
        fh.write("not a probe line\n{\"time\": 1, broken\n")  # one bad line, then one torn by a kill
        fh.write('{"time": %f, "step": 99' % (T0 + 30))
    monitor = Spy(keep_lines=0)
    result = replay([str(log)], probes=[str(probe)], monitor=monitor)
    got = monitor.fed_probes()
    assert [p.step for p in got] == list(range(0, 20, 2))
    assert {p.rank for p in got} == {0}  # from the file's name
    assert got[0].source == "dflash-probe-rank0.jsonl:1"
    times = [e.time for e in monitor.fed if isinstance(e, (ProbeSample, Progress))]
    assert times == sorted(times) and any(isinstance(e, Progress) for e in monitor.fed)
    assert result.notices == [
        "dflash-probe-rank0.jsonl: 2 of 12 lines are not probe lines and were skipped (first: line 11)"]
    assert monitor.notices[-1] == result.notices[0]


def test_replay_cli_reads_probes_given_and_found_beside_the_log(  # noqa: ANN001
    tmp_path: Path, capsys, spies,
) -> None:
    log = _log(tmp_path / "train.log", range(0, 10))
    _probe(tmp_path / "dflash-probe-rank1.jsonl", range(0, 10, 3))  # found by default
    other = _probe(tmp_path / "elsewhere.jsonl", range(1, 10, 3), rank=7)

    assert cli.main(["replay", str(log), "--json"]) == 0
    assert sorted((p.rank, p.step) for p in spies[-1].fed_probes()) == [(1, 0), (1, 3), (1, 6), (1, 9)]
    assert cli.main(["replay", str(log), "--json", "--probe", str(other)]) == 0  # given: only those
    assert sorted((p.rank, p.step) for p in spies[-1].fed_probes()) == [(7, 1), (7, 4), (7, 7)]
    assert cli.main(["replay", str(log), "--json", "--probe", str(tmp_path / "*.jsonl")]) == 0
    assert len(spies[-1].fed_probes()) == 7

    capsys.readouterr()
    assert cli.main(["replay", str(log), "--probe", str(tmp_path / "missing.jsonl"), "--json"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "missing.jsonl: no such file" in err and "Traceback" not in err


def test_check_reads_probe_files(tmp_path: Path, monkeypatch, capsys, spies) -> None:  # noqa: ANN001
    monkeypatch.chdir(tmp_path)  # no dflash-watch.toml of the repository's
    log = _log(tmp_path / "train.log", range(0, 10))
    _probe(tmp_path / "dflash-probe-rank0.jsonl", range(0, 10, 5))
    cli.main(["check", "--log", str(log)])
    assert [p.step for p in spies[-1].fed_probes()] == [0, 5]


def test_live_follows_probe_files_new_ranks_and_rotation(tmp_path: Path) -> None:
    log = _log(tmp_path / "train.log", range(0, 3))
    rank0 = tmp_path / "dflash-probe-rank0.jsonl"
    w0 = ProbeWriter(rank0)
    w0.write_lines([{"time": T0 + 1, "step": 1}, {"time": T0 + 2, "step": 2}])
    monitor = Spy(keep_lines=0)

    def seen() -> set[tuple[int | None, int | None]]:
        return {(p.rank, p.step) for p in monitor.fed_probes()}

    session = LiveSession(monitor, logs=(str(log),), use_nvml=False, tick_s=0.05, tail_poll_s=0.05,
                          probe_poll_s=0.05)
    with session:
        assert polled(lambda: {(0, 1), (0, 2)} <= seen())
        # A torn write: nothing until its newline comes.
        with open(rank0, "a", encoding="utf-8") as fh:
            fh.write('{"time": %f, "step": 3' % (T0 + 3))
            fh.flush()
            time.sleep(0.3)
            assert (0, 3) not in seen()
            fh.write("}\nnot json\n")
        assert polled(lambda: (0, 3) in seen())
        with open(rank0, "a", encoding="utf-8") as fh:  # more bad lines later: no second notice
            fh.write('still not json\n{"time": %f, "step": 4}\n' % (T0 + 4))
        assert polled(lambda: (0, 4) in seen())
        # A rank that starts later, in the default place.
        _probe(tmp_path / "dflash-probe-rank1.jsonl", range(4, 6))
        assert polled(lambda: {(1, 4), (1, 5)} <= seen())
        # Rotation by the writer: rank0 moves to .1, a fresh file starts.
        w0.close()
        os.replace(rank0, str(rank0) + ".1")
        time.sleep(0.3)  # polls see the file gone before the new one comes (a slow writer)
        _probe(rank0, range(7, 9))
        assert polled(lambda: {(0, 7), (0, 8)} <= seen())
    notices = [n for n in monitor.notices if "not probe lines" in n]
    assert len(notices) == 1 and "dflash-probe-rank0.jsonl" in notices[0]
    assert [(p.rank, p.step) for p in monitor.fed_probes()].count((0, 1)) == 1  # nothing read twice
    assert not [n for n in monitor.notices if "waiting for" in n]  # the default places stay quiet


def test_live_finds_the_first_probe_file_when_it_appears(tmp_path: Path) -> None:
    """No probe file when the watcher starts: the first one is found within a poll or two,
    and stopping the session does not wait for the probe thread's poll."""
    log = _log(tmp_path / "train.log", range(0, 3))
    monitor = Spy(keep_lines=0)
    session = LiveSession(monitor, logs=(str(log),), use_nvml=False, tick_s=0.05, tail_poll_s=0.05)
    with session:
        time.sleep(0.2)
        _probe(tmp_path / "dflash-probe-rank2.jsonl", range(0, 2))
        assert polled(lambda: len(monitor.fed_probes()) == 2, timeout=3.0)  # the default poll is 1 s
        start = time.monotonic()
    assert time.monotonic() - start < 0.5
    assert not [n for n in monitor.notices if "waiting for" in n]  # the default places stay quiet
