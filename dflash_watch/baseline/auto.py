"""Saving the baseline automatically once a run has been healthy for a while.

"What changed" needs a good run to compare with, and people forget to save
one. The live session asks ``AutoBaseline.consider(monitor, now)`` on its
tick; it saves ``<state dir>/baseline-<session>.json`` (atomically, the
last good one per session) once the run has been healthy for
``healthy_for_s``: no alert firing (an info alert aside, as for the `b`
key: ``guard.against_health``), the job running, progress coming, and
the throughput steady over that span (its p10 and p90 within
``steady_fraction`` of its median). It then saves again at most every
``resave_s``, and never replaces a better baseline with a degraded run
(throughput lower by more than ``degraded_fraction``, or padding
efficiency lower by more than ``padding_margin``): a slow week must not
become the reference that makes it look normal.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dflash_watch.parsers.events import TOK_S

from .guard import against_health
from .profile import profile_of_monitor
from .store import Baseline, BaselineError, load_baseline, save_baseline

if TYPE_CHECKING:
    from ..monitor import Monitor

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def auto_baseline_path(state_dir: str | Path, session: str) -> Path:
    """``<state dir>/baseline-<session>.json``, the session name made safe for a file name."""
    name = _UNSAFE.sub("_", session).strip("._") or "session"
    return Path(state_dir).expanduser() / f"baseline-{name}.json"


@dataclass(slots=True)
class AutoBaseline:
    path: Path
    healthy_for_s: float = 1800.0
    resave_s: float = 3600.0
    steady_fraction: float = 0.15
    degraded_fraction: float = 0.10
    padding_margin: float = 0.05
    # Progress older than this is not "progress coming" (a stall before
    # the stall alert fires).
    progress_gap_s: float = 300.0
    # After a look that did not save (not steady, worse than the saved
    # one), the next look waits this long: a profile is not free per tick.
    retry_s: float = 60.0
    healthy_since: float | None = None
    tried_at: float | None = None
    saved_at: float | None = None
    # Why the last ``consider`` did not save (for a notice or a test).
    reason: str = ""
    fingerprint: dict[str, Any] | None = field(default=None)

    @classmethod
    def for_session(cls, state_dir: str | Path, session: str, **kwargs: Any) -> AutoBaseline:
        return cls(auto_baseline_path(state_dir, session), **kwargs)

    def _unhealthy(self, monitor: Monitor, now: float) -> str | None:
        if any(against_health(alert) for alert in monitor.alerts.firing()):
            return "alerts are firing"
        state = monitor.job_state
        if state is not None and not getattr(state, "running", True):
            return "the job is not running"
        last = monitor.last_progress
        if last is None or now - last.time > self.progress_gap_s:
            return "no recent progress"
        return None

    def consider(self, monitor: Monitor, now: float) -> Path | None:
        """Called on the live tick with the data's ``now``; the path when it saved."""
        with monitor.lock:
            why = self._unhealthy(monitor, now)
            if why is not None:
                self.healthy_since, self.reason = None, why
                return None
            if self.healthy_since is None:
                self.healthy_since = now
            if now - self.healthy_since < self.healthy_for_s:
                self.reason = "not healthy for long enough yet"
                return None
            if self.saved_at is not None and now - self.saved_at < self.resave_s:
                self.reason = "saved recently"
                return None
            if self.tried_at is not None and now - self.tried_at < self.retry_s:
                return None
            self.tried_at = now
            profile = profile_of_monitor(monitor, self.healthy_for_s, self.fingerprint)
        if profile is None:
            self.reason = "no throughput"
            return None
        why = self._not_steady(profile) or self._worse_than_saved(profile)
        if why is not None:
            self.reason = why
            return None
        profile.pop("version", None)
        tps = profile.pop("throughput_tokens_per_s")
        profile["auto_saved"] = True
        save_baseline(Baseline(tps, profile), self.path)
        self.saved_at, self.reason = now, ""
        return self.path

    def _not_steady(self, profile: dict[str, Any]) -> str | None:
        median = profile["throughput_tokens_per_s"]
        p10, p90 = profile.get("throughput_p10"), profile.get("throughput_p90")
        if p10 is None or p90 is None:
            return "too few throughput points to call it steady"
        if p10 < (1 - self.steady_fraction) * median or p90 > (1 + self.steady_fraction) * median:
            return "throughput is not steady"
        return None

    def _worse_than_saved(self, profile: dict[str, Any]) -> str | None:
        if not self.path.exists():
            return None
        try:
            old = load_baseline(self.path)
        except BaselineError:
            return None  # an unreadable file is no reference to keep
        if old.unit != profile.get("throughput_unit", TOK_S):
            return None
        if profile["throughput_tokens_per_s"] < (1 - self.degraded_fraction) * old.throughput_tokens_per_s:
            return "throughput is below the saved baseline's: not replacing a better run"
        old_pad, new_pad = old.extra.get("padding_efficiency"), profile.get("padding_efficiency")
        if (isinstance(old_pad, (int, float)) and isinstance(new_pad, (int, float)) and math.isfinite(old_pad)
                and new_pad < old_pad - self.padding_margin):
            return "padding efficiency is below the saved baseline's: not replacing a better run"
        return None
