"""Health lines (issue 19): fp16 overflows, heartbeats, eval/checkpoint phases
and kernel Xid lines, read by ``parsers.health_lines`` and through the real
``LogStream`` (so replay and the live tailer both get them).

The strings are the frameworks' own: DeepSpeed's ``loss_scaler.py``,
``fused_optimizer.py``, ``unfused_optimizer.py`` and checkpoint engine,
apex amp and ``FP16_Optimizer`` (older Megatron printed the same), fairseq,
HF Trainer, torchtitan, Megatron-LM's checkpointing, the Linux kernel's
NVRM driver, and a Lightning ``TQDMProgressBar`` run recorded here (torch
2.13.0 CPU, lightning 2.x: its validation bar lines end in ``ESC[A``).
"""

from __future__ import annotations

import random

import pytest

from dflash_watch.parsers.events import Heartbeat, Overflow, Phase, Progress, XidError
from dflash_watch.parsers.health_lines import (
    HEARTBEAT_LITERALS,
    OVERFLOW_LITERALS,
    PHASE_LITERALS,
    XID_LITERALS,
    health_line,
    heartbeat_line,
    overflow_line,
    phase_line,
    xid_line,
)
from dflash_watch.parsers.ranks import split_rank
from dflash_watch.parsers.stream import LogStream

TS = "[2023-08-02 00:41:17,526] [INFO] "

# (line, rank, scale, new_scale)
OVERFLOWS = [
    (TS + "[loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. "
     "Attempted loss scale: 65536, reducing to 32768", 0, 65536.0, 32768.0),
    (TS + "[loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. "
     "Attempted loss scale: 4294967296, reducing to 2147483648", 0, 4294967296.0, 2147483648.0),
    (TS + "[loss_scaler.py:190:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. "
     "Attempted loss scale: 4294967296, but hysteresis is 2. Reducing hysteresis to 1", 0, 4294967296.0, None),
    ("[deepspeed] OVERFLOW! Rank 0 Skipping step. Reducing loss scale to 32768.0", 0, None, 32768.0),
    (TS + "[unfused_optimizer.py:207:step] [deepspeed] fp16 dynamic loss scale overflow! Skipping step. "
     "Attempted loss scale: 65536.0, reducing to 32768.0", None, 65536.0, 32768.0),
    ("[deepspeed] fp16 dynamic loss scale overflow! Rank 3 Skipping step. Attempted loss scale: 1024, "
     "reducing to 512", 3, 1024.0, 512.0),
    ("OVERFLOW! Skipping step. Attempted loss scale: 4294967296, reducing to 2147483648", None,
     4294967296.0, 2147483648.0),
    (TS + "[logging.py:96:log_dist] [Rank 0] Overflow detected. Skipping step. Attempted loss scale: 65536, "
     "reducing to 32768.0", 0, 65536.0, 32768.0),
    ("Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 32768.0", None, None, 32768.0),
    ("[1,1]<stdout>:Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 4096.0", 1, None,
     4096.0),
    ("Rank 1 :: Gradient overflow.  Skipping step, reducing loss scale to 16384.0", 1, None, 16384.0),
    (TS + "[fused_optimizer.py:347:_update_scale] Grad overflow on iteration 1234", None, None, None),
    (TS + "[unfused_optimizer.py:281:_update_scale] Grad overflow on iteration: 4", None, None, None),
    ("2026-11-29 10:00:00 | INFO | fairseq.trainer | NOTE: overflow detected, setting loss scale to: 64.0",
     None, None, 64.0),
]

# (line, rank, last_step, waiting_in)
HEARTBEATS = [
    ("no step for 60 s (last step 537), waiting in all_reduce", None, 537, "all_reduce"),
    ("2026-11-29 10:01:02,000 WARNING watchdog: no step for 60 s (last step 537), waiting in all_reduce",
     None, 537, "all_reduce"),
    ("[rank3]: heartbeat: still at step 537, waiting in all_reduce", 3, 537, "all_reduce"),
    ("[default5]:[rank5]: no step for 120 s (last step 88), waiting in broadcast", 5, 88, "broadcast"),
    ("rank 2 stuck at step 1200, waiting for allgather_into_tensor_coalesced", 2, 1200,
     "allgather_into_tensor_coalesced"),
    ("[c10d] rank=7 heartbeat last_step=41 waiting on barrier", 7, 41, "barrier"),
]

