"""Rotation when the files' clock is not this machine's (NFS: file times
come from the server's clock, seconds or minutes off the watcher's).

A RotatingFileHandler rolling over several times between two polls leaves
copies the tailer never held; it reads those written since its last look.
Told by comparing their mtimes with ``time.time()``, a server 60 ms behind
the watcher hid most of them: 515 of 1782 records read at 30 s, none of
them said lost. Told on the files' own clock (the followed name's mtime at
each look), no file time meets this machine's clock. The writer is a real process in real time; the watcher's
clock is moved: in this process (``time.time_ns``/``time``), and in a child
under libfaketime where it is installed (CI installs it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_rotation import BURSTS, _drain, _lines, _notices

from dflash_watch.sources.logtail import LogTailer

ROOT = Path(__file__).resolve().parents[2]


def _writer(tmp_path: Path, log: Path) -> subprocess.Popen[str]:
    script = tmp_path / "bursts.py"
    script.write_text(BURSTS)
    env = dict(os.environ)
    env.pop("PYTHONUNBUFFERED", None)
    return subprocess.Popen([sys.executable, str(script), str(log)], env=env, stdout=subprocess.PIPE, text=True)


@pytest.mark.parametrize("skew_s", [30.0, 0.2, -30.0])
def test_every_record_once_with_the_watchers_clock_off_the_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, skew_s: float
) -> None:
    """``skew_s`` > 0: the watcher's clock ahead of the file server's."""
    real_ns, real = time.time_ns, time.time
    monkeypatch.setattr(time, "time_ns", lambda: real_ns() + int(skew_s * 1e9))
    monkeypatch.setattr(time, "time", lambda: real() + skew_s)
    log = tmp_path / "train.log"
    # An earlier run's copies in the folder: history, never read as new.
    for k in (1, 2):
        (tmp_path / f"train.log.{k}").write_text(f"seq old-{k}\n")
    with LogTailer([str(log)], use_watchdog=False) as t:
        items = t.poll()
        writer = _writer(tmp_path, log)
        while writer.poll() is None:
            items += t.poll()
            time.sleep(0.03)
        items += _drain(t)
        written = int(writer.stdout.read()) if writer.stdout else 0
    monkeypatch.undo()
    lines = _lines(items)
    assert not [line for line in lines if "old" in line]  # the earlier run's copies stay history
    got = [int(line.split()[1]) for line in lines]
    assert len(list(tmp_path.glob("train.log.*"))) > 30
    assert got == list(range(written)), f"{len(got)} of {written} records read"
    assert not _notices(items, "lost")


WATCHER = """
import sys, time
from dflash_watch.sources.chunks import Chunk
from dflash_watch.sources.logtail import LogTailer
log, stop = sys.argv[1], sys.argv[2]
import os
with LogTailer([log], use_watchdog=False) as t:
    print("watching", time.time(), flush=True)
    lines = []
    quiet_since = None
    while True:
        items = t.poll()
        lines += [l for i in items if isinstance(i, Chunk) and not i.partial for l in i.text.splitlines()]
        if os.path.exists(stop):
            quiet_since = quiet_since or time.monotonic()
            if time.monotonic() - quiet_since > 2.5:
                break
        time.sleep(0.03)
print("\\n".join(lines))
"""


@pytest.mark.skipif(shutil.which("faketime") is None, reason="libfaketime is not installed (apt-get install faketime)")
def test_a_watcher_process_on_a_clock_30s_ahead_reads_every_record(tmp_path: Path) -> None:
    """The watcher a real process whose clock (libfaketime) is 30 s ahead of
    the kernel's that stamps the files: an NFS client and its server."""
    log = tmp_path / "train.log"
    stop = tmp_path / "writer-done"
    script = tmp_path / "watcher.py"
    script.write_text(WATCHER)
    env = dict(os.environ, PYTHONPATH=str(ROOT), FAKETIME="+30s", NO_FAKE_STAT="1")
    env.pop("PYTHONUNBUFFERED", None)
    watcher = subprocess.Popen(["faketime", "-f", "+30s", sys.executable, str(script), str(log), str(stop)],
                               env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert watcher.stdout is not None
        first = watcher.stdout.readline().split()
        assert first[0] == "watching" and float(first[1]) - time.time() > 25  # the clock is off
        writer = _writer(tmp_path, log)
        written = int(writer.communicate(timeout=120)[0])
        stop.touch()
        out, _ = watcher.communicate(timeout=60)
    finally:
        watcher.kill()
    got = [int(line.split()[1]) for line in out.splitlines()]
    assert got == list(range(written)), f"{len(got)} of {written} records read"
