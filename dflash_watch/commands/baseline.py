"""`dflash-watch baseline save|show|diff`: the reference profile of a good run.

``save`` replays the good run's logs (and GPU samples, probe lines)
through the same Monitor as ``replay`` and keeps what the dashboard's
``b`` key keeps (``Monitor.capture_baseline``: the median throughput, each
GPU's memory level and band), plus the spread of the rate, the step
interval, padding efficiency, recompiles and allocator retries per hour
(``dflash_watch.profile``) and the environment's fingerprint (``--env``
or the job's process), over a window the user picks: ``--from``/``--to``,
by default the whole run after its warm-up (``baseline_window``).

A run that prints only samples/s or it/s (tqdm) still gets a baseline: its
rate is saved in ``throughput_tokens_per_s`` with ``throughput_unit``
saying which unit it is (CONTRACTS section 6 lets keys grow).

``diff`` (``baseline_diff``) ranks what changed since it.

Limits: only the run's first warm-up is cut (a relaunch inside the window
counts with its own warm-up).
"""

from __future__ import annotations

import argparse
import glob
import math
import os
import sys
from typing import Any, TypeGuard

from dflash_watch.parsers.events import TOK_S

from . import fail
from .baseline_window import Window, _window_monitor, capture_window, median, replay_settings
from .common import ClearError, SettingsError, expand_logs, parse_tz

__all__ = ["Window", "_window_monitor", "capture_window", "describe", "describe_rows", "run", "show_json"]

DEFAULT_OUT = "dflash-baseline.json"


def run(args: argparse.Namespace) -> int:
    try:
        if args.baseline_command == "save":
            return _save(args)
        if args.baseline_command == "diff":
            from .baseline_diff import diff

            return diff(args)
        return _show(args)
    except ClearError as exc:
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
        if glob.has_magic(pattern) and not glob.glob(os.path.expanduser(pattern)):
            raise SettingsError(f"logs {pattern!r} in the config match no file")
    return expand_logs(patterns)


def _save(args: argparse.Namespace) -> int:
    from ..baseline import Baseline, save_baseline
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
    from .baseline_env import environment_fingerprint

    fingerprint, venv = environment_fingerprint(args.env, config)
    out = args.out or config.baseline_file or DEFAULT_OUT

    window = Window(
        start=start,
        end=end,
        skip_warmup=start is None,
        warmup_events=detector_config.throughput_warmup_events,
        warmup_s=detector_config.throughput_warmup_s,
    )
    notices: list[str] = []

    def replay_window(w: Window) -> Any:
        monitor = _window_monitor(
            w, detector_config=detector_config, tz=tz, progress_pattern=pattern, keep_lines=0,
            tokens_per_step=config.run.tokens_per_step, tokens_per_sample=config.run.tokens_per_sample,
        )
        notices[:] = replay(logs, gpu_samples=samples, monitor=monitor, tz=tz, progress_pattern=pattern,
                            **probe_kwargs).notices
        return monitor

    from .baseline_env import probe_files

    probes = probe_files(args, logs)
    probe_kwargs = replay_probe_kwargs(probes)
    try:
        check_inputs([*logs, *samples, *probes])
        monitor, window = capture_window(replay_window, window)
    except ReplayInputError as exc:
        return fail(str(exc))
    for notice in notices:
        sys.stderr.write(f"dflash-watch: {notice}\n")
    first, last = monitor.kept_first, monitor.kept_last
    captured = None
    if first is not None and last is not None:
        captured = monitor.capture_baseline(max(last - first, 0.0))
    if captured is None:
        where = " between --from and --to" if start is not None or end is not None else ""
        named = ", ".join(logs) if len(logs) <= 3 else f"{logs[0]} and {len(logs) - 1} more logs"
        return fail(f"no throughput in {named}{where}: no progress line with a rate (tok/s, it/s, samples/s)")

    # A window the user picked is refused as the dashboard's `b` refuses it;
    # the default one (the whole run after warm-up) is theirs to judge, told.
    refused = _refusal(monitor, start if start is not None else first)
    picked = start is not None or end is not None
    if refused and picked and not getattr(args, "force", False):
        return fail(f"{refused}; --force saves it anyway", code=1)
    if refused:
        why = refused.removeprefix("not saved: ")
        sys.stderr.write(f"dflash-watch: warning: saved with --force although {why}\n" if picked else
                         f"dflash-watch: warning: {why}; --from/--to pick a healthy window\n")

    extra = dict(captured.extra)
    extra["window"] = {"from": first, "to": last}
    if window.unit != TOK_S:
        extra["throughput_unit"] = window.unit
    interval = median(monitor.step_intervals) or median(monitor.step_seconds)
    if interval is not None:
        extra["step_interval_s"] = interval
    from ..profile import monitor_figures

    extra.update(monitor_figures(monitor))
    if venv is not None:
        extra["venv"] = venv
    if fingerprint is not None:
        extra["fingerprint"] = fingerprint
    extra["logs"] = [os.path.abspath(p) for p in logs]
    baseline = Baseline(captured.throughput_tokens_per_s, extra)
    try:
        save_baseline(baseline, out)
    except OSError as exc:
        return fail(f"cannot write {out}: {exc.strerror or exc}")
    print(f"saved {out}: {_rate(baseline)} over {_span(first, last, tz)}")
    return 0