# (line, phase, begin)
PHASES = [
    ("***** Running Evaluation *****", "eval", True),
    ("[INFO|trainer.py:3158] 2024-03-01 10:00:00,000 >> ***** Running Evaluation *****", "eval", True),
    ("{'eval_loss': 0.5123, 'eval_runtime': 1.2, 'eval_samples_per_second': 100.0, 'epoch': 1.0}", "eval", False),
    ('{"eval_loss": 0.5123, "step": 500}', "eval", False),
    ("***** eval metrics *****", "eval", False),
    ("Validation: |          | 0/? [00:00<?, ?it/s]", "eval", True),
    ("Validation DataLoader 0:  50%|█████     | 4/8 [00:00<00:00, 501.67it/s]", "eval", True),
    ("[INFO|trainer.py:3800] 2024-03-01 10:00:00,000 >> Saving model checkpoint to out/checkpoint-500",
     "checkpoint", True),
    ("07/15/2023 07:30:42 - INFO - pet.core.trainer - Saving model checkpoint to checkpoint_WebQSP",
     "checkpoint", True),
    (TS + "[logging.py:96:log_dist] [Rank 0] Saving model checkpoint: /ckpt/global_step500/mp_rank_00_model_states.pt",
     "checkpoint", True),
    (TS + "[torch_checkpoint_engine.py:21:save] [Torch] Checkpoint global_step500 is about to be saved!",
     "checkpoint", True),
    (TS + "[logging.py:96:log_dist] [Rank 0] [Torch] Checkpoint global_step500 is begin to save!",
     "checkpoint", True),
    (TS + "[torch_checkpoint_engine.py:33:commit] [Torch] Checkpoint global_step500 is ready now!",
     "checkpoint", False),
    ("[rank0]:[titan] 2025-01-01 10:00:00,000 - root - INFO - Saving the checkpoint (or staging if async is "
     "enabled).", "checkpoint", True),
    ("[rank0]:[titan] 2025-01-01 10:00:02,000 - root - INFO - [GC] Finished saving the checkpoint (or staging if "
     "async is enabled)in 2.35 seconds.", "checkpoint", False),
    ("saving checkpoint at iteration     100 to /ckpt in torch format", "checkpoint", True),
    ("  successfully saved checkpoint from iteration     100 to /ckpt", "checkpoint", False),
]

# (line, code, pci_bus, message)
XIDS = [
    ("NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.", 79, "0000:3b:00",
     "GPU has fallen off the bus."),
    ("[12345.678] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.", 79,
     "0000:3b:00", "GPU has fallen off the bus."),
    ("Dec  2 02:00:00 node7 kernel: NVRM: Xid (PCI:0000:ca:00): 13, pid='<unknown>', name=<unknown>, "
     "Graphics SM Warp Exception on (GPC 0, TPC 0, SM 0): Out Of Range Address", 13, "0000:ca:00",
     "Graphics SM Warp Exception on (GPC 0, TPC 0, SM 0): Out Of Range Address"),
    ("[Mon Dec  1 10:00:00 2026] NVRM: Xid (PCI:0000:65:00): 48, An uncorrectable double bit error (DBE) has "
     "been detected on GPU in the framebuffer at partition 0, subpartition 0.", 48, "0000:65:00",
     "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 0, "
     "subpartition 0."),
]

