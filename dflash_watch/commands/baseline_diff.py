"""`dflash-watch baseline diff`: what changed since the good run, most likely cause first.

The current run is profiled exactly as ``baseline save`` profiles a good
one (the same window Monitor over its logs, GPU samples and probe lines,
the warm-up left out but its speed kept, the fingerprint from ``--env`` or
the job's process: ``baseline.profile.window_profile``), then ranked
against the baseline by the pure ``detectors.diagnosis.rank_changes``. The symptoms it explains are the
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
from typing import Any

from ..baseline.window import Window, capture_window, window_monitor
from . import fail
from .baseline_env import replay_probe_kwargs, replay_settings
from .baseline_show import printable
from .common import expand_logs, find_probe_files


def diff(args: argparse.Namespace) -> int:
    from dflash_watch.detectors.diagnosis import rank_changes

    from ..baseline.diagnose import fired_detectors, symptomatic
    from ..baseline.environment import environment_fingerprint
    from ..baseline.profile import window_profile
    from ..baseline.store import DEFAULT_PATH, load_baseline
    from ..replay import ReplayInputError, check_inputs, replay

    config, tz, detector_config, pattern = replay_settings(args)
    path = args.baseline or config.baseline_file or DEFAULT_PATH
    baseline = load_baseline(path)
    logs = list(args.logs) or expand_logs(config.logs)
    if not logs:
        return fail("no logs of the current run: name them (baseline diff LOG ...) or set logs in the config")
    samples = list(args.gpu_samples)
    probes = find_probe_files(getattr(args, "probe", None) or (), logs, must_match=True)
    fingerprint, _ = environment_fingerprint(args.env, config)
    probe_kwargs = replay_probe_kwargs(probes)

    def replay_window(w: Window) -> Any:
        monitor = window_monitor(
            w, detector_config=detector_config, baseline=baseline, tz=tz, progress_pattern=pattern,
            keep_lines=0, tokens_per_step=config.run.tokens_per_step,
            tokens_per_sample=config.run.tokens_per_sample,
        )
        replay(logs, gpu_samples=samples, monitor=monitor, tz=tz, progress_pattern=pattern, parse_ahead=True,
               **probe_kwargs)
        return monitor

    window = Window(warmup_events=detector_config.throughput_warmup_events,
                    warmup_s=detector_config.throughput_warmup_s, keep_crashes=True)
    try:
        check_inputs([*logs, *samples, *probes])
        monitor, window = capture_window(replay_window, window, "it is compared whole")
    except ReplayInputError as exc:
        return fail(str(exc))
    current = window_profile(monitor, fingerprint)
    if current is None:
        named = ", ".join(logs) if len(logs) <= 3 else f"{logs[0]} and {len(logs) - 1} more logs"
        return fail(f"no throughput in {named}: no progress line with a rate (tok/s, it/s, samples/s)")
    firing = fired_detectors(monitor)
    good = baseline.to_dict()
    if isinstance(good.get("fingerprint"), dict) and fingerprint is None:
        sys.stderr.write("dflash-watch: no environment of the current run (--env VENV, or the job running): "
                         "packages, environment and files are not compared\n")
    changes = rank_changes(good, current, firing)
    unhealthy = symptomatic(good, current, firing)
    if args.json:
        sys.stdout.write(json.dumps({"baseline": str(path), "changes": [c.to_dict() for c in changes]}) + "\n")
    else:
        sys.stdout.write("\n".join(render(changes, str(path), sorted(firing))) + "\n")
    return 1 if unhealthy else 0


def render(changes: list[Any], path: str, firing: list[str]) -> list[str]:
    """The changes for a person: one line each, most likely first, its next step under it."""
    name = printable(os.fspath(path))
    if not changes:
        return [f"no change from the good run in {name}"]
    head = f"what changed since {name}, most likely cause first"
    if firing:
        head += f" (alerts that fired: {', '.join(firing)})"
    lines = [head + ":"]
    width = len(str(len(changes)))
    for i, change in enumerate(changes, 1):
        what = printable(change.what) + (f" (GPU {change.gpu})" if change.gpu is not None
                                          and change.what == "memory_flatness" else "")
        lines.append(f"{i:>{width}}. {what}: {printable(change.says)}")
        lines.append(f"{'':>{width}}  next: {printable(change.next_step)}")
    return lines
