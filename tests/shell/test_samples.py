"""GPU sample files: record -> replay round trip, lenient parsing, a recorder that never raises."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fake_nvml import FakeNvml, GiB  # noqa: E402

from dflash_watch.parsers.events import GpuLost, GpuProcess, GpuSample  # noqa: E402
from dflash_watch.sources.nvml import GpuSampler  # noqa: E402
from dflash_watch.sources.samples import (  # noqa: E402
    SampleParser,
    SampleRecorder,
    format_sample_line,
    parse_sample_line,
    read_sample_file,
)


def as_file_sample(s: GpuSample) -> GpuSample:
    return dataclasses.replace(s, source="gpu-samples")


def test_record_then_replay_round_trip(monkeypatch, tmp_path: Path) -> None:
    fake = FakeNvml.eight().install(monkeypatch)
    fake.gpus[1].not_supported = {"util", "memory_v2", "memory", "compute", "graphics"}
    sampler = GpuSampler(proc_root=str(tmp_path))
    sampler.job_pids = {1000, 1002}
    path = tmp_path / "runs" / "gpu.jsonl"
    recorded: list[GpuSample] = []
    with SampleRecorder(path) as recorder:
        for i in range(5):
            fake.gpus[2].used += i * 12345
            if i == 3:
                fake.gpus[7].lost = True
            batch = sampler.sample(1764410400.0 + i * 1.000123)
            recorder.write(batch)
            recorded += [s for s in batch if isinstance(s, GpuSample)]
            # flushed per batch: visible to a reader while still open
            assert sum(1 for _ in read_sample_file(path)) == len(recorded)
        assert not any(isinstance(e, GpuLost) for e in sampler.sample(9.0))  # reported once only
    # GPU 7's lost line (issue 19) is recorded too: replay sees the loss.
    assert recorder.written == len(recorded) == 8 * 3 + 1 + 7 * 2
    parser = SampleParser()
    replayed = list(read_sample_file(path, parser))
    assert replayed == [as_file_sample(s) for s in recorded]
    assert parser.bad == 0 and parser.summary() is None
    assert replayed[1].used_bytes is None and replayed[1].processes is None and replayed[1].util is None
    assert replayed[0].processes[0] == GpuProcess(1000, 59 * GiB, "", True)
    assert replayed[2].processes[0].job is True and replayed[3].processes[0].job is False


def test_recorder_appends_across_restarts(tmp_path: Path) -> None:
    path = tmp_path / "gpu.jsonl"
    one = GpuSample(1.5, 0, 10, 20)
    two = GpuSample(2.5, 1, None, 20, util=0.5, processes=())
    with SampleRecorder(path) as r:
        r.write([one])
    with SampleRecorder(path) as r:
        r.write([two])
        r.write([])
    assert list(read_sample_file(path)) == [one, two]
    lines = path.read_text().splitlines()
    assert json.loads(lines[1]) == {"time": 2.5, "gpu": 1, "used_bytes": None, "total_bytes": 20, "util": 0.5, "processes": []}


def test_contract_example_line() -> None:
    line = '{"time": 1764410400.0, "gpu": 5, "used_bytes": 76235669504, "total_bytes": 102641958912}'
    assert parse_sample_line(line) == GpuSample(1764410400.0, 5, 76235669504, 102641958912)
    assert format_sample_line(parse_sample_line(line)) == line


@pytest.mark.parametrize(
    "line",
    [
        "not json",
        '{"time": 1.0, "gpu": 0, "used_bytes": 5',  # torn last line
        "[1, 2]",
        '"text"',
        '{"gpu": 0, "used_bytes": 5}',
        '{"time": "2026-11-29T10:00:00", "gpu": 0}',
        '{"time": NaN, "gpu": 0}',
        '{"time": Infinity, "gpu": 0}',
        '{"time": 1.0, "gpu": -1}',
        '{"time": 1.0, "gpu": true}',
        '{"time": 1.0, "gpu": 1.5}',
        '{"time": true, "gpu": 1}',
        # Lines that used to raise out of the reader (issue 17): nesting past
        # json's recursion limit, numbers no counter or float can hold.
        "[" * 5000 + "]" * 5000,
        '{"a":' * 5000 + "1" + "}" * 5000,
        '{"time": ' + "1" * 400 + ', "gpu": 0}',
        '{"time": 1.0, "gpu": ' + "1" * 400 + "}",
        '{"time": 1.0, "gpu": 0, "used_bytes": ' + "9" * 5000 + "}",
        '{"time": 1.0, "gpu": 0, "used_bytes": 9223372036854775808}',
        '{"time": 1e400, "gpu": 0}',
    ],
)
def test_bad_lines_are_none(line: str) -> None:
    assert parse_sample_line(line) is None


def test_the_largest_counter_still_reads() -> None:
    line = '{"time": 1.0, "gpu": 0, "used_bytes": 9223372036854775807, "total_bytes": -9223372036854775808}'
    assert parse_sample_line(line).used_bytes == 2**63 - 1


def test_bad_optional_fields_are_dropped_not_fatal() -> None:
    line = json.dumps(
        {
            "time": 5,
            "gpu": 2.0,
            "used_bytes": -3,
            "total_bytes": "80GB",
            "util": 95,
            "processes": [{"pid": 7, "used_bytes": 1.0, "name": 3}, "junk", {"name": "x"}, {"pid": 8, "job": "yes"}],
            "extra": {"ignored": True},
        }
    )
    assert parse_sample_line(line) == GpuSample(
        5.0, 2, None, None, None, (GpuProcess(7, 1, ""), GpuProcess(8, 0, ""))
    )
    assert parse_sample_line('{"time": 1, "gpu": 0, "processes": {}}').processes is None


def test_read_counts_bad_lines(tmp_path: Path) -> None:
    path = tmp_path / "gpu.jsonl"
    good = format_sample_line(GpuSample(1.0, 0, 1, 2))
    path.write_bytes(f"{good}\n\n   \ngarbage\n{good}\n\xff\xfe broken\n{good[:20]}".encode("latin-1"))
    parser = SampleParser()
    assert len(list(read_sample_file(path, parser))) == 2
    assert (parser.lines, parser.samples, parser.bad, parser.first_bad) == (7, 2, 3, 4)
    assert parser.summary() == "3 of 7 lines are not GPU samples and were skipped (first: line 4)"


def test_read_missing_file_is_an_oserror(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        list(read_sample_file(tmp_path / "absent.jsonl"))


def test_recorder_on_a_full_disk_notices_once(tmp_path: Path) -> None:
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    seen: list[str] = []
    recorder = SampleRecorder("/dev/full", on_notice=seen.append)
    for _ in range(3):
        recorder.write([GpuSample(1.0, 0, 1, 2)])
    assert len(seen) == 1 and "No space left" in seen[0] and "/dev/full" in seen[0]
    assert recorder.written == 0 and recorder.drain_notices() == seen
    recorder.close()
    recorder.write([GpuSample(1.0, 0, 1, 2)])  # closed: a quiet no-op


def test_recorder_with_an_unusable_path_never_raises(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    recorder = SampleRecorder(blocker / "gpu.jsonl")  # parent is a file
    recorder.write([GpuSample(1.0, 0, 1, 2)])
    recorder.write([GpuSample(2.0, 0, 1, 2)])
    (notice,) = recorder.drain_notices()
    assert notice.startswith(f"cannot record GPU samples to {blocker / 'gpu.jsonl'}: ")
    blocker.unlink()  # the problem goes away: recording resumes
    recorder.write([GpuSample(3.0, 0, 1, 2)])
    recorder.close()
    assert recorder.written == 1 and [s.time for s in read_sample_file(blocker / "gpu.jsonl")] == [3.0]


_sizes = st.one_of(st.none(), st.integers(min_value=0, max_value=2**50))
_samples = st.builds(
    GpuSample,
    time=st.floats(min_value=0, max_value=4e9, allow_nan=False),
    gpu=st.integers(min_value=0, max_value=64),
    used_bytes=_sizes,
    total_bytes=_sizes,
    util=st.one_of(st.none(), st.integers(min_value=0, max_value=10000).map(lambda x: x / 10000)),
    processes=st.one_of(
        st.none(),
        st.lists(
            st.builds(
                GpuProcess,
                pid=st.integers(min_value=1, max_value=2**22),
                used_bytes=st.integers(min_value=0, max_value=2**40),
                name=st.text(max_size=15),
                job=st.booleans(),
            ),
            max_size=4,
        ).map(tuple),
    ),
)


@settings(max_examples=200, deadline=None)
@given(_samples)
def test_format_parse_round_trip(sample: GpuSample) -> None:
    line = format_sample_line(sample)
    assert "\n" not in line
    assert parse_sample_line(line) == sample


# -- GPU health fields (issue 19, CONTRACTS section 3) -----------------------

HEALTH_LINE = {
    "time": 1764410400.0, "gpu": 5, "used_bytes": 76235669504, "total_bytes": 102641958912,
    "temp_c": 87.0, "power_w": 698.5, "power_limit_w": 700.0, "sm_clock_mhz": 1410.0, "sm_clock_max_mhz": 1980.0,
    "throttle": ["thermal", "power_cap"], "ecc_uncorrected": 2, "remap_pending": True, "retired_pages": 3,
    "xid": [48, 63], "pcie_gen": 4, "pcie_gen_max": 5, "pcie_width": 8, "pcie_width_max": 16, "lost": False,
}


def test_health_fields_round_trip_through_a_line() -> None:
    sample = parse_sample_line(json.dumps(HEALTH_LINE))
    assert sample is not None
    assert (sample.temp_c, sample.power_w, sample.power_limit_w) == (87.0, 698.5, 700.0)
    assert (sample.sm_clock_mhz, sample.sm_clock_max_mhz) == (1410.0, 1980.0)
    assert sample.throttle == ("thermal", "power_cap") and sample.xid == (48, 63)
    assert (sample.ecc_uncorrected, sample.remap_pending, sample.retired_pages) == (2, True, 3)
    assert (sample.pcie_gen, sample.pcie_gen_max, sample.pcie_width, sample.pcie_width_max) == (4, 5, 8, 16)
    assert sample.lost is False
    line = format_sample_line(sample)
    assert json.loads(line) == HEALTH_LINE
    assert parse_sample_line(line) == sample


def test_health_fields_absent_when_none_and_old_lines_read_as_before() -> None:
    plain = GpuSample(1.0, 0, 5, 10)
    assert json.loads(format_sample_line(plain)) == {"time": 1.0, "gpu": 0, "used_bytes": 5, "total_bytes": 10}
    assert parse_sample_line(format_sample_line(plain)) == as_file_sample(plain)


@pytest.mark.parametrize(
    ("key", "bad"),
    [
        ("temp_c", "hot"), ("power_w", True), ("power_limit_w", [700]), ("sm_clock_mhz", None),
        ("throttle", "thermal"), ("ecc_uncorrected", -1), ("remap_pending", 1), ("retired_pages", 2.5),
        ("xid", 79), ("pcie_gen", "4"), ("pcie_width_max", {}), ("lost", "yes"),
    ],
)
def test_a_bad_health_field_is_dropped_not_the_line(key: str, bad: object) -> None:
    sample = parse_sample_line(json.dumps({**HEALTH_LINE, key: bad}))
    assert sample is not None and sample.used_bytes == 76235669504
    assert getattr(sample, key) is None
    assert sample.temp_c is not None or key == "temp_c"  # the other fields stay


def test_unknown_throttle_names_and_bad_xid_entries_are_dropped() -> None:
    sample = parse_sample_line(json.dumps({**HEALTH_LINE, "throttle": ["thermal", "idle", 3], "xid": [79, "x", -2]}))
    assert sample is not None and sample.throttle == ("thermal",) and sample.xid == (79,)


def test_recorded_health_fields_replay_from_the_fake(monkeypatch, tmp_path: Path) -> None:
    fake = FakeNvml.eight().install(monkeypatch)
    g = fake.gpus[2]
    g.temp, g.power_mw, g.sm_clock, g.reasons = 91, 699_000, 1200, 0x40 | 0x4 | 0x1  # idle bit left out
    g.ecc_uncorrected, g.remapped, g.pcie_gen, g.pcie_width = 4, (0, 1, 1, 0), 3, 8
    fake.gpus[3].not_supported = {"ecc", "remap", "retired", "pcie", "pcie_max", "throttle"}
    sampler = GpuSampler(proc_root=str(tmp_path), kmsg_path=None)
    path = tmp_path / "gpu.jsonl"
    try:
        with SampleRecorder(path) as recorder:
            fake.push_xid(2, 79)
            deadline = time.monotonic() + 5
            while sampler._inbox.received == 0 and time.monotonic() < deadline:
                time.sleep(0.01)
            recorder.write(sampler.sample(10.0))
            fake.gpus[6].lost = True
            recorder.write(sampler.sample(11.0))
    finally:
        sampler.close()
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    first = {d["gpu"]: d for d in lines if d["time"] == 10.0}
    assert first[2]["temp_c"] == 91 and first[2]["power_w"] == pytest.approx(699.0) and first[2]["power_limit_w"] == 700
    assert first[2]["throttle"] == ["thermal", "power_cap"] and first[2]["xid"] == [79]
    assert (first[2]["sm_clock_mhz"], first[2]["sm_clock_max_mhz"]) == (1200, 1980)
    assert (first[2]["ecc_uncorrected"], first[2]["remap_pending"]) == (4, True)
    assert (first[2]["pcie_gen"], first[2]["pcie_gen_max"], first[2]["pcie_width"]) == (3, 5, 8)
    for key in ("ecc_uncorrected", "remap_pending", "pcie_gen", "pcie_width_max", "throttle", "xid", "lost"):
        assert key not in first[3]  # not supported (or none): absent, never null or zero
    lost = [d for d in lines if d["time"] == 11.0 and d["gpu"] == 6]
    assert lost == [{"time": 11.0, "gpu": 6, "used_bytes": None, "total_bytes": None, "lost": True}]
    replayed = list(read_sample_file(path))
    assert [s.xid for s in replayed if s.gpu == 2][0] == (79,)
    assert [s.lost for s in replayed if s.gpu == 6] == [None, True]


def test_replay_of_a_health_sample_file_gives_the_gpu_health_alerts(tmp_path: Path) -> None:
    """`replay --gpu-samples` carries the health fields to the detector, end to end."""
    import subprocess

    t0 = 1795946400.0  # 2026-11-29 10:00:00 UTC
    log = tmp_path / "train.log"
    log.write_text("".join(f"2026-11-29 10:{m:02d}:00 step {m + 1}/100 | loss 2.0 | 21.5 Ktok/s\n" for m in range(10)))
    base = {"used_bytes": 60 * GiB, "total_bytes": 80 * GiB, "util": 0.95, "pcie_gen": 5, "pcie_gen_max": 5,
            "pcie_width_max": 16, "sm_clock_max_mhz": 1980.0}
    lines = []
    for i in range(540):
        lines.append({"time": t0 + i, "gpu": 0, **base, "pcie_width": 16, "sm_clock_mhz": 1980.0, "throttle": [],
                      **({"xid": [79]} if i == 30 else {})})
        lines.append({"time": t0 + i, "gpu": 1, **base, "pcie_width": 4 if i >= 60 else 16, "sm_clock_mhz": 1000.0,
                      "throttle": ["thermal"], "temp_c": 93.0, **({"ecc_uncorrected": 1} if i >= 100 else {})})
    samples = tmp_path / "gpu.jsonl"
    samples.write_text("".join(json.dumps(x) + "\n" for x in lines))
    env = {**os.environ}
    env.pop("PYTHONUNBUFFERED", None)
    out = subprocess.run(
        [sys.executable, "-m", "dflash_watch.cli", "replay", "--json", "--tz", "UTC", str(log), "--gpu-samples", str(samples)],
        capture_output=True, text=True, timeout=120, env=env, cwd=str(Path(__file__).resolve().parents[2]),
    )
    assert out.returncode == 0, out.stderr
    alerts = [json.loads(x) for x in out.stdout.splitlines()]
    health = [(a["gpu"], a["kind"], a["state"], a["time"] - t0) for a in alerts if a["detector"] == "gpu_health"]
    assert (0, "xid", "firing", 30.0) in health
    assert (1, "pcie", "firing", 180.0) in health
    assert (1, "ecc", "firing", 100.0) in health
    assert (1, "thermal", "firing", 120.0) in health
    assert len([h for h in health if h[2] == "firing"]) == 4  # each once
    xid = next(a for a in alerts if a["kind"] == "xid")
    assert xid["severity"] == "critical" and "fallen off the bus" in xid["message"] and xid["evidence"]["code"] == 79