# Lines that must give no health event at all.
NEGATIVES = [
    "2026-11-29 10:00:00,000 step 537 | loss 2.31 | lr 3e-4 | tok/s 21500",
    " iteration      100/  500000 | consumed samples:        51200 | elapsed time per iteration (ms): 1000.0 | "
    "learning rate: 1.0E-04 | global batch size:   512 | lm loss: 5.0E+00 | loss scale: 65536.0 | grad norm: "
    "1.0 | number of skipped iterations:   1 | number of nan iterations:   0 |",
    "{'loss': 2.31, 'grad_norm': 1.2, 'learning_rate': 1e-05, 'epoch': 0.5}",
    "Epoch 0: 100%|██████████| 8/8 [00:00<00:00, 292.28it/s, train_loss=1.930]",
    " 50%|█████     | 500/1000 [01:00<01:00,  8.33it/s]",  # HF's eval bar has no name: not told apart
    "100%|██████████| 63/63 [00:02<00:00, 25.0it/s]",
    "Step 01000 | Validation bpb: 0.9992",
    "setting validation data start iteration to 0",
    "Waiting for dataset download to complete...",
    "wandb: Waiting for W&B process to finish, PID 1637153... (failed 1). Press ctrl-c to abort syncing.",
    "srun: Job step aborted: Waiting up to 62 seconds for job step to finish.",
    "tokenizer: return_overflowing_tokens=False, stride=0",
    "[2024-01-01 10:00:00] [INFO] [config.py:1000:print] overflow_check timers: 0.01",
    "Loading checkpoint shards: 100%|██████████| 2/2 [00:01<00:00,  1.50it/s]",
    "[rank0]: step 537 | loss 2.31 | heartbeat_interval 30",
    "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15",
    "2026-11-29 10:00:00 epoch 1 at step 500: loss 2.1 (waiting for eval)",
    "step 500 current_step=500 waiting_for_data=0.01",
]


def _split(line: str) -> tuple[str, int | None]:
    """(text, rank) as the readers take them: the stream splits the rank
    prefix once (``parsers.ranks``) and hands them the rest and its rank."""
    rank, text = split_rank(line)
    return text, rank


@pytest.mark.parametrize("line,rank,scale,new_scale", OVERFLOWS)
def test_overflow_lines(line: str, rank: int | None, scale: float | None, new_scale: float | None) -> None:
    assert any(lit in line for lit in OVERFLOW_LITERALS)
    event = overflow_line(*_split(line))
    assert event == Overflow(0.0, "", rank, scale, new_scale)
    found = health_line(*_split(line))
    assert found is not None and found[0] == event


@pytest.mark.parametrize("line,rank,last_step,waiting_in", HEARTBEATS)
def test_heartbeat_lines(line: str, rank: int | None, last_step: int, waiting_in: str | None) -> None:
    assert any(lit in line for lit in HEARTBEAT_LITERALS)
    assert heartbeat_line(*_split(line)) == Heartbeat(0.0, "", rank, last_step, waiting_in)
    assert health_line(*_split(line)) == (Heartbeat(0.0, "", rank, last_step, waiting_in), True)


@pytest.mark.parametrize("line,phase,begin", PHASES)
def test_phase_lines(line: str, phase: str, begin: bool) -> None:
    assert any(lit in line for lit in PHASE_LITERALS)
    event = phase_line(*_split(line))
    assert event is not None and (event.phase, event.begin) == (phase, begin)
    found = health_line(*_split(line))
    assert found is not None and found[0] == event


@pytest.mark.parametrize("line,code,pci_bus,message", XIDS)
def test_xid_lines(line: str, code: int, pci_bus: str, message: str) -> None:
    assert any(lit in line for lit in XID_LITERALS)
    assert xid_line(line) == XidError(0.0, code, None, message, pci_bus, "")


@pytest.mark.parametrize("line", NEGATIVES)
def test_lines_that_are_no_health_event(line: str) -> None:
    assert health_line(*_split(line)) is None
    assert overflow_line(*_split(line)) is None and heartbeat_line(*_split(line)) is None
    assert phase_line(*_split(line)) is None and xid_line(line) is None


def _stamp(i: int) -> str:
    return f"2026-11-29 10:{i // 60 % 60:02d}:{i % 60:02d},000"


