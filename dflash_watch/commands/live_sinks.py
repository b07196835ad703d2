"""The alert sinks of a live session (`watch` and `headless`): CONTRACTS section 10.

Built once in ``live_setup.build_live`` from the config's ``[[alerts.sink]]``
tables; the dispatcher subscribes to the Monitor as every output does
(``LiveSetup.subscribe_output``: the history's gate, the stall's hold) and
is closed (pending deliveries given a last chance) when the session ends.
The Monitor's listener only enqueues: sending happens on the sinks' own
threads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..monitor import AlertListener
    from ..sinks.dispatch import Dispatcher

# ``LiveSetup.subscribe_output``: an output and, optionally, what gets the
# alerts a restart does not send again.
SubscribeOutput = Callable[["AlertListener", "AlertListener | None"], None]


def start_sinks(settings: Any, note: Callable[[str], None], subscribe: SubscribeOutput) -> Dispatcher | None:
    """A started dispatcher, subscribed with ``subscribe``, or None without sinks.

    The dispatcher's ``recall`` gets the alerts the history already holds
    (a restart does not send them again, but the sinks recall the episodes
    they opened, so that their resolves match)."""
    alerts = getattr(settings.config, "alerts", None)
    sinks = alerts.sinks if alerts is not None else ()
    if not sinks:
        return None
    from ..sinks.dispatch import Dispatcher

    dispatcher = Dispatcher(sinks, note).start()
    subscribe(dispatcher.offer, dispatcher.recall)
    return dispatcher
