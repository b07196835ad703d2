"""The whole detector set on a long healthy run: zero alerts, and fast.

Six hours of 8 GPUs at 1 Hz (173k samples) plus a report every 5 s, with a
warm-up ramp, checkpoint dips of 80 s every 30 min and a relaunch in the
middle: every alert here would be a false alarm at 3 a.m.
"""

from __future__ import annotations

from dflash_watch.detectors.base import DETECTORS
from dflash_watch.detectors.config import DetectorConfig
from dflash_watch.detectors.registry import BaselineFigures, DetectorSet, build_detectors
from dflash_watch.parsers.events import GpuSample, Progress, Tick
from tests.core.synthetic import T0, drive, healthy_run

_HEALTHY = None


def healthy():
    global _HEALTHY
    if _HEALTHY is None:
        _HEALTHY = healthy_run(hours=6.0, gpus=8, seed=0)
    return _HEALTHY


def test_six_hour_healthy_run_has_zero_alerts():
    # Its speed is benchmarks/'s to measure, not a timed unit test's.
    scenario = healthy()
    assert len(scenario.events) > 170_000
    ds = DetectorSet(build_detectors(DetectorConfig()))
    alerts = drive(ds, scenario.events)
    assert alerts == []
    assert ds.learned_baseline() is not None and abs(ds.learned_baseline() - 21500.0) < 500.0


def test_six_hour_healthy_run_with_a_given_baseline_and_other_seeds():
    for seed in (1,):
        scenario = healthy_run(hours=6.0, gpus=8, seed=seed)
        ds = DetectorSet(build_detectors(DetectorConfig(), baseline=BaselineFigures(tokens_per_s=21500.0)))
        assert drive(ds, scenario.events) == []
        assert ds.learned_baseline() is None


def test_build_detectors_makes_one_of_each_contract_name():
    names = [d.name for d in build_detectors()]
    assert len(names) == len(set(names))
    assert set(names) == set(DETECTORS)


def test_routing_and_deadline():
    ds = DetectorSet(build_detectors())
    assert ds.deadline() is None
    assert ds.update(Tick(T0)) == []
    ds.update(Progress(T0, "log:1", step=1))
    # One line: the run's cadence is unknown yet, the limit is stall_first_s.
    assert ds.deadline() == T0 + DetectorConfig().stall_first_s
    ds.update(Progress(T0 + 10, "log:2", step=2))
    assert ds.deadline() == T0 + 10 + 120.0
    assert ds.update(GpuSample(T0 + 11, 0, None, None)) == []
    # A tick at the deadline asks; the next input (here a later tick) answers.
    assert ds.update(Tick(T0 + 130.0)) == [] and ds.deadline() is None
    (alert,) = ds.update(Tick(T0 + 131.0))
    assert alert.detector == "stall" and alert.time == T0 + 130.0 and ds.deadline() is None
    assert ds.get("stall") is not None and ds.get("nope") is None


def test_kept_deadlines_equal_asking_every_detector() -> None:
    """The set keeps each detector's deadline and re-reads only those an
    event went to; at every step that must equal asking all of them."""
    from tests.core.synthetic import merge, oom_crash, process_exit, recompiles

    def asked(ds: DetectorSet):
        found = [t for d in ds.detectors if (t := d.deadline()) is not None]
        return min(found) if found else None

    scenario = merge(
        healthy_run(hours=0.5, gpus=2, seed=3),
        recompiles([T0 + 600 + 5 * i for i in range(12)], hit_limit=True, limit=8),
        oom_crash(T0 + 1500.0, ranks=(0, 1, 2)),
        process_exit(T0 + 1600.0, "crashed", code=1),
    )
    ds = DetectorSet(build_detectors(DetectorConfig()))
    checked = 0
    for event in scenario.events:
        while (due := ds.deadline()) is not None and due < event.time:
            ds.update(Tick(due))
            assert ds.deadline() == asked(ds)
        ds.update(event)
        assert ds.deadline() == asked(ds), event
        checked += 1
    ds.flush()
    assert ds.deadline() == asked(ds)
    assert checked > 3000


def test_kept_deadlines_are_read_again_when_a_detector_raises() -> None:
    from dflash_watch.detectors.base import Alert, DetectorBase
    from dflash_watch.detectors.stall import Stall
    from dflash_watch.parsers.events import Event

    class Broken(DetectorBase):
        name = "broken"
        accepts = (Progress,)
        timed = False

        def update(self, event: Event) -> list[Alert]:
            raise RuntimeError("a bug in a detector")

    stall = Stall(DetectorConfig())
    ds = DetectorSet([stall, Broken()])
    try:
        ds.update(Progress(T0, "log:1", step=1))
    except RuntimeError:
        pass
    assert stall.deadline() is not None and ds.deadline() == stall.deadline()


def test_every_detector_declares_the_whole_protocol() -> None:
    """The set reads ``accepts``, ``timed``, ``flush`` and ``set_baseline``
    of every detector without ``getattr`` defaults: each class declares
    them (``DetectorBase``), and a detector that says it is not timed has
    no deadline."""
    from dflash_watch.detectors.base import EVENT_TYPES, DetectorBase

    for d in build_detectors():
        assert isinstance(d, DetectorBase), d
        assert d.accepts and set(d.accepts) <= set(EVENT_TYPES), d.name
        assert isinstance(d.timed, bool), d.name
        assert d.flush() == [], d.name
        d.set_baseline(None)
        if not d.timed:
            assert d.deadline() is None, d.name


def test_the_monitor_reads_detector_figures_through_the_set() -> None:
    from dflash_watch.detectors.alloc_thrash import AllocThrash
    from dflash_watch.detectors.counters import RankRises
    from dflash_watch.detectors.padding import PaddingDetector
    from dflash_watch.detectors.recompile_rate import RecompileRate
    from dflash_watch.parsers.events import ProbeSample

    ds = DetectorSet(build_detectors())
    assert isinstance(ds.recompile_rate(), RecompileRate)
    assert isinstance(ds.alloc_rises(), RankRises)
    assert ds.padding_efficiency() is None
    for i in range(40):
        ds.update(ProbeSample(T0 + i, rank=0, step=i, tokens=900, padded_tokens=1000, source="probe:1"))
    padding = ds.get("padding")
    assert isinstance(padding, PaddingDetector) and padding.efficiency is not None
    assert ds.padding_efficiency() == padding.efficiency
    # A set without those detectors has none of their figures.
    bare = DetectorSet([d for d in build_detectors() if not isinstance(d, (PaddingDetector, AllocThrash))])
    assert bare.padding_efficiency() is None and bare.alloc_rises() is None