def _mixed_log() -> tuple[str, list[tuple[int, object]]]:
    """300 progress lines (the stream's column reading takes them) with one
    line of each health form among them; the line number and event wanted."""
    health: list[tuple[str, object]] = (
        [(line, Overflow(0.0, "", r, s, n)) for line, r, s, n in OVERFLOWS if "overflow on iteration" not in line]
        + [(line, Heartbeat(0.0, "", r, ls, w)) for line, r, ls, w in HEARTBEATS]
        + [(line, (p, b)) for line, p, b in PHASES]
        + [(line, XidError(0.0, c, None, m, pci, "")) for line, c, pci, m in XIDS]
    )
    lines, wanted = [], []
    every = 300 // len(health)
    for i in range(300):
        lines.append(f"{_stamp(i)} step {i} | loss 2.31 | lr 3e-4\n")
        if i % every == every - 1 and health:
            line, want = health.pop(0)
            lines.append(line + "\n")
            wanted.append((len(lines), want))
    assert not health
    return "".join(lines), wanted


def _events(text: str, fast: bool, cuts: list[int] | None = None) -> list[object]:
    stream = LogStream("train.log", fast=fast, replay=True)
    events: list[object] = []
    lineno, pos = 1, 0
    for cut in [*(cuts or []), len(text)]:
        chunk = text[pos:cut]
        if chunk:
            events += stream.feed(chunk, lineno, 0.0)
            lineno += chunk.count("\n")
        pos = cut
    return events + stream.flush(0.0)


def _same(got: object, want: object) -> bool:
    if isinstance(want, tuple):
        return type(got) is Phase and (got.phase, got.begin) == want
    assert isinstance(got, (Overflow, Heartbeat, XidError))
    return type(got) is type(want) and got == type(got)(**{  # type: ignore[arg-type]
        **{f: getattr(want, f) for f in want.__slots__}, "time": got.time, "source": got.source,
    })


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "line-by-line"])
def test_each_family_through_the_stream(fast: bool) -> None:
    text, wanted = _mixed_log()
    events = _events(text, fast)
    health = [e for e in events if type(e) in (Overflow, Heartbeat, Phase, XidError)]
    assert [e.source for e in health] == [f"train.log:{n}" for n, _ in wanted]  # type: ignore[attr-defined]
    for got, (_, want) in zip(health, wanted):
        assert _same(got, want), (got, want)
    # Dated like any line: by their own stamp, else the last one before them.
    for e in health:
        assert e.time >= 1764410400.0 - 86400  # type: ignore[attr-defined]
    # Training progress is untouched: every step once, in order, and the
    # heartbeats (which repeat a step) and marker lines gave none.
    steps = [e.step for e in events if type(e) is Progress]
    assert steps == list(range(300))


def test_chunk_boundaries_do_not_change_the_events() -> None:
    text, _ = _mixed_log()
    whole = _events(text, True)
    rng = random.Random(19)
    for _ in range(3):
        cuts = sorted(rng.sample(range(1, len(text)), 12))
        cuts = [text.rfind("\n", 0, c) + 1 for c in cuts]
        assert _events(text, True, cuts) == whole


def test_a_heartbeat_is_not_progress() -> None:
    """Today's bug: "no step for 60 s (last step 537)" was read as step 537
    at the heartbeat's time, which delayed the stall by a minute."""
    text = (
        "".join(f"{_stamp(i)} step {i} | loss 2.31\n" for i in range(530, 538))
        + "2026-11-29 10:10:00,000 no step for 60 s (last step 537), waiting in all_reduce\n"
        + "2026-11-29 10:11:00,000 [rank3]: heartbeat: still at step 537, waiting in all_reduce\n"
    )
    for fast in (True, False):
        events = _events(text, fast)
        progress = [e for e in events if type(e) is Progress]
        assert [p.step for p in progress] == list(range(530, 538))
        beats = [e for e in events if type(e) is Heartbeat]
        assert [(b.rank, b.last_step, b.waiting_in, b.source) for b in beats] == [
            (None, 537, "all_reduce", "train.log:9"), (3, 537, "all_reduce", "train.log:10"),
        ]
        # Dated by their own stamps (10:08:57 the last step, 10:10:00, 10:11:00).
        assert beats[0].time - progress[-1].time == pytest.approx(63.0)
        assert beats[1].time - beats[0].time == pytest.approx(60.0)


