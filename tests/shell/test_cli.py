"""The command line as a user meets it: real processes, real files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def cli(*args: str, cwd: Path = ROOT, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dflash_watch.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


def test_help_imports_no_heavy_module() -> None:
    code = (
        "import sys\n"
        "from dflash_watch.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('textual', 'numpy', 'pynvml', 'plotext', 'watchdog', 'rich') if m in sys.modules]\n"
        "sys.stderr.write('HEAVY=' + ','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert "replay" in out.stdout and "demo" in out.stdout
    assert out.stderr.strip().endswith("HEAVY="), out.stderr


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["replay", "--json", "/nonexistent/train.log"], "/nonexistent/train.log: no such file"),
        (["replay", "--json", "."], "is a directory"),
        (["replay", "--json", "--tz", "Mars/Olympus", "README.md"], "unknown time zone"),
        (["replay", "--json", "--baseline", "/nonexistent.json", "README.md"], "baseline file /nonexistent.json not found"),
        (["replay"], "the following arguments are required"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], fragment: str) -> None:
    out = cli(*args)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0], out.stderr
    assert "Traceback" not in out.stderr


def test_bad_baseline_and_config_are_one_line(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text("2026-11-29 10:00:00 step 1/10 | 21.5 Ktok/s\n")
    bad = tmp_path / "b.json"
    bad.write_text('{"version": 1, "throughput_tokens_per_s": -3}')
    out = cli("replay", "--json", "--baseline", str(bad), str(log))
    assert out.returncode == 2 and "must be a positive number" in out.stderr
    cfg = tmp_path / "c.toml"
    cfg.write_text("[detectors]\nno_such_threshold = 3\n")
    out = cli("replay", "--json", "--config", str(cfg), str(log))
    assert out.returncode == 2 and "detectors.no_such_threshold: unknown threshold" in out.stderr
    cfg.write_text("logs = [1, 2]\n")
    out = cli("replay", "--json", "--config", str(cfg), str(log))
    assert out.returncode == 2 and "logs[]: expected str" in out.stderr


def test_replay_json_lines_follow_the_contract(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    lines = [f"2026-11-29 10:{i // 60:02d}:{i % 60:02d} step {i}/1000 | loss 2.1 | 21.5 Ktok/s" for i in range(0, 600, 5)]
    lines += [
        "2026-11-29 10:10:00 Traceback (most recent call last):",
        '  File "train.py", line 10, in <module>',
        "    main()",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.1 GiB",
    ]
    log.write_text("\n".join(lines) + "\n")
    out = cli("replay", "--json", "--tz", "UTC", str(log))
    assert out.returncode == 0, out.stderr
    alerts = [json.loads(line) for line in out.stdout.splitlines()]
    assert len(alerts) == 1
    a = alerts[0]
    for key in ("time", "detector", "state", "severity", "gpu", "kind", "message", "source", "evidence"):
        assert key in a
    assert (a["detector"], a["state"], a["severity"], a["kind"]) == ("crash", "firing", "critical", "cuda_oom")
    assert a["source"] == f"train.log:{len(lines)}"
    # 2026-11-29 10:10:00 UTC, the traceback's last line inherits it.
    assert a["time"] == 1795947000.0


def test_replay_human_report(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text("2026-11-29 10:00:00 step 1/10 | loss 2.0 | 21.5 Ktok/s\n")
    out = cli("replay", "--tz", "UTC", str(log))
    assert out.returncode == 0, out.stderr
    assert "progress lines 1" in out.stdout and "21.5 Ktok/s" in out.stdout


def test_init_writes_a_config_that_loads(tmp_path: Path) -> None:
    out = cli("init", str(tmp_path / "dfw.toml"))
    assert out.returncode == 0, out.stderr
    from dflash_watch.config import load_config

    cfg = load_config(tmp_path / "dfw.toml")
    assert cfg.run.session == "dflash-train" and cfg.logs
    again = cli("init", str(tmp_path / "dfw.toml"))
    assert again.returncode == 2 and "--force" in again.stderr


def test_the_bundled_example_replays_to_its_story() -> None:
    log = ROOT / "examples" / "dflash_broken_batching_fx_crash.log"
    gpu = ROOT / "examples" / "dflash_broken_batching_fx_crash.gpu.jsonl"
    out = cli("replay", "--json", "--tz", "UTC", str(log), "--gpu-samples", str(gpu))
    assert out.returncode == 0, out.stderr
    fired = [json.loads(line) for line in out.stdout.splitlines()]
    fired = [(a["detector"], a["gpu"]) for a in fired if a["state"] == "firing"]
    assert sorted(fired[:3]) == [("memory_volatility", 5), ("memory_volatility", 6), ("memory_volatility", 7)]
    assert fired[3:] == [("throughput_drop", None), ("fx_tracing", None)]
