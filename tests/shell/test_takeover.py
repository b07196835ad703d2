"""`r` on a run the user started by hand in a tmux pane: say what, ask, take the pane over.

A real tmux server on a private socket; the user's pane is a real
interactive bash in which the test types the training command, as a person
would. The dashboard is the real DashboardApp driven by Textual's pilot.
"""

from __future__ import annotations

import shlex
import time
from pathlib import Path

from tmux_job_helpers import PY, TRAINERS, long_cmd, marked_pids, spec, trainer_pids, wait_for

from dflash_watch.control.adopt import history_command
from dflash_watch.control.job import Job, JobError, proc_alive
from dflash_watch.monitor import Monitor
from dflash_watch.procfs import proc_tree
from dflash_watch.tui.app import DashboardApp
from dflash_watch.tui.screens.confirm import ConfirmScreen

SIZE = (140, 44)


def user_shell(tmux, workdir: Path, session: str = "user") -> str:
    """The user's own pane: an interactive bash at a '$ ' prompt in ``workdir``; returns the pane id."""
    tmux.run("new-session", "-d", "-s", session, "-x", "200", "-y", "50", "-c", str(workdir),
             "-e", "PS1=$ ", "--", "bash", "--norc", "--noprofile")
    pane = tmux.run("display-message", "-p", "-t", f"={session}:", "#{pane_id}").stdout.strip()
    wait_for(lambda: prompt_shown(tmux, pane))
    return pane


def prompt_shown(tmux, pane: str) -> bool:
    lines = [x for x in tmux.run("capture-pane", "-p", "-t", pane).stdout.splitlines() if x.strip()]
    return bool(lines) and lines[-1].rstrip() == "$"


def type_line(tmux, pane: str, text: str) -> None:
    tmux.run("send-keys", "-t", pane, "-l", text)
    tmux.run("send-keys", "-t", pane, "Enter")


def pane_pid(tmux, pane: str) -> int:
    return int(tmux.run("display-message", "-p", "-t", pane, "#{pane_pid}").stdout)


async def settle(app, pilot) -> None:
    await pilot.pause()
    await app.workers.wait_for_complete()
    await pilot.pause()


def crash_line() -> str:
    # a relative log path: it only lands in the right place when the cwd is right
    return f"{PY} {shlex.quote(str(TRAINERS / 'crash_trainer.py'))} run.log 3 2>&1 | tee tee.log"


async def test_r_on_a_crashed_hand_started_run_asks_then_takes_the_pane_over(tmux, tmp_path):
    work = tmp_path / "my run"
    work.mkdir()
    pane = user_shell(tmux, work)
    shell = pane_pid(tmux, pane)
    type_line(tmux, pane, crash_line())
    wait_for(lambda: (work / "run.log").exists() and "fake crash" in (work / "run.log").read_text())
    wait_for(lambda: prompt_shown(tmux, pane))  # it died before the dashboard looked

    job = Job(spec(tmux, tmp_path, "", session="user"))
    app = DashboardApp(Monitor(), job=job, bell_repeat_s=0)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(app, pilot)
        await pilot.press("r")
        await settle(app, pilot)
        assert isinstance(app.screen, ConfirmScreen), app.steps
        body = " ".join(app.screen.body.plain.split())  # rows wrap at spaces
        assert pane in body and "user" in body
        assert crash_line() in body  # the line from the pane's history
        assert str(work) in body  # the working directory
        assert "a guess, check it" in body and "--cmd" in body  # not read from a live process: ask
        assert "respawn-pane -k" in body and f"pid {shell}" in body  # what it ends is named
        await pilot.press("y")
        await settle(app, pilot)
        assert any("took over pane" in s for s in app.steps), app.steps
    st = wait_for(lambda: (lambda s: s if not s.running else None)(job.status()))
    assert st.managed and (st.state, st.code) == ("exited", 3)  # the pipeline's first stage, not tee
    assert not proc_alive(shell)  # the shell at its prompt was replaced, after the confirmation
    assert (work / "run.log").read_text().count("RuntimeError: fake crash") == 2  # same cwd, run again
    assert job.spec.command == crash_line() and job.spec.cwd == str(work)
    assert "relaunch" in app.steps[-1] or app.steps[-1].startswith("takeover: done")


