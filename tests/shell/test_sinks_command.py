"""Sinks that run programs: the command sink (argv, the alert JSON on stdin,
a timeout that kills only its own child), notify-send, and the bell."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from sink_helpers import Notes, alert, dispatcher, until

from dflash_watch.sinks.senders import BellSender


def _gone(pid: int) -> bool:
    try:
        return open(f"/proc/{pid}/stat").read().split()[2] == "Z"
    except FileNotFoundError:
        return True


def test_command_gets_the_alert_json_on_stdin_with_argv_untouched_by_a_shell(tmp_path: Path) -> None:
    out = tmp_path / "got.json"
    script = "import sys, json; open(sys.argv[1], 'w').write(json.dumps([sys.argv[2:], sys.stdin.read()]))"
    notes = Notes()
    d = dispatcher({"kind": "command", "argv": [sys.executable, "-c", script, str(out), "$HOME", "a;b|c"]},
                   notes=notes)
    a = alert(message="boom $(touch pwned) `id`")
    d.offer(a)
    assert until(lambda: d.workers[0].delivered == 1)
    assert d.close(2.0) == {}
    args, stdin = json.loads(out.read_text())
    assert args == ["$HOME", "a;b|c"]  # no shell expanded anything
    assert json.loads(stdin) == a.to_dict() and stdin.endswith("\n")
    assert not (tmp_path / "pwned").exists() and notes.items == []


def test_a_command_past_its_timeout_is_killed_with_its_children_and_nothing_else(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    script = (
        "import os, subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pids)!r}, 'w').write(f'{{os.getpid()}} {{child.pid}}')\n"
        "time.sleep(60)\n"
    )
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        notes = Notes()
        d = dispatcher({"kind": "command", "argv": [sys.executable, "-c", script], "timeout_s": 0.5,
                        "retries": 0}, notes=notes)
        t0 = time.monotonic()
        d.offer(alert())
        said = notes.wait(lambda m: "gave up" in m, timeout=10)
        assert said and "did not finish within 0.5 s (killed)" in said
        assert time.monotonic() - t0 < 5.0
        sink_pid, grandchild = map(int, pids.read_text().split())
        assert until(lambda: _gone(sink_pid) and _gone(grandchild), 3.0)
        assert bystander.poll() is None  # a process it did not start lives on
        d.close(0.5)
    finally:
        bystander.kill()
        bystander.wait()


def test_a_failing_command_is_retried_and_its_stderr_quoted_safely(tmp_path: Path) -> None:
    notes = Notes()
    script = "import sys; sys.stdin.read(); sys.stderr.write('bad token\\x1b[31m\\n'); sys.exit(3)"
    d = dispatcher({"kind": "command", "argv": [sys.executable, "-c", script], "retries": 1, "backoff_s": 0.05},
                   notes=notes)
    d.offer(alert())
    said = notes.wait(lambda m: "gave up" in m)
    assert said and "exited with status 3: bad token?[31m (gave up after 2 attempts)" in said
    assert d.close(0.5) == {"command[0]": 1}


def test_desktop_uses_notify_send_where_present(tmp_path: Path, monkeypatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "argv.json"
    fake = bin_dir / "notify-send"
    fake.write_text(f"#!{sys.executable}\nimport json, sys\nopen({str(log)!r}, 'w').write(json.dumps(sys.argv[1:]))\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    notes = Notes()
    d = dispatcher({"kind": "desktop"}, notes=notes)
    d.offer(alert("crash", kind="cuda_oom", message="OOM <b>bold</b> & more"))
    assert until(lambda: d.workers[0].delivered == 1)
    d.close(1.0)
    assert json.loads(log.read_text()) == ["-u", "critical", "-a", "dflash-watch", "--",
                                           "dflash-watch critical: crash (cuda_oom)",
                                           "OOM &lt;b&gt;bold&lt;/b&gt; &amp; more"]


def test_desktop_without_notify_send_says_so_and_counts_what_it_could_not_show(tmp_path: Path,
                                                                               monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    notes = Notes()
    d = dispatcher({"kind": "desktop"}, notes=notes)
    assert notes.items == ["sink desktop[0]: off: notify-send not found on PATH "
                           "(install libnotify-bin for desktop notifications)"]
    d.offer(alert())
    d.offer(alert("stall", severity="warning"))
    assert d.close(0.5) == {"desktop[0]": 2}
    assert notes.items[-1] == ("sink desktop[0]: 2 alerts dropped (2 unsent: notify-send not found on PATH "
                               "(install libnotify-bin for desktop notifications))")


def test_bell_rings_on_firing_not_on_resolve() -> None:
    rung: list[str] = []
    notes = Notes()
    d = dispatcher({"kind": "bell", "min_severity": "warning"}, notes=notes,
                   senders={"bell[0]": BellSender(rung.append)})
    d.offer(alert("stall", severity="warning"))
    d.offer(alert("stall", "resolved", "warning"))
    d.offer(alert("recompile", severity="info"))
    assert until(lambda: d.workers[0].delivered == 2)
    d.close(1.0)
    assert rung == ["\a"]
