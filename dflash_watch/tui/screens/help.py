"""The `?` screen: every key, and what each panel's hints mean."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from ...keymap import KEY_BINDINGS, keys_of

# Each row: the keys (binding ids of ``keymap.KEY_BINDINGS``, shown as
# ``[keys]`` rebound them, or fixed keys no binding owns; shown joined by
# " / ", ids in one item by spaces) and what they do.
KEYS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("start",), "start the job in its tmux session (when it is not running)"),
    (("abort",), "abort: Ctrl-C, then SIGTERM after the grace period, then SIGKILL (asks first)"),
    (("relaunch",), "relaunch: one key when the job is dead; asks first when it is alive; "
                    "shows the preflight (who holds the GPUs) before anything is killed; "
                    "a run started by hand in the pane is taken over (asks, naming the command and directory)"),
    (("baseline",), "save the last 10 minutes as the baseline of a good run and judge this session by it "
                    "(refused when alerts fired or the job was down in them)"),
    (("diagnose",), "diagnose: what changed since the good run (the baseline's profile and environment), most "
                    "likely cause of the symptoms first, each with the next step to confirm it"),
    (("acknowledge",), "acknowledge firing alerts: the bell stops, the alerts stay listed"),
    (("filter", "clear_filter"), "filter the log view / clear the filter (Enter keeps it)"),
    (("next_file",), "next log file (rank logs); the command palette lists them all"),
    (("End", "toggle_follow"), "follow the log tail again / pause or resume following"),
    (("open_alert",), "the highlighted alert (the newest most severe, until you move the highlight; a worse one "
                      "takes it back): its evidence, and the log jumps to the line it cites when that is a "
                      "followed log"),
    (("window_10m window_1h window_6h window_all",),
     "chart window of the throughput and loss charts: 10 minutes, 1 hour (default), 6 hours, the whole run"),
    (("processes",), "the GPU process table (pid, user, memory, command; not the job's and leftovers after an "
                     "exit marked); it shows by itself beside the ranks and while a leftover holds memory"),
    (("Up", "Down"), "move the alerts' highlight (the alerts have the focus once the job stopped; Tab otherwise)"),
    (("Tab",), "move between the alerts, the log and the filter"),
    (("ctrl+p",), "command palette: every action and every log file by name"),
    (("help", "help_close"), "this help / close it"),
    (("quit",), "quit the dashboard; the training job keeps running"),
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
    BINDINGS = [Binding("escape,q,question_mark", "close", "close", show=True, id="help_close")]

    def compose(self) -> ComposeResult:
        keys = Table.grid(padding=(0, 2))
        keys.add_column(style="bold cyan", no_wrap=True)
        keys.add_column()
        self.rows = self.key_rows()
        for key, text in self.rows:
            keys.add_row(key, text)
        with VerticalScroll() as scroll:
            scroll.border_title = "dflash-watch: keys"
            yield Static(keys)
            yield Static(Text("\n" + "\n".join(f"• {n}" for n in NOTES), style="dim"))

    def key_rows(self) -> list[tuple[str, str]]:
        """``KEYS`` with each binding's keys as ``[keys]`` rebound them (the
        app's keymap, which Textual's own screens read as ``App._keymap``)."""
        keymap = self.app._keymap
        display = self.app.get_key_display
        rows = []
        for items, text in KEYS:
            shown = [" ".join(" ".join(display(Binding(k, "")) for k in keys_of(part, keymap))
                              if part in KEY_BINDINGS else part for part in item.split())
                     for item in items]
            rows.append((" / ".join(shown), text))
        return rows

    def action_close(self) -> None:
        self.dismiss(None)