async def test_a_run_seen_alive_is_read_from_proc_and_n_touches_nothing(tmux, tmp_path, marker):
    work = tmp_path / "w"
    work.mkdir()
    pane = user_shell(tmux, work)
    shell = pane_pid(tmux, pane)
    line = f"{long_cmd(tmp_path, marker)} 2>&1 | tee train.log"
    type_line(tmux, pane, line)
    (pid,) = trainer_pids(tmp_path)

    job = Job(spec(tmux, tmp_path, "", session="user"))
    app = DashboardApp(Monitor(), job=job, bell_repeat_s=0)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(app, pilot)
        await pilot.press("r")
        await settle(app, pilot)
        assert isinstance(app.screen, ConfirmScreen)
        body = " ".join(app.screen.body.plain.split())  # rows wrap at spaces
        assert line in body and f"matching pid {pid}" in body and "a guess" not in body
        assert "will stop" in body and str(pid) in body
        await pilot.press("n")
        await settle(app, pilot)
        assert proc_alive(pid) and proc_alive(shell)  # nothing killed without the confirmation
        assert marked_pids(marker) == [pid]

        await pilot.press("r")
        await settle(app, pilot)
        await pilot.press("y")
        await settle(app, pilot)
    assert not proc_alive(shell)
    new = wait_for(lambda: [p for p in trainer_pids(tmp_path, 2) if p != pid])
    assert marked_pids(marker) == new  # one training: the old one stopped first, then the pane respawned
    st = job.status()
    assert st.running and st.managed and new[0] in st.pids
    assert (work / "train.log").exists()


def test_a_run_that_died_after_being_seen_is_run_again_with_its_typed_line(tmux, tmp_path, marker):
    work = tmp_path / "w"
    work.mkdir()
    pane = user_shell(tmux, work)
    line = f"FOO=bar {long_cmd(tmp_path, marker)} | cat"
    type_line(tmux, pane, line)
    (pid,) = trainer_pids(tmp_path)
    job = Job(spec(tmux, tmp_path, "", session="user"))
    assert job.status().running  # the dashboard's poll sees the run alive
    import os
    import signal

    os.kill(pid, signal.SIGKILL)  # the training dies (the OOM killer, say)
    wait_for(lambda: prompt_shown(tmux, pane))
    st = job.status()
    assert st.state == "exited" and "shell prompt" in st.message
    adoption = job.adoption(st)
    assert adoption.certain and adoption.command == line and adoption.cwd == str(work)
    assert ("FOO", "bar") in adoption.env
    job.take_over(adoption)
    new = wait_for(lambda: [p for p in trainer_pids(tmp_path, 2) if p != pid])
    assert job.status().managed and marked_pids(marker) == new
    assert Path(f"/proc/{new[0]}/environ").read_bytes().split(b"\0").count(b"FOO=bar") == 1


def test_takeover_refuses_while_the_pane_runs_something_else(tmux, tmp_path):
    work = tmp_path / "w"
    work.mkdir()
    pane = user_shell(tmux, work)
    shell = pane_pid(tmux, pane)
    type_line(tmux, pane, "sleep 300 & clear")
    wait_for(lambda: len(proc_tree(shell)) == 2 and prompt_shown(tmux, pane))
    (sleeper,) = proc_tree(shell)[1:]
    try:
        job = Job(spec(tmux, tmp_path, f"{PY} -c pass", session="user"))  # --cmd given
        adoption = job.adoption()
        assert adoption.command == f"{PY} -c pass" and adoption.source == "--cmd"
        try:
            job.take_over(adoption)
        except JobError as exc:
            assert str(sleeper) in str(exc) and "nothing was respawned" in str(exc)
        else:
            raise AssertionError("took over a pane with a live background job")
        assert proc_alive(shell) and proc_alive(sleeper)
    finally:
        import os
        import signal

        os.kill(sleeper, signal.SIGKILL)


