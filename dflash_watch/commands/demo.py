"""`dflash-watch demo`: the dashboard on a built-in simulated DFlash run.

The simulator (dflash_watch.demo.simulator) is started as the managed job
in a tmux session on a private socket, so start, abort and relaunch are
the real ones; its log and GPU sample file are read through the same
sources as a real run. Without tmux it runs as a child process and the
dashboard says that control is limited. The demo owns its job: leaving the
demo stops the simulator and removes its folder (unless --keep).
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path

from . import fail

REPO_ROOT = Path(__file__).resolve().parents[2]


def simulator_argv(out: Path, speed: float, seed: int, scene: str = "story") -> list[str]:
    argv = [sys.executable, "-m", "dflash_watch.demo.simulator", "--out", str(out), "--speed", str(speed), "--seed", str(seed)]
    if scene != "story":  # the default command stays what it always was (the pane shows it)
        argv += ["--scene", scene]
    return argv


def make_job(out: Path, speed: float, seed: int, use_tmux: bool = True,
             extra_env: dict[str, str] | None = None, scene: str = "story"):  # noqa: ANN201 - Job | ChildJob
    """The simulator as a tmux-managed job on a private socket, or a child process."""
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]))}
    env.update(extra_env or {})
    if use_tmux and shutil.which("tmux"):
        from ..control.job import Job, JobSpec

        spec = JobSpec(
            command=shlex.join(simulator_argv(out, speed, seed, scene)),
            session="dflash-demo",
            socket=f"dfw-demo-{os.getpid()}",
            cwd=str(out),
            env=env,
            grace_s=5.0,
            state_dir=out / "state",
            preflight_timeout_s=5.0,
        )
        return Job(spec)
    from ..control.child import ChildJob

    return ChildJob(simulator_argv(out, speed, seed, scene), cwd=str(out), env=env, grace_s=5.0)


def run(args: argparse.Namespace) -> int:
    if args.speed < 0:
        return fail("--speed must be >= 0")
    from ..baseline.store import load_baseline
    from ..demo.staging import cache_env, rebuilt_fingerprint, stage
    from ..monitor import Monitor

    out = Path(tempfile.mkdtemp(prefix="dflash-demo-"))
    # The good run before the environment rebuild (its profile and
    # fingerprint) and the rebuilt environment: what `d` compares.
    staged = stage(out)
    scene = getattr(args, "scene", "story")
    job = make_job(out, args.speed or 1000.0, args.seed, use_tmux=not args.no_tmux, extra_env=cache_env(staged),
                   scene=scene)

    def cleanup() -> None:
        _stop(job)
        if args.keep:
            print(f"dflash-watch demo: files kept in {out}")
        else:
            shutil.rmtree(out, ignore_errors=True)

    _exit_on_hangup(cleanup)
    monitor = Monitor(baseline=load_baseline(staged.baseline))
    monitor.fingerprint = rebuilt_fingerprint(staged)  # the alerts' suspects compare it
    code = 0
    try:
        try:
            job.start()
        except Exception as exc:  # tmux refused: say so, nothing to watch
            return fail(f"could not start the simulated run: {exc}")
        if getattr(job, "limited", False):
            monitor.note("no tmux: the simulated run is a child process of the demo; control is limited")
        from ..live import LiveSession

        session = LiveSession(
            monitor,
            logs=(str(out / "train.log"),),
            samples_file=str(out / "gpu.jsonl"),
            use_nvml=False,
            job=job,
            speed=args.speed or 1000.0,  # the simulated run's clock runs this much faster
        )
        with session:
            session.refresh_job_state()
            if args.headless:
                code = _headless(monitor, job, session)
            else:
                from ..tui.app import DashboardApp

                app = DashboardApp(
                    monitor,
                    job=job,
                    session=session,
                    baseline_path=str(staged.baseline),
                    control_note="no tmux: the simulated run is a child process of the demo; control is limited"
                    if getattr(job, "limited", False)
                    else None,
                )
                app.title = "dflash-watch demo (simulated DFlash run)" if scene == "story" else \
                    f"dflash-watch demo (simulated DFlash run, scene {scene})"
                app.run()
                code = app.return_code or 0  # (1: an error ended the app)
    finally:
        cleanup()
    return code


def _exit_on_hangup(cleanup) -> None:  # noqa: ANN001
    """A closed terminal or a kill must still stop the demo's own job and
    remove its folder. The handler does the cleanup itself and leaves at
    once: an exception raised into the TUI's event loop is not guaranteed
    to unwind it, and a dashboard without a terminal must not linger."""
    import signal

    def leave(signum, _frame):  # noqa: ANN001
        try:
            cleanup()
        finally:
            os._exit(128 + signum)

    for sig in (signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, leave)


def _headless(monitor, job, session) -> int:  # noqa: ANN001
    """Print alerts as JSON lines until the simulated run exits."""
    seen = 0
    while True:
        history = list(monitor.alerts.history)
        for alert in history[seen:]:
            print(alert.to_json(), flush=True)
        seen = len(history)
        if monitor.last_exit is not None:
            return 0
        time.sleep(0.5)


def _stop(job) -> None:  # noqa: ANN001
    """The demo's job is the demo's own: stop it and its private tmux server."""
    try:
        job.abort(grace_s=2.0)
    except Exception:
        pass
    tmux = getattr(job, "tmux", None)
    if tmux is not None:
        try:
            tmux.kill_server()
        except Exception:
            pass
