"""The tmux-managed job against a real tmux server on a private socket.

Every test gets its own server (``tmux -L dfw-test-<uuid>``, the ``tmux``
fixture of ``tests/conftest.py``), killed in the fixture's finalizer, and its
own state directory. The trainers are small real programs in
``fake_trainers/``; what the job tests share is in ``tmux_job_helpers``
(and the ``marker`` fixture in ``tests/shell/conftest.py``).
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from tmux_job_helpers import PY, TRAINERS, long_cmd, marked_pids, ns, spec, trainer_pids, wait_ended, wait_for

from dflash_watch.control import cli_actions
from dflash_watch.control.autorelaunch import (
    AutoRelaunchConfig,
    AutoRelauncher,
    AutoRelaunchPolicy,
)
from dflash_watch.control.job import (
    AlreadyRunning,
    ControlUnavailable,
    Job,
    JobSpec,
    RelaunchRefused,
    classify_exit,
    proc_alive,
)
from dflash_watch.control.tmux import InvalidName, Tmux, TmuxServerGone, escape_arg, validate_name
from dflash_watch.detectors.process_exit import ProcessExitDetector
from dflash_watch.parsers.events import ProcessExit

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(not Tmux().available, reason="tmux not installed")


# ------------------------------------------------------------ exit capture
def test_crashing_trainer_exit_code_log_and_single_event(tmux, tmp_path):
    log = tmp_path / "train.log"
    job = Job(spec(tmux, tmp_path, f"{PY} {shlex.quote(str(TRAINERS / 'crash_trainer.py'))} {shlex.quote(str(log))}"))
    job.start()
    st = wait_ended(job)
    assert (st.state, st.code, st.signal) == ("exited", 3, None)
    assert "RuntimeError: fake crash" in log.read_text()
    # remain-on-exit kept the dead pane for a respawn (its tmux status may be
    # empty on tmux 3.3, which is why the wrapper records its own)
    out = tmux.run("list-panes", "-t", "=job:", "-F", "#{pane_dead}").stdout.split()
    assert out == ["1"]
    # The signature as the live session gives it: a function, asked only
    # once an end is reported (it completes the log's last traceback).
    asked: list[int] = []

    def signature() -> str:
        asked.append(1)
        return "RuntimeError:train.py:42"

    ev = job.poll_exit(time.time(), signature=signature)
    assert isinstance(ev, ProcessExit)
    assert (ev.kind, ev.code, ev.signal, ev.signature) == ("crash", 3, None, "RuntimeError:train.py:42")
    assert job.poll_exit(time.time(), signature=signature) is None  # once per incarnation
    assert asked == [1]


@pytest.mark.parametrize("command,code", [("exit 7", 7), (f"{PY} {shlex.quote(str(TRAINERS / 'instant_exit.py'))} 0", 0)])
def test_instant_exit_status_is_captured(tmux, tmp_path, command, code):
    job = Job(spec(tmux, tmp_path, command))
    job.start()
    st = wait_ended(job)
    assert (st.state, st.code) == ("exited", code)
    record = json.loads(job.spec.state_path.read_text())
    assert record["code"] == code and record["wrapper_pid"] == st.pid and record["ended_at"] >= record["started_at"]
    ev = job.poll_exit(time.time())
    assert ev is not None and ev.kind == ("clean" if code == 0 else "crash")


def test_command_passes_through_tmux_verbatim(tmux, tmp_path):
    """Trailing ';', an escaped '\\;', braces, env and a cwd with '#' all survive tmux's parser."""
    workdir = tmp_path / "run #1"
    workdir.mkdir()
    out = tmp_path / "out.txt"
    command = (f"printf '%s|%s\\n' \"$FOO\" \"$PWD\" > {shlex.quote(str(out))}; "
               f"find {shlex.quote(str(workdir))} -maxdepth 0 -exec echo {{}} \\; >> {shlex.quote(str(out))};")
    job = Job(spec(tmux, tmp_path, command, cwd=str(workdir), env={"FOO": "a b;c;"}))
    job.start()
    st = wait_ended(job)
    assert st.code == 0, st
    assert out.read_text().splitlines() == [f"a b;c;|{workdir}", str(workdir)]
    assert escape_arg("x;") == "x\\;" and escape_arg("x") == "x"