def test_nothing_to_read_asks_for_cmd(tmux, tmp_path):
    pane = user_shell(tmux, tmp_path)
    job = Job(spec(tmux, tmp_path, "", session="user"))
    adoption = job.adoption()
    assert adoption is not None and adoption.pane == pane and not adoption.known
    try:
        job.take_over(adoption)
    except JobError as exc:
        assert "--cmd" in str(exc)
    else:
        raise AssertionError("took over without a command")


def test_a_managed_pane_is_not_adopted(tmux, tmp_path, marker):
    job = Job(spec(tmux, tmp_path, long_cmd(tmp_path, marker)))
    job.start()
    trainer_pids(tmp_path)
    assert job.adoption() is None  # dflash-watch's own wrapper: a plain relaunch


def test_history_command():
    at_prompt = ["$ cd /x", "$ python train.py --lr 3e-4 2>&1 | tee log", "step 1", "Traceback ...", "$ ", ""]
    assert history_command(at_prompt) == "python train.py --lr 3e-4 2>&1 | tee log"
    assert history_command(["user@h:~/p$ torchrun t.py", "boom", "user@h:~/p$"]) == "torchrun t.py"
    running = ["$ ls", "a b", "$ python3 train.py | tee x", "step 7 loss > 3"]
    assert history_command(running, ("/usr/bin/python3", "train.py")) == "python3 train.py | tee x"
    assert history_command(["no prompt here"]) is None
    time.sleep(0)


def test_a_dead_pane_started_with_a_command_is_respawned_without_k(tmux, tmp_path):
    """``tmux new -s user 'python train.py'`` with remain-on-exit: tmux kept the command and the dead pane."""
    work = tmp_path / "w"
    work.mkdir()
    line = f"{PY} -c 'import pathlib, sys; pathlib.Path(\"ran\").touch(); sys.exit(2)'"
    tmux.run("new-session", "-d", "-s", "user", "-c", str(work), f"sleep 0.3; {line}")
    tmux.run("set-option", "-t", "user", "remain-on-exit", "on")
    wait_for(lambda: tmux.run("display-message", "-p", "-t", "=user:", "#{pane_dead}").stdout.strip() == "1")
    (work / "ran").unlink()
    job = Job(spec(tmux, tmp_path, "", session="user"))
    st = job.status()
    assert not st.running and not st.managed
    adoption = job.adoption(st)
    assert adoption.certain and "pane_start_command" in adoption.source
    assert adoption.command == f"sleep 0.3; {line}" and adoption.cwd == str(work) and adoption.replaces is None
    job.take_over(adoption)
    st = wait_for(lambda: (lambda s: s if not s.running else None)(job.status()))
    assert st.managed and st.code == 2 and (work / "ran").exists()


def _config(tmp_path: Path, tmux, command: str, session: str = "user", cwd: str | None = None) -> str:
    import json

    path = tmp_path / "dfw.toml"
    path.write_text(
        "[run]\n"
        f"command = {json.dumps(command)}\nsession = {json.dumps(session)}\n"
        f"socket = {json.dumps(tmux.socket)}\nstate_dir = {json.dumps(str(tmp_path / 'state'))}\n"
        "grace_s = 1.0\npreflight_timeout_s = 5.0\n" + (f"cwd = {json.dumps(cwd)}\n" if cwd else "")
    )
    return str(path)


