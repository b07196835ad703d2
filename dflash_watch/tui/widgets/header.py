"""The status line: job state, uptime, restarts, step and ETA, the rate vs baseline, alerts.

Every field reads the Monitor (``job_state`` as the live session last saw
it, ``last_progress``, ``throughput``, ``alerts``); the only thing kept
here is the first step seen, to estimate an ETA when the log states no
step time.
"""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.widgets import Static

from ..reading import TrainingBar, current_rate, locked
from ..text import asked_to_stop, fmt_duration, fmt_rate_unit, plain

if TYPE_CHECKING:
    from ...monitor import Monitor

_STATE = {
    "running": ("● running", "bold green"),
    "exited": ("✖ exited", "bold red"),
    "killed": ("✖ killed", "bold red"),
    "absent": ("○ absent", "bold yellow"),
}


def job_text(state: Any, control: str | None, now: float, compact: bool = False, asked: bool = False) -> Text:
    """The job part: ``control`` says why there is no job control, if there is none.

    ``asked``: the job stopped because the user asked (``asked_to_stop``):
    said calmly, never as a red kill.
    """
    if control is not None:
        return Text(control, style="dim")
    if state is None:
        return Text("job: checking…", style="dim")
    label, style = _STATE.get(state.state, (state.state, "bold"))
    out = Text()
    if asked and state.state in ("exited", "killed"):
        label, style = "■ stopped as asked", "bold cyan"
    elif state.state == "exited":
        code = "?" if state.code is None else state.code
        label = "✓ exited 0" if code == 0 else f"✖ exited {code}"
        style = "bold green" if code == 0 else style
    elif state.state == "killed":
        try:
            label = f"✖ killed {signal.Signals(state.signal).name}" if state.signal else label
        except ValueError:
            label = f"✖ killed signal {state.signal}"
    out.append(label, style=style)
    if not compact:
        out.append(f" {plain(state.session)}", style="dim")
    if state.state == "running":
        up = (now - state.started_at) if state.started_at else state.uptime_s
        if up is not None:
            out.append(f" · up {fmt_duration(up)}")
    return out


def stale_for(state: Any, progress: Any, firing: list, now: float | None,
              crashed_at: float | None = None) -> float | None:
    """How long ago the last step was, where the rate and ETA it gave are
    stale: a stall is firing (the detector knows the run's usual step
    interval and its bursts), the job it came from exited or was killed
    (not "absent": a log watched with no job of ours goes on), or, with no
    job of ours, a fatal crash is firing that the log showed after the last
    step (``crashed_at``: the crash's data time). Else None: between two
    steps a rate stands."""
    if progress is None or now is None:
        return None
    stalled = any(getattr(a, "detector", "") == "stall" for a in firing)
    ended = getattr(state, "state", None) in ("exited", "killed")
    crashed = crashed_at is not None and crashed_at >= progress.time and any(
        getattr(a, "detector", "") in ("crash", "fx_tracing") and getattr(a, "severity", "") == "critical"
        for a in firing)
    if not (stalled or ended or crashed):
        return None
    return max(0.0, now - progress.time)


class StatusHeader(Static):
    DEFAULT_CSS = """
    StatusHeader { height: 1; background: $panel; padding: 0 1; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def __init__(self, *, control: str | None = None, id: str | None = None) -> None:
        super().__init__("", id=id)
        self.control = control
        self._first_step: tuple[float, int] | None = None
        self._shown: Text | None = None
        self._asked = False
        self._bar = TrainingBar()  # the step shown is the training loop's, not an eval bar's

    def update_view(self, monitor: Monitor, firing: list, unacked: int, now: float) -> None:
        with locked(monitor):
            rate, unit, baseline = current_rate(monitor)
            progress = self._bar.choose(monitor.last_progress, monitor.restarts)
            crash = monitor.last_crash
            stale = stale_for(monitor.job_state, progress, firing, monitor.now, crash.time if crash else None)
            facts = (monitor.job_state, progress, rate, unit, baseline, monitor.restarts,
                     float(getattr(monitor.detector_config, "throughput_drop_frac", 0.3)), stale)
            asked = asked_to_stop(monitor.job_state, monitor.last_exit)
        self._asked = asked
        width = self.size.width or self.app.size.width
        out = self._line(*facts, firing, unacked, now, compact=False)
        if out.cell_len > width - 2:
            out = self._line(*facts, firing, unacked, now, compact=True)
        if out != self._shown:
            self._shown = out
            self.update(out, layout=False)

    def _line(self, state: Any, progress: Any, rate: float | None, unit: str, baseline: float | None, restarts: int,
                 frac: float, stale: float | None, firing: list, unacked: int, now: float, *, compact: bool) -> Text:
        sep = (" │ ", "dim")
        out = job_text(state, self.control, now, compact=compact, asked=self._asked)
        if restarts or not compact:
            out.append(f" · restarts {restarts}", style="" if restarts == 0 else "yellow")
        out.append(*sep)
        out.append_text(self._step_text(progress, stale is None))
        out.append(*sep)
        if stale is not None:
            # No step for a while (a stall firing, the job gone): the last
            # rate read is no reading of now, nor an ETA from it.
            out.append(f"last {fmt_rate_unit(rate, unit, compact)}", style="dim")
            out.append(f" {fmt_duration(stale)} ago", style="dim yellow")
        else:
            out.append(fmt_rate_unit(rate, unit, compact), style="bold")
        if baseline and stale is None:
            out.append(f" vs {fmt_rate_unit(baseline, unit, compact)}", style="cyan")
            if rate is not None:
                delta = rate / baseline - 1.0
                out.append(f" {delta:+.0%}", style="bold red" if delta <= -frac else "yellow" if delta < -0.05 else "green")
        out.append(*sep)
        if firing:
            # Info alerts alone (a clean exit, a stop the user asked for) are news, not trouble.
            calm = all(getattr(a, "severity", "") == "info" for a in firing)
            style = "bold black on cyan" if calm else "bold white on red" if unacked else "bold yellow"
            out.append(f" {len(firing)} firing ", style=style)
            if unacked != len(firing):
                out.append(f" {len(firing) - unacked} acked", style="dim")
        else:
            out.append("✓ no alerts", style="green")
        return out

    def _step_text(self, p: Any, eta: bool = True) -> Text:
        if p is None or p.step is None:
            return Text("step -", style="dim")
        out = Text(f"step {p.step:,}", style="bold")
        if p.total_steps:
            out.append(f"/{p.total_steps:,}")
            first = self._first_step
            if first is None or p.step < first[1]:
                first = self._first_step = (p.time, p.step)
            per_step = p.step_seconds
            if per_step is None and p.step > first[1] and p.time - first[0] >= 10.0:
                per_step = (p.time - first[0]) / (p.step - first[1])
            if per_step and eta:
                left = max(0, p.total_steps - p.step) * per_step
                out.append(f" ETA {fmt_duration(left)}", style="cyan")
        return out
