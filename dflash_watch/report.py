"""Plain-text rendering of alerts and run summaries for terminals and pipes.

Log text inside messages is data: control characters are made visible so
that an escape sequence read from a log can never act on the terminal.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from typing import TYPE_CHECKING, Any

from dflash_watch.detectors.base import Alert
from dflash_watch.detectors.config import fmt_rate
from dflash_watch.parsers.events import TOK_S

if TYPE_CHECKING:
    from .monitor import Monitor

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def safe_text(text: str) -> str:
    """Show control characters (ESC, BEL, CR...) as ``\\x1b`` instead of obeying them."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def format_time(t: float | None, tz: Any = None) -> str:
    if t is None:
        return "-"
    try:
        return _dt.datetime.fromtimestamp(t, tz).strftime("%Y-%m-%d %H:%M:%S")
    except (OverflowError, OSError, ValueError):
        return f"{t:.0f}"


def format_rate(rate: float | None, unit: str | None = TOK_S) -> str:
    """A rate as the detectors' messages say it, in any unit; '-' when there is none.

    ``format_rate(21500)`` is '21.5 Ktok/s', ``format_rate(1.2, "it/s")``
    '1.2 it/s'. Non-finite values (a rate parsed from 'inf') read '-' too.
    """
    if rate is None or not math.isfinite(rate):
        return "-"
    return fmt_rate(rate, unit or TOK_S)


def format_alert(alert: Alert, tz: Any = None) -> str:
    gpu = f" gpu{alert.gpu}" if alert.gpu is not None else ""
    kind = f"/{alert.kind}" if alert.kind else ""
    first = safe_text(alert.message.splitlines()[0] if alert.message else "")
    return (
        f"{format_time(alert.time, tz)}  {alert.state:<8} {alert.severity:<8} "
        f"{alert.detector}{kind}{gpu}  {first}  [{safe_text(alert.source)}]"
    )


def format_summary(monitor: Monitor, tz: Any = None) -> str:
    """What a replay saw, for a person reading a terminal."""
    p = monitor.last_progress
    lines = ["", "summary:"]
    lines.append(f"  data time      {format_time(monitor.first_time, tz)} .. {format_time(monitor.now, tz)}")
    lines.append(f"  progress lines {monitor.progress_events}")
    if p is not None:
        step = "-" if p.step is None else str(p.step)
        if p.total_steps:
            step += f"/{p.total_steps}"
        lines.append(f"  last step      {step}  (loss {p.loss if p.loss is not None else '-'})")
    unit = getattr(monitor, "throughput_unit", TOK_S)
    base = format_rate(monitor.baseline_tokens_per_s) if unit == TOK_S else "-"
    lines.append(f"  throughput     last {format_rate(monitor.throughput.last_value, unit)}, baseline {base}")
    lines.append(f"  GPUs sampled   {len(monitor.gpus.gpus)}")
    lines.append(f"  recompiles     {monitor.recompiles}")
    fired = [a for a in monitor.alerts.history if a.state == "firing"]
    lines.append(f"  alerts         {len(fired)} fired, {len(monitor.alerts.firing())} still firing")
    return "\n".join(lines)
