"""Acting on runs from outside their launcher: `gpucost stop`, `down` and `cleanup`.

These read the ledger, never a launcher's memory: a launcher may be alive (it is asked to tear
its run down and waited for), finished, or killed (its resources are destroyed directly, found
by token when their ids never reached the ledger).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from gpucost.errors import ExecutorError, GpuCostError, ProviderError
from gpucost.executor import get_provider, provider_class
from gpucost.executor.containment import (
    end_processes,
    leftovers,
    processes_by_token,
    record_path,
)
from gpucost.executor.guard import KILL_WAIT_S, STOP_GRACE_S, write_final_status
from gpucost.executor.ledger import Ledger, RunRow
from gpucost.executor.records import read_record
from gpucost.executor.rundir import RunDir


@dataclass
class Sweep:
    """What a cleanup or down did and, one line each, what it could not do."""

    done: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    providers_failed: set[str] = field(default_factory=set)

    def failure(self) -> ProviderError | None:
        """One error summing up the failures (None when there were none)."""
        if not self.failed:
            return None
        return ProviderError(f"{len(self.failed)} resource(s) could not be released: "
                             f"{', '.join(sorted(self.providers_failed))} failed",
                             hint="they stay in the ledger; run `gpucost cleanup` again once "
                                  "the provider is reachable")


def destroy_rows(ledger: Ledger, run: RunRow, sweep: Sweep, *, include_stopped: bool,
                  action: str = "destroy") -> bool:
    """Destroy (or stop) a run's live resources, going on past failures; True if all went."""
    ok = True
    # newest first: a job is ended before the machines it runs on are released
    for row in reversed(ledger.resources(run.run_id, live_only=True)):
        if row.state == "stopped" and not include_stopped:
            continue
        try:
            provider = get_provider(row.provider, row.config)
            targets = [row.to_resource()] if row.resource_id else provider.find(row.token)
            stops = action == "stop" and provider.supports("stop")
            for res in targets:
                if stops:
                    provider.stop(res)
                else:
                    provider.destroy(res)
                sweep.done.append(f"{run.run_id}: {action} {row.provider} {res.kind} "
                                  f"{res.resource_id}")
        # Any failure, a provider's bug included, must not leave the other providers' machines
        # running: it is reported, the row stays live, and the sweep goes on.
        except Exception as err:
            ok = False
            sweep.providers_failed.add(row.provider)
            sweep.failed.append(f"{run.run_id}: cannot {action} {row.provider} {row.kind} "
                                f"{row.resource_id or '(id unknown, searched by token)'}: {err}")
            continue
        ledger.set_state(row.id, "stopped" if stops else "destroyed")
    return ok


def end_run(ledger: Ledger, run: RunRow, why: str = "its launcher was gone") -> None:
    """Destroy an orphaned run's resources and mark it ended; raises if some would not go."""
    sweep = Sweep()
    if not destroy_rows(ledger, run, sweep, include_stopped=True):
        raise ProviderError("; ".join(sweep.failed), hint="run `gpucost cleanup` once the "
                            "provider is reachable, then launch again")
    if ledger.run(run.run_id).ended_at is None:
        _end_orphan(ledger, run.run_id, f"{why}; its resources were released")


def _end_orphan(ledger: Ledger, run_id: str, reason: str) -> None:
    """Mark an orphan ended, in the ledger and in its status.json (which said "running" and
    told readers to run `gpucost cleanup` after it had run)."""
    ledger.set_run_state(run_id, "orphaned", ended=True)
    write_final_status(ledger, run_id, "orphaned", reason)


def _where_it_ended(run: RunRow) -> str:
    """What `status` now says of a run cleanup ended: its state, the job's last epoch and the
    checkpoint to resume from."""
    record = read_record(run, damaged_status_ok=True)
    status = record.status
    epoch = "no epoch" if status.epoch is None else f"epoch {status.epoch:g}" + (
        f" / {status.epochs:g}" if status.epochs else "")
    return (f"{run.run_id}: ended {record.state} at {epoch}; last checkpoint "
            f"{status.checkpoint or '(none)'}")


