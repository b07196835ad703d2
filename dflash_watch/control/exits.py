"""The job's end as a ``process_exit`` event: how it is classified, and reported once.

Why a watcher object: the Monitor polls the job every tick, and one run
must give exactly one ProcessExit (CONTRACTS: one episode fires once),
whether the wrapper recorded the end or only tmux saw the pane die, and
also when the run ended between two polls.
"""

from __future__ import annotations

import signal

from parsers.events import ProcessExit

from .state import JobState, int_or_none

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
    """Turns successive job states into at most one ProcessExit per run incarnation."""

    __slots__ = ("_reported", "_last_run")

    def __init__(self) -> None:
        self._reported: set[str] = set()
        self._last_run: str | None = None

    def see(self, st: JobState, rec: dict | None, now: float, signature: str | None) -> ProcessExit | None:
        if st.running:
            self._last_run = st.run_id
            return None
        key = st.run_id or self._last_run
        if not key or key in self._reported:
            return None
        rec_done = bool(rec) and rec.get("run_id") == key and rec.get("state") in ("exited", "killed")
        if st.code is None and st.signal is None and not rec_done and key != self._last_run:
            return None  # never seen running and no status: nothing known to report
        self._reported.add(key)
        code, sig = st.code, st.signal
        if rec_done and code is None and sig is None:
            # The state was read just before the wrapper wrote its record:
            # the record (read after it) is the truth.
            code, sig = int_or_none(rec.get("code")), int_or_none(rec.get("signal"))
        ended = rec.get("ended_at") if rec_done else None
        kind, sig = classify_exit(code, sig, signature)
        return ProcessExit(time=float(ended) if ended else now, kind=kind, code=code, signal=sig,
                           signature=signature)
