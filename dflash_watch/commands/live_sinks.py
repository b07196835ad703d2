"""The alert sinks of a live session (`watch` and `headless`): CONTRACTS section 10.

Built once in ``live_setup.build_live`` from the config's ``[[alerts.sink]]``
tables; the dispatcher subscribes to the Monitor and is closed (pending
deliveries given a last chance) when the session ends. The Monitor's
listener only enqueues: sending happens on the sinks' own threads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..monitor import Monitor


def start_sinks(settings: Any, monitor: Monitor, gate: Any = None, hold: Any = None) -> Any | None:
    """A started dispatcher with ``close(timeout)``, or None without sinks.

    ``gate`` wraps the dispatcher's listener (the alert history's: a restart
    does not send again what the history already holds, but the sinks
    recall the episodes it opened, so that their resolves match). ``hold``
    wraps it inside the gate (``StallStacks.hold``: a stall page carries
    the hung job's stacks)."""
    alerts = getattr(settings.config, "alerts", None)
    sinks = alerts.sinks if alerts is not None else ()
    if not sinks:
        return None
    from ..sinks.dispatch import Dispatcher

    dispatcher = Dispatcher(sinks, monitor.note).start()
    offer = dispatcher.offer if hold is None else hold(dispatcher.offer)
    monitor.subscribe(offer if gate is None else gate(offer, dispatcher.recall))
    return dispatcher
