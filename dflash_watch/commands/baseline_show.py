"""`dflash-watch baseline show [F] [--json]`: a baseline file for a person.

Printing only: the file's keys as rows (``describe_rows``), the
fingerprint a row per fact, unknown shapes shown raw (the file may come
from a newer version), and text from the file never reaching a terminal
raw (``printable``). ``baseline save`` and ``baseline diff`` print their
rates, spans and names with the same helpers.
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any, TypeGuard

from dflash_watch.parsers.events import TOK_S

from .common import parse_tz


def show(args: argparse.Namespace) -> int:
    from ..baseline.store import DEFAULT_PATH, load_baseline

    path = args.path
    if path is None:
        from ..config import load_config

        path = load_config(args.config).baseline_file or DEFAULT_PATH
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
    return [f"baseline {printable(str(path))}", *(f"  {name:<{width}}  {value}" for name, value in rows)]


def describe_rows(baseline: Any, tz: Any = None) -> list[tuple[str, str]]:
    """A baseline as (name, value) rows; unexpected shapes are shown raw,
    never a traceback (the file may come from a newer version)."""
    import json

    extra = dict(baseline.extra)
    rows: list[tuple[str, str]] = [("throughput", rate_text(baseline))]
    window = extra.pop("window", None)
    if isinstance(window, dict) and _is_num(window.get("from")) and _is_num(window.get("to")):
        rows.append(("window", span_text(window["from"], window["to"], tz)))
    elif window is not None:
        extra["window"] = window
    elif _is_num(extra.get("window_s")) and _is_num(extra.get("captured_at")):
        # Saved by the dashboard's `b` key: the last window_s before it was pressed.
        rows.append(("window", span_text(extra["captured_at"] - extra["window_s"], extra["captured_at"], tz)))
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
                gpu_rows.append((f"GPU {printable(str(gpu))} memory",
                                 f"{fmt_gib(m['level_bytes'])}, band {fmt_gib(m['band_bytes'], 2)}"))
            else:
                gpu_rows.append((f"GPU {printable(str(gpu))} memory", printable(json.dumps(m))))
    elif memory is not None:
        extra["gpu_memory"] = memory
    venv = extra.pop("venv", None)
    if isinstance(venv, str):
        rows.append(("environment", printable(venv)))
    elif venv is not None:
        extra["venv"] = venv
    logs = extra.pop("logs", None)
    if isinstance(logs, list) and all(isinstance(x, str) for x in logs):
        rows.append(("logs", printable(", ".join(logs))))
    elif logs is not None:
        extra["logs"] = logs
    extra.pop("captured_at", None)
    rows.extend(gpu_rows)
    rows.extend(_fingerprint_rows(extra))
    rows.extend((printable(str(k)), printable(json.dumps(v))) for k, v in sorted(extra.items()))
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
        rows.append(("python", printable(fp.pop("python"))))
    if isinstance(fp.get("torch"), str):
        cuda = fp.pop("cuda", None)
        build = f"CUDA {cuda}" if isinstance(cuda, str) else "CPU build"
        git = fp.pop("torch_git", None)
        rows.append(("torch", printable(f"{fp.pop('torch')} ({build}" + (f", git {git[:10]})" if
                                                                       isinstance(git, str) else ")"))))
    packages = fp.get("packages")
    if isinstance(packages, dict) and all(isinstance(v, str) for v in packages.values()):
        fp.pop("packages")
        named = ", ".join(f"{k} {v}" for k, v in sorted(packages.items()) if k in DATA_PATH_PACKAGES)
        rows.append(("packages", printable(f"{len(packages)}" + (f" ({named})" if named else ""))))
    for key, name in (("env", "env"), ("files", "files")):
        table = fp.get(key)
        if isinstance(table, dict) and all(isinstance(v, str) for v in table.values()):
            fp.pop(key)
            items = sorted(table.items()) if key == "env" else list(table.items())
            for i, (k, v) in enumerate(items):
                rows.append((name if i == 0 else "", printable(f"{k}={v}" if key == "env" else f"{k} {v[:12]}")))
    args = fp.get("launch_args")
    if isinstance(args, list) and all(isinstance(a, str) for a in args):
        fp.pop("launch_args")
        import shlex

        rows.append(("launch", printable(shlex.join(args))))
    cache = fp.get("compile_cache")
    if isinstance(cache, dict) and _is_num(cache.get("bytes")) and _is_num(cache.get("entries")):
        fp.pop("compile_cache")
        rows.append(("compile cache", printable(f"{size(cache['bytes'])}, {int(cache['entries'])} entries"
                                                 f" in {cache.get('path')}")))
    fp.pop("site_packages", None)
    if fp:
        extra["fingerprint"] = fp  # what is left, raw
    else:
        del extra["fingerprint"]
    return rows


def _is_num(value: object) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def printable(text: str) -> str:
    """Text from a file is data: control characters are shown, not obeyed."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


def rate_text(baseline: Any) -> str:
    from dflash_watch.detectors.config import fmt_rate

    unit = baseline.extra.get("throughput_unit", TOK_S)
    value = baseline.throughput_tokens_per_s
    if unit == TOK_S:
        return fmt_rate(value)
    return f"{value:.3g} {printable(str(unit))}"


def span_text(first: float, last: float, tz: Any) -> str:
    from datetime import datetime

    from dflash_watch.detectors.config import fmt_duration

    try:
        a = datetime.fromtimestamp(first, tz)
        b = datetime.fromtimestamp(last, tz)
    except (OverflowError, OSError, ValueError):
        return f"t={first:.0f} to t={last:.0f}"
    end = b.strftime("%H:%M:%S") if a.date() == b.date() else b.strftime("%Y-%m-%d %H:%M:%S")
    return f"{a.strftime('%Y-%m-%d %H:%M:%S')} to {end} ({fmt_duration(last - first)})"
