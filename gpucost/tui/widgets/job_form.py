"""The side form: job size, deadline, budget, spot allowed, max nodes, GPU and provider filters.

One line per field so that it fits beside the table in 80x24. Every edit posts
:class:`JobForm.Changed` (debounced while typing, at once on Enter or a checkbox toggle); values
that cannot be parsed post :class:`JobForm.Invalid` with what to fix.
"""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.timer import Timer
from textual.widgets import Checkbox, Input, Label

from gpucost.tui.session import JobInputs

DEBOUNCE_S = 0.35  # re-rank this long after the last keystroke

# field id -> (label, placeholder, input type)
FIELDS: tuple[tuple[str, str, str, str], ...] = (
    ("epochs", "epochs", "", "number"),
    ("samples", "samples", "or total", "number"),
    ("deadline", "deadline h", "none", "number"),
    ("budget", "budget $", "none", "number"),
    ("max-nodes", "max nodes", "1", "integer"),
    ("gpu", "GPU", "any", "text"),
    ("provider", "provider", "any", "text"),
)


class JobForm(Vertical):
    """Job parameters and filters; the offers screen re-ranks on every change."""

    class Changed(Message):
        def __init__(self, inputs: JobInputs) -> None:
            self.inputs = inputs
            super().__init__()

    class Invalid(Message):
        def __init__(self, error: str) -> None:
            self.error = error
            super().__init__()

    def __init__(self, inputs: JobInputs, *, default_epochs: float | None = None,
                 id: str | None = None) -> None:
        super().__init__(id=id)
        self._initial = inputs
        self._default_epochs = default_epochs
        self._timer: Timer | None = None
        # The values last posted: mounting the inputs posts Input.Changed too, and Enter on
        # unchanged values must not re-rank for nothing.
        self._last: JobInputs | None = inputs

    def compose(self) -> ComposeResult:
        values = {
            "epochs": self._initial.epochs, "samples": self._initial.samples,
            "deadline": self._initial.deadline_hours, "budget": self._initial.budget_usd,
            "max-nodes": self._initial.max_nodes, "gpu": self._initial.gpu,
            "provider": self._initial.provider,
        }
        for key, label, placeholder, kind in FIELDS:
            if key == "epochs" and self._default_epochs is not None:
                placeholder = f"{self._default_epochs:g}"
            value = values[key]
            text = "" if value is None or value == "" else f"{value:g}" \
                if isinstance(value, float) else str(value)
            with Horizontal(classes="field"):
                yield Label(label, classes="field-label")
                yield Input(text, placeholder=placeholder, type=kind,  # type: ignore[arg-type]
                            id=f"job-{key}", compact=True)
        yield Checkbox("spot allowed", self._initial.spot, id="job-spot", compact=True)

    def _number(self, key: str) -> float | None:
        text = self.query_one(f"#job-{key}", Input).value.strip()
        if not text:
            return None
        try:
            return float(text)
        except ValueError:
            raise ValueError(f"{key} must be a number, got {text!r}") from None

    def read(self) -> JobInputs:
        """The form's values; ValueError says which field is wrong."""
        nodes = self._number("max-nodes")
        if nodes is not None and (not nodes.is_integer() or nodes < 1):
            raise ValueError(f"max nodes must be a whole number >= 1, got {nodes:g}")
        for key in ("epochs", "samples", "deadline", "budget"):
            value = self._number(key)
            if value is not None and value <= 0:
                raise ValueError(f"{key} must be positive, got {value:g}")
        return JobInputs(
            epochs=self._number("epochs"), samples=self._number("samples"),
            deadline_hours=self._number("deadline"), budget_usd=self._number("budget"),
            spot=self.query_one("#job-spot", Checkbox).value,
            max_nodes=int(nodes) if nodes is not None else 1,
            gpu=self.query_one("#job-gpu", Input).value.strip(),
            provider=self.query_one("#job-provider", Input).value.strip(),
        )

    def set_spot(self, allowed: bool) -> None:
        self.query_one("#job-spot", Checkbox).value = allowed

    def _emit(self) -> None:
        self._timer = None
        try:
            inputs = self.read()
        except ValueError as err:
            self._last = None
            self.post_message(self.Invalid(str(err)))
            return
        if inputs != self._last:
            self._last = inputs
            self.post_message(self.Changed(inputs))

    @on(Input.Changed)
    def _typed(self, event: Input.Changed) -> None:
        event.stop()
        if self._timer is not None:
            self._timer.stop()
        self._timer = self.set_timer(DEBOUNCE_S, self._emit)

    @on(Input.Submitted)
    @on(Checkbox.Changed)
    def _now(self, event: Input.Submitted | Checkbox.Changed) -> None:
        # Submitted bubbles on: the screen moves focus to the table after Enter
        if isinstance(event, Checkbox.Changed):
            event.stop()
        if self._timer is not None:
            self._timer.stop()
        self._emit()
