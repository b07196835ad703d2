"""`dflash-watch baseline diff` as a user runs it: real logs, real venvs, the CLI in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from test_config import cli, one_line  # the command as a user runs it, HOME in the test's folder

T0 = datetime(2026, 11, 29, 10, 0, 0, tzinfo=UTC).timestamp()
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tracebacks"
PY = f"python{sys.version_info.major}.{sys.version_info.minor}"


def clock(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S")


def write_log(path: Path, ktok: float, pad: float, steps: int = 120, tail: str = "") -> Path:
    """A warm-up at 5 Ktok/s, then ``ktok`` with padding efficiency ``pad``, a step every 3 s."""
    lines = [f"{clock(T0 + 3 * i)} step {i + 1}/5000 | loss 2.0 | pad_eff {pad} | {5.0 if i < 21 else ktok} Ktok/s"
             for i in range(steps)]
    path.write_text("\n".join(lines) + "\n" + tail)
    return path


def make_venv(path: Path, packages: dict[str, str]) -> Path:
    """A venv with hand-made dist-info (the real pip-installed case is test_fingerprint's)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=60)
    site = path / "lib" / PY / "site-packages"
    for name, version in packages.items():
        info = site / f"{name}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    return path


def test_diff_ranks_padding_first_and_names_the_environment_drift(tmp_path: Path) -> None:
    write_log(tmp_path / "good.log", 21.5, 0.93)
    make_venv(tmp_path / "good-venv", {"transformers": "5.8.1", "accelerate": "1.10.0", "rich": "13.0.0"})
    make_venv(tmp_path / "bad-venv", {"transformers": "5.6.0", "rich": "13.0.0"})
    saved = cli("baseline", "save", "good.log", "--env", "good-venv", "--out", "b.json", "--tz", "UTC", cwd=tmp_path)
    assert saved.returncode == 0, saved.stderr
    data = json.loads((tmp_path / "b.json").read_text())
    assert data["padding_efficiency"] == 0.93 and data["fingerprint"]["packages"]["accelerate"] == "1.10.0"
    assert data["throughput_p10"] == data["throughput_p90"] == 21500.0

    fx = (FIXTURES / "fx_trace_vs_compiled_thread_detected_torch2.13.0.txt").read_text()
    write_log(tmp_path / "bad.log", 4.3, 0.41, tail=fx)
    out = cli("baseline", "diff", "bad.log", "--baseline", "b.json", "--env", "bad-venv", "--json", "--tz", "UTC",
              cwd=tmp_path)
    assert out.returncode == 1, out.stderr  # the run checked is unhealthy
    report = json.loads(out.stdout)
    assert report["baseline"] == "b.json"
    changes = report["changes"]
    assert all({"what", "baseline", "now", "says", "next_step"} <= set(c) for c in changes)
    whats = [c["what"] for c in changes]
    assert whats[0] == "padding_efficiency" and (changes[0]["baseline"], changes[0]["now"]) == (0.93, 0.41)
    assert changes[0]["says"].startswith("padding efficiency 41% vs 93% in the good run: batches are padded far more")
    accelerate = changes[whats.index("package:accelerate")]
    assert (accelerate["baseline"], accelerate["now"]) == ("1.10.0", None)
    assert whats.index("package:transformers") < whats.index("throughput")
    assert "package:rich" not in whats  # unchanged
    crash = changes[whats.index("crash:fx_tracing")]
    assert "an FX-tracing crash explains a crash, not a slowdown: both are present here" in crash["says"]

    text = cli("baseline", "diff", "bad.log", "--baseline", "b.json", "--env", "bad-venv", "--tz", "UTC", cwd=tmp_path)
    assert text.returncode == 1
    lines = text.stdout.splitlines()
    assert lines[0].startswith("what changed since b.json, most likely cause first (alerts that fired:")
    assert lines[1].startswith("1. padding_efficiency: padding efficiency 41% vs 93%")
    assert lines[2].startswith("   next: print the bucket boundaries the loader uses")


def in_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
               *args: str) -> tuple[int, str, str]:
    """The CLI's own ``main`` in this process (the subprocess start-up is
    the slow part of a CLI test): exit code, stdout, stderr."""
    from dflash_watch.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    capsys.readouterr()
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_the_good_run_against_itself_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    write_log(tmp_path / "good.log", 21.5, 0.93)
    assert in_process(tmp_path, monkeypatch, capsys, "baseline", "save", "good.log", "--out", "b.json")[0] == 0
    code, out, err = in_process(tmp_path, monkeypatch, capsys, "baseline", "diff", "good.log", "--baseline", "b.json")
    assert (code, out) == (0, "no change from the good run in b.json\n"), err
    code, out, _ = in_process(tmp_path, monkeypatch, capsys, "baseline", "diff", "good.log", "--baseline", "b.json",
                              "--json")
    assert code == 0 and json.loads(out) == {"baseline": "b.json", "changes": []}


