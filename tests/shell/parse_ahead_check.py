"""Run by tests/shell/test_parse_ahead.py in a process of its own (pytest's
workers run threads; a fork belongs in a process that has none).

``compare PATH...``: each log's batches, notices and end time through
``forked_batches`` and through ``log_batches``; one line per log, "same" or
what differs. ``replay MIN_BYTES PATH...``: the alert lines of one replay of
all the logs with ``parse_ahead`` (children for logs of MIN_BYTES or more,
four CPUs pretended) and the number of forks, as JSON. ``forks_counted``
and ``reaped``: the scripts' fork counter and their look at a child's end."""

from __future__ import annotations

import json
import os
import sys

from dflash_watch import parse_ahead
from dflash_watch.replay import log_batches, replay


def described(batches: list[list[object]]) -> list[list[str]]:
    # Type and repr: equal values of the same kinds (a NaN is not equal to itself, its repr is).
    return [[f"{type(e).__qualname__}:{e!r}" for e in batch] for batch in batches]


def compare(paths: list[str]) -> None:
    for path in paths:
        n1: list[str] = []
        e1: list[float] = []
        n2: list[str] = []
        e2: list[float] = []
        forked = described(list(parse_ahead.forked_batches(path, notices=n1, ends=e1)))
        here = described(list(log_batches(path, notices=n2, ends=e2)))
        if forked != here:
            where = next((i for i, (a, b) in enumerate(zip(forked, here)) if a != b), min(len(forked), len(here)))
            print(f"batches differ {path} at batch {where} ({len(forked)} against {len(here)})")
        elif (n1, e1) != (n2, e2):
            print(f"notices or ends differ {path}: {n1} {e1} against {n2} {e2}")
        else:
            print(f"same {path} {len(here)} batches {sum(map(len, here))} events, notices: {len(n2)}")


def forks_counted(cpus: int = 4) -> list[int]:
    """The pids of the children this process forks from now on, in a list
    that fills as they are forked; and ``cpus`` CPUs to use whatever the
    machine has (no cgroup quota), so that ``parse_ahead.chosen`` forks on a
    one-CPU runner too."""
    pids: list[int] = []
    real_fork = os.fork

    def fork() -> int:
        pid = real_fork()
        if pid:
            pids.append(pid)
        return pid

    os.fork = fork  # type: ignore[assignment]
    os.sched_getaffinity = lambda _pid: set(range(cpus))  # type: ignore[assignment]
    parse_ahead.CPU_MAX = os.devnull
    return pids


def reaped(pid: int) -> str:
    """Whether our child ``pid`` is gone and waited for ("reaped"), or not."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return "reaped"
    return "not reaped"


def replayed(min_bytes: int, paths: list[str]) -> None:
    pids = forks_counted()
    parse_ahead.MIN_BYTES = min_bytes
    result = replay(paths, parse_ahead=True)
    print(json.dumps({"alerts": [a.to_json() for a in result.alerts], "notices": result.notices, "forks": len(pids)}))


if __name__ == "__main__":
    if sys.argv[1] == "compare":
        compare(sys.argv[2:])
    else:
        replayed(int(sys.argv[2]), sys.argv[3:])
