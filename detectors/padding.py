"""padding: batches carry far more padding than they should (bucketing broken?).

Efficiency is real tokens / padded tokens. From probe lines it is
token-weighted over every rank's batches in the last ``padding_window_s``
(sum of tokens / sum of padded tokens: a small batch weighs little); from a
log that prints it (``pad_eff 0.93``: ``parsers.padding``, read from the
progress line's numbers or a ``PaddingReport``) it is the mean of the
reports in the window. The window holds at least ``padding_min_samples``
reports, so a log that prints every five minutes is judged on its last
few. Probe lines win where both come: they count tokens, a log rounds.

It fires when the efficiency falls ``padding_margin`` below the good run's
(the baseline's ``padding_efficiency``), or below ``padding_floor`` without
a baseline, and resolves once it is back ``padding_hysteresis`` above that
line. The likely cause is the loader's batching (length buckets whose
boundaries no longer fit the lengths, packing off), so the remedy names
printing the bucket boundaries and ``dflash-watch buckets``.

Example: probe lines of one rank at 93% for ten minutes, then 55%: the
120 s window crosses the 70% floor a minute later.

>>> det = PaddingDetector()
>>> out = []
>>> for i in range(120):
...     padded = 10000 if i < 60 else 16900
...     out += det.update(ProbeSample(10.0 * i, rank=0, tokens=9300, padded_tokens=padded))
>>> [(a.state, a.time) for a in out]
[('firing', 660.0)]
>>> out[0].message.split(":")[0]
'padding efficiency 68% is below the 70% floor'
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from typing import Any

from ..parsers.events import Event, PaddingReport, ProbeSample, ProcessExit, Progress
from ..parsers.padding import may_state_padding, padding_from_metrics
from ..parsers.step_columns import columns_of, metric_names, read
from .base import Alert, DetectorBase, Episode, StepCommit
from .config import DetectorConfig, fmt_duration

_METRICS = columns_of("metrics")  # a run's metrics, read in one pass

NAME = "padding"
REMEDY = (
    "print the bucket boundaries the loader uses (length-bucketed batches whose boundaries no longer fit "
    "the lengths, or packing turned off, pad far more); `dflash-watch buckets LENGTHS --k 6` computes "
    "boundaries that minimise padding for the dataset's lengths"
)
_BUCKETS = 24  # a window is kept in this many time buckets (5 s of a 120 s one)
_PER_BUCKET = 2  # log reports read per bucket at most (24 buckets: 48 a window)
_KEPT = 4096  # buckets at most (a sparse log: one report per bucket)
_RANKS_SHOWN = 32


def _NOTHING() -> None:
    """The commit of a quiet run that changes no field."""


class _Window:
    """Reports of the last ``span`` seconds (and at least ``keep`` of them),
    in time buckets: the sums of real and padded tokens (probe lines) or of
    efficiencies and ones (log reports). A report inside the open bucket
    costs two additions; the detector judges when a bucket closes."""

    __slots__ = ("span", "keep", "bucket_s", "buckets", "num", "den", "count", "open_start", "open_num",
                 "open_den", "open_count", "open_ranks", "_pops")

    def __init__(self, span: float, keep: int) -> None:
        self.span = span
        self.keep = max(1, keep)
        self.bucket_s = span / _BUCKETS
        # Closed buckets, oldest first: (start, num, den, reports, ranks).
        self.buckets: deque[tuple[float, float, float, int, frozenset[int | None]]] = deque()
        self.num = self.den = 0.0  # sums over the closed buckets
        self.count = 0
        self.open_start: float | None = None
        self.open_num = self.open_den = 0.0
        self.open_count = 0
        self.open_ranks: set[int | None] = set()
        self._pops = 0

    def add(self, t: float, num: float, den: float, rank: int | None) -> bool:
        """Adds one report; True when it opened a new bucket (judge now)."""
        start = self.open_start
        if start is not None and start <= t < start + self.bucket_s:
            self.open_num += num
            self.open_den += den
            self.open_count += 1
            self.open_ranks.add(rank)
            return False
        if start is not None:
            self._close()
        self.open_start = t
        self.open_num, self.open_den, self.open_count = num, den, 1
        self.open_ranks = {rank}
        self._expire(t)
        return True

    def _close(self) -> None:
        assert self.open_start is not None
        self.buckets.append((self.open_start, self.open_num, self.open_den, self.open_count,
                             frozenset(self.open_ranks)))
        self.num += self.open_num
        self.den += self.open_den
        self.count += self.open_count

    def _expire(self, t: float) -> None:
        buckets = self.buckets
        horizon = t - self.span
        while buckets and (
            (buckets[0][0] < horizon and self.count - buckets[0][3] + self.open_count >= self.keep)
            or len(buckets) > _KEPT
        ):
            _, n, d, c, _ = buckets.popleft()
            self.num -= n
            self.den -= d
            self.count -= c
            self._pops += 1
        if self._pops >= 1024:  # float sums drift: add them up afresh now and then
            self._pops = 0
            self.num = math.fsum(b[1] for b in buckets)
            self.den = math.fsum(b[2] for b in buckets)

    def value(self) -> float | None:
        den = self.den + self.open_den
        return (self.num + self.open_num) / den if den > 0 else None

    def samples(self) -> int:
        return self.count + self.open_count

    def clear(self) -> None:
        self.buckets.clear()
        self.num = self.den = 0.0
        self.count = 0
        self.open_start = None
        self.open_num = self.open_den = 0.0
        self.open_count = 0
        self.open_ranks = set()

    def ranks(self) -> list[int]:
        seen = set(self.open_ranks)
        for b in self.buckets:
            seen |= b[4]
        return sorted(r for r in seen if r is not None)[:_RANKS_SHOWN]


class PaddingDetector(DetectorBase):
    name = NAME
    accepts = (ProbeSample, PaddingReport, Progress, ProcessExit)
    timed = False

    def __init__(
        self, config: DetectorConfig | None = None, baseline_efficiency: float | None = None
    ) -> None:
        self.config = c = config or DetectorConfig()
        self.baseline = _valid(baseline_efficiency)
        self.episode = Episode(NAME)
        self._probe = _Window(c.padding_window_s, c.padding_min_samples)
        self._log = _Window(c.padding_window_s, c.padding_min_samples)
        self._probe_seen = False
        self._last_value: float | None = None
        self.source: str | None = None  # "probe" or "log"
        self._worst: float | None = None

    def deadline(self) -> float | None:
        return None

    @property
    def efficiency(self) -> float | None:
        """The windowed efficiency now (probe lines where they come), else the
        last one judged: after the job died its last batches still say what
        they were (the diagnosis of a crashed run needs them), until the next
        incarnation's own batches replace them. None before any."""
        value = (self._probe if self._probe_seen else self._log).value()
        return value if value is not None else self._last_value

    def set_baseline(self, efficiency: float | None) -> None:
        """Judge from now on against ``efficiency`` (None: the floor)."""
        self.baseline = _valid(efficiency)

    def threshold(self) -> float:
        """The efficiency below which the detector fires."""
        c = self.config
        return self.baseline - c.padding_margin if self.baseline is not None else c.padding_floor

    def quiet_steps(self, steps: Sequence[Progress], /) -> StepCommit | None:
        """A run of step lines none of which adds a report changes nothing
        (``base.StepCommit``): after probe lines, or where every line either
        falls in the open bucket already read twice or states no padding.
        A line that would add one refuses the run (it may close a bucket and
        judge)."""
        if self._probe_seen:
            return _NOTHING
        # A log whose names never state padding (most): the run's names at
        # once, each once (``metric_names``), every test in C (``may_state_padding``).
        if not may_state_padding(metric_names(read(steps, _METRICS)[0])):
            return _NOTHING
        log = self._log
        start = log.open_start
        full = log.open_count >= _PER_BUCKET and start is not None
        end = start + log.bucket_s if full and start is not None else 0.0
        for p in steps:
            metrics = p.metrics
            if not metrics or (full and start is not None and start <= p.time < end):
                continue
            if padding_from_metrics(metrics) is not None:
                return None
        return _NOTHING

    def update(self, event: Event) -> list[Alert]:
        t = event.time
        if type(event) is Progress:
            if self._probe_seen:
                return []
            log = self._log
            start = log.open_start
            # A log that prints padding on every step line: the first
            # _PER_BUCKET reports of a bucket make its mean, the rest of the
            # bucket's lines are not read (the hot path).
            if log.open_count >= _PER_BUCKET and start is not None and start <= t < start + log.bucket_s:
                return []
            metrics = event.metrics
            if not metrics:
                return []
            efficiency = padding_from_metrics(metrics)
            if efficiency is None:
                return []
            if self._log.add(t, efficiency, 1.0, event.rank):
                return self._judge(t, self._log, "log", event.source)
            return []
        if isinstance(event, ProbeSample):
            if event.padding_efficiency is None:
                return []
            self._probe_seen = True
            if self._probe.add(t, float(event.tokens or 0), float(event.padded_tokens or 0), event.rank):
                return self._judge(t, self._probe, "probe", event.source)
            return []
        if isinstance(event, PaddingReport):
            if self._probe_seen or not 0.0 <= event.efficiency <= 1.0:
                return []
            if self._log.add(t, event.efficiency, 1.0, event.rank):
                return self._judge(t, self._log, "log", event.source)
            return []
        if isinstance(event, ProcessExit):
            # The next incarnation is judged on its own batches.
            self._probe.clear()
            self._log.clear()
        return []

    def _judge(self, t: float, window: _Window, source: str, where: str) -> list[Alert]:
        c = self.config
        value = window.value()
        if value is not None:
            self._last_value = value
        self.source = source
        if value is None or window.samples() < c.padding_min_samples:
            return []
        line = self.threshold()
        ep = self.episode
        if ep.active:
            self._worst = value if self._worst is None else min(self._worst, value)
            if value >= line + c.padding_hysteresis:
                since = ep.since if ep.since is not None else t
                msg = f"padding efficiency back to {value:.0%} after {fmt_duration(t - since)}"
                return ep.resolve(t, msg, where, self._evidence(window, value, source, line))
            return []
        if value >= line:
            return []
        self._worst = value
        if self.baseline is not None:
            msg = (
                f"padding efficiency {value:.0%} is {(self.baseline - value) * 100:.0f} points below "
                f"the good run's "
                f"{self.baseline:.0%}: batches are padded far more; {REMEDY}"
            )
        else:
            msg = (
                f"padding efficiency {value:.0%} is below the {line:.0%} floor: batches are mostly padding; "
                f"{REMEDY}"
            )
        return ep.fire(t, "warning", msg, where, self._evidence(window, value, source, line))

    def _evidence(self, window: _Window, value: float, source: str, line: float) -> dict[str, Any]:
        return {
            "now": round(value, 4),
            "baseline": self.baseline,
            "threshold": round(line, 4),
            "worst": None if self._worst is None else round(self._worst, 4),
            "window_s": self.config.padding_window_s,
            "samples": window.samples(),
            "ranks": window.ranks(),
            "source": source,
            "remedy": REMEDY,
        }


def _valid(efficiency: float | None) -> float | None:
    if efficiency is None or isinstance(efficiency, bool):
        return None
    try:
        value = float(efficiency)
    except (TypeError, ValueError):
        return None
    return value if 0.0 < value <= 1.0 else None
