"""Every detector threshold in one frozen object, and how alerts show numbers.

One place for the numbers means a config file's ``[detectors]`` table can
override any of them by field name, and a test can read the defaults it
checks the budgets against. The formatting helpers live here too because
they are the other half of "what the detectors say": alert messages are
read by an engineer at 3 a.m., so they carry units, not raw floats.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, tzinfo

from ..parsers.events import TOK_S

GIB = float(1 << 30)
MIB = float(1 << 20)


@dataclass(frozen=True, slots=True)
class DetectorConfig:
    # -- memory, shared by the three memory detectors ----------------------
    # "Flat" means the memory stays inside a band this wide: the larger of an
    # absolute floor and a fraction of the GPU's total memory.
    mem_flat_band_gib: float = 0.5
    mem_flat_band_frac: float = 0.01
    # Warm-up ends once memory has stayed flat this long...
    mem_settle_s: float = 60.0
    # ...or, for a GPU that never settles, this long after the job appeared.
    mem_warmup_max_s: float = 900.0
    # Below this much used memory the GPU runs no job. Falling to it is a
    # relaunch (a new warm-up follows) only when the job's processes changed
    # (GpuSample.processes) or, where no process list is sampled, when no
    # progress line came while memory sat there: a drafter whose memory drops
    # to near zero between steps is swinging, not relaunching.
    mem_idle_gib: float = 1.5
    # The flat band also follows the run's own noise: at least this many
    # times the sample-to-sample noise (a robust sigma of the differences),
    # so that a small card whose noise exceeds the fixed band stays flat.
    # 0 turns it off (the fixed band alone).
    mem_noise_band_factor: float = 8.0
    # Without a process list, an idle stretch that lasts this long with no
    # progress line in it is a relaunch even before memory comes back.
    mem_relaunch_idle_s: float = 60.0

    # -- memory_volatility ---------------------------------------------------
    # Fires when memory turned around (up then down, or down then up, each
    # leg wider than the flat band) this many times within the window.
    volatility_min_turns: int = 4
    # 240 s: four turns of a square wave with a 2-minute period span 180 s.
    volatility_window_s: float = 240.0
    # Resolves when memory has been flat again for this long.
    volatility_resolve_s: float = 180.0

    # -- memory_growth -------------------------------------------------------
    growth_rate_gib_per_h: float = 2.0
    # The fitted slope may fall this fraction short of the rate and still
    # count: a leak at exactly the rate must not be a coin flip.
    growth_rate_tolerance: float = 0.1
    growth_window_s: float = 1200.0
    growth_bucket_s: float = 60.0
    growth_min_r2: float = 0.6
    # A rise where one bucket-to-bucket jump carries more than this share of
    # the net rise is a step to a new level, not a leak.
    growth_max_step_share: float = 0.5
    growth_resolve_gib_per_h: float = 0.5
    # A bucket-to-bucket jump above this restarts the fit window: a warm-up
    # stair or a new level, not a leak (even 20 GiB/h is 0.33 GiB a minute).
    growth_reset_jump_gib: float = 2.0

    # -- memory_pressure -----------------------------------------------------
    pressure_frac: float = 0.97
    pressure_resolve_frac: float = 0.94
    pressure_sustain_s: float = 10.0

    # -- throughput_drop -----------------------------------------------------
    throughput_drop_frac: float = 0.30
    # The smoothed tokens/s must stay below (1 - drop_frac) x baseline this
    # long: dips shorter than this (checkpoint saves, evals) never fire.
    throughput_sustain_s: float = 90.0
    # Rolling median over this many seconds (and at least 3 reports).
    throughput_smooth_s: float = 20.0
    # Recovered once the smoothed value is back above this fraction of the
    # baseline for recover_s.
    throughput_recover_frac: float = 0.85
    throughput_recover_s: float = 30.0
    # After a (re)start, the first reports and seconds are compile/warm-up.
    throughput_warmup_events: int = 5
    throughput_warmup_s: float = 60.0
    # Without a given baseline, the median of this long after warm-up.
    throughput_learn_s: float = 300.0
    # A silence this long, or the step going backwards, is a relaunch.
    throughput_restart_gap_s: float = 120.0
    # ...and at least this many of the run's own report intervals: a run
    # that reports every 300 s is not relaunched at every report. The
    # learning (at least 5 reports), smoothing (at least 3 reports) and
    # sustain (at least 2 low reports) budgets scale with the interval too.
    throughput_restart_gap_intervals: float = 5.0
    # A learned baseline rises to a faster steady phase: the smoothed rate
    # stayed this fraction above it for throughput_learn_s (and 5 reports).
    throughput_rise_frac: float = 0.15
    # Times going back by less than this are clocks of several ranks
    # interleaving (jitter); more is a backward clock jump (NTP, DST),
    # which the detectors step over instead of reading it as a relaunch.
    clock_jitter_s: float = 2.0
    # The same step reported again within this long is another rank's copy.
    duplicate_step_s: float = 30.0

    # -- stall -------------------------------------------------------------
    stall_min_s: float = 120.0
    stall_factor: float = 5.0
    # Before the run has shown one interval between progress lines its
    # cadence is unknown: the silence limit is this (a run logging every
    # 150 or 300 s must not stall between its first two lines).
    stall_first_s: float = 600.0

    # -- crash / fx_tracing ---------------------------------------------------
    # Copies and consequences of one crash (other ranks, torchrun's report)
    # this far apart are one incident: ranks' copies arrive up to a minute apart.
    crash_dedupe_s: float = 60.0
    # How long (data time) a crash alert waits for the other ranks' copies
    # before it is sent, so that its evidence names every rank. Live, a quiet
    # log ends the wait at once.
    crash_hold_s: float = 5.0
    # A traceback followed within this long (data time) by two later steps
    # of its stream was caught and survived: a warning, not a crash. Live,
    # it is also how long past the log going quiet the verdict waits.
    crash_survive_s: float = 0.4
    # A traceback the run already survived gets this long for its progress.
    crash_caught_window_s: float = 300.0
    # A crash read this long before the job's exit is the exit's reason.
    exit_crash_window_s: float = 1800.0
    crash_traceback_lines: int = 40
    crash_frames: int = 5

    # -- recompile -------------------------------------------------------------
    # A storm: this many recompiles of one function within the window.
    recompile_storm_count: int = 8
    recompile_storm_window_s: float = 600.0
    recompile_quiet_s: float = 600.0

    # -- recompile, kind "rate": recompiles per hour after warm-up ------------
    # The first minutes of a run (and of each relaunch) compile: recompiles
    # then are the warm-up's, not a sign. The rate counts after this long.
    recompile_rate_warmup_s: float = 900.0
    # Recompiles per hour are counted over this window (on the busiest rank).
    recompile_rate_window_s: float = 1800.0
    # Without a baseline: fire at this many recompiles per hour or more (one
    # every two minutes: a steady run after warm-up recompiles next to never,
    # and without a reference only a clear rate is worth a page).
    recompile_rate_per_hour: float = 30.0
    # With a baseline: fire above this many times the good run's rate, and
    # never below recompile_rate_min_per_hour (a good run at 0/h is not
    # judged "rising" for one recompile).
    recompile_rate_factor: float = 3.0
    recompile_rate_min_per_hour: float = 4.0
    # And never on fewer recompiles than this in the window.
    recompile_rate_min_count: int = 3
    # Resolves once the rate is back below this fraction of the threshold.
    recompile_rate_resolve_frac: float = 0.5

    # -- padding -----------------------------------------------------------------
    # Efficiency = real tokens / padded tokens, token-weighted over all ranks
    # across this window (probe lines), or the mean of the log's reports.
    padding_window_s: float = 120.0
    # ...and over at least this many reports: a log that prints it every
    # five minutes is judged on its last few, not on one.
    padding_min_samples: int = 5
    # With a baseline: fire when the efficiency is this much (absolute,
    # 0..1) below the good run's.
    padding_margin: float = 0.10
    # Without one: fire below this floor.
    padding_floor: float = 0.70
    # Resolves once the efficiency is this much above the firing threshold
    # again (hysteresis: a value hovering at the line fires once).
    padding_hysteresis: float = 0.05

    # -- alloc_thrash: the CUDA caching allocator retrying (probe lines) ------
    # Allocator retries (cudaMalloc failed, cache flushed, retried) are
    # counted over this window, per rank; the busiest rank is judged.
    alloc_thrash_window_s: float = 600.0
    # Fire at this many retries per hour or more...
    alloc_thrash_per_hour: float = 30.0
    # ...and at least this many in the window (one retry is not a thrash).
    alloc_thrash_min_retries: int = 5
    # With a baseline: also above this many times the good run's rate.
    alloc_thrash_baseline_factor: float = 3.0

    # Clock times in messages; None is the local zone. Alert times stay epoch.
    tz: str | None = None

    # -- stall phases (issue 19, stall helper) -------------------------------
    # An evaluation ("***** Running Evaluation *****", eval bars, Lightning's
    # validation bar) prints no training step: the silence allowed grows by
    # this much while one runs. A real HF eval takes minutes (a generation
    # eval on a large set, tens of minutes).
    stall_eval_allowance_s: float = 1200.0
    # A checkpoint save ("Saving model checkpoint to", torch.distributed.
    # checkpoint): a 70B model with its optimizer state is ~1 TB, 10-20 min
    # to a shared file system at 1-2 GB/s.
    stall_checkpoint_allowance_s: float = 1800.0

    # -- loss (issue 19, loss helper) ------------------------------------------
    # nan: resolved once this many reports in a row are finite again (loss,
    # grad norm, no nan iterations). bf16 NaN poisons the weights and every
    # later report stays NaN; HF's nan filter logs a finite average (even
    # 0.0) while grad_norm stays nan: only a run of clean reports is back.
    loss_nan_resolve_reports: int = 10
    # spike: the robust level is median + k x sigma (MAD) over this many
    # reports (judged once there are loss_spike_min_reports)...
    loss_spike_window: int = 50
    loss_spike_min_reports: int = 20
    loss_spike_k: float = 8.0
    # ...and never less than this share above the median, nor this much
    # (absolute) above it: a flat loss (MAD ~ 0) does not fire on noise.
    loss_spike_min_rel: float = 0.5
    loss_spike_min_abs: float = 0.05
    # Resolved after this many reports in a row back under the level.
    loss_spike_resolve_reports: int = 2
    # Before there are loss_spike_min_reports, a loss this many times the
    # highest one so far is a spike (Megatron's 12.1 -> 26.5 at iteration 30
    # of a run logged every 10): an early blow-up must not wait for a level.
    loss_spike_early_factor: float = 2.0
    # divergence: the smoothed loss (median of the last loss_smooth_reports)
    # stays this share above its minimum over the last loss_divergence_window_s
    # for loss_divergence_s (data time) and loss_divergence_min_reports.
    loss_smooth_reports: int = 10
    loss_divergence_margin: float = 0.3
    loss_divergence_window_s: float = 3600.0
    loss_divergence_s: float = 300.0
    loss_divergence_min_reports: int = 5
    # overflow: skipped steps on at least this share of the last
    # loss_overflow_window iterations (fp16 warm-up halves the scale ~16
    # times from 2^32 at the start: a third of 50 steps, no storm)...
    loss_overflow_window: int = 50
    loss_overflow_frac: float = 0.5
    # ...or the loss scale fell to this floor from above it (bf16 runs print
    # a constant "loss scale: 1.0": that never fell, it is no storm).
    loss_overflow_scale_floor: float = 1.0

    # -- straggler (issue 19, straggler helper) --------------------------------
    # Per-rank step/compute/wait seconds are medians over this window of data
    # time, and a rank is judged on at least straggler_min_samples of them...
    straggler_window_s: float = 60.0
    straggler_min_samples: int = 5
    # ...after its first this-many seconds (compile, warm-up, the loader
    # filling: rank 0 is often slower at the start).
    straggler_warmup_s: float = 60.0
    # slow: the rank's compute per step (else its step time, where ranks do
    # not wait for each other) is this many times the median of the other
    # ranks' and at least straggler_slow_min_excess_s more...
    straggler_slow_factor: float = 1.3
    straggler_slow_min_excess_s: float = 0.02
    # ...for this long (minutes: a slow minute is a hiccup, not a straggler).
    straggler_slow_for_s: float = 120.0
    # Resolved once its ratio is back under this factor.
    straggler_resolve_factor: float = 1.15
    # hung: no rank stepped for max(straggler_hung_min_s, straggler_hung_factor
    # x the usual step interval) while the others wait (their heartbeats say
    # where, or they are ahead); a rank silent that long (its own cadence)
    # while the others step on has stopped reporting.
    straggler_hung_min_s: float = 60.0
    straggler_hung_factor: float = 5.0
    # An evaluation or a checkpoint save (on rank 0 only, the others waiting
    # in a barrier) is no hang unless it lasts longer than this.
    straggler_phase_allowance_s: float = 1800.0
    # GPUs per node: > 0 names a rank's GPU as rank % this (LOCAL_RANK = GPU
    # index, one process per GPU); 0: the GPU is not named.
    straggler_gpus_per_node: int = 0

    # -- gpu_health (issue 19, gpu helper) ---------------------------------------
    # xid: the same Xid code on a GPU again within this long is the same
    # episode (one alert, not one per sample); the xid alert resolves once
    # the GPU went this long without any Xid.
    gpu_xid_repeat_s: float = 600.0
    # ecc: resolved once the uncorrected count and the retired pages stopped
    # rising this long and no row remap / page retirement is pending.
    gpu_ecc_quiet_s: float = 600.0
    # thermal / power: over this window of samples (and only once the GPU was
    # watched this long), the reason was active in at least gpu_throttle_frac
    # of the samples AND the median SM clock was at most gpu_clock_low_frac of
    # its max. A GPU at its power cap under full load runs at 85-100% of its
    # max clock: normal, no alert; a brief cap is outvoted by the window.
    gpu_throttle_window_s: float = 120.0
    gpu_throttle_frac: float = 0.8
    gpu_clock_low_frac: float = 0.75
    # pcie: the link below its max width (always judged) or generation (judged
    # only at or above gpu_pcie_busy_util: idle GPUs drop the generation to
    # save power) for this long; resolved after gpu_pcie_resolve_s at full link.
    gpu_pcie_sustain_s: float = 120.0
    gpu_pcie_busy_util: float = 0.3
    gpu_pcie_resolve_s: float = 60.0


# -- formatting --------------------------------------------------------------


def fmt_gib(num_bytes: float, digits: int = 1) -> str:
    return f"{num_bytes / GIB:.{digits}f} GiB"


def fmt_bytes(num_bytes: float) -> str:
    if abs(num_bytes) >= GIB:
        return fmt_gib(num_bytes)
    return f"{num_bytes / MIB:.0f} MiB"


def fmt_rate(rate: float, unit: str = TOK_S) -> str:
    """21500 -> '21.5 Ktok/s'; (1.234, 'it/s') -> '1.2 it/s'.

    Tokens keep the K/M prefixes glued to the unit, as training logs and
    dashboards write them; other units (it/s, samples/s) are counts small
    enough to read plainly, with the digits their size needs.
    """
    v = abs(rate)
    if unit == TOK_S:
        if v >= 1e6:
            return f"{rate / 1e6:.2f} Mtok/s"
        if v >= 1e3:
            return f"{rate / 1e3:.1f} Ktok/s"
        return f"{rate:.0f} tok/s"
    if v >= 1e5:
        return f"{rate / 1e3:.0f}K {unit}"
    if v >= 100:
        return f"{rate:.0f} {unit}"
    if v >= 1 or v == 0:
        return f"{rate:.1f} {unit}"
    return f"{rate:.2g} {unit}"


def fmt_duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    s = int(round(seconds))
    if s < 120:
        return f"{s} s"
    if s < 3600:
        m, s = divmod(s, 60)
        return f"{m} min {s:02d} s" if s else f"{m} min"
    h, rem = divmod(s, 3600)
    return f"{h} h {rem // 60:02d} min"


_ZONES: dict[str, tzinfo | None] = {}


def _zone(name: str | None) -> tzinfo | None:
    if name is None:
        return None
    if name not in _ZONES:
        try:
            from zoneinfo import ZoneInfo

            _ZONES[name] = ZoneInfo(name)
        except Exception:  # unknown zone: fall back to local time, never crash a detector
            _ZONES[name] = None
    return _ZONES[name]


def fmt_clock(t: float, tz: str | None = None) -> str:
    """The wall-clock time of a data time (no clock is read: t is given)."""
    try:
        return datetime.fromtimestamp(t, _zone(tz) or None).strftime("%H:%M:%S")
    except (OverflowError, OSError, ValueError):
        return f"t={t:.0f}"
