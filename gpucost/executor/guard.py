"""The guard: the process a local or torchrun job runs under, and what enforces its limits.

    python -m gpucost.executor.guard [--timeout-at T] [--budget-at T] -- python train.py ...

The launcher can die (SIGKILL, the OOM killer, a closed terminal); the hard timeout and the
budget cap must not die with it. So the launcher starts this guard in a session of its own, with
the two deadlines as wall-clock times, and the guard:

- becomes a child subreaper (``prctl(PR_SET_CHILD_SUBREAPER)``), so every process the job starts
  stays its descendant even when the one in between dies. torch 2.13's torchrun starts each
  worker in a new session: a process-group kill misses them, and killing the agent used to hand
  them to init, out of reach. A cgroup would also hold them, but creating one needs root or a
  delegated systemd scope that most machines do not give; PR_SET_PDEATHSIG would have to be set
  inside each worker, which torchrun starts, not gpucost.
- runs the job as its child and reaps whatever is handed to it;
- when the job's first process exits, ends what it left behind and exits with its exit code;
- at a deadline, or on SIGTERM/SIGINT/SIGHUP (the launcher's teardown, `gpucost cleanup`), ends
  the whole tree: SIGTERM to every descendant, :data:`STOP_GRACE_S` for them to go (longer than
  torchrun's own 30 s, so its agent stops its workers its way first), then SIGKILL; it exits only
  once none is left, with :data:`EXIT_TIMED_OUT` or :data:`EXIT_BUDGET` after a deadline.

Every process of the job also carries ``GPUCOST_TOKEN`` in its environment, and the guard writes
every descendant it sees into the run's process record (pid and start time, see
``containment.py``), so a guard that was itself SIGKILLed still leaves processes that `gpucost
cleanup` finds, a process started with a clean environment included. When
the job ends while its launcher is dead, the guard records the end in the ledger and
status.json itself (:func:`record_end`).

A run whose job runs elsewhere (SkyPilot's nodes) gets the same deadline check from its
watchdog (:mod:`gpucost.executor.watchdog`), which shares :func:`limit_reached` and
:func:`record_end` with the guard.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from gpucost.errors import GpuCostError
from gpucost.executor.containment import RECORD_EVERY_S, record_path, write_record
from gpucost.executor.ledger import Ledger, process_start
from gpucost.executor.records import with_reports
from gpucost.executor.rundir import RunDir
from gpucost.executor.runfiles import RunFileError, RunStatusFile

# torch.distributed.elastic waits this long for workers after SIGTERM before it SIGKILLs them
# (PContext.close(timeout=30) and LocalElasticAgent's shutdown_timeout in torch 2.x).
TORCHRUN_GRACE_S = 30.0
STOP_GRACE_S = TORCHRUN_GRACE_S + 5.0
KILL_WAIT_S = 10.0  # after SIGKILL: only the kernel can make it longer
GUARD_EXIT_S = STOP_GRACE_S + 2 * KILL_WAIT_S  # the longest a stopped guard may take to exit
POLL_S = 0.2
# Exit codes after a deadline: 124 is what coreutils' `timeout` (the SkyPilot task's guard)
# exits with, so both mean "timed out" to the launcher.
EXIT_TIMED_OUT = 124
EXIT_BUDGET = 123
LIMIT_NOTES = {EXIT_TIMED_OUT: "the hard timeout is reached",
               EXIT_BUDGET: "the budget cap is reached"}
END_STATES = {EXIT_TIMED_OUT: "timed-out", EXIT_BUDGET: "budget-exceeded"}  # the run's state
PR_SET_CHILD_SUBREAPER = 36


def _note(message: str) -> None:
    """One line in the job's log (the guard's stderr is the job's log)."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    print(f"{stamp} gpucost guard: {message}", file=sys.stderr, flush=True)


def limit_reached(now: float, timeout_at: float | None, budget_at: float | None) -> int | None:
    """:data:`EXIT_TIMED_OUT` or :data:`EXIT_BUDGET` once that deadline has passed, else None
    (the one check the guard and the watchdog share)."""
    if timeout_at is not None and now >= timeout_at:
        return EXIT_TIMED_OUT
    if budget_at is not None and now >= budget_at:
        return EXIT_BUDGET
    return None


def become_subreaper() -> bool:
    """Orphaned descendants are handed to this process instead of init (Linux 3.4+)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _parents() -> dict[int, int]:
    """pid -> parent pid of every live (not zombie) process."""
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue
        fields = text[text.rfind(")") + 2:].split()
        if len(fields) > 1 and fields[0] not in ("Z", "X"):
            out[int(entry.name)] = int(fields[1])
    return out


def descendants(root: int) -> list[int]:
    """Every live process below ``root``, in any session or process group."""
    children: dict[int, list[int]] = {}
    for pid, ppid in _parents().items():
        children.setdefault(ppid, []).append(pid)
    found, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return found


def _reap(job_pid: int) -> int | None:
    """Reap every exited child (the job and orphans handed over); the job's exit code if it
    was among them."""
    code = None
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return code
        if pid == 0:
            return code
        if pid == job_pid:
            code = os.waitstatus_to_exitcode(status)
            code = 128 - code if code < 0 else code  # killed by a signal: shell convention


def _signal_all(pids: Sequence[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def end_tree(root: int, job_pid: int, grace_s: float = STOP_GRACE_S) -> int | None:
    """SIGTERM every descendant, SIGKILL what is left after ``grace_s``; returns once none is
    alive (or the kernel would not let them go), with the job's exit code if it was reaped."""
    code = None
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, KILL_WAIT_S)):
        _signal_all(descendants(root), sig)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if (reaped := _reap(job_pid)) is not None:
                code = reaped
            if not descendants(root):
                return code
            time.sleep(POLL_S / 2)
        # New processes may have been started during the grace: the next signal rescans.
    return code


