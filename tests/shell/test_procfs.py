"""The /proc readers on a real process this test starts: what each reads while it runs, and the
empty answers once it is gone (a pid can exit between any two reads; no reader may raise)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from dflash_watch.procfs import (
    proc_alive,
    proc_cmdline,
    proc_cwd,
    proc_environ,
    proc_environ_entries,
    proc_environ_has,
    proc_exe,
    proc_group,
    proc_identity,
    proc_name,
    proc_ppid,
    proc_start_time,
    proc_tree,
    proc_uid,
    signal_group,
    signal_pid,
)


def test_readers_on_a_live_then_reaped_process(tmp_path: Path) -> None:
    env = {**os.environ, "DFW_PROCFS_PROBE": "a=b c"}
    child = subprocess.Popen(["sleep", "30"], cwd=tmp_path, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 5
        # Between fork and exec it is still a Python. And exec names the
        # process before it lays out the new argv: for a moment /proc reads
        # "sleep" as its name and an empty cmdline (seen once in 150 runs
        # beside two CPU burners). Ready when both are there.
        while (proc_name(child.pid) != "sleep" or not proc_cmdline(child.pid)) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert proc_alive(child.pid) and proc_name(child.pid) == "sleep"
        assert proc_ppid(child.pid) == os.getpid()
        assert proc_cmdline(child.pid) == ("sleep", "30")
        assert proc_cwd(child.pid) == str(tmp_path)
        assert os.path.basename(proc_exe(child.pid)).startswith("sleep") or "coreutils" in proc_exe(child.pid)
        assert proc_uid(child.pid) == os.getuid()
        assert proc_environ(child.pid)["DFW_PROCFS_PROBE"] == "a=b c"
        assert b"DFW_PROCFS_PROBE=a=b c" in (proc_environ_entries(child.pid) or [])
        assert proc_environ_has(child.pid, "DFW_PROCFS_PROBE", "a=b c")
        assert not proc_environ_has(child.pid, "DFW_PROCFS_PROBE", "a=b")
        ident = proc_identity(child.pid)
        assert ident is not None and ident[1] == child.pid  # its own group (new session)
        assert proc_group(child.pid) == (child.pid,)
        assert child.pid in proc_tree(os.getpid()) and proc_tree(child.pid) == (child.pid,)
        started = proc_start_time(child.pid)
        assert started is not None and abs(started - time.time()) < 60
        assert signal_pid(child.pid, 0)
        assert signal_group(child.pid, signal.SIGTERM, proc_group(child.pid)) == {child.pid}
        assert child.wait(5) == -signal.SIGTERM
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    pid = child.pid  # reaped: every reader answers "nothing", none raises
    assert not proc_alive(pid) and proc_identity(pid) is None and proc_ppid(pid) is None
    assert proc_cmdline(pid) == () and proc_cwd(pid) is None and proc_environ(pid) == {}
    assert proc_environ_entries(pid) is None and proc_name(pid) == "" and proc_tree(pid) == ()
    with pytest.raises(OSError):
        proc_exe(pid)
