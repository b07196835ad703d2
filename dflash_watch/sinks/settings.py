"""``[[alerts.sink]]`` tables as typed, checked ``SinkConfig``s.

One table per sink (CONTRACTS section 10). Every key is checked here, with
a one-line ``ConfigError`` naming the sink and the key, so that a typo in
a config is found when the watcher starts, not at 3 a.m. when the first
alert fails to go out. Secrets stay out of the file: ``url_env`` names the
environment variable that holds a webhook URL (``routing_key_env`` for
PagerDuty); the value is read only when sending and never shown.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from dflash_watch.detectors.base import DETECTORS, SEVERITIES, Severity, State

from ..checks import (
    NON_NEGATIVE,
    POSITIVE,
    ConfigError,
    Range,
    bad,
    show,
    unknown,
)


@dataclass(frozen=True, slots=True)
class SinkKind:
    """One kind of sink, declared once (``SINK_KINDS``): its name in
    ``kind = "..."``, whether it POSTs to a URL, and the name of the
    function in ``senders`` that builds its sender.

    The sender is named, not imported: reading a config never loads the
    HTTP senders (urllib, sockets, subprocess). ``senders.SENDERS`` is
    built from this table when the senders are first imported, and a row
    whose function is missing fails that import, so a kind can neither
    lack a sender nor fall through to another's.
    """

    name: str
    sender: str
    http: bool = False


SINK_KINDS: tuple[SinkKind, ...] = (
    SinkKind("bell", sender="bell_sender"),
    SinkKind("desktop", sender="desktop_sender"),
    SinkKind("webhook", sender="webhook_sender", http=True),
    SinkKind("slack", sender="slack_sender", http=True),
    SinkKind("ntfy", sender="ntfy_sender", http=True),
    SinkKind("pagerduty", sender="pagerduty_sender", http=True),
    SinkKind("command", sender="command_sender"),
)
# Derived, never written out again: the names (in the order errors list
# them) and the kinds that POST to a URL (those must be given one).
KINDS = tuple(kind.name for kind in SINK_KINDS)
HTTP_KINDS = frozenset(kind.name for kind in SINK_KINDS if kind.http)
PAGERDUTY_URL = "https://events.pagerduty.com/v2/enqueue"
SEVERITY_RANK = {name: i for i, name in enumerate(SEVERITIES)}  # info < warning < critical


@dataclass(frozen=True, slots=True)
class SinkConfig:
    """One sink, as checked from its table."""

    kind: str
    # Shown in notices and `alerts test`: ``slack[0]`` unless named.
    name: str
    url: str | None = None
    url_env: str | None = None
    routing_key_env: str | None = None
    argv: tuple[str, ...] = ()
    min_severity: Severity = "info"
    # None: every detector; else only these. ``exclude`` wins over both.
    detectors: tuple[str, ...] | None = None
    exclude: tuple[str, ...] = ()
    # False: only firing alerts (PagerDuty needs resolves; chat rarely does).
    send_resolved: bool = True
    max_per_minute: int | None = None
    retries: int = 3
    backoff_s: float = 1.0
    timeout_s: float = 10.0
    queue_size: int = 1000
    # ntfy: extra tags after the severity's; PagerDuty: payload.source; webhook: host.
    tags: tuple[str, ...] = ()
    source: str | None = None

    def __post_init__(self) -> None:
        # Every sink has a known kind, however it was made: no kind falls
        # through to another sender (an unknown kind once rang the bell).
        if self.kind not in KINDS:
            raise ConfigError(f"sink {self.name}: kind {show(self.kind)} is not a sink kind "
                              f"(known: {', '.join(KINDS)})")

    def where(self) -> str:
        """How notices name the sink: never the URL, only where it comes from."""
        if self.url_env:
            return f"sink {self.name} (url from ${self.url_env})"
        return f"sink {self.name}"

    def resolve_url(self) -> str:
        """The URL to send to, read now; ``SinkError`` if the variable is unset."""
        if self.url_env:
            value = os.environ.get(self.url_env, "")
            if not value:
                raise SinkConfigMissing(f"${self.url_env} is not set")
            return value
        if self.url:
            return self.url
        if self.kind == "pagerduty":
            return PAGERDUTY_URL
        raise SinkConfigMissing("no url")

    def routing_key(self) -> str:
        value = os.environ.get(self.routing_key_env or "", "")
        if not value:
            raise SinkConfigMissing(f"${self.routing_key_env} is not set")
        return value

    def wants(self, detector: str, severity: Severity, state: State) -> bool:
        """Whether an alert passes this sink's filters (rate limit aside)."""
        if state == "resolved" and not self.send_resolved:
            return False
        if SEVERITY_RANK.get(severity, 0) < SEVERITY_RANK[self.min_severity]:
            return False
        if detector in self.exclude:
            return False
        return self.detectors is None or detector in self.detectors


class SinkConfigMissing(Exception):
    """A sink's secret is not in the environment: said at send time, not a crash."""


@dataclass(frozen=True, slots=True)
class AlertsConfig:
    """The ``[alerts]`` table."""

    sinks: tuple[SinkConfig, ...] = ()


_RANGES: dict[str, Range] = {
    "max_per_minute": Range(1.0, integer=True),
    "retries": Range(0.0, 100.0, integer=True),
    "backoff_s": NON_NEGATIVE,
    "timeout_s": POSITIVE,
    "queue_size": Range(1.0, integer=True),
}
_STRINGS = ("name", "url", "url_env", "routing_key_env", "min_severity", "source")
_LISTS = ("detectors", "exclude", "argv", "tags")
_KEYS = ("kind", *_STRINGS, *_LISTS, "send_resolved", *_RANGES)


