"""Shared helpers of the dashboard's functional tests (not a test module)."""

from __future__ import annotations

from typing import Any

from dflash_watch.tui.app import DashboardApp
from dflash_watch.tui.scenes import UTC, SceneJob, build, job_state


def scene(kind: str, minutes: float = 4.0) -> Any:
    """A fresh scene (Monitors are mutable: never share one between tests)."""
    return build(kind, minutes=minutes)


def make_app(kind: str = "healthy", *, job: Any = "scene", minutes: float = 4.0, **kwargs: Any) -> tuple[DashboardApp, Any, Any]:
    s = scene(kind, minutes)
    if job == "scene":
        job = SceneJob(s.job_state)
    kwargs.setdefault("bell_repeat_s", 0)
    app = DashboardApp(s.monitor, job=job, tz=UTC, clock=lambda: s.now, **kwargs)
    return app, s, job


def toasts(app: DashboardApp) -> list[str]:
    return [f"{n.title}|{n.message}" for n in app._notifications]


def screen_text(app: DashboardApp) -> str:
    """The visible log view lines, as text (what a user would read there)."""
    view = app.query_one("#log-view")
    height = view.scrollable_content_region.height
    return "\n".join(view.render_line(y).text for y in range(height))


__all__ = ["UTC", "crash", "job_state", "make_app", "screen_text", "toasts"]


def crash(s: Any, *, after: float = 5.0) -> float:
    """Append the FX-tracing traceback and a crash exit to a scene's running Monitor; returns the new now."""
    from dflash_watch.demo import fx_traceback
    from dflash_watch.parsers.events import ProcessExit
    from dflash_watch.tui.scenes import LOG

    m = s.monitor
    now = s.now + after
    start = m.lines[LOG][-1][0] + 1
    lines = list(fx_traceback.render("drafter-0"))
    m.feed_text(LOG, "".join(line + "\n" for line in lines), start, now)
    m.end_of_text(LOG, now + 1)
    m.feed_events([ProcessExit(now + 2, kind="crash", code=1)])
    m.tick(now + 12)
    m.set_job_state(job_state("exited", s.job_state.started_at, now + 12, code=1))
    s.now = now + 12
    return s.now
