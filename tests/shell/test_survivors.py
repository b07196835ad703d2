"""Never two trainings: a run that outlived its tmux server is found, refused and ended.

A training that ignores SIGHUP (``trap '' HUP``, nohup, a Python handler)
lives on when the tmux server is killed; so does dflash-watch's wrapper,
which waits for it. Real tmux servers on private sockets, real processes;
the conftest fixtures (``tmux``, ``marker``) end what each test started.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from tmux_job_helpers import long_cmd, marked_pids, ns, spec, trainer_pids, wait_for

from dflash_watch.control import cli_actions
from dflash_watch.control.job import Job, JobSpec, proc_alive
from dflash_watch.control.survivors import RUN_ID_ENV
from dflash_watch.control.wrapper import RUN_ID_ENV as WRAPPER_RUN_ID_ENV
from dflash_watch.procfs import proc_identity


@pytest.fixture(autouse=True)
def reaper(tmp_path):
    """Ends, even when a test fails early, every run recorded under tmp_path that ignored the hangup:
    by its record, checked against /proc start ticks here (not by the code under test). Twice, so a
    run launched just before a failure is caught once it has recorded itself."""
    yield
    for _ in range(2):
        for path in tmp_path.glob("**/*.state.json"):
            try:
                rec = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            _reap(rec)
        time.sleep(0.3)


def _reap(rec: dict) -> None:
    """Only the pids the run recorded, each checked by its start ticks (the
    trainers themselves are ended by ``marker``, by the pids they recorded):
    the machine's process table is never scanned."""
    wrapper, leader = rec.get("wrapper_pid"), rec.get("pid")
    for pid, ticks in ((leader, rec.get("pid_start")), (wrapper, rec.get("wrapper_start"))):
        if not pid or (proc_identity(pid) or (None,))[0] != ticks:
            continue
        try:
            if pid == leader and os.getpgid(pid) == pid:
                os.killpg(pid, signal.SIGKILL)  # the pane's group: the run's own processes
            else:
                os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def config_file(tmp_path: Path, tmux, command: str, session: str = "job", grace: float = 0.5) -> Path:
    path = tmp_path / "dfw.toml"
    path.write_text(
        "[run]\n"
        f"command = {json.dumps(command)}\nsession = {json.dumps(session)}\n"
        f"socket = {json.dumps(tmux.socket)}\nstate_dir = {json.dumps(str(tmp_path / 'state'))}\n"
        f"grace_s = {grace}\npreflight_timeout_s = 5.0\n"
    )
    return path


def outlive_the_server(job: Job, tmux) -> tuple[int, int]:
    """Start ``job``, kill its tmux server, return (wrapper pid, trainer pid) once they outlived it."""
    job.start()
    (trainer,) = trainer_pids(job.spec.state_dir.parent)
    assert job.poll_exit(time.time()) is None  # a watcher saw it running
    rec = json.loads(job.spec.state_path.read_text())
    tmux.kill_server()
    time.sleep(0.3)  # the hangup reaches them
    assert proc_alive(rec["wrapper_pid"]) and proc_alive(trainer), "the run should survive the hangup"
    return rec["wrapper_pid"], trainer


def test_start_and_relaunch_refuse_and_abort_ends_a_run_that_outlived_tmux(tmux, tmp_path, marker, capsys):
    command = long_cmd(tmp_path, marker, ignore="HUP,INT")  # SIGINT ignored too: abort must escalate
    args = ns(config=str(config_file(tmp_path, tmux, command)))
    job = Job(cli_actions.spec_from_args(args))
    wrapper, trainer = outlive_the_server(job, tmux)
    capsys.readouterr()

    assert cli_actions.cmd_status(args) == 1
    assert "still runs outside tmux" in capsys.readouterr().out
    for cmd in (cli_actions.cmd_start, cli_actions.cmd_relaunch):
        t0 = time.monotonic()
        assert cmd(args) == 1
        assert time.monotonic() - t0 < 3.0  # at once, not after the 5 s preflight
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "refusing to" in err, err
        assert str(wrapper) in err and str(trainer) in err
    assert marked_pids(marker) == [trainer]  # no second training
    assert not tmux.server_running()  # nothing was launched
    assert job.poll_exit(time.time()) is None  # its pane is gone, but the run has not ended: no exit yet

    assert cli_actions.cmd_abort(args) == 0
    out = capsys.readouterr().out
    assert "sent SIGINT" in out and "stopped after SIGTERM" in out, out
    assert not proc_alive(trainer) and not proc_alive(wrapper) and not marked_pids(marker)
    record = json.loads(job.spec.state_path.read_text())
    assert (record["state"], record["signal"], record["asked"]) == ("killed", signal.SIGTERM, "abort")
    ev = job.poll_exit(time.time())
    assert (ev.kind, ev.asked) == ("aborted", "abort")
    assert cli_actions.cmd_start(args) == 0  # and now a start is the only training
    wait_for(lambda: len(marked_pids(marker)) == 1)


