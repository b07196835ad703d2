"""Turning log and alert text into Rich ``Text`` that can never act on the terminal.

Log lines are data written by someone else's program: a line may carry
ANSI colours, OSC hyperlinks or title changes, a bell, or text that looks
like Rich markup (``[bold red]x[/]``, ``[link=...]``). Everything shown by
the dashboard goes through ``plain()``: escape sequences are stripped,
other control characters are made visible (``report.safe_text``), and the
result is wrapped in a ``Text`` object, which Rich never parses as markup.
"""

from __future__ import annotations

import datetime as _dt
import re
from typing import TYPE_CHECKING, Any

from rich.text import Text

if TYPE_CHECKING:
    from rich.table import Table

from dflash_watch.parsers.events import TOK_S

from ..report import safe_text

# CSI (ESC [ ... final), OSC (ESC ] ... BEL or ESC \), other two-byte ESC
# sequences, and the C1 forms of CSI/OSC. Stripped: a coloured log line
# should read as its words, not as "\x1b[31m".
_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x9b[0-?]*[ -/]*[@-~]"
    r"|\x9d[^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x1b[@-Z\\-_]"
)

SEVERITY_STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan"}
SEVERITY_ICON = {"critical": "✖", "warning": "▲", "info": "●"}


def plain(text: str) -> str:
    """A log string made safe to print: escapes stripped, controls visible, tabs expanded."""
    if "\x1b" in text or "\x9b" in text or "\x9d" in text:
        text = _ESCAPES.sub("", text)
    return safe_text(text.expandtabs(4))


def safe(text: str, style: str = "") -> Text:
    """``Text`` of untrusted text: never markup, never escapes."""
    return Text(plain(text), style=style, no_wrap=True)


def fmt_bytes(n: float | None) -> str:
    if n is None:
        return "-"
    gib = n / 2**30
    if gib >= 100:
        return f"{gib:.0f} GiB"
    if gib >= 1:
        return f"{gib:.1f} GiB"
    return f"{n / 2**20:.0f} MiB"


def fmt_gib(n: float | None) -> str:
    return "-" if n is None else f"{n / 2**30:.1f}"


def fmt_duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    s = int(max(0.0, seconds))
    if s >= 86400:
        return f"{s // 86400}d{s % 86400 // 3600:02d}h"
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s}s"


def fmt_clock(t: float | None, tz: Any = None) -> str:
    """HH:MM:SS on the data's clock, in the run's time zone."""
    if t is None:
        return "--:--:--"
    try:
        return _dt.datetime.fromtimestamp(t, tz).strftime("%H:%M:%S")
    except (OverflowError, OSError, ValueError):
        return f"{t:.0f}"


def split_source(source: str) -> tuple[str, int | None]:
    """``train.log:1234`` -> (``train.log``, 1234); a source without a line -> (source, None)."""
    name, sep, line = source.rpartition(":")
    if sep and line.isdigit():
        return name, int(line)
    return source, None


def set_static(widget: Any, text: Text | Table, *, layout: bool = False) -> bool:
    """Update a Static only when its text changed, without a layout pass by default.

    A layout pass re-arranges the whole screen; at 2 Hz over a dozen
    fixed-size lines that was most of the dashboard's CPU.
    """
    if getattr(widget, "_dfw_shown", None) == text:
        return False
    widget._dfw_shown = text
    widget.update(text, layout=layout)
    return True


def fmt_rate_unit(value: float | None, unit: str, compact: bool = False) -> str:
    """A rate in the run's own unit: '21.5 Ktok/s', '3.1 it/s', '412 samples/s'.

    Tokens keep the detectors' wording (``report.format_rate``). Other units
    keep three significant digits: an it/s run lives between 0.1 and 10.
    ``compact`` (the header's narrow form) drops "tok/s", the usual unit,
    and keeps any other: "3.1" alone would read as tokens.
    """
    from ..report import format_rate

    if value is None:
        return "-"
    if unit == TOK_S:
        text = format_rate(value)
        return text.replace(" Ktok/s", "K").replace(" Mtok/s", "M").replace(" tok/s", "") if compact else text
    v = abs(value)
    number = f"{value / 1000:.1f}K" if v >= 10_000 else f"{value:.0f}" if v >= 100 else f"{value:.3g}"
    return f"{number} {unit}"


def signal_label(number: int | None) -> str | None:
    """SIGINT for 2; "signal 99" for a number the platform does not name."""
    import signal

    if not number:
        return None
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def asked_to_stop(state: Any, last_exit: Any, crash: Any = None) -> bool:
    """The job stopped because the user asked (``abort``, `a`, a relaunch): CONTRACTS ``aborted``.

    Either the job's state says so (``JobState.asked``) or the last
    ``process_exit`` is kind ``aborted``, and no crash fired after it (a
    crash alert newer than the abort is news again).
    """
    if getattr(state, "state", None) == "running":
        return False
    asked = bool(getattr(state, "asked", None)) or getattr(last_exit, "kind", None) == "aborted"
    if not asked:
        return False
    since = getattr(last_exit, "time", None)
    return crash is None or since is None or crash.time <= since
