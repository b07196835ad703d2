"""Read-only views of the Monitor, for readers that also take a stand-in.

Most readers take the ``Monitor`` itself (imported under ``TYPE_CHECKING``
only, so ``dflash-watch --help`` loads nothing more). A reader that is also
handed something else names here exactly what it reads: ``baseline save``
asks the dashboard's baseline guard about a replayed window through a
``SimpleNamespace`` (``baseline/guard.py``), and a Protocol is what lets
both be checked. Nothing here runs: it is types only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from dflash_watch.parsers.events import ProcessExit

    from .alertbook import AlertBook


class AlertWindowView(Protocol):
    """What ``baseline.guard`` reads: the alert book, the clock and how the job stands."""

    @property
    def alerts(self) -> AlertBook: ...

    @property
    def now(self) -> float | None: ...

    @property
    def job_state(self) -> Any: ...

    @property
    def last_exit(self) -> ProcessExit | None: ...


class RankRowView(Protocol):
    """One row of ``DetectorSet.rank_table()`` as the ranks panel reads it
    (``detectors.straggler.RankRow``, written in parallel: only these fields)."""

    @property
    def rank(self) -> int: ...
    @property
    def gpu(self) -> int | None: ...
    @property
    def step_seconds(self) -> float | None: ...
    @property
    def compute_seconds(self) -> float | None: ...
    @property
    def wait_seconds(self) -> float | None: ...
    @property
    def last_step(self) -> int | None: ...
    @property
    def last_seen(self) -> float | None: ...
    @property
    def slow(self) -> bool: ...
    @property
    def hung(self) -> bool: ...


class GpuHealthView(Protocol):
    """One GPU of ``DetectorSet.gpu_health()`` as a GPU tile reads it."""

    @property
    def xid_total(self) -> int: ...
    @property
    def last_xid(self) -> int | None: ...
    @property
    def ecc_uncorrected(self) -> int | None: ...
    @property
    def throttle(self) -> tuple[str, ...]: ...


class LossStateView(Protocol):
    """``DetectorSet.loss_state()`` as the loss chart reads it."""

    @property
    def loss(self) -> float | None: ...
    @property
    def grad_norm(self) -> float | None: ...
    @property
    def nan_total(self) -> int: ...
    @property
    def overflow_total(self) -> int: ...


class HealthDetectors(Protocol):
    """The training-health accessors of ``DetectorSet`` (issue 19) the dashboard reads.

    Each is optional while the detectors land: ``tui.health`` asks for
    them with ``getattr`` and shows nothing where one is missing.
    """

    def rank_table(self) -> Sequence[RankRowView]: ...
    def gpu_health(self) -> dict[int, GpuHealthView]: ...
    def loss_state(self) -> LossStateView | None: ...


__all__ = ["AlertWindowView", "GpuHealthView", "HealthDetectors", "LossStateView", "RankRowView"]