def _runs_here(provider: str) -> bool:
    try:
        return provider_class(provider).runs_locally
    except GpuCostError:
        return False


def leftover_processes(ledger: Ledger) -> dict[str, list[int]]:
    """Run id -> the processes on this machine left by a run no launcher supervises: what
    carries its token or is in its guard's process record (:mod:`containment`), whatever the
    ledger says of its resources (a guard killed outright took none of them with it)."""
    by_token: dict[str, list[int]] | None = None
    found = {}
    for run in ledger.runs():
        if run.supervised or not _runs_here(run.provider):
            continue
        by_token = processes_by_token() if by_token is None else by_token  # one /proc pass
        pids = sorted({pid for token in _tokens(ledger, run)
                       for pid in leftovers(token, record_path(run.run_dir), by_token)})
        if pids:
            found[run.run_id] = pids
    return found


def _tokens(ledger: Ledger, run: RunRow) -> set[str]:
    return {row.token for row in ledger.resources(run.run_id)} or {f"gpucost-{run.run_id}"}


def _end_leftovers(ledger: Ledger, run_id: str, sweep: Sweep) -> None:
    """End what :func:`leftover_processes` finds of ``run_id`` now (SIGTERM, the guard's grace,
    SIGKILL), rescanning as it goes."""
    run = ledger.run(run_id)
    tokens, record = _tokens(ledger, run), record_path(run.run_dir)

    def find() -> list[int]:
        return sorted({pid for token in tokens for pid in leftovers(token, record)})

    if pids := find():
        end_processes(find, STOP_GRACE_S, KILL_WAIT_S)
        sweep.done.append(f"{run_id}: ended {len(pids)} process(es) its guard left running "
                          f"({', '.join(map(str, pids))})")


def cleanup(ledger: Ledger | None = None, *, include_stopped: bool = False) -> Sweep:
    """Destroy every live resource whose launcher is gone or has finished with the run (found
    by token when its id never reached the ledger), going on past any one provider's failure;
    then end the processes on this machine that a run's guard, killed outright, left behind."""
    ledger = ledger or Ledger()
    sweep = Sweep()
    for run in ledger.runs():
        if run.supervised:
            continue
        if (destroy_rows(ledger, run, sweep, include_stopped=include_stopped)
                and run.ended_at is None):
            _end_orphan(ledger, run.run_id, "its launcher was gone; `gpucost cleanup` "
                        "released its resources")
            sweep.done.append(_where_it_ended(ledger.run(run.run_id)))
    for run_id in leftover_processes(ledger):
        _end_leftovers(ledger, run_id, sweep)
    return sweep


FINAL_STATUS_WAIT_S = 5.0  # a launcher's last status.json write follows its ledger write


def _wait_unsupervised(ledger: Ledger, run_id: str, wait_s: float) -> bool:
    """Wait until the run's launcher has finished with it (ended, or died); True if it did.
    A live launcher that ended it is given a moment more to write its final status.json, so
    what `stop` and `down` return to agrees with the run's files."""
    deadline = time.monotonic() + wait_s
    while ledger.run(run_id).supervised:
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    deadline = time.monotonic() + FINAL_STATUS_WAIT_S
    while ledger.run(run_id).owner_alive and time.monotonic() < deadline:
        with contextlib.suppress(GpuCostError):
            status = RunDir(ledger.run(run_id).run_dir).read_status()
            if status is not None and status.final:
                break
        time.sleep(0.05)
    return True


def _signal_launcher(ledger: Ledger, run: RunRow, wait_s: float) -> bool:
    """SIGTERM a run's launcher and wait for it to finish its teardown; True if it did."""
    if not run.supervised:
        return True
    try:
        os.kill(run.launcher_pid, signal.SIGTERM)
    except ProcessLookupError:
        return True
    return _wait_unsupervised(ledger, run.run_id, wait_s)


