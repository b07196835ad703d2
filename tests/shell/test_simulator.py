"""The demo's simulated DFlash job, run as a real process into real files.

Timestamps are read as UTC (the child runs with TZ=UTC) so that the offsets
from ``--start-time`` are exact and the phase of each line is known.
"""

from __future__ import annotations

import calendar
import json
import os
import re
import signal
import subprocess
import sys
import time
from datetime import UTC
from pathlib import Path

import pytest

from dflash_watch.demo import fx_traceback
from dflash_watch.demo.story import (
    DRAFTER_GPUS,
    GIB,
    N_GPUS,
    STORY,
    TARGET_GPUS,
    TOTAL_BYTES,
    Phase,
    phase_at,
)

ROOT = Path(__file__).resolve().parents[2]
START = 1795428000.0  # 2026-11-23 10:00:00 UTC
STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})\] \[(\w+)\] \[([\w.]+)\] (.*)$")
PROGRESS = re.compile(
    r"step (\d+)/(\d+) \| loss [\d.]+ \| acc_len [\d.]+ \| accept [\d.]+ \| ([\d.]+) Ktok/s \| pad_eff ([\d.]+)"
)
ENV = {**os.environ, "TZ": "UTC", "PYTHONPATH": str(ROOT)}


def simulate(out: Path, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "dflash_watch.demo.simulator", "--out", str(out), "--quiet", *args]
    return subprocess.run(cmd, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=timeout)


def stamped(text: str) -> list[tuple[float, str, str]]:
    """(epoch seconds, level, message) of each timestamped line."""
    found = []
    for line in text.split("\n"):
        m = STAMP.match(line)
        if m:
            t = calendar.timegm(time.strptime(m[1], "%Y-%m-%d %H:%M:%S")) + int(m[2]) / 1000
            found.append((t, m[3], m[5]))
    return found


def progress(entries: list[tuple[float, str, str]], start: float) -> list[tuple[float, int, float, float]]:
    """(offset, step, Ktok/s, pad_eff) of each progress line."""
    rows = []
    for t, _, msg in entries:
        m = PROGRESS.search(msg)
        if m:
            rows.append((t - start, int(m[1]), float(m[3]), float(m[4])))
    return rows


