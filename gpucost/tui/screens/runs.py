"""Runs: every run folder's status.json (state, epoch, ETA, cost so far, metrics), re-read every
second; stop or destroy the selected run behind a confirmation dialog. A run whose measured
throughput left its prediction's band (status.json's ``throughput_warning``) has its speed
marked, and the selected run's warnings are spelled out under the table.

The launcher rewrites status.json atomically, so a read never sees half a file. Stopping and
destroying go through the executor (:func:`gpucost.executor.control.request_stop` and
:func:`~gpucost.executor.control.down`), which wait for the launcher: they run in a worker.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Static

from gpucost import paths
from gpucost.errors import GpuCostError
from gpucost.executor.control import down, request_stop
from gpucost.executor.ledger import Ledger, RunRow
from gpucost.executor.records import reconcile
from gpucost.executor.rundir import RunDir
from gpucost.executor.runfiles import RunFileError, RunStatusFile
from gpucost.format import hours as fmt_hours
from gpucost.format import usd as fmt_usd
from gpucost.terminal import printable
from gpucost.tui.screens.confirm import ConfirmScreen

COLUMNS = ("run", "state", "epoch", "ETA", "elapsed", "cost", "cap", "speed", "metrics")


@dataclass(frozen=True)
class RunStatus:
    run_id: str
    status: RunStatusFile  # as reconciled with the ledger and the job's reports

    @property
    def state(self) -> str:
        return self.status.state

    @property
    def final(self) -> bool:
        return self.status.final

    @property
    def warnings(self) -> list[str]:
        """What the launcher warned about, as status.json says it (the budget, the speed)."""
        return [w for w in (self.status.budget_warning, self.status.throughput_warning) if w]


def read_runs(root: Path | None = None) -> list[RunStatus]:
    """Runs with a readable status.json, as `gpucost status` tells them (state from the
    ledger, epoch and checkpoint from the job's reports: :mod:`gpucost.executor.records`):
    live ones first, then newest first (by the launcher's last update)."""
    root = root or paths.runs_dir()
    if not root.is_dir():
        return []
    ledger_runs = _ledger_runs()
    runs = []
    for folder in root.iterdir():
        try:
            status = RunDir(folder).read_status() if folder.is_dir() else None
        except RunFileError:  # a damaged status.json: `gpucost status RUN` says what is wrong
            continue
        if status is not None:
            run = ledger_runs.get(folder.name)
            if run is not None and Path(run.run_dir).resolve() != folder.resolve():
                run = None  # another folder's run of that id: this one has only its status.json
            runs.append(RunStatus(folder.name, reconcile(run, RunDir(folder), status).status))
    runs.sort(key=lambda r: (r.final, -(r.status.updated_at or 0.0), r.run_id))
    return runs


def _ledger_runs() -> dict[str, RunRow]:
    """The ledger's runs by id; none when there is no ledger (it is not created here) or it
    cannot be read (`gpucost ps` names the problem): then status.json is all there is."""
    if not paths.ledger_path().exists():
        return {}
    try:
        with Ledger() as ledger:
            return {run.run_id: run for run in ledger.runs()}
    except GpuCostError:
        return {}


def _hours(seconds: float | None) -> str:
    return "-" if seconds is None else fmt_hours(seconds / 3600.0)


def cells(run: RunStatus) -> list[Text]:
    s = run.status
    epoch, epochs = s.epoch, s.epochs
    epoch_text = "-" if epoch is None else f"{epoch:g}" + (f"/{epochs:g}" if epochs else "")
    speed = s.throughput
    state_style = {"running": "green", "succeeded": "green", "probed": "green",
                   "failed": "red", "verify-failed": "red", "budget-exceeded": "red",
                   "timed-out": "red"}.get(run.state, "")
    return [
        Text(run.run_id), Text(run.state, style=state_style), Text(epoch_text, justify="right"),
        Text(_hours(s.eta_s), justify="right"),
        Text(_hours(s.elapsed_s), justify="right"),
        Text(fmt_usd(s.cost_usd or 0.0), justify="right"),
        Text(fmt_usd(s.budget_cap_usd) if s.budget_cap_usd else "-", justify="right"),
        Text("-" if not speed else f"{speed:,.0f}/s", justify="right")
        if not s.throughput_warning else  # outside the prediction's band
        Text(("-" if not speed else f"{speed:,.0f}/s") + " !", style="bold yellow",
             justify="right"),
        Text(" ".join(f"{k}={v:.4g}" for k, v in s.metrics.items())),
    ]


class RunsScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("s", "stop", "Stop run"),
        Binding("d", "down", "Destroy run"),
    ]

    def __init__(self, *, refresh_s: float = 1.0) -> None:
        super().__init__()
        self.refresh_s = refresh_s
        self.runs: list[RunStatus] = []

    def compose(self) -> ComposeResult:
        yield Header()
        yield DataTable[Text](id="runs-table", cursor_type="row", zebra_stripes=True)
        yield Static("", id="runs-warning", markup=False)
        yield Static("", id="runs-status")
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = "runs"
        table = self.query_one("#runs-table", DataTable)
        for name in COLUMNS:
            table.add_column(name, key=name)
        self.reload()
        self.set_interval(self.refresh_s, self.reload)
        table.focus()

    def reload(self) -> None:
        """Re-read every status.json; keep the cursor on the same run."""
        table: DataTable[Text] = self.query_one("#runs-table", DataTable)
        current = self.selected()
        self.runs = read_runs()
        table.clear()
        for run in self.runs:
            table.add_row(*cells(run), key=run.run_id)
        ids = [r.run_id for r in self.runs]
        if current is not None and current.run_id in ids:
            table.move_cursor(row=ids.index(current.run_id))
        self.show_warnings()
        live = sum(not r.final for r in self.runs)
        self.query_one("#runs-status", Static).update(
            f"{len(self.runs)} run(s), {live} live · s stops, d destroys the selected run"
            if self.runs else "no runs yet: write a plan (w on an offer), then "
            "`gpucost launch plan.toml`")

    def show_warnings(self) -> None:
        """The selected run's warnings under the table; hidden when it has none."""
        run = self.selected()
        box = self.query_one("#runs-warning", Static)
        found = [] if run is None else run.warnings
        box.display = bool(found)
        # status.json is a file anyone may have written: no control character reaches the screen
        box.update("\n".join(printable(f"{run.run_id if run else ''}: {w}", keep="")
                             for w in found))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.show_warnings()

    def selected(self) -> RunStatus | None:
        table: DataTable[Text] = self.query_one("#runs-table", DataTable)
        if not table.row_count or not self.runs:
            return None
        return self.runs[min(table.cursor_row, len(self.runs) - 1)]

    def action_stop(self) -> None:
        self._confirm("stop", "Stop run {id}? Its job ends; the plan's idle policy then stops "
                              "or destroys its machines.")

    def action_down(self) -> None:
        self._confirm("down", "Destroy run {id}? Its job ends and every resource it holds is "
                              "destroyed, disks included.")

    def _confirm(self, action: str, question: str) -> None:
        run = self.selected()
        if run is None:
            self.notify("no run selected", severity="warning")
            return

        def answered(yes: bool | None) -> None:
            if yes:
                verb = "stopping" if action == "stop" else "destroying"
                self.notify(f"{verb} {run.run_id}: waiting for its launcher…")
                self._act(action, run.run_id)

        self.app.push_screen(ConfirmScreen(question.format(id=run.run_id),
                                           yes="Stop" if action == "stop" else "Destroy"),
                             answered)

    @work(thread=True, group="run-actions")
    def _act(self, action: str, run_id: str) -> None:
        try:
            done = (request_stop if action == "stop" else down)(run_id)
        except GpuCostError as err:
            self.app.call_from_thread(self.notify, str(err), severity="error")
            return
        message = "; ".join(done) or f"{run_id}: nothing left to {action}"
        self.app.call_from_thread(self.notify, message)
        self.app.call_from_thread(self.reload)
