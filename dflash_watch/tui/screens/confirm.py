"""A yes/no question before anything is killed, with the facts to decide on.

The body is a Text built by the caller (the relaunch preflight, the
processes an abort would signal): the question never hides what it will do.
The default button is "cancel": Enter on a surprise dialog must not kill a
week-long run.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from ...keymap import keys_of


class ConfirmScreen(ModalScreen[bool]):
    DEFAULT_CSS = """
    ConfirmScreen { align: center middle; }
    ConfirmScreen > Vertical {
        width: 90; max-width: 95%; height: auto; max-height: 90%;
        border: round $error; background: $surface; padding: 1 2;
    }
    ConfirmScreen .confirm-title { text-style: bold; margin-bottom: 1; }
    ConfirmScreen .confirm-body { height: auto; max-height: 20; overflow-y: auto; }
    ConfirmScreen Horizontal { height: auto; margin-top: 1; align-horizontal: right; }
    ConfirmScreen Button { margin-left: 2; }
    """
    BINDINGS = [
        Binding("y", "answer(True)", "yes", show=True, id="confirm_yes"),
        Binding("n,escape", "answer(False)", "no", show=True, id="confirm_no"),
    ]

    def __init__(self, title: str, body: Text, yes_label: str = "Yes (y)") -> None:
        super().__init__()
        self.title_text = title
        self.body = body
        self.yes_label = yes_label

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text(self.title_text), classes="confirm-title")
            yield Static(self.body, classes="confirm-body")
            with Horizontal():
                yield Button(f"Cancel ({self._key('confirm_no')})", id="no", variant="primary")
                yield Button(self.yes_label.removesuffix(" (y)") + f" ({self._key('confirm_yes')})", id="yes",
                             variant="error")

    def _key(self, binding_id: str) -> str:
        """A binding's first key as ``[keys]`` rebound it (the buttons name it)."""
        return self.app.get_key_display(Binding(keys_of(binding_id, self.app._keymap)[0], ""))

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
