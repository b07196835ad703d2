"""The command line as a user meets it: real processes, real files."""

from __future__ import annotations

import json
import os
import re
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


def test_version_and_python_dash_m_are_the_same_light_entry_point() -> None:
    """``dflash-watch --version`` names the installed distribution's version
    (the package's ``__version__`` without metadata); ``python -m
    dflash_watch`` is the same CLI; neither loads a heavy module."""
    from importlib.metadata import version

    import dflash_watch

    code = (
        "import runpy, sys\n"
        "sys.argv = ['dflash_watch', '--version']\n"
        "try:\n    runpy.run_module('dflash_watch', run_name='__main__')\n"
        "except SystemExit as exc:\n    sys.stderr.write(f'RC={exc.code}')\n"
        "heavy = [m for m in ('textual', 'numpy', 'pynvml', 'plotext', 'watchdog', 'rich')\n"
        "         if m in sys.modules]\n"
        "sys.stderr.write(' HEAVY=' + ','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.stdout == f"dflash-watch {version('dflash-watch')}\n", out
    assert out.stderr == "RC=0 HEAVY=", out.stderr
    assert version("dflash-watch") == dflash_watch.__version__  # one version, written once
    out = subprocess.run([sys.executable, "-m", "dflash_watch", "status", "--help"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.startswith("usage: dflash-watch status")
    assert "--json" in out.stdout


def test_version_without_metadata_is_the_package_version() -> None:
    """Run from a checkout that was never installed: no distribution to ask."""
    code = (
        "import importlib.metadata as md\n"
        "def missing(name):\n    raise md.PackageNotFoundError(name)\n"
        "md.version = missing\n"
        "import dflash_watch\n"
        "dflash_watch.__version__ = '9.8.7'\n"
        "from dflash_watch.cli import main\n"
        "main(['--version'])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert (out.returncode, out.stdout, out.stderr) == (0, "dflash-watch 9.8.7\n", "")


def test_package_metadata_is_pep_639_and_the_extras_are_one() -> None:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    meta = project["project"]
    assert meta["license"] == "MIT" and meta["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License\n") and "Copyright (c) 2026 the dflash-watch authors" in text
    # setuptools >= 77 refuses a License classifier beside an SPDX expression.
    assert not [c for c in meta["classifiers"] if c.startswith("License ::")]
    assert any(r.startswith("setuptools>=77") for r in project["build-system"]["requires"])
    extras = meta["optional-dependencies"]
    assert extras["probe"] == ["torch"] and extras["torch"] == ["dflash-watch[probe]"]
    assert meta["dynamic"] == ["version"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "dflash_watch.__version__"}


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
    assert out.returncode == 2 and "[detectors] no_such_threshold: unknown key" in out.stderr
    assert "`dflash-watch init` writes a template listing every key" in out.stderr
    cfg.write_text("logs = [1, 2]\n")
    out = cli("replay", "--json", "--config", str(cfg), str(log))
    assert out.returncode == 2 and "logs = [1, 2]: must be a path or a list of paths" in out.stderr


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
    assert fired[3:] == [("padding", None), ("throughput_drop", None), ("fx_tracing", None)]


@pytest.mark.parametrize("command", ["relaunch", "start"])
def test_relaunch_without_a_command_is_a_usage_error(tmp_path: Path, command: str) -> None:
    """No command to run is a usage error (2), not a job in the wrong state (1)."""
    out = subprocess.run(
        [sys.executable, "-m", "dflash_watch.cli", command, "--session", "dfw-no-cmd", "--socket", "dfw-no-cmd"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
        env={**os.environ, "HOME": str(tmp_path), "XDG_STATE_HOME": str(tmp_path), "PYTHONPATH": str(ROOT)},
    )
    assert out.returncode == 2, out
    assert out.stderr == "dflash-watch: no run command configured: set [run] command in the config or pass --cmd\n"


RAW_CONTROLS = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029]")


def test_alert_json_escapes_control_characters_in_every_string() -> None:
    from dflash_watch.detectors.base import Alert

    hostile = "boom \x1b[31mred\x9b2J nul\x00 del\x7f nel\x85 ls\u2028 é 漢"
    alert = Alert(1.0, "crash", "firing", "critical", hostile, "train\x1b.log:3",
                  evidence={"key\x1b[0m": [hostile, {"\x9b": "\x00"}]})
    line = alert.to_json()
    assert not RAW_CONTROLS.search(line), ascii(line)
    assert "\\u001b[31m" in line and "\\u009b" in line and "\\u0000" in line
    assert "é 漢" in line  # other characters stay readable (ensure_ascii=False)
    back = json.loads(line)
    assert back["message"] == hostile and back["source"] == "train\x1b.log:3"
    assert back["evidence"] == {"key\x1b[0m": [hostile, {"\x9b": "\x00"}]}
    assert len(line.splitlines()) == 1


def test_replay_json_never_prints_a_raw_escape_from_the_log(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text(
        "2026-11-29 10:00:00 step 1/10 | 21.5 Ktok/s\n"
        "2026-11-29 10:00:01 Traceback (most recent call last):\n"
        '  File "train.py", line 10, in <module>\n'
        "RuntimeError: CUDA error: \x1b[31mbad\x1b[0m \x9b2J \x00 device-side assert triggered\n"
        "2026-11-29 10:00:02 done\n",
        encoding="utf-8",
    )
    out = cli("replay", "--json", "--tz", "UTC", str(log))
    assert out.returncode == 0, out.stderr
    assert out.stdout and not RAW_CONTROLS.search(out.stdout), ascii(out.stdout)
    (alert,) = [json.loads(line) for line in out.stdout.splitlines()]
    # The parser drops ANSI colour codes; the lone C1 CSI reaches the alert,
    # and only escaped.
    assert "\x9b2J" in alert["message"] and "\\u009b2J" in out.stdout
