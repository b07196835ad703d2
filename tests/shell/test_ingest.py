"""The Monitor's one front door for raw inputs (``dflash_watch.ingest``).

A log file becomes a parser in one place, for live and replay alike, and
side files (GPU samples, probe lines) read live go onto the live clock in
the Monitor, by the same offset rule as a log's (``alignment``).
"""

from __future__ import annotations

import ast
from pathlib import Path

from dflash_watch.ingest import display_name, log_stream
from dflash_watch.monitor import Monitor
from dflash_watch.parsers.events import GpuSample, ProbeSample

SHELL = Path(__file__).resolve().parents[2] / "dflash_watch"


def test_every_log_stream_of_the_shell_comes_from_the_one_factory() -> None:
    """Replay and the Monitor name and date a log's parser alike: no module
    of the shell but ``ingest`` builds a ``LogStream`` itself."""
    builders = []
    for path in SHELL.rglob("*.py"):
        rel = path.relative_to(SHELL)
        if rel.parts[0] in ("parsers", "detectors") or rel == Path("ingest.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "LogStream":
                builders.append(f"{rel}:{node.lineno}")
    assert not builders, builders


def test_the_factory_names_torchrun_rank_files_by_their_folder() -> None:
    stream = log_stream("/runs/attempt_0/3/stdout.log", tz=None, progress_pattern=None, at=1.7e9, replay=True)
    assert stream.name == "3/stdout.log" == display_name("/runs/attempt_0/3/stdout.log")
    assert display_name("/runs/train.log") == "train.log"


def test_a_live_sample_file_goes_onto_the_clock_of_a_log_caught_up_ten_minutes_behind() -> None:
    """The live clock follows a log 600 s behind this machine's; a sample
    stamped on this machine's clock is moved onto it by the Monitor, not
    left 10 min ahead of the steps (the stall's clock would run past them)."""
    m = Monitor(keep_lines=0)
    m.live_since = 1000.0
    sample = GpuSample(1000.5, 0, 30 * 2**30, 80 * 2**30)
    m.feed_samples([sample], "gpu.jsonl", fresh=True, now=400.5, arrived=1000.5, log_seen=True)
    assert m.now == 400.5
    # Without a file: taken as they are (NVML's own samples, replay).
    m.feed_samples([GpuSample(401.0, 0, 30 * 2**30, 80 * 2**30)])
    assert m.now == 401.0


def test_probe_lines_wait_for_the_log_then_go_onto_its_clock() -> None:
    m = Monitor(keep_lines=0)
    m.live_since = 1000.0
    probe = ProbeSample(1001.0, rank=0, step=1)
    m.feed_probes([probe], "probe.jsonl", fresh=False, now=1001.0, arrived=1001.0, log_seen=False)
    assert m.side_holding("probe.jsonl") and m.probe_samples == 0
    # The log's first text came: the live clock is its own, 600 s behind.
    m.feed_probes([], "probe.jsonl", fresh=True, now=401.5, arrived=1001.5, log_seen=True)
    assert not m.side_holding("probe.jsonl") and m.probe_samples == 1
    assert m.now is not None and abs(m.now - 401.0) < 1.0


def test_samples_and_probes_go_one_path_and_a_file_without_the_clock_is_refused_first() -> None:
    """GPU samples and probe lines take one way in (``feed_side``); a side
    file's lines without ``now`` (the live clock they must go onto) are
    refused before any of them is fed or a clock is made for the file."""
    import pytest

    assert Monitor.feed_samples is Monitor.feed_probes is Monitor.feed_side
    m = Monitor(keep_lines=0)
    with pytest.raises(TypeError, match=r"feed_side\('gpu.jsonl'\): a side file's lines need now="):
        m.feed_samples([GpuSample(1000.5, 0, 30 * 2**30, 80 * 2**30)], "gpu.jsonl", fresh=True)  # type: ignore[call-overload]
    assert m.now is None and not m.side_holding("gpu.jsonl") and m.live_since is None