def _refusal(monitor: Any, start: float | None) -> str | None:
    """Why the window must not become the baseline, by the dashboard's rule
    for its `b` key (``tui.baseline_guard.refusal``: an alert fired in it,
    a crash, the job ended in it), or None. The window monitor saw only the
    window, so all it fired counts. The rule's unit check is left out: a
    saved file records a rate in another unit as ``throughput_unit``."""
    from types import SimpleNamespace

    from ..tui.baseline_guard import refusal

    now = monitor.now
    if now is None:
        return None
    view = SimpleNamespace(alerts=monitor.alerts, now=now, job_state=None, last_exit=monitor.last_exit,
                           throughput_unit=TOK_S, lock=monitor.lock)
    span = now - start if start is not None and start < now else 0.0
    return refusal(view, window_s=60.0 * max(1, math.ceil(span / 60.0)))  # "in the last 8 minutes"


# -- show ------------------------------------------------------------------------


def _show(args: argparse.Namespace) -> int:
    from ..baseline import load_baseline

    path = args.path
    if path is None:
        from ..config import load_config

        path = load_config(args.config).baseline_file or DEFAULT_OUT
    tz = parse_tz(args.tz)
    baseline = load_baseline(path)
    if getattr(args, "json", False):
        import json

        # ASCII: text from the file never reaches a terminal raw.
        sys.stdout.write(json.dumps(show_json(baseline, path, tz)) + "\n")
        return 0
    sys.stdout.write("\n".join(describe(baseline, path, tz)) + "\n")
    return 0


def show_json(baseline: Any, path: str, tz: Any = None) -> dict[str, Any]:
    """``baseline show --json``: the file's object as saved (``file``) and
    what show derives from it: the rate's unit, the tokens/s reference
    (null when the rate is in another unit), the window in seconds since
    the epoch (null when the file has none) and the rows a person sees."""
    return {"baseline": str(path), "file": baseline.to_dict(), "unit": baseline.unit,
            "tokens_per_s": baseline.tokens_per_s, "window": _window(baseline.extra),
            "rows": [[name, value] for name, value in describe_rows(baseline, tz)]}


def _window(extra: dict[str, Any]) -> dict[str, float] | None:
    """The saved window, from ``window`` or (the dashboard's ``b`` key) the
    ``window_s`` before ``captured_at``; as ``describe_rows`` reads it."""
    window = extra.get("window")
    if isinstance(window, dict) and _is_num(window.get("from")) and _is_num(window.get("to")):
        return {"from": window["from"], "to": window["to"]}
    if window is None and _is_num(extra.get("window_s")) and _is_num(extra.get("captured_at")):
        return {"from": extra["captured_at"] - extra["window_s"], "to": extra["captured_at"]}
    return None


