"""Session names stay apart: one state file per exact name, and tmux keeps the name it was given.

Sanitising names into file names lost them (训练1 and 实验1 both read
``__1``; ``a;b``, ``a'b`` and ``a_b`` were one file), so one job saw the
other's pids. Real tmux servers on private sockets, under ``LC_ALL=C``
where tmux itself would turn every byte of 训练1 into ``_`` unless told
the names are UTF-8.
"""

from __future__ import annotations

import json
import shlex
import time
from pathlib import Path

import pytest
from tmux_job_helpers import PY, TRAINERS, long_cmd, marked_pids, ns, spec, trainer_pids, wait_ended

from dflash_watch.control import cli_actions
from dflash_watch.control.job import Job, JobSpec


def test_every_exact_name_has_its_own_files(tmp_path):
    names = ["训练1", "实验1", "__1", "a;b", "a'b", "a_b", "a--b"]
    specs = [JobSpec(command="true", session=n, state_dir=tmp_path) for n in names]
    specs.append(JobSpec(command="true", session="a", window="b", state_dir=tmp_path))  # old: a--b too
    specs.append(JobSpec(command="true", session="a_b", socket="/tmp/x", state_dir=tmp_path))
    specs.append(JobSpec(command="true", session="a_b", socket="_tmp_x", state_dir=tmp_path))
    paths = [s.fresh_state_path for s in specs]
    assert len(set(paths)) == len(paths)
    assert len({s.lock_path for s in specs}) == len(specs)
    assert paths[0].name.startswith("default--_")  # still readable where it can be
    assert all(len(p.name.encode()) < 255 for p in paths)
    long = JobSpec(command="true", session="x" * 200, state_dir=tmp_path)
    assert len(long.fresh_state_path.name) < 120


def test_a_job_started_before_the_upgrade_is_still_seen(tmp_path):
    """An old-format record is read while the name was one the old format kept intact."""
    safe = JobSpec(command="true", session="train-1_x", state_dir=tmp_path)
    old = tmp_path / "default--train-1_x.state.json"
    old.write_text(json.dumps({"run_id": "r-old", "state": "exited", "code": 4}))
    assert safe.state_path == old and safe.fresh_state_path != old
    assert JobSpec(command="true", session="训练1", state_dir=tmp_path).legacy_key is None
    (tmp_path / "default--__1.state.json").write_text("{}")  # what 训练1 used to share
    assert JobSpec(command="true", session="实验1", state_dir=tmp_path).state_path.name != "default--__1.state.json"


def test_upgrade_keeps_a_running_job_and_its_exit(tmux, tmp_path, monkeypatch):
    """A run launched by the old release (its wrapper writes the old file) keeps its status and exit code."""
    job_spec = spec(tmux, tmp_path, "sleep 0.6; exit 4", session="train")
    legacy = Path(job_spec.state_dir) / f"{job_spec.legacy_key}.state.json"
    with monkeypatch.context() as m:
        m.setattr(JobSpec, "fresh_state_path", property(lambda self: legacy))
        Job(job_spec).start()  # as the release before the hash launched it
    assert legacy.exists() and job_spec.state_path == legacy
    job = Job(job_spec)
    st = job.status()
    assert st.running and st.managed
    st = wait_ended(job)
    assert (st.state, st.code) == ("exited", 4) and "without recording" not in st.message
    assert job.poll_exit(time.time()).code == 4
    assert job.relaunch().running  # the next run records under the new name
    assert not legacy.exists() and job_spec.fresh_state_path.exists()


def test_two_chinese_names_under_lang_c_are_two_jobs(tmux, tmp_path, marker, monkeypatch, capsys):
    monkeypatch.setenv("LC_ALL", "C")
    monkeypatch.setenv("LANG", "C")
    crash = f"{PY} {shlex.quote(str(TRAINERS / 'crash_trainer.py'))} {shlex.quote(str(tmp_path / 'crash.log'))}"
    running = Job(spec(tmux, tmp_path, long_cmd(tmp_path, marker), session="实验1"))
    crashed = Job(spec(tmux, tmp_path, crash, session="训练1"))
    running.start()
    (pid,) = trainer_pids(tmp_path)
    crashed.start()
    st = wait_ended(crashed)
    assert (st.state, st.code, st.pids) == ("exited", 3, ()), st
    names = tmux.run("list-sessions", "-F", "#{session_name}").stdout.split()
    assert sorted(names) == sorted(["实验1", "训练1"])
    assert running.status().running and pid in running.status().pids
    assert str(pid) not in crashed.status().line()
    assert crashed.relaunch().state in ("running", "exited")  # a crashed 训练1 relaunches while 实验1 runs
    assert wait_ended(crashed).code == 3 and (tmp_path / "crash.log").read_text().count("fake crash") == 2
    assert marked_pids(marker) == [pid]
    args = ns(session="训练1", socket=tmux.socket)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert cli_actions.cmd_status(args) == 1 and str(pid) not in capsys.readouterr().out


def test_names_that_were_one_file_are_separate_jobs(tmux, tmp_path):
    jobs = {name: Job(spec(tmux, tmp_path, f"exit {code}", session=name))
            for code, name in enumerate(["a;b", "a'b", "a_b"], start=3)}
    for job in jobs.values():
        job.start()
    codes = {name: wait_ended(job).code for name, job in jobs.items()}
    assert codes == {"a;b": 3, "a'b": 4, "a_b": 5}
    names = tmux.run("list-sessions", "-F", "#{session_name}").stdout.splitlines()
    assert sorted(names) == sorted(jobs)


@pytest.mark.parametrize("name", ["a\\", "a\\b"])
def test_a_name_tmux_would_rewrite_is_refused_up_front(name, tmux, capsys):
    assert cli_actions.cmd_start(ns(session=name, socket=tmux.socket, cmd="true")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "session name" in err and "\\" in err
    assert not tmux.server_running()
