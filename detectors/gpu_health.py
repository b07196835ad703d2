"""gpu_health: the GPU itself degrades (per GPU), from the health fields of
its samples (CONTRACTS section 3) and from ``XidError`` / ``GpuLost`` events.

Kinds (CONTRACTS section 4):

* ``xid``: an Xid error, with its code and meaning (``xid_codes``). One
  alert per new code: the same code again within ``gpu_xid_repeat_s`` is the
  same episode, a different code is news and fires again (the newest stays
  in the panel). Critical for the codes that mean the GPU is in trouble,
  a warning for the application-fault ones. Resolves once the GPU went
  ``gpu_xid_repeat_s`` without any Xid.
* ``ecc``: the volatile uncorrected ECC count rose (or is above zero when
  first seen: an uncorrectable error since the driver loaded), a row remap
  or page retirement is pending (a reset applies it), or retired pages rose.
* ``thermal`` / ``power``: clocks held down, sustained: over a window the
  reason was active in most samples AND the median SM clock sat well below
  its max. A GPU at its power cap under full load is normal (its clock stays
  near max), and a brief cap is outvoted by the window: no alert.
* ``pcie``: the link below its max width (always judged) or generation
  (judged only under load: idle GPUs drop the generation to save power),
  sustained.
* ``lost``: the GPU fell off the bus (``GpuSample.lost`` or ``GpuLost``);
  critical; resolves if the GPU samples again (after a reset).

A missing field (None: the card does not say, an older sample file) is
never judged. The detector keeps a small state per GPU, readable through
``state()`` for the dashboard's tiles (``DetectorSet.gpu_health()``).

>>> from dflash_watch.parsers.events import GpuSample
>>> d = GpuHealth()
>>> [a.kind for a in d.update(GpuSample(0.0, 3, 1, 2, xid=(79,)))]
['xid']
>>> d.update(GpuSample(1.0, 3, 1, 2, xid=(79,)))  # the same episode
[]
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from ..parsers.events import Event, GpuLost, GpuSample, XidError
from .base import Alert, DetectorBase, Episode, Severity
from .config import DetectorConfig, fmt_duration
from .xid_codes import describe_xid

NAME = "gpu_health"
THERMAL_REASONS = frozenset({"thermal", "sw_thermal"})
# HW slowdown is asserted with a HW thermal slowdown or a power brake (or an
# external one): it counts with the power reasons unless a thermal reason
# is active in the same sample (then it is the temperature's).
POWER_REASONS = frozenset({"power_cap", "power_brake", "hw_slowdown"})
_MAX_WINDOW = 4096  # samples kept per GPU for the throttle window (dense files)


@dataclass(frozen=True, slots=True)
class GpuHealthState:
    """What the detector knows of one GPU now (the dashboard's tile)."""

    gpu: int
    xid_total: int = 0
    last_xid: int | None = None
    ecc_uncorrected: int | None = None
    throttle: tuple[str, ...] = ()
    temp_c: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    sm_clock_mhz: float | None = None
    sm_clock_max_mhz: float | None = None
    remap_pending: bool | None = None
    retired_pages: int | None = None
    pcie_gen: int | None = None
    pcie_gen_max: int | None = None
    pcie_width: int | None = None
    pcie_width_max: int | None = None
    lost: bool = False
    # Kinds firing now, e.g. ("thermal", "xid").
    firing: tuple[str, ...] = ()
    # Xids seen per code (code -> count), for ``dflash_gpu_xid_total{code}``.
    xid_counts: dict[int, int] = field(default_factory=dict)


class _Gpu:
    __slots__ = (
        "gpu", "bus", "last", "xid", "ecc", "thermal", "power", "pcie", "lost",
        "xid_total", "xid_counts", "last_xid", "xid_seen", "xid_last_t", "xid_codes",
        "ecc_last", "retired_last", "ecc_rise_t", "first_t", "window",
        "pcie_bad_since", "pcie_good_since", "lost_flag",
    )

    def __init__(self, gpu: int | None, bus: str | None = None) -> None:
        self.gpu = gpu
        # A kernel Xid line names a PCI bus the shell could not map to an
        # NVML index (a log of ``dmesg -w``, a replayed syslog): still news.
        self.bus = bus
        self.last: GpuSample | None = None
        self.xid = Episode(NAME, gpu, "xid")
        self.ecc = Episode(NAME, gpu, "ecc")
        self.thermal = Episode(NAME, gpu, "thermal")
        self.power = Episode(NAME, gpu, "power")
        self.pcie = Episode(NAME, gpu, "pcie")
        self.lost = Episode(NAME, gpu, "lost")
        self.xid_total = 0
        self.xid_counts: dict[int, int] = {}
        self.last_xid: int | None = None
        self.xid_seen: dict[int, float] = {}  # code -> last time seen
        self.xid_last_t: float | None = None
        self.xid_codes: list[int] = []  # codes of the current episode, in order
        self.ecc_last: int | None = None
        self.retired_last: int | None = None
        self.ecc_rise_t: float | None = None  # the last rise of the count or the retired pages
        self.first_t: float | None = None  # first sample with throttle reasons
        # (time, thermal active, power active, SM clock / max or None)
        self.window: deque[tuple[float, bool, bool, float | None]] = deque(maxlen=_MAX_WINDOW)
        self.pcie_bad_since: float | None = None
        self.pcie_good_since: float | None = None
        self.lost_flag = False


class GpuHealth(DetectorBase):
    name = NAME
    accepts = (GpuSample, GpuLost, XidError)
    timed = False

    def __init__(self, config: DetectorConfig | None = None) -> None:
        self.config = c = config or DetectorConfig()
        self._xid_repeat = c.gpu_xid_repeat_s
        self._ecc_quiet = c.gpu_ecc_quiet_s
        self._window_s = c.gpu_throttle_window_s
        self._throttle_frac = c.gpu_throttle_frac
        self._clock_low = c.gpu_clock_low_frac
        self._pcie_sustain = c.gpu_pcie_sustain_s
        self._pcie_busy = c.gpu_pcie_busy_util
        self._pcie_resolve = c.gpu_pcie_resolve_s
        self._gpus: dict[int, _Gpu] = {}
        self._buses: dict[str, _Gpu] = {}  # kernel Xids on a bus no GPU index is known for

    def _of(self, gpu: int) -> _Gpu:
        g = self._gpus.get(gpu)
        if g is None:
            g = self._gpus[gpu] = _Gpu(gpu)
        return g

    # -- the dashboard's view ----------------------------------------------

    def state(self) -> dict[int, GpuHealthState]:
        out: dict[int, GpuHealthState] = {}
        for index in sorted(self._gpus):
            g = self._gpus[index]
            s = g.last
            firing = tuple(e.kind or "" for e in (g.xid, g.ecc, g.thermal, g.power, g.pcie, g.lost) if e.active)
            out[index] = GpuHealthState(
                gpu=index,
                xid_total=g.xid_total,
                last_xid=g.last_xid,
                ecc_uncorrected=g.ecc_last,
                throttle=(s.throttle or ()) if s is not None else (),
                temp_c=s.temp_c if s else None,
                power_w=s.power_w if s else None,
                power_limit_w=s.power_limit_w if s else None,
                sm_clock_mhz=s.sm_clock_mhz if s else None,
                sm_clock_max_mhz=s.sm_clock_max_mhz if s else None,
                remap_pending=s.remap_pending if s else None,
                retired_pages=g.retired_last,
                pcie_gen=s.pcie_gen if s else None,
                pcie_gen_max=s.pcie_gen_max if s else None,
                pcie_width=s.pcie_width if s else None,
                pcie_width_max=s.pcie_width_max if s else None,
                lost=g.lost_flag,
                firing=firing,
                xid_counts=dict(g.xid_counts),
            )
        return out

    # -- events ------------------------------------------------------------

    def update(self, event: Event) -> list[Alert]:
        kind = type(event)
        if kind is GpuSample:
            return self._sample(event)  # type: ignore[arg-type]
        if kind is XidError:
            assert isinstance(event, XidError)
            if event.gpu is None:
                bus = event.pci_bus or "unknown"
                g = self._buses.get(bus)
                if g is None:
                    if len(self._buses) >= 64:  # bounded: a machine has a few buses
                        return []
                    g = self._buses[bus] = _Gpu(None, bus)
            else:
                g = self._of(event.gpu)
            return self._xids(g, event.time, (event.code,), event.source, event.message)
        if kind is GpuLost:
            assert isinstance(event, GpuLost)
            return self._lost(self._of(event.gpu), event.time, event.source, event.message)
        return []

    def _sample(self, s: GpuSample) -> list[Alert]:
        g = self._of(s.gpu)
        out: list[Alert] = []
        if s.lost:
            if s.xid:
                out += self._xids(g, s.time, s.xid, s.source)
            return out + self._lost(g, s.time, s.source, f"GPU {s.gpu} lost (NVML: GPU is lost)")
        g.last = s
        if g.lost_flag and s.used_bytes is not None:
            g.lost_flag = False
            out += g.lost.resolve(s.time, f"GPU {s.gpu} is back (sampling again)", s.source, {"gpu": s.gpu})
        if s.xid:
            out += self._xids(g, s.time, s.xid, s.source)
        elif g.xid.active and g.xid_last_t is not None and s.time - g.xid_last_t >= self._xid_repeat:
            codes = ", ".join(map(str, g.xid_codes))
            out += g.xid.resolve(
                s.time,
                f"GPU {s.gpu}: no new Xid for {fmt_duration(s.time - g.xid_last_t)} (saw Xid {codes})",
                s.source,
                {"gpu": s.gpu, "codes": list(g.xid_codes)},
            )
            g.xid_codes = []
        if s.ecc_uncorrected is not None or s.remap_pending is not None or s.retired_pages is not None:
            out += self._ecc(g, s)
        if s.throttle is not None:
            out += self._throttle(g, s)
        if s.pcie_width is not None or s.pcie_gen is not None:
            out += self._pcie(g, s)
        return out

    # -- xid ---------------------------------------------------------------

    def _xids(self, g: _Gpu, t: float, codes: tuple[int, ...], source: str, message: str = "") -> list[Alert]:
        out: list[Alert] = []
        for code in codes:
            g.xid_total += 1
            if code in g.xid_counts or len(g.xid_counts) < 256:  # bounded: Xid codes are few
                g.xid_counts[code] = g.xid_counts.get(code, 0) + 1
            g.last_xid = code
            g.xid_last_t = t
            seen = g.xid_seen.get(code)
            g.xid_seen[code] = t
            if seen is not None and t - seen < self._xid_repeat:
                continue  # the same episode of this code: counted, not sent again
            if len(g.xid_seen) > 64:  # bounded: forget the oldest codes
                for old in sorted(g.xid_seen, key=g.xid_seen.__getitem__)[:-32]:
                    del g.xid_seen[old]
            out.append(self._xid_alert(g, t, code, source, message))
        return out

    def _xid_alert(self, g: _Gpu, t: float, code: int, source: str, message: str) -> Alert:
        info = describe_xid(code)
        severity: Severity = "critical" if info.critical else "warning"
        who = f"GPU {g.gpu}" if g.gpu is not None else f"GPU at PCI {g.bus}"
        text = f"{who} Xid {code}: {info.meaning}"
        if message:
            text += f" ({message[:160]})"
        evidence: dict[str, Any] = {
            "gpu": g.gpu, "pci_bus": g.bus, "code": code, "meaning": info.meaning, "critical": info.critical,
            "codes": [*g.xid_codes, code], "xid_total": g.xid_total,
        }
        if message:
            evidence["line"] = message[:500]
        g.xid_codes.append(code)
        if not g.xid.active:
            return g.xid.fire(t, severity, text, source, evidence)[0]
        # A new code while the episode fires: news, sent again (the alert
        # book keeps the newest); the episode keeps the worst severity.
        prior = g.xid.fired_alert
        if prior is not None and prior.severity == "critical":
            severity = "critical"
        alert = Alert(t, NAME, "firing", severity, text, source, gpu=g.gpu, kind="xid", evidence=evidence)
        g.xid.fired_alert = alert
        return alert

    # -- ecc ---------------------------------------------------------------

    def _ecc(self, g: _Gpu, s: GpuSample) -> list[Alert]:
        why: list[str] = []
        rose_now = False
        severity: Severity = "warning"
        ecc, retired = s.ecc_uncorrected, s.retired_pages
        if ecc is not None:
            before = g.ecc_last
            if (before is None and ecc > 0) or (before is not None and ecc > before):
                rose = ecc - (before or 0)
                why.append(f"{rose} new uncorrectable ECC error{'s' if rose != 1 else ''} ({ecc} since the driver loaded)")
                severity = "critical"
                rose_now = True
            g.ecc_last = ecc
        if retired is not None:
            if g.retired_last is not None and retired > g.retired_last:
                why.append(f"{retired - g.retired_last} more retired page(s) ({retired} in all)")
                rose_now = True
            g.retired_last = retired
        if s.remap_pending:
            why.append("a memory row remap / page retirement is pending: reset the GPU to apply it")
        t = s.time
        if rose_now:
            g.ecc_rise_t = t
        if why:
            if not g.ecc.active:
                evidence = {
                    "gpu": s.gpu, "ecc_uncorrected": ecc, "remap_pending": s.remap_pending, "retired_pages": retired,
                }
                return g.ecc.fire(t, severity, f"GPU {s.gpu} memory errors: " + "; ".join(why), s.source, evidence)
            return []
        # Not pending now (a reset applied it): resolved, unless errors rose
        # within the quiet time (then once they stopped that long).
        if g.ecc.active and (g.ecc_rise_t is None or t - g.ecc_rise_t >= self._ecc_quiet):
            quiet = "" if g.ecc_rise_t is None else f" for {fmt_duration(t - g.ecc_rise_t)}"
            return g.ecc.resolve(
                t, f"GPU {s.gpu}: no new ECC errors{quiet}, nothing pending",
                s.source, {"gpu": s.gpu, "ecc_uncorrected": ecc, "retired_pages": retired},
            )
        return []

    # -- thermal / power ------------------------------------------------------

    def _throttle(self, g: _Gpu, s: GpuSample) -> list[Alert]:
        t = s.time
        reasons = s.throttle or ()
        ratio = None
        if s.sm_clock_mhz is not None and s.sm_clock_max_mhz:
            ratio = s.sm_clock_mhz / s.sm_clock_max_mhz
        thermal = any(r in THERMAL_REASONS for r in reasons)
        power = any(r in POWER_REASONS and (r != "hw_slowdown" or not thermal) for r in reasons)
        if g.first_t is None or (g.window and t < g.window[-1][0]):
            g.first_t = t  # the first sample, or the clock went back: start over
            g.window.clear()
        window = g.window
        window.append((t, thermal, power, ratio))
        horizon = t - self._window_s
        while window and window[0][0] < horizon:
            window.popleft()
        if t - g.first_t < self._window_s or len(window) < 3:
            return []
        n = len(window)
        thermal_frac = sum(1 for w in window if w[1]) / n
        power_frac = sum(1 for w in window if w[2]) / n
        ratios = sorted(w[3] for w in window if w[3] is not None)
        median = ratios[len(ratios) // 2] if ratios else None
        out: list[Alert] = []
        # Thermal slowdown held most of the window is itself a finding; the
        # clock test applies where clocks are known. The power cap is normal
        # at full load: only with the clock held well below max.
        thermal_low = median is None or median <= self._clock_low
        out += self._hold(g.thermal, s, thermal_frac, thermal_low, median, "temperature", THERMAL_REASONS)
        power_low = median is not None and median <= self._clock_low
        out += self._hold(g.power, s, power_frac, power_low, median, "the power limit", POWER_REASONS)
        return out

    def _hold(
        self, ep: Episode, s: GpuSample, frac: float, clock_low: bool, median: float | None, by: str,
        names: frozenset[str],
    ) -> list[Alert]:
        active = sorted(r for r in (s.throttle or ()) if r in names)
        evidence: dict[str, Any] = {
            "gpu": s.gpu, "share_of_samples": round(frac, 3), "window_s": self._window_s,
            "sm_clock_mhz": s.sm_clock_mhz, "sm_clock_max_mhz": s.sm_clock_max_mhz,
            "median_clock_ratio": None if median is None else round(median, 3),
            "temp_c": s.temp_c, "power_w": s.power_w, "power_limit_w": s.power_limit_w, "reasons": active,
        }
        if not ep.active:
            if frac < self._throttle_frac or not clock_low:
                return []
            clock = "" if median is None else f"; SM clock at {median:.0%} of its max"
            if s.sm_clock_mhz is not None and s.sm_clock_max_mhz:
                clock += f" ({s.sm_clock_mhz:.0f} of {s.sm_clock_max_mhz:.0f} MHz)"
            extra = f", {s.temp_c:.0f} °C" if s.temp_c is not None and by == "temperature" else ""
            if by != "temperature" and s.power_w is not None and s.power_limit_w:
                extra = f", {s.power_w:.0f} of {s.power_limit_w:.0f} W"
            msg = (f"GPU {s.gpu} clocks held down by {by} in {frac:.0%} of the last "
                   f"{fmt_duration(self._window_s)}{clock}{extra}")
            return ep.fire(s.time, "warning", msg, s.source, evidence)
        if frac < self._throttle_frac / 2 or (median is not None and median > self._clock_low + 0.1):
            return ep.resolve(s.time, f"GPU {s.gpu} clocks no longer held down by {by}", s.source, evidence)
        return []

    # -- pcie --------------------------------------------------------------

    def _pcie(self, g: _Gpu, s: GpuSample) -> list[Alert]:
        t = s.time
        narrow = s.pcie_width is not None and s.pcie_width_max is not None and s.pcie_width < s.pcie_width_max
        busy = s.util is not None and s.util >= self._pcie_busy
        gen_judged = busy and s.pcie_gen is not None and s.pcie_gen_max is not None
        slow = gen_judged and s.pcie_gen < s.pcie_gen_max  # type: ignore[operator]
        judged = (s.pcie_width is not None and s.pcie_width_max is not None) or gen_judged
        if not judged:
            return []
        if narrow or slow:
            g.pcie_good_since = None
            if g.pcie_bad_since is None:
                g.pcie_bad_since = t
            if not g.pcie.active and t - g.pcie_bad_since >= self._pcie_sustain:
                what = []
                if narrow:
                    what.append(f"width x{s.pcie_width} of x{s.pcie_width_max}")
                if slow:
                    what.append(f"gen {s.pcie_gen} of {s.pcie_gen_max} under load")
                msg = (f"GPU {s.gpu} PCIe link degraded for {fmt_duration(t - g.pcie_bad_since)}: "
                       + ", ".join(what) + " (reseat/retrain the link; host transfers are slower)")
                return g.pcie.fire(t, "warning", msg, s.source, self._pcie_evidence(s))
            return []
        g.pcie_bad_since = None
        if g.pcie.active:
            if g.pcie_good_since is None:
                g.pcie_good_since = t
            if t - g.pcie_good_since >= self._pcie_resolve:
                return g.pcie.resolve(t, f"GPU {s.gpu} PCIe link back at full width/generation", s.source,
                                      self._pcie_evidence(s))
        return []

    @staticmethod
    def _pcie_evidence(s: GpuSample) -> dict[str, Any]:
        return {"gpu": s.gpu, "pcie_gen": s.pcie_gen, "pcie_gen_max": s.pcie_gen_max, "pcie_width": s.pcie_width,
                "pcie_width_max": s.pcie_width_max, "util": s.util}

    # -- lost --------------------------------------------------------------

    def _lost(self, g: _Gpu, t: float, source: str, message: str) -> list[Alert]:
        g.lost_flag = True
        text = message if message.startswith("GPU") else f"GPU {g.gpu} lost: {message}"
        return g.lost.fire(t, "critical", f"{text}: it fell off the bus or needs a reset; its job cannot go on",
                           source, {"gpu": g.gpu, "message": message})
