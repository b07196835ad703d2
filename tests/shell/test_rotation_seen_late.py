"""logrotate's ``create`` when the watcher first sees the log only after the rename.

logrotate renames ``train.log`` to ``train.log.1`` and creates a new empty
``train.log``; the writer goes on writing to the renamed file until it is
told to reopen (SIGHUP). A watcher that held the old file follows it on
(``test_rotation``). One that did not hold it yet (started before the log
existed and first looked after the rename, or attached between the rename
and the create) must follow the renamed file too, not read it once and
lose what its writer writes there next (issue 17).

A real writer process (Python logging, a FileHandler reopened on command as
on SIGHUP); the test does what logrotate does, in the order that matters.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from headless_helpers import alert_lines, wait_for_notice

from dflash_watch.sources.logtail import Chunk, LogTailer, TailNotice

WRITER = textwrap.dedent('''
    import logging, sys
    path = sys.argv[1]
    log = logging.getLogger("train")
    log.setLevel(logging.INFO)
    fmt = logging.Formatter("%(asctime)s - %(levelname)s - %(name)s - %(message)s")
    handler = logging.FileHandler(path, delay=True)  # created by the first line, as the run does
    handler.setFormatter(fmt)
    log.addHandler(handler)
    for cmd in sys.stdin:
        cmd = cmd.strip()
        if cmd == "reopen":  # logrotate's SIGHUP
            log.removeHandler(handler)
            handler.close()
            handler = logging.FileHandler(path, delay=True)  # created by the first line, as the run does
            handler.setFormatter(fmt)
            log.addHandler(handler)
        elif cmd == "crash":
            try:
                raise RuntimeError("CUDA error: an illegal memory access was encountered")
            except RuntimeError:
                log.exception("training failed")
        else:
            log.info("%s", cmd)
        print("ok", flush=True)
''')


class Writer:
    """The writer process, told what to log through its stdin; each call returns once written."""

    def __init__(self, tmp_path: Path, log: Path) -> None:
        script = tmp_path / "writer.py"
        script.write_text(WRITER, encoding="utf-8")
        env = dict(os.environ)
        env.pop("PYTHONUNBUFFERED", None)  # users do not set it
        self.proc = subprocess.Popen([sys.executable, str(script), str(log)], env=env, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def __call__(self, command: str) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline() == "ok\n"

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=10)


def _messages(items: list[Chunk | TailNotice]) -> list[tuple[int, str]]:
    """(line number, message) of the step lines read."""
    out = []
    for c in items:
        if isinstance(c, Chunk) and not c.partial:
            for i, line in enumerate(c.text.splitlines()):
                out.append((c.first_lineno + i, line.rsplit(" - ", 1)[-1]))
    return out


@pytest.mark.parametrize("skew_s", [0.0, 120.0, -120.0])
@pytest.mark.parametrize("when", ["first-look-after-rename", "attached-between-rename-and-create"])
def test_the_renamed_file_is_followed_when_the_name_was_first_seen_after_the_rename(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, when: str, skew_s: float) -> None:
    """``skew_s``: the watcher's clock that far ahead of the files' (NFS:
    the server stamps them); whether the renamed file is the run's is told
    on the files' clock."""
    real_ns, real = time.time_ns, time.time
    monkeypatch.setattr(time, "time_ns", lambda: real_ns() + int(skew_s * 1e9))
    monkeypatch.setattr(time, "time", lambda: real() + skew_s)
    log, old = tmp_path / "train.log", tmp_path / "train.log.1"
    write = Writer(tmp_path, log)
    try:
        if when == "attached-between-rename-and-create":
            write("step 1")
            os.rename(log, old)
            time.sleep(0.2)  # the renamed file is older than the watcher's first look
        with LogTailer([str(log)], use_watchdog=False) as t:
            assert [n.kind for n in t.poll() if isinstance(n, TailNotice)] == ["waiting"]
            if when == "first-look-after-rename":
                write("step 1")
                os.rename(log, old)
            log.touch()  # logrotate: create
            first = t.poll()
            write("step 2")  # before the writer is told to reopen: still the renamed file
            write("crash")
            second = t.poll()
            write("reopen")
            write("step 3")
            third = t.poll()
    finally:
        write.close()
    seen = _messages(first + second + third)
    if when == "first-look-after-rename":
        assert seen[0] == (1, "step 1")  # all of a log that appeared after the watcher is new
    else:
        assert (1, "step 1") not in seen  # a live attach skips what was there
    assert (2, "step 2") in seen and any(m == "training failed" for _, m in seen), seen
    assert _messages(third) == [(1, "step 3")]
    assert any(isinstance(n, TailNotice) and "following" in n.message and str(old) in n.message for n in first)


