"""Read-only views of the Monitor, for readers that also take a stand-in.

Most readers take the ``Monitor`` itself (imported under ``TYPE_CHECKING``
only, so ``dflash-watch --help`` loads nothing more). A reader that is also
handed something else names here exactly what it reads: ``baseline save``
asks the dashboard's baseline guard about a replayed window through a
``SimpleNamespace`` (``commands/baseline.py``), and a Protocol is what lets
both be checked. Nothing here runs: it is types only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from dflash_watch.parsers.events import ProcessExit

    from .alertbook import AlertBook


class AlertWindowView(Protocol):
    """What ``tui.baseline_guard`` reads: the alert book, the clock and how the job stands."""

    @property
    def alerts(self) -> AlertBook: ...

    @property
    def now(self) -> float | None: ...

    @property
    def job_state(self) -> Any: ...

    @property
    def last_exit(self) -> ProcessExit | None: ...


__all__ = ["AlertWindowView"]
