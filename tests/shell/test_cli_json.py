"""``--json`` on ``status``, ``alerts test`` and ``baseline show``, as a
script runs them: the real CLI in a subprocess, real files, a real tmux
server on a private socket and real loopback HTTP servers.

Each prints one JSON object on stdout with the same exit code as its text
form; an error stays one line on stderr with exit 2 and nothing on stdout.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest
from loopback_http import LoopbackServer, refused_url

ROOT = Path(__file__).resolve().parents[2]


def cli(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The CLI with its state and home in ``tmp_path``: never the user's job."""
    base = {**os.environ, "HOME": str(tmp_path), "XDG_STATE_HOME": str(tmp_path / "state"),
            "XDG_CONFIG_HOME": str(tmp_path / "config"), "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "dflash_watch", *args], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60, env={**base, **(env or {})})


def one_object(out: subprocess.CompletedProcess[str]) -> dict:
    assert out.stdout.count("\n") == 1 and out.stdout.endswith("\n"), out.stdout
    value = json.loads(out.stdout)
    assert isinstance(value, dict)
    return value


def one_line_error(out: subprocess.CompletedProcess[str], fragment: str) -> None:
    assert out.returncode == 2, out
    assert out.stdout == "" and out.stderr.count("\n") == 1 and fragment in out.stderr, out.stderr
    assert "Traceback" not in out.stderr


# ------------------------------------------------------------------ status
@pytest.mark.skipif(subprocess.run(["which", "tmux"], capture_output=True).returncode != 0,
                    reason="tmux not installed")
def test_status_json_absent_running_and_stopped(tmp_path: Path, tmux_socket: str) -> None:
    flags = ["--session", "train", "--socket", tmux_socket, "--grace", "1"]
    out = cli(tmp_path, "status", "--json", *flags)
    assert out.returncode == 1, out.stderr
    st = one_object(out)
    assert (st["state"], st["session"], st["running"]) == ("absent", "train", False)
    assert st["pids"] == [] and st["survivors"] == []
    assert st["code"] is None and st["started_at"] is None and "tmux server not running" in st["message"]

    sleeper = f"{shlex.quote(sys.executable)} -c 'import time; time.sleep(120)'"
    assert cli(tmp_path, "start", "--cmd", sleeper, *flags).returncode == 0
    deadline = time.monotonic() + 15
    while True:
        out = cli(tmp_path, "status", "--json", *flags)
        st = one_object(out)
        if st["pids"] or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert out.returncode == 0, out.stderr
    assert (st["state"], st["running"], st["survivors"]) == ("running", True, None)
    assert st["pid"] in st["pids"] and isinstance(st["started_at"], float) and st["uptime_s"] >= 0
    assert st["line"].startswith("running in train (pid ")
    for key in ("code", "signal", "asked", "run_id", "pane", "message"):
        assert key in st

    assert cli(tmp_path, "abort", *flags).returncode == 0
    out = cli(tmp_path, "status", "--json", *flags)
    assert out.returncode == 1, out.stderr
    st = one_object(out)
    assert st["state"] in ("exited", "killed") and st["asked"] == "abort" and st["survivors"] == []
    assert not st["running"] and st["line"].startswith("stopped as asked (abort)")


def test_status_json_bad_input_stays_one_line(tmp_path: Path) -> None:
    one_line_error(cli(tmp_path, "status", "--json", "--session", "a:b", "--socket", "dfw-json-none"),
                   "session name")
    one_line_error(cli(tmp_path, "status", "--json", "--config", str(tmp_path / "missing.toml")),
                   "missing.toml not found")


# ------------------------------------------------------------- alerts test
def test_alerts_test_json_one_object_per_sink(tmp_path: Path) -> None:
    with LoopbackServer() as ok, LoopbackServer([500]) as bad:
        (tmp_path / "c.toml").write_text(
            f'[[alerts.sink]]\nkind = "slack"\nurl_env = "DFW_TEST_SLACK"\n'
            f'[[alerts.sink]]\nkind = "webhook"\nname = "ops"\nurl = "{bad.url}"\n'
            f'[[alerts.sink]]\nkind = "ntfy"\nurl = "{refused_url()}"\n'
            f'[[alerts.sink]]\nkind = "webhook"\nurl_env = "DFW_TEST_UNSET"\n'
        )
        out = cli(tmp_path, "alerts", "test", "--json", "--config", str(tmp_path / "c.toml"),
                  "--timeout", "5", env={"DFW_TEST_SLACK": ok.url + "/xoxSECRET"})
        ok.wait_for(1)
    assert out.returncode == 1, out.stderr
    sinks = one_object(out)["sinks"]
    assert [(s["name"], s["kind"], s["url_env"], s["ok"]) for s in sinks] == [
        ("slack[0]", "slack", "DFW_TEST_SLACK", True),
        ("ops", "webhook", None, False),
        ("ntfy[0]", "ntfy", None, False),
        ("webhook[1]", "webhook", "DFW_TEST_UNSET", False),
    ]
    assert [s["error"] for s in sinks[:3]] == [None, "HTTP 500 Internal Server Error", "connection refused"]
    assert "DFW_TEST_UNSET" in sinks[3]["error"]
    assert "SECRET" not in out.stdout + out.stderr


def test_alerts_test_json_all_ok_exits_0_and_errors_stay_one_line(tmp_path: Path) -> None:
    argv = json.dumps([sys.executable, "-c", "import sys; sys.stdin.read()"])
    (tmp_path / "c.toml").write_text(f'[[alerts.sink]]\nkind = "command"\nargv = {argv}\n')
    out = cli(tmp_path, "alerts", "test", "--json", "--config", str(tmp_path / "c.toml"))
    assert out.returncode == 0, out.stderr
    only = {"name": "command[0]", "kind": "command", "url_env": None, "ok": True, "error": None}
    assert one_object(out) == {"sinks": [only]}
    (tmp_path / "empty.toml").write_text("")
    one_line_error(cli(tmp_path, "alerts", "test", "--json", "--config", str(tmp_path / "empty.toml")),
                   "no [[alerts.sink]] tables")


# ----------------------------------------------------------- baseline show
def test_baseline_show_json_is_the_file_and_what_show_derives(tmp_path: Path) -> None:
    saved = {"version": 1, "throughput_tokens_per_s": 21500.0,
             "window": {"from": 1764410400.0, "to": 1764414000.0}, "step_interval_s": 2.5,
             "gpu_memory": {"5": {"level_bytes": 76235669504, "band_bytes": 1048576}},
             "future_key": {"odd\x1b[31m": [1, 2]}}
    path = tmp_path / "b.json"
    path.write_text(json.dumps(saved))
    out = cli(tmp_path, "baseline", "show", "--json", "--tz", "UTC", str(path))
    assert out.returncode == 0, out.stderr
    assert "\x1b" not in out.stdout  # text from the file is data, escaped
    shown = one_object(out)
    assert shown["baseline"] == str(path) and shown["file"] == saved
    assert (shown["unit"], shown["tokens_per_s"]) == ("tok/s", 21500.0)
    assert shown["window"] == {"from": 1764410400.0, "to": 1764414000.0}
    rows = {name: value for name, value in shown["rows"]}
    assert rows["throughput"] == "21.5 Ktok/s" and rows["step interval"] == "2.5 s"
    assert rows["window"].startswith("2025-11-29 10:00:00 to 11:00:00")
    assert "GPU 5 memory" in rows and "future_key" in rows
    # The text form shows the same rows.
    text = cli(tmp_path, "baseline", "show", "--tz", "UTC", str(path))
    assert text.returncode == 0 and f"baseline {path}" in text.stdout and "21.5 Ktok/s" in text.stdout


def test_baseline_show_json_other_unit_and_the_dashboard_window(tmp_path: Path) -> None:
    path = tmp_path / "b.json"
    path.write_text(json.dumps({"version": 1, "throughput_tokens_per_s": 3.2, "throughput_unit": "it/s",
                                "window_s": 600, "captured_at": 1764414000.0}))
    shown = one_object(cli(tmp_path, "baseline", "show", "--json", str(path)))
    assert (shown["unit"], shown["tokens_per_s"]) == ("it/s", None)
    assert shown["window"] == {"from": 1764413400.0, "to": 1764414000.0}


def test_baseline_show_json_bad_file_stays_one_line(tmp_path: Path) -> None:
    one_line_error(cli(tmp_path, "baseline", "show", "--json", str(tmp_path / "none.json")), "not found")
    (tmp_path / "bad.json").write_text('{"version": 2, "throughput_tokens_per_s": 1}')
    one_line_error(cli(tmp_path, "baseline", "show", "--json", str(tmp_path / "bad.json")),
                   "unsupported version")
