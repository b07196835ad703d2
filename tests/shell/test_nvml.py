"""The NVML sampler against a fake NVML (and the real binding's no-driver path)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pynvml
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fake_nvml import FakeGpu, FakeNvml, GiB  # noqa: E402

from dflash_watch.parsers.events import GpuLost, GpuSample  # noqa: E402
from dflash_watch.procfs import proc_tree  # noqa: E402
from dflash_watch.sources.nvml import UNAVAILABLE_HINT, GpuInfo, GpuSampler  # noqa: E402
from dflash_watch.sources.nvml_select import select_gpus  # noqa: E402
from dflash_watch.sources.nvml_thread import SamplerThread  # noqa: E402


@pytest.fixture
def fake(monkeypatch) -> FakeNvml:
    return FakeNvml.eight().install(monkeypatch)


@pytest.fixture
def proc(tmp_path: Path) -> Path:
    """A /proc with names for the fake job's pids."""
    for pid in range(1000, 1008):
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "comm").write_text(f"pt_main_thread{pid - 1000}\n")
    return tmp_path


def samples_of(batch) -> dict[int, GpuSample]:
    return {s.gpu: s for s in batch if isinstance(s, GpuSample)}


def test_eight_gpus_memory_util_processes(fake: FakeNvml, proc: Path) -> None:
    sampler = GpuSampler(proc_root=str(proc))
    assert sampler.available and sampler.unavailable is None
    assert [g.index for g in sampler.gpus] == list(range(8))
    assert sampler.gpus[2] == GpuInfo(2, "NVIDIA H100 80GB HBM3", fake.gpus[2].uuid, 80 * GiB)
    batch = sampler.sample(123.5)
    assert len(batch) == 8 and all(isinstance(s, GpuSample) for s in batch)
    s5 = samples_of(batch)[5]
    # v2 memory: driver-reserved memory is not counted as used.
    assert (s5.time, s5.used_bytes, s5.total_bytes) == (123.5, 65 * GiB, 80 * GiB)
    assert s5.util == pytest.approx(0.95)
    assert s5.source == "nvml"
    assert [(p.pid, p.used_bytes, p.name) for p in s5.processes] == [(1005, 64 * GiB, "pt_main_thread5")]
    s0 = samples_of(batch)[0]
    assert [p.pid for p in s0.processes] == [1000, 4242]  # largest first
    assert s0.processes[1].name == ""  # no /proc entry: best effort
    assert sampler.drain_notices() == []


def test_job_pids_mark_the_jobs_processes(fake: FakeNvml, proc: Path) -> None:
    sampler = GpuSampler(proc_root=str(proc))
    assert not any(p.job for s in samples_of(sampler.sample(1.0)).values() for p in s.processes)
    sampler.job_pids = range(1000, 1008)
    assert sampler.job_pids == frozenset(range(1000, 1008))
    s0 = samples_of(sampler.sample(2.0))[0]
    assert {p.pid: p.job for p in s0.processes} == {1000: True, 4242: False}


def test_compute_and_graphics_lists_merge_by_pid(fake: FakeNvml, proc: Path) -> None:
    fake.gpus[1].compute = [(1001, 5 * GiB), (77, None)]
    fake.gpus[1].graphics = [(1001, 4 * GiB), (88, GiB)]  # one allocation seen twice: max, not sum
    s1 = samples_of(GpuSampler(proc_root=str(proc)).sample(1.0))[1]
    assert [(p.pid, p.used_bytes) for p in s1.processes] == [(1001, 5 * GiB), (88, GiB), (77, 0)]


def test_process_names_from_the_real_proc(fake: FakeNvml) -> None:
    fake.gpus[0].compute = [(os.getpid(), GiB)]
    s0 = samples_of(GpuSampler().sample(1.0))[0]
    assert s0.processes[0].name == Path(f"/proc/{os.getpid()}/comm").read_text().strip()


def test_gpu_lost_mid_run_reports_once_and_others_continue(fake: FakeNvml, proc: Path) -> None:
    sampler = GpuSampler(proc_root=str(proc))
    assert len(samples_of(sampler.sample(1.0))) == 8
    fake.gpus[3].lost = True
    batch = sampler.sample(2.0)
    lost = [e for e in batch if isinstance(e, GpuLost)]
    assert len(lost) == 1 and lost[0].gpu == 3 and lost[0].time == 2.0
    assert lost[0].message.startswith("GPU 3 lost: GPU is lost")
    assert fake.gpus[3].uuid in lost[0].message
    # GPU 3's last line says ``lost`` (for the detectors and --record-gpu).
    assert samples_of(batch)[3].lost is True and samples_of(batch)[3].used_bytes is None
    assert sorted(samples_of(batch)) == [0, 1, 2, 3, 4, 5, 6, 7]
    calls = fake.calls
    batch = sampler.sample(3.0)
    assert not any(isinstance(e, GpuLost) for e in batch)
    assert sorted(samples_of(batch)) == [0, 1, 2, 4, 5, 6, 7]
    # memory, util, compute, graphics + 8 health reads; none for GPU 3
    assert fake.calls - calls == 7 * 12


