"""The job's end as a ``process_exit`` event: how it is classified, and reported once.

Why a watcher object: the Monitor polls the job every tick, and one run
must give exactly one ProcessExit (CONTRACTS: one episode fires once),
whether the wrapper recorded the end or only tmux saw the pane die, and
also when the run ended between two polls.
"""

from __future__ import annotations

import signal
from collections.abc import Callable

from dflash_watch.parsers.events import ProcessExit

from .state import JobState, int_or_none

# The last crash signature the log showed, or a function that gives it,
# called only once an end is seen: the shell completes the log's last
# traceback first (the job is gone, nothing more will be written), which it
# must not do at every poll of a live run. Read earlier, the crash-loop
# guard counted a crash by its exit status (``code:1``) while the alert
# named its traceback, and identical crashes never made a loop.
SignatureSource = str | Callable[[], str | None] | None


def signature_now(signature: SignatureSource) -> str | None:
    """``signature`` itself, or what its function gives now."""
    return signature() if callable(signature) else signature


# Signals that mean "stopped from outside" (CONTRACTS: process_exit kind killed).
OUTSIDE_SIGNALS = frozenset({signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP})


def classify_exit(code: int | None, sig: int | None, signature: str | None = None) -> tuple[str, int | None]:
    """(kind, signal) for a process_exit event.

    bash reports a child killed by signal N as code 128+N; those count as the
    signal. SIGKILL/SIGTERM/SIGINT/SIGHUP are "killed" (from outside);
    SIGSEGV, SIGABRT and non-zero codes are crashes. An unknown status is a
    crash only when the log showed one.
    """
    if sig is None and code is not None and 128 < code <= 128 + 64 and (code - 128) in OUTSIDE_SIGNALS:
        sig = code - 128
    if sig is not None:
        return ("killed" if sig in OUTSIDE_SIGNALS else "crash"), sig
    if code is None:
        return ("crash" if signature else "clean"), None
    return ("clean" if code == 0 else "crash"), None


class ExitWatcher:
    """Turns successive job states into at most one ProcessExit per run incarnation.

    ``asked``: run ids whose end this process asked for (abort, relaunch);
    the exit of such a run is ``aborted`` (CONTRACTS section 4), not a kill.
    """

    __slots__ = ("_reported", "_last_run", "asked")

    def __init__(self) -> None:
        self._reported: set[str] = set()
        self._last_run: str | None = None
        self.asked: dict[str, str] = {}

    def see(self, st: JobState, rec: dict | None, now: float, signature: SignatureSource,
            asked: Callable[[str], str | None] | None = None) -> ProcessExit | None:
        """``asked(run_id)``: the action that asked that run to end, if any (another caller's note)."""
        if st.running:
            self._last_run = st.run_id
            return None
        key = st.run_id or self._last_run
        if not key or key in self._reported:
            return None
        known = rec or {}  # rec_done implies rec is this (non-empty) dict
        rec_done = known.get("run_id") == key and known.get("state") in ("exited", "killed")
        if (not rec_done and st.pids and rec and rec.get("run_id") == key
                and rec.get("state") in ("starting", "running")):
            return None  # its pane is gone but the run lives on (it outlived the tmux server)
        if st.code is None and st.signal is None and not rec_done and key != self._last_run:
            return None  # never seen running and no status: nothing known to report
        self._reported.add(key)
        signature = signature_now(signature)
        code, sig = st.code, st.signal
        if rec_done and code is None and sig is None:
            # The state was read just before the wrapper wrote its record:
            # the record (read after it) is the truth.
            code, sig = int_or_none(known.get("code")), int_or_none(known.get("signal"))
        ended = known.get("ended_at") if rec_done else None
        kind, sig = classify_exit(code, sig, signature)
        why = (str(known.get("asked")) if rec_done and known.get("asked") else None) or self.asked.get(key)
        if why is None and asked is not None:
            why = asked(key)
        if why:
            kind = "aborted"
        return ProcessExit(time=float(ended) if ended else now, kind=kind, code=code, signal=sig,
                           signature=signature, asked=why)
