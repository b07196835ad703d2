"""The profile of a run, as the baseline file holds it (CONTRACTS section 6).

One shape for both sides of "what changed": ``baseline save`` writes it for
the good run, ``baseline diff`` builds it for the current run, and
``detectors.diagnosis`` compares the two. The figures come from a Monitor
after it has seen the run (replay or live):

- ``throughput_tokens_per_s``, each GPU's memory level and band: the
  Monitor's own ``capture_baseline`` (what the dashboard's ``b`` keeps);
- ``throughput_p10``/``throughput_p90``: the spread of the rates;
- ``padding_efficiency``, ``recompiles_per_hour``,
  ``alloc_retries_per_hour``: the Monitor's attributes of those names
  where it has them (read with ``getattr``: they arrive with the padding
  and probe detectors), else what the window Monitor counted itself;
- ``fingerprint``: the environment (``baseline.fingerprint``).

Only keys are added; a file written with them still loads in an older
``load_baseline`` (version 1, throughput required).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..monitor import Monitor

FIGURES = ("padding_efficiency", "recompiles_per_hour", "alloc_retries_per_hour")
# A rate per hour over less than this would be one event blown up.
MIN_SPAN_S = 60.0


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _percentiles(values: Any) -> tuple[float, float] | None:
    import numpy as np

    data = np.asarray(values, dtype=np.float64)
    if data.size < 2:
        return None
    p10, p90 = np.percentile(data, [10, 90])
    return float(p10), float(p90)


def _span(monitor: Monitor) -> float | None:
    first, last = getattr(monitor, "kept_first", None), getattr(monitor, "kept_last", None)
    if first is None or last is None:
        first, last = monitor.first_time, monitor.now
    if first is None or last is None or last - first < MIN_SPAN_S:
        return None
    return last - first


def _median(values: Any) -> float | None:
    """The median of a window Monitor's ``array('d')`` series; None when empty."""
    if not values:
        return None
    import numpy as np

    return float(np.median(np.frombuffer(values, dtype=np.float64)))


def monitor_figures(monitor: Monitor, window_s: float | None = None) -> dict[str, Any]:
    """The figures beyond ``capture_baseline``'s of a Monitor that saw the
    run (a window Monitor of ``baseline save``/``diff``, or the live one)."""
    out: dict[str, Any] = {}
    rates = getattr(monitor, "rates", None)
    if rates is None or len(rates) < 2:
        if monitor.throughput.count:
            rates = monitor.throughput.window(window_s if window_s is not None else 1e12)[3]
    spread = _percentiles(rates) if rates is not None else None
    if spread is not None:
        out["throughput_p10"], out["throughput_p90"] = spread
    warmup = getattr(monitor, "warmup_rates", None)
    if warmup:
        import numpy as np

        out["warmup_throughput_tokens_per_s"] = float(np.median(np.asarray(warmup, dtype=np.float64)))
    for name in FIGURES:
        value = _finite(getattr(monitor, name, None))
        if value is not None:
            out[name] = value
    span = _span(monitor)
    if "padding_efficiency" not in out:
        padded = getattr(monitor, "probe_padded", 0)
        reports = getattr(monitor, "padding_reports", None)
        if padded:
            out["padding_efficiency"] = min(1.0, getattr(monitor, "probe_tokens", 0) / padded)
        elif reports:
            import numpy as np

            out["padding_efficiency"] = float(np.median(np.asarray(reports, dtype=np.float64)))
    if span is not None:
        hours = span / 3600.0
        if "recompiles_per_hour" not in out:
            probes = getattr(monitor, "probe_recompiles", {})
            counted = sum(c.rise for c in probes.values()) if probes else monitor.recompiles
            out["recompiles_per_hour"] = counted / hours
        if "alloc_retries_per_hour" not in out:
            probes = getattr(monitor, "probe_retries", {})
            if any(c.last is not None for c in probes.values()):
                out["alloc_retries_per_hour"] = sum(c.rise for c in probes.values()) / hours
    if "padding_efficiency" in out:
        out["padding_efficiency"] = round(out["padding_efficiency"], 4)
    return out


def profile_of_monitor(monitor: Monitor, window_s: float = 600.0, fingerprint: dict[str, Any] | None = None
                       ) -> dict[str, Any] | None:
    """The run's profile over the last ``window_s`` of its data, as a
    baseline-file mapping; None before it has throughput."""
    captured = monitor.capture_baseline(window_s)
    if captured is None:
        return None
    out = captured.to_dict()
    out.update(monitor_figures(monitor, window_s))
    if fingerprint:
        out["fingerprint"] = fingerprint
    return out


def window_profile(monitor: Any, fingerprint: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The profile of a replayed window (``window.window_monitor``: what
    ``baseline save`` keeps and ``baseline diff`` compares): all the window
    kept, its step interval and ``monitor_figures``; None without throughput."""
    first, last = monitor.kept_first, monitor.kept_last
    if first is None or last is None:
        return None
    captured = monitor.capture_baseline(max(last - first, 0.0))
    if captured is None:
        return None
    out = captured.to_dict()
    interval = _median(monitor.step_intervals) or _median(monitor.step_seconds)
    if interval is not None:
        out["step_interval_s"] = interval
    out.update(monitor_figures(monitor))
    if fingerprint is not None:
        out["fingerprint"] = fingerprint
    return out


def firing_detectors(monitor: Monitor) -> set[str]:
    """Detector names of the alerts firing now."""
    return {alert.detector for alert in monitor.alerts.firing()}


def monitor_suspects(monitor: Monitor, fingerprint: dict[str, Any] | None = None, window_s: float = 600.0,
                     limit: int = 3, firing: set[str] | None = None) -> list[dict[str, Any]]:
    """The top suspects for the evidence of a ``throughput_drop`` or
    ``memory_volatility`` alert the Monitor is about to record: the live
    run's profile against its baseline's (empty without a baseline)."""
    from dflash_watch.detectors.diagnosis import suspects_for

    baseline = monitor.baseline
    if baseline is None:
        return []
    current = profile_of_monitor(monitor, window_s, fingerprint)
    if current is None:
        return []
    names = firing_detectors(monitor) if firing is None else firing
    return suspects_for(baseline.to_dict(), current, names, limit)
