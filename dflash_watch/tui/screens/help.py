"""The `?` screen: every key, and what each panel's hints mean."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

KEYS = (
    ("s", "start the job in its tmux session (when it is not running)"),
    ("a", "abort: Ctrl-C, then SIGTERM after the grace period, then SIGKILL (asks first)"),
    ("r", "relaunch: one key when the job is dead; asks first when it is alive; "
          "shows the preflight (who holds the GPUs) before anything is killed; "
          "a run started by hand in the pane is taken over (asks, naming the command and directory)"),
    ("b", "save the last 10 minutes as the baseline of a good run and judge this session by it "
          "(refused when alerts fired or the job was down in them)"),
    ("d", "diagnose: what changed since the good run (the baseline's profile and environment), most likely "
          "cause of the symptoms first, each with the next step to confirm it"),
    ("m", "acknowledge firing alerts: the bell stops, the alerts stay listed"),
    ("/", "filter the log view (Enter keeps the filter, Esc clears it)"),
    ("f", "next log file (rank logs); the command palette lists them all"),
    ("End / p", "follow the log tail again / pause or resume following"),
    ("Enter", "the highlighted alert (the newest most severe, until you move the highlight; a worse one "
              "takes it back): its evidence, and the log jumps to the line it cites when that is a followed log"),
    ("1 2 3 4", "chart window of the throughput and loss charts: 10 minutes, 1 hour (default), 6 hours, "
                "the whole run"),
    ("g", "the GPU process table (pid, user, memory, command; not the job's and leftovers after an exit "
          "marked); it shows by itself beside the ranks and while a leftover holds memory"),
    ("Up / Down", "move the alerts' highlight (the alerts have the focus once the job stopped; Tab otherwise)"),
    ("Tab", "move between the alerts, the log and the filter"),
    ("ctrl+p", "command palette: every action and every log file by name"),
    ("?", "this help"),
    ("q", "quit the dashboard; the training job keeps running"),
)

NOTES = (
    "GPU badges come from the memory detectors: flat (healthy), VOLATILE (memory stopped being flat), "
    "GROWING (a steady climb, a leak), FULL (within a few percent of the card).",
    "Processes on a GPU: green are the job's (its tmux pane's process tree), others are someone else's.",
    "Loss: red columns are NaN/Inf losses, the first named in the panel's title.",
    "Ranks: one row per rank (step time, compute, wait); SLOW is the straggler, HUNG a rank that stopped.",
    "GPU health under the memory line: temperature, power/limit, and XID, ECC and throttle flags.",
    "Throughput: the cyan line is the baseline; red points are below it by more than the drop threshold.",
    "Quitting never touches the job: it runs in tmux and keeps running.",
)


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll {
        width: 100; max-width: 95%; height: auto; max-height: 90%;
        border: round $accent; background: $surface; padding: 1 2;
    }
    HelpScreen Static { height: auto; }
    """
    BINDINGS = [Binding("escape,q,question_mark", "close", "close", show=True)]

    def compose(self) -> ComposeResult:
        keys = Table.grid(padding=(0, 2))
        keys.add_column(style="bold cyan", no_wrap=True)
        keys.add_column()
        for key, text in KEYS:
            keys.add_row(key, text)
        with VerticalScroll() as scroll:
            scroll.border_title = "dflash-watch: keys"
            yield Static(keys)
            yield Static(Text("\n" + "\n".join(f"• {n}" for n in NOTES), style="dim"))

    def action_close(self) -> None:
        self.dismiss(None)
