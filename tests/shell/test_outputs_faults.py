"""Outputs that never stall and never tear (issue 17): real FIFOs, a real tmpfs
filled to the last page, real headless processes, a real loopback webhook and
300 real half-open sockets against /metrics.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import replace
from pathlib import Path

import pytest
from crash_texts import QUIET, STEP, TRACEBACK
from loopback_http import LoopbackServer
from sink_helpers import Notes, alert, dispatcher, until

from dflash_watch.metrics.collector import build_registry
from dflash_watch.metrics.exporter import HttpExporter
from dflash_watch.monitor import Monitor
from dflash_watch.sources import history_file
from dflash_watch.sources.alert_history import AlertHistory
from dflash_watch.sources.history_replay import RecordedAlerts


def _steps(n: int) -> str:
    return "".join(STEP.format(m=0, s=i % 60, n=i + 1) for i in range(n))


def _crash(trial: int) -> str:
    return STEP.format(m=5 + 3 * trial, s=0, n=100 + trial) + TRACEBACK.format(r=trial, t=trial + 1)


class Headless:
    """A real `headless` whose stdout and stderr lines are collected as they come."""

    def __init__(self, cwd: Path, *args: str) -> None:
        env = dict(os.environ)
        env.pop("PYTHONUNBUFFERED", None)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "dflash_watch.cli", "headless", "--no-gpu", *args], cwd=cwd, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.out: list[str] = []
        self.err: list[str] = []
        self._cond = threading.Condition()
        self._readers = [threading.Thread(target=self._pump, args=(s, into), daemon=True)
                         for s, into in ((self.proc.stdout, self.out), (self.proc.stderr, self.err))]
        for reader in self._readers:
            reader.start()

    def _pump(self, stream, into: list[str]) -> None:
        for line in stream:
            with self._cond:
                into.append(line.rstrip("\n"))
                self._cond.notify_all()

    def wait(self, lines: list[str], predicate, timeout: float = 15.0) -> str | None:
        with self._cond:
            self._cond.wait_for(lambda: any(predicate(x) for x in lines), timeout)
            return next((x for x in lines if predicate(x)), None)

    def metrics_url(self) -> str:
        line = self.wait(self.err, lambda x: "metrics on http://" in x)
        assert line, self.err
        return line.split("metrics on ", 1)[1].strip()

    def stop(self, timeout: float = 10.0) -> tuple[int, float]:
        """SIGTERM; (exit status, seconds it took to leave)."""
        t0 = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
            code = -9
        took = time.monotonic() - t0
        for reader in self._readers:
            reader.join(5)
        return code, took


def _scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.read().decode()


# -- 1. the history is an output that never stalls the watch -------------------------------
@pytest.mark.slow
def test_a_fifo_nobody_reads_as_the_history_stalls_nothing(tmp_path: Path) -> None:
    fifo, log = tmp_path / "alerts.fifo", tmp_path / "train.log"
    os.mkfifo(fifo)
    log.write_text(_steps(10))
    with LoopbackServer() as hook:
        (tmp_path / "c.toml").write_text(
            f'alerts_file = "{fifo}"\n[[alerts.sink]]\nkind = "webhook"\nurl = "{hook.url}"\n' + QUIET)
        h = Headless(tmp_path, "--config", str(tmp_path / "c.toml"), "--log", str(log), "--metrics-port", "0")
        try:
            url = h.metrics_url()
            with open(log, "a", encoding="utf-8") as fh:
                fh.write(_crash(0))
            printed = h.wait(h.out, lambda x: '"crash"' in x)
            assert printed, h.err  # stdout goes on
            assert len(hook.wait_for(1)) == 1  # the sink goes on
            assert 'dflash_alerts_total{detector="crash",severity="critical"} 1.0' in _scrape(url)
        finally:
            code, took = h.stop()
    assert code == 0 and took < 5.0, (code, took, h.err)
    said = [x for x in h.err if "alert history" in x]
    assert said == [
        (f"dflash-watch: alert history {fifo}: cannot write (it is a FIFO that no process reads); "
         "alerts go on, and up to 10000 are kept to write when it can"),
        (f"dflash-watch: alert history {fifo}: 1 alert not written when the watcher stopped "
         "(it is a FIFO that no process reads)")], h.err


def test_a_fifo_whose_reader_comes_later_gets_every_line_whole_and_says_how_many_came_late(
        tmp_path: Path) -> None:
    fifo = tmp_path / "alerts.fifo"
    os.mkfifo(fifo)
    notes = Notes()
    history = AlertHistory(str(fifo), notes, retry_s=0.1)
    big = "x" * 70_000  # more than a pipe holds: written in parts, never torn
    t0 = time.monotonic()
    for i in range(3):
        history.write(alert(message=f"crash {i} {big if i == 1 else ''}"))
    assert time.monotonic() - t0 < 0.5  # no reader: the Monitor never waited on it
    assert notes.wait(lambda m: "no process reads" in m)
    got: list[str] = []

    def read() -> None:
        with open(fifo, encoding="utf-8") as fh:
            got.extend(fh)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert notes.wait(lambda m: "written again" in m, timeout=10)
    history.close(2.0)
    reader.join(5)
    assert [json.loads(x)["message"][:7] for x in got] == ["crash 0", "crash 1", "crash 2"]
    assert f"alert history {fifo}: written again, 3 alerts written late" in notes.items


def test_a_history_write_that_hangs_costs_the_monitor_one_bounded_wait(tmp_path: Path, monkeypatch) -> None:
    """A hung disk (NFS server gone) cannot be made here: the append is held on an event."""
    release = threading.Event()
    real = history_file.LineAppender.append

    def hung(self, lines):
        release.wait(30)
        return real(self, lines)

    monkeypatch.setattr(history_file.LineAppender, "append", hung)
    notes = Notes()
    history = AlertHistory(str(tmp_path / "alerts.jsonl"), notes, wait_s=0.3)
    t0 = time.monotonic()
    for i in range(20):
        history.write(alert(message=f"crash {i}"))
    assert time.monotonic() - t0 < 1.0  # 0.3 s once, then the alerts go on
    assert sum("has not finished after 0.3 s" in m for m in notes.items) == 1
    release.set()
    assert notes.wait(lambda m: m.endswith("caught up"))
    assert len((tmp_path / "alerts.jsonl").read_text().splitlines()) == 20


# -- 2. a full disk never tears a line ---------------------------------------------------
@pytest.fixture
def tiny_disk(tmp_path: Path):
    """A real 64 KiB tmpfs (needs root: mount(2)); skipped where mount is not permitted."""
    where = tmp_path / "disk"
    where.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(where)],
                       check=False, capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip() or r.returncode}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False, capture_output=True)


def test_a_full_disk_never_tears_a_line_and_the_lines_that_did_not_fit_come_later(tiny_disk: Path) -> None:
    filler = tiny_disk / "filler"
    filler.write_bytes(b"f" * (64 * 1024 - 6000))  # about 6 KB left: two alerts and a part of a third
    path = tiny_disk / "alerts.jsonl"
    notes = Notes()
    history = AlertHistory(str(path), notes, retry_s=0.1)
    for i in range(8):
        history.write(alert(message=f"alert {i} " + "y" * 2500))
    on_disk = path.read_bytes()
    assert on_disk.endswith(b"\n") and 0 < on_disk.count(b"\n") < 8
    assert [json.loads(x)["message"][:7] for x in on_disk.splitlines()] == [
        f"alert {i}" for i in range(on_disk.count(b"\n"))]  # whole lines only, no half alert at the end
    late = 8 - on_disk.count(b"\n")
    filler.unlink()  # space comes back
    assert notes.wait(lambda m: "written again" in m)
    lines = path.read_text().splitlines()
    assert [json.loads(x)["message"][:7] for x in lines] == [f"alert {i}" for i in range(8)]
    assert notes.items == [
        (f"alert history {path}: cannot write (No space left on device); alerts go on, "
         "and up to 10000 are kept to write when it can"),
        f"alert history {path}: written again, {late} alerts written late"]
    history.close(1.0)


# -- 3. a restart does not send again what the history holds --------------------------------
def test_the_same_episode_is_a_line_of_a_log_or_a_time_of_a_source_without_lines(tmp_path: Path) -> None:
    path = tmp_path / "alerts.jsonl"
    crash = alert(t=100.0)  # source train.log:1234
    pressure = replace(alert("memory_pressure", severity="warning", gpu=2, t=200.0), source="gpu-samples")
    path.write_text("".join(a.to_json() + "\n" for a in (crash, crash, pressure)) + '{"torn": \n')
    recorded = RecordedAlerts.read(path)
    assert recorded.take(replace(crash, time=999.0)) == 100.0  # the same line read again at another time
    assert recorded.take(crash) == 100.0  # the log held it twice: two records
    assert recorded.take(crash) is None  # a third time is new
    assert recorded.take(replace(pressure, time=260.0)) is None  # no line: only its time ties it to the record
    assert recorded.take(pressure) == 200.0
    assert recorded.take(alert(t=100.0, gpu=1)) is None  # another GPU
    assert RecordedAlerts.read(tmp_path / "missing.jsonl").take(crash) is None


def test_after_a_restart_a_pagerduty_resolve_closes_the_incident_its_recorded_firing_opened(
        tmp_path: Path, monkeypatch) -> None:
    from dflash_watch.sinks.payloads import dedup_key

    monkeypatch.setenv("DFW_TEST_PD", "rk")
    path = tmp_path / "alerts.jsonl"
    firing = replace(alert("stall", severity="warning", t=100.0), source="train.log:7")
    path.write_text(firing.to_json() + "\n")
    history = AlertHistory(str(path), Notes())
    with LoopbackServer() as pd:
        d = dispatcher({"kind": "pagerduty", "url": pd.url, "routing_key_env": "DFW_TEST_PD", "source": "node1"},
                       notes=Notes())
        offer = history.gate(d.offer, d.recall)
        offer(replace(firing, time=5000.0))  # read again after the restart, at the wall clock
        offer(replace(firing, state="resolved", time=5060.0, source="train.log:9"))
        (sent,) = pd.wait_for(1)
        d.close(1.0)
        time.sleep(0.2)
        assert len(pd.received) == 1
    body = json.loads(sent.body)
    assert body["event_action"] == "resolve" and body["dedup_key"] == dedup_key(firing, 100.0, "node1")
    history.close(1.0)


@pytest.mark.slow
def test_a_restarted_headless_does_not_print_or_send_again_what_the_history_holds(tmp_path: Path) -> None:
    log, history = tmp_path / "train.log", tmp_path / "alerts.jsonl"
    log.write_text(_steps(10) + _crash(0))
    with LoopbackServer() as hook:
        (tmp_path / "c.toml").write_text(
            f'alerts_file = "{history}"\n[[alerts.sink]]\nkind = "webhook"\nurl = "{hook.url}"\n' + QUIET)
        args = ("--config", str(tmp_path / "c.toml"), "--log", str(log))
        first = Headless(tmp_path, *args)
        try:
            assert first.wait(first.out, lambda x: "\"crash\"" in x), first.err
            assert len(hook.wait_for(1)) == 1
        finally:
            assert first.stop()[0] == 0
        second = Headless(tmp_path, *args)
        try:
            said = second.wait(second.err, lambda x: "not printed or sent again" in x)
            assert said and "first: crash at train.log:" in said, second.err
            time.sleep(1.0)
            assert second.out == [] and len(hook.received) == 1
            with open(log, "a", encoding="utf-8") as fh:
                # Relaunched (steps from 1 again, minutes later) and crashed again: new.
                fh.write("".join(STEP.format(m=7, s=i, n=i + 1) for i in range(3)) + _crash(1))
            assert second.wait(second.out, lambda x: "2.00 GiB" in x), (second.err, second.out)
            assert len(hook.wait_for(2)) == 2
        finally:
            assert second.stop()[0] == 0
    assert len(second.out) == 1
    messages = [json.loads(x)["message"] for x in history.read_text().splitlines()]
    assert len(messages) == 2 and "1.00 GiB" in messages[0] and "2.00 GiB" in messages[1]


# -- 4. sinks keep their backoff at shutdown; drops are counted exactly -----------------------
def test_leaving_asks_a_failing_sink_once_not_in_a_storm_and_counts_every_drop() -> None:
    notes = Notes()
    with LoopbackServer(default=500) as hook:
        d = dispatcher({"kind": "webhook", "url": hook.url, "backoff_s": 60.0, "retries": 5}, notes=notes)
        for i in range(40):
            d.offer(alert(message=f"crash {i}"))
        hook.wait_for(1)
        t0 = time.monotonic()
        lost = d.close(3.0)
        took = time.monotonic() - t0
        time.sleep(0.3)
        requests = len(hook.received)
    assert requests == 2 and took < 2.0  # the first try, then one last chance at close
    assert lost == {"webhook[0]": 40}
    assert notes.items[-1] == ("sink webhook[0]: 40 alerts dropped (40 not delivered when the watcher "
                               "stopped; last error: HTTP 500 Internal Server Error)")


@pytest.mark.slow
def test_headless_counts_drops_in_metrics_and_says_them_at_exit_one_line_per_sink(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text(_steps(10))
    with LoopbackServer(default=500) as bad, LoopbackServer() as good:
        (tmp_path / "c.toml").write_text(
            f'[[alerts.sink]]\nkind = "webhook"\nname = "ops"\nurl = "{bad.url}"\nretries = 0\n'
            f'[[alerts.sink]]\nkind = "webhook"\nname = "fine"\nurl = "{good.url}"\n' + QUIET)
        h = Headless(tmp_path, "--config", str(tmp_path / "c.toml"), "--log", str(log), "--metrics-port", "0")
        try:
            url = h.metrics_url()
            with open(log, "a", encoding="utf-8") as fh:
                fh.write(_crash(0) + _steps(2) + _crash(1))
            assert len(bad.wait_for(2)) == 2 and len(good.wait_for(2)) == 2
            assert until(lambda: 'dflash_alerts_dropped_total{sink="ops"} 2.0' in _scrape(url), 10)
            assert 'dflash_alerts_dropped_total{sink="fine"} 0.0' in _scrape(url)
        finally:
            code, _ = h.stop()
    assert code == 0
    dropped = [x for x in h.err if " dropped (" in x]
    assert dropped == [("dflash-watch: sink ops: 2 alerts dropped (2 failed after retries; "
                        "last error: HTTP 500 Internal Server Error)")], h.err


# -- 5. /metrics keeps no thread per idle connection -----------------------------------------
def test_300_half_open_requests_hold_no_threads_and_a_scrape_still_answers() -> None:
    before = threading.active_count()
    exporter = HttpExporter(build_registry(Monitor(keep_lines=0)), "127.0.0.1", 0)
    exporter._server.read_timeout_s = 1.5
    held = []
    try:
        for _ in range(300):
            s = socket.create_connection(("127.0.0.1", exporter.port), timeout=5)
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # and never the blank line
            held.append(s)
        time.sleep(0.5)
        assert threading.active_count() <= before + 1  # the server's one thread
        assert exporter._server.connections() <= 64
        t0 = time.monotonic()
        body = _scrape(exporter.url)
        assert "dflash_build_info" in body and time.monotonic() - t0 < 2.0
        assert until(lambda: exporter._server.connections() == 0, 5.0)  # the half-open ones timed out
    finally:
        for s in held:
            s.close()
        exporter.close(2.0)
    assert until(lambda: threading.active_count() <= before, 3.0)


def test_metrics_answers_head_404_and_garbage_without_dying() -> None:
    exporter = HttpExporter(build_registry(Monitor(keep_lines=0)), "127.0.0.1", 0)
    try:
        with socket.create_connection(("127.0.0.1", exporter.port), timeout=5) as s:
            s.sendall(b"\x00\x01garbage\r\n\r\n")
            assert s.recv(100).startswith(b"HTTP/1.1 400")
        with socket.create_connection(("127.0.0.1", exporter.port), timeout=5) as s:
            s.sendall(b"HEAD /metrics HTTP/1.0\r\n\r\n")
            head = s.recv(4096)
            assert head.startswith(b"HTTP/1.1 200") and head.endswith(b"\r\n\r\n")
        assert "dflash_build_info" in _scrape(exporter.url)
    finally:
        exporter.close(2.0)


# -- 6. the command sink does not inherit the watcher's secrets --------------------------------
def test_the_command_sink_child_lacks_every_sinks_secret_variables(tmp_path: Path, monkeypatch) -> None:
    seen = tmp_path / "env.json"
    monkeypatch.setenv("DFW_HOOK_URL", "https://hooks.example/secret-token")
    monkeypatch.setenv("DFW_PD_KEY", "pd-secret")
    monkeypatch.setenv("DFW_HARMLESS", "kept")
    notes = Notes()
    d = dispatcher(
        {"kind": "command", "argv": [sys.executable, "-c",
                                     ("import json, os, sys; sys.stdin.read(); "
                                      f"open({str(seen)!r}, 'w').write(json.dumps(dict(os.environ)))")]},
        {"kind": "slack", "url_env": "DFW_HOOK_URL", "min_severity": "critical", "detectors": ["stall"]},
        {"kind": "pagerduty", "routing_key_env": "DFW_PD_KEY", "detectors": ["stall"], "min_severity": "critical"},
        notes=notes)
    d.offer(alert())
    assert until(lambda: seen.exists() and seen.stat().st_size > 0)
    d.close(1.0)
    env = json.loads(seen.read_text())
    assert "DFW_HOOK_URL" not in env and "DFW_PD_KEY" not in env
    assert env["DFW_HARMLESS"] == "kept" and env.get("PATH") == os.environ["PATH"]
    assert "secret-token" not in json.dumps(env) and "pd-secret" not in json.dumps(env)
