"""A job started as a pipeline reports the training's status, not tee's.

``dflash-watch start --cmd "python train.py 2>&1 | tee train.log"`` is how
most people keep a log of a run; plain ``bash -c`` would end with tee's 0
and a crashed training would look finished. Real pipelines in a real tmux
server on a private socket (the ``tmux`` fixture of tests/conftest.py).
"""

from __future__ import annotations

import json
import shlex
import signal
import time

import pytest
from tmux_job_helpers import PY, TRAINERS, long_cmd, marked_pids, spec, trainer_pids, wait_ended, wait_for

from dflash_watch.control.job import Job
from dflash_watch.control.wrapper import shell_outcome


def test_pipeline_reports_the_first_stage_that_failed_not_tee(tmux, tmp_path):
    log = tmp_path / "train.log"
    trainer = f"{PY} {shlex.quote(str(TRAINERS / 'crash_trainer.py'))} /dev/stdout 3"
    job = Job(spec(tmux, tmp_path, f"{trainer} 2>&1 | tee {shlex.quote(str(log))}"))
    job.start()
    st = wait_ended(job)
    assert (st.state, st.code, st.signal) == ("exited", 3, None), st
    assert "RuntimeError: fake crash" in log.read_text()  # tee ran, and ended with 0
    record = json.loads(job.spec.state_path.read_text())
    assert record["pipestatus"] == [3, 0] and "first failing stage" in record["message"]
    assert "pipeline stage statuses 3 | 0" in st.line()
    ev = job.poll_exit(time.time())
    assert (ev.kind, ev.code, ev.signal) == ("crash", 3, None)
    # the wrapper ended the way the training did (tmux 3.3 may leave the status empty)
    assert tmux.run("list-panes", "-t", "=job:", "-F", "#{pane_dead_status}").stdout.split() in (["3"], [])


@pytest.mark.parametrize("sig,kind", [(signal.SIGKILL, "killed"), (signal.SIGSEGV, "crash")])
def test_a_pipeline_stage_killed_by_a_signal_is_reported_as_that_signal(tmux, tmp_path, sig, kind):
    log = tmp_path / "train.log"
    die = f"{PY} -c 'import os; print(\"step 1\", flush=True); os.kill(os.getpid(), {int(sig)})'"
    job = Job(spec(tmux, tmp_path, f"ulimit -c 0; {die} 2>&1 | tee {shlex.quote(str(log))} | cat > /dev/null"))
    job.start()
    st = wait_ended(job)
    assert (st.state, st.code, st.signal) == ("killed", None, sig), st
    assert log.read_text() == "step 1\n"
    assert json.loads(job.spec.state_path.read_text())["pipestatus"] == [128 + sig, 0, 0]
    ev = job.poll_exit(time.time())
    assert (ev.kind, ev.signal) == (kind, sig)


def test_a_middle_stage_failing_counts_and_a_clean_pipeline_is_clean(tmux, tmp_path):
    job = Job(spec(tmux, tmp_path, "true | sh -c 'cat >/dev/null; exit 5' | cat"))
    job.start()
    assert (wait_ended(job).code, job.poll_exit(time.time()).kind) == (5, "crash")
    clean = Job(spec(tmux, tmp_path, "echo hi | tee /dev/null | cat", session="clean"))
    clean.start()
    assert (wait_ended(clean).state, wait_ended(clean).code) == ("exited", 0)
    assert clean.poll_exit(time.time()).kind == "clean"


def test_abort_of_a_pipeline_stops_every_stage_and_reports_ctrl_c(tmux, tmp_path, marker):
    log = tmp_path / "train.log"
    job = Job(spec(tmux, tmp_path, f"{long_cmd(tmp_path, marker)} 2>&1 | tee {shlex.quote(str(log))}; echo next > {shlex.quote(str(tmp_path / 'next'))}"))
    job.start()
    trainer_pids(tmp_path)
    steps = list(job.abort_steps())
    assert steps[-1].startswith("stopped after Ctrl-C"), steps
    st = wait_ended(job)
    assert (st.state, st.signal) == ("killed", signal.SIGINT)
    assert not marked_pids(marker) and not (tmp_path / "next").exists()  # the list did not go on


def test_sigterm_ends_the_list_after_the_pipeline_and_reports_sigterm(tmux, tmp_path, marker):
    """bash must neither die before the training (leaving it behind a dead pane) nor run the next command."""
    job = Job(spec(tmux, tmp_path, f"{long_cmd(tmp_path, marker, ignore='INT')} | cat; touch {shlex.quote(str(tmp_path / 'next'))}"))
    job.start()
    trainer_pids(tmp_path)
    steps = list(job.abort_steps(grace_s=0.5))
    assert steps[-1].startswith("stopped after SIGTERM"), steps
    assert wait_ended(job).signal == signal.SIGTERM
    assert not (tmp_path / "next").exists()


