"""`dflash-watch alerts test`: one test alert to each configured sink.

Run it after editing ``[[alerts.sink]]``: it finds a wrong URL, a missing
environment variable or a blocked port now, not when the first real alert
fails at night. Each sink is tried once, all at the same time (a sink that
hangs costs its own timeout, not the others'), without its filters (the
point is to see that it works). One line per sink, in config order:
``ok`` or ``failed`` with the reason; a secret URL is named only by its
variable. Exit 0 all ok, 1 any failed, 2 no sinks or a bad config.

``--json``: the same results as one object for a script,
``{"sinks": [{"name", "kind", "url_env", "ok", "error"}, ...]}`` in config
order (``error`` null when delivered); errors before any sink is tried stay
one line on stderr with exit 2.
"""

from __future__ import annotations

import argparse
import math
import socket
import sys
import threading
import time
from dataclasses import replace
from typing import Any

from . import fail


def test_alert(now: float | None = None) -> Any:
    """The alert each sink gets. Its detector is ``test``: no real detector
    has that name, so a receiver's rules can tell it from a real alert."""
    from dflash_watch.detectors.base import Alert

    host = socket.gethostname()
    return Alert(
        time=time.time() if now is None else now,
        detector="test",
        state="firing",
        severity="info",
        message=f"dflash-watch test alert from {host}: this sink works",
        source="dflash-watch alerts test",
    )


def _try(sender: Any, alert: Any, timeout: float) -> str | None:
    """None when delivered, else why not."""
    from ..sinks.senders import DeliveryError, EpisodeSender

    if sender.unavailable:
        return sender.unavailable
    try:
        sender.send(alert, timeout)
        if isinstance(sender, EpisodeSender) and sender.resolve_test:
            # Close the test incident again: the same dedup key, resolved.
            sender.send(replace(alert, state="resolved", message="test over"), timeout)
    except DeliveryError as exc:
        return exc.reason
    except Exception as exc:  # noqa: BLE001 - one line per sink, never a traceback
        return type(exc).__name__
    return None


def run(args: argparse.Namespace) -> int:
    from ..config import ConfigError, load_config

    if getattr(args, "alerts_command", "test") != "test":
        return fail(f"unknown alerts action {args.alerts_command!r}")
    timeout = args.timeout
    if not (isinstance(timeout, float) and math.isfinite(timeout) and timeout > 0):
        return fail(f"--timeout {timeout}: must be a number of seconds > 0")
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        return fail(str(exc))
    sinks = config.alerts.sinks
    if not sinks:
        where = config.path or "the config (none found: pass --config F)"
        return fail(f"no [[alerts.sink]] tables in {where}")

    from ..sinks.senders import build_sender, secret_names

    alert = test_alert()
    results: list[str | None] = ["no answer"] * len(sinks)

    def attempt(i: int) -> None:
        results[i] = _try(build_sender(sinks[i], secret_names(sinks)), alert, timeout)

    threads = [threading.Thread(target=attempt, args=(i,), daemon=True) for i in range(len(sinks))]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 2 * timeout + 1.0  # PagerDuty sends twice
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    whys = [f"no answer within {timeout:g} s" if t.is_alive() else results[i] for i, t in enumerate(threads)]
    if getattr(args, "json", False):
        import json

        rows = [{"name": sink.name, "kind": sink.kind, "url_env": sink.url_env, "ok": why is None,
                 "error": why} for sink, why in zip(sinks, whys)]
        print(json.dumps({"sinks": rows}))  # ASCII: no raw control character reaches a terminal
    else:
        for sink, why in zip(sinks, whys):
            name = sink.where().removeprefix("sink ")
            print(f"ok      {name}" if why is None else f"failed  {name}: {why}")
    sys.stdout.flush()
    return 1 if any(why is not None for why in whys) else 0
