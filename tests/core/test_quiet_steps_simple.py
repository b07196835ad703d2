"""The batching contract on the three detectors whose step lines rarely matter (issue 20).

``memory_volatility`` only arms the memory model on a step (always quiet);
``recompile`` changes nothing on steps before its rate's next look while no
episode is open; ``padding`` changes nothing on steps that add no report
(after probe lines, in an open bucket already read twice, or stating no
padding). Each is held to the per-step path by ``tests.core.step_runs`` on
every fixture, shared, speed and random log, and on runs built at its edges.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from dflash_watch.detectors.base import Detector
from dflash_watch.detectors.config import DetectorConfig
from dflash_watch.detectors.memory import MemoryModel
from dflash_watch.detectors.memory_volatility import MemoryVolatility
from dflash_watch.detectors.padding import PaddingDetector
from dflash_watch.detectors.recompile import RecompileDetector
from dflash_watch.parsers.events import Event, ProbeSample, Progress, Recompile
from tests.core.step_runs import all_log_events, compare_runs

MAKERS: dict[str, Callable[[], Detector]] = {
    "memory_volatility": lambda: MemoryVolatility(DetectorConfig(), memory=MemoryModel(DetectorConfig())),
    "recompile": lambda: RecompileDetector(DetectorConfig()),
    "padding": lambda: PaddingDetector(DetectorConfig()),
}
LOGS = all_log_events()


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_every_log_gives_the_per_step_path(name: str) -> None:
    taken = offered = 0
    for label, events in LOGS:
        for seed in (1, 2):
            o, t = compare_runs(MAKERS[name], events, seed=seed, label=f"{name} {label}")
            offered += o
            taken += t
    assert offered and taken >= 0.5 * offered, (name, offered, taken)


@pytest.mark.parametrize("name", sorted(MAKERS))
@pytest.mark.parametrize("shape", ["speed-progress", "speed-ranks"])
def test_speed_shapes_are_taken(name: str, shape: str) -> None:
    events = dict(LOGS)[shape]
    offered, taken = compare_runs(MAKERS[name], events, seed=3, label=shape)
    assert offered and taken >= 0.8 * offered, (offered, taken)


def _steps(start: float, n: int, dt: float = 1.0, **kw: object) -> list[Event]:
    return [Progress(time=start + i * dt, source="log", step=i, **kw) for i in range(n)]  # type: ignore[arg-type]


def test_padding_steps_that_report_padding_go_one_at_a_time() -> None:
    """Each report may close a bucket and judge: a run that adds one is refused."""
    low = (("padding_efficiency", 0.3),)
    events = _steps(0.0, 400, 0.5, metrics=low)
    offered, taken = compare_runs(MAKERS["padding"], events, seed=5, label="padding reports")
    assert offered and taken < offered
    # the same with no padding stated: every run is quiet
    events = _steps(0.0, 400, 0.5, metrics=(("lr", 0.001),))
    offered, taken = compare_runs(MAKERS["padding"], events, seed=5, label="no padding")
    assert offered and taken == offered


def test_padding_after_probe_lines_is_quiet() -> None:
    probe = ProbeSample(time=0.0, source="probe", step=0, tokens=900, padded_tokens=1000)
    assert probe.padding_efficiency is not None
    events = [probe, *_steps(1.0, 300, 0.5, metrics=(("padding_efficiency", 0.3),))]
    offered, taken = compare_runs(MAKERS["padding"], events, seed=6, label="probe")
    assert offered and taken == offered


def test_recompile_runs_across_its_next_look_or_with_an_open_episode() -> None:
    storm = [Recompile(time=10.0 + i, source="log", function="f", reason="guard") for i in range(12)]
    # steps 20 a second: most runs fall between the rate's looks (a minute
    # apart), one of them across the open episode's end (600 s after the
    # last recompile), which only a tick inside it would resolve on time
    events = [*_steps(0.0, 10), *storm, *_steps(30.0, 16000, 0.05)]
    offered, taken = compare_runs(MAKERS["recompile"], events, seed=7, label="storm")
    assert offered and 0 < taken < offered


def test_recompile_runs_across_its_looks_are_taken_while_nothing_is_counted() -> None:
    """Across the warm-up's end and a look a minute: nothing counted, nothing fired."""
    events = _steps(0.0, 8000, 0.5)
    offered, taken = compare_runs(MAKERS["recompile"], events, seed=8, label="steady")
    assert offered and taken == offered


def test_recompile_runs_across_a_look_that_fires_the_rate_go_one_at_a_time() -> None:
    """Three recompiles after the warm-up, too close together for a rate: a
    look on a step line three minutes later fires it (``rate`` kind)."""
    late = [Recompile(time=1000.0 + i, source="log", function=f"f{i}", reason="guard") for i in range(3)]
    events = [*_steps(0.0, 2000, 0.5), *late, *_steps(1003.0, 1600, 0.5)]
    events.sort(key=lambda e: e.time)
    offered, taken = compare_runs(MAKERS["recompile"], events, seed=9, label="rate")
    assert offered and taken < offered