# ----------------------------------------------------------------- status
def test_status_running_tree_uptime_and_start_refused(tmux, tmp_path, marker, capsys):
    job = Job(spec(tmux, tmp_path, long_cmd(tmp_path, marker)))
    job.start()
    (pid,) = trainer_pids(tmp_path)
    st = job.status()
    assert st.running and st.pid != pid and pid in st.pids and st.pids[0] == st.pid
    assert st.uptime_s is not None and 0 <= st.uptime_s < 30 and st.started_at <= time.time()
    assert "running in job" in st.line()
    with pytest.raises(AlreadyRunning):
        job.start()
    args = ns(session="job", socket=tmux.socket, cmd=long_cmd(tmp_path, marker))
    assert cli_actions.cmd_start(args) == 1
    assert "already running" in capsys.readouterr().err
    assert marked_pids(marker) == [pid]


def test_status_absent_and_server_gone_mid_run(tmux, tmp_path, marker):
    job = Job(spec(tmux, tmp_path, long_cmd(tmp_path, marker)))
    st = job.status()
    assert st.state == "absent" and "tmux server not running" in st.message
    job.start()
    trainer_pids(tmp_path)
    tmux.kill_server()  # the server dies under a running job
    st = job.status()
    assert st.state == "absent" and "tmux server not running" in st.message
    with pytest.raises(TmuxServerGone):
        tmux.run("list-sessions")
    # the wrapper saw its child hung up and recorded it: one process_exit
    ev = wait_for(lambda: job.poll_exit(time.time()))
    assert (ev.kind, ev.signal) == ("killed", signal.SIGHUP)
    wait_for(lambda: not marked_pids(marker))


def test_attach_to_user_session_and_window(tmux, tmp_path, marker):
    tmux.run("new-session", "-d", "-s", "user")  # the user's own interactive shell
    shell = Job(spec(tmux, tmp_path, "", session="user"))
    st = wait_for(lambda: (lambda s: s if "shell prompt" in s.message else None)(shell.status()))
    assert st.state == "exited" and st.code is None
    job = Job(spec(tmux, tmp_path, long_cmd(tmp_path, marker), session="user", window="train"))
    job.start()
    trainer_pids(tmp_path)
    assert job.status().running
    windows = tmux.run("list-windows", "-t", "=user", "-F", "#{window_name}").stdout.split()
    assert len(windows) == 2 and windows[1] == "train"
    assert job.abort(on_step=lambda m: None).state in ("killed", "exited")
    assert shell.status().state == "exited"  # the user's shell was not touched


# ------------------------------------------------------------------ abort
def test_abort_stops_at_ctrl_c(tmux, tmp_path, marker):
    job = Job(spec(tmux, tmp_path, long_cmd(tmp_path, marker)))
    job.start()
    trainer_pids(tmp_path)
    steps = list(job.abort_steps())
    assert steps[0].startswith("sent Ctrl-C") and steps[-1].startswith("stopped after Ctrl-C")
    st = wait_ended(job)
    assert (st.state, st.signal, st.asked) == ("killed", signal.SIGINT, "abort")
    assert st.line() == "stopped as asked (abort) after SIGINT in job"
    assert json.loads(job.spec.state_path.read_text())["asked"] == "abort"
    ev = job.poll_exit(time.time())
    assert (ev.kind, ev.signal, ev.asked) == ("aborted", signal.SIGINT, "abort")  # asked for, not a kill
    (alert,) = ProcessExitDetector().update(ev)
    assert (alert.kind, alert.severity) == ("aborted", "info")
    assert alert.message == "training process stopped as asked (abort) after SIGINT"
    # another watcher of the same job (the dashboard, while the CLI aborted) reads it from the record
    assert Job(job.spec).poll_exit(time.time()).kind == "aborted"