def describe(baseline: Any, path: str, tz: Any = None) -> list[str]:
    """A baseline as lines for a person, under its file name."""
    rows = describe_rows(baseline, tz)
    width = max(len(name) for name, _ in rows)
    return [f"baseline {_printable(str(path))}", *(f"  {name:<{width}}  {value}" for name, value in rows)]


def describe_rows(baseline: Any, tz: Any = None) -> list[tuple[str, str]]:
    """A baseline as (name, value) rows; unexpected shapes are shown raw,
    never a traceback (the file may come from a newer version)."""
    import json

    extra = dict(baseline.extra)
    rows: list[tuple[str, str]] = [("throughput", _rate(baseline))]
    window = extra.pop("window", None)
    if isinstance(window, dict) and _is_num(window.get("from")) and _is_num(window.get("to")):
        rows.append(("window", _span(window["from"], window["to"], tz)))
    elif window is not None:
        extra["window"] = window
    elif _is_num(extra.get("window_s")) and _is_num(extra.get("captured_at")):
        # Saved by the dashboard's `b` key: the last window_s before it was pressed.
        rows.append(("window", _span(extra["captured_at"] - extra["window_s"], extra["captured_at"], tz)))
    interval = extra.pop("step_interval_s", None)
    if _is_num(interval):
        rows.append(("step interval", f"{interval:.3g} s"))
    elif interval is not None:
        extra["step_interval_s"] = interval
    rows.extend(_figure_rows(extra, baseline))
    extra.pop("throughput_unit", None)
    extra.pop("window_s", None)
    memory = extra.pop("gpu_memory", None)
    gpu_rows: list[tuple[str, str]] = []
    if isinstance(memory, dict):
        from dflash_watch.detectors.config import fmt_gib

        for gpu, m in sorted(memory.items(), key=lambda kv: (len(str(kv[0])), str(kv[0]))):
            if isinstance(m, dict) and _is_num(m.get("level_bytes")) and _is_num(m.get("band_bytes")):
                gpu_rows.append((f"GPU {_printable(str(gpu))} memory",
                                 f"{fmt_gib(m['level_bytes'])}, band {fmt_gib(m['band_bytes'], 2)}"))
            else:
                gpu_rows.append((f"GPU {_printable(str(gpu))} memory", _printable(json.dumps(m))))
    elif memory is not None:
        extra["gpu_memory"] = memory
    venv = extra.pop("venv", None)
    if isinstance(venv, str):
        rows.append(("environment", _printable(venv)))
    elif venv is not None:
        extra["venv"] = venv
    logs = extra.pop("logs", None)
    if isinstance(logs, list) and all(isinstance(x, str) for x in logs):
        rows.append(("logs", _printable(", ".join(logs))))
    elif logs is not None:
        extra["logs"] = logs
    extra.pop("captured_at", None)
    rows.extend(gpu_rows)
    rows.extend(_fingerprint_rows(extra))
    rows.extend((_printable(str(k)), _printable(json.dumps(v))) for k, v in sorted(extra.items()))
    return rows


def _figure_rows(extra: dict[str, Any], baseline: Any) -> list[tuple[str, str]]:
    """The profile's figures (popped from ``extra`` when they are shown)."""
    from dflash_watch.detectors.config import fmt_rate

    unit = baseline.extra.get("throughput_unit", TOK_S)
    unit = unit if isinstance(unit, str) else TOK_S
    rows = []
    p10, p90 = extra.get("throughput_p10"), extra.get("throughput_p90")
    if _is_num(p10) and _is_num(p90):
        rows.append(("p10 to p90", f"{fmt_rate(p10, unit)} to {fmt_rate(p90, unit)}"))
        del extra["throughput_p10"], extra["throughput_p90"]
    shown = (
        ("warmup_throughput_tokens_per_s", "warm-up rate", lambda v: fmt_rate(v, unit)),
        ("padding_efficiency", "padding", lambda v: f"{v:.0%} efficiency"),
        ("recompiles_per_hour", "recompiles", lambda v: f"{v:.3g}/h"),
        ("alloc_retries_per_hour", "alloc retries", lambda v: f"{v:.3g}/h"),
    )
    for key, name, fmt in shown:
        if _is_num(extra.get(key)):
            rows.append((name, fmt(extra.pop(key))))
    return rows