def test_gpu_lost_before_start_is_reported_on_first_sample(monkeypatch) -> None:
    fake = FakeNvml([FakeGpu(uuid="GPU-a"), FakeGpu(uuid="GPU-b", lost=True)]).install(monkeypatch)
    sampler = GpuSampler()
    assert sampler.gpus[1] == GpuInfo(1, None, None, None)
    first = sampler.sample(1.0)
    assert [type(e).__name__ for e in first] == ["GpuSample", "GpuLost", "GpuSample"]
    assert first[1].message.startswith("GPU 1 lost:")
    assert first[2].gpu == 1 and first[2].lost is True
    assert [type(e).__name__ for e in sampler.sample(2.0)] == ["GpuSample"]
    assert fake.initialised == 1


def test_not_supported_fields_become_none_and_are_not_asked_again(fake: FakeNvml, proc: Path) -> None:
    fake.gpus[0].not_supported = {"util"}
    fake.gpus[1].not_supported = {"memory_v2"}  # older GPU: v1 memory info
    fake.gpus[2].not_supported = {"memory_v2", "memory", "compute", "graphics"}
    fake.gpus[3].not_supported = {"compute"}
    fake.gpus[3].graphics = [(1003, GiB)]
    sampler = GpuSampler(proc_root=str(proc))
    for t in (1.0, 2.0):
        calls = fake.calls
        by_gpu = samples_of(sampler.sample(t))
        assert by_gpu[0].util is None and by_gpu[0].used_bytes == 60 * GiB
        assert by_gpu[1].used_bytes == 61 * GiB + fake.gpus[1].reserved  # v1 includes reserved
        assert by_gpu[2].used_bytes is None and by_gpu[2].total_bytes is None
        assert by_gpu[2].processes is None and by_gpu[2].util == pytest.approx(0.92)
        assert [(p.pid, p.used_bytes) for p in by_gpu[3].processes] == [(1003, GiB)]
        assert by_gpu[4].util is not None and by_gpu[4].processes
    # Second round: unsupported calls are skipped (8 GPUs x 4 calls, minus 1+3+1).
    # ... plus the 8 health reads per GPU (the static ones wait STATIC_EVERY samples).
    assert fake.calls - calls == 32 - 5 + 8 * 8
    assert sampler.gpus[2].total_bytes is None
    assert sampler.drain_notices() == []


def test_driver_binding_mismatch_falls_back_and_notices_once(fake: FakeNvml, proc: Path) -> None:
    fake.missing = {"nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetMemoryInfo_v2"}
    seen: list[str] = []
    sampler = GpuSampler(proc_root=str(proc), on_notice=seen.append)
    for t in (1.0, 2.0, 3.0):
        by_gpu = samples_of(sampler.sample(t))
        assert by_gpu[5].used_bytes == 65 * GiB + fake.gpus[5].reserved  # v1
        assert [p.pid for p in by_gpu[5].processes] == [1005]  # through _v2
    assert len(seen) == 2 and all("driver/binding mismatch" in m for m in seen)
    assert any("nvmlDeviceGetComputeRunningProcesses" in m and "550.54.15" in m for m in seen)
    assert any("nvmlDeviceGetMemoryInfo_v2" in m for m in seen)
    assert sampler.drain_notices() == seen and sampler.drain_notices() == []


def test_driver_without_any_process_call(fake: FakeNvml, proc: Path) -> None:
    fake.missing = {f"nvmlDeviceGet{kind}RunningProcesses_v{v}" for kind in ("Compute", "Graphics") for v in (2, 3)}
    sampler = GpuSampler(proc_root=str(proc))
    for t in (1.0, 2.0):
        by_gpu = samples_of(sampler.sample(t))
        assert all(s.processes is None and s.used_bytes is not None for s in by_gpu.values())
    notices = sampler.drain_notices()
    assert len(notices) == 4 and sum("not available" in m for m in notices) == 2


def test_unknown_errors_are_passing(fake: FakeNvml, proc: Path) -> None:
    sampler = GpuSampler(proc_root=str(proc))
    fake.gpus[6].errors = {"util": pynvml.NVML_ERROR_UNKNOWN, "memory_v2": pynvml.NVML_ERROR_UNKNOWN}
    s6 = samples_of(sampler.sample(1.0))[6]
    assert (s6.used_bytes, s6.total_bytes, s6.util) == (None, None, None)
    fake.gpus[6].errors = {}
    s6 = samples_of(sampler.sample(2.0))[6]
    assert s6.used_bytes == 66 * GiB and s6.util == pytest.approx(0.96)  # still v2


