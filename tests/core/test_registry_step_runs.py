"""``DetectorSet.take_steps``: the set's side of the batching contract (issue 20).

A run of step lines is committed only when every detector of the step
lines' route proves it quiet; all are asked before any commits (a refusal
leaves every detector as it was); a detector that keeps the default
``quiet_steps`` (None) means no run is offered at all; detectors off the
route are never asked; after the commits the set's kept deadlines are
re-read (they move with the steps).
"""

from __future__ import annotations

from collections.abc import Sequence

from dflash_watch.detectors.base import Alert, DetectorBase, StepCommit
from dflash_watch.detectors.registry import DetectorSet
from dflash_watch.parsers.events import Event, GpuSample, Progress

STEPS = [Progress(time=100.0 + i, source="log", step=i) for i in range(10)]


class Fake(DetectorBase):
    """Says what it is told; records what it was asked and what committed."""

    timed = True

    def __init__(self, name: str, answer: bool, *, accepts: tuple[type[Event], ...] = (Progress,)) -> None:
        self.name = name
        self.answer = answer
        self.accepts = accepts
        self.asked = 0
        self.committed: list[int] = []
        self.fed = 0
        self._deadline: float | None = 50.0

    def update(self, event: Event) -> list[Alert]:
        self.fed += 1
        return []

    def deadline(self) -> float | None:
        return self._deadline

    def quiet_steps(self, steps: Sequence[Progress], /) -> StepCommit | None:
        self.asked += 1
        if not self.answer:
            return None

        def commit() -> None:
            self.committed.append(len(steps))
            self._deadline = steps[-1].time + 60.0

        return commit


class Plain(DetectorBase):
    """A detector that keeps the default: one step at a time."""

    name = "plain"
    accepts = (Progress,)
    timed = False

    def update(self, event: Event) -> list[Alert]:
        return []


def test_every_detector_quiet_commits_all_and_rereads_deadlines() -> None:
    a, b = Fake("a", True), Fake("b", True)
    dset = DetectorSet([a, b])
    assert dset.takes_step_runs
    assert dset.deadline() == 50.0
    assert dset.take_steps(STEPS)
    assert a.committed == [10] and b.committed == [10]
    assert a.fed == b.fed == 0
    assert dset.deadline() == STEPS[-1].time + 60.0


def test_one_refusal_commits_none_and_changes_no_deadline() -> None:
    a, b, c = Fake("a", True), Fake("b", False), Fake("c", True)
    dset = DetectorSet([a, b, c])
    assert not dset.take_steps(STEPS)
    assert a.committed == [] and c.committed == []
    assert a.asked == 1 and b.asked == 1 and c.asked == 0  # no need to ask past a refusal
    assert dset.deadline() == 50.0


def test_a_detector_without_the_contract_means_no_run_is_offered() -> None:
    a = Fake("a", True)
    dset = DetectorSet([a, Plain()])
    assert not dset.takes_step_runs
    assert not dset.take_steps(STEPS)
    assert a.asked == 0


def test_detectors_off_the_route_are_not_asked() -> None:
    a = Fake("a", True)
    gpu = Fake("gpu", False, accepts=(GpuSample,))
    dset = DetectorSet([a, gpu])
    assert dset.take_steps(STEPS)
    assert gpu.asked == 0 and gpu.committed == []
    assert a.committed == [10]


def test_the_last_to_refuse_is_asked_first_and_commits_keep_the_route_order() -> None:
    """A crash held open refuses every run until it settles: asked first,
    the others are not asked to work out runs that are refused anyway. The
    commits still run in the route's order (two detectors may share a
    record, as crash and fx_tracing do)."""
    order: list[str] = []
    first, second, third = Fake("first", True), Fake("second", True), Fake("third", False)
    for fake in (first, second, third):
        inner = fake.quiet_steps

        def asked(steps, /, inner=inner, name=fake.name):  # type: ignore[no-untyped-def]
            commit = inner(steps)
            if commit is None:
                return None

            def done() -> None:
                order.append(name)
                commit()

            return done

        fake.quiet_steps = asked  # type: ignore[method-assign]
    dset = DetectorSet([first, second, third])
    assert not dset.take_steps(STEPS)
    assert (first.asked, second.asked, third.asked) == (1, 1, 1)
    assert not dset.take_steps(STEPS)
    assert (first.asked, second.asked, third.asked) == (1, 1, 2)  # only the refuser was asked
    third.answer = True
    assert dset.take_steps(STEPS)
    assert order == ["first", "second", "third"]
    assert (first.committed, second.committed, third.committed) == ([10], [10], [10])