def parse_alerts(raw: Any) -> AlertsConfig:
    """``[alerts]`` -> ``AlertsConfig``; a ``ConfigError`` naming the key otherwise."""
    if not isinstance(raw, dict):
        raise bad(None, "alerts", raw, "must be a table ([alerts])")
    raw = dict(raw)
    sinks_raw = raw.pop("sink", [])
    if raw:
        raise unknown("alerts", next(iter(raw)), ["sink"])
    if not isinstance(sinks_raw, list) or not all(isinstance(t, dict) for t in sinks_raw):
        raise ConfigError("[alerts] sink: must be [[alerts.sink]] tables")
    counts: dict[str, int] = {}
    sinks = []
    names: set[str] = set()
    for position, table in enumerate(sinks_raw, 1):
        sink = parse_sink(table, counts, position)
        if sink.name in names:
            raise ConfigError(f"[[alerts.sink]] {sink.name}: name = {show(sink.name)} is used twice")
        names.add(sink.name)
        sinks.append(sink)
    return AlertsConfig(tuple(sinks))


def parse_sink(table: dict[str, Any], counts: dict[str, int] | None = None, position: int = 1) -> SinkConfig:
    """One ``[[alerts.sink]]`` table; ``counts`` numbers unnamed sinks per kind,
    ``position`` (from 1) names a sink whose kind is wrong, before it has a name."""
    counts = counts if counts is not None else {}
    kind = table.get("kind")
    if not isinstance(kind, str) or kind not in KINDS:
        reason = "missing" if kind is None else f"{show(kind)} is not a sink kind"
        name = table.get("name")
        which = f"#{position}" + (f" ({show(name)})" if isinstance(name, str) and name else "")
        raise ConfigError(f"[[alerts.sink]] {which} kind: {reason} (one of {', '.join(KINDS)})")
    index = counts.get(kind, 0)
    counts[kind] = index + 1
    place = f"alerts.sink {kind}[{index}]"  # as checks.where words it: [alerts.sink slack[0]] url
    section = f"[{place}]"
    kw: dict[str, Any] = {"kind": kind, "name": f"{kind}[{index}]"}
    for key, value in table.items():
        if key == "kind":
            continue
        if key not in _KEYS:
            raise unknown(place, key, _KEYS, many=len(_KEYS))
        if key in _RANGES:
            why = _RANGES[key].problem(value)
            if why:
                raise ConfigError(f"{section} {key} = {show(value)}: {why}")
            value = _RANGES[key].coerce(value)
        elif key in _STRINGS:
            if not isinstance(value, str) or not value:
                raise ConfigError(f"{section} {key} = {show(value)}: must be a non-empty string")
        elif key in _LISTS:
            if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
                raise ConfigError(f"{section} {key} = {show(value)}: must be a list of strings")
            value = tuple(value)
        elif not isinstance(value, bool):
            raise ConfigError(f"{section} {key} = {show(value)}: must be true or false")
        kw[key] = value
    sink = SinkConfig(**kw)
    _check(sink, section)
    return sink


def _check(sink: SinkConfig, section: str) -> None:
    """What depends on the kind: a URL where one is needed, argv for a command."""
    if sink.min_severity not in SEVERITIES:
        raise ConfigError(f"{section} min_severity = {show(sink.min_severity)}: "
                          f"one of {', '.join(SEVERITIES)}")
    for key in ("detectors", "exclude"):
        for name in getattr(sink, key) or ():
            if name not in DETECTORS:
                raise ConfigError(f"{section} {key}: {show(name)} is not a detector "
                                  f"(one of {', '.join(DETECTORS)})")
    if sink.url and sink.url_env:
        raise ConfigError(f"{section} url, url_env: give one, not both")
    if sink.kind in HTTP_KINDS:
        if sink.url and not sink.url.startswith(("http://", "https://")):
            # Not echoed: a URL pasted here may be a secret after all.
            raise ConfigError(f"{section} url: must start with http:// or https://")
        if sink.url and "@" in sink.url.split("://", 1)[1].split("/", 1)[0]:
            # user:pass@host: a password in the file, then in every error,
            # log line and `ps` of a command that quotes the URL. Never echoed.
            raise ConfigError(f"{section} url of sink {sink.name}: holds credentials (user:password@host), "
                              "which do not belong "
                              "in the config file: put the whole URL in an environment variable and name "
                              "it with url_env")
        if not (sink.url or sink.url_env) and sink.kind != "pagerduty":
            raise ConfigError(f"{section} url_env: a {sink.kind} sink needs url_env (or url)")
        if sink.kind == "pagerduty" and not sink.routing_key_env:
            raise ConfigError(f"{section} routing_key_env: a pagerduty sink needs it "
                              "(the name of the variable holding the integration key)")
    elif sink.url or sink.url_env:
        raise ConfigError(f"{section} url: a {sink.kind} sink takes no url")
    if sink.kind == "command" and not sink.argv:
        raise ConfigError(f'{section} argv: a command sink needs argv = ["program", "arg", ...]')
    if sink.argv and sink.kind != "command":
        raise ConfigError(f"{section} argv: only a command sink takes argv")
