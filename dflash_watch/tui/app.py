"""The dashboard app: layout, keys, the 2 Hz redraw, and job actions on workers.

Threading, because a dashboard that freezes on a slow tmux call is one
nobody keeps open for a week:
- Sources write the Monitor on their own threads. The redraw timer reads it
  (copies under its lock) twice a second and touches only widgets whose
  data moved (``monitor.version`` first, then each widget's own key).
- Alert listeners run on source threads *while the Monitor holds its lock*.
  ``call_from_thread`` would wait for the event loop, and the loop may be
  waiting for that lock: a deadlock. So the listener only appends to a
  deque, and the timer turns new alerts into toasts and the bell.
- Job actions (tmux, grace periods of 30 s) run in thread workers and
  report each step back with ``call_from_thread`` (they hold no lock):
  ``job_actions.py``.
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual import events, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal
from textual.markup import escape
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.widgets import Footer, Static

from dflash_watch.detectors.base import Alert

from .. import gc_policy
from ..baseline.guard import BASELINE_WINDOW_S
from ..baseline.guard import refusal as baseline_refusal
from ..baseline.store import save_baseline
from ..report import format_rate
from .banner import choose_banner
from .health import DEFAULT_WINDOW_S, WINDOWS, window_label
from .job_actions import JobActions
from .reading import locked
from .screens.diagnosis import DiagnosisScreen
from .screens.evidence import EvidenceScreen
from .screens.help import HelpScreen
from .text import plain, set_static, split_source
from .widgets.alerts import AlertChosen, AlertsPanel
from .widgets.backdrop import Backdrop, BackdropScreen
from .widgets.gpu_panel import GpuPanel
from .widgets.header import StatusHeader
from .widgets.log_panel import LogPanel
from .widgets.loss import LossPanel
from .widgets.processes import ProcessPanel
from .widgets.ranks import RanksPanel
from .widgets.throughput import ThroughputPanel

if TYPE_CHECKING:
    from ..monitor import Monitor

DEFAULT_BASELINE = "dflash-baseline.json"
GC_SETTLE_S = 2.0  # after the first paint and the first data: see DashboardApp.settle_gc
GC_YOUNG_THRESHOLD = gc_policy.LIVE_YOUNG_THRESHOLD  # see settle_gc
_TOAST_SEVERITY: dict[str, SeverityLevel] = {"critical": "error", "warning": "warning", "info": "information"}


class DashboardApp(JobActions, App[int]):
    CSS_PATH = "app.tcss"
    TITLE = "dflash-watch"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (100, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (32, "-tall")]
    # Every binding has an id: `[keys]` in the config rebinds it (``keymap``
    # declares the ids and these default keys; a test keeps them equal).
    BINDINGS = [
        Binding("s", "start", "start", id="start"),
        Binding("a", "abort", "abort", id="abort"),
        Binding("r", "relaunch", "relaunch", id="relaunch"),
        Binding("b", "baseline", "baseline", id="baseline"),
        Binding("d", "diagnose", "diagnose", id="diagnose"),  # "what changed" is 4 columns too wide at 80
        Binding("m", "acknowledge", "ack", id="acknowledge"),
        Binding("slash", "filter", "filter", key_display="/", id="filter"),
        Binding("f", "next_file", "next log", show=False, id="next_file"),
        Binding("p", "toggle_follow", "pause log", show=False, id="toggle_follow"),
        Binding("question_mark", "help", "help", key_display="?", id="help"),
        # Enter anywhere the focused widget has no use for it (the log view,
        # where focus starts): the evidence of the highlighted alert, which
        # is the most severe and newest one until the user moves the cursor.
        Binding("enter", "open_alert", "evidence", show=False, id="open_alert"),
        Binding("1", "chart_window('window_10m')", "10 min", show=False, id="window_10m"),
        Binding("2", "chart_window('window_1h')", "1 h", show=False, id="window_1h"),
        Binding("3", "chart_window('window_6h')", "6 h", show=False, id="window_6h"),
        Binding("4", "chart_window('window_all')", "whole run", show=False, id="window_all"),
        Binding("g", "toggle_processes", "GPU processes", show=False, id="processes"),
        Binding("q", "quit_dashboard", "quit", id="quit"),
    ]

    def __init__(
        self,
        monitor: Monitor,
        *,
        job: Any = None,
        control_note: str | None = None,
        session: Any = None,
        baseline_path: str | None = None,
        tz: Any = None,
        clock: Callable[[], float] = time.time,
        refresh_s: float = 0.5,
        chart_interval_s: float = 5.0,
        logs_configured: bool = True,
        bell_repeat_s: float = 300.0,
        fingerprint: Callable[[], Any] | None = None,
        keymap: Mapping[str, str] | None = None,
        proc_info: Callable[[int], tuple[str | None, str | None]] | None = None,
    ) -> None:
        super().__init__()
        # `[keys]` of the config, checked when it was loaded (``keymap.check_keys``).
        if keymap:
            self.set_keymap(dict(keymap))
        self.monitor = monitor
        self.job = job
        # Why there is no job control ("tmux not found ..."), shown in the header.
        if job is None and control_note is None:
            control_note = "job: not managed (pass --session and --cmd to control it)"
        elif job is not None and not getattr(job, "available", True):
            control_note = control_note or "job control off: tmux not found on PATH"
        self.control_note = control_note
        self.session = session
        self.baseline_path = baseline_path or DEFAULT_BASELINE
        self.tz = tz
        self.clock = clock
        self.refresh_s = refresh_s
        self.chart_interval_s = chart_interval_s
        self.logs_configured = logs_configured
        self.bell_repeat_s = bell_repeat_s
        # (user, command) of a pid for the GPU process table; /proc by default.
        self.proc_info = proc_info
        # The running job's environment for `d` (read off the UI thread);
        # by default the Monitor's (the live session reads the job's), else
        # the job's training process through /proc.
        self.fingerprint = fingerprint
        self.busy: str | None = None  # the job action in flight, if any
        self.steps: list[str] = []  # job action steps, newest last (tests read them)
        self._incoming: deque[Alert] = deque(maxlen=1000)
        self._seen_version = -1
        self._last_gpu_update = -1e18
        self._last_bell = -1e18
        self.bells = 0
        self.redraws = 0
        self._dfw_ready = False
        self._dfw_closing = False
        self._tick = 0
        self._log_version = -1
        self.chart_window_s: float | None = DEFAULT_WINDOW_S
        monitor.subscribe(self._incoming.append)

    # -- layout -------------------------------------------------------------------
    def get_default_screen(self) -> Screen:
        return BackdropScreen(id="_default")  # see widgets/backdrop.py

    def compose(self) -> ComposeResult:
        # Held directly: the timer must reach them while a modal screen is on top.
        self.header = StatusHeader(control=self.control_note, id="header")
        self.banner = Static("", id="banner")
        self.gpu_panel = GpuPanel(chart_interval_s=self.chart_interval_s, id="gpus")
        self.throughput_panel = ThroughputPanel(tz=self.tz, chart_interval_s=self.chart_interval_s, id="throughput")
        self.loss_panel = LossPanel(tz=self.tz, chart_interval_s=self.chart_interval_s, id="loss")
        self.ranks_panel = RanksPanel(tz=self.tz, id="ranks")
        self.process_panel = ProcessPanel(describe=self.proc_info, id="processes")
        self.alerts_panel = AlertsPanel(tz=self.tz, id="alerts")
        self.log_panel = LogPanel(logs_configured=self.logs_configured, id="log")
        yield self.header
        yield self.banner
        with Backdrop(id="body"):
            yield self.gpu_panel
            with Horizontal(id="middle"):
                yield self.throughput_panel
                yield self.loss_panel
                yield self.alerts_panel
            with Horizontal(id="health"):
                yield self.ranks_panel
                yield self.process_panel
            yield self.log_panel
        self.footer = Footer()
        yield self.footer

    def on_mount(self) -> None:
        self._dfw_ready = True
        self._fit_footer()
        self.log_panel.view.focus()
        self.redraw(force=True)
        self.set_interval(self.refresh_s, self.redraw)
        if not self.is_headless:  # a real terminal: this process is the dashboard's alone
            self.set_timer(GC_SETTLE_S, self.settle_gc)
        if self.job is not None and getattr(self.job, "available", True):
            self._refresh_job()

    def settle_gc(self) -> None:
        """Collect once, then exempt everything that exists from future full collections.

        What exists a few seconds in (Textual's DOM and CSS, numpy, the
        parsers) lives as long as the dashboard, yet Python's full
        collections scan it all again: about 90 ms, first a few seconds
        in and then whenever the heap has grown by a quarter, a pause and
        a visible share of a dashboard budget of 3% of a core. Objects
        made later are collected as usual.

        Young collections then come every ``GC_YOUNG_THRESHOLD`` allocations
        instead of 700: a frame allocates thousands of short-lived strips
        and segments, freed by their counts, and a young collection every 700
        of them scanned whatever was alive at that moment, dozens of times a
        second. Cyclic garbage waits a little longer; nothing else changes.
        """
        gc_policy.settle(GC_YOUNG_THRESHOLD)

    # -- redraw ---------------------------------------------------------------------
    @property
    def compact(self) -> bool:
        return self.size.width < 100 or self.size.height < 32

    def redraw(self, force: bool = False) -> None:
        """One redraw pass of the 2 Hz timer; cheap when nothing changed.

        Textual repaints the bounding box of everything dirty in a frame, so
        a header change plus a log change repaints the whole screen. Ticks
        therefore alternate: the log on one, the panels above it on the
        next (each at 1 Hz); a forced redraw (a key, a resize) does both.
        """
        if self._dfw_closing or not self._dfw_ready:
            return  # the timer can fire once more while the app shuts down
        self._tick += 1
        self._deliver_alerts()
        monitor = self.monitor
        with locked(monitor):
            version = monitor.version
        log_turn = self._tick % 2 == 1
        if force or log_turn:
            if version != self._log_version or force:
                self._log_version = version
                self.log_panel.update_view(monitor)
            if not force:
                return
        with locked(monitor):
            firing = monitor.alerts.firing()
            unacked = len(monitor.alerts.unacked())
        self.header.update_view(monitor, firing, unacked, self.clock())
        self._ring_again(unacked)
        mono = time.monotonic()
        gpu_due = mono - self._last_gpu_update >= self.chart_interval_s
        if version == self._seen_version and not force and not gpu_due:
            return
        self.redraws += 1
        self._seen_version = version
        self._last_gpu_update = mono
        self.gpu_panel.update_view(monitor, firing, self.compact)
        self.throughput_panel.update_view(monitor, firing)
        self._update_loss(monitor)
        self.ranks_panel.update_view(monitor)
        self.process_panel.update_view(monitor, beside_ranks=self.ranks_panel.has_class("-shown"))
        self.alerts_panel.update_view(monitor)
        self._banner(firing)

    def _update_loss(self, monitor: Monitor) -> None:
        """The loss chart, shown once the run has logged a loss (a run without one keeps the old layout)."""
        with locked(monitor):
            has_loss = bool(monitor.loss.count or monitor.loss_nonfinite)
        panel = self.loss_panel
        panel.set_class(has_loss, "-shown")
        self.alerts_panel.set_class(has_loss, "-beside-loss")
        if has_loss:
            panel.update_view(monitor)

    def on_resize(self, event: events.Resize) -> None:
        # The event's size: Textual stores the app's new size after this
        # handler runs, so ``self.size`` is still the old one here (the
        # footer was one resize behind: `? help` and `q quit` cut off at 80).
        self._fit_footer(event.size.width)
        self.redraw(force=True)

    def _fit_footer(self, width: int | None = None) -> None:
        """Below 100 columns the footer drops its spacing and the palette key
        (Ctrl-P still opens it), so that `? help` and `q quit` stay on screen."""
        narrow = (self.size.width if width is None else width) < 100
        footer = self.footer
        if footer.compact != narrow:
            footer.compact = narrow
            footer.show_command_palette = not narrow
            footer.refresh(recompose=True)  # (the palette key is laid out once, when composed)

    def _banner(self, firing: list[Alert]) -> None:
        """Red over a crash or a kill, calm over a stop the user asked for (``banner.py``)."""
        banner = self.banner
        with locked(self.monitor):
            state = self.monitor.job_state
            last_exit = self.monitor.last_exit
        chosen = choose_banner(state, last_exit, firing, controlled=self.job is not None and not self.control_note,
                               control_note=self.control_note)
        if chosen is None:
            banner.remove_class("-shown")
            return
        set_static(banner, chosen.text, layout=True)
        banner.set_class(chosen.calm, "-calm")
        if not banner.has_class("-shown"):
            banner.add_class("-shown")
            if not chosen.calm:
                self._focus_alerts()

    def _focus_alerts(self) -> None:
        """When the job stops, the alerts are what matter: Up/Down move their highlight.

        Done once, as the banner appears, and only from the log view (the
        filter box or a chosen tile keep their focus).
        """
        if self.focused is self.log_panel.view or self.focused is None:
            table = self.alerts_panel.table
            if table.display:
                table.focus()

    # -- alerts: toast and bell ---------------------------------------------------
    def _deliver_alerts(self) -> None:
        ring = False
        while self._incoming:
            alert = self._incoming.popleft()
            first = plain(alert.message.splitlines()[0] if alert.message else "")[:300]
            where = f" gpu{alert.gpu}" if alert.gpu is not None else ""
            if alert.state == "resolved":
                self.notify(first, title=f"resolved: {alert.detector}{where}", severity="information",
                            timeout=6, markup=False)
                continue
            self.notify(first, title=f"{alert.severity}: {alert.detector}{where}",
                        severity=_TOAST_SEVERITY.get(alert.severity, "warning"),
                        timeout=20 if alert.severity == "critical" else 10, markup=False)
            if alert.severity in ("warning", "critical"):
                ring = True
        if ring:
            self._ring()

    def _ring(self) -> None:
        self.bells += 1
        self._last_bell = time.monotonic()
        self.bell()

    def _ring_again(self, unacked: int) -> None:
        """An unacknowledged alert rings again now and then: `m` is what silences it."""
        if not unacked or not self.bell_repeat_s:
            return
        if time.monotonic() - self._last_bell >= self.bell_repeat_s:
            with locked(self.monitor):
                loud = any(a.severity in ("warning", "critical") for a in self.monitor.alerts.unacked())
            if loud:
                self._ring()

    # -- keys -------------------------------------------------------------------------
    def action_acknowledge(self) -> None:
        with locked(self.monitor):
            n = self.monitor.alerts.acknowledge()
        if n:
            self.notify(f"acknowledged {n} alert{'s' if n != 1 else ''}: the bell is quiet until a new one fires",
                        timeout=4, markup=False)
        else:
            self.notify("nothing to acknowledge", timeout=3)
        self.redraw(force=True)

    def action_filter(self) -> None:
        self.log_panel.open_filter()

    def action_next_file(self) -> None:
        path = self.log_panel.cycle()
        if path:
            self.redraw(force=True)

    def action_toggle_follow(self) -> None:
        view = self.log_panel.view
        view.following = not view.following
        self.log_panel.update_view(self.monitor)

    def action_chart_window(self, binding_id: str) -> None:
        """The throughput, loss and memory charts over 10 min, 1 h, 6 h or the whole run (keys 1-4)."""
        window = WINDOWS.get(binding_id, DEFAULT_WINDOW_S)
        self.throughput_panel.set_window(window)
        self.loss_panel.set_window(window)
        self.gpu_panel.set_window(window)
        self.chart_window_s = window
        self.notify(f"charts: {'the whole run' if window is None else 'the last ' + window_label(window)}",
                    timeout=2, markup=False)
        self.redraw(force=True)

    def action_toggle_processes(self) -> None:
        panel = self.process_panel
        panel.wanted = not panel.wanted
        self.redraw(force=True)
        if panel.wanted and not panel.rows:
            self.notify("no GPU processes in the latest samples", timeout=3, markup=False)

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def action_quit_dashboard(self) -> None:
        """Leave the dashboard; the job is never touched (it lives in tmux),
        but an action the user set going here is asked about first
        (``JobActions.quit_asked``)."""
        if self.quit_asked(self._quit_anyway):
            return
        self._dfw_closing = True
        self.exit(0)

    def _quit_anyway(self, yes: bool | None) -> None:
        if yes:
            self._dfw_closing = True
            self.exit(0)

    async def action_quit(self) -> None:
        """ctrl+q: the same as q (an action in progress is asked about)."""
        self.action_quit_dashboard()

    def action_show_file(self, path: str) -> None:
        panel = self.log_panel
        panel.select_file(path)
        self.redraw(force=True)

    def on_alert_chosen(self, message: AlertChosen) -> None:
        self.open_evidence(message.alert)

    def action_open_alert(self) -> None:
        if len(self.screen_stack) > 1:
            return  # a dialog or the help is up: Enter is theirs
        panel = self.alerts_panel
        if not panel.rows:
            panel.update_view(self.monitor)
        alert = panel.selected or (panel.rows[0][0] if panel.rows else None)
        if alert is None:
            self.notify("no alerts yet: Enter shows an alert's evidence", timeout=3)
            return
        self.open_evidence(alert)

    def open_evidence(self, alert: Alert) -> None:
        """The alert's evidence, the log view pointed at its line first."""
        if isinstance(self.screen, EvidenceScreen):
            return
        note = self.jump_to_source(alert.source)
        self.push_screen(EvidenceScreen(alert, self.tz, jumped=note))

    def jump_to_source(self, source: str) -> str | None:
        """Point the log view at ``file:line``; says what happened, for the evidence view."""
        name, line = split_source(source)
        if line is None:
            return None
        panel = self.log_panel
        if not panel.files:
            return f"{source}: no log lines kept"
        # Only a followed log: a probe or GPU-sample file's line 12 is not
        # line 12 of the training log on screen.
        path = panel.find_file(name)
        if path is None:
            return f"{source}: not a followed log (the log view stays where it was)"
        panel.select_file(path)
        panel.update_view(self.monitor)
        found = panel.view.mark(line)
        panel.update_view(self.monitor)
        if found:
            return f"log view: {os.path.basename(path)} line {line}"
        return f"{source}: line {line} is no longer among the recent lines kept"

    # -- the baseline -----------------------------------------------------------------
    def action_baseline(self) -> None:
        """Save the recent window as the baseline and judge the rest of this session by it.

        Refused (nothing saved, nothing applied) when the window was not
        healthy: see ``baseline.guard``.
        """
        why = baseline_refusal(self.monitor, BASELINE_WINDOW_S)
        if why is not None:
            self.notify(why, title="baseline", severity="warning", timeout=12, markup=False)
            return
        baseline = self._profile_baseline()
        if baseline is None:
            self.notify("no throughput seen yet: a baseline needs progress lines with tokens/s",
                        severity="warning", markup=False)
            return
        self.monitor.set_baseline(baseline)  # at once: this session is judged by it from now on
        self.redraw(force=True)
        self._save_baseline(baseline, self.baseline_path)

    def _profile_baseline(self) -> Any:
        """The recent window as the good run's profile: throughput and its
        spread, memory, padding, recompile and allocator figures, and the
        job's environment when the session has read it (`d` compares them)."""
        from ..baseline.profile import profile_of_monitor
        from ..baseline.store import Baseline

        with self.monitor.lock:
            profile = profile_of_monitor(self.monitor, BASELINE_WINDOW_S, self.monitor.fingerprint)
        if profile is None:
            return None
        profile.pop("version", None)
        return Baseline(profile.pop("throughput_tokens_per_s"), profile)

    @work(thread=True, group="baseline")
    def _save_baseline(self, baseline: Any, path: str) -> None:
        try:
            save_baseline(baseline, path)
        except OSError as exc:
            self.call_from_thread(self.notify, f"baseline applied to this session, but could not save it to "
                                  f"{path}: {exc}", severity="error", markup=False)
            return
        where = str(Path(path).resolve())
        self.call_from_thread(
            self.notify,
            f"baseline {format_rate(baseline.throughput_tokens_per_s)} applied now and saved to {where} "
            f"(the next run of dflash-watch takes it with --baseline {path})",
            title="baseline saved", timeout=10, markup=False,
        )

    def action_diagnose(self) -> None:
        """What changed since the good run, most likely cause first (the `d` screen)."""
        if len(self.screen_stack) > 1:
            return
        self._diagnose()

    def _refresh_diagnosis(self) -> None:
        if isinstance(self.screen, DiagnosisScreen):
            self._diagnose()

    @work(thread=True, exclusive=True, group="diagnose")
    def _diagnose(self) -> None:
        from ..baseline.diagnose import job_fingerprint, live_diagnosis

        # The live session keeps the job's environment on the Monitor (read
        # off-thread, every few minutes); the screen's 5 s refresh reuses it
        # and reads /proc itself only when the session has not yet.
        source = self.fingerprint or (lambda: self.monitor.fingerprint or job_fingerprint(self.job))
        try:
            diagnosis = live_diagnosis(self.monitor, source, self.baseline_path)
        except Exception as exc:  # noqa: BLE001 - a screen that cannot be built says why
            self.call_from_thread(self.notify, f"what changed: {type(exc).__name__}: {exc}",
                                  severity="error", markup=False)
            return
        with locked(self.monitor):  # which of the session's symptoms still fire
            firing = frozenset(a.detector for a in self.monitor.alerts.firing())
        self.call_from_thread(self._show_diagnosis, diagnosis, firing)

    def _show_diagnosis(self, diagnosis: Any, firing: frozenset[str] | None = None) -> None:
        if isinstance(self.screen, DiagnosisScreen):
            self.screen.show(diagnosis, firing)  # a refresh of the open screen
            return
        if len(self.screen_stack) > 1:
            return  # another dialog came up meanwhile: it has the screen
        self.push_screen(DiagnosisScreen(diagnosis, refresh=self._refresh_diagnosis, firing=firing))

    # -- command palette -------------------------------------------------------------
    def _key_of(self, binding_id: str) -> str:
        """The key of a binding as the footer shows it, after ``[keys]`` rebinding."""
        binding = next(b for b in self.BINDINGS if isinstance(b, Binding) and b.id == binding_id)
        keys = self._keymap.get(binding_id)
        if keys:
            binding = binding.with_key(keys.split(",")[0].strip(), key_display=None)
        return self.get_key_display(binding)

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        k = self._key_of
        yield SystemCommand(f"Start job ({k('start')})", "start the training job in its tmux session", self.action_start)
        yield SystemCommand(f"Abort job ({k('abort')})", "Ctrl-C, SIGTERM, SIGKILL; asks first", self.action_abort)
        yield SystemCommand(f"Relaunch job ({k('relaunch')})", "preflight, then abort if alive and start again",
                            self.action_relaunch)
        yield SystemCommand(f"Save baseline ({k('baseline')})", f"save the last 10 minutes as {escape(self.baseline_path)}",
                            self.action_baseline)
        yield SystemCommand(f"What changed ({k('diagnose')})",
                            "this run against the good run's profile, most likely cause first", self.action_diagnose)
        yield SystemCommand(f"Acknowledge alerts ({k('acknowledge')})", "silence the bell; alerts stay listed",
                            self.action_acknowledge)
        yield SystemCommand(f"Filter log ({k('filter')})", "show only log lines containing a text", self.action_filter)
        yield SystemCommand(f"Help ({k('help')})", "keys and what the panels mean", self.action_help)
        for path in self.log_panel.files:
            # The palette reads both as markup: a file name is text (``exp[lr=1e-4].log``).
            yield SystemCommand(f"Log: {escape(plain(os.path.basename(path)))}", f"show {escape(plain(path))} in the log view",
                                lambda p=path: self.action_show_file(p))
