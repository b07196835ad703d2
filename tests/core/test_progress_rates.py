"""The rate a run prints, in its own unit, and tqdm's elapsed counter.

One table: every form of rate the readers know, with the fields it must
give. Lines marked ``# realworld NN`` are copied byte for byte from
../shared/realworld (SOURCES.md names them); the others are the forms as
the frameworks' own code writes them (tqdm 4.70 format_meter/format_num,
HF Trainer, Megatron-LM, Megatron-DeepSpeed, nanoGPT, llm.c).
"""

from __future__ import annotations

import pytest

from dflash_watch.parsers.events import Progress, rate_of
from dflash_watch.parsers.progress import TOKENS_PER_SAMPLE, parse_progress

# (line, (step, total, tokens/s, loss, step_seconds, rate, rate_unit, elapsed_s, tokens_per_sample))
N = None
TABLE = [
    # -- tqdm bars: it/s as printed, s/it turned over; the elapsed counter --
    ("  1%|█                                                                                                                  "
     "| 2/218 [00:11<19:49,  5.51s/it]",  # realworld 02
     (2, 218, N, N, 5.51, 1 / 5.51, "it/s", 11.0, N)),
    (" 73%|███████▎  | 2082/2850 [3:17:53<1:04:53,  5.07s/it]",  # realworld 03: H:MM:SS
     (2082, 2850, N, N, 5.07, 1 / 5.07, "it/s", 3 * 3600 + 17 * 60 + 53.0, N)),
    ("  0%|          | 0/950 [00:00<?, ?it/s]",  # realworld 03: no rate yet
     (0, 950, N, N, N, N, N, 0.0, N)),
    ("100%|██████████████████████████████████████████████████████████████████████████████████████| 128/128 "
     "[03:34<00:00,  1.67s/it]",  # realworld 10
     (128, 128, N, N, 1.67, 1 / 1.67, "it/s", 214.0, N)),
    # HF Trainer prints its log dict glued to the bar: the bar's count is its step
    ("  5%|█████▏                                                                                                            "
     "| 10/218 [00:52<18:07,  5.23s/it]{'loss': 1.7658, 'learning_rate': 0.001, 'epoch': 0.05}",  # realworld 02
     (10, 218, N, 1.7658, 5.23, 1 / 5.23, "it/s", 52.0, N)),
    (" 45%|████▌     | 450/1000 [05:45<12:07,  7.20it/s]", (450, 1000, N, N, 1 / 7.2, 7.2, "it/s", 345.0, N)),
    ("450it [00:05, 1.20it/s]", (450, N, N, N, 1 / 1.2, 1.2, "it/s", 5.0, N)),  # no total: no remaining
    ("Epoch 1: 100%|##########| 500/500 [1:02:03<00:00, 12.3kit/s]",  # unit_scale: SI rate
     (500, 500, N, N, 1 / 12300, 12300.0, "it/s", 3723.0, N)),
    # set_postfix(loss=0.5, tok_s=20200.0): format_num writes 2.02e+4
    ("Epoch 1:  45%|████▌     | 450/1000 [01:02<01:16,  7.20it/s, loss=0.5, tok_s=2.02e+4]",
     (450, 1000, 20200.0, 0.5, 1 / 7.2, 20200.0, "tok/s", 62.0, N)),
    # a dict postfix, keys as written (set_postfix({"tok/s": 2.1e4, "loss": 1e-3}))
    ("train:  45%|####5     | 450/1000 [01:02<01:16,  7.20it/s, tok/s=2.1e+4, loss=0.001]",
     (450, 1000, 21000.0, 0.001, 1 / 7.2, 21000.0, "tok/s", 62.0, N)),
    # set_postfix_str: whatever the run wrote, comma thousands included
    (" 12%|█▏        | 120/1000 [00:30<03:40,  4.00it/s, loss: 2.31 | tok/s: 1,092,168]",
     (120, 1000, 1092168.0, 2.31, 0.25, 1092168.0, "tok/s", 30.0, N)),
    # set_description(f"loss {loss:.3f}"): the description's numbers count
    ("loss 2.300:  45%|████▌     | 450/1000 [01:02<01:16,  7.20it/s]",
     (450, 1000, N, 2.3, 1 / 7.2, 7.2, "it/s", 62.0, N)),
    # bars of tokens or samples: the rate is theirs, the count is no step
    ("1.23ktok [00:10, 1.23ktok/s]", (N, N, 1230.0, N, N, 1230.0, "tok/s", 10.0, N)),
    ("Training: 100%|██████████| 5000/5000 [00:50<00:00, 98.70samples/s]",
     (N, N, N, N, N, 98.7, "samples/s", 50.0, N)),
    ("Training:  10%|█         | 50/500 [00:50<07:30,  1.02s/sample]",
     (N, N, N, N, N, 1 / 1.02, "samples/s", 50.0, N)),
    # -- HF Trainer's end-of-training dict: the run's mean rates; train_loss
    # is no step's loss --
    ("{'train_runtime': 214.2777, 'train_samples_per_second': 38.231, 'train_steps_per_second': 0.597, "
     "'train_loss': 1.8917758977040648, 'epoch': 0.04}",  # realworld 10
     (N, N, N, N, N, 38.231, "samples/s", N, N)),
    ("{'train_runtime': 100.0, 'train_steps_per_second': 0.5, 'train_loss': 1.9}",
     (N, N, N, N, N, 0.5, "it/s", N, N)),
    ("{'train_runtime': '214.2', 'train_samples_per_second': '4.0', 'train_tokens_per_second': '8192.0', "
     "'train_loss': '1.89'}",  # transformers 5 string floats; tokens win
     (N, N, 8192.0, N, N, 8192.0, "tok/s", N, 2048.0)),
    # -- step times: it/s = 1 / step time --
    ("step:125/3040 val_loss:4.51317 train_time:76.628s step_avg:613.02ms",  # realworld 04
     (125, 3040, N, N, 0.61302, 1 / 0.61302, "it/s", N, N)),
    ("step:1/125 train_time:9.710s step_avg:9710.46ms",  # realworld 05
     (1, 125, N, N, 9.71046, 1 / 9.71046, "it/s", N, N)),
    (" iteration        1/    1000 | elapsed time per iteration (ms): 123742.4 | learning rate: 1.875E-05 | "
     "lm loss: 1.252221E+01 | loss scale: 1024.0 | number of skipped iterations:   0 | "
     "number of nan iterations:   0 |",  # realworld 09
     (1, 1000, N, 12.52221, 123.7424, 1 / 123.7424, "it/s", N, N)),
    ("iter 100: loss 2.3456, time 96.12ms, mfu 12.34%",  # nanoGPT: "time" with a unit is the step time
     (100, N, N, 2.3456, 0.09612, 1 / 0.09612, "it/s", N, N)),
    ('{"step": 10, "loss": 2.3, "time": 1764410400.0}', (10, N, N, 2.3, N, N, N, N, N)),  # a bare time is a clock
    ("step 5 | loss 2.0 | dt 96ms", (5, N, N, 2.0, 0.096, 1 / 0.096, "it/s", N, N)),
    ("step 5 | loss 2.0 | dt: 96.3ms", (5, N, N, 2.0, 0.0963, 1 / 0.0963, "it/s", N, N)),
    ("step 5 | loss 2.0 | step_time: 1.2s", (5, N, N, 2.0, 1.2, 1 / 1.2, "it/s", N, N)),
    ("step 5 | time/step: 1.2s | loss 2.0", (5, N, N, 2.0, 1.2, 1 / 1.2, "it/s", N, N)),
    ("step 5 | loss 2.0 | ms/iteration: 1234.5", (5, N, N, 2.0, 1.2345, 1 / 1.2345, "it/s", N, N)),
    ("step 5 | loss 2.0 | 1234.5 ms/iteration", (5, N, N, 2.0, 1.2345, 1 / 1.2345, "it/s", N, N)),
    ("step 5 | loss 2.0 | dt: 0.0ms", (5, N, N, 2.0, 0.0, N, N, N, N)),  # no time is no rate
    # -- tokens/s, K/M suffixes; tokens win over samples --
    ("step 00001/21400 (0.00%) | loss: 10.809341 | grad norm: 11.0336 | lrm: 1.00 | dt: 13651.72ms | "
     "tok/sec: 38,404 | mfu: 12.34 | total time: 0.00m",  # realworld 17
     (1, 21400, 38404.0, 10.809341, 13.65172, 38404.0, "tok/s", N, N)),
    ("10/17/2025 16:31:56 [INFO|DP=0|PP=0|TP=0]: iteration: 327281 / 378950 | consumed_tokens: 85.8G | "
     "elapsed_time_per_iteration_ms: 11.5K | tokens_per_sec: 22.8K | tokens_per_sec_per_gpu: 11.4K | "
     "global_batch_size: 64 | lm_loss: 2.38 | lr: 1e-05 | model_tflops_per_gpu: 38.3 | "
     "hardware_tflops_per_gpu: 38.3 | grad_norm: 1.25",  # realworld 16
     (327281, 378950, 22800.0, 2.38, 11.5, 22800.0, "tok/s", N, N)),
    ("step 1200/50000 | loss 2.31 | 21.5K tok/s", (1200, 50000, 21500.0, 2.31, N, 21500.0, "tok/s", N, N)),
    ("step 1200 | loss 2.31 | tokens/sec: 1.2M", (1200, N, 1.2e6, 2.31, N, 1.2e6, "tok/s", N, N)),
    ("step 3 | loss 2.0 | lr 1.00e-3 | tok/s=2.02e+04", (3, N, 20200.0, 2.0, N, 20200.0, "tok/s", N, N)),
    ("step 10 | loss 2.0 | samples/s: 12.5 | tokens/s: 25600",
     (10, N, 25600.0, 2.0, N, 25600.0, "tok/s", N, 2048.0)),
    ("step 10 | loss 2.0 | samples/s: 12.5", (10, N, N, 2.0, N, 12.5, "samples/s", N, N)),
    ("step 10 | loss 2.0 | 12.5 samples/s | dt 80ms", (10, N, N, 2.0, 0.08, 12.5, "samples/s", N, N)),
    # Megatron-DeepSpeed: samples/s, and counts of tokens and samples that
    # pair by name: the tokens/s it does not print
    (" iteration       10/    1000 | consumed samples:          640 | consumed tokens:      1310720 | "
     "elapsed time per iteration (ms): 1234.5 | samples per second: 51.900 | lm loss: 2.0 |",
     (10, 1000, 51.9 * 2048, 2.0, 1.2345, 51.9 * 2048, "tok/s", N, 2048.0)),
    # counts that do not pair (Megatron's consumed samples, nothing else): no ratio
    (" iteration       10/    1000 | consumed samples:           40 | elapsed time per iteration (ms): 3171.3 | "
     "learning rate: 0.000E+00 | global batch size:     4 | loss scale: 8388608.0 | "
     "number of skipped iterations:  10 | number of nan iterations:   0 |",  # realworld 08
     (10, 1000, N, N, 3.1713, 1 / 3.1713, "it/s", N, N)),
    # a printed iteration rate outside tqdm
    ("step 10 | loss 2.0 | steps/s: 2.5", (10, N, N, 2.0, N, 2.5, "it/s", N, N)),
    ("step 10 | loss 2.0 | 3.4 it/s | dt 300ms", (10, N, N, 2.0, 0.3, 3.4, "it/s", N, N)),  # printed beats derived
    ("step 10 | loss 2.0 | 5.07 s/it", (10, N, N, 2.0, 5.07, 1 / 5.07, "it/s", N, N)),
]


