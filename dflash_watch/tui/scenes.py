"""Deterministic Monitor states for snapshot tests, screenshots and the docs.

A snapshot is only worth keeping if it is the same picture every time, so
these scenes feed a Monitor directly (no threads, no wall clock, fixed
times in UTC, seeded noise) through the real parsers and detectors: the
alerts on screen are the ones the detectors really raise for that data.

Scenes: ``healthy`` (8 GPUs flat, throughput at baseline), ``volatile``
(drafter GPUs' memory starts swinging and throughput collapses: bucketing
broke), ``crashed`` (then the FX-tracing traceback and a dead job),
``health`` (healthy, plus a NaN loss, a straggler rank and a GPU with an
Xid and thermal throttling: ``scene_health``).
"""

from __future__ import annotations

import datetime as _dt
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..control.state import JobStatus
    from ..monitor import Monitor

from dflash_watch.parsers.events import GpuProcess, GpuSample, ProcessExit

GIB = 1 << 30
MIB = 1 << 20
T0 = 1764410400.0  # 2025-11-29 10:00:00 UTC
TOTAL = 96 * GIB
N_GPUS = 8
DRAFTERS = (5, 6, 7)
JOB_PID = 48213
BASELINE_TPS = 22_600.0
TOTAL_STEPS = 50_000
UTC = _dt.UTC
LOG = "/runs/dflash-llama70b/train.log"


@dataclass
class Scene:
    """A fed Monitor plus what the app needs beside it."""

    monitor: Monitor
    now: float
    job_state: Any
    events: list[str] = field(default_factory=list)


def _stamp(t: float) -> str:
    d = _dt.datetime.fromtimestamp(t, UTC)
    return d.strftime("%Y-%m-%d %H:%M:%S") + f",{int(t * 1000) % 1000:03d}"


def _line(t: float, level: str, logger: str, message: str) -> str:
    return f"[{_stamp(t)}] [{level}] [{logger}] {message}"


def job_state(state: JobStatus, started: float, now: float, code: int | None = None) -> Any:
    from ..control.job import JobState

    pids = (JOB_PID - 1, JOB_PID, JOB_PID + 3, JOB_PID + 4) if state == "running" else ()
    return JobState(state=state, session="dflash-train", code=code, pid=JOB_PID - 1 if state == "running" else None,
                    pids=pids, started_at=started, uptime_s=now - started if state == "running" else None,
                    pane="%3", run_id="scene")


