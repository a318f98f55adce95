"""One live run per job and checkpoint folder.

Two runs of one job train into one checkpoint folder: the older one's pruning deletes the file
the newer one resumes from, and both pay. So a launch takes an exclusive ``flock`` on a file per
job name and one per checkpoint folder (under $GPUCOST_HOME/locks) before it creates anything,
and writes its run id into them. The local guard inherits the descriptors, so a run whose
launcher died still holds its locks while its job lives; a SkyPilot run's watchdog inherits them
too and holds them until the run ends. The kernel drops them when the last holder exits, however
it exits.

A launch that finds the locks held refuses while the holder's launcher lives, and while a
SkyPilot run's watchdog does (the job goes on in the cloud, its limits enforced: ending it for a
relaunch would throw its progress away; `gpucost down` ends it). A local run whose launcher is
gone is an orphan: the launch ends it first.

Those locks live in one state folder: the same plan launched from two (two users, a CI runner
and a laptop on one checkpoint disk) would train twice into one folder. So a run whose job runs
on this machine also locks the checkpoint folder itself (:class:`FolderLock`): a file inside it,
``flock``ed the same way and held by the guard, naming who holds it. The holder belongs to
another state folder, where this launch cannot tell an orphan from a live run: it is refused.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import getpass
import hashlib
import json
import os
import socket
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from gpucost import paths
from gpucost.errors import ExecutorError, GpuCostError, InputError
from gpucost.executor import provider_class
from gpucost.executor.control import end_run
from gpucost.executor.guard import GUARD_EXIT_S
from gpucost.executor.ledger import Ledger, RunRow


# Not in errors.py: the runner catches it and raises the user's error naming the holder.
class LockBusy(Exception):
    """The lock is held; ``holder`` is the run id written into it ("" if not yet written)."""

    def __init__(self, key: str, holder: str) -> None:
        super().__init__(key)
        self.key = key
        self.holder = holder


class RunLock:
    def __init__(self, keys: Sequence[str]) -> None:
        self.keys = tuple(dict.fromkeys(keys))
        self.fds: list[int] = []

    @staticmethod
    def _path(key: str) -> str:
        digest = hashlib.sha256(key.encode("utf-8", errors="surrogateescape")).hexdigest()
        return str(paths.home() / "locks" / f"{digest[:24]}.lock")

    def acquire(self, run_id: str) -> None:
        """Take every lock or none; raises :class:`LockBusy` naming the first one held."""
        (paths.home() / "locks").mkdir(parents=True, exist_ok=True)
        try:
            for key in self.keys:
                fd = os.open(self._path(key), os.O_RDWR | os.O_CREAT, 0o644)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    holder = os.pread(fd, 200, 0).decode("utf-8", errors="replace").strip()
                    os.close(fd)
                    raise LockBusy(key, holder) from None
                self.fds.append(fd)
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{run_id}\n".encode(), 0)
        except BaseException:
            self.release()
            raise

    def release(self) -> None:
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds = []


FOLDER_LOCK_NAME = ".gpucost-run.lock"  # no checkpoint's name (epoch-NNNNNN.pt) is like it


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (a container's arbitrary uid)
        return str(os.getuid())


class FolderLock:
    """The lock file inside a local checkpoint folder: ``flock``ed by the run training into it
    (the launcher, then the guard that inherits the descriptor, and the job's processes), with
    the holder written in it: user, pid, host, run id and state folder. The kernel drops the
    lock when the last of them exits, so a file left by a dead run blocks nothing."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / FOLDER_LOCK_NAME

    def acquire(self, run_id: str) -> int:
        """The locked descriptor; raises InputError naming the holder when it is held."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        except OSError as err:
            why = ("it is a symbolic link" if err.errno == errno.ELOOP
                   else err.strerror or str(err))
            raise InputError(f"cannot lock the checkpoint folder {self.path.parent}: "
                             f"{self.path.name}: {why}",
                             hint="the run's checkpoints go there: make it a writable folder "
                                  "of yours, or set [checkpoint] target") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 4096, 0)
            os.close(fd)
            raise self._busy(holder) from None
        owner = {"run_id": run_id, "user": _user(), "pid": os.getpid(),
                 "host": socket.gethostname(), "gpucost_home": str(paths.home()),
                 "since": time.time()}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(owner) + "\n").encode(), 0)
        return fd

    def _busy(self, written: bytes) -> InputError:
        where = f"the checkpoint folder {self.path.parent}"
        try:
            owner = json.loads(written)
            run_id, home = str(owner["run_id"]), str(owner["gpucost_home"])
            who = (f"run {run_id} of user {owner['user']} (pid {owner['pid']} on "
                   f"{owner['host']}, GPUCOST_HOME={home})")
            hint = f"wait for it to end, or `GPUCOST_HOME={home} gpucost down {run_id}` there"
        except (ValueError, KeyError, TypeError):  # being written this instant
            who, hint = "another launch", "wait for it to end"
        return InputError(f"{where} is in use by {who}: one live run per checkpoint folder",
                          hint=hint)


def hold_job(ledger: Ledger, *, job: str, checkpoints: str | None, run_id: str,
             note: Callable[[str], None], folder: Path | None = None) -> RunLock:
    """Hold the locks of ``job`` (and of its checkpoint folder) for ``run_id``. A live run of
    the job refuses this launch; an orphaned one (its launcher gone) is ended first, like every
    orphan of the job the ledger knows. ``note`` is told what was ended. ``folder``, a local
    checkpoint folder this machine trains into, is locked last, inside it (:class:`FolderLock`):
    what holds it then is a run of another state folder."""
    lock = RunLock([f"job:{job}", *([f"checkpoints:{checkpoints}"] if checkpoints else [])])
    try:
        lock.acquire(run_id)
    except LockBusy as busy:
        holder = _orphan_holding(ledger, busy, job)
        if holder.ended_at is None:  # else its guard or watchdog is about to let go
            note(f"ending {holder.run_id} first: an orphaned run of job {job!r} (its launcher "
                 "is gone, its job was not)")
            end_run(ledger, holder, f"its launcher was gone; run {run_id} of the same job "
                    "ended it before starting")
        deadline = time.monotonic() + GUARD_EXIT_S + 10.0
        while True:
            try:
                lock.acquire(run_id)
                break
            except LockBusy:
                if time.monotonic() > deadline:
                    raise ExecutorError(f"{holder.run_id} still holds job {job!r}",
                                        hint=f"`gpucost down {holder.run_id}`") from None
                time.sleep(0.2)
    try:
        for run in ledger.runs():
            if run.name == job and run.ended_at is None and not run.supervised:
                note(f"ending {run.run_id} first: an orphaned run of job {job!r}")
                end_run(ledger, run, f"its launcher was gone; run {run_id} of the same job "
                        "ended it before starting")
        if folder is not None:
            lock.fds.append(FolderLock(folder).acquire(run_id))
    except BaseException:
        lock.release()
        raise
    return lock


def _orphan_holding(ledger: Ledger, busy: LockBusy, job: str) -> RunRow:
    """The run holding a lock, when it is an orphan; raises when it is live (or starting)."""
    what = "checkpoint folder of job" if busy.key.startswith("checkpoints:") else "job"
    try:
        holder = ledger.run(busy.holder) if busy.holder else None
    except InputError:
        holder = None
    if holder is None or holder.supervised:
        who = (f"run {holder.run_id} (launcher pid {holder.launcher_pid})" if holder
               else "another launch")
        raise InputError(f"the {what} {job!r} is in use by {who}: one live run per job",
                         hint=f"`gpucost stop {holder.run_id}` or `gpucost down "
                              f"{holder.run_id}` first" if holder else "wait for it")
    if holder.ended_at is None and _watched(holder):
        raise InputError(f"the {what} {job!r} is in use by run {holder.run_id}, which runs on "
                         "under its watchdog (its launcher is gone): one live run per job",
                         hint=f"`gpucost status {holder.run_id}`; `gpucost down "
                              f"{holder.run_id}` ends it")
    return holder


def _watched(run: RunRow) -> bool:
    """The run's job runs where no guard of ours does, under a watchdog (SkyPilot)."""
    try:
        return provider_class(run.provider).needs_watchdog
    except GpuCostError:
        return False
