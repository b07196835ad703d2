"""The dashboard's job actions (s, a, r): preflight, confirmation, thread workers.

A mixin of :class:`~dflash_watch.tui.app.DashboardApp`, apart because it is
one concept: every action that touches the training job asks the job for a
fresh state off the event loop, shows what it would do, and acts only on a
"y" where anything alive would be killed (or a pane the user started by
hand respawned). tmux calls and grace periods of 30 s run on thread
workers that report each step back with ``call_from_thread``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import work

from .preflight import Preflight, preflight
from .screens.confirm import ConfirmScreen
from .takeover import takeover_text, takeover_title
from .text import plain

if TYPE_CHECKING:
    from textual.app import App

    from ..monitor import Monitor

    # For the type checker only, the mixin is an App (``notify``,
    # ``push_screen``, ``call_from_thread``); at run time it stays a plain
    # class so that DashboardApp's bases and their order are unchanged.
    _AppBase = App[int]
else:
    _AppBase = object


# What ``busy`` says while an action acts on the job (not while it only checks).
ACTING = frozenset({"start", "abort", "relaunch", "takeover"})

class JobActions(_AppBase):
    """Needs from the app: ``job``, ``monitor``, ``session``, ``control_note``,
    ``busy``, ``steps``, ``clock``, ``notify``, ``push_screen``, ``redraw``."""

    # Declared, not assigned: DashboardApp.__init__ sets them. The job and
    # the session are duck-typed (tmux Job, ChildJob, a scene's fake job).
    job: Any
    monitor: Monitor
    session: Any
    control_note: str | None
    busy: str | None  # the job action in flight, if any
    steps: list[str]  # job action steps, newest last
    clock: Callable[[], float]

    if TYPE_CHECKING:
        def redraw(self, force: bool = False) -> None: ...

    def _control_ready(self, what: str) -> bool:
        if self.job is None or self.control_note:
            self.notify(f"cannot {what}: {self.control_note or 'no job configured'}", severity="warning", markup=False)
            return False
        if self.busy:
            self.notify(f"cannot {what}: {self.busy} still in progress", severity="warning", markup=False)
            return False
        return True

    def quit_asked(self, answer: Callable[[bool | None], None]) -> bool:
        """Whether quitting must ask first (then the question is up, and
        ``answer`` gets the reply): an abort, a start, a relaunch or a
        takeover runs in this process (an abort's Ctrl-C, SIGTERM and
        SIGKILL are seconds apart), and quitting ends it where it is, a job
        asked to stop left running, unsaid. Waiting is the default."""
        acting = self.busy if self.busy in ACTING else None
        if acting is None:
            return False
        body = Text(f"The {acting} runs in this dashboard and is not done: quitting now stops it where it is, "
                    "and the job may be left as it is now (an abort's SIGTERM and SIGKILL not sent). "
                    "Cancel waits for it; its end is shown here.")
        self.push_screen(ConfirmScreen(f"{acting} in progress: quit anyway?", body, yes_label="Quit (y)"), answer)
        return True

    def action_start(self) -> None:
        if not self._control_ready("start"):
            return
        self.busy = "start"
        self._run_job_action("start")

    def action_abort(self) -> None:
        if not self._control_ready("abort"):
            return
        self.busy = "abort (checking)"
        self._check_then("abort")

    def action_relaunch(self) -> None:
        if not self._control_ready("relaunch"):
            return
        self.busy = "relaunch (preflight)"
        self._check_then("relaunch")

    @work(thread=True, group="job")
    def _check_then(self, action: str) -> None:
        """A fresh status and the preflight, off the event loop; then ask or act."""
        try:
            state = self.job.status()
            facts = preflight(self.job, state, self.monitor)
            # A run the user started by hand in the pane: `r` takes the pane over.
            adopt = getattr(self.job, "adoption", None)
            adoption = adopt(state) if action == "relaunch" and callable(adopt) else None
        except Exception as exc:
            self.call_from_thread(self._job_failed, action, exc)
            return
        self.monitor.set_job_state(state)
        self.call_from_thread(self._decide, action, facts, adoption)

    def _decide(self, action: str, facts: Preflight, adoption: Any = None) -> None:
        self.busy = None
        if adoption is not None:
            self._offer_takeover(adoption, facts)
            return
        if action == "abort":
            if not facts.alive:
                self.notify(f"nothing to abort: {plain(facts.state.line())}", markup=False)
                return
            body = facts.text()
            self.push_screen(ConfirmScreen("Abort the training job?", body, yes_label="Abort (y)"),
                             lambda yes: self._confirmed("abort", yes))
            return
        if facts.outside:  # not offered: Job.relaunch refuses it (SurvivorsAlive), after a dialog promising it
            self.notify(f"relaunch blocked, nothing was stopped: the last run still runs outside tmux (pids "
                        f"{', '.join(map(str, facts.will_stop))}); abort (a) ends it, then relaunch",
                        title="relaunch: preflight", severity="error", timeout=15, markup=False)
            return
        if not facts.ok:
            self.notify("relaunch blocked, nothing was stopped: " + "; ".join(facts.blockers),
                        title="relaunch: preflight", severity="error", timeout=15, markup=False)
            return
        if not facts.alive:
            self.notify(facts.text().plain, title="relaunch: preflight", timeout=8, markup=False)
            self.busy = "relaunch"
            self._run_job_action("relaunch")
            return
        self.push_screen(ConfirmScreen("Relaunch: stop the running job and start it again?", facts.text(),
                                       yes_label="Relaunch (y)"),
                         lambda yes: self._confirmed("relaunch", yes))

    def _offer_takeover(self, adoption: Any, facts: Preflight) -> None:
        """Ask before respawning a pane the user started by hand; never guess silently."""
        if not adoption.known:
            self.notify(f"cannot take over pane {adoption.pane}: {adoption.source}; start dflash-watch with "
                        "--cmd \"...\" (and --cwd) to say what to run. Nothing was touched.",
                        title="relaunch", severity="error", timeout=15, markup=False)
            return
        self.push_screen(ConfirmScreen(takeover_title(adoption), takeover_text(adoption, facts),
                                       yes_label="Take over (y)"),
                         lambda yes: self._confirmed("takeover", yes, adoption))

    def _confirmed(self, action: str, yes: bool | None, adoption: Any = None) -> None:
        if not yes:
            self.notify(f"{action} cancelled: nothing was touched", timeout=4)
            return
        if self.busy:
            self.notify(f"cannot {action}: {self.busy} still in progress", severity="warning")
            return
        self.busy = action
        self._run_job_action(action, adoption)

    @work(thread=True, group="job")
    def _run_job_action(self, action: str, adoption: Any = None) -> None:
        job = self.job
        was = getattr(self.monitor.job_state, "state", None)

        def step(message: str) -> None:
            self.call_from_thread(self._step, action, message)

        try:
            if action == "start":
                state = job.start(on_step=step)
            elif action == "abort":
                state = job.abort(None, on_step=step)
            elif action == "takeover":
                state = job.take_over(adoption, on_step=step)
            else:
                state = job.relaunch(None, on_step=step)
        except Exception as exc:
            self.call_from_thread(self._job_failed, action, exc)
            return
        # A start after a run that ended (its exit reported: a crash before
        # this watcher began, a server gone since) is a new run as well.
        ended = was in ("exited", "killed") or self.monitor.last_exit is not None
        if action in ("relaunch", "takeover") or (action == "start" and ended):
            self.monitor.job_relaunched(self.clock(), state)
        else:
            self.monitor.set_job_state(state)
        self.call_from_thread(self._job_done, action, state)

    def _step(self, action: str, message: str) -> None:
        self.steps.append(f"{action}: {message}")
        self.notify(plain(message), title=action, timeout=6, markup=False)

    def _job_done(self, action: str, state: Any) -> None:
        self.busy = None
        line = state.line() if hasattr(state, "line") else str(state)
        self.steps.append(f"{action}: done: {line}")
        self.notify(plain(line), title=f"{action} done", timeout=8, markup=False)
        self.redraw(force=True)

    def _job_failed(self, action: str, exc: BaseException) -> None:
        self.busy = None
        pids = getattr(exc, "pids", None)
        message = plain(str(exc)) or type(exc).__name__
        if pids:
            message += f" (blocking pids: {', '.join(map(str, pids))})"
        self.steps.append(f"{action}: failed: {message}")
        self.notify(message, title=f"{action} failed", severity="error", timeout=20, markup=False)
        self.redraw(force=True)

    @work(thread=True, group="status")
    def _refresh_job(self) -> None:
        try:
            if self.session is not None:
                self.session.refresh_job_state()
            else:
                self.monitor.set_job_state(self.job.status())
        except Exception as exc:  # status is advisory: say it, keep watching
            self.monitor.note(f"job status failed: {exc}")
