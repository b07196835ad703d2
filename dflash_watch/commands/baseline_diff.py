"""`dflash-watch baseline diff`: what changed since the good run, most likely cause first.

The current run is profiled exactly as ``baseline save`` profiles a good
one (the same window Monitor over its logs, GPU samples and probe lines,
the warm-up left out but its speed kept, the fingerprint from ``--env`` or
the job's process), then ranked against the baseline by the pure
``detectors.diagnosis.rank_changes``. The symptoms it explains are the
alerts that fired while the run was replayed against the baseline, plus
what the profiles show (throughput 20% down, memory bands grown).

Output: one line per change, most likely first, each with its next step;
``--json``: CONTRACTS section 7, ``{"baseline": FILE, "changes": [...]}``.
Exit: 0 when the current run shows no symptom (the changes, if any, are
listed for the record), 1 when it does (throughput down, memory swinging,
padding fallen, recompiles or a crash: the thing checked is unhealthy),
2 bad input with one line on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..monitor import Monitor

from . import fail
from .baseline_env import environment_fingerprint, probe_files, replay_probe_kwargs
from .baseline_window import Window, _window_monitor, capture_window, median, replay_settings
from .common import expand_logs

DEFAULT_BASELINE = "dflash-baseline.json"


def current_profile(monitor: Monitor, fingerprint: dict[str, Any] | None) -> dict[str, Any] | None:
    """The replayed run's profile in the baseline file's shape; None without throughput."""
    from ..profile import monitor_figures

    window: Any = monitor  # baseline_window's WindowMonitor: the window's own figures, not on Monitor
    first, last = window.kept_first, window.kept_last
    if first is None or last is None:
        return None
    captured = monitor.capture_baseline(max(last - first, 0.0))
    if captured is None:
        return None
    out = captured.to_dict()
    interval = median(window.step_intervals) or median(window.step_seconds)
    if interval is not None:
        out["step_interval_s"] = interval
    out.update(monitor_figures(monitor))
    if fingerprint is not None:
        out["fingerprint"] = fingerprint
    return out


def fired(monitor: Monitor) -> set[str]:
    """Detector names of every alert that fired during the replay."""
    return {a.detector for a in monitor.alerts.history if a.state == "firing"}


def diff(args: argparse.Namespace) -> int:
    from dflash_watch.detectors.diagnosis import Symptoms, rank_changes
    from dflash_watch.detectors.diagnosis_profile import Profile

    from ..baseline import load_baseline
    from ..replay import ReplayInputError, check_inputs, replay

    config, tz, detector_config, pattern = replay_settings(args)
    path = args.baseline or config.baseline_file or DEFAULT_BASELINE
    baseline = load_baseline(path)
    logs = list(args.logs) or expand_logs(config.logs)
    if not logs:
        return fail("no logs of the current run: name them (baseline diff LOG ...) or set logs in the config")
    samples = list(args.gpu_samples)
    probes = probe_files(args, logs)
    fingerprint, _ = environment_fingerprint(args.env, config)
    probe_kwargs = replay_probe_kwargs(probes)

    def replay_window(w: Window) -> Any:
        monitor = _window_monitor(
            w, detector_config=detector_config, baseline=baseline, tz=tz, progress_pattern=pattern,
            keep_lines=0, tokens_per_step=config.run.tokens_per_step,
            tokens_per_sample=config.run.tokens_per_sample,
        )
        replay(logs, gpu_samples=samples, monitor=monitor, tz=tz, progress_pattern=pattern, **probe_kwargs)
        return monitor

    window = Window(warmup_events=detector_config.throughput_warmup_events,
                    warmup_s=detector_config.throughput_warmup_s, keep_crashes=True)
    try:
        check_inputs([*logs, *samples, *probes])
        monitor, window = capture_window(replay_window, window)
    except ReplayInputError as exc:
        return fail(str(exc))
    current = current_profile(monitor, fingerprint)
    if current is None:
        named = ", ".join(logs) if len(logs) <= 3 else f"{logs[0]} and {len(logs) - 1} more logs"
        return fail(f"no throughput in {named}: no progress line with a rate (tok/s, it/s, samples/s)")
    firing = fired(monitor)
    good = baseline.to_dict()
    if isinstance(good.get("fingerprint"), dict) and fingerprint is None:
        sys.stderr.write("dflash-watch: no environment of the current run (--env VENV, or the job running): "
                         "packages, environment and files are not compared\n")
    changes = rank_changes(good, current, firing)
    symptoms = Symptoms.of(Profile.from_mapping(good), Profile.from_mapping(current), frozenset(firing))
    unhealthy = any(getattr(symptoms, name) for name in symptoms.__slots__)
    if args.json:
        sys.stdout.write(json.dumps({"baseline": str(path), "changes": [c.to_dict() for c in changes]}) + "\n")
    else:
        sys.stdout.write("\n".join(render(changes, str(path), sorted(firing))) + "\n")
    return 1 if unhealthy else 0


def render(changes: list[Any], path: str, firing: list[str]) -> list[str]:
    """The changes for a person: one line each, most likely first, its next step under it."""
    from .baseline import _printable

    name = _printable(os.fspath(path))
    if not changes:
        return [f"no change from the good run in {name}"]
    head = f"what changed since {name}, most likely cause first"
    if firing:
        head += f" (alerts that fired: {', '.join(firing)})"
    lines = [head + ":"]
    width = len(str(len(changes)))
    for i, change in enumerate(changes, 1):
        what = _printable(change.what) + (f" (GPU {change.gpu})" if change.gpu is not None
                                          and change.what == "memory_flatness" else "")
        lines.append(f"{i:>{width}}. {what}: {_printable(change.says)}")
        lines.append(f"{'':>{width}}  next: {_printable(change.next_step)}")
    return lines