def samples(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def band(rows: list[dict], gpu: int, lo: float, hi: float) -> float:
    used = [r["used_bytes"] for r in rows if r["gpu"] == gpu and lo <= r["time"] < hi]
    assert used, (gpu, lo, hi)
    return (max(used) - min(used)) / GIB


@pytest.fixture(scope="module")
def first_launch(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    out = tmp_path_factory.mktemp("sim")
    return out, simulate(out, "--fast", "--seed", "7", "--start-time", str(START))


def test_story_timeline_fits_the_default_speed() -> None:
    assert STORY.broken_at == STORY.warmup_s + STORY.healthy_s
    assert STORY.crash_at == STORY.broken_at + STORY.broken_s
    assert phase_at(0) is Phase.WARMUP
    assert phase_at(STORY.warmup_s) is Phase.HEALTHY
    assert phase_at(STORY.broken_at - 0.01) is Phase.HEALTHY
    assert phase_at(STORY.broken_at) is Phase.BROKEN
    assert phase_at(STORY.crash_at) is Phase.CRASHED
    assert phase_at(STORY.crash_at + 1e6, incarnation=2) is Phase.HEALTHY
    # Phases 1-4 at the default --speed 10: about two and a half minutes.
    assert 120 <= (STORY.crash_at + 1) / 10 <= 160


def test_first_launch_exits_1_and_log_tells_the_story(first_launch) -> None:
    out, proc = first_launch
    assert proc.returncode == 1, proc.stderr
    text = (out / "train.log").read_text()
    entries = stamped(text)
    times = [t for t, _, _ in entries]
    assert times == sorted(times)
    assert times[0] == START and START + STORY.crash_at <= times[-1] <= START + STORY.crash_at + 2

    rows = progress(entries, START)
    warm = [r for r in rows if r[0] < STORY.warmup_s]
    healthy = [r for r in rows if STORY.warmup_s <= r[0] < STORY.broken_at]
    collapsing = [r for r in rows if STORY.broken_at <= r[0] < STORY.broken_at + STORY.break_ramp_s]
    broken = [r for r in rows if STORY.broken_at + STORY.break_ramp_s <= r[0] < STORY.crash_at]
    assert len(warm) >= 5 and warm[0][2] < 10 and warm[-1][2] > 18  # climbing after compile
    assert all(b[1] == a[1] + 1 for a, b in zip(rows, rows[1:]))  # one line per step
    gaps = [b[0] - a[0] for a, b in zip(healthy, healthy[1:])]
    assert 2.0 <= sorted(gaps)[len(gaps) // 2] <= 5.0

    saves = [(t - START, msg) for t, _, msg in entries if msg.startswith("Saving checkpoint to ")]
    assert len(saves) == 1 and phase_at(saves[0][0]) is Phase.HEALTHY
    dips = [r for r in healthy if not 21.0 <= r[2] <= 25.0]
    assert len(dips) == 1 and dips[0][2] < 10 and 0 < dips[0][0] - saves[0][0] < 15  # the save's dip
    assert len(healthy) > 150 and all(r[3] >= 0.9 for r in healthy)

    warn = [(t - START, msg) for t, lvl, msg in entries if lvl == "WARNING"]
    assert warn[0][1].startswith("length bucketing disabled") and 0 <= warn[0][0] - STORY.broken_at < 5
    assert collapsing and collapsing[-1][2] < 6.0
    assert len(broken) > 60
    assert all(4.3 * 0.95 <= r[2] <= 4.3 * 1.05 for r in broken)
    assert all(0.40 <= r[3] <= 0.50 for r in broken)

    errors = [(t - START, msg) for t, lvl, msg in entries if lvl == "ERROR"]
    assert errors and all(phase_at(t) is Phase.CRASHED for t, _ in errors)


def test_traceback_ends_the_log(first_launch) -> None:
    out, _ = first_launch
    lines = (out / "train.log").read_text().splitlines()
    head = lines.index("Exception in thread drafter-0:")
    block = lines[head : head + len(fx_traceback.render())]
    assert block == fx_traceback.render()
    assert block[1] == "Traceback (most recent call last):"
    assert block[-1] == (
        "RuntimeError: Detected that you are using FX to symbolically trace a dynamo-optimized "
        "function. This is not supported at the moment."
    )
    frames = re.findall(r'File "([^"]+)", line (\d+), in (\w+)', "\n".join(block))
    names = [(Path(f).name, fn) for f, _, fn in frames]
    for expected in [
        ("_symbolic_trace.py", "trace"),
        ("_symbolic_trace.py", "module_call_wrapper"),
        ("_symbolic_trace.py", "call_module"),
        ("eval_frame.py", "compile_wrapper"),
    ]:
        assert expected in names
    assert names[-1] == ("eval_frame.py", "compile_wrapper")
    # Only the main thread's error lines follow the traceback.
    assert all(STAMP.match(line) for line in lines[head + len(block) :])


def test_traceback_frames_match_installed_torch() -> None:
    """The torch frames quote real source lines (torch 2.13), not paraphrases."""
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        pytest.skip("torch is not installed")
    torch_dir = Path(spec.origin).parent
    version = (torch_dir / "version.py").read_text()
    if "__version__ = '2.13." not in version and '__version__ = "2.13.' not in version:
        pytest.skip("the traceback was taken from torch 2.13")
    lines = fx_traceback.render()
    checked = 0
    for i, line in enumerate(lines):
        m = re.match(r'  File "([^"]+)", line (\d+), in (\w+)', line)
        if not m or "/site-packages/torch/" not in m[1]:
            continue
        source = (torch_dir / m[1].split("/site-packages/torch/")[1]).read_text().splitlines()
        assert source[int(m[2]) - 1].strip() == lines[i + 1].strip(), line
        checked += 1
    assert checked >= 9


def test_gpu_samples_follow_contract_and_story(first_launch) -> None:
    out, proc = first_launch
    rows = samples(out / "gpu.jsonl")
    for r in rows:
        assert isinstance(r["time"], float) and isinstance(r["gpu"], int)
        assert isinstance(r["used_bytes"], int) and r["total_bytes"] == TOTAL_BYTES == 103079215104
        assert 0 < r["used_bytes"] <= r["total_bytes"] and 0.0 <= r["util"] <= 1.0
        for p in r["processes"]:
            assert set(p) == {"pid", "used_bytes", "name"} and 0 < p["used_bytes"] <= r["used_bytes"]
    pids = {p["pid"] for r in rows for p in r["processes"]}
    assert len(pids) == 1 and pids.pop() > 0
    seconds = int(STORY.crash_at) + 1
    assert len(rows) == N_GPUS * seconds  # 8 GPUs at 1 Hz until the process dies
    for k in range(seconds):
        tick = rows[k * N_GPUS : (k + 1) * N_GPUS]
        assert [r["gpu"] for r in tick] == list(range(N_GPUS))
        assert {r["time"] for r in tick} == {START + k}

    healthy = (START + STORY.warmup_s, START + STORY.broken_at)
    for gpu in range(N_GPUS):
        assert band(rows, gpu, *healthy) < 50 / 1024  # flat: under 50 MiB
    level = {g: max(r["used_bytes"] for r in rows if r["gpu"] == g and r["time"] < healthy[1]) for g in range(N_GPUS)}
    assert all(70 * GIB < level[g] < 72 * GIB for g in TARGET_GPUS)
    assert all(62 * GIB < level[g] < 64 * GIB for g in DRAFTER_GPUS)
    first = [r["used_bytes"] for r in rows if r["time"] == START]
    assert max(first) < 1 * GIB  # memory ramps up in warm-up

    lo = START + STORY.broken_at + STORY.break_ramp_s
    for w in range(int(lo), int(START + STORY.crash_at) - 60, 30):
        for gpu in DRAFTER_GPUS:
            assert band(rows, gpu, w, w + 60) > 2.0
        for gpu in TARGET_GPUS:
            assert band(rows, gpu, w, w + 60) < 0.1


def test_relaunch_resumes_and_stays_healthy(tmp_path: Path) -> None:
    first = simulate(tmp_path, "--fast", "--start-time", str(START))
    assert first.returncode == 1
    state = json.loads((tmp_path / "state.json").read_text())
    assert state["launches"] == 1 and state["last_checkpoint"] == STORY.save_every
    size = len((tmp_path / "train.log").read_text())
    n_samples = len(samples(tmp_path / "gpu.jsonl"))

    second = simulate(tmp_path, "--fast", "--max-sim-seconds", "1200")
    assert second.returncode == 0, second.stderr
    assert json.loads((tmp_path / "state.json").read_text())["launches"] == 2
    text = (tmp_path / "train.log").read_text()
    entries = stamped(text)
    times = [t for t, _, _ in entries]
    assert times == sorted(times)  # the relaunch appends after the crash
    again = stamped(text[size:])
    start = again[0][0]
    assert again[0][2].startswith("Starting DFlash drafter training")
    assert any(f"Resuming from checkpoint /ckpt/dflash-llama70b/step_{STORY.save_every:06d}" in m for _, _, m in again)
    assert not [m for _, lvl, m in again if lvl in ("WARNING", "ERROR")]
    assert again[-1][2].startswith("Time budget reached") and again[-1][0] == start + 1200
    rows = progress(again, start)
    assert rows[0][1] == STORY.save_every + 1
    healthy = [r for r in rows if r[0] >= STORY.warmup_s]
    assert len(healthy) > 250
    off = [r for r in healthy if not 21.0 <= r[2] <= 25.0]
    assert len(off) <= 1200 // (STORY.save_every * 2.5)  # only the checkpoint dips
    assert all(r[3] >= 0.9 for r in healthy)

    gpu = samples(tmp_path / "gpu.jsonl")[n_samples:]
    assert gpu[0]["time"] == start and len(gpu) == N_GPUS * 1201
    for g in range(N_GPUS):
        assert band(gpu, g, start + STORY.warmup_s, start + 1201) < 0.1


def test_same_seed_same_files_other_seed_other_files(tmp_path: Path) -> None:
    def normalised(out: Path) -> tuple[str, str]:
        # The pid is the one thing that is allowed to differ between runs.
        rows = samples(out / "gpu.jsonl")
        pid = rows[-1]["processes"][0]["pid"]
        log = (out / "train.log").read_text().replace(f":{pid}:{pid} ", ":PID:PID ").replace(f"(pid {pid})", "(pid PID)")
        return log, (out / "gpu.jsonl").read_text().replace(f'"pid": {pid},', '"pid": 0,')

    runs = []
    for name, seed in [("a", "3"), ("b", "3"), ("c", "4")]:
        assert simulate(tmp_path / name, "--fast", "--seed", seed, "--start-time", str(START)).returncode == 1
        runs.append(normalised(tmp_path / name))
    assert runs[0] == runs[1]
    assert runs[0][0] != runs[2][0] and runs[0][1] != runs[2][1]


def test_log_is_mirrored_on_stdout(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "dflash_watch.demo.simulator", "--out", str(tmp_path), "--fast", "--max-sim-seconds", "120"]
    proc = subprocess.run(cmd, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == (tmp_path / "train.log").read_text()
    assert "Time budget reached" in proc.stdout.splitlines()[-1]


@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signal_stops_a_live_run_promptly(tmp_path: Path, signum: int, code: int) -> None:
    cmd = [sys.executable, "-m", "dflash_watch.demo.simulator", "--out", str(tmp_path), "--quiet", "--speed", "10"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=ENV)
    try:
        log = tmp_path / "train.log"
        deadline = time.monotonic() + 20
        while not (log.exists() and log.stat().st_size) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert log.exists(), "the simulator wrote nothing"
        began = time.monotonic()
        time.sleep(1.5)
        live = samples(tmp_path / "gpu.jsonl")
        # Live pace: about 10 simulated seconds per wall second, flushed as it goes.
        assert 8 <= live[-1]["time"] - live[0]["time"] <= 10 * (time.monotonic() - began) + 25
        sent = time.monotonic()
        proc.send_signal(signum)
        assert proc.wait(timeout=5) == code
        assert time.monotonic() - sent < 1.0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = log.read_text()
    assert text.endswith("\n") and text.splitlines()[-1].endswith(f"Received {signal.Signals(signum).name}; exiting")
    raw = (tmp_path / "gpu.jsonl").read_text()
    assert raw.endswith("\n")
    samples(tmp_path / "gpu.jsonl")  # every line whole


def test_log_stream_reads_progress_and_the_fx_crash(first_launch) -> None:
    stream = pytest.importorskip("dflash_watch.parsers.stream")
    pytest.importorskip("dflash_watch.parsers.crash.tracebacks")
    out, _ = first_launch

    parser = stream.LogStream("train.log", tz=UTC)  # the child ran with TZ=UTC
    events = parser.feed((out / "train.log").read_text(), 1, START)
    events += parser.flush(START)
    kinds = [type(e).__name__ for e in events]
    prog = [e for e in events if type(e).__name__ == "Progress" and e.tokens_per_s]
    crashes = [e for e in events if type(e).__name__ == "Crash"]
    assert len(prog) > 300, kinds[:20]
    assert any(e.tokens_per_s > 20_000 for e in prog) and any(e.tokens_per_s < 5_000 for e in prog)
    assert len(crashes) == 1 and crashes[0].detector == "fx_tracing"
    assert crashes[0].time >= START + STORY.crash_at - 1
