"""Probe lines (CONTRACTS section 9) into ProbeSample: what is kept, what is dropped.

Pure: lines as strings in, samples out, no files (the writer's own lines
are parsed back in tests/shell/test_probe.py).
"""

from __future__ import annotations

import json

import pytest

from dflash_watch.parsers.events import ProbeSample
from dflash_watch.probe.batch import merge_micro_batches
from dflash_watch.sources.probes import ProbeParser, discover, parse_probe_line, rank_from_name

FULL = {
    "time": 1764410400.0, "rank": 5, "step": 1234, "tokens": 45211, "padded_tokens": 49152,
    "batch_size": 48, "seq_len": 1024, "alloc_retries": 2, "reserved_bytes": 70 << 30,
    "allocated_bytes": 60 << 30, "inactive_split_bytes": 1 << 28, "recompiles": 3, "graph_breaks": 1,
}


def test_every_contract_key_reaches_the_sample() -> None:
    sample = parse_probe_line(json.dumps(FULL), source="p.jsonl:7")
    assert sample == ProbeSample(source="p.jsonl:7", **FULL)
    assert sample.padding_efficiency == pytest.approx(45211 / 49152)


def test_only_time_is_required_and_missing_is_none_not_zero() -> None:
    sample = parse_probe_line('{"time": 5}')
    assert sample is not None and sample.time == 5.0
    assert (sample.tokens, sample.alloc_retries, sample.recompiles, sample.rank) == (None, None, None, None)


@pytest.mark.parametrize("line", [
    "", "not json", "[1, 2]", '{"step": 3}', '{"time": "noon"}', '{"time": true}',
    '{"time": NaN}', '{"time": Infinity}', '{"time": 1, "tokens": 3',
])
def test_lines_that_are_not_probe_lines(line: str) -> None:
    assert parse_probe_line(line) is None


def test_a_bad_optional_field_is_dropped_not_the_line() -> None:
    sample = parse_probe_line('{"time": 1, "tokens": -3, "padded_tokens": true, "seq_len": 1.5, "step": 2.0, '
                              '"batch_size": "8", "recompiles": 4}')
    assert (sample.tokens, sample.padded_tokens, sample.seq_len, sample.batch_size) == (None, None, None, None)
    assert (sample.step, sample.recompiles) == (2, 4)


def test_rank_comes_from_the_file_name_when_the_line_has_none() -> None:
    assert rank_from_name("/runs/x/dflash-probe-rank12.jsonl") == 12
    assert rank_from_name("probe.jsonl") is None
    parser = ProbeParser("/runs/x/dflash-probe-rank3.jsonl")
    no_rank, own_rank = parser.parse_text('{"time": 1}\n{"time": 2, "rank": 0}\n', 40)
    assert (no_rank.rank, own_rank.rank) == (3, 0)
    assert (no_rank.source, own_rank.source) == ("dflash-probe-rank3.jsonl:40", "dflash-probe-rank3.jsonl:41")


def test_parser_counts_bad_lines_and_names_the_first() -> None:
    parser = ProbeParser("p.jsonl")
    got = parser.parse_text('{"time": 1}\n\ngarbage\n{"time": 2}\n{"x": 1}\n', 1)
    assert [s.time for s in got] == [1.0, 2.0]
    assert (parser.bad, parser.first_bad) == (2, 3)
    assert parser.summary() == "p.jsonl: 2 of 5 lines are not probe lines and were skipped (first: line 3)"
    assert ProbeParser("q").summary() is None


def test_default_discovery_is_beside_the_logs_and_in_the_cwd() -> None:
    assert discover([], ["/runs/a/train.log", "/runs/a/rank1.log", "/runs/b/x.log"], "/work/job") == [
        "/runs/a/dflash-probe-*.jsonl", "/runs/b/dflash-probe-*.jsonl", "/work/job/dflash-probe-*.jsonl"]
    assert discover(["/p/*.jsonl"], ["/runs/a/train.log"], "/w") == ["/p/*.jsonl"]


def test_micro_batches_of_one_optimizer_step_are_summed() -> None:
    step = merge_micro_batches([
        {"tokens": 70, "padded_tokens": 128, "batch_size": 4, "seq_len": 32},
        {"tokens": 50, "padded_tokens": 80, "batch_size": 4, "seq_len": 20},
    ])
    assert step == {"tokens": 120, "padded_tokens": 208, "batch_size": 8, "seq_len": 32}
    # A count missing from one micro-batch is unknown for the step, not understated.
    assert merge_micro_batches([{"tokens": 5, "batch_size": 1}, {"batch_size": 1}]) == {"batch_size": 2}
    assert merge_micro_batches([]) == {}


# -- training-health floats (CONTRACTS section 9, issue 19) ------------------


def test_health_floats_reach_the_sample() -> None:
    sample = parse_probe_line('{"time": 1, "loss": 2.5, "grad_norm": 0.75, "loss_scale": 65536, '
                              '"step_seconds": 1.2, "compute_seconds": 0.9, "wait_seconds": 0.3}')
    assert (sample.loss, sample.grad_norm, sample.loss_scale) == (2.5, 0.75, 65536.0)
    assert (sample.step_seconds, sample.compute_seconds, sample.wait_seconds) == (1.2, 0.9, 0.3)


@pytest.mark.parametrize(("text", "nan", "sign"), [
    ("NaN", True, 0), ("Infinity", False, 1), ("-Infinity", False, -1),
    ('"nan"', True, 0), ('"inf"', False, 1), ('"-inf"', False, -1), ('"NaN"', True, 0),
])
def test_a_nan_or_inf_loss_survives(text: str, nan: bool, sign: int) -> None:
    import math

    sample = parse_probe_line(f'{{"time": 1, "loss": {text}, "grad_norm": {text}}}')
    assert sample is not None
    for value in (sample.loss, sample.grad_norm):
        assert value is not None and (math.isnan(value) if nan else value == sign * math.inf)


def test_bad_health_floats_are_dropped_not_the_line() -> None:
    sample = parse_probe_line('{"time": 1, "loss": "high", "grad_norm": true, "loss_scale": NaN, '
                              '"step_seconds": -1, "compute_seconds": Infinity, "wait_seconds": "0.2"}')
    assert sample is not None
    assert (sample.loss, sample.grad_norm, sample.loss_scale) == (None, None, None)
    assert (sample.step_seconds, sample.compute_seconds, sample.wait_seconds) == (None, None, None)
