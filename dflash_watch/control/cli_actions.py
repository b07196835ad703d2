"""``dflash-watch start|abort|relaunch|status``: the job from scripts.

Each ``cmd_*`` takes the CLI's argparse Namespace (``config``, ``session``,
``cmd``, ``socket``, ``cwd``, ``grace``; missing fields read as None) and
returns an exit code per CONTRACTS section 1: 0 success (status: running),
1 the job is not in the asked-for state (status: exited or absent; start:
already running; relaunch refused), 2 usage or environment error (bad
config, bad session name, no command for start/relaunch, tmux missing),
with one line on stderr. Progress goes to stdout, one line per step.

Flags override the ``[run]`` table of the config file.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .job import AlreadyRunning, ControlUnavailable, GpuHolders, Job, JobError, JobSpec
from .lock import LockTimeout
from .tmux import InvalidName, TmuxError

DEFAULT_SESSION = "dflash-train"


class UsageError(ValueError):
    """Bad config or flags: exit 2 with the message."""


def spec_from_args(args: argparse.Namespace) -> JobSpec:
    """The JobSpec from ``[run]`` of the config (see dflash_watch.config), flags on top."""
    from ..config import ConfigError, load_config
    from .secrets import sink_secret_names

    try:
        config = load_config(getattr(args, "config", None))
    except ConfigError as exc:
        raise UsageError(str(exc)) from exc
    secrets = sink_secret_names(getattr(getattr(config, "alerts", None), "sinks", ()) or ())
    return spec_from_run(config.run, args, secret_env=secrets)


def spec_from_run(run: Any, args: argparse.Namespace | None = None,
                  secret_env: tuple[str, ...] = ()) -> JobSpec:
    """A RunConfig (and optional flags) as a JobSpec; ``secret_env``: variables the job must not get."""

    def pick(flag: str, value: Any) -> Any:
        given = getattr(args, flag, None) if args is not None else None
        return value if given is None else given

    kwargs: dict[str, Any] = {}
    if run.state_dir:
        kwargs["state_dir"] = Path(str(run.state_dir)).expanduser()
    try:
        return JobSpec(
            command=str(pick("cmd", run.command) or ""),
            session=str(pick("session", run.session)),
            cwd=pick("cwd", run.cwd),
            env={str(k): str(v) for k, v in run.env.items()},
            socket=pick("socket", run.socket),
            window=pick("window", run.window),
            grace_s=float(pick("grace", run.grace_s)),
            gpus=run.gpus,
            preflight_timeout_s=float(run.preflight_timeout_s),
            secret_env=tuple(secret_env),
            **kwargs,
        )
    except (InvalidName, TypeError, ValueError) as exc:
        raise UsageError(str(exc)) from exc


NO_COMMAND = "no run command configured: set [run] command in the config or pass --cmd"


def _job(args: argparse.Namespace, gpu_holders: GpuHolders | None, *, needs_command: bool = False) -> Job:
    """The job the flags name. ``needs_command``: start and relaunch cannot
    act without one, and a missing command is a usage error (exit 2), not
    a job in the wrong state (exit 1), so it is refused before tmux is asked."""
    spec = spec_from_args(args)
    if needs_command and not spec.command.strip():
        raise UsageError(NO_COMMAND)
    if spec.cwd is not None and not Path(str(spec.cwd)).expanduser().is_dir():
        raise UsageError(f"--cwd {spec.cwd}: no such directory (the job would run in this one)")
    job = Job(spec, gpu_holders=gpu_holders)
    if not job.available:
        raise ControlUnavailable("tmux not found on PATH: job control disabled (monitoring still works)")
    return job


def nvml_holders() -> GpuHolders:
    """(gpu, pid, used_bytes, name) of every GPU process NVML lists, read when called.

    Optional: without NVML (no driver, no nvidia-ml-py) it lists nothing, and
    start/relaunch rely on the run's record alone. NVML is opened on the
    first call only, so a machine without GPUs pays one failed import.
    """
    sampler: list[Any] = []

    def holders() -> list[tuple[int, int, int, str]]:
        import time

        if not sampler:
            from ..sources.nvml import GpuSampler

            sampler.append(GpuSampler())
        if not sampler[0].available:
            return []
        rows = []
        for sample in sampler[0].sample(time.time()):
            for p in getattr(sample, "processes", None) or ():
                rows.append((sample.gpu, p.pid, p.used_bytes, p.name))
        return rows

    return holders


def _say(message: str) -> None:
    print(message, flush=True)


def _guard(action: Callable[[], int]) -> int:
    """Map the control errors to CONTRACTS exit codes with a one-line reason."""
    try:
        return action()
    except (UsageError, ControlUnavailable) as exc:
        print(f"dflash-watch: {exc}", file=sys.stderr)
        return 2
    except AlreadyRunning as exc:
        print(f"dflash-watch: {exc}", file=sys.stderr)
        return 1
    except (JobError, LockTimeout) as exc:
        print(f"dflash-watch: {exc}", file=sys.stderr)
        return 1
    except TmuxError as exc:
        print(f"dflash-watch: tmux: {exc}", file=sys.stderr)
        return 2


def status_json(st: Any) -> dict[str, Any]:
    """``status --json``: every field of the JobState, its line, and
    ``survivors``: the last run's processes still alive, verified (a list,
    empty when none), or None where nobody looked (the job is running, or
    the pane is not one dflash-watch started)."""
    from dataclasses import asdict

    known = not st.running and (st.state == "absent" or st.managed)
    return {**asdict(st), "pids": list(st.pids), "running": st.running, "line": st.line(),
            "survivors": list(st.pids) if known else None}


def cmd_status(args: argparse.Namespace) -> int:
    def action() -> int:
        st = _job(args, None).status()
        if getattr(args, "json", False):
            import json

            _say(json.dumps(status_json(st)))  # ASCII: no raw control character reaches a terminal
        else:
            _say(st.line())
        return 0 if st.running else 1

    return _guard(action)


def cmd_start(args: argparse.Namespace, gpu_holders: GpuHolders | None = None) -> int:
    def action() -> int:
        st = _job(args, gpu_holders or nvml_holders(), needs_command=True).start(on_step=_say)
        _say(st.line())
        return 0

    return _guard(action)


def cmd_abort(args: argparse.Namespace) -> int:
    def action() -> int:
        st = _job(args, nvml_holders()).abort(getattr(args, "grace", None), on_step=_say)
        _say(st.line())
        if st.pids and not st.running:
            print(f"dflash-watch: could not end pids {', '.join(map(str, st.pids))}", file=sys.stderr)
        return 1 if st.running or st.pids else 0

    return _guard(action)


def cmd_relaunch(args: argparse.Namespace, gpu_holders: GpuHolders | None = None) -> int:
    def action() -> int:
        job = _job(args, gpu_holders or nvml_holders(), needs_command=True)
        grace = getattr(args, "grace", None)
        adoption = job.adoption() if getattr(args, "take_over", False) else None
        if adoption is not None:  # a run started by hand in the pane: asked for by the flag
            st = job.take_over(adoption, grace, job.spec.command, on_step=_say)
        else:
            st = job.relaunch(grace, on_step=_say)
        _say(st.line())
        return 0

    return _guard(action)