def test_a_kill_from_outside_stays_killed(tmux, tmp_path, marker):
    job = Job(spec(tmux, tmp_path, long_cmd(tmp_path, marker)))
    job.start()
    (pid,) = trainer_pids(tmp_path)
    job.poll_exit(time.time())
    os.kill(pid, signal.SIGTERM)  # the OOM killer, SLURM, a colleague: nobody asked dflash-watch
    wait_ended(job)
    ev = wait_for(lambda: job.poll_exit(time.time()))
    assert (ev.kind, ev.signal, ev.asked) == ("killed", signal.SIGTERM, None)
    (alert,) = ProcessExitDetector().update(ev)
    assert (alert.kind, alert.severity) == ("killed", "critical") and "SIGTERM" in alert.message


@pytest.mark.slow
def test_abort_escalates_to_sigterm_then_sigkill(tmux, tmp_path, marker):
    job = Job(spec(tmux, tmp_path, long_cmd(tmp_path, marker, ignore="INT,TERM")))
    job.start()
    (pid,) = trainer_pids(tmp_path)
    steps: list[str] = []
    t0 = time.monotonic()
    st = job.abort(grace_s=1.0, on_step=steps.append)
    assert time.monotonic() - t0 < 8
    assert [s.split()[1] for s in steps[:3]] == ["Ctrl-C", "SIGTERM", "SIGKILL"], steps
    assert steps[-1].startswith("stopped after SIGKILL")
    assert (st.state, st.signal) == ("killed", signal.SIGKILL)
    assert not proc_alive(pid)
    ev = job.poll_exit(time.time())
    assert (ev.kind, ev.signal) == ("aborted", 9)


def test_abort_escalation_stops_at_sigterm(tmux, tmp_path, marker):
    job = Job(spec(tmux, tmp_path, long_cmd(tmp_path, marker, ignore="INT")))
    job.start()
    trainer_pids(tmp_path)
    steps = list(job.abort_steps(grace_s=0.5))
    assert steps[-1].startswith("stopped after SIGTERM"), steps
    assert wait_ended(job).signal == signal.SIGTERM


# --------------------------------------------------------------- relaunch
def test_relaunch_threads_make_one_training(tmux, tmp_path, marker):
    job_spec = spec(tmux, tmp_path, long_cmd(tmp_path, marker))
    Job(job_spec).start()
    (first,) = trainer_pids(tmp_path)
    barrier = threading.Barrier(2)
    results, errors = [], []

    def go():
        try:
            job = Job(job_spec)
            barrier.wait()
            results.append(job.relaunch())
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=go) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors and len(results) == 2
    assert all(r.running for r in results) and results[0].pid == results[1].pid
    wait_for(lambda: len(marked_pids(marker)) == 1 and first not in marked_pids(marker))
    time.sleep(0.3)  # a second, late launch would show up here
    assert len(marked_pids(marker)) == 1


