"""Abort escalation: Ctrl-C in the pane, then SIGTERM, then SIGKILL to the run's process groups.

Why this order and these targets: Ctrl-C is what the user would type (the
training's own handler may save a checkpoint); SIGTERM and SIGKILL go to
the process groups of the pane's tree so torchrun's workers die with it.
Two processes are never signalled directly: dflash-watch's wrapper (it
must live to record how its child ended, and exits by itself) and a user's
interactive shell (the pane is theirs).

A run with no pane left (its tmux server was killed and it ignored the
hangup) gets the same three steps, SIGINT in place of Ctrl-C, sent only to
the processes ``survivors.find`` verified, re-verified before each signal.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator

from ..procfs import (
    SHELLS,
    proc_alive,
    proc_group,
    proc_name,
    proc_pgid,
    proc_signal_groups,
    proc_signal_pids,
)
from .record import is_ours
from .state import JobState, int_or_none, pids_text, signame
from .survivors import Survivors, signal_survivors
from .tmux import Tmux

WaitFn = Callable[[Callable[[], bool], float], bool]
SIGKILL_WAIT_S = 10.0


def keeper(st: JobState, rec: dict | None) -> int | None:
    """The pane process not to signal directly: our wrapper or a user's shell."""
    if not st.pid:
        return None
    if is_ours(rec, st.pid) or proc_name(st.pid) in SHELLS:
        return st.pid
    return None


def escalate(tmux: Tmux, st: JobState, rec: dict | None, grace_s: float, wait: WaitFn,
             target: str) -> Iterator[str]:
    """Stop the running job ``st``; yields one message per step. ``wait(done, s)``: True once done()."""
    ours = is_ours(rec, st.pid)
    spared = keeper(st, rec)
    victims = {p for p in st.pids if p != spared}
    pgids = {g for g in (proc_pgid(p) for p in victims) if g and g != proc_pgid(spared or -1)}
    if ours and rec is not None and int_or_none(rec.get("pgid")):
        pgids.add(int(rec["pgid"]))
    watch = victims | ({spared} if ours and spared else set())

    def stopped() -> bool:
        return not any(proc_alive(p) for p in watch) and not any(proc_group(g) for g in pgids)

    t0 = time.monotonic()
    tmux.run("send-keys", "-t", st.pane or target, "C-c")
    yield f"sent Ctrl-C to pane {st.pane}; waiting up to {grace_s:g} s"
    if wait(stopped, grace_s):
        yield f"stopped after Ctrl-C ({time.monotonic() - t0:.1f} s)"
        return
    for sig, limit in ((signal.SIGTERM, grace_s), (signal.SIGKILL, SIGKILL_WAIT_S)):
        hit = proc_signal_groups(pgids, sig) | proc_signal_pids(victims, sig)
        yield f"sent {signame(sig)} to {len(hit)} processes ({pids_text(tuple(sorted(hit)))})"
        if wait(stopped, limit):
            yield f"stopped after {signame(sig)} ({time.monotonic() - t0:.1f} s)"
            return
    left = sorted(p for p in victims if proc_alive(p))
    yield f"still alive after SIGKILL: {pids_text(tuple(left))}"


def end_survivors(first: Survivors, find: Callable[[], Survivors], grace_s: float,
                  wait: WaitFn) -> Iterator[str]:
    """SIGINT, SIGTERM, SIGKILL to a run that outlived its pane; ``find()`` re-verifies it each time."""
    t0 = time.monotonic()
    yield f"no pane left; the last run still has {pids_text(first.pids)}"
    for sig, limit in ((signal.SIGINT, grace_s), (signal.SIGTERM, grace_s), (signal.SIGKILL, SIGKILL_WAIT_S)):
        now = find()
        if not now:
            break
        hit = signal_survivors(now, sig)
        yield f"sent {signame(sig)} to {len(hit)} processes ({pids_text(tuple(sorted(hit)))})"
        if wait(lambda: not find(), limit):
            yield f"stopped after {signame(sig)} ({time.monotonic() - t0:.1f} s)"
            return
    left = find()
    if left:
        yield f"still alive after SIGKILL: {pids_text(left.pids)}"
    else:
        yield f"stopped ({time.monotonic() - t0:.1f} s)"