def test_verbose_deepspeed_overflow_is_one_overflow() -> None:
    """DeepSpeed's fused optimizer (verbose) tells one overflow in three lines;
    consecutive overflow lines of a storm are each one."""
    text = (
        "[2023-11-06 11:54:09,446] [INFO] [fused_optimizer.py:347:_update_scale] \n"
        "Grad overflow on iteration 0\n"
        "[2023-11-06 11:54:09,446] [INFO] [fused_optimizer.py:348:_update_scale] Reducing dynamic loss scale "
        "from 65536 to 32768.0\n"
        "[2023-11-06 11:54:09,446] [INFO] [logging.py:96:log_dist] [Rank 0] Overflow detected. Skipping step. "
        "Attempted loss scale: 65536, reducing to 32768.0\n"
        + "".join(
            f"[2023-08-02 00:41:17,{500 + i}] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! "
            f"Rank 0 Skipping step. Attempted loss scale: {2 ** (20 - i)}, reducing to {2 ** (19 - i)}\n"
            for i in range(3)
        )
    )
    for fast in (True, False):
        overflows = [e for e in _events(text, fast) if type(e) is Overflow]
        assert [(o.source, o.scale) for o in overflows] == [
            ("train.log:2", None), ("train.log:5", 2.0 ** 20), ("train.log:6", 2.0 ** 19), ("train.log:7", 2.0 ** 18),
        ]
        assert not [e for e in _events(text, fast) if type(e) is Progress]  # the scaler's iteration is no step


def test_lightning_validation_bar_is_an_eval_phase_not_progress() -> None:
    """Lines of a real Lightning TQDMProgressBar run (file output, ESC[A kept)."""
    text = (
        "Epoch 0: 100%|██████████| 8/8 [00:00<00:00, 294.15it/s, train_loss=0.744]\n"
        "Epoch 0: 100%|██████████| 8/8 [00:00<00:00, 292.28it/s, train_loss=1.930]\n\n"
        "Validation: |          | 0/? [00:00<?, ?it/s]\x1b[A\n\n"
        "Validation DataLoader 0:   0%|          | 0/8 [00:00<?, ?it/s]\x1b[A\n\n"
        "Validation DataLoader 0:  50%|█████     | 4/8 [00:00<00:00, 501.67it/s]\x1b[A\n\n"
        "Validation DataLoader 0: 100%|██████████| 8/8 [00:00<00:00, 499.03it/s]\x1b[A\n"
    )
    for fast in (True, False):
        events = _events(text, fast)
        assert [type(e).__name__ for e in events] == ["Progress"] * 2 + ["Phase"] * 4
        assert all(e.phase == "eval" and e.begin for e in events if type(e) is Phase)


@pytest.mark.parametrize("line", [
    "{'eval_loss': 0.5123, 'eval_runtime': 1.2, 'eval_samples_per_second': 100.0, 'epoch': 1.0}",
    '{"eval_loss": 0.5123, "step": 500, "epoch": 1.0}',
    "100%|##########| 63/63 [00:02<00:00, 25.0it/s]{'eval_loss': 0.5123, 'eval_runtime': 1.2, 'epoch': 1.0}",
    " 50%|#####     | 500/1000 [01:00<01:00,  8.33it/s]\r{'eval_loss': 0.5123, 'epoch': 1.0}",
    "2026-11-29 10:00:00 step 500 eval_loss=0.5123 eval_acc=0.9",
    "2026-11-29 10:00:00 INFO eval_loss: 0.5123",
    "{'eval/loss': 0.5123, 'step': 500}",
])
def test_eval_loss_is_not_the_training_loss(line: str) -> None:
    for fast in (True, False):
        for event in _events(line + "\n", fast):
            assert type(event) is not Progress or event.loss is None, event