def down(run_id: str, ledger: Ledger | None = None, *, wait_s: float = 60.0) -> list[str]:
    """Stop a run's job and destroy all its resources, stopped ones included; raises when some
    could not be released (after trying every one)."""
    ledger = ledger or Ledger()
    run = ledger.run(run_id)
    sweep = Sweep()
    if run.supervised:
        if not _signal_launcher(ledger, run, wait_s):
            raise ExecutorError(f"the launcher of {run.run_id} (pid {run.launcher_pid}) did not "
                                f"exit within {wait_s:g} s", hint="try again, or kill it and "
                                "run `gpucost cleanup`")
        sweep.done.append(f"{run.run_id}: interrupted; its launcher tore it down")
    if (destroy_rows(ledger, ledger.run(run.run_id), sweep, include_stopped=True)
            and ledger.run(run.run_id).ended_at is None):
        ledger.set_run_state(run.run_id, "destroyed", ended=True)
        write_final_status(ledger, run.run_id, "destroyed", "its launcher was gone; `gpucost "
                           "down` destroyed its resources")
    if _runs_here(run.provider):
        _end_leftovers(ledger, run.run_id, sweep)
    if error := sweep.failure():
        raise ProviderError("; ".join(sweep.failed), hint=error.hint)
    return sweep.done


def down_many(run_ids: Sequence[str], ledger: Ledger | None = None) -> Sweep:
    """:func:`down` for each run, going on past the ones that fail."""
    ledger = ledger or Ledger()
    sweep = Sweep()
    for run_id in run_ids:
        try:
            sweep.done += down(run_id, ledger)
        except GpuCostError as err:
            sweep.failed.append(f"{run_id}: {err.message}")
            sweep.providers_failed.add(ledger.run(run_id).provider)
    return sweep


def request_stop(run_id: str, ledger: Ledger | None = None, *, wait_s: float = 60.0) -> list[str]:
    """Ask a run's launcher to stop the job (idle policy then applies); without a launcher, stop
    its machines directly."""
    ledger = ledger or Ledger()
    run = ledger.run(run_id)
    if run.supervised:
        RunDir(run.run_dir).stop_request_path.touch()
        if not _wait_unsupervised(ledger, run.run_id, wait_s):
            raise ExecutorError(f"{run.run_id} did not stop within {wait_s:g} s",
                                hint=f"`gpucost down {run.run_id}` stops it by force")
        return [f"{run.run_id}: stopped by its launcher"]
    sweep = Sweep()
    destroy_rows(ledger, run, sweep, include_stopped=False, action="stop")
    if error := sweep.failure():
        raise ProviderError("; ".join(sweep.failed), hint=error.hint)
    return sweep.done


def forget(run_id: str, ledger: Ledger | None = None) -> list[str]:
    """Drop a run's ledger entries for resources that never existed: creates whose answer never
    named a resource (no credentials, a refused request). Where the provider can still be asked,
    it is, and anything carrying the run's token is left to `gpucost cleanup`; entries with a
    resource id existed once and are left to `gpucost down`."""
    ledger = ledger or Ledger()
    run = ledger.run(run_id)
    if run.supervised:
        raise ExecutorError(f"{run.run_id} is still supervised by its launcher (pid "
                            f"{run.launcher_pid})", hint=f"`gpucost down {run.run_id}`")
    rows = ledger.resources(run.run_id, live_only=True)
    named = [r for r in rows if r.resource_id]
    if named:
        raise ExecutorError(f"{run.run_id} has resources that exist or existed: "
                            + ", ".join(f"{r.provider} {r.kind} {r.resource_id}" for r in named),
                            hint=f"`gpucost down {run.run_id}` destroys them")
    for row in rows:
        try:
            found = get_provider(row.provider, row.config).find(row.token)
        except GpuCostError:
            found = []  # it cannot be asked: the user's word that nothing was made stands
        if found:
            raise ExecutorError(f"{run.run_id}: {row.provider} has "
                                + ", ".join(f"{r.kind} {r.resource_id}" for r in found)
                                + f" carrying its token {row.token}",
                                hint="`gpucost cleanup` destroys it")
    for row in rows:
        ledger.set_state(row.id, "failed")
    if run.ended_at is None:
        ledger.set_run_state(run.run_id, "forgotten", ended=True)
    return [f"{run.run_id}: forgot {row.provider} {row.kind} request {row.token} (never created)"
            for row in rows]
