"""Every detector threshold in one frozen object, and how alerts show numbers.

One place for the numbers means a config file's ``[detectors]`` table can
override any of them by field name, and a test can read the defaults it
checks the budgets against. Each threshold is declared once, here: its
default, its valid values and the line ``dflash-watch init`` prints for it
(``knob``). The shell (``dflash_watch.config``) reads the declaration to
check a file and write the template; the core imports nothing of it. The formatting helpers live here too because
they are the other half of "what the detectors say": alert messages are
read by an engineer at 3 a.m., so they carry units, not raw floats.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from typing import Any

from ..parsers.events import TOK_S

GIB = float(1 << 30)
MIB = float(1 << 20)

# Valid values of a threshold, spelled as the template shows them; the shell
# reads them with ``dflash_watch.checks.Range.parse`` (kept as words so that
# the pure core needs nothing of the config checker).
POSITIVE = "> 0"
NON_NEGATIVE = ">= 0"
FRACTION = "(0, 1)"
SHARE = "(0, 1]"
UNIT = "[0, 1]"
COUNT = "whole >= 1"


def knob(default: float, valid: str, doc: str) -> Any:
    """A ``[detectors]`` key: its default, valid values and one line of doc.

    A field declared without ``knob`` is no ``[detectors]`` key (``tz``)."""
    return field(default=default, metadata={"valid": valid, "doc": doc})


@dataclass(frozen=True, slots=True)
class DetectorConfig:
    # -- memory, shared by the three memory detectors ----------------------
    # "Flat" means the memory stays inside a band this wide: the larger of an
    # absolute floor and a fraction of the GPU's total memory.
    mem_flat_band_gib: float = knob(0.5, POSITIVE, "memory counts as flat inside this band (GiB) ...")
    mem_flat_band_frac: float = knob(0.01, FRACTION,
        "... or this share of the GPU's memory, whichever is larger")
    # Warm-up ends once memory has stayed flat this long...
    mem_settle_s: float = knob(60.0, POSITIVE, "warm-up ends once memory stayed flat this long")
    # ...or, for a GPU that never settles, this long after the job appeared.
    mem_warmup_max_s: float = knob(900.0, POSITIVE, "or this long after the job appeared, settled or not")
    # Below this much used memory the GPU runs no job. Falling to it is a
    # relaunch (a new warm-up follows) only when the job's processes changed
    # (GpuSample.processes) or, where no process list is sampled, when no
    # progress line came while memory sat there: a drafter whose memory drops
    # to near zero between steps is swinging, not relaunching.
    mem_idle_gib: float = knob(1.5, NON_NEGATIVE,
        "below this (GiB) a GPU runs no job; falling to it is a relaunch")
    # The flat band also follows the run's own noise: at least this many
    # times the sample-to-sample noise (a robust sigma of the differences),
    # so that a small card whose noise exceeds the fixed band stays flat.
    # 0 turns it off (the fixed band alone).
    mem_noise_band_factor: float = knob(8.0, NON_NEGATIVE,
        "the flat band is at least this many times the noise (0: off)")
    # Without a process list, an idle stretch that lasts this long with no
    # progress line in it is a relaunch even before memory comes back.
    mem_relaunch_idle_s: float = knob(60.0, POSITIVE,
        "idle this long without progress is a relaunch (no process list)")

    # -- memory_volatility ---------------------------------------------------
    # Fires when memory turned around (up then down, or down then up, each
    # leg wider than the flat band) this many times within the window.
    volatility_min_turns: int = knob(4, COUNT, "memory_volatility: this many up/down turns ...")
    # 240 s: four turns of a square wave with a 2-minute period span 180 s.
    volatility_window_s: float = knob(240.0, POSITIVE, "... within this many seconds")
    # Resolves when memory has been flat again for this long.
    volatility_resolve_s: float = knob(180.0, POSITIVE, "resolved after memory is flat again this long")

    # -- memory_growth -------------------------------------------------------
    growth_rate_gib_per_h: float = knob(2.0, POSITIVE,
        "memory_growth: a steady climb at least this fast (GiB/h)")
    # The fitted slope may fall this fraction short of the rate and still
    # count: a leak at exactly the rate must not be a coin flip.
    growth_rate_tolerance: float = knob(0.1, "[0, 1)", "the slope may fall this share short")
    growth_window_s: float = knob(1200.0, POSITIVE, "the climb is fitted over this many seconds")
    growth_bucket_s: float = knob(60.0, POSITIVE, "in buckets of this many seconds")
    growth_min_r2: float = knob(0.6, UNIT, "the fit must explain at least this share of the variance (R^2)")
    # A rise where one bucket-to-bucket jump carries more than this share of
    # the net rise is a step to a new level, not a leak.
    growth_max_step_share: float = knob(0.5, SHARE,
        "a rise this share of which is one jump is a step, not a leak")
    growth_resolve_gib_per_h: float = knob(0.5, NON_NEGATIVE, "resolved once the climb is below this (GiB/h)")
    # A bucket-to-bucket jump above this restarts the fit window: a warm-up
    # stair or a new level, not a leak (even 20 GiB/h is 0.33 GiB a minute).
    growth_reset_jump_gib: float = knob(2.0, POSITIVE,
        "a jump above this (GiB) between buckets restarts the fit")

    # -- memory_pressure -----------------------------------------------------
    pressure_frac: float = knob(0.97, SHARE, "memory_pressure: used memory at this share of the total ...")
    pressure_resolve_frac: float = knob(0.94, SHARE, "resolved below this share")
    pressure_sustain_s: float = knob(10.0, NON_NEGATIVE, "... for this many seconds")

    # -- throughput_drop -----------------------------------------------------
    throughput_drop_frac: float = knob(0.30, FRACTION,
        "throughput_drop: the rate this share below the baseline ...")
    # The smoothed tokens/s must stay below (1 - drop_frac) x baseline this
    # long: dips shorter than this (checkpoint saves, evals) never fire.
    throughput_sustain_s: float = knob(90.0, NON_NEGATIVE,
        "... for this long (checkpoints, evals are shorter)")
    # Rolling median over this many seconds (and at least 3 reports).
    throughput_smooth_s: float = knob(20.0, POSITIVE, "rolling median over this many seconds")
    # Recovered once the smoothed value is back above this fraction of the
    # baseline for recover_s.
    throughput_recover_frac: float = knob(0.85, SHARE, "recovered above this share of the baseline ...")
    throughput_recover_s: float = knob(30.0, NON_NEGATIVE, "... for this many seconds")
    # After a (re)start, the first reports and seconds are compile/warm-up.
    throughput_warmup_events: int = knob(5, "whole >= 0", "the first reports after a start ...")
    throughput_warmup_s: float = knob(60.0, NON_NEGATIVE, "... and the first seconds are warm-up")
    # Without a given baseline, the median of this long after warm-up.
    throughput_learn_s: float = knob(300.0, POSITIVE,
        "without a baseline file: the median of this long after warm-up")
    # A silence this long, or the step going backwards, is a relaunch.
    throughput_restart_gap_s: float = knob(120.0, POSITIVE,
        "a silence this long (or a step back) is a relaunch ...")
    # ...and at least this many of the run's own report intervals: a run
    # that reports every 300 s is not relaunched at every report. The
    # learning (at least 5 reports), smoothing (at least 3 reports) and
    # sustain (at least 2 low reports) budgets scale with the interval too.
    throughput_restart_gap_intervals: float = knob(5.0, ">= 1", "... and this many report intervals")
    # A learned baseline rises to a faster steady phase: the smoothed rate
    # stayed this fraction above it for throughput_learn_s (and 5 reports).
    throughput_rise_frac: float = knob(0.15, POSITIVE,
        "a learned baseline rises to a phase this share faster")
    # Times going back by less than this are clocks of several ranks
    # interleaving (jitter); more is a backward clock jump (NTP, DST),
    # which the detectors step over instead of reading it as a relaunch.
    clock_jitter_s: float = knob(2.0, NON_NEGATIVE, "time going back less than this is ranks interleaving")
    # The same step reported again within this long is another rank's copy.
    duplicate_step_s: float = knob(30.0, NON_NEGATIVE,
        "the same step again within this long is another rank's copy")

    # -- stall -------------------------------------------------------------
    stall_min_s: float = knob(120.0, POSITIVE, "stall: no progress for at least this many seconds ...")
    stall_factor: float = knob(5.0, "> 1", "... and this many times the usual step interval")
    # Before the run has shown one interval between progress lines its
    # cadence is unknown: the silence limit is this (a run logging every
    # 150 or 300 s must not stall between its first two lines).
    stall_first_s: float = knob(600.0, POSITIVE,
        "before the run showed one interval, the silence limit is this")

    # -- crash / fx_tracing ---------------------------------------------------
    # Copies and consequences of one crash (other ranks, torchrun's report)
    # this far apart are one incident: ranks' copies arrive up to a minute apart.
    crash_dedupe_s: float = knob(60.0, NON_NEGATIVE, "the same crash again within this long is one alert")
    # How long (data time) a crash alert waits for the other ranks' copies
    # before it is sent, so that its evidence names every rank. Live, a quiet
    # log ends the wait at once.
    crash_hold_s: float = knob(5.0, NON_NEGATIVE, "a crash waits this long for the other ranks' copies")
    # A traceback followed within this long (data time) by two later steps
    # of its stream was caught and survived: a warning, not a crash. Live,
    # it is also how long past the log going quiet the verdict waits.
    crash_survive_s: float = knob(0.4, NON_NEGATIVE,
        "a traceback followed this soon by two later steps was survived")
    # A traceback the run already survived gets this long for its progress.
    crash_caught_window_s: float = knob(300.0, NON_NEGATIVE,
        "a traceback survived before gets this long for its progress")
    # A crash read this long before the job's exit is the exit's reason.
    exit_crash_window_s: float = knob(1800.0, POSITIVE,
        "a crash this long before the job's exit is its reason")
    crash_traceback_lines: int = knob(40, COUNT, "traceback lines kept as evidence")
    crash_frames: int = knob(5, COUNT, "stack frames named in the message")

    # -- recompile -------------------------------------------------------------
    # A storm: this many recompiles of one function within the window.
    recompile_storm_count: int = knob(8, COUNT,
        "recompile: a storm is this many recompiles of one function ...")
    recompile_storm_window_s: float = knob(600.0, POSITIVE, "... within this many seconds")
    recompile_quiet_s: float = knob(600.0, POSITIVE, "resolved after this long without one")

    # -- recompile, kind "rate": recompiles per hour after warm-up ------------
    # The first minutes of a run (and of each relaunch) compile: recompiles
    # then are the warm-up's, not a sign. The rate counts after this long.
    recompile_rate_warmup_s: float = knob(900.0, NON_NEGATIVE,
        "recompile rate: the first seconds of a (re)start are warm-up")
    # Recompiles per hour are counted over this window (on the busiest rank).
    recompile_rate_window_s: float = knob(1800.0, POSITIVE, "... counted over this many seconds")
    # Without a baseline: fire at this many recompiles per hour or more (one
    # every two minutes: a steady run after warm-up recompiles next to never,
    # and without a reference only a clear rate is worth a page).
    recompile_rate_per_hour: float = knob(30.0, POSITIVE,
        "... fires at this many per hour without a baseline")
    # With a baseline: fire above this many times the good run's rate, and
    # never below recompile_rate_min_per_hour (a good run at 0/h is not
    # judged "rising" for one recompile).
    recompile_rate_factor: float = knob(3.0, ">= 1", "... or this many times the good run's rate")
    recompile_rate_min_per_hour: float = knob(4.0, NON_NEGATIVE, "... and at least this many per hour")
    # And never on fewer recompiles than this in the window.
    recompile_rate_min_count: int = knob(3, COUNT, "... on at least this many recompiles in the window")
    # Resolves once the rate is back below this fraction of the threshold.
    recompile_rate_resolve_frac: float = knob(0.5, FRACTION, "... resolved below this share of the threshold")

    # -- padding -----------------------------------------------------------------
    # Efficiency = real tokens / padded tokens, token-weighted over all ranks
    # across this window (probe lines), or the mean of the log's reports.
    padding_window_s: float = knob(120.0, POSITIVE,
        "padding: efficiency over this many seconds of batches ...")
    # ...and over at least this many reports: a log that prints it every
    # five minutes is judged on its last few, not on one.
    padding_min_samples: int = knob(5, COUNT, "... and at least this many reports")
    # With a baseline: fire when the efficiency is this much (absolute,
    # 0..1) below the good run's.
    padding_margin: float = knob(0.10, FRACTION,
        "fires this far (0..1, absolute) below the good run's efficiency")
    # Without one: fire below this floor.
    padding_floor: float = knob(0.70, FRACTION, "... or, without a baseline, below this efficiency")
    # Resolves once the efficiency is this much above the firing threshold
    # again (hysteresis: a value hovering at the line fires once).
    padding_hysteresis: float = knob(0.05, UNIT, "resolved this far above the firing line again")

    # -- alloc_thrash: the CUDA caching allocator retrying (probe lines) ------
    # Allocator retries (cudaMalloc failed, cache flushed, retried) are
    # counted over this window, per rank; the busiest rank is judged.
    alloc_thrash_window_s: float = knob(600.0, POSITIVE,
        "alloc_thrash: CUDA allocator retries counted over this window")
    # Fire at this many retries per hour or more...
    alloc_thrash_per_hour: float = knob(30.0, POSITIVE,
        "... fires at this many retries per hour (busiest rank)")
    # ...and at least this many in the window (one retry is not a thrash).
    alloc_thrash_min_retries: int = knob(5, COUNT, "... and at least this many in the window")
    # With a baseline: also above this many times the good run's rate.
    alloc_thrash_baseline_factor: float = knob(3.0, ">= 1",
        "... and above this many times the good run's rate")

    # Clock times in messages; None is the local zone. Alert times stay epoch.
    tz: str | None = None

    # -- stall phases (issue 19, stall helper) -------------------------------
    # An evaluation ("***** Running Evaluation *****", eval bars, Lightning's
    # validation bar) prints no training step: the silence allowed grows by
    # this much while one runs. A real HF eval takes minutes (a generation
    # eval on a large set, tens of minutes).
    stall_eval_allowance_s: float = knob(1200.0, NON_NEGATIVE,
        "stall: an evaluation may add this much silence")
    # A checkpoint save ("Saving model checkpoint to", torch.distributed.
    # checkpoint): a 70B model with its optimizer state is ~1 TB, 10-20 min
    # to a shared file system at 1-2 GB/s.
    stall_checkpoint_allowance_s: float = knob(1800.0, NON_NEGATIVE,
        "stall: a checkpoint save may add this much silence")

    # -- loss (issue 19, loss helper) ------------------------------------------
    # nan: resolved once this many reports in a row are finite again (loss,
    # grad norm, no nan iterations). bf16 NaN poisons the weights and every
    # later report stays NaN; HF's nan filter logs a finite average (even
    # 0.0) while grad_norm stays nan: only a run of clean reports is back.
    loss_nan_resolve_reports: int = knob(10, COUNT,
        "loss nan: resolved after this many finite reports in a row")
    # spike: the robust level is median + k x sigma (MAD) over this many
    # reports (judged once there are loss_spike_min_reports)...
    loss_spike_window: int = knob(50, COUNT,
        "loss spike: the robust level is taken over this many reports ...")
    loss_spike_min_reports: int = knob(20, COUNT, "... once there are at least this many")
    loss_spike_k: float = knob(8.0, POSITIVE,
        "... a spike is this many robust sigmas (MAD) above the median ...")
    # ...and never less than this share above the median, nor this much
    # (absolute) above it: a flat loss (MAD ~ 0) does not fire on noise.
    loss_spike_min_rel: float = knob(0.5, POSITIVE, "... and at least this share above it ...")
    loss_spike_min_abs: float = knob(0.05, NON_NEGATIVE, "... and at least this much (absolute) above it")
    # A per-step loss of a small batch has outliers: one report above the
    # level, the next back under (about one in 3000 steps at batch 8, a
    # false warning every hour at 1 step/s). A spike fires on the second
    # report in a row above its level, at once three times as far above
    # the median as the level is, or, when the next report is back under,
    # if that one was no single step's loss (the next report's step is not
    # the one after it: a report of many steps, or of none known).
    loss_spike_confirm_reports: int = knob(2, COUNT,
        "... fired once this many reports in a row are above the level (or one far above it)")
    # Resolved after this many reports in a row back under the level.
    loss_spike_resolve_reports: int = knob(2, COUNT, "resolved after this many reports back under the level")
    # Before there are loss_spike_min_reports, a loss this many times the
    # highest one so far is a spike (Megatron's 12.1 -> 26.5 at iteration 30
    # of a run logged every 10): an early blow-up must not wait for a level.
    loss_spike_early_factor: float = knob(2.0, "> 1",
        "before that many reports: a loss this many times the highest so far")
    # divergence: the smoothed loss (median of the last loss_smooth_reports)
    # stays this share above its minimum over the last loss_divergence_window_s
    # for loss_divergence_s (data time) and loss_divergence_min_reports.
    loss_smooth_reports: int = knob(10, COUNT,
        "loss divergence: the loss is smoothed over this many reports ...")
    loss_divergence_margin: float = knob(0.3, POSITIVE, "... fires this share above its recent minimum ...")
    loss_divergence_window_s: float = knob(3600.0, POSITIVE, "... the minimum of this many seconds ...")
    loss_divergence_s: float = knob(300.0, NON_NEGATIVE, "... sustained this many seconds ...")
    loss_divergence_min_reports: int = knob(5, COUNT, "... and this many reports")
    # A divergence whose smoothed loss reaches this many times its minimum
    # is critical (a loss of 0.2 climbing to 76 under a runaway learning
    # rate stayed one warning): the run is lost, as with a NaN.
    loss_divergence_critical_factor: float = knob(10.0, "> 1",
        "... critical once the smoothed loss is this many times that minimum")
    # overflow: skipped steps on at least this share of the last
    # loss_overflow_window iterations (fp16 warm-up halves the scale ~16
    # times from 2^32 at the start: a third of 50 steps, no storm)...
    loss_overflow_window: int = knob(50, COUNT,
        "loss overflow: skipped steps counted over this many iterations ...")
    loss_overflow_frac: float = knob(0.5, SHARE, "... a storm at this share of them skipped")
    # ...or the loss scale fell to this floor from above it (bf16 runs print
    # a constant "loss scale: 1.0": that never fell, it is no storm).
    loss_overflow_scale_floor: float = knob(1.0, NON_NEGATIVE,
        "... or the fp16 loss scale fallen to this floor")

    # -- straggler (issue 19, straggler helper) --------------------------------
    # Per-rank step/compute/wait seconds are medians over this window of data
    # time, and a rank is judged on at least straggler_min_samples of them...
    straggler_window_s: float = knob(60.0, POSITIVE,
        "straggler: per-rank seconds are medians over this window")
    straggler_min_samples: int = knob(5, COUNT, "... of at least this many reports per rank")
    # ...after its first this-many seconds (compile, warm-up, the loader
    # filling: rank 0 is often slower at the start).
    straggler_warmup_s: float = knob(60.0, NON_NEGATIVE, "... after each rank's first this-many seconds")
    # slow: the rank's compute per step (else its step time, where ranks do
    # not wait for each other) is this many times the median of the other
    # ranks' and at least straggler_slow_min_excess_s more...
    straggler_slow_factor: float = knob(1.3, ">= 1",
        "straggler slow: compute this many times the others' ...")
    straggler_slow_min_excess_s: float = knob(0.02, NON_NEGATIVE,
        "... and at least this many seconds more ...")
    # ...for this long (minutes: a slow minute is a hiccup, not a straggler).
    straggler_slow_for_s: float = knob(120.0, NON_NEGATIVE, "... for this long")
    # Resolved once its ratio is back under this factor.
    straggler_resolve_factor: float = knob(1.15, ">= 1", "resolved once its ratio is back under this")
    # hung: no rank stepped for max(straggler_hung_min_s, straggler_hung_factor
    # x the usual step interval) while the others wait (their heartbeats say
    # where, or they are ahead); a rank silent that long (its own cadence)
    # while the others step on has stopped reporting.
    straggler_hung_min_s: float = knob(60.0, POSITIVE, "straggler hung: no step for at least this long ...")
    straggler_hung_factor: float = knob(5.0, POSITIVE,
        "... and this many usual step intervals, the others waiting")
    # An evaluation or a checkpoint save (on rank 0 only, the others waiting
    # in a barrier) is no hang unless it lasts longer than this.
    straggler_phase_allowance_s: float = knob(1800.0, NON_NEGATIVE,
        "an eval or a save may hold the others this long")
    # GPUs per node: > 0 names a rank's GPU as rank % this (LOCAL_RANK = GPU
    # index, one process per GPU); 0: the GPU is not named.
    straggler_gpus_per_node: int = knob(0, "whole >= 0",
        "> 0: a rank's GPU is rank % this (LOCAL_RANK = GPU)")

    # -- gpu_health (issue 19, gpu helper) ---------------------------------------
    # xid: the same Xid code on a GPU again within this long is the same
    # episode (one alert, not one per sample); the xid alert resolves once
    # the GPU went this long without any Xid.
    gpu_xid_repeat_s: float = knob(600.0, POSITIVE,
        "gpu_health xid: the same code again within this long is one episode")
    # ecc: resolved once the uncorrected count and the retired pages stopped
    # rising this long and no row remap / page retirement is pending.
    gpu_ecc_quiet_s: float = knob(600.0, POSITIVE,
        "gpu_health ecc: resolved after no rise (and nothing pending) this long")
    # thermal / power: over this window of samples (and only once the GPU was
    # watched this long), the reason was active in at least gpu_throttle_frac
    # of the samples AND the median SM clock was at most gpu_clock_low_frac of
    # its max. A GPU at its power cap under full load runs at 85-100% of its
    # max clock: normal, no alert; a brief cap is outvoted by the window.
    gpu_throttle_window_s: float = knob(120.0, POSITIVE,
        "gpu_health thermal/power: judged over this window of samples ...")
    gpu_throttle_frac: float = knob(0.8, SHARE, "... the reason active in at least this share of them ...")
    gpu_clock_low_frac: float = knob(0.75, SHARE, "... and the median SM clock at most this share of its max")
    # pcie: the link below its max width (always judged) or generation (judged
    # only at or above gpu_pcie_busy_util: idle GPUs drop the generation to
    # save power) for this long; resolved after gpu_pcie_resolve_s at full link.
    gpu_pcie_sustain_s: float = knob(120.0, POSITIVE,
        "gpu_health pcie: link below its max width/gen this long")
    gpu_pcie_busy_util: float = knob(0.3, UNIT,
        "... the generation judged only at this utilisation (idle GPUs downshift)")
    gpu_pcie_resolve_s: float = knob(60.0, NON_NEGATIVE, "resolved after this long at the full link")


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
