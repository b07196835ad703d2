"""`headless --metrics-port/--metrics-file` as a user runs it: a real process.

A port that is taken or an address that is not ours is one line on stderr
and exit 2 before anything starts; a running headless serves /metrics and
leaves its final values in the textfile when it is stopped.
"""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from datetime import datetime
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

STEP = "{now},000 - INFO - dflash.train - step {n}/1000 | loss 2.31 | 21.5 Ktok/s\n"


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "dflash_watch.cli", *args]


def _steps(first: int, n: int) -> str:
    now = datetime.now().strftime("%Y-%m-%d %H:%M:%S")
    return "".join(STEP.format(now=now, n=i) for i in range(first, first + n))


def _step_in(text: str) -> float | None:
    for f in text_string_to_metric_families(text):
        for s in f.samples:
            if s.name == "dflash_step":
                return s.value
    return None


@pytest.mark.parametrize("flags, says", [
    (None, "in use"),  # the port of a socket listening here
    (["--metrics-port", "0", "--metrics-host", "192.0.2.1"], "cannot listen on 192.0.2.1"),  # TEST-NET: not ours
])
def test_a_port_in_use_or_an_address_not_ours_is_one_line_and_exit_2(tmp_path: Path, flags, says) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        flags = flags or ["--metrics-port", str(busy.getsockname()[1])]
        r = subprocess.run(_cli("headless", "--no-gpu", *flags), cwd=tmp_path, capture_output=True, text=True,
                           timeout=30)
    assert r.returncode == 2
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert lines[0].startswith("dflash-watch: --metrics-port") and says in lines[0], lines[0]


@pytest.mark.slow
def test_headless_serves_metrics_and_leaves_its_last_values_in_the_textfile(tmp_path: Path) -> None:
    log, prom = tmp_path / "train.log", tmp_path / "dflash.prom"
    log.write_text(_steps(1, 5))
    proc = subprocess.Popen(
        _cli("headless", "--no-gpu", "--log", str(log), "--metrics-port", "0", "--metrics-file", str(prom)),
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stderr is not None
        url = None
        deadline = time.monotonic() + 15
        while url is None and time.monotonic() < deadline:
            line = proc.stderr.readline()
            assert line, f"headless exited ({proc.poll()}) without naming its metrics URL"
            found = re.search(r"metrics on (http://127\.0\.0\.1:\d+/metrics)", line)
            url = found.group(1) if found else None
        assert url, "no 'metrics on http://...' notice"
        step = None
        while step != 5 and time.monotonic() < deadline:
            with urllib.request.urlopen(url, timeout=5) as r:
                step = _step_in(r.read().decode())
            time.sleep(0.1)
        assert step == 5, "headless read 5 steps but /metrics says otherwise"
        assert _step_in(prom.read_text()) in (None, 5.0)  # written at start, then every few seconds
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(_steps(6, 3))
        time.sleep(1.0)  # read by the tailer
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert _step_in(prom.read_text()) == 8  # the final write at exit
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dflash.prom", "train.log"]
