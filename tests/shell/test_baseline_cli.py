"""`dflash-watch baseline save|show` as a user runs them: real processes, real files."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from test_config import cli, one_line  # the command as a user runs it, HOME in the test's folder

from dflash_watch.baseline.store import load_baseline

T0 = datetime(2026, 11, 29, 10, 0, 0, tzinfo=UTC).timestamp()
GIB = 1 << 30


def clock(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S")


def write_run(tmp_path: Path, phases: list[tuple[int, float]], step_s: float = 3.0) -> Path:
    """A log of ``(steps, Ktok/s)`` phases, one step every ``step_s`` from T0."""
    lines, step = [], 0
    for steps, ktok in phases:
        for _ in range(steps):
            lines.append(f"{clock(T0 + step * step_s)} step {step + 1}/5000 | loss 2.0 | {ktok} Ktok/s")
            step += 1
    log = tmp_path / "train.log"
    log.write_text("\n".join(lines) + "\n")
    return log


def write_samples(tmp_path: Path, seconds: int, level: dict[int, float], ended: int) -> Path:
    """GPUs at 1 Hz: 5 GiB for the first 60 s (warm-up), then their level,
    GPU 1 swinging by +-1 GiB; from ``ended`` on the run is over (0.5 GiB)."""
    rows = []
    for s in range(seconds):
        for gpu, gib in level.items():
            used = 5.0 if s < 60 else gib + (gpu == 1) * (1.0 if s % 2 else -1.0)
            used = 0.5 if s >= ended else used
            rows.append(json.dumps({"time": T0 + s, "gpu": gpu, "used_bytes": int(used * GIB), "total_bytes": 80 * GIB}))
    path = tmp_path / "gpu.jsonl"
    path.write_text("\n".join(rows) + "\n")
    return path


def test_save_leaves_out_the_warm_up_and_show_prints_it(tmp_path: Path) -> None:
    # 60 s of warm-up at 5 Ktok/s (steps at 0, 3, ..., 60 s), then 15 steps at
    # 20 Ktok/s: counted whole, the median would be the warm-up's 5 Ktok/s.
    # The warm-up is [0, 60): the report at 60 s opens the window.
    log = write_run(tmp_path, [(21, 5.0), (15, 20.0)])
    gpu = write_samples(tmp_path, 200, {0: 70.0, 1: 60.0}, ended=106)  # the last step is at 105 s
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    out = cli("baseline", "save", str(log), "--gpu-samples", str(gpu), "--env", "venv", "--tz", "UTC",
              "--out", "b.json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "saved b.json: 20.0 Ktok/s over 2026-11-29 10:01:00 to 10:01:45 (45 s)\n", out.stdout
    data = json.loads((tmp_path / "b.json").read_text())
    assert data["version"] == 1 and data["throughput_tokens_per_s"] == 20000.0
    assert "throughput_unit" not in data  # tokens/s: the default unit
    assert data["step_interval_s"] == pytest.approx(3.0)
    assert data["venv"] == str(venv.resolve())
    assert data["window"] == {"from": T0 + 20 * 3.0, "to": T0 + 35 * 3.0}
    mem = data["gpu_memory"]
    assert mem["0"]["level_bytes"] == pytest.approx(70 * GIB) and mem["0"]["band_bytes"] == 0
    assert mem["1"]["level_bytes"] == pytest.approx(60 * GIB, rel=0.02)
    # The swing, not the warm-up climb nor the fall after the run ended.
    assert mem["1"]["band_bytes"] == pytest.approx(2 * GIB)
    assert load_baseline(tmp_path / "b.json").throughput_tokens_per_s == 20000.0
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temp file left

    shown = cli("baseline", "show", "b.json", "--tz", "UTC", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert "throughput     20.0 Ktok/s" in text
    assert "step interval  3 s" in text
    assert "window         2026-11-29 10:01:00 to 10:01:45 (45 s)" in text
    assert "GPU 0 memory   70.0 GiB, band 0.00 GiB" in text and "GiB, band 2.00 GiB" in text
    assert f"environment    {venv.resolve()}" in text


@pytest.mark.parametrize("iso", [True, False])
def test_from_and_to_pick_the_window(tmp_path: Path, iso: bool) -> None:
    log = write_run(tmp_path, [(40, 10.0), (40, 20.0), (40, 30.0)])
    start, end = T0 + 40 * 3.0, T0 + 79 * 3.0
    flags = ["--from", clock(start).replace(" ", "T"), "--to", clock(end)] if iso else \
        ["--from", str(start), "--to", str(end)]
    out = cli("baseline", "save", str(log), *flags, "--tz", "UTC", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    data = json.loads((tmp_path / "dflash-baseline.json").read_text())  # the default --out
    assert data["throughput_tokens_per_s"] == 20000.0
    assert data["window"] == {"from": start, "to": end}


def test_a_run_shorter_than_its_warm_up_is_taken_whole(tmp_path: Path) -> None:
    log = write_run(tmp_path, [(4, 12.0)])
    out = cli("baseline", "save", str(log), "--out", "b.json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "warm-up" in out.stderr
    assert json.loads((tmp_path / "b.json").read_text())["throughput_tokens_per_s"] == 12000.0


def test_save_replaces_the_old_file_whole(tmp_path: Path) -> None:
    log = write_run(tmp_path, [(30, 20.0)])
    (tmp_path / "b.json").write_text('{"version": 1, "throughput_tokens_per_s": 1.0}')
    assert cli("baseline", "save", str(log), "--out", "b.json", cwd=tmp_path).returncode == 0
    assert load_baseline(tmp_path / "b.json").throughput_tokens_per_s == 20000.0
    (tmp_path / "dir.json").mkdir()
    out = cli("baseline", "save", str(log), "--out", "dir.json", cwd=tmp_path)
    assert one_line(out).startswith("dflash-watch: cannot write dir.json")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.json", "dir.json", "train.log"]


def test_save_takes_logs_and_out_from_the_config(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    write_run(tmp_path, [(30, 20.0)]).rename(tmp_path / "logs" / "rank0.log")
    (tmp_path / "dflash-watch.toml").write_text('logs = ["logs/rank*.log"]\nbaseline_file = "good.json"\n')
    out = cli("baseline", "save", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert load_baseline(tmp_path / "good.json").throughput_tokens_per_s == 20000.0
    shown = cli("baseline", "show", cwd=tmp_path)
    assert shown.returncode == 0 and "20.0 Ktok/s" in shown.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["save", "quiet.log"], "dflash-watch: no throughput in quiet.log: no progress line with a rate"),
        (["save", "train.log", "--from", "2030-01-01T00:00:00"], "no throughput in train.log between --from and --to"),
        (["save", "train.log", "--from", "yesterday"], "dflash-watch: --from 'yesterday': not a time (ISO 8601"),
        (["save", "train.log", "--from", "2000", "--to", "1000"], "dflash-watch: --to 1000 is not after --from 2000"),
        (["save", "train.log", "--env", "no-venv"], "dflash-watch: --env no-venv: not a directory"),
        (["save", "missing.log"], "dflash-watch: missing.log: no such file"),
        (["save"], "dflash-watch: no logs to make a baseline from"),
        (["show"], "dflash-watch: baseline file dflash-baseline.json not found"),
        (["show", "bad.json"], "dflash-watch: baseline file bad.json: invalid JSON"),
        (["show", "old.json"], "dflash-watch: baseline file old.json: unsupported version 2"),
        (["show", "pad.json"], "dflash-watch: baseline file pad.json: padding_efficiency must be a share in (0, 1], "
                               "got 7"),
        (["show", "interval.json"], "baseline file interval.json: step_interval_s must be a positive number of "
                                    "seconds, got -1"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    write_run(tmp_path, [(30, 20.0)])
    (tmp_path / "quiet.log").write_text("2026-11-29 10:00:00 loading the model\n2026-11-29 10:00:05 done\n")
    (tmp_path / "bad.json").write_text('{"version": 1, "throughput')
    (tmp_path / "old.json").write_text('{"version": 2, "throughput_tokens_per_s": 3.0}')
    (tmp_path / "pad.json").write_text('{"version": 1, "throughput_tokens_per_s": 3.0, "padding_efficiency": 7}')
    (tmp_path / "interval.json").write_text('{"version": 1, "throughput_tokens_per_s": 3.0, "step_interval_s": -1}')
    assert message in one_line(cli("baseline", *args, cwd=tmp_path))


def test_show_prints_text_from_the_file_as_data(tmp_path: Path) -> None:
    (tmp_path / "b.json").write_text(json.dumps({
        "version": 1, "throughput_tokens_per_s": 2.5, "throughput_unit": "it/s",
        "venv": "/opt/\x1b[31mred\x9b2J", "\x1bkey": "v\x00", "gpu_memory": {"0": "odd"},
    }))
    out = cli("baseline", "show", "b.json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "throughput    2.5 it/s" in out.stdout
    assert "/opt/\\x1b[31mred\\x9b2J" in out.stdout
    assert not any(ord(c) < 32 and c != "\n" or 0x7F <= ord(c) <= 0x9F for c in out.stdout), ascii(out.stdout)


def test_show_reads_a_baseline_the_dashboard_saved(tmp_path: Path) -> None:
    """The `b` key saves the last window_s before captured_at, no "window" key."""
    (tmp_path / "b.json").write_text(json.dumps(
        {"version": 1, "throughput_tokens_per_s": 21500.0, "window_s": 600.0, "captured_at": T0 + 600}))
    out = cli("baseline", "show", "b.json", "--tz", "UTC", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout == (
        "baseline b.json\n"
        "  throughput  21.5 Ktok/s\n"
        "  window      2026-11-29 10:00:00 to 10:10:00 (10 min)\n"
    )


def test_help_says_the_env_gives_the_package_fingerprint(tmp_path: Path) -> None:
    out = cli("baseline", "save", "--help", cwd=tmp_path)
    assert out.returncode == 0 and "--env VENV" in out.stdout and "fingerprint" in out.stdout


def test_a_run_without_a_tokens_rate_keeps_its_own_unit() -> None:
    """tqdm prints it/s: the baseline keeps that rate and says its unit."""
    from dflash_watch.baseline.window import Window, capture_window, window_monitor
    from dflash_watch.parsers.events import GpuSample, Progress

    def events(unit_of_second_half: str) -> list:
        out = []
        for i in range(60):
            t = T0 + 2.0 * i
            unit = "it/s" if i < 30 else unit_of_second_half
            out.append(Progress(t, f"train.log:{i + 1}", step=i + 1, rate=0.5 if unit == "it/s" else 8.0,
                                rate_unit=unit, step_seconds=2.0))
            out.append(GpuSample(t, 0, 40 * GIB, 80 * GIB))
        return out

    def replay_window(window: Window):
        monitor = window_monitor(window, keep_lines=0)
        monitor.feed_events(events("it/s"))
        monitor.finish()
        return monitor

    monitor, window = capture_window(replay_window, Window(warmup_events=5, warmup_s=10.0))
    assert window.unit == "it/s"
    captured = monitor.capture_baseline(monitor.kept_last - monitor.kept_first)
    assert captured is not None and captured.throughput_tokens_per_s == 0.5
    assert captured.extra["gpu_memory"]["0"]["level_bytes"] == 40 * GIB
    # The most common unit wins; the others are not mixed into it.
    def mixed(window: Window):
        monitor = window_monitor(window, keep_lines=0)
        monitor.feed_events(events("samples/s")[:80])
        return monitor

    monitor, window = capture_window(mixed, Window(warmup_events=0, warmup_s=0.0))
    assert window.unit == "it/s"
    assert monitor.capture_baseline(1e9).throughput_tokens_per_s == 0.5


def test_a_failed_write_leaves_the_old_baseline_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Written beside the target and moved over it: a crash before the move
    leaves the old file as it was, and no temp file behind."""
    import dflash_watch.baseline.store as baseline_module
    from dflash_watch.baseline.store import Baseline, save_baseline

    target = tmp_path / "b.json"
    target.write_text('{"version": 1, "throughput_tokens_per_s": 1.0}')
    moves: list[tuple[str, str]] = []

    def crash(src: str, dst: object) -> None:
        moves.append((str(src), str(dst)))
        raise OSError("disk gone")

    monkeypatch.setattr(baseline_module.os, "replace", crash)
    with pytest.raises(OSError):
        save_baseline(Baseline(2.0), target)
    assert target.read_text() == '{"version": 1, "throughput_tokens_per_s": 1.0}'
    ((src, dst),) = moves
    assert Path(src).parent == tmp_path and dst == str(target) and not Path(src).exists()


