"""What the dashboard reads of the training-health detectors (issue 19), and the chart windows.

The accessors (``DetectorSet.rank_table``, ``gpu_health``, ``loss_state``)
are named in ``monitor_view.HealthDetectors``. A detector that raises in
one shows an empty panel, never a dead dashboard beside a live run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..monitor import Monitor
    from ..monitor_view import GpuHealthView, LossStateView, RankRowView

# The charts' windows, by the key binding id that picks them (``keymap``).
WINDOWS: dict[str, float | None] = {
    "window_10m": 600.0,
    "window_1h": 3600.0,
    "window_6h": 6 * 3600.0,
    "window_all": None,  # the whole run
}
DEFAULT_WINDOW_S = 3600.0


def window_label(window_s: float | None) -> str:
    if window_s is None:
        return "run"
    if window_s >= 3600:
        return f"{window_s / 3600:.0f}h"
    return f"{window_s / 60:.0f}m"


def _call(monitor: Monitor, name: str) -> Any:
    accessors = {
        "rank_table": monitor.detectors.rank_table,
        "gpu_health": monitor.detectors.gpu_health,
        "loss_state": monitor.detectors.loss_state,
    }
    try:
        return accessors[name]()
    except Exception:  # noqa: BLE001 - a detector bug must not take the dashboard down
        return None


def rank_rows(monitor: Monitor) -> Sequence[RankRowView]:
    """The straggler detector's per-rank table; empty without per-rank data. Call under ``locked``."""
    rows = _call(monitor, "rank_table")
    return tuple(rows) if rows else ()


def gpu_health(monitor: Monitor) -> dict[int, GpuHealthView]:
    """Per GPU, what the gpu_health detector concluded (Xids, ECC, throttling). Call under ``locked``."""
    health = _call(monitor, "gpu_health")
    return dict(health) if isinstance(health, dict) else {}


def loss_state(monitor: Monitor) -> LossStateView | None:
    return _call(monitor, "loss_state")
