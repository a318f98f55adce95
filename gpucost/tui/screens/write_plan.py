"""Where to write the plan file and which command it runs: two fields, Enter writes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label


@dataclass(frozen=True)
class WriteRequest:
    path: str
    command: str


class WritePlanScreen(ModalScreen[WriteRequest | None]):
    """Dismisses with the path and command on Enter, None on Escape."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, summary: str, *, path: str, command: str) -> None:
        super().__init__()
        self.summary = summary
        self.default_path = path
        self.default_command = command

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label("Write the plan file", classes="dialog-title")
            yield Label(self.summary, classes="dialog-question")
            yield Label("file (Enter writes, Esc cancels)")
            yield Input(self.default_path, id="plan-path", compact=True)
            yield Label("training command")
            yield Input(self.default_command, id="plan-command", compact=True)

    def on_mount(self) -> None:
        self.query_one("#plan-path", Input).focus()

    @on(Input.Submitted)
    def _submit(self, event: Input.Submitted) -> None:
        event.stop()
        path = self.query_one("#plan-path", Input).value.strip()
        command = self.query_one("#plan-command", Input).value.strip()
        if not path:
            self.notify("give a file name, e.g. plan.toml", severity="error")
            return
        self.dismiss(WriteRequest(path, command))

    def action_cancel(self) -> None:
        self.dismiss(None)