def build(kind: str = "healthy", *, minutes: float = 20.0, seed: int = 7, baseline: bool = True) -> Scene:
    """Feed a fresh Monitor with ``minutes`` of a run; ``kind`` picks the story."""
    from ..baseline.store import Baseline
    from ..monitor import Monitor
    from . import scene_health

    if kind not in ("healthy", "volatile", "crashed", "health"):
        raise ValueError(f"unknown scene {kind!r}")
    monitor = Monitor(tz=UTC, baseline=Baseline(BASELINE_TPS) if baseline else None)
    rng = random.Random(seed)
    span = int(minutes * 60)
    broken_at = max(span // 3, span - 420) if kind in ("volatile", "crashed") else None  # the last 7 minutes go wrong
    text: list[str] = []
    lineno = 1
    health = kind == "health"  # a NaN loss, a slow rank and a failing GPU on top (``scene_health``)
    hrng = random.Random(seed + 1)

    def emit(t: float, lines: list[str]) -> None:
        nonlocal lineno
        monitor.feed_text(LOG, "".join(line + "\n" for line in lines), lineno, t)
        lineno += len(lines)
        text.extend(lines)

    emit(T0, [
        _line(T0, "INFO", "dflash.train", f"Starting DFlash drafter training on gpu-node-07 (pid {JOB_PID})"),
        _line(T0, "INFO", "dflash.train", "target: meta-llama/Llama-3.3-70B-Instruct on cuda:0-4, drafter on cuda:5-7"),
        _line(T0 + 1, "INFO", "dflash.train", "torch.compile(drafter, mode='max-autotune-no-cudagraphs') done in 41.2s"),
        # A line with markup and escapes: the log view must show it as text.
        _line(T0 + 2, "INFO", "dflash.data", "tokenizer says [bold red]hi[/] \x1b[31mred\x1b[0m [link=http://x]x[/link]"),
    ])
    step = 1000
    next_step = T0 + 5.0
    for k in range(span + 1):
        t = T0 + k
        into = k - broken_at if broken_at is not None else -1  # seconds since it went wrong
        broken = into >= 0
        samples = []
        for gpu in range(N_GPUS):
            level = (63 if gpu in DRAFTERS else 71) * GIB + rng.randint(-15, 15) * MIB
            if broken and gpu in DRAFTERS:
                phase = (into // 9 + gpu) % 2
                level += (3 * GIB + rng.randint(0, 400) * MIB) if phase else -(5 * GIB + rng.randint(0, 400) * MIB)
            procs: tuple[GpuProcess, ...] = (GpuProcess(JOB_PID + (gpu > 4) * 3, level - 530 * MIB, "python", job=True),)
            if gpu == 3:
                procs += (GpuProcess(51877, 2 * GIB + 300 * MIB, "jupyter-kernel"),)
                level += 2 * GIB + 300 * MIB
            util = 0.97 - rng.random() * 0.04 if not (broken and gpu in DRAFTERS) else 0.35 + rng.random() * 0.4
            sample = GpuSample(t, gpu, level, TOTAL, round(util, 3), procs)
            samples.append(scene_health.with_health(sample, k, span, hrng) if health else sample)
        monitor.feed_samples(samples)
        if t >= next_step:
            rate = BASELINE_TPS * (1 + (rng.random() - 0.5) * 0.06)
            if broken:
                rate = 4_300.0 * (1 + (rng.random() - 0.5) * 0.1)
            step_s = 65536 / rate
            loss = 2.1 - step / 40_000
            eta = int((TOTAL_STEPS - step) * step_s)
            nan = health and scene_health.nan_step(k, span)
            if health:
                monitor.feed_probes(scene_health.rank_probes(t, step, float("nan") if nan else loss))
            emit(t, [_line(t, "INFO", "dflash.train",
                           f"step {step}/{TOTAL_STEPS} | loss {'nan' if nan else f'{loss:.3f}'} | acc_len 3.12 | accept 0.71 | "
                           f"{rate / 1000:.1f} Ktok/s | pad_eff {0.93 if not broken else 0.45:.2f} | lr 2.00e-04 | "
                           f"ETA {eta // 3600}:{eta // 60 % 60:02d}:{eta % 60:02d}")])
            if broken and into < 3:
                emit(t, [_line(t, "WARNING", "dflash.data", "length bucketing disabled: bucket file "
                                                            "/data/dflash/buckets/shard_0002.json not found, "
                                                            "falling back to random shuffle")])
            step += 1
            next_step = t + step_s
    now = T0 + span
    state = job_state("running", T0 - 95.0, now)
    if kind == "crashed":
        from ..demo import fx_traceback

        now += 1
        emit(now, [_line(now, "WARNING", "dflash.pipeline", "drafter-0: draft length 9216 exceeds the largest "
                                                            "captured block shape (8192); re-tracing the draft block")])
        emit(now, list(fx_traceback.render("drafter-0")))
        emit(now + 1, [_line(now + 1, "ERROR", "dflash.train", "drafter thread drafter-0 died; shutting down")])
        monitor.end_of_text(LOG, now + 1)
        now += 2
        monitor.feed_events([ProcessExit(now, kind="crash", code=1)])
        # The crash detector holds a crash briefly to gather every rank's copy.
        now += 10
        monitor.tick(now)
        state = job_state("exited", T0 - 95.0, now, code=1)
    monitor.set_job_state(state)
    return Scene(monitor=monitor, now=now, job_state=state, events=text)


@dataclass
class SceneSpec:
    command: str = "torchrun --nproc-per-node 8 train_dflash.py --config llama70b.yaml"
    session: str = "dflash-train"
    gpus: tuple[int, ...] | None = None
    grace_s: float = 30.0


class SceneJob:
    """A job controller for scenes and tests: answers with a fixed state and
    records what was asked, touching nothing (satisfies ``JobController``)."""

    def __init__(self, state: Any, *, available: bool = True, spec: SceneSpec | None = None,
                 fail: dict[str, BaseException] | None = None, adoption: Any = None) -> None:
        self.state = state
        self.spec = spec or SceneSpec()
        self._available = available
        self.fail = dict(fail or {})
        self.calls: list[str] = []
        self._adoption = adoption  # set: the pane was started by hand (a takeover scene)

    @property
    def available(self) -> bool:
        return self._available

    def status(self) -> Any:
        self.calls.append("status")
        return self.state

    def _act(self, name: str, on_step: Any, steps: list[str], state: str) -> Any:
        self.calls.append(name)
        if name in self.fail:
            raise self.fail[name]
        for message in steps:
            if on_step:
                on_step(message)
        import dataclasses

        self.state = dataclasses.replace(self.state, state=state, code=None if state == "running" else self.state.code)
        return self.state

    def start(self, on_step: Any = None) -> Any:
        return self._act("start", on_step, [f"created session {self.spec.session}"], "running")

    def abort(self, grace_s: float | None = None, on_step: Any = None) -> Any:
        return self._act("abort", on_step, ["sent Ctrl-C to pane %3; waiting up to 30 s", "stopped after Ctrl-C (2.1 s)"],
                         "exited")

    def relaunch(self, grace_s: float | None = None, on_step: Any = None) -> Any:
        return self._act("relaunch", on_step, [f"respawned pane %3 in {self.spec.session}"], "running")

    def adoption(self, state: Any = None) -> Any:
        self.calls.append("adoption")
        return self._adoption

    def take_over(self, adoption: Any, grace_s: float | None = None, command: str | None = None,
                  on_step: Any = None) -> Any:
        return self._act("take_over", on_step, [f"took over pane {adoption.pane} in {self.spec.session}"], "running")


def hand_started(pane: str = "%3") -> Any:
    """The takeover of a crashed run the user typed at a prompt in ``pane`` (for scenes and tests)."""
    from ..control.adopt import Adoption

    return Adoption(
        session="dflash-train", pane=pane, pane_pid=48190,
        command="torchrun --nproc-per-node 8 train_dflash.py --config llama70b.yaml 2>&1 | tee train.log",
        cwd="/home/ml/dflash", source="the last command line in the pane's history (the training already ended)",
        certain=False, replaces="the shell bash (pid 48190)", env=(("CUDA_VISIBLE_DEVICES", "0,1,2,3,4,5,6,7"),),
    )


def scene_proc_info(pid: int) -> tuple[str | None, str | None]:
    """(user, command) of a scene's pids, for the GPU process table: never this
    machine's /proc, where a pid of a scene may be any process at all."""
    if pid == 51877:
        return "bob", "/opt/conda/bin/python -m ipykernel_launcher -f kernel-51877.json"
    if pid in (JOB_PID, JOB_PID + 3):
        return "dflash", f"python train_dflash.py --config llama70b.yaml --local-rank {0 if pid == JOB_PID else 5}"
    return None, None