def _fingerprint_rows(extra: dict[str, Any]) -> list[tuple[str, str]]:
    """The environment fingerprint, a row per fact; a shape this version
    does not know stays in ``extra`` and is shown raw."""
    from dflash_watch.detectors.diagnosis_rules import DATA_PATH_PACKAGES, size

    fp = extra.get("fingerprint")
    if not isinstance(fp, dict):
        return []
    fp = dict(fp)
    rows: list[tuple[str, str]] = []
    if isinstance(fp.get("python"), str):
        rows.append(("python", _printable(fp.pop("python"))))
    if isinstance(fp.get("torch"), str):
        cuda = fp.pop("cuda", None)
        build = f"CUDA {cuda}" if isinstance(cuda, str) else "CPU build"
        git = fp.pop("torch_git", None)
        rows.append(("torch", _printable(f"{fp.pop('torch')} ({build}" + (f", git {git[:10]})" if
                                                                       isinstance(git, str) else ")"))))
    packages = fp.get("packages")
    if isinstance(packages, dict) and all(isinstance(v, str) for v in packages.values()):
        fp.pop("packages")
        named = ", ".join(f"{k} {v}" for k, v in sorted(packages.items()) if k in DATA_PATH_PACKAGES)
        rows.append(("packages", _printable(f"{len(packages)}" + (f" ({named})" if named else ""))))
    for key, name in (("env", "env"), ("files", "files")):
        table = fp.get(key)
        if isinstance(table, dict) and all(isinstance(v, str) for v in table.values()):
            fp.pop(key)
            items = sorted(table.items()) if key == "env" else list(table.items())
            for i, (k, v) in enumerate(items):
                rows.append((name if i == 0 else "", _printable(f"{k}={v}" if key == "env" else f"{k} {v[:12]}")))
    args = fp.get("launch_args")
    if isinstance(args, list) and all(isinstance(a, str) for a in args):
        fp.pop("launch_args")
        import shlex

        rows.append(("launch", _printable(shlex.join(args))))
    cache = fp.get("compile_cache")
    if isinstance(cache, dict) and _is_num(cache.get("bytes")) and _is_num(cache.get("entries")):
        fp.pop("compile_cache")
        rows.append(("compile cache", _printable(f"{size(cache['bytes'])}, {int(cache['entries'])} entries"
                                                 f" in {cache.get('path')}")))
    fp.pop("site_packages", None)
    if fp:
        extra["fingerprint"] = fp  # what is left, raw
    else:
        del extra["fingerprint"]
    return rows


def _is_num(value: object) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _printable(text: str) -> str:
    """Text from a file is data: control characters are shown, not obeyed."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


def _rate(baseline: Any) -> str:
    from dflash_watch.detectors.config import fmt_rate

    unit = baseline.extra.get("throughput_unit", TOK_S)
    value = baseline.throughput_tokens_per_s
    if unit == TOK_S:
        return fmt_rate(value)
    return f"{value:.3g} {_printable(str(unit))}"


def _span(first: float, last: float, tz: Any) -> str:
    from datetime import datetime

    from dflash_watch.detectors.config import fmt_duration

    try:
        a = datetime.fromtimestamp(first, tz)
        b = datetime.fromtimestamp(last, tz)
    except (OverflowError, OSError, ValueError):
        return f"t={first:.0f} to t={last:.0f}"
    end = b.strftime("%H:%M:%S") if a.date() == b.date() else b.strftime("%Y-%m-%d %H:%M:%S")
    return f"{a.strftime('%Y-%m-%d %H:%M:%S')} to {end} ({fmt_duration(last - first)})"
