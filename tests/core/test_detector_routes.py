"""The fast-route contract (``Detector.routes``, ``DetectorBase.fast_routes``).

A detector may give ``DetectorSet`` a handler of its own for an event type
(the step lines, ``Progress``) so that the set's precomputed table, not a
chain of type tests, picks the code. Such a handler must be ``update`` on
that type: the same alerts, in the same order, and the same state after.
Here every detector of a set runs once through its fast routes and once
through ``update`` only, on a run that has every path of the hot handlers
(ranks and their copies, NaN, spikes, a divergence, overflows, silences, a
straggler, crashes, relaunches), and the two must agree line for line.
"""

from __future__ import annotations

import random

import pytest

from dflash_watch.detectors.base import EVENT_TYPES, DetectorBase
from dflash_watch.detectors.config import DetectorConfig
from dflash_watch.detectors.registry import DetectorSet, build_detectors
from dflash_watch.parsers.events import Crash, Event, Overflow, ProcessExit, Progress
from tests.core.synthetic import drive

T0 = 1_700_000_000.0


def _run(seed: int) -> list[Event]:
    """Four ranks' step lines with loss, grad norm, loss scale and skip
    counters; rank 3 slows down, NaNs, a spike, a long climb of the loss,
    overflow storms, silences, a crash and a relaunch."""
    rng = random.Random(seed)
    events: list[Event] = []
    t = T0
    step = 0
    loss = 3.0
    skipped_total = 0.0
    for i in range(3000):
        step += 1
        t += 1.0 + rng.random() * 0.2
        if i in (700, 1900):
            t += 400.0  # a silence: a stall
        if 1200 <= i < 1500:
            loss *= 1.003  # a sustained climb: a divergence
        else:
            loss = max(0.5, loss * 0.9995)
        value = loss * (1.0 + 0.02 * rng.gauss(0.0, 1.0))
        if i in (300, 1000, 2500):
            value = loss * 6.0  # a spike
        grad = float("nan") if i in (500, 501, 2200) else 1.0 + rng.random()
        if 800 <= i < 900 and rng.random() < 0.9:
            skipped_total += 1.0
        metrics: tuple[tuple[str, float], ...] = (
            ("train/grad_norm", grad), ("loss_scale", 2.0 ** (16 - (i // 400))), ("skipped", skipped_total),
            ("lr", 1e-4),
        )
        if i % 50 == 0:
            metrics += (("number of skipped iterations", float(rng.randint(0, 3))),
                        ("number of nan iterations", 1.0 if i == 2600 else 0.0))
        for rank in range(4):
            lag = 0.0 if rank < 3 or i < 1000 else 0.8 + rng.random()  # rank 3 becomes a straggler
            if rank == 3 and 2700 <= i < 2760:
                continue  # rank 3 goes silent for a while: hung?
            events.append(Progress(
                t + lag + rng.random() * 0.01, f"rank{rank}.log:{i}", step=step, total_steps=3000,
                tokens_per_s=20000.0 * (0.5 if 1600 <= i < 1750 else 1.0) * (1.0 + 0.01 * rng.random()),
                loss=value, rank=rank, metrics=metrics, step_seconds=1.0 + lag,
                clocked=not (i % 97 == 0 and rank == 2),
            ))
        if i == 850:
            events.append(Overflow(t + 0.5, "rank0.log:o", scale=1024.0, new_scale=512.0, rank=0))
        if i == 2000:
            events.append(Crash(t + 2.0, "rank1.log:c", detector="crash", kind="exception", exc_type="RuntimeError",
                                message="boom", signature="RuntimeError @ train.py:step", rank=1))
            events.append(ProcessExit(t + 3.0, "crash", code=1))
            step = 0  # relaunched from scratch
            t += 30.0
        if i % 400 == 399:
            events.append(Progress(t + 0.3, "eval.log:1", step=i // 400, total_steps=10, rate=3.0, rate_unit="it/s"))
    events.sort(key=lambda e: e.time)
    return events


def _update_only(ds: DetectorSet) -> DetectorSet:
    """The same detectors, routed through ``update`` for every type."""
    for d in ds:
        assert isinstance(d, DetectorBase)
        d.fast_routes = dict  # type: ignore[method-assign]  # no handler of its own: update
    return DetectorSet(list(ds))


def test_every_detector_routes_exactly_what_it_accepts():
    for d in build_detectors():
        routes = d.routes()
        assert set(routes) == set(d.accepts) and set(routes) <= set(EVENT_TYPES), d.name


def test_a_fast_route_for_a_type_not_accepted_is_refused():
    d = build_detectors()[0]
    d.fast_routes = lambda: {Crash: d.update}  # type: ignore[method-assign]
    with pytest.raises(TypeError):
        d.routes()


@pytest.mark.parametrize("seed", [0, 1])
def test_fast_routes_give_the_alerts_and_state_of_update(seed):
    events = _run(seed)
    calls: dict[str, int] = {}  # each detector's own Progress handler, how often the set used it
    detectors = build_detectors(DetectorConfig())
    for d in detectors:
        assert isinstance(d, DetectorBase)
        own = d.fast_routes().get(Progress)
        if own is not None:
            def counted(event: Event, _own=own, _name=d.name) -> list:  # type: ignore[no-untyped-def]
                calls[_name] = calls.get(_name, 0) + 1
                return _own(event)

            d.fast_routes = lambda _c=counted: {Progress: _c}  # type: ignore[method-assign]
    fast = DetectorSet(detectors)
    slow = _update_only(DetectorSet(build_detectors(DetectorConfig())))
    fast_alerts = [a.to_json() for a in drive(fast, events, until=events[-1].time + 3600.0)]
    slow_alerts = [a.to_json() for a in drive(slow, events, until=events[-1].time + 3600.0)]
    assert fast_alerts == slow_alerts
    kinds = {(a.split('"detector": "')[1].split('"')[0]) for a in fast_alerts}
    # The run reaches the hot handlers' alerting paths, not only their quiet ones.
    assert {"loss", "stall", "straggler", "crash", "throughput_drop"} <= kinds, kinds
    assert fast.loss_state() == slow.loss_state()
    assert fast.rank_table() == slow.rank_table()
    assert fast.learned_baseline() == slow.learned_baseline()
    assert fast.deadline() == slow.deadline()
    # The comparison means something only if the fast set really took the
    # detectors' own handlers: each is used for every step line it gets.
    steps = sum(type(e) is Progress for e in events)
    assert set(calls) >= {"loss", "throughput_drop", "crash", "fx_tracing", "straggler", "stall"}, calls
    assert all(n == steps for n in calls.values()), (calls, steps)
