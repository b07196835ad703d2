"""What each sink kind sends for an alert: pure functions, no network.

Kept apart from the sending so that every field of every shape can be
checked in a test without a server, and so that the words a person reads
(a Slack line, an ntfy title) are written in one place. Text quoted from
logs is data: it is escaped for the receiver's own markup (Slack's
``<link|label>`` and ``&``, notification bodies' HTML subset), and header
values never carry a newline.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from dflash_watch.detectors.base import Alert

JSON = "application/json"


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One HTTP request body and its headers."""

    body: bytes
    headers: tuple[tuple[str, str], ...]

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers if k.lower() == name.lower()), None)


def _first_line(alert: Alert, limit: int = 300) -> str:
    text = alert.message.splitlines()[0] if alert.message else ""
    return text[:limit]


def title(alert: Alert) -> str:
    """``critical: crash on GPU 3`` / ``resolved: stall``: one short ASCII line."""
    what = alert.detector + (f" ({alert.kind})" if alert.kind else "")
    where = f" on GPU {alert.gpu}" if alert.gpu is not None else ""
    head = "resolved" if alert.state == "resolved" else alert.severity
    return f"{head}: {what}{where}"


def _header_safe(text: str) -> str:
    """A header value: one line, Latin-1 (http.client refuses others)."""
    flat = " ".join(text.split())
    return flat.encode("latin-1", "replace").decode("latin-1")


def alert_json(alert: Alert) -> bytes:
    """The alert object of CONTRACTS section 2, as the webhook and command bodies."""
    return alert.to_json().encode("utf-8")


def rfc3339(t: float) -> str:
    """``2025-11-29T10:00:00.250Z``: an epoch time as routers read it (UTC, milliseconds)."""
    return _dt.datetime.fromtimestamp(t, _dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def webhook(alert: Alert, host: str, start: float) -> Outgoing:
    """The alert object of CONTRACTS section 2, every field as it is, plus what
    a router needs (docs/contract-additions.md, section 10): ``host``,
    ``startsAt`` (when the episode fired), ``endsAt`` (only once resolved)
    and ``fingerprint``, the same for an episode's firing and its resolve.

    The extra keys are spliced after the alert's own JSON so that its fields
    keep their order and their escaping (``Alert.to_json``)."""
    extra: dict[str, Any] = {"host": host, "startsAt": rfc3339(start)}
    if alert.state == "resolved":
        extra["endsAt"] = rfc3339(alert.time)
    extra["fingerprint"] = dedup_key(alert, start, host)
    text = alert.to_json()
    body = text[:-1] + ", " + json.dumps(extra, separators=(", ", ": "))[1:]
    return Outgoing(body.encode("utf-8"), (("Content-Type", JSON),))


def slack_escape(text: str) -> str:
    """Slack's three control characters (its docs: escape &, <, >)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


_SLACK_ICON = {"critical": ":rotating_light:", "warning": ":warning:", "info": ":information_source:"}


def slack_text(alert: Alert) -> str:
    icon = ":white_check_mark:" if alert.state == "resolved" else _SLACK_ICON.get(alert.severity, "")
    message = slack_escape(alert.message[:3000])
    return f"{icon} *{slack_escape(title(alert))}*\n{message}\n_{slack_escape(alert.source)}_"


def slack(alert: Alert) -> Outgoing:
    body = json.dumps({"text": slack_text(alert)}, ensure_ascii=False).encode("utf-8")
    return Outgoing(body, (("Content-Type", JSON),))


# ntfy priorities: 1 min, 2 low, 3 default, 4 high, 5 urgent.
NTFY_PRIORITY = {"info": "3", "warning": "4", "critical": "5"}
NTFY_TAG = {"info": "information_source", "warning": "warning", "critical": "rotating_light"}


def ntfy(alert: Alert, extra_tags: tuple[str, ...] = ()) -> Outgoing:
    """The message as the body; ``Title``, ``Priority`` and ``Tags`` headers."""
    resolved = alert.state == "resolved"
    priority = "2" if resolved else NTFY_PRIORITY.get(alert.severity, "3")
    tags = ["white_check_mark" if resolved else NTFY_TAG.get(alert.severity, "warning"), alert.detector,
            *extra_tags]
    body = f"{alert.message}\n{alert.source}".encode()
    return Outgoing(body, (
        ("Title", _header_safe(f"dflash-watch {title(alert)}")),
        ("Priority", priority),
        ("Tags", _header_safe(",".join(tags))),
        ("Content-Type", "text/plain; charset=utf-8"),
    ))


def dedup_key(alert: Alert, episode_start: float, source: str) -> str:
    """One key per episode: the same for its firing and its resolve.

    From the node, the detector, the GPU, the kind and the time the episode
    started, so a new episode of the same condition is a new incident.
    """
    raw = f"{source}|{alert.detector}|{alert.gpu}|{alert.kind}|{episode_start:.6f}"
    return "dflash-" + hashlib.sha256(raw.encode()).hexdigest()[:32]


class EpisodeStarts:
    """When each open episode fired, so its resolve finds the same dedup key.

    A resolved alert carries the time it resolved; the episode is known by
    ``Alert.key`` (detector, gpu, kind), at most one open at a time.
    """

    __slots__ = ("_open",)

    def __init__(self) -> None:
        self._open: dict[tuple[str, int | None, str | None], float] = {}

    def start_of(self, alert: Alert) -> float:
        if alert.state == "firing":
            self._open[alert.key] = alert.time
            return alert.time
        return self._open.pop(alert.key, alert.time)

    def reopen(self, alert: Alert, start: float) -> None:
        """A resolve that failed will be retried: it must find its episode again."""
        self._open[alert.key] = start


def pagerduty(alert: Alert, routing_key: str, dedup: str, source: str) -> Outgoing:
    """An Events API v2 event: trigger on firing, resolve on resolved."""
    event: dict[str, Any] = {
        "routing_key": routing_key,
        "event_action": "resolve" if alert.state == "resolved" else "trigger",
        "dedup_key": dedup,
        "client": "dflash-watch",
    }
    if alert.state != "resolved":
        event["payload"] = {
            "summary": f"{title(alert)}: {_first_line(alert)}"[:1024],
            "severity": alert.severity if alert.severity in ("critical", "warning", "info") else "error",
            "source": source,
            "component": alert.detector,
            "group": f"gpu{alert.gpu}" if alert.gpu is not None else "job",
            "class": alert.kind or alert.detector,
            "timestamp": _dt.datetime.fromtimestamp(alert.time, _dt.UTC).isoformat(),
            "custom_details": alert.to_dict(),
        }
    return Outgoing(json.dumps(event, ensure_ascii=False).encode("utf-8"), (("Content-Type", JSON),))


def desktop_argv(alert: Alert) -> list[str]:
    """notify-send's argv: the body's markup escaped, ``--`` before the text."""
    urgency = {"critical": "critical", "warning": "normal"}.get(alert.severity, "low")
    body = alert.message[:500].replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return ["notify-send", "-u", "low" if alert.state == "resolved" else urgency, "-a", "dflash-watch",
            "--", f"dflash-watch {title(alert)}", body]
