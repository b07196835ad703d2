"""The training probe with real torch on CPU: counts, buffering, bounds, never raising.

Everything here runs the probe as a training loop would (real tensors, a
real file, a real ``torch.compile`` that recompiles) and reads back what
it wrote with the watcher's own reader.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="needs torch (pip install torch): the probe is checked with real tensors")

from dflash_watch.parsers.events import ProbeSample
from dflash_watch.probe import Probe, ProbeWriter
from dflash_watch.probe.batch import Deferred, resolve
from dflash_watch.probe.torch_stats import CompileCounter
from dflash_watch.sources.probes import parse_probe_line, read_probe_file

ROOT = Path(__file__).resolve().parents[2]
FULL = {
    "time": 1764410400.0, "rank": 5, "step": 1234, "tokens": 45211, "padded_tokens": 49152,
    "batch_size": 48, "seq_len": 1024, "alloc_retries": 2, "reserved_bytes": 70 << 30,
    "allocated_bytes": 60 << 30, "inactive_split_bytes": 1 << 28, "recompiles": 3, "graph_breaks": 1,
}


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_import_pulls_in_nothing_heavy() -> None:
    """Inside a training process: no numpy, textual, prometheus, watcher core, not even torch."""
    code = textwrap.dedent("""
        import sys
        import dflash_watch.probe, dflash_watch.probe.lightning
        heavy = ["numpy", "torch", "textual", "rich", "prometheus_client", "pynvml", "watchdog",
                 "dflash_watch.monitor", "dflash_watch.sources", "parsers", "detectors", "lightning"]
        print([m for m in heavy if m in sys.modules])
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_counts_from_batches_and_masks(tmp_path: Path) -> None:
    probe = Probe(tmp_path / "p.jsonl", rank=2, every_steps=100, clock=Clock())
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0], [1, 0, 0, 0]])
    probe.step(batch=torch.zeros(3, 4, dtype=torch.long), attention_mask=mask)
    probe.step(batch={"input_ids": torch.ones(2, 5, dtype=torch.long), "attention_mask": torch.ones(2, 5)})
    probe.step(batch=torch.tensor([[5, 6, 0], [7, 0, 0]]))  # no mask, no pad id: shape only
    probe.step(tokens=900, padded_tokens=1024, batch_size=4, seq_len=256, step=77)
    packed = torch.tensor([[1, 1, 2, 2, 2, 0]])  # a packing collator's segment ids: tokens once each
    probe.step(batch=torch.zeros(1, 6), attention_mask=packed)
    probe.close()
    lines = _lines(tmp_path / "p.jsonl")
    assert [ln["step"] for ln in lines] == [1, 2, 3, 77, 5]
    assert {k: lines[0][k] for k in ("rank", "tokens", "padded_tokens", "batch_size", "seq_len")} == {
        "rank": 2, "tokens": 6, "padded_tokens": 12, "batch_size": 3, "seq_len": 4}
    assert (lines[1]["tokens"], lines[1]["padded_tokens"]) == (10, 10)
    assert "tokens" not in lines[2] and "padded_tokens" not in lines[2] and lines[2]["seq_len"] == 3
    assert (lines[3]["tokens"], lines[3]["padded_tokens"], lines[3]["batch_size"]) == (900, 1024, 4)
    assert (lines[4]["tokens"], lines[4]["padded_tokens"]) == (5, 6)
    if not torch.cuda.is_available():  # absent on CPU, never zero
        assert not any(k in ln for ln in lines for k in ("alloc_retries", "reserved_bytes", "allocated_bytes"))


def test_pad_token_id_counts_without_a_mask(tmp_path: Path) -> None:
    probe = Probe(tmp_path / "p.jsonl", pad_token_id=0, every_steps=1)
    probe.step(batch=torch.tensor([[5, 6, 0], [7, 0, 0]]))
    probe.close()
    assert {k: _lines(tmp_path / "p.jsonl")[0][k] for k in ("tokens", "padded_tokens")} == {
        "tokens": 3, "padded_tokens": 6}


def test_buffered_every_n_steps_or_s_seconds(tmp_path: Path) -> None:
    clock = Clock()
    path = tmp_path / "p.jsonl"
    probe = Probe(path, every_steps=3, every_s=10.0, clock=clock)
    probe.step(tokens=1)
    probe.step(tokens=2)
    assert not path.exists() or path.read_text() == ""
    probe.step(tokens=3)
    assert [ln["tokens"] for ln in _lines(path)] == [1, 2, 3]
    probe.step(tokens=4)
    clock.t += 10.5  # the time limit comes before the step count
    probe.step(tokens=5)
    assert [ln["tokens"] for ln in _lines(path)] == [1, 2, 3, 4, 5]
    probe.step(tokens=6)
    probe.close()
    probe.step(tokens=7)  # after close: ignored, not raised
    assert [ln["tokens"] for ln in _lines(path)][-1] == 6