class _Recorder:
    """Keeps the run's process record (``containment.py``) up to date with what is below the
    guard: rewritten whenever a process it has not recorded appears."""

    def __init__(self, guard_pid: int) -> None:
        run_dir = os.environ.get("GPUCOST_RUN_DIR")
        self.path = record_path(run_dir) if run_dir else None  # None: run by hand
        self.guard = process_start(guard_pid)
        self.recorded: set[str] = set()
        self.next_at = 0.0

    def poll(self, root: int) -> None:
        if self.path is None or time.monotonic() < self.next_at:
            return
        self.next_at = time.monotonic() + RECORD_EVERY_S
        live = {i for pid in descendants(root) if (i := process_start(pid)) and ":?" not in i}
        if live <= self.recorded:
            return
        self.recorded = live | ({self.guard} if self.guard else set())
        try:
            write_record(self.path, self.recorded)
        except OSError as err:
            _note(f"cannot write the process record {self.path}: {err}; processes that leave "
                  "the job's tree are found by their GPUCOST_TOKEN only")
            self.path = None


class _Stop(Exception):
    pass


def _on_signal(signum: int, frame: FrameType | None) -> None:
    raise _Stop(signal.Signals(signum).name)


def run(argv: Sequence[str], *, timeout_at: float | None, budget_at: float | None) -> int:
    """Run ``argv`` under the guard; returns the exit code the guard exits with."""
    if not become_subreaper():
        _note("cannot become a child subreaper: processes that leave the job's tree are found "
              "by their GPUCOST_TOKEN only")
    me = os.getpid()
    try:
        job_pid = os.posix_spawnp(argv[0], list(argv), dict(os.environ))
    except OSError as err:
        _note(f"cannot start {argv[0]!r}: {err}")
        return 127
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _on_signal)
    code: int | None = None
    exit_with: int | None = None
    stopped = False
    recorder = _Recorder(me)
    try:
        while (code := _reap(job_pid)) is None:
            if (exit_with := limit_reached(time.time(), timeout_at, budget_at)) is not None:
                _note(f"{LIMIT_NOTES[exit_with]}: ending the job")
                break
            recorder.poll(me)
            time.sleep(POLL_S)
    except _Stop as why:
        stopped = True
        _note(f"{why} received: ending the job (grace {STOP_GRACE_S:g} s)")
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # the teardown below must not be cut short
    if code is not None and descendants(me):
        _note("the job's first process exited and left processes behind: ending them")
    reaped = end_tree(me, job_pid)
    if code is None:
        code = reaped if reaped is not None else 128 + signal.SIGTERM
    if left := descendants(me):
        _note(f"processes {left} did not end even after SIGKILL")
    if exit_with is not None or not stopped:
        state = (END_STATES[exit_with] if exit_with is not None
                 else "succeeded" if code == 0 else "failed")
        _record_if_launcher_gone(state, exit_with, code)
    return exit_with if exit_with is not None else code


def _record_if_launcher_gone(state: str, limit: int | None, code: int) -> None:
    """A job that ended by itself or at a limit while its launcher was dead: record it, so that
    `gpucost ps` and `status` are right without `gpucost cleanup`. (A live launcher records
    its own run; a stop by signal is recorded by whoever sent it.)"""
    run_id = os.environ.get("GPUCOST_RUN_ID")
    if not run_id:
        return  # run by hand, outside any launch
    reason = LIMIT_NOTES[limit] if limit is not None else f"the job exited with code {code}"
    try:
        with Ledger() as ledger:
            if not ledger.run(run_id).owner_alive:
                record_end(ledger, run_id, state, f"{reason}; its launcher was gone, so the "
                           "guard recorded the end", job_over=True)
    except GpuCostError as err:
        _note(f"cannot record the end of run {run_id}: {err}")


def record_end(ledger: Ledger, run_id: str, state: str, reason: str, *, job_over: bool) -> bool:
    """End a run its launcher could not end in the ledger (one transaction), then in its
    status.json; False when the run had ended already."""
    if not ledger.end_unsupervised(run_id, state, job_over=job_over):
        return False
    write_final_status(ledger, run_id, state, reason)
    return True


def write_final_status(ledger: Ledger, run_id: str, state: str, reason: str) -> None:
    """The end of a run its launcher did not record, in status.json (which readers would
    otherwise go on calling live): state, reason, final cost and time, and where the job got
    to by its own last report (the launcher's last poll may have been epochs before)."""
    run = ledger.run(run_id)
    rundir = RunDir(run.run_dir)
    try:
        status = rundir.read_status() or RunStatusFile()
    except RunFileError:
        status = RunStatusFile()  # damaged: rewritten whole below
    ended_at = run.ended_at if run.ended_at is not None else time.time()
    status = with_reports(status, rundir).replaced(
        run_id=run.run_id, name=run.name, state=state, final=True, reason=reason,
        provider=run.provider, cost_usd=run.cost_usd(ended_at),
        elapsed_s=ended_at - run.started_at, eta_s=None)
    with contextlib.suppress(OSError):
        rundir.write_status(status)
        rundir.note(f"run {run.run_id} ended: {state} ({reason})")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m gpucost.executor.guard",
                                description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--timeout-at", type=float, help="unix time of the hard timeout")
    p.add_argument("--budget-at", type=float, help="unix time the budget cap is reached")
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        p.error("no command to run")
    return run(command, timeout_at=args.timeout_at, budget_at=args.budget_at)


if __name__ == "__main__":
    raise SystemExit(main())
