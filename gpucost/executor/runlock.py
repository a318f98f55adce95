"""One live run per job and checkpoint folder.

Two runs of one job train into one checkpoint folder: the older one's pruning deletes the file
the newer one resumes from, and both pay. So a launch takes an exclusive ``flock`` on a file per
job name and one per checkpoint folder (under $GPUCOST_HOME/locks) before it creates anything,
and writes its run id into them. The local guard inherits the descriptors, so a run whose
launcher died still holds its locks while its job lives; the kernel drops them when the last
holder exits, however it exits.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
from collections.abc import Sequence

from gpucost import paths


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