def test_flushed_at_interpreter_exit(tmp_path: Path) -> None:
    code = textwrap.dedent("""
        from dflash_watch.probe import Probe
        p = Probe(every_steps=1000)
        for _ in range(3):
            p.step(tokens=16, padded_tokens=20)
    """)
    env = {**os.environ, "DFLASH_PROBE_DIR": str(tmp_path), "RANK": "3", "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = _lines(tmp_path / "dflash-probe-rank3.jsonl")
    assert [(ln["rank"], ln["tokens"]) for ln in lines] == [(3, 16)] * 3


def test_recompiles_and_graph_breaks_from_a_real_compile(tmp_path: Path) -> None:
    probe = Probe(tmp_path / "p.jsonl", every_steps=1)
    probe.step(tokens=1)  # dynamo may not be loaded yet: the counters come once it is
    import torch._dynamo  # noqa: F401

    probe.step(tokens=1)
    start = _lines(tmp_path / "p.jsonl")[-1]

    @torch.compile(dynamic=False, backend="eager")
    def double(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    for n in (2, 3, 4, 5):  # a new static shape each time: three recompiles of one frame
        double(torch.ones(n))

    @torch.compile(backend="eager")
    def breaks(x: torch.Tensor) -> torch.Tensor:
        y = x + 1
        torch._dynamo.graph_break()
        return y * 2

    breaks(torch.ones(3))
    probe.step(tokens=1)
    probe.close()
    end = _lines(tmp_path / "p.jsonl")[-1]
    assert end["recompiles"] - start["recompiles"] == 3
    assert end["graph_breaks"] - start["graph_breaks"] == 1


def test_a_lazily_compiled_backward_is_not_a_recompile(tmp_path: Path) -> None:
    """AOTAutograd compiles a training graph's backward at its first
    backward and calls the compile-start callbacks again with the frame's
    compile id: under inductor on an H200 the probe counted 6 recompiles
    where dynamo made 3. aot_eager compiles the backward the same way, on CPU."""
    probe = Probe(tmp_path / "p.jsonl", every_steps=1)
    import torch._dynamo  # noqa: F401

    probe.step(tokens=1)
    start = _lines(tmp_path / "p.jsonl")[-1]
    lin = torch.nn.Linear(4, 4)

    @torch.compile(dynamic=False, backend="aot_eager")
    def loss_of(x: torch.Tensor) -> torch.Tensor:
        return lin(x).square().mean()

    for n in (2, 3, 4, 5):  # a new static shape each time: three recompiles, each with its backward
        loss_of(torch.ones(n, 4)).backward()
    probe.step(tokens=1)
    probe.close()
    end = _lines(tmp_path / "p.jsonl")[-1]
    assert end["recompiles"] - start["recompiles"] == 3


def test_compile_id_of_a_recompile() -> None:
    assert [CompileCounter.is_recompile(c) for c in ("0/0", "0/1", "12/3", "!1/0/2", "!1/0/0", "junk")] == [
        False, True, True, True, False, False]


def test_rotates_past_the_size_cap(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    writer = ProbeWriter(path, max_bytes=4096)
    for i in range(400):
        writer.write_line({"time": float(i), "step": i, "tokens": 1000 + i})
    writer.close()
    assert path.stat().st_size <= 4096 and (tmp_path / "p.jsonl.1").stat().st_size <= 4096
    kept = [s.step for s in read_probe_file(tmp_path / "p.jsonl.1")] + [s.step for s in read_probe_file(path)]
    assert kept == list(range(kept[0], 400))  # the newest lines, in order, nothing torn


def test_never_raises_into_training(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    probe = Probe(blocker / "p.jsonl", every_steps=1)  # cannot be written: a file stands where the dir should
    probe.step(batch=torch.zeros(2, 3), attention_mask=torch.ones(2, 3))
    probe.step(attention_mask="not a tensor", tokens="many")  # garbage in: a warning, not an exception
    probe.step(tokens=4)
    probe.close()
    err = capsys.readouterr().err
    assert err.count("dflash-watch probe:") == 2  # once for the writer, once for the probe
    assert probe.writer.dropped == 2


def test_deferred_counts_resolve_to_ints() -> None:
    mask = torch.tensor([[1, 1, 0], [2, 0, 0]])
    ids = torch.tensor([[5, 0, 0], [6, 7, 0]])
    micro = 4 + Deferred(("count", mask, None)) + Deferred(("count", ids, 0))  # micro-batches add up
    assert resolve([3, torch.tensor(5), Deferred(("value", torch.tensor(9))), micro]) == [3, 5, 9, 4 + 3 + 3]


def test_writer_lines_parse_back(tmp_path: Path) -> None:
    writer = ProbeWriter(tmp_path / "p.jsonl")
    writer.write_lines([FULL, {"time": 2.5, "step": 2}])
    writer.close()
    lines = (tmp_path / "p.jsonl").read_text().splitlines()
    assert [parse_probe_line(x) for x in lines] == [ProbeSample(**FULL), ProbeSample(time=2.5, step=2)]


def test_health_figures_with_nan_and_tensors_round_trip(tmp_path: Path) -> None:
    """A NaN loss, an Inf grad norm and tensor figures come back as they went in."""
    import math

    path = tmp_path / "p.jsonl"
    probe = Probe(path, rank=2, every_steps=100)
    probe.step(tokens=4, loss=torch.tensor(2.5), grad_norm=0.5, loss_scale=1024, step_seconds=1.0,
               compute_seconds=0.75, wait_seconds=0.25)
    probe.step(loss=torch.tensor(float("nan")), grad_norm=float("inf"))
    probe.step(step=9)
    probe.amend(step=9, loss=float("-inf"), grad_norm=None, tokens=5)  # tokens: not a health figure
    probe.amend(step=12, loss=1.0)  # not the last line: a line of its own
    probe.close()
    text = path.read_text()
    assert "NaN" in text and "Infinity" in text  # JSON tokens, not strings: json.loads reads them
    samples = list(read_probe_file(path))
    assert [s.step for s in samples] == [1, 2, 9, 12]
    first, second, third, fourth = samples
    assert (first.loss, first.grad_norm, first.loss_scale, first.tokens) == (2.5, 0.5, 1024.0, 4)
    assert (first.step_seconds, first.compute_seconds, first.wait_seconds) == (1.0, 0.75, 0.25)
    assert math.isnan(second.loss) and second.grad_norm == math.inf
    assert third.loss == -math.inf and third.grad_norm is None and third.tokens is None
    assert fourth.loss == 1.0 and fourth.rank == 2


def test_writer_never_raises_and_warns_once(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    err = io.StringIO()
    writer = ProbeWriter(blocker / "sub" / "p.jsonl", warn=err)
    writer.write_line({"time": 1})
    writer.write_line({"time": 2})
    writer.write_line({"time": float("nan")})  # JSON cannot hold it: said (already), not raised
    assert writer.dropped == 2 and writer.written == 0
    assert err.getvalue().count("\n") == 1 and "cannot write probe lines" in err.getvalue()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (the allocator figures and the no-sync path)")
def test_cuda_steps_never_sync_and_carry_the_allocator_figures(tmp_path: Path) -> None:
    ids = torch.ones(4, 16, dtype=torch.long, device="cuda")
    mask = torch.ones(4, 16, dtype=torch.long, device="cuda")
    mask[:, 12:] = 0
    probe = Probe(tmp_path / "p.jsonl", every_steps=1000)
    losses = [torch.tensor(2.5 - i, device="cuda") for i in range(3)]  # 0-d tensors, as a loop has them
    norm = torch.tensor(0.75, device="cuda")
    torch.cuda.set_sync_debug_mode("error")  # any host-device sync in a step raises
    try:
        for i in range(3):
            probe.step(batch=ids, attention_mask=mask, loss=losses[i], grad_norm=norm, step_seconds=0.1)
    finally:
        torch.cuda.set_sync_debug_mode(0)
    probe.close()  # the one sync: all counts in one transfer
    lines = _lines(tmp_path / "p.jsonl")
    assert [(ln["tokens"], ln["padded_tokens"]) for ln in lines] == [(48, 64)] * 3
    assert [(ln["loss"], ln["grad_norm"]) for ln in lines] == [(2.5, 0.75), (1.5, 0.75), (0.5, 0.75)]
    for key in ("alloc_retries", "reserved_bytes", "allocated_bytes", "inactive_split_bytes"):
        assert all(isinstance(ln[key], int) for ln in lines), key
    assert lines[0]["reserved_bytes"] >= lines[0]["allocated_bytes"] > 0
