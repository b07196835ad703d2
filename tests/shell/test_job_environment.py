"""Which process's environment is fingerprinted: one way (``environment.running_training_pid``)
for ``baseline save``/``diff`` and the live session (``diagnose.job_fingerprint``)."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from dflash_watch.baseline import diagnose, environment
from dflash_watch.baseline.environment import running_training_pid


class _Job:
    def __init__(self, state: object = None, error: Exception | None = None) -> None:
        self.state, self.error = state, error

    def status(self) -> object:
        if self.error is not None:
            raise self.error
        return self.state


def test_only_a_running_job_has_a_training_process() -> None:
    me = os.getpid()  # this interpreter: a Python process, as a trainer is
    assert running_training_pid(None) is None
    assert running_training_pid(_Job(error=RuntimeError("no server running on /tmp/tmux-0/default"))) is None
    assert running_training_pid(_Job(SimpleNamespace(running=False, pids=[me]))) is None
    assert running_training_pid(_Job(SimpleNamespace(running=True, pids=[]))) is None
    assert running_training_pid(_Job(SimpleNamespace(running=True, pids=None))) is None
    assert running_training_pid(_Job(SimpleNamespace(running=True, pids=[me]))) == me


def test_the_live_fingerprint_reads_the_process_the_one_rule_names(monkeypatch: pytest.MonkeyPatch) -> None:
    read: list[int] = []

    class _Fingerprint:
        def to_dict(self) -> dict[str, str]:
            return {"read": "yes"}

    def fingerprint_of_pid(pid: int) -> _Fingerprint:
        read.append(pid)
        return _Fingerprint()

    from dflash_watch.baseline import fingerprint

    monkeypatch.setattr(fingerprint, "fingerprint_of_pid", fingerprint_of_pid)
    monkeypatch.setattr(environment, "running_training_pid", lambda job: 4242 if job == "running" else None)
    assert diagnose.job_fingerprint("running") == {"read": "yes"} and read == [4242]
    assert diagnose.job_fingerprint("stopped") is None and read == [4242]
