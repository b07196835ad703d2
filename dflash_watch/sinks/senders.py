"""Sending one alert to one sink: HTTP, a subprocess, the terminal bell.

Every failure is a ``DeliveryError`` whose reason is safe to show: it
names the HTTP status or the socket error, never the URL (a webhook URL is
a secret: whoever holds it can post to the channel). Each sender is used
by one worker thread only, so the PagerDuty episode table needs no lock.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from dflash_watch.detectors.base import Alert

from . import payloads
from .settings import SINK_KINDS, SinkConfig, SinkConfigMissing


class DeliveryError(Exception):
    """Why a delivery failed, in words safe for a notice. ``retry``: worth trying again."""

    def __init__(self, reason: str, retry: bool = True) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry = retry


class Sender(Protocol):
    # Why this sender can never deliver here (notify-send missing), or None.
    unavailable: str | None

    def send(self, alert: Alert, timeout: float) -> None: ...


def post(url: str, out: payloads.Outgoing, timeout: float) -> int:
    """POST ``out`` to ``url``; the HTTP status, or ``DeliveryError``."""
    request = urllib.request.Request(url, data=out.body, headers=dict(out.headers), method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            response.read(65536)
            return int(response.status)
    except urllib.error.HTTPError as exc:
        retry = exc.code >= 500 or exc.code in (408, 425, 429)
        raise DeliveryError(f"HTTP {exc.code} {exc.reason}", retry=retry) from None
    except urllib.error.URLError as exc:
        raise DeliveryError(_socket_reason(exc.reason, timeout)) from None
    except TimeoutError:
        raise DeliveryError(f"no answer within {timeout:g} s") from None
    except OSError as exc:
        raise DeliveryError(_socket_reason(exc, timeout)) from None
    except ValueError:
        # urllib's message quotes the URL; ours does not.
        raise DeliveryError("the URL is not valid", retry=False) from None


def _socket_reason(reason: Any, timeout: float) -> str:
    if isinstance(reason, (TimeoutError, socket.timeout)):
        return f"no answer within {timeout:g} s"
    if isinstance(reason, OSError) and reason.strerror:
        return reason.strerror.lower() if reason.strerror else type(reason).__name__
    if isinstance(reason, socket.gaierror):
        return "host not found"
    return type(reason).__name__ if isinstance(reason, BaseException) else "connection failed"


class HttpSender:
    """slack, ntfy: a body built from the alert alone, POSTed to the sink's URL."""

    unavailable: str | None = None

    def __init__(self, sink: SinkConfig, build: Callable[[Alert], payloads.Outgoing]) -> None:
        self.sink = sink
        self.build = build

    def send(self, alert: Alert, timeout: float) -> None:
        try:
            url = self.sink.resolve_url()
        except SinkConfigMissing as exc:
            raise DeliveryError(str(exc), retry=False) from None
        post(url, self.build(alert), timeout)


class EpisodeSender:
    """An HTTP sink whose requests name the alert's episode: the generic
    webhook (the alert object plus ``host``, ``startsAt``/``endsAt`` and a
    ``fingerprint``, so an Alertmanager-style router pairs a resolve with
    its firing) and PagerDuty's Events API v2 (one ``dedup_key``, trigger
    and resolve share it). ``build(alert, episode start, source)`` is the
    kind's request; ``source`` is the sink's ``source`` or this host's name.
    ``resolve_test``: ``alerts test`` closes its test incident again."""

    unavailable: str | None = None

    def __init__(self, sink: SinkConfig, build: Callable[[Alert, float, str], payloads.Outgoing], *,
                 resolve_test: bool = False) -> None:
        self.sink = sink
        self.build = build
        self.resolve_test = resolve_test
        self.starts = payloads.EpisodeStarts()
        self.source = sink.source or socket.gethostname()

    def recall(self, alert: Alert) -> None:
        """An episode this sink was sent before a restart (``Dispatcher.recall``).

        Called on the Monitor's thread before any later alert of the episode
        is queued; one dict store, so no lock beside the worker's reads."""
        self.starts.start_of(alert)  # a firing opens its episode, a resolve closes it

    def send(self, alert: Alert, timeout: float) -> None:
        # The episode is looked up before anything can fail: a retry of a
        # resolve must find the same start (``start_of`` forgets it).
        start = self.starts.start_of(alert)
        try:
            url, request = self.sink.resolve_url(), self.build(alert, start, self.source)
        except SinkConfigMissing as exc:
            raise DeliveryError(str(exc), retry=False) from None
        try:
            post(url, request, timeout)
        except DeliveryError:
            if alert.state == "resolved":
                self.starts.reopen(alert, start)
            raise


def secret_names(sinks: Iterable[SinkConfig]) -> frozenset[str]:
    """The environment variables that hold the sinks' secrets (``url_env``, ``routing_key_env``)."""
    return frozenset(name for s in sinks for name in (s.url_env, s.routing_key_env) if name)


def child_env(hidden: Iterable[str]) -> dict[str, str]:
    """The watcher's environment without the variables named in ``hidden``.

    A command sink runs a program of the user's choosing with the alert on
    stdin; it has no business holding the webhook URLs and PagerDuty keys
    the watcher holds (a script that logs its environment would leak them)."""
    hide = set(hidden)
    return {k: v for k, v in os.environ.items() if k not in hide}


