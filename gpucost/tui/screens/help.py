"""Keyboard help (`?`): every key of every screen, and where the numbers come from."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

HELP = """\
[b]gpucost tui[/b]: plans ranked by expected $ for the whole job, not $/hour

[b]Anywhere[/b]
  ?      this help                 ctrl+p  command palette (every action)
  o      offers                    r       runs
  q      quit

[b]Offers[/b]
  ↑/↓    choose a plan             enter   open its detail
  w      write the highlighted plan to a file
  f      edit the job: epochs or samples, deadline h, budget $, max nodes,
         GPU and provider filters, spot allowed (tab moves, enter applies)
  esc    back to the table         x       allow/forbid spot
  /      filter by GPU             s / S   next sort column / reverse
  click a column header to sort by it (again: reversed)
  ★ marks the Pareto front: no other plan is both faster and cheaper.

  A deadline keeps the plans whose expected wall clock (setup, compute,
  checkpoints, spot rework) fits; a budget, those whose expected $/job
  fits. Sorted by $/job, the first row is the cheapest plan meeting both.

[b]Plan detail[/b]
  w      write the plan file       esc     back to the offers
  The $/job terms, the scaling curve over 1-16 nodes with its knee, stop
  vs destroy after the job, and what spot is expected to cost.

[b]Runs[/b] (each run's status.json, re-read every second)
  s      stop the selected run (its idle policy applies), after a yes
  d      destroy the run's resources, after a yes

Prices come from dated snapshots (the price date column); throughput is
predicted from the profile's measurement.      esc or ? closes this help.
"""


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,question_mark,q", "close", "Close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="help"):
            yield Static(HELP, markup=True)

    def action_close(self) -> None:
        self.dismiss(None)
