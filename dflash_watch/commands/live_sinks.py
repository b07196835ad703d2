"""The alert sinks of a live session (`watch` and `headless`): CONTRACTS section 10.

Built once in ``live_setup.build_live`` from the config's ``[[alerts.sink]]``
tables; the dispatcher subscribes to the Monitor and is closed (pending
deliveries given a last chance) when the session ends.
"""

from __future__ import annotations

from typing import Any


def start_sinks(settings: Any, monitor: Any) -> Any | None:
    """A started dispatcher with ``close(timeout)``, or None without sinks."""
    return None