@pytest.mark.parametrize("code,side,expected", [
    (0, (0, [3, 0], False), (3, None)),          # train | tee: the training's 3
    (0, (0, [137, 0], False), (None, 9)),        # a stage killed by SIGKILL
    (7, (7, [0], False), (7, None)),             # exit 7: bash's own status
    (0, (0, [1], False), (0, None)),             # if false; then :; fi: bash's 0, not false's 1
    (0, (0, [0, 0], False), (0, None)),
    (2, None, (2, None)),                        # no side file (bash died early): bash's status
    (0, (0, [143, 0], True), (None, 15)),        # train | tee, SIGTERM: the trap exits with tee's 0
    # After a Ctrl-C that cat died of and the trainer ignored, bash left the
    # SIGTERM trap early with a status of its own (0 or 1): the statuses the
    # trap kept count, not bash's exit status.
    (0, (130, [143, 130], True), (None, 15)),
    (1, (130, [143, 130], True), (None, 15)),
])
def test_shell_outcome(code, side, expected):
    assert shell_outcome(code, side)[:2] == expected


def test_a_command_starting_with_a_dash_or_holding_semicolons_is_kept(tmux, tmp_path):
    out = tmp_path / "out"
    job = Job(spec(tmux, tmp_path, f"-true 2>/dev/null; echo 'a;b' > {shlex.quote(str(out))};"))
    job.start()
    wait_for(lambda: out.exists() and out.read_text())
    assert out.read_text() == "a;b\n"
    assert wait_ended(job).code == 0


def test_cli_start_of_a_pipeline_then_status_says_the_trainers_code(tmux, tmp_path, capsys, monkeypatch):
    """``dflash-watch start --cmd "python train.py 2>&1 | tee train.log"`` as a script runs it."""
    from tmux_job_helpers import ns

    from dflash_watch.control import cli_actions

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))  # the job's state dir
    log = tmp_path / "train.log"
    trainer = f"{PY} {shlex.quote(str(TRAINERS / 'crash_trainer.py'))} /dev/stdout 4"
    args = ns(session="cli", socket=tmux.socket, cmd=f"{trainer} 2>&1 | tee {shlex.quote(str(log))}")
    assert cli_actions.cmd_start(args) == 0
    wait_ended(Job(cli_actions.spec_from_args(args)))
    capsys.readouterr()
    assert cli_actions.cmd_status(args) == 1
    assert "exited with code 4" in capsys.readouterr().out
    assert "RuntimeError: fake crash" in log.read_text()


def test_a_signal_trap_cut_short_still_ends_the_list_with_the_statuses_it_kept(tmp_path):
    """After a Ctrl-C that cat died of and the trainer ignored, bash can leave
    the SIGTERM trap right after its first command (which kept the
    pipeline's statuses) and go on with the list. Here the list itself
    leaves the state that first command leaves: the next command must not
    run, and the run must read as the trainer's SIGTERM."""
    import subprocess

    from dflash_watch.control.wrapper import read_status_file, shell_argv

    side, nxt = tmp_path / "side", tmp_path / "next"
    cut_short = "__dfw_ps='143 130' __dfw_rc=130 __dfw_exiting=signal"
    done = subprocess.run(shell_argv(f"{cut_short}; touch {shlex.quote(str(nxt))}", str(side)),
                          stdin=subprocess.DEVNULL, timeout=10)
    assert not nxt.exists()
    status = read_status_file(str(side))
    assert status == (130, [143, 130], True)
    assert shell_outcome(done.returncode, status)[:2] == (None, signal.SIGTERM)


def test_a_signal_trap_run_inside_the_debug_trap_keeps_the_status_that_trap_kept():
    """A SIGTERM whose trap runs inside the DEBUG trap, after its first
    command kept the ended pipeline's statuses: the signal's trap must read
    those, not those with the DEBUG trap's marker glued on (seen once in
    the suite: code 1431 for the trainer's 143). The two traps' own text,
    run in that order on a status of 143."""
    import re
    import subprocess

    from dflash_watch.control.wrapper import SHELL_PROLOGUE

    term = re.search(r"trap '([^']*)' TERM HUP", SHELL_PROLOGUE).group(1)
    debug_first = re.search(r"trap '([^']*)' DEBUG", SHELL_PROLOGUE).group(1).split(";")[0]
    fresh = "unset __dfw_rc __dfw_ps __dfw_exiting __dfw_dbg"
    # The trap's exit: the kept status.
    done = subprocess.run(["bash", "-c", f"{fresh}; (exit 143); {debug_first}; {term}"], timeout=10)
    assert done.returncode == 143
    # An exit already begun (the trap does not exit): what it kept.
    kept = subprocess.run(
        ["bash", "-c", f'{fresh}; (exit 143); {debug_first}; __dfw_exiting=exit; {term}; echo "$__dfw_rc|$__dfw_ps"'],
        capture_output=True, text=True, timeout=10,
    )
    assert kept.stdout.strip() == "143|143"
    # Outside the DEBUG trap: the status as the trap finds it.
    plain = subprocess.run(["bash", "-c", f"{fresh}; (exit 7); {term}"], timeout=10)
    assert plain.returncode == 7