@pytest.mark.parametrize(
    "args, message",
    [
        (["good.log"], "baseline file dflash-baseline.json not found"),
        (["good.log", "--baseline", "bad.json"], "baseline file bad.json: invalid JSON"),
        (["missing.log", "--baseline", "b.json"], "missing.log: no such file"),
        (["good.log", "--baseline", "b.json", "--env", "nowhere"], "--env nowhere: not a directory"),
        (["quiet.log", "--baseline", "b.json"], "no throughput in quiet.log"),
        (["--baseline", "b.json"], "no logs of the current run"),
        (["good.log", "--baseline", "b.json", "--probe", "none-*.jsonl"], "--probe 'none-*.jsonl' matches no file"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    write_log(tmp_path / "good.log", 21.5, 0.93, steps=30)
    (tmp_path / "quiet.log").write_text("2026-11-29 10:00:00 loading\n")
    (tmp_path / "bad.json").write_text('{"version": 1')
    (tmp_path / "b.json").write_text('{"version": 1, "throughput_tokens_per_s": 21500.0}')
    code, _, err = in_process(tmp_path, monkeypatch, capsys, "baseline", "diff", *args)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and message in lines[0], err


def test_a_bad_baseline_is_one_line_from_the_real_command(tmp_path: Path) -> None:
    """The same error as a user sees it: one line, no traceback."""
    write_log(tmp_path / "good.log", 21.5, 0.93, steps=30)
    (tmp_path / "bad.json").write_text('{"version": 1')
    assert "baseline file bad.json: invalid JSON" in one_line(
        cli("baseline", "diff", "good.log", "--baseline", "bad.json", cwd=tmp_path))


def test_a_crash_in_the_warm_up_still_counts_for_the_diff() -> None:
    """The window leaves the warm-up's rates and memory out, but an early
    FX-tracing crash is a symptom the diff must explain."""
    from dflash_watch.baseline.diagnose import fired_detectors as fired
    from dflash_watch.baseline.window import Window, window_monitor
    from dflash_watch.parsers.events import Crash, Progress

    events = [Progress(T0 + 3 * i, f"train.log:{i + 1}", step=i + 1, tokens_per_s=5000.0) for i in range(40)]
    events.insert(3, Crash(T0 + 7, "train.log:3", "fx_tracing", "fx_tracing", "NameError", "fx", "sig", None))
    for keep, expected in ((True, {"fx_tracing"}), (False, set())):
        monitor = window_monitor(Window(warmup_events=5, warmup_s=60.0, keep_crashes=keep), keep_lines=0)
        monitor.feed_events(events)
        monitor.finish()
        assert fired(monitor) & {"fx_tracing"} == expected
        assert len(monitor.warmup_rates) == 20 and len(monitor.rates) == 20


def test_monitor_suspects_for_an_alert_come_from_the_live_figures() -> None:
    """What the Monitor attaches to a throughput_drop alert: the top causes of
    its own recent window against its baseline, symptoms left out."""
    from dflash_watch.baseline.profile import monitor_suspects
    from dflash_watch.baseline.store import Baseline
    from dflash_watch.monitor import Monitor
    from dflash_watch.parsers.events import PaddingReport, Progress

    good = Baseline(21500.0, {"padding_efficiency": 0.93})
    monitor = Monitor(keep_lines=0, baseline=good)
    assert monitor_suspects(Monitor(keep_lines=0)) == []  # no baseline, nothing to compare
    for i in range(200):
        t = T0 + 3 * i
        monitor.feed_events([Progress(t, f"train.log:{i + 1}", step=i + 1, tokens_per_s=4300.0),
                             PaddingReport(t, 0.41, f"train.log:{i + 1}")])
    suspects = monitor_suspects(monitor, firing={"throughput_drop"})
    assert [s["what"] for s in suspects] == ["padding_efficiency"]
    assert suspects[0]["baseline"] == 0.93 and suspects[0]["now"] == 0.41
    assert suspects[0]["says"].endswith("explains the throughput drop")


def test_a_run_no_longer_than_its_warm_up_is_said_compared_whole(tmp_path: Path) -> None:
    """The diff said "the baseline covers all of it", the save's words: it
    saves no baseline."""
    write_log(tmp_path / "good.log", 21.5, 0.93)
    assert cli("baseline", "save", "good.log", "--out", "b.json", "--tz", "UTC", cwd=tmp_path).returncode == 0
    write_log(tmp_path / "short.log", 21.5, 0.93, steps=10)
    out = cli("baseline", "diff", "short.log", "--baseline", "b.json", "--tz", "UTC", cwd=tmp_path)
    assert "the run is no longer than its warm-up; it is compared whole" in out.stderr
    assert "baseline covers" not in out.stderr
