"""One live clock for all of a run's probe files (``Ingest._onto_live``).

Every rank's probe file is stamped by one run on its clock; a clock per
file learnt each file's offset from when it happened to be read (a flush
seconds after its newest stamp, a poll later), and so moved ranks apart
by seconds that the straggler detector compares.
"""

from __future__ import annotations

from dflash_watch.monitor import Monitor
from dflash_watch.parsers.events import GpuSample, ProbeSample


def _feed(m: Monitor, path: str, rank: int, first: float, arrived: float) -> None:
    batch = [ProbeSample(first + i, rank=rank, step=10 + i) for i in range(3)]
    m.feed_probes(batch, path, fresh=True, now=arrived, arrived=arrived, log_seen=True)


def test_a_rank_whose_probe_file_is_read_late_keeps_its_stamps_beside_the_others() -> None:
    m = Monitor(keep_lines=0)
    m.live_since = 1000.0
    _feed(m, "dflash-probe-rank0.jsonl", 0, 1001.0, arrived=1003.2)  # read as written
    # Rank 1 stamped the same steps half a second later; its file was read
    # 3 s after its newest line (its flush came just after a poll).
    _feed(m, "dflash-probe-rank1.jsonl", 1, 1001.5, arrived=1006.5)
    latest = m.probes.by_rank()
    assert latest[0].time == 1003.0
    assert latest[1].time == 1003.5  # its own stamp, not moved 3 s later than rank 0's


def test_a_gpu_sample_file_keeps_a_clock_of_its_own() -> None:
    """Another writer (NVML in another process, a recorded file): its lines
    are not moved by the probe files' offset, nor the probes by its."""
    m = Monitor(keep_lines=0)
    m.live_since = 1000.0
    m.feed_samples([GpuSample(400.0, 0, 1, 2), GpuSample(401.0, 0, 1, 2)], "gpu.jsonl", fresh=True, now=1001.2,
                   arrived=1001.2, log_seen=True)
    _feed(m, "dflash-probe-rank0.jsonl", 0, 1001.0, arrived=1003.2)
    assert m.probes.by_rank()[0].time == 1003.0
    assert m._sides["gpu.jsonl"] is not m._sides["dflash-probe-rank0.jsonl"]