def test_unexpected_exception_never_escapes(fake: FakeNvml, proc: Path, monkeypatch) -> None:
    def broken(handle):
        raise RuntimeError("binding bug")

    monkeypatch.setattr(pynvml, "nvmlDeviceGetUtilizationRates", broken)
    sampler = GpuSampler(proc_root=str(proc))
    for t in (1.0, 2.0):
        by_gpu = samples_of(sampler.sample(t))
        assert len(by_gpu) == 8 and all(s.util is None and s.used_bytes for s in by_gpu.values())
    (notice,) = sampler.drain_notices()
    assert "RuntimeError: binding bug" in notice


@pytest.mark.parametrize(
    ("code", "reason"),
    [(pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "Driver Not Loaded"), (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "NVML Shared Library Not Found")],
)
def test_no_driver_gives_one_clear_message(monkeypatch, code: int, reason: str) -> None:
    fake = FakeNvml.eight().install(monkeypatch)
    fake.init_error = code
    seen: list[str] = []
    sampler = GpuSampler(on_notice=seen.append)
    expected = f"NVML not available: {reason}; {UNAVAILABLE_HINT}"
    assert sampler.unavailable == expected and seen == [expected]
    assert not sampler.available and sampler.gpus == [] and sampler.sample(1.0) == []
    sampler.close()
    assert fake.shutdowns == 0


def test_real_binding_without_a_driver() -> None:
    """No fake: this machine's real pynvml must fail cleanly at nvmlInit."""
    sampler = GpuSampler()
    if sampler.available:
        sampler.close()
        pytest.skip("a real NVML driver is present here")
    assert sampler.unavailable.startswith("NVML not available: ")
    assert sampler.unavailable.endswith("; GPU panels off; pass --gpu-samples FILE to read samples from a file")
    assert "Traceback" not in sampler.unavailable and len(sampler.unavailable.splitlines()) == 1
    assert sampler.sample(1.0) == [] and sampler.drain_notices() == [sampler.unavailable]


def test_shutdown_once(fake: FakeNvml) -> None:
    with GpuSampler() as sampler:
        assert fake.initialised == 1
    sampler.close()
    assert fake.shutdowns == 1 and fake.initialised == 0
    assert sampler.sample(1.0) == []


def test_selection_by_cuda_visible_devices(fake: FakeNvml) -> None:
    sampler = GpuSampler(cuda_visible_devices=f"6,{fake.gpus[2].uuid[:12]},6")
    assert [g.index for g in sampler.gpus] == [6, 2]
    assert sorted(samples_of(sampler.sample(1.0))) == [2, 6]  # NVML indices, as nvidia-smi shows
    assert [g.index for g in GpuSampler(indices=[7, 9]).gpus] == [7]


def test_select_gpus_rules() -> None:
    uuids = ["GPU-aaaa-1", "GPU-aaab-2", "GPU-bbbb-3", None]
    assert select_gpus(uuids) == ([0, 1, 2, 3], [])
    assert select_gpus(uuids, indices=[3, 1, 3]) == ([3, 1], [])
    assert select_gpus(uuids, indices=[1], cuda_visible_devices="0")[0] == [1]
    assert select_gpus(uuids, cuda_visible_devices=" 2, 0 ")[0] == [2, 0]
    assert select_gpus(uuids, cuda_visible_devices="1,-1,2")[0] == [1]  # -1 ends the list, as in CUDA
    chosen, notes = select_gpus(uuids, cuda_visible_devices="9,GPU-bbbb,GPU-aaa,GPU-zz,foo")
    assert chosen == [2]
    assert len(notes) == 4 and "ambiguous (GPUs 0, 1)" in notes[1] and "matches no GPU" in notes[2]
    assert select_gpus(uuids, cuda_visible_devices="") == ([], ["CUDA_VISIBLE_DEVICES is empty: no GPU selected"])
    chosen, notes = select_gpus(uuids, cuda_visible_devices="MIG-GPU-aaab-2/1/0,MIG-5c1d")
    assert chosen == [1] and any("whole GPU 1" in n for n in notes)
    chosen, notes = select_gpus(uuids, cuda_visible_devices="MIG-5c1d-77,MIG-0000")
    assert chosen == [0, 1, 2, 3] and "every GPU" in notes[-1]