def test_headless_attached_between_rename_and_create_alerts_the_crash_in_the_renamed_file(tmp_path: Path) -> None:
    log, old = tmp_path / "train.log", tmp_path / "train.log.1"
    write = Writer(tmp_path, log)
    env = dict(os.environ)
    env.pop("PYTHONUNBUFFERED", None)
    proc = None
    try:
        for n in range(3):
            write(f"step {n + 1}/1000 | loss 2.31 | 21.5 Ktok/s")
        os.rename(log, old)  # logrotate: rename ...
        time.sleep(0.2)
        proc = subprocess.Popen([sys.executable, "-m", "dflash_watch.cli", "headless", "--no-gpu", "--log", str(log)],
                                cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                bufsize=1)
        early = wait_for_notice(proc, "to appear")
        log.touch()  # ... and create, with the watcher attached in between
        early += wait_for_notice(proc, "following")
        write("step 4/1000 | loss 2.30 | 21.5 Ktok/s")
        write("crash")  # into the renamed file: the writer was not told to reopen yet
        # The log goes quiet: its last traceback is a crash (quiet_s). Wait
        # for the alert line itself, not for a time a loaded machine overruns.
        seen = alert_lines(proc, 30.0, lambda a: a["detector"] == "crash")
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=20)
        write.close()
    # Alerted live, while it ran (a stop would flush the held traceback too).
    crashes = [a for a in seen if a["detector"] == "crash"]
    assert [(a["kind"], a["state"]) for a in crashes] == [("cuda_error", "firing")], early + err
    assert not [a for a in map(json.loads, out.splitlines()) if a["detector"] == "crash"], out
    assert crashes[0]["source"].startswith("train.log:"), crashes[0]


def test_a_rotated_copy_left_by_an_earlier_run_is_not_followed_into_the_new_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A rerun in the same folder: ``train.log.1`` is yesterday's, its last
    line unfinished. When the new run creates ``train.log`` the watcher must
    not take the old copy for a renamed file its writer still writes to.
    (A file's ctime cannot be set back; the window is shortened instead.)"""
    from dflash_watch.sources import rotated

    log, old = tmp_path / "train.log", tmp_path / "train.log.1"
    old.write_text("step 1 | loss 2.0\nstep 2 unfinished", encoding="utf-8")
    monkeypatch.setattr(rotated, "RENAMED_WITHIN_NS", 300_000_000)
    time.sleep(0.6)  # the old copy was renamed and last written before the window
    items: list[Chunk | TailNotice] = []
    with LogTailer([str(log)], use_watchdog=False) as t:
        items += t.poll()
        log.write_text("step 1 | loss 3.0\n", encoding="utf-8")  # the new run
        for _ in range(4):
            items += t.poll()
            time.sleep(0.8)
    texts = [c.text for c in items if isinstance(c, Chunk)]
    assert not any("unfinished" in x or "loss 2.0" in x for x in texts), texts
    assert not any(isinstance(n, TailNotice) and "following" in n.message for n in items)
    assert any("loss 3.0" in x for x in texts), texts
