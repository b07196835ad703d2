"""A simulated DFlash drafter training job: the managed process of ``dflash-watch demo``.

    python -m dflash_watch.demo.simulator --out DIR [--speed X] [--seed N]
        [--start-time T] [--max-sim-seconds S] [--fast] [--quiet]

It writes ``DIR/train.log`` (and mirrors it on stdout, as a job in a tmux
pane would) and ``DIR/gpu.jsonl`` (CONTRACTS section 3, 8 GPUs at 1 Hz of
simulated time), then plays the story of :mod:`dflash_watch.demo.story`.
``DIR/state.json`` counts launches, so running the same command again is a
relaunch: it resumes from the last checkpoint and stays healthy.

Simulated time is ``start_time + (wall - wall0) * speed``. All content is
generated on the simulated-time schedule from seeded streams, never per loop
iteration, so the wall clock only decides *when* bytes appear, not *which*.
``--speed 0``/``--fast`` writes the whole story at once (headless tests).
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import os
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from dflash_watch.demo import fx_traceback
from dflash_watch.demo import health as scene_health
from dflash_watch.demo.story import (
    N_GPUS,
    STORY,
    TOTAL_BYTES,
    GpuModel,
    Schedule,
    Step,
    Story,
)

LOG_NAME = "train.log"
GPU_NAME = "gpu.jsonl"
# What ``dflash_watch.probe`` would write in the real run (CONTRACTS section
# 9); the watcher finds ``dflash-probe-*.jsonl`` beside the log.
PROBE_NAME = "dflash-probe-rank0.jsonl"
STATE_NAME = "state.json"
RESTART_GAP_S = 20.0  # simulated seconds between a crash and the relaunch's first line
HOST = "gpu-node-07"
CKPT_DIR = "/ckpt/dflash-llama70b"
TARGET_MODEL = "meta-llama/Llama-3.3-70B-Instruct"
SHARD_FILES = 30
MAX_SLEEP_S = 0.1  # wall seconds: how long a signal may wait to be noticed


@dataclass(frozen=True, slots=True)
class Emit:
    """Text due at simulated time ``t`` (epoch seconds) on one stream."""

    t: float
    stream: str  # "log", "gpu", "probe" or "exit"
    text: str = ""
    code: int = 0


class LogWriter:
    """Formats lines the way the job's Python logging would."""

    def __init__(self, start: float) -> None:
        self.start = start

    def at(self, offset: float, level: str, logger: str, message: str) -> Emit:
        t = self.start + offset
        # Rounded, not truncated: t = start + 0.1 may land a hair under the
        # millisecond it means, and the GPU samples round the same way.
        seconds, ms = divmod(round(t * 1000), 1000)
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seconds))
        return Emit(t, "log", f"[{stamp},{ms:03d}] [{level}] [{logger}] {message}\n")

    def raw(self, offset: float, text: str) -> Emit:
        """Text printed without a timestamp (stderr of libraries, tracebacks, tqdm)."""
        return Emit(self.start + offset, "log", text)


def _tqdm_bar(desc: str, n: int, total: int, elapsed: float) -> str:
    frac = n / total
    filled = int(frac * 10)
    partial = " ▏▎▍▌▋▊▉"[int((frac * 10 - filled) * 8)] if filled < 10 else ""
    bar = ("█" * filled + partial).ljust(10)
    rate = n / elapsed if elapsed > 0 and n else 0.0
    left = (total - n) / rate if rate else 0.0

    def clock(s: float) -> str:
        return f"{int(s) // 60:02d}:{int(s) % 60:02d}"

    if n == 0:
        return f"{desc}:   0%|          | 0/{total} [00:00<?, ?it/s]"
    return f"{desc}: {frac:4.0%}|{bar}| {n}/{total} [{clock(elapsed)}<{clock(left)}, {rate:5.2f}it/s]"


