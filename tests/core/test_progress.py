"""parse_progress on every format it claims, with exact values."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dflash_watch.parsers.events import Progress
from dflash_watch.parsers.progress import CANDIDATES, ProgressPattern, parse_number, parse_progress


def parse(line: str) -> Progress | None:
    return parse_progress(line, 100.0, "train.log:7")


def fields(p: Progress | None) -> tuple:
    assert p is not None
    return (p.step, p.total_steps, p.tokens_per_s, p.loss, p.step_seconds)


# (line, (step, total, tokens/s, loss, step_seconds))
CASES = [
    # DFlash pipeline style
    ("step 1200/50000 | loss 2.31 | acc 0.71 | 21.5 Ktok/s | ETA 3:12:00", (1200, 50000, 21500.0, 2.31, None)),
    ("step 1200 loss 2.31 25.1 Ktok/s", (1200, None, 25100.0, 2.31, None)),
    ("step 7 | loss 2.0 | 1.2 Mtok/s", (7, None, 1200000.0, 2.0, None)),
    ("step 8 | loss 2.0 | 21500 tok/s", (8, None, 21500.0, 2.0, None)),
    ("tokens/s: 2.15e4 step 5", (5, None, 21500.0, None, None)),
    ("train_tokens_per_second: 12345.6", (None, None, 12345.6, None, None)),
    # HF Trainer, transformers 4 floats and transformers 5 string floats
    ("{'loss': 1.7658, 'learning_rate': 0.001, 'epoch': 0.05}", (None, None, None, 1.7658, None)),
    ("{'loss': '1.234', 'grad_norm': '0.5', 'learning_rate': '1e-05', 'epoch': '0.05'}",
     (None, None, None, 1.234, None)),
    # tqdm bars: it/s -> 1/rate, s/it -> rate; postfix loss
    (" 45%|████      | 450/1000 [01:02<01:16, 7.2it/s, loss=2.3]", (450, 1000, None, 2.3, 1 / 7.2)),
    (" 73%|███████▎  | 2082/2850 [3:17:53<1:04:53,  5.07s/it]", (2082, 2850, None, None, 5.07)),
    ("450it [01:02, 8.0it/s]", (450, None, None, None, 0.125)),
    ("  0%|          | 0/218 [00:00<?, ?it/s]", (0, 218, None, None, None)),
    # SpecForge
    ("step 120: {'loss': 2.3, 'acc': 0.7}", (120, None, None, 2.3, None)),
    ("Train - Step 5 [5/100], Loss: 2.3, Acc: 0.7", (5, 100, None, 2.3, None)),
    # JSON lines
    ('{"step": 10, "loss": 2.3, "tokens_per_s": 21500, "time": 1764410400.0}', (10, None, 21500.0, 2.3, None)),
    # modded-nanogpt
    ("step:125/3040 val_loss:4.51317 train_time:76.628s step_avg:613.02ms", (125, 3040, None, None, 0.61302)),
    # torchtitan (comma thousands)
    ("  [2025-09-11 14:09:47,568581][I][components/metrics:437:log] step:  2  loss: 14.4458  grad_norm: 41.7880"
     "  memory:  8.44GiB(13.20%)  tps: 6,697  tflops: 62.15  mfu: 20.84%", (2, None, 6697.0, 14.4458, None)),
    # nanotron (SI suffixes; per-GPU rate is not the rate)
    ("10/17/2025 16:31:56 [INFO|DP=0|PP=0|TP=0]: iteration: 327281 / 378950 | consumed_tokens: 85.8G | "
     "elapsed_time_per_iteration_ms: 11.5K | tokens_per_sec: 22.8K | tokens_per_sec_per_gpu: 11.4K | "
     "global_batch_size: 64 | lm_loss: 2.38 | lr: 1e-05 | grad_norm: 1.25", (327281, 378950, 22800.0, 2.38, 11.5)),
    # nanochat (two comma groups, dt in ms)
    ("step 00962/21400 (4.50%) | loss: 3.390650 | lrm: 1.00 | dt: 480.04ms | tok/sec: 1,092,168 | mfu: 48.20 | "
     "total time: 7.93m", (962, 21400, 1092168.0, 3.39065, 0.48004)),
    ("^[[A^[[A^[[Astep 00006/21400 (0.03%) | loss: 8.355317 | dt: 13798.32ms | tok/sec: 37,996 | mfu: 12.21",
     (6, 21400, 37996.0, 8.355317, 13.79832)),
    # Megatron (leading space, loss in E notation, "loss scale" is not the loss)
    (" iteration       20/    1000 | consumed samples:           80 | elapsed time per iteration (ms): 1572.7 | "
     "learning rate: 3.000E-05 | global batch size:     4 | lm loss: 1.210588E+01 | loss scale: 32768.0 | "
     "number of skipped iterations:   8 | number of nan iterations:   0 |", (20, 1000, None, 12.10588, 1.5727)),
    (" iteration       10/    1000 | elapsed time per iteration (ms): 3171.3 | loss scale: 8388608.0 |",
     (10, 1000, None, None, 3.1713)),
]


@pytest.mark.parametrize("line, expected", CASES)
def test_formats(line: str, expected: tuple) -> None:
    got = fields(parse(line))
    assert got[:2] == expected[:2]
    for value, want in zip(got[2:], expected[2:]):
        assert value == (None if want is None else pytest.approx(want)), line


def test_event_carries_time_source_and_rank() -> None:
    p = parse_progress("[rank3]:step 5 | loss: 2.0 | tok/s: 3", 12.5, "a.log:9")
    assert (p.time, p.source, p.rank, p.step, p.loss, p.tokens_per_s) == (12.5, "a.log:9", 3, 5, 2.0, 3.0)
    assert parse_progress("step 5 | loss: 2.0", 1.0, "a:1", rank=6).rank == 6


def test_other_numbers_go_to_metrics() -> None:
    p = parse(
        "10/17/2025 16:31:56 [INFO|DP=0|PP=0|TP=0]: iteration: 3 / 9 | consumed_tokens: 85.8G | "
        "tokens_per_sec: 22.8K | tokens_per_sec_per_gpu: 11.4K | lm_loss: 2.38 | lr: 1e-05"
    )
    assert p.tokens_per_s == 22800.0
    assert p.metric("tokens_per_sec_per_gpu") == 11400.0
    assert p.metric("consumed_tokens") == 85.8e9
    assert p.metric("lr") == 1e-05
    assert p.metric("DP") is None  # upper-case tags of the log header are not metrics
    hf = parse("{'loss': 26.9733, 'learning_rate': 0.0001, 'epoch': 0.16}")
    assert (hf.metric("learning_rate"), hf.metric("epoch")) == (0.0001, 0.16)


def test_nan_loss_is_kept_but_nan_interval_is_not() -> None:
    p = parse("step:0/125 val_loss:10.82583 train_time:0.000s step_avg:nanms")
    assert (p.step, p.total_steps, p.step_seconds) == (0, 125, None)
    assert p.metric("val_loss") == 10.82583
    nan = parse("step 3 | loss: nan | tok/s: 100")
    assert math.isnan(nan.loss) and nan.tokens_per_s == 100.0


@pytest.mark.parametrize(
    "line",
    [
        # Evaluation and prediction summaries (training's: test_progress_rates).
        "{'eval_loss': 2.31, 'eval_runtime': 12.3, 'eval_samples_per_second': 81.2, 'epoch': 1.0}",
        "{'predict_runtime': 331.4, 'predict_samples_per_second': 1.554}",
        "{'train_runtime': 331.4429, 'epoch': 1.0}",  # a training summary without a rate
        "Loading checkpoint shards:  50%|█████     | 1/2 [00:05<00:05,  5.00s/it]",
        "Map: 100%|██████████| 1000/1000 [00:01<00:00, 812.34it/s]",
        "Total optimization steps = 625",
        "  Gradient Accumulation steps = 1",
        "tokenizer loaded from /path/to/tokenizer.model with vocab 32000",
        "{'atom_fea_len': 64, 'learning_rate': 0.001, 'epoch': 300.0}",
        "21.5 Ktok/s/gpu",
        "10.7 Ktok/s per GPU",
        "",
        "   ",
    ],
)
def test_not_progress(line: str) -> None:
    assert parse(line) is None


def test_per_gpu_rate_is_never_the_rate() -> None:
    p = parse("step 3 | tokens_per_sec_per_gpu: 11.4K | 10.7 Ktok/s/gpu | loss 2")
    assert p.tokens_per_s is None and p.metric("tokens_per_sec_per_gpu") == 11400.0


@pytest.mark.parametrize(
    "text, value",
    [("1,092,168", 1092168.0), ("6,697", 6697.0), ("22.8K", 22800.0), ("85.8G", 85.8e9), ("1.5M", 1.5e6),
     ("2.15e4", 21500.0), ("1.210588E+01", 12.10588), ("7", 7.0), ("x", None), ("", None), ("K", None)],
)
def test_parse_number(text: str, value: float | None) -> None:
    assert parse_number(text) == value


def test_candidates_are_in_every_builtin_format() -> None:
    for line, _ in CASES:
        assert any(c in line for c in CANDIDATES), line


def test_user_pattern_overrides_builtins() -> None:
    pattern = ProgressPattern(r"it=(?P<step>\d+) of (?P<total>\d+) speed=(?P<tokens_per_s>[\d.,]+[KM]?) L=(?P<loss>\S+)",
                              literals=("it=",))
    p = parse_progress("it=5 of 10 speed=1,234.5K L=0.5", 1.0, "x:1", pattern=pattern)
    assert fields(p) == (5, 10, 1234500.0, 0.5, None)
    # The built-in formats are off while a pattern is set.
    assert parse_progress("step 5 | loss 2.0", 1.0, "x:1", pattern=pattern) is None


def test_user_pattern_is_validated() -> None:
    with pytest.raises(ValueError, match="valid regex"):
        ProgressPattern(r"step (?P<step>\d+")
    with pytest.raises(ValueError, match="names none"):
        ProgressPattern(r"step (\d+)")


# -- fast plans: the same answers as the general runner ---------------------------

FAST_LINES = [line for line, _ in CASES] + [
    "2025-11-29 10:00:05,123 - INFO - dflash.train - step 12345/500000 | loss 2.7612 | acc_len 3.4 | "
    "21.6 Ktok/s | pad_eff 0.93 | lr 2.0e-04",
    "step 7 | loss nan | 1.2 Mtok/s",
    "step 7 | loss 2.0 | tokens/s: 0 | dt: 5ms",
    "iter 3 | loss 2.0 | tokens_per_s: 100 | step_time: 1.5",
    "step 00000/21400 | loss: 3.0 | tok/sec: 90",
]


@given(st.sampled_from(FAST_LINES), st.randoms(use_true_random=False))
@settings(max_examples=400, deadline=None)
def test_fast_plans_answer_as_the_general_runner(line: str, rnd) -> None:
    """Every digit of a known line replaced at random (same shape, new
    values: zeros, huge steps, fractional "steps"): the fast path, taken
    when the shape has one, must give exactly what ``_run`` gives."""
    from dflash_watch.parsers.progress import _PLANS, line_shape, progress_fields, progress_values
    from dflash_watch.parsers.progress.run import run

    variant = "".join(rnd.choice("0123456789") if c.isdigit() else c for c in line)
    progress_values(line)  # plans the shape
    rank_at, ops, fast = _PLANS[line_shape(line)]
    got = progress_values(variant)
    want = run(ops, variant, None, rank_at) if ops else None
    assert repr(got) == repr(want)  # repr: NaN equals NaN; every value, rates included
    assert repr(progress_fields(variant)) == repr(None if want is None else want[:7])


def test_the_dflash_line_takes_the_fast_path() -> None:
    from dflash_watch.parsers.progress import _PLANS, line_shape, progress_fields, progress_values

    line = FAST_LINES[len(CASES)]
    metrics = (("acc_len", 3.4), ("pad_eff", 0.93), ("lr", 2.0e-4))
    assert progress_fields(line) == (12345, 500000, 21600.0, 2.7612, None, metrics, None)
    assert progress_values(line) == (12345, 500000, 21600.0, 2.7612, None, metrics, None, 21600.0, "tok/s", None)
    assert _PLANS[line_shape(line)][2] is not None


def test_shapes_that_can_never_be_progress() -> None:
    from dflash_watch.parsers.progress import progress_possible

    evaluating = "".join(f"\rEvaluating: {p:3d}%|##| {p}/100 [00:01<00:10, 9.8it/s]" for p in range(0, 101, 20))
    assert not progress_possible(evaluating)
    assert not progress_possible("[rank3]: loaded the tokenizer in 3 s")  # numbers, but only metrics
    assert progress_possible("\r 45%|####      | 450/1000 [01:02<01:16, 7.2it/s, loss=2.3]\r 46%|####      | 460/1000 [01:03<01:15, 7.2it/s, loss=2.2]")
    assert progress_possible("[rank3]: step 5 | loss 2.0")
