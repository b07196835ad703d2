"""A run recorded on a real NVIDIA H200 replays to what happened there.

``tests/fixtures/gpu_h200`` holds the output of ``scripts/gpu_check/check.sh``
on a lent H200 (driver 580.159.04, 2026-12-04): the training log of
``train_cuda.py`` (block-buffered, unstamped, ending in torch's own CUDA
out-of-memory traceback), the NVML samples ``headless --record-gpu`` wrote
beside it (the health fields as that driver answered them), the probe's
lines with the CUDA allocator's figures, and ``nvml_check.py``'s output.
Live, headless fired memory_pressure (98.1% for 11 s), the crash as
``cuda_oom``, then memory_pressure resolved when the process was gone;
replay of the same files gave the same three.

The log has no stamps, so replay dates it by its mtime; the copy here is
given the mtime it had on that machine (the crash's time in both outputs).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from dflash_watch.replay import replay
from dflash_watch.sources.probes import read_probe_file
from dflash_watch.sources.samples import SampleParser, read_sample_file

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "gpu_h200"
LOG = HERE / "cuda_oom_pressure.log"
SAMPLES = HERE / "cuda_oom_pressure.gpu.jsonl"
PROBE = HERE / "cuda_oom_pressure.probe.jsonl"
LOG_MTIME = 1796383569.907603  # the log's mtime there: the crash alert's time live and in replay
GIB = 2**30


def _log(tmp_path: Path) -> str:
    copy = tmp_path / LOG.name
    shutil.copyfile(LOG, copy)
    os.utime(copy, (LOG_MTIME, LOG_MTIME))
    return str(copy)


def test_replay_gives_what_headless_gave_on_the_h200(tmp_path: Path) -> None:
    result = replay([_log(tmp_path)], gpu_samples=[str(SAMPLES)])
    got = [(a.detector, a.kind, a.gpu, a.state) for a in result.alerts]
    assert sorted(got, key=repr) == sorted([
        ("memory_pressure", None, 0, "firing"),
        ("memory_pressure", None, 0, "resolved"),
        ("crash", "cuda_oom", None, "firing"),
    ], key=repr), got
    by = {(a.detector, a.state): a for a in result.alerts}
    assert "98.1%" in by[("memory_pressure", "firing")].message
    crash = by[("crash", "firing")]
    assert crash.message.startswith("CUDA out of memory: tried to allocate 279.60 GiB")
    # The pressure came 8 s before the OOM, while the job still trained.
    assert by[("memory_pressure", "firing")].time < crash.time < by[("memory_pressure", "resolved")].time


def test_the_drivers_samples_read_with_every_health_field() -> None:
    parser = SampleParser(path=str(SAMPLES))
    samples = list(read_sample_file(SAMPLES, parser))
    assert len(samples) == parser.lines == 76, "every recorded line is a sample"
    for s in samples:
        assert s.gpu == 0 and s.total_bytes == 150754820096
        assert s.temp_c is not None and 30 <= s.temp_c <= 90
        assert s.power_w is not None and s.power_limit_w == 700.0
        assert s.sm_clock_max_mhz == 1980.0 and s.sm_clock_mhz is not None
        assert s.throttle == () and s.ecc_uncorrected == 0 and s.remap_pending is False
        assert s.retired_pages is None, "an H200 remaps rows; it has no retired-pages count"
        assert (s.pcie_gen, s.pcie_gen_max, s.pcie_width, s.pcie_width_max) == (5, 5, 16, 16)
    top = max(s.used_bytes or 0 for s in samples)
    assert 137 * GIB < top < 138 * GIB
    with_job = [s for s in samples if s.processes]
    assert with_job and {p.name for s in with_job for p in s.processes} == {"python3"}


def test_the_probe_lines_read_with_the_cuda_allocators_figures() -> None:
    lines = list(read_probe_file(PROBE))
    assert [p.step for p in lines] == list(range(1, 439)) and {p.rank for p in lines} == {0}
    last = lines[-1]
    assert last.allocated_bytes is not None and last.allocated_bytes > 135 * GIB
    assert last.reserved_bytes is not None and last.reserved_bytes >= last.allocated_bytes
    assert last.alloc_retries == 0 and last.recompiles == 0
    assert all(p.loss is not None and 9.0 < p.loss < 9.1 for p in lines)
    assert all(p.grad_norm is not None and p.step_seconds is not None and p.compute_seconds is not None
               for p in lines)


def test_an_inductor_loop_on_cuda_hits_its_recompile_limit() -> None:
    """``frameworks_cuda.py compile`` on the H200 (inductor, ``dynamic=False``,
    ``recompile_limit`` 4, ``TORCH_LOGS=recompiles``): dynamo recompiled
    three times, then hit the limit on the fourth new length: four
    ``Recompiling`` lines, the last one's attempt the one that hit it (read
    as 3 while torch's ``V`` lines were not read as stamps)."""
    result = replay([str(HERE / "compile_inductor_cuda.log")])
    assert [(a.detector, a.state) for a in result.alerts] == [("recompile", "firing")]
    alert = result.alerts[0]
    assert alert.message.startswith("torch.compile hit its recompile limit (4) for forward")
    assert alert.evidence["recompiles_in_window"] == 4 and alert.evidence["fatal"] is False