def test_cli_relaunch_of_a_hand_started_run_refuses_before_touching_it_and_take_over_does_it(
        tmux, tmp_path, marker, capsys):
    """`dflash-watch relaunch` used to Ctrl-C a run the user started by hand,
    then refuse to start in the live pane (only dead panes are respawned):
    the training dead, nothing running. Now it refuses first, exit 1, and
    ``--take-over`` is the explicit way: the training stopped, the shell
    spared until the pane is respawned, one new training."""
    from tmux_job_helpers import ns

    from dflash_watch.control import cli_actions

    work = tmp_path / "w"
    work.mkdir()
    pane = user_shell(tmux, work)
    type_line(tmux, pane, long_cmd(tmp_path, marker))
    (pid,) = trainer_pids(tmp_path)
    args = ns(config=_config(tmp_path, tmux, long_cmd(tmp_path, marker)))
    capsys.readouterr()
    assert cli_actions.cmd_relaunch(args) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "started by hand" in err and "nothing was touched" in err, err
    assert "--take-over" in err and proc_alive(pid) and marked_pids(marker) == [pid]
    args.take_over = True
    assert cli_actions.cmd_relaunch(args) == 0, capsys.readouterr().err
    new = wait_for(lambda: [p for p in trainer_pids(tmp_path, 2) if p != pid])
    assert wait_for(lambda: not proc_alive(pid)) and wait_for(lambda: marked_pids(marker) == new)  # one training
    st = Job(cli_actions.spec_from_args(args)).status()
    assert st.running and st.managed and new[0] in st.pids


def test_takeover_waits_out_the_shells_prompt_hook(tmux, tmp_path, marker):
    """A shell whose prompt hook runs a program as the training ends
    (pyenv's, conda's, direnv's ``PROMPT_COMMAND``): the pane briefly holds
    it beside the shell. The takeover waits for it instead of refusing
    after it had stopped the training."""
    work = tmp_path / "w"
    work.mkdir()
    tmux.run("new-session", "-d", "-s", "user", "-x", "200", "-y", "50", "-c", str(work),
             "-e", "PS1=$ ", "-e", "PROMPT_COMMAND=sleep 1.2", "--", "bash", "--norc", "--noprofile")
    pane = tmux.run("display-message", "-p", "-t", "=user:", "#{pane_id}").stdout.strip()
    wait_for(lambda: prompt_shown(tmux, pane))
    type_line(tmux, pane, long_cmd(tmp_path, marker))
    (pid,) = trainer_pids(tmp_path)
    job = Job(spec(tmux, tmp_path, long_cmd(tmp_path, marker), session="user"))
    adoption = job.adoption()
    assert adoption is not None
    st = job.take_over(adoption)
    new = wait_for(lambda: [p for p in trainer_pids(tmp_path, 2) if p != pid])
    assert st.running and st.managed and wait_for(lambda: not proc_alive(pid))
    assert wait_for(lambda: marked_pids(marker) == new)  # one training


def test_start_with_a_working_directory_that_does_not_exist_is_refused(tmux, tmp_path, capsys):
    """tmux would run the job in the caller's directory: its relative data
    and checkpoint paths would mean something else. One line, exit 2, no
    session; the dashboard's start (``Job.start``) refuses too."""
    from tmux_job_helpers import ns

    from dflash_watch.control import cli_actions

    missing = tmp_path / "no" / "such"
    where = tmp_path / "where.txt"  # where a job run anyway would say it ran (not the caller's directory)
    command = f"pwd > {where}"
    args = ns(config=_config(tmp_path, tmux, command, session="e4"), cwd=str(missing))
    assert cli_actions.cmd_start(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such directory" in err and str(missing) in err
    assert not tmux.server_running()
    job = Job(spec(tmux, tmp_path, command, session="e4", cwd=str(missing)))
    try:
        job.start()
    except JobError as exc:
        assert "no such directory" in str(exc)
    else:
        raise AssertionError("started in a directory that does not exist")
    assert not tmux.server_running() and not where.exists()