def _job_without_server(tmp_path: Path) -> tuple[Job, Path]:
    """A job on a tmux socket nobody serves, and where its record goes (written by the test)."""
    job = Job(JobSpec(command="true", session="job", socket=f"dfw-none-{uuid.uuid4().hex[:8]}",
                      state_dir=tmp_path / "state"))
    path = job.spec.fresh_state_path
    path.parent.mkdir(parents=True)
    return job, path


def test_a_pid_that_is_no_longer_the_runs_is_never_named_or_signalled(tmp_path):
    """A record naming a pid whose start time differs (a recycled pid) counts for nothing."""
    other = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        ticks, pgid, sid = wait_for(lambda: proc_identity(other.pid))
        job, path = _job_without_server(tmp_path)
        base = {"version": 1, "run_id": "r1", "state": "running", "wrapper_pid": other.pid, "pid": other.pid,
                "pgid": pgid, "sid": sid, "started_at": time.time() - 3600}
        for stale in ({"wrapper_start": ticks - 7, "pid_start": ticks - 7},  # recorded, not matching
                      {}):  # a record without start ticks, an hour older than the process
            path.write_text(json.dumps({**base, **stale}))
            assert not job.survivors()
            assert "not running" in list(job.abort_steps(grace_s=0.1))[0]
            assert job.status().pids == ()
        assert other.poll() is None  # never signalled
        path.write_text(json.dumps({**base, "wrapper_start": ticks, "pid_start": ticks}))
        assert job.survivors().pids == (other.pid,)  # the same check does find a matching process
        path.write_text(json.dumps({**base, "started_at": time.time()}))  # an old record, times agreeing
        assert job.survivors().pids == (other.pid,)
    finally:
        other.kill()
        other.wait()


def test_a_wrapper_that_recorded_its_runs_end_is_ending_not_a_survivor(tmp_path):
    """The wrapper writes how its run ended, then exits; tmux may call the
    pane dead while its interpreter is still shutting down. That process is
    not a survivor of the run (seen once under load: a crashed job read
    "exited, code 3" with its wrapper's pid alive). A wrapper whose run is
    still recorded as running is."""
    wrapper = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        ticks, pgid, sid = wait_for(lambda: proc_identity(wrapper.pid))
        job, path = _job_without_server(tmp_path)
        gone = 2**22 + 17  # the training's pid: ended (no such process)
        base = {"version": 1, "run_id": "r1", "wrapper_pid": wrapper.pid, "wrapper_start": ticks,
                "pid": gone, "pid_start": 1, "pgid": gone, "sid": sid, "started_at": time.time()}
        for state in ("exited", "killed"):
            path.write_text(json.dumps({**base, "state": state, "code": 3, "ended_at": time.time()}))
            assert not job.survivors() and job.survivors().pids == ()
            assert job.status().pids == ()
        path.write_text(json.dumps({**base, "state": "running"}))
        assert job.survivors().pids == (wrapper.pid,) and job.survivors().run_alive
    finally:
        wrapper.kill()
        wrapper.wait()


def test_a_gpu_holder_that_left_the_group_is_found_by_its_run_id_and_ended(tmux, tmp_path, marker):
    stray_file = tmp_path / "stray"
    stray = f"setsid sh -c 'echo $$ > {shlex.quote(str(stray_file))}; exec sleep 120' & "
    other = subprocess.Popen(["sleep", "60"])  # holds a GPU too, but is no part of the run
    rows: list[tuple[int, int, int, str]] = [(1, other.pid, 2**30, "sleep")]
    stray_pid = None
    try:
        job = Job(spec(tmux, tmp_path, stray + long_cmd(tmp_path, marker, ignore="HUP"), grace_s=0.5),
                  gpu_holders=lambda: list(rows))
        job.start()
        stray_pid = wait_for(lambda: stray_file.exists() and stray_file.read_text().strip()
                             and int(stray_file.read_text()))
        rows.append((0, stray_pid, 4 * 2**30, "sleep"))
        assert os.getpgid(stray_pid) != json.loads(job.spec.state_path.read_text())["pgid"]
        (trainer,) = trainer_pids(tmp_path)
        tmux.kill_server()
        time.sleep(0.3)
        surv = job.survivors()
        assert stray_pid in surv.strays and trainer in surv.members and other.pid not in surv.pids
        steps = list(job.abort_steps())
        assert "stopped" in steps[-1], steps
        wait_for(lambda: not proc_alive(stray_pid) and not proc_alive(trainer))
        assert other.poll() is None
        assert WRAPPER_RUN_ID_ENV == RUN_ID_ENV
    finally:
        other.kill()
        other.wait()
        if stray_pid and proc_alive(stray_pid) and b"sleep" in Path(f"/proc/{stray_pid}/cmdline").read_bytes():
            os.kill(stray_pid, signal.SIGKILL)