def test_process_tree_of_a_real_process_chain() -> None:
    child = subprocess.Popen(["sh", "-c", "sleep 30 & sleep 30 & wait"])
    tree: set[int] = set()
    try:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            tree = set(proc_tree(child.pid))
            if len(tree) == 3:
                break
            time.sleep(0.02)
        assert child.pid in tree and len(tree) == 3
        assert child.pid in proc_tree(os.getpid())
        assert os.getpid() not in tree
    finally:
        for pid in tree - {child.pid}:  # the two sleeps we started, by pid
            os.kill(pid, signal.SIGKILL)
        child.kill()
        child.wait()
    assert proc_tree(child.pid) == ()


def test_process_tree_parses_odd_command_names(tmp_path: Path) -> None:
    def stat(pid: int, comm: str, ppid: int) -> None:
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "stat").write_text(f"{pid} ({comm}) S {ppid} {pid} 0 0\n")

    stat(10, "tmux: server", 1)
    stat(11, "bash", 10)
    stat(12, "python) S 999 (x", 11)  # a hostile comm must not fake its parent
    stat(13, "torchrun", 12)
    stat(20, "other", 1)
    (tmp_path / "self").mkdir()
    assert proc_tree(11, proc_dir=str(tmp_path)) == (11, 12, 13)
    assert proc_tree(99, proc_dir=str(tmp_path)) == ()


class _Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        self.t += 1.0
        return self.t


def test_sampler_thread_runs_off_thread_and_survives_errors(fake: FakeNvml, proc: Path) -> None:
    sampler = GpuSampler(proc_root=str(proc))
    batches: list[list] = []
    threads: set[str] = set()
    got_three = threading.Event()

    def callback(batch) -> None:
        threads.add(threading.current_thread().name)
        batches.append(batch)
        if len(batches) == 2:
            raise ValueError("the UI fell over")
        if len(batches) >= 3:
            got_three.set()

    runner = SamplerThread(sampler, 0.01, callback, clock=_Clock()).start()
    try:
        assert got_three.wait(5)
    finally:
        runner.stop()
    assert not runner.is_alive()
    assert threads == {"gpu-sampler"}
    assert [b[0].time for b in batches[:3]] == [1001.0, 1002.0, 1003.0]
    assert runner.last_duration is not None and runner.last_duration < 0.5
    notices = sampler.drain_notices()
    assert len(notices) == 1 and "ValueError: the UI fell over" in notices[0]


def test_sampler_thread_rejects_bad_interval(fake: FakeNvml) -> None:
    with pytest.raises(ValueError):
        SamplerThread(GpuSampler(), 0, lambda batch: None)


def test_live_session_samples_records_and_alerts_a_lost_gpu(fake: FakeNvml, tmp_path: Path) -> None:
    """The watch path end to end on the fake driver: the sampler thread feeds
    the Monitor, `--record-gpu` appends contract lines that replay reads back,
    and a GPU falling off the bus is a crash-class alert while the others go on."""
    import time as _time

    from dflash_watch.live import LiveSession
    from dflash_watch.monitor import Monitor
    from dflash_watch.sources.samples import read_sample_file

    record = tmp_path / "gpu.jsonl"
    monitor = Monitor(keep_lines=0)
    session = LiveSession(monitor, use_nvml=True, gpu_interval_s=0.05, record_file=str(record), tick_s=0.05)
    with session:
        deadline = _time.time() + 5
        while _time.time() < deadline and len(monitor.gpus.gpus) < 8:
            _time.sleep(0.02)
        fake.gpus[3].lost = True
        while _time.time() < deadline and not [a for a in monitor.alerts.history if a.detector == "crash"]:
            _time.sleep(0.02)
            monitor.quiet(_time.time(), _time.time())  # release the held crash alert (nothing more to merge)
    assert sorted(monitor.gpus.gpus) == list(range(8))
    (lost,) = [a for a in monitor.alerts.history if a.detector == "crash"]
    assert lost.kind == "cuda_error" and "GPU 3 lost" in lost.message
    recorded = list(read_sample_file(str(record)))
    assert {s.gpu for s in recorded} == set(range(8))
    assert all(s.total_bytes == 80 * 1024**3 for s in recorded if s.total_bytes)
    assert monitor.gpus.last(0).used_bytes == 60 * 1024**3


def test_live_session_watches_the_gpus_cuda_visible_devices_names(fake: FakeNvml, monkeypatch) -> None:
    from dflash_watch.live import LiveSession
    from dflash_watch.monitor import Monitor

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5,6,7")
    session = LiveSession(Monitor(keep_lines=0), use_nvml=True)
    session._start_nvml()
    try:
        assert [g.index for g in session.sampler.gpus] == [5, 6, 7]
    finally:
        session.stop()
