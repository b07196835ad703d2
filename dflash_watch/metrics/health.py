"""Training health as metric families: the loss, the ranks and the GPU itself.

Issue 19's signals, read at scrape time like the rest (``collector.py``):
``health_snapshot`` runs under the Monitor's lock and only copies
references to frozen objects (the latest ``GpuSample`` per GPU, the
detectors' ``LossState``, ``RankRow`` and ``GpuHealthState``);
``health_families`` builds the text after the lock is let go.

The detectors' answers come from ``DetectorSet.loss_state``,
``rank_table`` and ``gpu_health``, called as the dashboard calls them
(``tui/health.py``). A run without one of those detectors answers None,
``[]`` or ``{}``, and the families that would come from it are absent.

Conventions (CONTRACTS section 10, Prometheus naming):

- Base units: degrees Celsius, watts, hertz, seconds; ratios 0..1.
- A NaN or Inf loss is exported as such (``NaN``, ``+Inf``): Prometheus
  stores it, and ``x != x`` finds it in PromQL. Turning it into a number or
  dropping the sample would hide exactly what the loss rules look for.
- Counters (``_total``) are values that only rise and reset only when their
  owner restarts, which ``rate()``/``increase()`` handle:
  ``dflash_loss_nan_total`` and ``dflash_gpu_xid_total`` (counted by the
  watcher since it started), and ``dflash_gpu_ecc_uncorrected_total``: the
  driver's *volatile* uncorrected ECC count only rises and goes back to 0
  when the driver reloads, which is a counter's reset. Exported as a gauge,
  ``increase()`` over it would be wrong by convention (and linters of
  rules flag it); dcgm-exporter exports its volatile ECC totals as counters
  too. Retired pages are a gauge: they describe the card as it is now.
- Labels are values we choose: ``gpu`` and ``rank`` indices, throttle
  reason names from a fixed list, Xid codes as integers. Never log text.
- The nan/overflow counters and the per-GPU Xid total are present at 0
  from the first scrape: a series that first appears at 1 has no earlier
  sample for ``increase()`` to compare with, so its first event would be
  missed.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

# The throttle reasons GpuSample names (CONTRACTS section 3). Only these
# become label values; a name outside the list (a newer sample file) is left out.
THROTTLE_REASONS = ("thermal", "power_cap", "hw_slowdown", "power_brake", "sw_thermal")
MHZ = 1e6

if TYPE_CHECKING:
    from dflash_watch.detectors.gpu_health import GpuHealthState
    from dflash_watch.detectors.loss import LossState
    from dflash_watch.detectors.straggler_ranks import RankRow

    from ..monitor import Monitor

# One gauge per rank each: (name, help, ``RankRow`` field); absent where the field is None.
RANK_GAUGES: tuple[tuple[str, str, str], ...] = (
    ("dflash_rank_step_seconds", "Latest step time per rank", "step_seconds"),
    ("dflash_rank_compute_seconds", "Latest step's compute time per rank (where known)", "compute_seconds"),
    ("dflash_rank_wait_seconds", "Latest step's time in collectives or waiting for data, per rank (where known)",
     "wait_seconds"),
    ("dflash_rank_last_step", "Latest step seen per rank", "last_step"),
    ("dflash_rank_last_seen_timestamp_seconds", "Time a rank last reported, seconds since the epoch (log clock)",
     "last_seen"),
)
# One flag per rank each, 0 or 1 for every rank: (name, help, ``RankRow`` field).
RANK_FLAGS: tuple[tuple[str, str, str], ...] = (
    ("dflash_rank_slow", "1 while the straggler detector holds this rank slow", "slow"),
    ("dflash_rank_hung", "1 while the straggler detector holds this rank hung", "hung"),
)
# One gauge per GPU each: (name, help, ``GpuSample`` field, scale to the base unit).
GPU_GAUGES: tuple[tuple[str, str, str, float], ...] = (
    ("dflash_gpu_temperature_celsius", "GPU core temperature, latest sample", "temp_c", 1.0),
    ("dflash_gpu_power_watts", "GPU power draw, latest sample", "power_w", 1.0),
    ("dflash_gpu_power_limit_watts", "GPU enforced power limit", "power_limit_w", 1.0),
    ("dflash_gpu_sm_clock_hertz", "SM clock, latest sample", "sm_clock_mhz", MHZ),
    ("dflash_gpu_sm_clock_max_hertz", "SM clock's maximum", "sm_clock_max_mhz", MHZ),
    ("dflash_gpu_retired_pages", "Memory pages retired by the driver", "retired_pages", 1.0),
    ("dflash_gpu_pcie_link_gen", "PCIe link generation now", "pcie_gen", 1.0),
    ("dflash_gpu_pcie_link_gen_max", "PCIe link generation the card and slot allow", "pcie_gen_max", 1.0),
    ("dflash_gpu_pcie_link_width", "PCIe link width (lanes) now", "pcie_width", 1.0),
    ("dflash_gpu_pcie_link_width_max", "PCIe link width (lanes) the card and slot allow", "pcie_width_max", 1.0),
)


@dataclass(frozen=True, slots=True)
class HealthSnapshot:
    """What a scrape copies of the run's health under the Monitor's lock."""

    # (gpu, latest GpuSample or None, lost) per GPU the Monitor knows.
    gpus: tuple[tuple[int, Any, bool], ...]
    # The detectors' answers (``DetectorSet.loss_state``, ``rank_table``, ``gpu_health``).
    loss: LossState | None = None
    ranks: tuple[RankRow, ...] = ()
    gpu_health: tuple[tuple[int, GpuHealthState], ...] = ()


def health_snapshot(monitor: Monitor) -> HealthSnapshot:
    """Copy what the health families need; call with ``monitor.lock`` held."""
    gpus = []
    for gpu in monitor.gpus.gpus:
        last = monitor.gpus.last(gpu)
        lost_event = monitor.gpus.lost(gpu)
        lost = (lost_event is not None and (last is None or lost_event.time >= last.time)) or bool(
            last is not None and last.lost)
        gpus.append((gpu, last, lost))
    detectors = monitor.detectors
    return HealthSnapshot(
        gpus=tuple(gpus),
        loss=detectors.loss_state(),
        ranks=tuple(detectors.rank_table()),
        gpu_health=tuple(sorted(detectors.gpu_health().items())),
    )


def health_families(s: HealthSnapshot) -> Iterator[Metric]:
    """Every health family; one with no sample is left out (absent, never a zero)."""
    yield from _loss(s)
    yield from _ranks(s)
    yield from _gpus(s)
    yield from _xid(s)


def _gauge(name: str, doc: str, value: float | None) -> Iterator[Metric]:
    if value is not None:
        yield GaugeMetricFamily(name, doc, value=float(value))


def _loss(s: HealthSnapshot) -> Iterator[Metric]:
    st = s.loss
    if st is not None:
        yield from _gauge("dflash_training_loss", "Latest training loss (NaN/Inf exported as such)", st.loss)
        yield from _gauge("dflash_grad_norm", "Latest gradient norm (NaN/Inf exported as such)", st.grad_norm)
        yield from _gauge("dflash_loss_scale", "Latest fp16 dynamic loss scale", st.loss_scale)
        yield from _gauge("dflash_training_loss_timestamp_seconds",
                          "Time of the latest training loss, seconds since the epoch (log clock)", st.time)
    yield CounterMetricFamily("dflash_loss_nan", "Training losses or grad norms seen NaN/Inf since the watcher started",
                              value=float(st.nan_total if st is not None else 0))
    yield CounterMetricFamily("dflash_loss_overflow", "fp16 loss-scale overflows (skipped steps) seen since the "
                              "watcher started", value=float(st.overflow_total if st is not None else 0))


def _ranks(s: HealthSnapshot) -> Iterator[Metric]:
    if not s.ranks:
        return
    gauges = [(GaugeMetricFamily(name, doc, labels=["rank"]), field) for name, doc, field in RANK_GAUGES]
    flags = [(GaugeMetricFamily(name, doc, labels=["rank"]), field) for name, doc, field in RANK_FLAGS]
    info = GaugeMetricFamily("dflash_rank_info", "1 per rank whose GPU is known (label gpu)", labels=["rank", "gpu"])
    for row in sorted(s.ranks, key=lambda r: r.rank):
        rank = str(int(row.rank))
        for fam, field in gauges:
            value = getattr(row, field)
            if value is not None:
                fam.add_metric([rank], float(value))
        for fam, field in flags:
            fam.add_metric([rank], 1.0 if getattr(row, field) else 0.0)
        if row.gpu is not None:
            info.add_metric([rank, str(int(row.gpu))], 1.0)
    for fam in (*(f for f, _ in gauges), *(f for f, _ in flags), info):
        if fam.samples:
            yield fam


def _per_gpu(name: str, doc: str, kind: type = GaugeMetricFamily) -> Any:
    return kind(name, doc, labels=["gpu"])


def _gpus(s: HealthSnapshot) -> Iterator[Metric]:
    if not s.gpus:
        return
    gauges = [(_per_gpu(name, doc), field, scale) for name, doc, field, scale in GPU_GAUGES]
    ratio = _per_gpu("dflash_gpu_sm_clock_ratio", "SM clock / its maximum (0..1)")
    throttle = GaugeMetricFamily("dflash_gpu_throttle", "1 while the clocks are held down for this reason",
                                 labels=["gpu", "reason"])
    ecc = _per_gpu("dflash_gpu_ecc_uncorrected", "Volatile uncorrected ECC errors, the driver's count since it "
                   "loaded (resets with the driver)", CounterMetricFamily)
    remap = _per_gpu("dflash_gpu_remap_pending", "1 while a row remap waits for a GPU reset")
    lost = _per_gpu("dflash_gpu_lost", "1 once the GPU fell off the bus or NVML reports it lost")
    for gpu, sample, is_lost in s.gpus:
        g = [str(gpu)]
        lost.add_metric(g, 1.0 if is_lost else 0.0)
        if sample is None or is_lost:  # a lost GPU's last reads are not its state now
            continue
        for fam, field, scale in gauges:
            value = getattr(sample, field)
            if value is not None:
                fam.add_metric(g, float(value) * scale)
        if sample.sm_clock_mhz is not None and sample.sm_clock_max_mhz:
            ratio.add_metric(g, float(sample.sm_clock_mhz) / float(sample.sm_clock_max_mhz))
        if sample.throttle is not None:
            active = set(sample.throttle)
            for reason in THROTTLE_REASONS:
                throttle.add_metric([str(gpu), reason], 1.0 if reason in active else 0.0)
        if sample.ecc_uncorrected is not None:
            ecc.add_metric(g, float(sample.ecc_uncorrected))
        if sample.remap_pending is not None:
            remap.add_metric(g, 1.0 if sample.remap_pending else 0.0)
    for fam in (*(f for f, _, _ in gauges), ratio, throttle, ecc, remap, lost):
        if fam.samples:
            yield fam


def _xid(s: HealthSnapshot) -> Iterator[Metric]:
    """``dflash_gpu_xid_total{gpu,code}`` from the gpu_health detector's counts.

    Per code where the state has ``xid_counts`` (code -> count); a state
    with only ``xid_total`` gives its count under ``code="unknown"``, so
    ``sum by (gpu)`` is right either way. ``dflash_gpu_xid_errors_total{gpu}``
    (all codes) is there at 0 for every GPU the Monitor or the detector knows, which is what
    the rule's ``increase()`` needs to see the first Xid.
    """
    per_code = CounterMetricFamily("dflash_gpu_xid", "Xid errors seen since the watcher started, per code",
                                   labels=["gpu", "code"])
    total = CounterMetricFamily("dflash_gpu_xid_errors", "Xid errors seen since the watcher started, all codes",
                                labels=["gpu"])
    last = _per_gpu("dflash_gpu_last_xid", "Code of the latest Xid error (absent before the first)")
    states = dict(s.gpu_health)
    for gpu in sorted({*states, *(gpu for gpu, _, _ in s.gpus)}):
        st = states.get(gpu)
        g = str(int(gpu))
        n = int(st.xid_total) if st is not None else 0
        total.add_metric([g], float(n))
        counts = st.xid_counts if st is not None else None
        if isinstance(counts, Mapping):
            for code, k in sorted(counts.items()):
                per_code.add_metric([g, str(int(code))], float(k))
        elif n:
            per_code.add_metric([g, "unknown"], float(n))
        last_xid = st.last_xid if st is not None else None
        if last_xid is not None:
            last.add_metric([g], float(last_xid))
    for fam in (per_code, total, last):
        if fam.samples:
            yield fam

