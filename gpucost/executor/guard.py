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

Every process of the job also carries ``GPUCOST_TOKEN`` in its environment, so a guard that was
itself SIGKILLed still leaves processes that `gpucost cleanup` finds (see ``local.py``).
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

# torch.distributed.elastic waits this long for workers after SIGTERM before it SIGKILLs them
# (PContext.close(timeout=30) and LocalElasticAgent's shutdown_timeout in torch 2.x).
TORCHRUN_GRACE_S = 30.0
STOP_GRACE_S = TORCHRUN_GRACE_S + 5.0
KILL_WAIT_S = 10.0  # after SIGKILL: only the kernel can make it longer
GUARD_EXIT_S = STOP_GRACE_S + 2 * KILL_WAIT_S  # the longest a stopped guard may take to exit
POLL_S = 0.2
# Exit codes after a deadline: 124 is what coreutils' `timeout` (the remote bootstrap's guard)
# exits with, so both mean "timed out" to the launcher.
EXIT_TIMED_OUT = 124
EXIT_BUDGET = 123
PR_SET_CHILD_SUBREAPER = 36


def _note(message: str) -> None:
    """One line in the job's log (the guard's stderr is the job's log)."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    print(f"{stamp} gpucost guard: {message}", file=sys.stderr, flush=True)


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
    try:
        while (code := _reap(job_pid)) is None:
            now = time.time()
            if timeout_at is not None and now >= timeout_at:
                _note("the hard timeout is reached: ending the job")
                exit_with = EXIT_TIMED_OUT
                break
            if budget_at is not None and now >= budget_at:
                _note("the budget cap is reached: ending the job")
                exit_with = EXIT_BUDGET
                break
            time.sleep(POLL_S)
    except _Stop as why:
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
    return exit_with if exit_with is not None else code


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
