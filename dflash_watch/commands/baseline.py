"""`dflash-watch baseline save|show|diff`: the reference profile of a good run.

``save`` replays the good run's logs (and GPU samples, probe lines)
through the same Monitor as ``replay`` and keeps what the dashboard's
``b`` key keeps (``Monitor.capture_baseline``: the median throughput, each
GPU's memory level and band), plus the spread of the rate, the step
interval, padding efficiency, recompiles and allocator retries per hour
(``baseline.profile``) and the environment's fingerprint (``--env``
or the job's process), over a window the user picks: ``--from``/``--to``,
by default the whole run after its warm-up (``baseline.window``).

A run that prints only samples/s or it/s (tqdm) still gets a baseline: its
rate is saved in ``throughput_tokens_per_s`` with ``throughput_unit``
saying which unit it is (CONTRACTS section 6 lets keys grow).

``diff`` (``baseline_diff``) ranks what changed since it; ``show``
(``baseline_show``) prints it. This module is the command face: arguments,
the replay, the messages; what a window, a profile and a healthy window
are lives in ``dflash_watch.baseline``.

Limits: only the run's first warm-up is cut (a relaunch inside the window
counts with its own warm-up).
"""

from __future__ import annotations

import argparse
import glob
import math
import os
import sys
from typing import Any

from dflash_watch.parsers.events import TOK_S

from ..baseline.window import Window, capture_window, window_monitor
from ..sources.wakeups import is_glob
from . import fail
from .baseline_env import replay_settings
from .baseline_show import rate_text, show, span_text
from .common import ClearError, SettingsError, expand_logs


def run(args: argparse.Namespace) -> int:
    from ..baseline.fingerprint import FingerprintError

    try:
        if args.baseline_command == "save":
            return _save(args)
        if args.baseline_command == "diff":
            from .baseline_diff import diff

            return diff(args)
        return show(args)
    except (*ClearError, FingerprintError) as exc:  # FingerprintError: a bad --env
        return fail(str(exc))


# -- save ------------------------------------------------------------------------


def parse_time(text: str, tz: Any, flag: str) -> float:
    """``--from``/``--to``: seconds since the epoch, or an ISO 8601 time
    (naive: in ``tz``, else local time, as log timestamps are read)."""
    from datetime import datetime

    try:
        value = float(text)
    except ValueError:
        pass
    else:
        if math.isfinite(value):
            return value
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise SettingsError(
            f"{flag} {text!r}: not a time (ISO 8601 like 2026-11-29T10:00:00, or seconds since the epoch)"
        ) from None
    if when.tzinfo is None and tz is not None:
        when = when.replace(tzinfo=tz)
    return when.timestamp()


def _expand(patterns: tuple[str, ...]) -> list[str]:
    """The config's logs: globs as ``watch`` reads them, each matching something."""
    for pattern in patterns:
        if is_glob(pattern) and not glob.glob(os.path.expanduser(pattern)):
            raise SettingsError(f"logs {pattern!r} in the config match no file")
    return expand_logs(patterns)


def _save(args: argparse.Namespace) -> int:
    from ..baseline.store import DEFAULT_PATH, Baseline, save_baseline
    from ..replay import ReplayInputError, check_inputs, replay
    from .baseline_env import replay_probe_kwargs

    config, tz, detector_config, pattern = replay_settings(args)
    logs = list(args.logs) or _expand(config.logs)
    if not logs:
        return fail("no logs to make a baseline from: name them (baseline save LOG ...) "
                    "or set logs in the config")
    samples = list(args.gpu_samples)
    if not samples:
        for candidate in (config.gpu.samples_file, config.gpu.record_file):
            if candidate and os.path.isfile(os.path.expanduser(candidate)):
                samples = [os.path.expanduser(candidate)]
                break
    start = parse_time(args.from_time, tz, "--from") if args.from_time else None
    end = parse_time(args.to_time, tz, "--to") if args.to_time else None
    if start is not None and end is not None and end <= start:
        return fail(f"--to {args.to_time} is not after --from {args.from_time}")
    from ..baseline.environment import environment_fingerprint

    fingerprint, venv = environment_fingerprint(args.env, config)
    out = args.out or config.baseline_file or DEFAULT_PATH

    window = Window(
        start=start,
        end=end,
        skip_warmup=start is None,
        warmup_events=detector_config.throughput_warmup_events,
        warmup_s=detector_config.throughput_warmup_s,
    )
    notices: list[str] = []

    def replay_window(w: Window) -> Any:
        monitor = window_monitor(
            w, detector_config=detector_config, tz=tz, progress_pattern=pattern, keep_lines=0,
            tokens_per_step=config.run.tokens_per_step, tokens_per_sample=config.run.tokens_per_sample,
        )
        notices[:] = replay(logs, gpu_samples=samples, monitor=monitor, tz=tz, progress_pattern=pattern,
                            parse_ahead=True, **probe_kwargs).notices
        return monitor

    from .common import find_probe_files

    probes = find_probe_files(getattr(args, "probe", None) or (), logs, must_match=True)
    probe_kwargs = replay_probe_kwargs(probes)
    try:
        check_inputs([*logs, *samples, *probes])
        monitor, window = capture_window(replay_window, window)
    except ReplayInputError as exc:
        return fail(str(exc))
    for notice in notices:
        sys.stderr.write(f"dflash-watch: {notice}\n")
    from ..baseline.guard import window_refusal
    from ..baseline.profile import window_profile

    first, last = monitor.kept_first, monitor.kept_last
    profile = window_profile(monitor)
    if profile is None:
        where = " between --from and --to" if start is not None or end is not None else ""
        named = ", ".join(logs) if len(logs) <= 3 else f"{logs[0]} and {len(logs) - 1} more logs"
        return fail(f"no throughput in {named}{where}: no progress line with a rate (tok/s, it/s, samples/s)")

    # A window the user picked is refused as the dashboard's `b` refuses it;
    # the default one (the whole run after warm-up) is theirs to judge, told.
    refused = window_refusal(monitor, start if start is not None else first)
    picked = start is not None or end is not None
    if refused and picked and not getattr(args, "force", False):
        return fail(f"{refused}; --force saves it anyway", code=1)
    if refused:
        why = refused.removeprefix("not saved: ")
        sys.stderr.write(f"dflash-watch: warning: saved with --force although {why}\n" if picked else
                         f"dflash-watch: warning: {why}; --from/--to pick a healthy window\n")

    profile.pop("version")
    throughput = profile.pop("throughput_tokens_per_s")
    extra = profile
    extra["window"] = {"from": first, "to": last}
    if window.unit != TOK_S:
        extra["throughput_unit"] = window.unit
    if venv is not None:
        extra["venv"] = venv
    if fingerprint is not None:
        extra["fingerprint"] = fingerprint
    extra["logs"] = [os.path.abspath(p) for p in logs]
    baseline = Baseline(throughput, extra)
    try:
        save_baseline(baseline, out)
    except OSError as exc:
        return fail(f"cannot write {out}: {exc.strerror or exc}")
    print(f"saved {out}: {rate_text(baseline)} over {span_text(first, last, tz)}")
    return 0