@pytest.mark.slow
def test_relaunch_processes_make_one_training(tmux, tmp_path, marker):
    job_spec = spec(tmux, tmp_path, long_cmd(tmp_path, marker))
    Job(job_spec).start()
    trainer_pids(tmp_path)
    go = tmp_path / "go"
    script = (
        "import sys, time, pathlib\n"
        "from dflash_watch.control.cli_actions import cmd_relaunch\n"
        "import argparse\n"
        "go = pathlib.Path(sys.argv[1])\n"
        "while not go.exists(): time.sleep(0.005)\n"
        "sys.exit(cmd_relaunch(argparse.Namespace(config=sys.argv[2], session=None, cmd=None, socket=None,"
        " cwd=None, grace=None)))\n"
    )
    config = tmp_path / "dfw.toml"
    config.write_text(
        "[run]\n"
        f"command = {json.dumps(job_spec.command)}\n"
        f"session = \"job\"\nsocket = {json.dumps(tmux.socket)}\n"
        f"state_dir = {json.dumps(str(job_spec.state_dir))}\ngrace_s = 1.0\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", script, str(go), str(config)], cwd=REPO,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    time.sleep(0.3)
    go.touch()
    outs = [p.communicate(timeout=40) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert sum("already relaunched by another caller" in o for o, _ in outs) <= 1
    wait_for(lambda: len(marked_pids(marker)) == 1)
    time.sleep(0.3)
    assert len(marked_pids(marker)) == 1


def test_relaunch_waits_for_gpu_then_refuses(tmux, tmp_path, marker):
    holder = subprocess.Popen(["sleep", "30"])  # stands in for a process pinning GPU 1
    try:
        rows = [(1, holder.pid, 40 * 2**30, "python"), (3, 4242, 2**30, "other-job")]
        job = Job(spec(tmux, tmp_path, long_cmd(tmp_path, marker), gpus=(0, 1), preflight_timeout_s=0.6),
                  gpu_holders=lambda: [r for r in rows if r[1] != holder.pid or holder.poll() is None])
        job.start()
        trainer_pids(tmp_path)
        with pytest.raises(RelaunchRefused) as info:
            job.relaunch()
        assert info.value.pids == (holder.pid,) and "GPU 1" in str(info.value)
        assert not marked_pids(marker) and not job.status().running  # aborted, not relaunched
        threading.Timer(0.3, holder.kill).start()  # the GPU frees up while relaunch waits
        steps: list[str] = []
        job = Job(job.spec.__class__(**{**_fields(job.spec), "preflight_timeout_s": 5.0}), gpu_holders=job.gpu_holders)
        assert job.relaunch(on_step=steps.append).running
        assert any(s.startswith("waiting up to") for s in steps)
        wait_for(lambda: len(marked_pids(marker)) == 1)  # the new trainer has recorded itself
        assert len(marked_pids(marker)) == 1
    finally:
        holder.kill()
        holder.wait()


def _fields(spec_obj: JobSpec) -> dict:
    return {name: getattr(spec_obj, name) for name in spec_obj.__dataclass_fields__}


# ---------------------------------------------------------- auto-relaunch
@pytest.mark.slow
def test_crash_loop_stops_auto_relaunch(tmux, tmp_path):
    log = tmp_path / "train.log"
    job = Job(spec(tmux, tmp_path, f"{PY} {shlex.quote(str(TRAINERS / 'crash_trainer.py'))} {shlex.quote(str(log))}"))
    policy = AutoRelaunchPolicy(AutoRelaunchConfig(enabled=True, max_restarts=10, backoff_s=0.0,
                                                   crash_loop_count=3, crash_loop_window_s=600))
    driver = AutoRelauncher(job, policy)
    job.start()
    relaunches, decisions = 0, []
    deadline = time.monotonic() + 25
    while time.monotonic() < deadline and not (decisions and decisions[-1].crash_loop):
        step = driver.step(time.time(), signature="RuntimeError:train.py:42")
        assert step.error is None
        relaunches += step.relaunched
        if step.decision:
            decisions.append(step.decision)
        time.sleep(0.05)
    assert decisions and decisions[-1].crash_loop and "crash loop" in decisions[-1].reason
    assert relaunches == 2 and [d.relaunch for d in decisions] == [True, True, False]
    assert log.read_text().count("RuntimeError: fake crash") == 3
    for _ in range(5):  # stopped for good: nothing more is launched
        assert not driver.step(time.time(), signature="RuntimeError:train.py:42").relaunched
        time.sleep(0.05)
    assert log.read_text().count("RuntimeError: fake crash") == 3


def test_two_watchers_with_auto_relaunch_start_the_job_once_per_crash(tmux, tmp_path):
    """The dashboard and headless beside one job, both with auto_relaunch
    (one config file): both read the same exit. The first relaunches; the
    second, due a little later, finds the job running again and does
    nothing. It used to Ctrl-C that fresh run and start it once more: two
    restarts per crash, a killed start on the GPUs."""
    log = tmp_path / "train.log"
    once = shlex.quote(str(tmp_path / "crashed-once"))
    crash = f"{PY} {shlex.quote(str(TRAINERS / 'crash_trainer.py'))} {shlex.quote(str(log))}"
    # The first run crashes; a relaunch runs on (a sleep that logs its start).
    command = f"if [ -e {once} ]; then echo started >> {shlex.quote(str(log))}; exec sleep 60; fi; touch {once}; {crash}"
    cfg = AutoRelaunchConfig(enabled=True, max_restarts=10, backoff_s=0.0, crash_loop_count=9, crash_loop_window_s=600)
    jobs = [Job(spec(tmux, tmp_path, command)) for _ in range(2)]
    drivers = [AutoRelauncher(job, AutoRelaunchPolicy(cfg)) for job in jobs]
    jobs[0].start()
    wait_ended(jobs[0], 20)
    steps = [[], []]
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not all(any(s.relaunched or s.error for s in got) for got in steps):
        for driver, got in zip(drivers, steps):
            got.append(driver.step(time.time(), signature="RuntimeError:train.py:42"))
        time.sleep(0.05)
    relaunched = [sum(s.relaunched for s in got) for got in steps]
    errors = [s.error for got in steps for s in got if s.error]
    assert sorted(relaunched) == [0, 1], (relaunched, errors)
    assert errors == ["auto-relaunch: the job was started again by someone else; nothing done"]
    time.sleep(1.0)
    text = log.read_text()
    assert text.count("fake crash") == 1 and text.count("started") == 1, text  # one relaunch, not stopped and redone
    st = jobs[0].status()
    assert st.running
    jobs[0].abort(0.5)


def test_policy_is_off_by_default_and_backs_off():
    crash = ProcessExit(time=0.0, kind="crash", code=1, signature="E:x")
    assert not AutoRelaunchPolicy(AutoRelaunchConfig()).on_exit(0.0, crash).relaunch
    pol = AutoRelaunchPolicy(AutoRelaunchConfig(enabled=True, max_restarts=3, backoff_s=10, backoff_factor=2,
                                                backoff_max_s=25, crash_loop_count=99))
    delays = [pol.on_exit(t, ProcessExit(time=t, kind="crash", code=1, signature=f"E:{t}")).delay_s
              for t in (0.0, 100.0, 200.0)]
    assert delays == [10, 20, 25]
    last = pol.on_exit(300.0, ProcessExit(time=300.0, kind="crash", code=1))
    assert not last.relaunch and "max restarts" in last.reason
    assert not pol.on_exit(400.0, crash).relaunch  # stays stopped until reset
    pol.reset()
    assert pol.on_exit(500.0, crash).relaunch


def test_policy_crash_loop_needs_same_signature_within_window():
    cfg = AutoRelaunchConfig(enabled=True, max_restarts=100, backoff_s=0, crash_loop_count=3, crash_loop_window_s=60)
    pol = AutoRelaunchPolicy(cfg)
    for t, sig in [(0, "A"), (10, "B"), (70, "A"), (80, "A"), (90, "B")]:  # A at 0 left the window by 70
        assert pol.on_exit(float(t), ProcessExit(time=t, kind="crash", code=1, signature=sig)).relaunch
    d = pol.on_exit(100.0, ProcessExit(time=100, kind="crash", code=1, signature="A"))
    assert d.crash_loop and not d.relaunch and "A repeated 3 times" in d.reason
    for kind in ("clean", "killed"):
        fresh = AutoRelaunchPolicy(cfg)
        assert not fresh.on_exit(0.0, ProcessExit(time=0, kind=kind, code=0)).relaunch


def test_classify_exit():
    assert classify_exit(0, None) == ("clean", None)
    assert classify_exit(3, None) == ("crash", None)
    assert classify_exit(137, None) == ("killed", 9)
    assert classify_exit(None, 15) == ("killed", 15)
    assert classify_exit(None, 11) == ("crash", 11)
    assert classify_exit(None, None) == ("clean", None)
    assert classify_exit(None, None, "E:x") == ("crash", None)


# ------------------------------------------------------- safety and CLI
@pytest.mark.parametrize("name", ["a:b", "a.b", "$1", "%0", "@2", "a!", "^", "a b", "tab\tx", "-x", "", "a#b", "=a"])
def test_session_names_that_tmux_would_misread_are_refused(name, tmp_path, capsys):
    with pytest.raises(InvalidName):
        validate_name(name)
    with pytest.raises(ValueError):
        JobSpec(command="true", session=name, state_dir=tmp_path)
    assert cli_actions.cmd_status(ns(session=name)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "session name" in err


def test_good_session_names_pass():
    for name in ("train", "dflash-run_2", "qwen3+dflash"):
        assert validate_name(name) == name


def test_tmux_missing_disables_control_only(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH without tmux
    job = Job(JobSpec(command="true", session="job", state_dir=tmp_path))
    assert not job.available
    for call in (job.status, job.start, job.abort, job.relaunch):
        with pytest.raises(ControlUnavailable, match="tmux not found"):
            call()
    assert job.poll_exit(time.time()) is None  # the Monitor's hook stays quiet
    for cmd in (cli_actions.cmd_status, cli_actions.cmd_start, cli_actions.cmd_abort, cli_actions.cmd_relaunch):
        assert cmd(ns(session="job", cmd="true")) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 4 and all("tmux not found" in line for line in err)


def test_cli_actions_full_cycle_from_config(tmux, tmp_path, marker, capsys):
    config = tmp_path / "dfw.toml"
    config.write_text(
        "[run]\n"
        f"command = {json.dumps(long_cmd(tmp_path, marker))}\n"
        f"session = \"cli\"\nsocket = {json.dumps(tmux.socket)}\n"
        f"state_dir = {json.dumps(str(tmp_path / 'state'))}\n"
        "[run.env]\nDFW_TEST = \"1\"\n"
    )
    args = ns(config=str(config), grace=1.0)
    assert cli_actions.cmd_status(args) == 1
    assert cli_actions.cmd_start(args) == 0
    trainer_pids(tmp_path)
    assert cli_actions.cmd_status(args) == 0
    assert cli_actions.cmd_relaunch(args) == 0
    trainer_pids(tmp_path, 2)
    assert cli_actions.cmd_abort(args) == 0
    assert cli_actions.cmd_status(args) == 1
    out = capsys.readouterr().out
    assert "created session cli" in out and "respawned pane" in out and "sent Ctrl-C" in out
    assert not marked_pids(marker)
    assert cli_actions.cmd_status(ns(config=str(tmp_path / "missing.toml"))) == 2
    assert "missing.toml not found" in capsys.readouterr().err


@pytest.mark.parametrize("by", ["name", "path"])
def test_killing_a_private_server_removes_its_socket_file(by: str, tmux_socket: str, tmp_path: Path) -> None:
    """The demo's server (and every test's) leaves nothing in /tmp/tmux-UID."""
    tmux = Tmux(socket=tmux_socket if by == "name" else str(tmp_path / "s.sock"))
    tmux.run("new-session", "-d", "-s", "x", "sleep 30")
    path = tmux._socket_folder() / tmux_socket if by == "name" else tmp_path / "s.sock"
    assert path.exists()
    tmux.kill_server()
    assert not path.exists()
    with pytest.raises(TmuxServerGone):
        tmux.run("list-sessions")
