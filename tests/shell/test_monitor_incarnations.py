"""A relaunch made anywhere is one restart, and the old run's exit is history.

The watcher learns a new incarnation of the job from its own relaunch
(``Monitor.job_relaunched``) or from a status read (``set_job_state``): a
relaunch from another shell, another watcher's ``r`` or its auto-relaunch.
Before, only its own counted: the old run's critical ``process_exit`` stayed
firing beside a healthy run (the dashboard's "1 firing", the exported
``dflash_alerts_firing{detector="process_exit"} 1``, ``restarts_total 0``).
"""

from __future__ import annotations

from dflash_watch.control.state import JobState
from dflash_watch.metrics.collector import AlertCounter, MonitorCollector
from dflash_watch.monitor import Monitor
from dflash_watch.parsers.events import ProcessExit

T0 = 1_800_000_000.0


def _running(pid: int) -> JobState:
    return JobState("running", "train", pid=pid, pids=(pid,), started_at=T0, pane="%0", run_id=f"run{pid}")


def _firing(m: Monitor) -> dict:
    return MonitorCollector(m, AlertCounter())._snapshot()["firing"]


def test_a_relaunch_seen_only_in_the_status_clears_the_old_exit_and_counts_once() -> None:
    m = Monitor(keep_lines=0)
    m.set_job_state(_running(100))
    assert m.restarts == 0  # the run found when the watcher started: no restart
    m.feed_events([ProcessExit(T0 + 10, "crash", code=1, source="job")])
    m.set_job_state(JobState("exited", "train", code=1, pane="%0", run_id="run100"))
    assert _firing(m) == {"process_exit": 3}
    m.set_job_state(_running(200))  # `dflash-watch relaunch` from another shell
    assert m.restarts == 1 and _firing(m) == {} and m.last_exit is None
    assert any("relaunched by someone else" in n for n in m.notices)
    m.set_job_state(_running(200))  # the same run, read again
    assert m.restarts == 1


def test_the_watchers_own_relaunch_is_one_restart_whatever_reads_its_status_first() -> None:
    m = Monitor(keep_lines=0)
    m.set_job_state(_running(100))
    m.job_relaunched(T0, _running(200))  # the dashboard's r: its state after
    m.set_job_state(_running(200))
    assert m.restarts == 1 and m.job_state.pid == 200
    m.set_job_state(_running(300))  # a status read before the relaunch is told
    m.job_relaunched(T0, _running(300))
    assert m.restarts == 2
    m.job_relaunched(T0)  # auto-relaunch: no state at hand
    m.set_job_state(_running(400))  # its run, when a status shows it
    assert m.restarts == 3
    m.set_job_state(_running(500))
    assert m.restarts == 4