def test_auto_baseline_saves_a_healthy_steady_run_and_keeps_the_better_one(tmp_path: Path) -> None:
    """Healthy for healthy_for_s with a steady rate: saved once; a firing alert
    restarts the count; a slower run never replaces the saved one."""
    from dflash_watch.baseline.auto import AutoBaseline, auto_baseline_path
    from dflash_watch.detectors.base import Alert
    from dflash_watch.monitor import Monitor
    from dflash_watch.parsers.events import Progress

    path = auto_baseline_path(tmp_path / "state", "train/run 1")
    assert path == tmp_path / "state" / "baseline-train_run_1.json"

    def run(ktok: float, minutes: int, auto: AutoBaseline, alert_at: int | None = None) -> list[float]:
        monitor, saves = Monitor(keep_lines=0), []
        for i in range(minutes * 20):  # a step every 3 s
            t = T0 + 3.0 * i
            monitor.feed_events([Progress(t, f"train.log:{i + 1}", step=i + 1, tokens_per_s=ktok * 1000)])
            if alert_at is not None and i == alert_at * 20:
                monitor.raise_alert(Alert(t, "stall", "firing", "warning", "no progress", "train.log:1"))
            if alert_at is not None and i == alert_at * 20 + 20:
                monitor.raise_alert(Alert(t, "stall", "resolved", "info", "progress again", "train.log:1"))
            if auto.consider(monitor, t) is not None:
                saves.append(t - T0)
        return saves

    auto = AutoBaseline(path, healthy_for_s=600.0, resave_s=1e9)
    assert run(20.0, 15, auto, alert_at=2) == [3 * 60.0 + 600.0]  # healthy from the resolve at 3 min
    saved = load_baseline(path)
    assert saved.throughput_tokens_per_s == 20000.0 and saved.extra["auto_saved"] is True
    assert saved.extra["throughput_p10"] == saved.extra["throughput_p90"] == 20000.0
    slower = AutoBaseline(path, healthy_for_s=600.0)
    assert run(15.0, 12, slower) == [] and "below the saved baseline" in slower.reason
    assert load_baseline(path).throughput_tokens_per_s == 20000.0
    faster = AutoBaseline(path, healthy_for_s=600.0)
    assert run(21.0, 12, faster) == [600.0] and load_baseline(path).throughput_tokens_per_s == 21000.0


