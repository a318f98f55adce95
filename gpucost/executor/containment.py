"""The processes of a run on this machine, found again once its guard is gone.

The guard is a child subreaper: while it lives, every process the job starts stays below it,
however it forks. Killed outright (the OOM killer, kill -9), it leaves them to init. Two things
find them then:

- ``GPUCOST_TOKEN`` in their environment (:func:`processes_by_token`), which a process started
  with a clean environment (``env -i``, ``Popen(env=...)``, as many launchers do) no longer
  carries;
- the run's process record, ``processes.json`` in its run folder: the guard writes there every
  live descendant it sees, polling /proc every :data:`RECORD_EVERY_S`, each as its pid and start
  time (field 22 of /proc/<pid>/stat), so that a pid the kernel has since given to another
  process is never signalled. It is rewritten atomically whenever a new process appears.

`gpucost cleanup` (through the local provider's destroy, and for a run the ledger already calls
ended) and `gpucost ps` read both: :func:`leftovers`.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from gpucost import paths
from gpucost._io import atomic_write_json
from gpucost.executor.ledger import process_start

PROCESS_RECORD = "processes.json"
RECORD_EVERY_S = 1.0  # how often the guard looks for new processes below it
MAX_RECORD_BYTES = 4 << 20  # a record is a few hundred processes at most


def record_path(run_dir: str | os.PathLike[str]) -> Path:
    return Path(run_dir) / PROCESS_RECORD


def write_record(path: Path, identities: Iterable[str]) -> None:
    """Replace the record with ``identities`` (``pid:start`` of each live process)."""
    atomic_write_json(path, {"processes": sorted(identities)}, indent=None)


def read_record(path: Path) -> list[str]:
    """The identities recorded; none for a missing, damaged or link record (it is the run's
    own folder, but a planted link must not make cleanup read elsewhere)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return []
    try:
        data = json.loads(os.read(fd, MAX_RECORD_BYTES))
    except (OSError, ValueError):
        return []
    finally:
        os.close(fd)
    found = data.get("processes") if isinstance(data, dict) else None
    return [i for i in found if isinstance(i, str)] if isinstance(found, list) else []


def live_recorded(path: Path) -> list[int]:
    """The recorded processes still alive as themselves: same pid and same start time."""
    pids = []
    for identity in read_record(path):
        pid, _, start = identity.partition(":")
        if pid.isdigit() and start.isdigit() and process_start(int(pid)) == identity:
            pids.append(int(pid))
    return pids


def processes_by_token() -> dict[str, list[int]]:
    """Live processes of this state folder's runs, by the GPUCOST_TOKEN in their environment
    (one pass over /proc; a run of the same id under another GPUCOST_HOME is not ours)."""
    proc = Path("/proc")
    if not proc.is_dir():
        return {}
    ours = f"GPUCOST_RUN_DIR={paths.runs_dir()}{os.sep}".encode()
    found: dict[str, list[int]] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        tokens = [v[len(b"GPUCOST_TOKEN="):] for v in environ if v.startswith(b"GPUCOST_TOKEN=")]
        if (tokens and any(v.startswith(ours) for v in environ)
                and process_start(int(entry.name)) is not None):
            token = tokens[0].decode("utf-8", errors="replace")
            found.setdefault(token, []).append(int(entry.name))
    return found


def leftovers(token: str, record: Path | None,
              by_token: Mapping[str, list[int]] | None = None) -> list[int]:
    """What is left of a run: the processes carrying its token and the live ones its guard
    recorded (``by_token``: one scan shared by many runs)."""
    tokened = (by_token if by_token is not None else processes_by_token()).get(token, [])
    recorded = live_recorded(record) if record is not None else []
    return sorted({*tokened, *recorded} - {os.getpid()})


def end_processes(find: Callable[[], list[int]], grace_s: float, kill_wait_s: float) -> None:
    """SIGTERM what ``find`` lists, SIGKILL what it still lists after ``grace_s``, then wait
    up to ``kill_wait_s`` for the kernel to let them go."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, kill_wait_s)):
        pids = find()
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and find():
            time.sleep(0.1)
