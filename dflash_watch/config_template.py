"""The commented config file that ``dflash-watch init`` writes.

Built from the same declarations that check a file (``DetectorConfig``'s
knobs as ``config.DETECTOR_KEYS``, ``keymap.KEY_BINDINGS``), so the template
and the checks cannot drift; a test uncomments every example line and loads
the result.
"""

from __future__ import annotations

import json
from typing import Any

from .config import DETECTOR_KEYS
from .keymap import keys_template


def _toml(value: Any) -> str:
    return "true" if value is True else "false" if value is False else json.dumps(value)


def detectors_template() -> str:
    """The ``[detectors]`` table of the template, from ``DETECTOR_KEYS``."""
    from dflash_watch.detectors.config import DetectorConfig

    defaults = DetectorConfig()
    lines = [
        "[detectors]",
        "# Every threshold with its default, and its valid values after the colon.",
    ]
    for name, spec in DETECTOR_KEYS.items():
        lines.append(f"# {spec.doc}: {spec.range.bounds()}")
        lines.append(f"# {name} = {_toml(getattr(defaults, name))}")
    return "\n".join(lines) + "\n"


_TEMPLATE_HEAD = """\
# dflash-watch config. Every key is optional; flags override this file.
# Read from --config FILE; without it, the first that exists of
# ./dflash-watch.toml, $XDG_CONFIG_HOME/dflash-watch/dflash-watch.toml,
# $XDG_CONFIG_HOME/dflash-watch/config.toml (XDG_CONFIG_HOME unset or
# empty: ~/.config) and ~/.config/dflash-watch/config.toml.

# Logs to follow, like `tail -F`; globs pick up one file per rank.
logs = ["logs/train.log", "logs/rank*.log"]

# Time zone of naive log timestamps (default: this machine's local zone).
# tz = "UTC"

# A regex with named groups (step, total, tokens_per_s, loss) when the
# built-in progress formats do not fit your log.
# progress_regex = 'it (?P<step>\\d+) .* (?P<tokens_per_s>[\\d.]+) tok/s'

# A saved profile of a good run: `dflash-watch baseline save`.
# baseline_file = "dflash-baseline.json"

# Every alert, one JSON line each (CONTRACTS section 2).
# alerts_file = "dflash-alerts.jsonl"

[run]
# The training command, run in tmux by start / relaunch.
command = "torchrun --nproc-per-node 8 train_dflash.py --config configs/drafter.yaml"
cwd = "."
session = "dflash-train"
# socket = "dflash"          # tmux -L socket name, for a private server
# window = "train"           # a window of the session, when the job shares it
grace_s = 30.0               # Ctrl-C, then this long, then SIGTERM, then SIGKILL
auto_relaunch = false
max_restarts = 3
# A job whose stall alert stays firing on_stall_grace_s: "alert" only, or
# "abort" / "relaunch" it (a relaunch counts toward the crash-loop guard).
# on_stall = "alert"
# on_stall_grace_s = 300.0
# The same crash (or hang) this often within the window stops relaunching.
# crash_loop_count = 3
# crash_loop_window_s = 600.0
# Tokens per optimizer step / per sample: a run that prints only it/s or
# samples/s (tqdm, HF Trainer) is then judged and shown in tokens/s.
# tokens_per_step = 65536
# tokens_per_sample = 1024
# The job's GPUs: a process holding memory on them blocks a relaunch.
# gpus = [0, 1, 2, 3, 4, 5, 6, 7]
# preflight_timeout_s = 60.0 # how long relaunch waits for the old run to let go
# state_dir = "~/.local/state/dflash-watch"

[run.env]
# PYTORCH_CUDA_ALLOC_CONF = "expandable_segments:True"

[gpu]
# enabled = true
interval_s = 1.0
# indices = [0, 1, 2, 3, 4, 5, 6, 7]
# samples_file = "gpu.jsonl"   # read samples from a file instead of NVML
# record_file = "gpu.jsonl"    # also append every NVML sample here

"""


_TEMPLATE_ALERTS = """
[alerts]
# Where alerts go besides the screen and stdout: one [[alerts.sink]] table
# per sink, kinds bell, desktop, webhook, slack, ntfy, pagerduty, command,
# each with its own filters (min_severity, detectors, exclude), rate limit
# (max_per_minute), retries with backoff and timeout; docs/alerts.md shows
# every kind. A secret URL stays in the environment: url_env names the
# variable that holds it, and it is never printed. Try them all with
# `dflash-watch alerts test`. One Slack sink for warnings and worse:
# sink = [{ kind = "slack", url_env = "SLACK_WEBHOOK_URL", min_severity = "warning" }]
"""


def example_config() -> str:
    """What ``dflash-watch init`` writes: every key, commented where optional."""
    return _TEMPLATE_HEAD + detectors_template() + "\n" + keys_template() + _TEMPLATE_ALERTS
