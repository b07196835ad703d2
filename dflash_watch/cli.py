"""Command line (CONTRACTS section 1).

This module must stay light: `dflash-watch --help` imports nothing but
argparse. Each command's module is imported only when that command runs.
Exit codes everywhere: 0 success, 1 unhealthy, 2 usage or input error with
a one-line reason on stderr.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import NoReturn

COMMANDS = (
    "watch", "headless", "check", "demo", "replay", "start", "abort", "relaunch", "status", "init", "baseline",
    "buckets", "alerts",
)


# Commands that keep the job's state in the state dir, checked before they run
# (kept here as names: importing commands.common would load the config module).
_STATE_COMMANDS = frozenset({"start", "status", "abort", "relaunch", "watch", "headless"})


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2
        self.exit(2, f"{self.prog}: error: {message}\n")


def version() -> str:
    """The installed distribution's version; a checkout run without
    installing (``python -m dflash_watch`` from the repository) has no
    metadata, so the package's own ``__version__`` answers instead."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("dflash-watch")
    except PackageNotFoundError:
        from . import __version__

        return __version__


class _VersionAction(argparse.Action):
    """``--version``, looked up only when asked: argparse's own ``version``
    action wants the string when the parser is built, which would read the
    package metadata on every command."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS,
                 default: str = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings=option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        sys.stdout.write(f"dflash-watch {version()}\n")  # stdout, as argparse's own action
        parser.exit(0)


def _job_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", metavar="F", help="config file (TOML); default ./dflash-watch.toml if present")
    p.add_argument("--session", metavar="NAME", help="tmux session of the training job")
    p.add_argument("--cmd", metavar='"..."', help="training command run by start/relaunch")
    p.add_argument("--socket", metavar="NAME", help="tmux server socket name (tmux -L)")
    p.add_argument("--cwd", metavar="DIR", help="working directory of the training command")
    p.add_argument("--grace", type=float, metavar="S", help="seconds between Ctrl-C and SIGTERM on abort (default 30)")


def _live_flags(p: argparse.ArgumentParser) -> None:
    """What `watch` and `headless` take: they are one live session."""
    _job_flags(p)
    p.add_argument("--log", action="append", default=[], metavar="PATH", help="log file or glob to follow (repeatable)")
    p.add_argument("--gpu-samples", metavar="F", help="read GPU samples from this file instead of NVML")
    p.add_argument("--record-gpu", metavar="F", help="append every NVML sample to this file")
    p.add_argument("--baseline", metavar="F", help="baseline file of a good run")
    p.add_argument("--no-gpu", action="store_true", help="do not sample GPUs")
    p.add_argument("--tz", metavar="ZONE", help="time zone of naive log timestamps")
    _probe_flag(p)
    p.add_argument("--metrics-port", type=int, metavar="N", help="serve Prometheus /metrics on 127.0.0.1:N")
    p.add_argument("--metrics-host", metavar="ADDR", help="address for --metrics-port (default 127.0.0.1)")
    p.add_argument("--metrics-file", metavar="F",
                   help="write the metrics to F atomically (node_exporter textfile collector)")


def _probe_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--probe", action="append", default=[], metavar="F",
                   help="probe file or glob written by dflash_watch.probe (repeatable; default: "
                   "dflash-probe-*.jsonl beside the logs)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="dflash-watch",
        description="Watch a multi-GPU training run: tail its logs, sample GPU memory, "
        "alert on degradation and crashes, and control the tmux-managed job.",
    )
    parser.add_argument("--version", action=_VersionAction, help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    _live_flags(sub.add_parser("watch", help="the dashboard beside a run (the default command)"))
    h = sub.add_parser("headless", help="the live session of watch without a screen: alerts as JSON lines on stdout")
    _live_flags(h)

    c = sub.add_parser("check", help="one look at a run: exit 0 healthy, 1 alerts firing, 2 could not check")
    _job_flags(c)
    c.add_argument("--log", action="append", default=[], metavar="PATH", help="log file or glob to read (repeatable)")
    c.add_argument("--gpu-samples", metavar="F", help="GPU sample file to read")
    c.add_argument("--baseline", metavar="F", help="baseline file of a good run")
    c.add_argument("--tz", metavar="ZONE", help="time zone of naive log timestamps")
    c.add_argument("--json", action="store_true", help="the firing alerts as JSON lines")
    _probe_flag(c)

    d = sub.add_parser("demo", help="the dashboard on a built-in simulated DFlash run (no GPU needed)")
    d.add_argument("--speed", type=float, default=10.0, metavar="X", help="simulated seconds per wall second (default 10)")
    d.add_argument("--no-tmux", action="store_true", help="run the simulator as a child process instead of in tmux")
    d.add_argument("--seed", type=int, default=7, help="random seed of the simulated run")
    d.add_argument("--keep", action="store_true", help="keep the demo's files and print where they are")
    d.add_argument("--headless", action="store_true", help="no TUI: print alerts as JSON lines until the story ends")
    d.add_argument("--scene", choices=("story", "health"), default="story",
                   help="story: the seed's story (default); health: plus a NaN loss, a straggler rank and a GPU Xid")

    r = sub.add_parser("replay", help="a finished run through the same pipeline, on the log's own clock")
    r.add_argument("logs", nargs="+", metavar="LOG")
    r.add_argument("--gpu-samples", action="append", default=[], metavar="F", help="GPU sample file (repeatable)")
    r.add_argument("--baseline", metavar="F", help="baseline file of a good run")
    r.add_argument("--json", action="store_true", help="no TUI: alerts as JSON lines on stdout")
    r.add_argument("--report", action="store_true", help="no TUI: alerts and a summary as text (the default when piped)")
    r.add_argument("--tz", metavar="ZONE", help="time zone of naive log timestamps (default: local)")
    r.add_argument("--config", metavar="F", help="config file (detector thresholds, progress regex)")
    _probe_flag(r)

    for name, text in (
        ("start", "start the training job in tmux"),
        ("abort", "stop the training job: Ctrl-C, then SIGTERM, then SIGKILL"),
        ("relaunch", "abort if alive, check the GPUs are free, start again"),
        ("status", "the job's state; exit 0 running, 1 exited or absent"),
    ):
        _job_flags(sub.add_parser(name, help=text))
    sub.choices["status"].add_argument("--json", action="store_true",
                                       help="the job's state as one JSON object on stdout")
    sub.choices["relaunch"].add_argument(
        "--take-over", action="store_true",
        help="if the pane runs a training started by hand: stop it (your shell is spared) and run --cmd there")

    i = sub.add_parser("init", help="write a commented config file")
    i.add_argument("path", nargs="?", default="dflash-watch.toml")
    i.add_argument("--force", action="store_true", help="overwrite an existing file")

    b = sub.add_parser("baseline", help="the reference profile of a good run")
    bsub = b.add_subparsers(dest="baseline_command", metavar="ACTION", parser_class=_Parser, required=True)
    bs = bsub.add_parser(
        "save",
        help="save a baseline from a good run's logs",
        description="Replay a good run's logs and save its profile: the median throughput over the "
        "window (whole run minus its warm-up unless --from/--to), the step interval and, with GPU "
        "samples, each GPU's memory level and band. Written atomically.",
    )
    bs.add_argument("logs", nargs="*", metavar="LOG", help="log files of the good run (default: logs in the config)")
    bs.add_argument("--gpu-samples", action="append", default=[], metavar="F",
                    help="GPU sample file of the same run (repeatable; default: [gpu] samples_file or record_file)")
    bs.add_argument("--env", metavar="VENV", help="the run's virtual environment (or its python): the package "
                    "fingerprint is read from its dist-info (default: the job's process, else none)")
    _probe_flag(bs)
    bs.add_argument("--from", dest="from_time", metavar="T",
                    help="window start: ISO time (2026-11-29T10:00:00) or seconds since the epoch")
    bs.add_argument("--to", dest="to_time", metavar="T", help="window end, like --from")
    bs.add_argument("--out", metavar="F", help="baseline file to write (default: baseline_file in the config, "
                    "else dflash-baseline.json)")
    bs.add_argument("--tz", metavar="ZONE", help="time zone of naive log timestamps and of --from/--to")
    bs.add_argument("--config", metavar="F", help="config file (logs, progress regex, warm-up thresholds)")
    bs.add_argument("--force", action="store_true", help="save even when alerts fired or the run crashed in "
                    "the window (refused otherwise, as the dashboard's `b` refuses it)")
    bsh = bsub.add_parser("show", help="print a baseline file")
    bsh.add_argument("path", nargs="?", metavar="F",
                     help="baseline file (default: baseline_file in the config, else dflash-baseline.json)")
    bsh.add_argument("--tz", metavar="ZONE", help="time zone of the clock times shown")
    bsh.add_argument("--config", metavar="F", help="config file naming the baseline file")
    bsh.add_argument("--json", action="store_true", help="the baseline file's object and what show derives "
                     "from it, as one JSON object")
    bd = bsub.add_parser(
        "diff",
        help="what changed since the good run, most likely cause first",
        description="Profile the current run (its logs, GPU samples, probe lines and environment) and "
        "compare it with the baseline: every change, ranked by how well it explains the symptom.",
    )
    bd.add_argument("logs", nargs="*", metavar="LOG", help="log files of the current run (default: logs in the config)")
    bd.add_argument("--baseline", metavar="F", help="baseline file (default: baseline_file in the config, "
                    "else dflash-baseline.json)")
    bd.add_argument("--gpu-samples", action="append", default=[], metavar="F", help="GPU sample file (repeatable)")
    bd.add_argument("--env", metavar="VENV", help="the current run's virtual environment (or its python)")
    bd.add_argument("--json", action="store_true", help="CONTRACTS section 7 JSON")
    bd.add_argument("--tz", metavar="ZONE", help="time zone of naive log timestamps")
    bd.add_argument("--config", metavar="F", help="config file")
    _probe_flag(bd)

    k = sub.add_parser("buckets", help="bucket boundaries that minimise padding for a length distribution")
    k.add_argument("lengths", metavar="LENGTHS", help="lengths file: .npy, .txt (one per line), .jsonl, .pt")
    k.add_argument("--k", type=int, default=6, metavar="K", help="number of buckets (default 6)")
    k.add_argument("--max-len", type=int, metavar="N", help="leave out (and count) samples longer than N")
    k.add_argument("--compare", metavar="B0,B1,...", help="boundaries to compare with, e.g. 0,770,1216,1728,2432,3296,8192")
    k.add_argument("--token-budget", type=int, metavar="N", help="also simulate batches filled up to N tokens")
    k.add_argument("--field", metavar="NAME", help="the length field of a .jsonl file (default: length, len, "
                   "num_tokens, seq_len, or the length of input_ids)")
    k.add_argument("--json", action="store_true", help="CONTRACTS section 8 JSON")

    a = sub.add_parser("alerts", help="the configured alert sinks")
    asub = a.add_subparsers(dest="alerts_command", metavar="ACTION", parser_class=_Parser, required=True)
    at = asub.add_parser("test", help="send one test alert to each configured sink and report each result")
    at.add_argument("--config", metavar="F", help="config file with [[alerts.sink]] tables")
    at.add_argument("--timeout", type=float, default=10.0, metavar="S", help="seconds to wait for each sink")
    at.add_argument("--json", action="store_true", help='one JSON object: {"sinks": [{"name", "kind", "ok", '
                    '"error"}, ...]}')
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version")):
        argv = ["watch", *argv]
    args = parser.parse_args(argv)
    if args.command is None:
        args = parser.parse_args(["watch"])
    from .code_cache import install

    install()  # before the command's modules: their classes' code is read, not compiled
    module = importlib.import_module(f"dflash_watch.commands.{args.command}")
    if args.command in _STATE_COMMANDS:
        from .commands.common import state_dir_problem

        problem = state_dir_problem(args)
        if problem:
            sys.stderr.write(f"dflash-watch: {problem}\n")
            return 2
    try:
        return int(module.run(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `replay --json | head`: the reader left; that is not an error.
        sys.stdout = None  # type: ignore[assignment]
        return 0


if __name__ == "__main__":
    sys.exit(main())
