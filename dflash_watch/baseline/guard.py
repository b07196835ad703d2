"""Whether the recent window may become the baseline (the `b` key).

A baseline is the profile of a *good* run: every later "throughput
dropped" and "what changed" is measured against it. Saving a window in
which the run was already degraded (an alert firing, or firing for part of
it and resolved since) or dead would make the bad state the norm and
silence the very alerts that should fire. So `b` refuses such a window and
says why, naming what fired. ``baseline save --from/--to`` asks the same
rule about a replayed window (``window_refusal``), so the command line and
the dashboard never disagree about what a healthy window is.

The rule lives here, not in ``tui/``: it reads only the alert book, the
clock and the job's state (``monitor_view.AlertWindowView``), and the
headless ``baseline save`` must not import the dashboard's package.
"""

from __future__ import annotations

import math
from contextlib import nullcontext
from types import SimpleNamespace
from typing import TYPE_CHECKING

from dflash_watch.detectors.base import Alert
from dflash_watch.detectors.config import fmt_duration
from dflash_watch.parsers.events import TOK_S

if TYPE_CHECKING:
    from ..monitor import Monitor
    from ..monitor_view import AlertWindowView

BASELINE_WINDOW_S = 600.0


def against_health(alert: Alert) -> bool:
    """Whether ``alert`` says the run is not healthy: a warning or a critical one.

    An info alert says nothing about the run's health (a clean exit, an
    abort the user asked for, ``alerts test``): it neither blocks the `b`
    key or ``baseline save`` (``fired_in_window``) nor keeps the automatic
    save from calling the run healthy (``auto.AutoBaseline``). One rule,
    so the three never disagree about what a healthy run is."""
    return alert.severity != "info"


def _label(alert: Alert) -> str:
    what = alert.detector + (f"/{alert.kind}" if alert.kind else "") + (f" gpu{alert.gpu}" if alert.gpu is not None else "")
    return what


def fired_in_window(monitor: AlertWindowView, window_s: float = BASELINE_WINDOW_S) -> list[Alert]:
    """Alerts (warning or critical) firing now, or firing at some time in the window. Under ``locked``."""
    book = monitor.alerts
    now = monitor.now
    start = (now - window_s) if now is not None else None
    out: dict[tuple, Alert] = {}
    for alert in book.firing():
        if against_health(alert):
            out[(alert.detector, alert.gpu, alert.kind)] = alert
    if start is not None:
        for alert in book.history:
            # A firing in the window, or a resolve in it (it fired until then).
            if alert.time >= start and against_health(alert):
                out.setdefault((alert.detector, alert.gpu, alert.kind), alert)
    return list(out.values())


def refusal(monitor: AlertWindowView, window_s: float = BASELINE_WINDOW_S) -> str | None:
    """Why the last ``window_s`` must not become the baseline, or None when it may."""
    # The Monitor's writer lock while reading (a stand-in may have none).
    with getattr(monitor, "lock", None) or nullcontext():
        state = monitor.job_state
        last_exit = monitor.last_exit
        now = monitor.now
        fired = fired_in_window(monitor, window_s)
        unit = getattr(monitor, "throughput_unit", TOK_S)
    minutes = fmt_duration(window_s)  # "1 min", not "1 minutes"
    if unit != TOK_S:
        # The baseline file holds tokens/s (CONTRACTS section 6); an it/s median there would lie.
        return (f"not saved: this run reports {unit}, not tokens/s, and a baseline holds tokens/s; "
                "the throughput detector learns this run's own baseline after warm-up")
    if state is not None and getattr(state, "state", "running") != "running":
        line = state.line() if hasattr(state, "line") else state.state
        return f"not saved: the job is not running ({line}); a baseline is the profile of a healthy run"
    if last_exit is not None and now is not None and last_exit.time >= now - window_s:
        return f"not saved: the job ended ({last_exit.kind}) within the last {minutes}; save once it ran well that long"
    if fired:
        names = ", ".join(sorted({_label(a) for a in fired}))
        return (f"not saved: alerts fired in the last {minutes} ({names}); a baseline must come from a "
                "healthy window (acknowledging does not change that)")
    return None


def window_refusal(monitor: Monitor, start: float | None) -> str | None:
    """Why a replayed window (``baseline save``'s window Monitor) must not
    become the baseline, by the same rule as the `b` key, or None. The
    window Monitor saw only the window, so all it fired counts; the span
    is rounded up to whole minutes ("in the last 8 minutes"). The rule's
    unit check is left out: a saved file records a rate in another unit as
    ``throughput_unit``."""
    now = monitor.now
    if now is None:
        return None
    view = SimpleNamespace(alerts=monitor.alerts, now=now, job_state=None, last_exit=monitor.last_exit,
                           throughput_unit=TOK_S, lock=monitor.lock)
    span = now - start if start is not None and start < now else 0.0
    return refusal(view, window_s=60.0 * max(1, math.ceil(span / 60.0)))