def _tqdm(w: LogWriter, start: float, duration: float, desc: str, total: int, updates: int) -> Iterator[Emit]:
    """A tqdm bar redrawn with ``\\r`` over ``duration`` simulated seconds."""
    yield w.raw(start, _tqdm_bar(desc, 0, total, 0.0))
    for k in range(1, updates + 1):
        n = round(total * k / updates)
        elapsed = duration * k / updates
        end = "\n" if k == updates else ""
        yield w.raw(start + elapsed, "\r" + _tqdm_bar(desc, n, total, elapsed) + end)


def _hms(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


def progress_line(step: Step, story: Story, loss: str | None = None) -> str:
    loss = f"{step.loss:.3f}" if loss is None else loss
    return (
        f"step {step.index}/{story.total_steps} | loss {loss} | acc_len {step.acc_len:.2f}"
        f" | accept {step.accept:.2f} | {step.tokens_per_s / 1000:.1f} Ktok/s | pad_eff {step.pad_eff:.2f}"
        f" | lr {step.lr:.2e} | ETA {_hms(step.eta_s)}"
    )


def _startup(w: LogWriter, story: Story, pid: int, resume_step: int) -> Iterator[Emit]:
    yield w.at(0.0, "INFO", "dflash.train", f"Starting DFlash drafter training on {HOST} (pid {pid})")
    config = [
        "Config:",
        f"  target_model: {TARGET_MODEL}",
        "  target_devices: cuda:0-4 (tensor parallel 5)",
        "  drafter: {layers: 5, hidden: 8192, block_size: 16, devices: cuda:5-7 (data parallel 3)}",
        "  data: /data/dflash/shards/shard_{:04d}.jsonl (16 shards)",
        "  batching: {mode: length_bucketed, token_budget: 65536, buckets: /data/dflash/buckets/shard_{:04d}.json}",
        f"  optim: {{name: adamw, lr: {story.peak_lr:.1e}, warmup_steps: {story.lr_warmup_steps}, schedule: cosine}}",
        f"  total_steps: {story.total_steps}",
        f"  save_every: {story.save_every}",
        f"  eval_every: {story.eval_every}",
        f"  output_dir: {CKPT_DIR}",
        "  compile: {enabled: true, mode: max-autotune-no-cudagraphs}",
    ]
    yield w.at(0.1, "INFO", "dflash.train", config[0])
    for line in config[1:]:
        yield w.raw(0.1, line + "\n")
    nccl = f"{HOST}:{pid}:{pid}"
    yield w.at(1.2, "INFO", "dflash.dist", "Initializing NCCL communicators: target group [0, 1, 2, 3, 4], drafter group [5, 6, 7]")
    yield w.raw(1.3, f"{nccl} [0] NCCL INFO Bootstrap: Using eth0:10.42.0.17<0>\n")
    yield w.raw(1.3, f"{nccl} [0] NCCL INFO NCCL version 2.27.3+cuda12.9\n")
    yield w.raw(1.5, f"{nccl} [0] NCCL INFO Channel 00/24 :    0   1   2   3   4\n")
    yield w.raw(1.6, f"{nccl} [5] NCCL INFO Channel 00/24 :    0   1   2\n")
    yield w.raw(2.1, f"{nccl} [0] NCCL INFO Connected all rings, use ring PXN 0 GDR 1\n")
    for g in range(N_GPUS):
        rank, n = (g, 5) if g < 5 else (g - 5, 3)
        yield w.raw(2.4 + 0.05 * g, f"{nccl} [{g}] NCCL INFO comm 0x55d3c{g}a0 rank {rank} nranks {n} cudaDev {g} nvmlDev {g} busId {0x18 + 0x10 * g:x}000 commId 0x{0x5e1f9a7c + g * 977:x} - Init COMPLETE\n")
    yield w.at(3.0, "INFO", "dflash.train", f"Loading target model {TARGET_MODEL} over cuda:0-4")
    yield from _tqdm(w, 8.0, story.load_done_s - 9.0, "Loading checkpoint shards", SHARD_FILES, SHARD_FILES)
    yield w.at(story.load_done_s, "INFO", "dflash.train", f"Target model loaded in {story.load_done_s - 3.2:.1f}s ({story.target_weights_bytes / 2**30:.1f} GiB per GPU)")
    yield w.at(story.load_done_s + 1.0, "INFO", "dflash.train", "Drafter: 5 layers, block_size 16, 1.93B trainable parameters on cuda:5-7")
    shard = 1
    if resume_step:
        shard = 2
        yield w.at(story.load_done_s + 2.0, "INFO", "dflash.train", f"Resuming from checkpoint {CKPT_DIR}/step_{resume_step:06d} (step {resume_step})")
    yield w.at(story.load_done_s + 3.0, "INFO", "dflash.data", f"Dataset shard {shard}/16: 50,778 samples, 75.6M tokens")
    yield w.at(story.load_done_s + 3.1, "INFO", "dflash.data", f"Loaded bucket boundaries from /data/dflash/buckets/shard_{shard:04d}.json: [512, 1024, 2048, 3072, 4096, 8192]")
    yield w.at(story.load_done_s + 3.2, "INFO", "dflash.data", "Length-bucketed token-budget batching: budget 65536 tokens, 6 buckets, 3 workers")
    yield w.at(story.load_done_s + 5.0, "INFO", "dflash.train", "Compiling drafter layers with torch.compile(mode='max-autotune-no-cudagraphs'); the first step will be slow")
    warn = f"{fx_traceback.TORCH}/_inductor/compile_fx.py:321: UserWarning: TensorFloat32 tensor cores for float32 matrix multiplication available but not enabled. Consider setting `torch.set_float32_matmul_precision('high')` for better performance.\n  warnings.warn(\n"
    yield w.raw(story.load_done_s + 12.0, warn)
    kernels = [
        "ACC_TYPE='tl.float32', ALLOW_TF32=False, BLOCK_K=64, BLOCK_M=128, BLOCK_N=128, EVEN_K=True, GROUP_M=8, num_stages=3, num_warps=8",
        "ACC_TYPE='tl.float32', ALLOW_TF32=False, BLOCK_K=64, BLOCK_M=128, BLOCK_N=256, EVEN_K=True, GROUP_M=8, num_stages=3, num_warps=8",
        "ACC_TYPE='tl.float32', ALLOW_TF32=False, BLOCK_K=32, BLOCK_M=64, BLOCK_N=128, EVEN_K=True, GROUP_M=8, num_stages=4, num_warps=4",
    ]
    for k, (sizes, best, secs) in enumerate(
        [("4096x8192, 8192x28672", 0.4107, 3.1842), ("4096x28672, 28672x8192", 0.4239, 2.9716)]
    ):
        t = story.load_done_s + 22.0 + 14.0 * k
        text = f"AUTOTUNE mm({sizes})\nstrides: [8192, 1], [1, 8192]\ndtypes: torch.bfloat16, torch.bfloat16\n"
        text += f"  triton_mm_{17 + k} {best:.4f} ms 100.0% {kernels[0]}\n"
        text += f"  mm {best * 1.04:.4f} ms {1 / 1.04:.1%} \n"
        text += f"  triton_mm_{21 + k} {best * 1.11:.4f} ms {1 / 1.11:.1%} {kernels[1]}\n"
        text += f"  triton_mm_{9 + k} {best * 1.37:.4f} ms {1 / 1.37:.1%} {kernels[2]}\n"
        text += f"SingleProcess AUTOTUNE benchmarking takes {secs:.4f} seconds and {secs * 0.31:.4f} seconds precompiling for 20 choices\n"
        yield w.raw(t, text)
    yield w.at(story.first_step_s - 1.0, "INFO", "dflash.train", f"torch.compile finished in {story.first_step_s - story.load_done_s - 6.0:.1f}s")


def log_events(story: Story, schedule: Schedule, w: LogWriter, pid: int, incarnation: int, resume_step: int,
               scene: str = "story") -> Iterator[Emit]:
    """Every log line of one launch, in simulated-time order."""
    health = scene_health.active(scene, incarnation)
    nan = scene_health.nan_steps(story, schedule) if health else frozenset()
    yield from _startup(w, story, pid, resume_step)
    last_data_note = story.first_step_s
    broke_noted = False
    for step in schedule:
        if incarnation == 1 and not broke_noted and step.end >= story.broken_at:
            broke_noted = True
            b = story.broken_at
            yield w.at(b, "INFO", "dflash.data", "Shard 1/16 exhausted; rotating to /data/dflash/shards/shard_0002.jsonl")
            yield w.at(b + 0.4, "WARNING", "dflash.data", "length bucketing disabled: bucket file /data/dflash/buckets/shard_0002.json not found, falling back to random shuffle")
        if step.end - last_data_note >= 120.0:
            last_data_note = step.end
            b = story.breakage(step.end, incarnation)
            ready = 8 if b < 0.5 else 2
            yield w.at(step.end - 0.5, "INFO", "dflash.data", f"prefetch queue {ready}/8 batches ready (3 workers)")
        yield w.at(step.end, "INFO", "dflash.train", progress_line(step, story, scene_health.loss_text(step, nan)))
        if health and step.index % scene_health.RANK_LINE_EVERY == 0:
            for rank in range(len(scene_health.DRAFTER_RANK_GPUS)):  # every drafter rank's own line
                yield w.raw(step.end, scene_health.rank_line(step, rank, story))
        t = step.end
        if step.evaluate:
            yield w.at(t + 0.1, "INFO", "dflash.train", f"Running eval ({story.eval_batches} batches)")
            yield from _tqdm(w, t + 0.2, story.eval_s - 0.4, "Eval", story.eval_batches, 8)
            yield w.at(t + story.eval_s - 0.1, "INFO", "dflash.train", f"eval: loss {step.loss + 0.08:.3f} | acc_len {step.acc_len - 0.06:.2f} | accept {step.accept - 0.01:.2f}")
            t += story.eval_s
        if step.save:
            path = f"{CKPT_DIR}/step_{step.index:06d}"
            yield w.at(t + 0.05, "INFO", "dflash.train", f"Saving checkpoint to {path}")
            yield w.at(t + story.save_s - 0.1, "INFO", "dflash.train", f"Checkpoint saved: {path} (7.2 GiB, {story.save_s - 0.2:.1f}s)")
    if incarnation != 1:
        return
    # The schedule ends at the crash: a sequence longer than any captured
    # block (random shuffle let it through) makes the drafter re-trace.
    c = story.crash_at
    yield w.at(c - 0.6, "WARNING", "dflash.pipeline", "drafter-0: draft length 9216 exceeds the largest captured block shape (8192); re-tracing the draft block")
    yield w.raw(c, "".join(line + "\n" for line in fx_traceback.render("drafter-0")))
    # Worded without "step N": a progress parser must not read it as progress.
    yield w.at(c + 0.4, "ERROR", "dflash.train", "drafter thread drafter-0 died; shutting down")
    yield w.at(c + 0.5, "ERROR", "dflash.train", "Training aborted: RuntimeError in drafter-0 (see traceback above)")
    yield Emit(w.start + c + 1.0, "exit", code=1)


def gpu_events(story: Story, schedule: Schedule, seed: int, start: float, pid: int,
               scene: str = "story") -> Iterator[Emit]:
    """One sample per GPU per simulated second while the process lives."""
    import random

    model = GpuModel(story, schedule, seed)
    health = scene_health.active(scene, schedule.incarnation)
    hrng = random.Random(f"health:{seed}")
    end = story.crash_at + 1.0 if schedule.incarnation == 1 else math.inf
    k = 0
    while k < end:
        for gpu in range(N_GPUS):
            used, util = model.sample(gpu, float(k))
            procs = []
            if k >= 3:
                procs = [{"pid": pid, "used_bytes": used - story.idle_bytes, "name": "python"}]
            line = {"time": round(start + k, 3), "gpu": gpu, "used_bytes": used, "total_bytes": TOTAL_BYTES, "util": util, "processes": procs}
            if health:
                line.update(scene_health.gpu_health_fields(gpu, float(k), hrng))
            yield Emit(start + k, "gpu", json.dumps(line) + "\n")
        k += 1


def probe_events(story: Story, schedule: Schedule, seed: int, start: float, scene: str = "story") -> Iterator[Emit]:
    """One probe line per step, as ``Probe.step(batch, attention_mask)`` writes them.

    The budget of a batch is ``tokens_per_step`` padded tokens; the real ones
    follow the story's padding efficiency. The allocator's retry counter
    (``num_alloc_retries``, cumulative) climbs once bucketing is broken: the
    drafter GPUs' batches change shape every step, the caching allocator
    cannot reuse its blocks, frees its cache and retries, which is the
    mechanism behind their swinging memory.
    """
    import random

    rng = random.Random(f"probe:{seed}:{schedule.incarnation}")
    retries = 0
    health = scene_health.active(scene, schedule.incarnation)
    ranks = scene_health.rank_probe_lines(story, schedule, start, scene_health.nan_steps(story, schedule)) if health else iter(())
    pending = next(ranks, None)
    for step in schedule:
        b = story.breakage(step.end, schedule.incarnation)
        if b > 0.3:
            retries += rng.randint(1, 3)
        padded = story.tokens_per_step
        seq_len = 8192 if b > 0.5 else 2432
        line = {
            "time": round(start + step.end, 3), "rank": 0, "step": step.index,
            "tokens": int(padded * step.pad_eff), "padded_tokens": padded,
            "batch_size": padded // seq_len, "seq_len": seq_len,
            "alloc_retries": retries, "recompiles": 0, "graph_breaks": 0,
        }
        # The health scene: each drafter rank's step split (and rank 0's
        # loss), rank 0's in this line, the others' in their own files.
        while pending is not None and pending[0] <= start + step.end:
            _, rank, text = pending
            if rank == 0:
                line.update(json.loads(text))
            else:
                yield Emit(pending[0], f"probe{rank}", text)
            pending = next(ranks, None)
        yield Emit(start + step.end, "probe", json.dumps(line) + "\n")


def _read_state(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _write_state(path: Path, state: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, sort_keys=True) + "\n")
    os.replace(tmp, path)


class _Stop(Exception):
    pass


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m dflash_watch.demo.simulator", description="Simulated DFlash drafter training run.")
    p.add_argument("--out", required=True, type=Path, help="directory for train.log, gpu.jsonl and state.json")
    p.add_argument("--speed", type=float, default=10.0, help="simulated seconds per wall second; 0 = no sleeping")
    p.add_argument("--fast", action="store_true", help="same as --speed 0")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--start-time", type=float, default=None, help="epoch seconds of the launch on the simulated clock (default: now, after any earlier launch)")
    p.add_argument("--max-sim-seconds", type=float, default=None, help="stop cleanly (exit 0) after this many simulated seconds")
    p.add_argument("--incarnation", type=int, default=None, help="play this launch number instead of the one state.json implies")
    p.add_argument("--quiet", action="store_true", help="do not mirror the log on stdout")
    p.add_argument("--scene", choices=scene_health.SCENES, default="story",
                   help="story: the seed's story; health: plus a NaN loss, a straggler rank and a GPU Xid")
    args = p.parse_args(argv)
    if args.fast:
        args.speed = 0.0
    if args.speed < 0:
        p.error("--speed must be >= 0")
    return args


def run(args: argparse.Namespace, story: Story = STORY) -> int:
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    state_path = out / STATE_NAME
    state = _read_state(state_path)
    incarnation = args.incarnation or int(state.get("launches", 0)) + 1
    resume_step = int(state.get("last_checkpoint", 0)) if incarnation > 1 else 0
    start = args.start_time
    if start is None:
        start = max(time.time(), float(state.get("sim_end", 0.0)) + RESTART_GAP_S)
    start = round(start, 3)  # log stamps and sample times are both to the millisecond
    pid = os.getpid()
    state.update(launches=max(incarnation, int(state.get("launches", 0))), sim_end=start)
    _write_state(state_path, state)

    schedule = Schedule(story, args.seed, incarnation, first_step=resume_step + 1)
    writer = LogWriter(start)
    events = heapq.merge(
        log_events(story, schedule, writer, pid, incarnation, resume_step, args.scene),
        gpu_events(story, schedule, args.seed, start, pid, args.scene),
        probe_events(story, schedule, args.seed, start, args.scene),
        key=lambda e: e.t,
    )
    stop_signal: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        stop_signal.append(signum)
        raise _Stop

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    echo: TextIO | None = None if args.quiet else sys.stdout
    limit = start + args.max_sim_seconds if args.max_sim_seconds is not None else math.inf
    wall0 = time.monotonic()
    last_t = start
    code = 0
    log_open = True  # the log ends in a newline (no tqdm bar mid-line)
    with (
        open(out / LOG_NAME, "a", encoding="utf-8") as log,
        open(out / GPU_NAME, "a", encoding="utf-8") as gpu,
        open(out / PROBE_NAME, "a", encoding="utf-8") as probe,
    ):
        sinks: dict[str, TextIO] = {"gpu": gpu, "probe": probe}
        if args.scene == "health":  # the other ranks' probe files, opened only by the scene that writes them
            for rank in (1, 2):
                sinks[f"probe{rank}"] = open(out / PROBE_NAME.replace("rank0", f"rank{rank}"), "a", encoding="utf-8")

        def mirror(action: str, text: str = "") -> None:
            # The pane may be gone (tmux killed, pipe closed): the job goes on
            # writing its log, as a real one whose stdout vanished would.
            nonlocal echo
            if echo is None:
                return
            try:
                echo.write(text) if action == "write" else echo.flush()
            except (OSError, ValueError):
                echo = None

        def flush() -> None:
            log.flush()
            for sink in sinks.values():
                sink.flush()
            mirror("flush")

        def write_log(text: str) -> None:
            nonlocal log_open
            log.write(text)
            mirror("write", text)
            log_open = text.endswith("\n")

        try:
            pending = next(events, None)
            while pending is not None:
                now = math.inf if args.speed == 0 else start + (time.monotonic() - wall0) * args.speed
                horizon = min(now, limit)
                while pending is not None and pending.t <= horizon:
                    if pending.stream == "exit":
                        code = pending.code
                        last_t = pending.t
                        pending = None
                        break
                    if pending.stream == "log":
                        write_log(pending.text)
                    else:
                        sinks[pending.stream].write(pending.text)
                    last_t = pending.t
                    pending = next(events, None)
                flush()
                if pending is None:
                    break
                if pending.t > limit:
                    last_t = limit
                    if not log_open:
                        write_log("\n")
                    step = schedule.steps[-1].index if schedule.steps else resume_step
                    write_log(writer.at(limit - start, "INFO", "dflash.train", f"Time budget reached at step {step}; stopping").text)
                    flush()
                    break
                time.sleep(min(MAX_SLEEP_S, (pending.t - now) / args.speed))
        except _Stop:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            signum = stop_signal[-1]
            code = 128 + signum
            if args.speed:
                last_t = max(last_t, min(limit, start + (time.monotonic() - wall0) * args.speed))
            if not log_open:
                write_log("\n")
            name = signal.Signals(signum).name
            write_log(writer.at(last_t - start, "WARNING", "dflash.train", f"Received {name}; exiting").text)
            flush()
        finally:
            for s, handler in old.items():
                signal.signal(s, handler)
            for name, sink in sinks.items():
                if name.startswith("probe") and sink is not probe:
                    sink.close()
    saved = [p.step for p in schedule.pauses if p.kind == "save" and start + p.end <= last_t]
    if saved:
        state["last_checkpoint"] = saved[-1]
    state["sim_end"] = last_t
    _write_state(state_path, state)
    return code


def main(argv: list[str] | None = None) -> int:
    return run(parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