def approx(value: float | None):
    return None if value is None else pytest.approx(value, rel=1e-9)


@pytest.mark.parametrize("line, expected", TABLE, ids=[line[-48:] for line, _ in TABLE])
def test_rates(line: str, expected: tuple) -> None:
    p = parse_progress(line, 100.0, "train.log:7")
    assert p is not None, line
    step, total, tokens, loss, seconds, rate, unit, elapsed, per_sample = expected
    assert (p.step, p.total_steps) == (step, total)
    assert p.tokens_per_s == approx(tokens)
    assert p.loss == approx(loss)
    assert p.step_seconds == approx(seconds)
    assert (p.rate, p.rate_unit) == (approx(rate), unit)
    assert p.elapsed_s == elapsed
    assert p.metric(TOKENS_PER_SAMPLE) == approx(per_sample)


@pytest.mark.parametrize(
    "line",
    [
        "Loading checkpoint shards:  50%|█████     | 1/2 [00:05<00:05,  5.00s/it]",
        "Evaluating: 100%|██████████| 100/100 [00:10<00:00, 9.8it/s]",
        "Sampling:  10%|█         | 5/50 [00:05<00:45,  1.00samples/s]",
        "model.safetensors: 100%|██████████| 4.97G/4.97G [00:30<00:00, 165MB/s]",
        "{'eval_loss': 2.31, 'eval_runtime': 12.3, 'eval_samples_per_second': 81.2, 'epoch': 1.0}",
        "  train_samples_per_second =     12.068",
        "data loading dt: 96ms",  # a step time alone is not a progress line
        "dt: 96.3ms",
    ],
)
def test_not_a_training_rate(line: str) -> None:
    p = parse_progress(line, 100.0, "train.log:7")
    assert p is None or (p.rate is None and p.step is None), (line, p)