class CommandSender:
    """argv (never a shell) with the alert JSON on stdin; killed at the timeout.

    The child runs in its own process group, so a timeout kills it and
    whatever it started, and nothing else. Its environment lacks the
    variables named by every sink's ``url_env`` and ``routing_key_env``.
    """

    unavailable: str | None = None

    def __init__(self, argv: tuple[str, ...], hidden: Iterable[str] = ()) -> None:
        self.argv = list(argv)
        self.hidden = frozenset(hidden)
        if shutil.which(self.argv[0]) is None:
            self.unavailable = f"{self.argv[0]} not found"

    def send(self, alert: Alert, timeout: float) -> None:
        run_with_stdin(self.argv, payloads.alert_json(alert) + b"\n", timeout, child_env(self.hidden))


def run_with_stdin(argv: list[str], data: bytes, timeout: float, env: dict[str, str] | None = None) -> None:
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, start_new_session=True, env=env)
    except OSError as exc:
        raise DeliveryError(f"cannot run {argv[0]}: {exc.strerror or exc}", retry=False) from None
    try:
        _, err = proc.communicate(data, timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.communicate()
        raise DeliveryError(f"{argv[0]} did not finish within {timeout:g} s (killed)") from None
    if proc.returncode != 0:
        last = (err or b"").decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
        said = "".join(c if c.isprintable() else "?" for c in last[0])[:200]
        raise DeliveryError(f"{argv[0]} exited with status {proc.returncode}" + (f": {said}" if said else ""))


class DesktopSender:
    """notify-send where present; where not, the dispatcher says so once."""

    def __init__(self, hidden: Iterable[str] = ()) -> None:
        self.hidden = frozenset(hidden)
        self.unavailable = None if shutil.which("notify-send") else (
            "notify-send not found on PATH (install libnotify-bin for desktop notifications)")

    def send(self, alert: Alert, timeout: float) -> None:
        run_with_stdin(payloads.desktop_argv(alert), b"", timeout, child_env(self.hidden))


class BellSender:
    """The terminal bell, as the dashboard rings it: BEL to the controlling terminal."""

    unavailable: str | None = None

    def __init__(self, write: Callable[[str], None] | None = None) -> None:
        self._write = write

    def send(self, alert: Alert, timeout: float) -> None:
        if alert.state == "resolved":
            return
        if self._write is not None:
            self._write("\a")
            return
        try:
            with open("/dev/tty", "w", encoding="ascii") as tty:
                tty.write("\a")
        except OSError:
            try:
                sys.stderr.write("\a")
                sys.stderr.flush()
            except (OSError, ValueError) as exc:
                raise DeliveryError(f"no terminal to ring: {exc}", retry=False) from None


# How each kind's sender is built, one function per row of
# ``settings.SINK_KINDS`` (which names it); the payload builder rides in it
# for the HTTP kinds. ``hidden``: the variables a child must not inherit.
SenderFactory = Callable[[SinkConfig, frozenset[str]], Sender]


def bell_sender(sink: SinkConfig, hidden: frozenset[str]) -> Sender:
    return BellSender()


def desktop_sender(sink: SinkConfig, hidden: frozenset[str]) -> Sender:
    return DesktopSender(hidden)


def webhook_sender(sink: SinkConfig, hidden: frozenset[str]) -> Sender:
    return EpisodeSender(sink, lambda alert, start, host: payloads.webhook(alert, host, start))


def slack_sender(sink: SinkConfig, hidden: frozenset[str]) -> Sender:
    return HttpSender(sink, payloads.slack)


def ntfy_sender(sink: SinkConfig, hidden: frozenset[str]) -> Sender:
    return HttpSender(sink, lambda alert: payloads.ntfy(alert, sink.tags))


def pagerduty_sender(sink: SinkConfig, hidden: frozenset[str]) -> Sender:
    def build(alert: Alert, start: float, source: str) -> payloads.Outgoing:
        key = payloads.dedup_key(alert, start, source)
        return payloads.pagerduty(alert, sink.routing_key(), key, source)

    return EpisodeSender(sink, build, resolve_test=True)


def command_sender(sink: SinkConfig, hidden: frozenset[str]) -> Sender:
    return CommandSender(sink.argv, hidden)


def _factories() -> dict[str, SenderFactory]:
    """kind -> factory, from ``settings.SINK_KINDS``: a row naming a function
    this module lacks fails here, at import, not when its first alert goes."""
    here = globals()
    table: dict[str, SenderFactory] = {}
    for kind in SINK_KINDS:
        factory = here.get(kind.sender)
        if not callable(factory):
            raise ImportError(f"sink kind {kind.name!r}: senders.{kind.sender} is not defined")
        table[kind.name] = factory
    return table


SENDERS: dict[str, SenderFactory] = _factories()


def build_sender(sink: SinkConfig, hidden: Iterable[str] | None = None) -> Sender:
    """The sender of ``sink``; ``hidden``: variables its child processes must not
    inherit (all sinks' secrets; by default this sink's own)."""
    hidden = secret_names([sink]) if hidden is None else hidden
    factory = SENDERS.get(sink.kind)
    if factory is None:  # every kind has one (``_factories``), SinkConfig refuses the rest: a forged config
        raise ValueError(f"sink {sink.name}: no sender for kind {sink.kind!r} (known: {', '.join(SENDERS)})")
    return factory(sink, frozenset(hidden))