def test_relaunch_of_a_live_pane_is_not_blocked_and_notes_the_abort_as_asked(tmux, tmp_path, marker):
    job = Job(spec(tmux, tmp_path, long_cmd(tmp_path, marker, ignore="HUP")))
    job.start()
    (first,) = trainer_pids(tmp_path)
    old_run = json.loads(job.spec.state_path.read_text())["run_id"]
    assert job.relaunch().running and not proc_alive(first)
    assert job._exits.asked.get(old_run) == "relaunch"
    wait_for(lambda: len(marked_pids(marker)) == 1)


def test_the_demo_child_job_reports_an_asked_abort_and_an_outside_kill_apart():
    from dflash_watch.control.child import ChildJob

    job = ChildJob(["sleep", "30"], grace_s=0.2)
    try:
        job.start()
        job.abort()
        ev = job.poll_exit(time.time())
        assert (ev.kind, ev.signal, ev.asked) == ("aborted", signal.SIGINT, "abort")
        job.start()
        os.kill(job.proc.pid, signal.SIGTERM)
        job.proc.wait(5)
        assert job.poll_exit(time.time()).kind == "killed"
    finally:
        if job.proc and job.proc.poll() is None:
            job.proc.kill()
            job.proc.wait()


def test_abort_that_cannot_end_the_survivors_exits_non_zero_naming_them(tmp_path, monkeypatch, capsys):
    """Signals that change nothing (a process stuck in the kernel): abort says so and exits 1."""
    import dflash_watch.control.abort as abort_mod

    other = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        ticks, pgid, sid = wait_for(lambda: proc_identity(other.pid))
        socket = f"dfw-none-{uuid.uuid4().hex[:8]}"
        config = config_file(tmp_path, type("T", (), {"socket": socket})(), "true", grace=0.1)
        job_spec = cli_actions.spec_from_args(ns(config=str(config)))
        job_spec.fresh_state_path.parent.mkdir(parents=True)
        job_spec.fresh_state_path.write_text(json.dumps({
            "version": 1, "run_id": "r1", "state": "running", "wrapper_pid": None, "pid": other.pid,
            "pgid": pgid, "sid": sid, "pid_start": ticks, "started_at": time.time()}))
        monkeypatch.setattr(abort_mod, "signal_survivors", lambda s, sig: set())
        monkeypatch.setattr(abort_mod, "SIGKILL_WAIT_S", 0.2)
        assert cli_actions.cmd_abort(ns(config=str(config))) == 1
        captured = capsys.readouterr()
        assert f"still alive after SIGKILL: pids {other.pid}" in captured.out
        assert captured.err == f"dflash-watch: could not end pids {other.pid}\n"
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


async def test_dashboard_r_on_a_run_outside_tmux_says_why_and_offers_nothing(tmux, tmp_path, marker):
    """The dashboard's r used to open a dialog promising to stop the run
    that outlived its tmux server ("will stop 3 processes ...", Relaunch
    (y)), then refuse after y. It now says at once that the run lives on
    outside tmux and that abort (a) ends it; nothing is asked, nothing stopped."""
    from dflash_watch.monitor import Monitor
    from dflash_watch.tui.app import DashboardApp
    from dflash_watch.tui.screens.confirm import ConfirmScreen

    command = long_cmd(tmp_path, marker, ignore="HUP")
    job = Job(cli_actions.spec_from_args(ns(config=str(config_file(tmp_path, tmux, command)))))
    wrapper, trainer = outlive_the_server(job, tmux)
    app = DashboardApp(Monitor(), job=job, bell_repeat_s=0)
    async with app.run_test(size=(140, 44), notifications=True) as pilot:
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.press("r")
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmScreen)
        said = [n.message for n in app._notifications]
        assert any("still runs outside tmux" in m and str(trainer) in m and "abort (a)" in m for m in said), said
    assert proc_alive(trainer) and marked_pids(marker) == [trainer]
    job.abort(0.5)