def test_rate_of_takes_the_runs_own_rate() -> None:
    bar = parse_progress(" 45%|████▌     | 450/1000 [05:45<12:07,  5.07s/it]", 1.0, "x:1")
    assert rate_of(bar) == (pytest.approx(1 / 5.07), "it/s")
    tokens = parse_progress("step 8 | loss 2.0 | 21500 tok/s", 1.0, "x:1")
    assert rate_of(tokens) == (21500.0, "tok/s") and tokens.tokens_per_s == 21500.0
    assert isinstance(bar, Progress) and bar.clocked


def test_summary_train_loss_is_a_metric_not_the_loss() -> None:
    p = parse_progress("{'train_runtime': 331.4429, 'train_samples_per_second': 12.068, "
                       "'train_steps_per_second': 0.187, 'train_loss': 26.98, 'epoch': 0.99}", 1.0, "x:1")
    assert p.loss is None and p.step is None
    assert p.metric("train_loss") == 26.98 and p.metric("train_steps_per_second") == 0.187
    assert p.metric("train_samples_per_second") == 12.068  # samples/s stays a metric as well


def test_candidates_are_in_every_rate_line() -> None:
    """The stream never reads a line without a candidate literal."""
    from dflash_watch.parsers.progress import CANDIDATES

    for line, _ in TABLE:
        assert any(c in line for c in CANDIDATES), line


def test_values_are_progress_fields_after_source_but_clocked() -> None:
    """``progress_values``' layout is Progress's own: the stream and
    ``progress_from`` build events from it by position."""
    from dataclasses import fields

    from dflash_watch.parsers.progress import FIELDS, VALUES, progress_fields, progress_from, progress_values

    names = tuple(f.name for f in fields(Progress))
    assert VALUES == tuple(n for n in names[2:] if n != "clocked")
    assert names[2 + FIELDS] == "clocked"
    from dflash_watch.parsers.progress.redraws import ELAPSED

    assert VALUES[ELAPSED] == "elapsed_s"
    line = " 45%|████▌     | 450/1000 [05:45<12:07,  7.20it/s, loss=0.5, tok_s=2.02e+4]"
    values = progress_values(line)
    assert len(values) == len(VALUES) and progress_fields(line) == values[:FIELDS]
    event = progress_from(3.0, "x:1", values, clocked=False)
    assert event == Progress(3.0, "x:1", **dict(zip(VALUES, values)), clocked=False)
    assert event.elapsed_s == 345.0 and event.rate_unit == "tok/s"