def test_a_tqdm_log_without_stamps_is_dated_within_its_run_and_its_step_interval_is_real(tmp_path: Path) -> None:
    """An HF Trainer's stdout: one tqdm bar (30 steps/s, redrawn every 3
    steps, its elapsed counter in whole seconds), no timestamp. Its window
    lies before the file's last write, not a run's length after it (its
    probe lines fell outside and the diff missed the padding), and a step
    takes 1/30 s, not 1 s over the few steps between two redraws."""
    import os

    total, rate = 4500, 30.0  # 150 s: past the 60 s warm-up
    states = [f"\r{n * 100 // total:3d}%|#         | {n}/{total} [{int(n / rate) // 60:02d}:{int(n / rate) % 60:02d}"
              f"<00:10, {rate:.2f}it/s]" for n in range(3, total + 1, 3)]
    log = tmp_path / "train.log"
    log.write_text("".join(states) + "\n")
    end = T0 + total / rate
    os.utime(log, (end, end))
    out = tmp_path / "base.json"
    saved = cli("baseline", "save", str(log), "--out", str(out), cwd=tmp_path)
    assert saved.returncode == 0, saved.stderr
    data = json.loads(out.read_text())
    assert data["step_interval_s"] == pytest.approx(1 / rate, rel=0.1)
    assert T0 <= data["window"]["from"] < data["window"]["to"] <= end + 1.0
