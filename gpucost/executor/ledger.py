"""The resource ledger: a SQLite file that knows everything gpucost ever asked a provider for.

The launcher writes an *intent* row (with a recovery token) before each provider call and the
provider's answer after it, each in its own committed transaction. A launcher killed at any
point, SIGKILL included, therefore leaves either an intent row (the token lets the provider find
what it created, if anything) or a row with the resource id: `gpucost cleanup` can always
destroy it. The launcher's pid and process start time identify the owner, so cleanup never
touches a run that is still being supervised.

A ledger that cannot be read or written is a :class:`LedgerError`: one line naming the file, what
went wrong and what to do, never a traceback. Only a damaged file (not a database, truncated,
someone else's tables) is told to be moved aside: a full disk, a busy or unwritable file and a
reused run id leave an intact ledger, and moving it aside would lose what it recorded.
"""

from __future__ import annotations

import datetime as dt
import errno
import json
import os
import sqlite3
import time
import types
import typing
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, TypeVar

from gpucost import paths
from gpucost.errors import InputError
from gpucost.errors import LedgerError as LedgerError  # re-exported: its old home
from gpucost.executor.base import LIVE_STATES, Resource

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    plan_path TEXT NOT NULL,
    provider TEXT NOT NULL,
    run_dir TEXT NOT NULL,
    launcher_pid INTEGER NOT NULL,
    launcher_start TEXT NOT NULL,
    state TEXT NOT NULL,
    price_hr REAL NOT NULL,
    nodes INTEGER NOT NULL,
    budget_cap_usd REAL NOT NULL,
    started_at REAL NOT NULL,
    ended_at REAL
);
CREATE TABLE IF NOT EXISTS resources (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL REFERENCES runs(run_id),
    provider TEXT NOT NULL,
    config TEXT NOT NULL,
    token TEXT NOT NULL,
    resource_id TEXT,
    kind TEXT NOT NULL,
    region TEXT NOT NULL,
    state TEXT NOT NULL,
    price_hr REAL NOT NULL,
    meta TEXT NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS resources_run ON resources(run_id);
CREATE TABLE IF NOT EXISTS segments (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL REFERENCES runs(run_id),
    price_hr REAL NOT NULL,
    nodes INTEGER NOT NULL,
    started_at REAL NOT NULL,
    ended_at REAL
);
CREATE INDEX IF NOT EXISTS segments_run ON segments(run_id);
"""


_Row = TypeVar("_Row")


_KEEP = "the ledger is intact: do not move it aside"


def ledger_error(path: Path, err: sqlite3.Error | OSError) -> LedgerError:
    """What went wrong, told apart: only a damaged file is advised to be moved aside."""
    if isinstance(err, OSError):
        reason = err.strerror or str(err)
        if err.errno == errno.ENOSPC:
            return _disk_full(path, reason)
        return LedgerError(path, reason, message=f"the ledger {path} cannot be used ({reason})",
                           hint=f"check the file's and its folder's permissions; {_KEEP}")
    # Python sets the error's name from SQLite's result code; errors raised without one (a
    # wrapper, a test) carry only SQLite's message, so both are read.
    name = getattr(err, "sqlite_errorname", None) or ""
    text = str(err)
    if name == "SQLITE_FULL" or "disk is full" in text:
        return _disk_full(path, text)
    if name.startswith("SQLITE_IOERR") or "disk I/O error" in text:
        return LedgerError(path, text, message=f"the ledger {path} could not be written ({text})",
                           hint=f"check the disk holding it and its free space; {_KEEP}")
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "locked" in text:
        return LedgerError(path, text, message=f"the ledger {path} is busy ({text}): another "
                           f"gpucost kept it locked for over {LOCK_TIMEOUT_S:g} s",
                           hint=f"run again when it is done; {_KEEP}")
    if (name.startswith(("SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM"))
            or "readonly" in text or "unable to open" in text):
        return LedgerError(path, text, message=f"the ledger {path} cannot be written ({text})",
                           hint=f"check the file's and its folder's permissions; {_KEEP}")
    return LedgerError(path, text)


def _disk_full(path: Path, reason: str) -> LedgerError:
    return LedgerError(path, reason, message=f"the disk holding the ledger {path} is full "
                       f"({reason})", hint=f"free some space and run again; {_KEEP}")


_COLUMNS = {
    "runs": {"run_id", "name", "plan_path", "provider", "run_dir", "launcher_pid",
             "launcher_start", "state", "price_hr", "nodes", "budget_cap_usd", "started_at",
             "ended_at"},
    "resources": {"id", "run_id", "provider", "config", "token", "resource_id", "kind",
                  "region", "state", "price_hr", "meta", "created_at", "updated_at"},
    "segments": {"id", "run_id", "price_hr", "nodes", "started_at", "ended_at"},
}


def process_start(pid: int) -> str | None:
    """An identity for a live process (pid + start time), or None when it does not exist.

    Pids are reused; the start time (field 22 of /proc/<pid>/stat) tells a new process with an
    old pid apart. Where /proc is missing, a signal-0 probe is the best available answer.
    """
    stat = Path(f"/proc/{pid}/stat")
    try:
        text = stat.read_text()
    except FileNotFoundError:
        return None
    except OSError:
        text = ""
    if text:
        # The command name (field 2) may contain spaces and parentheses: split after the last ')'.
        fields = text[text.rfind(")") + 2:].split()
        if fields and fields[0] == "Z":  # a zombie is dead, only not yet reaped
            return None
        return f"{pid}:{fields[19]}" if len(fields) > 19 else f"{pid}:?"
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass
    return f"{pid}:?"


@dataclass(frozen=True)
class Segment:
    """A stretch of a run during which its machines were billed, at one price: from the
    accepted create to the teardown. Waiting for spot capacity is in no segment; an on-demand
    fallback is a segment of its own, at its own price."""

    price_hr: float  # USD/h per node
    nodes: int
    started_at: float  # unix seconds
    ended_at: float | None

    def cost_usd(self, now: float) -> float:
        end = self.ended_at if self.ended_at is not None else now
        return self.nodes * self.price_hr * max(0.0, end - self.started_at) / 3600.0


_SEGMENT_FIELDS = tuple(f.name for f in fields(Segment))


@dataclass(frozen=True)
class RunRow:
    run_id: str
    name: str
    plan_path: str
    provider: str
    run_dir: str
    launcher_pid: int
    launcher_start: str
    state: str
    price_hr: float  # USD/h per node
    nodes: int
    budget_cap_usd: float
    started_at: float  # unix seconds
    ended_at: float | None
    segments: tuple[Segment, ...] = ()

    @property
    def owner_alive(self) -> bool:
        return process_start(self.launcher_pid) == self.launcher_start

    @property
    def supervised(self) -> bool:
        """Its launcher is alive and has not finished with it (an API caller outlives runs)."""
        return self.ended_at is None and self.owner_alive

    def cost_usd(self, now: float | None = None) -> float:
        """Compute spend so far: the sum over its billed segments (none: nothing billed yet)."""
        at = now if now is not None else time.time()
        return sum(s.cost_usd(at) for s in self.segments)

    def budget_at(self, now: float) -> float | None:
        """When the spend reaches the budget cap at the open segments' rate (None while nothing
        is billed and the cap is not reached)."""
        left = self.budget_cap_usd - self.cost_usd(now)
        per_s = sum(s.nodes * s.price_hr for s in self.segments if s.ended_at is None) / 3600.0
        if left <= 0:
            return now
        return now + left / per_s if per_s > 0 else None


@dataclass(frozen=True)
class ResourceRow:
    id: int
    run_id: str
    provider: str
    config: dict[str, Any]
    token: str
    resource_id: str | None
    kind: str
    region: str
    state: str
    price_hr: float  # USD/h
    meta: dict[str, Any]
    created_at: float
    updated_at: float

    @property
    def live(self) -> bool:
        return self.state in LIVE_STATES

    def to_resource(self) -> Resource:
        if self.resource_id is None:
            raise ValueError("resource has no id yet; find it by token")
        return Resource(provider=self.provider, resource_id=self.resource_id, token=self.token,
                        region=self.region, kind=self.kind, price_hr=self.price_hr,
                        meta=self.meta)

    def cost_usd(self, now: float | None = None) -> float:
        """Cost since creation while it was billed (stopped instances bill disk only: ignored)."""
        end = self.updated_at if not self.live else (now or time.time())
        return self.price_hr * max(0.0, end - self.created_at) / 3600.0


def _utc(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


LOCK_TIMEOUT_S = 30.0  # how long a ledger call waits for another process's write


class Ledger:
    """Thin, committed-per-call access to the ledger file (default $GPUCOST_HOME/ledger.sqlite)."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else paths.ledger_path()
        paths.state_file(self.path)
        with self._readable():
            # Autocommit: every statement is durable the moment it returns, which is the point.
            self._db = sqlite3.connect(self.path, timeout=LOCK_TIMEOUT_S, isolation_level=None)
            self._db.row_factory = sqlite3.Row
            # Someone else's database is reported before anything is written to it.
            for table, wanted in _COLUMNS.items():
                have = {r["name"] for r in self._db.execute(f"PRAGMA table_info({table})")}
                if have and have != wanted:
                    self._db.close()
                    raise LedgerError(self.path, f"its {table} table has other columns than "
                                      "gpucost writes")
            self._use_wal()
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.executescript(_SCHEMA)

    def _use_wal(self) -> None:
        """Write-ahead logging, waited for like any other lock: switching a new ledger to it
        needs the file to itself, and SQLite answers "database is locked" at once, without its
        busy timeout, while another process has the file open (two launches on a fresh machine:
        one of them failed saying the ledger was unreadable)."""
        deadline = time.monotonic() + LOCK_TIMEOUT_S
        while True:
            try:
                self._db.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as err:
                if "locked" not in str(err) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    @contextmanager
    def _readable(self) -> Iterator[None]:
        """SQLite's and the file system's errors become one LedgerError naming the file."""
        try:
            yield
        except (sqlite3.Error, OSError) as err:
            raise ledger_error(self.path, err) from None
        except UnicodeDecodeError:  # a damaged page: text that is not UTF-8
            raise LedgerError(self.path, "it holds text that is not UTF-8") from None

    def _rows(self, query: str, args: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        with self._readable():
            return self._db.execute(query, args).fetchall()

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._readable():
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    # runs -------------------------------------------------------------------------------------
    def create_run(self, *, run_id: str, name: str, plan_path: str, provider: str, run_dir: str,
                   price_hr: float, nodes: int, budget_cap_usd: float) -> RunRow:
        pid = os.getpid()
        start = process_start(pid) or f"{pid}:?"
        with self._tx() as db:
            try:
                db.execute("INSERT INTO runs VALUES (?,?,?,?,?,?,?,?,?,?,?,?,NULL)",
                           (run_id, name, plan_path, provider, run_dir, pid, start, "starting",
                            price_hr, nodes, budget_cap_usd, time.time()))
            except sqlite3.IntegrityError:  # run_id is the primary key: the id is taken
                raise LedgerError(
                    self.path, "run id taken",
                    message=f"run id {run_id!r} is already in the ledger {self.path}",
                    hint=f"pick another run id, or follow the existing run with `gpucost status "
                         f"{run_id}`; {_KEEP}") from None
        return self.run(run_id)

    def set_run_state(self, run_id: str, state: str, *, ended: bool = False) -> None:
        with self._tx() as db:
            if ended:
                now = time.time()
                db.execute("UPDATE runs SET state=?, ended_at=COALESCE(ended_at, ?) "
                           "WHERE run_id=?", (state, now, run_id))
                db.execute("UPDATE segments SET ended_at=? WHERE run_id=? AND ended_at IS NULL",
                           (now, run_id))
            else:
                db.execute("UPDATE runs SET state=? WHERE run_id=?", (state, run_id))

    def end_unsupervised(self, run_id: str, state: str, *, job_over: bool) -> bool:
        """Record the end of a run whose launcher could not (the guard or the watchdog ended
        it): its state, the end of billing and, with ``job_over``, its live resources (the job's
        process exited, the rest released), in one transaction. False when it had ended
        already (its launcher, or `gpucost cleanup`, recorded it first)."""
        now = time.time()
        with self._tx() as db:
            ended = db.execute("UPDATE runs SET state=?, ended_at=? WHERE run_id=? AND "
                               "ended_at IS NULL", (state, now, run_id)).rowcount
            if not ended:
                return False
            db.execute("UPDATE segments SET ended_at=? WHERE run_id=? AND ended_at IS NULL",
                       (now, run_id))
            if job_over:
                db.execute("UPDATE resources SET state=CASE kind WHEN 'process' THEN 'exited' "
                           f"ELSE 'destroyed' END, updated_at=? WHERE run_id=? AND state IN "
                           f"({','.join('?' * len(LIVE_STATES))})", (now, run_id, *LIVE_STATES))
        return True

    def open_segment(self, run_id: str, *, price_hr: float, nodes: int) -> None:
        """Billing starts now at ``price_hr`` per node (ending the segment before, if any)."""
        now = time.time()
        with self._tx() as db:
            db.execute("UPDATE segments SET ended_at=? WHERE run_id=? AND ended_at IS NULL",
                       (now, run_id))
            db.execute("INSERT INTO segments (run_id, price_hr, nodes, started_at) "
                       "VALUES (?,?,?,?)", (run_id, price_hr, nodes, now))

    def _run_row(self, row: sqlite3.Row) -> RunRow:
        segments = tuple(self._typed(Segment, {k: s[k] for k in _SEGMENT_FIELDS})
                         for s in self._rows("SELECT * FROM segments WHERE run_id=? ORDER BY id",
                                             (row["run_id"],)))
        return self._typed(RunRow, {**dict(row), "segments": segments})

    def _typed(self, cls: type[_Row], values: dict[str, Any]) -> _Row:
        """A row as ``cls``, each column checked against its field's type: a damaged file can
        hold NULL or text where a number belongs, which would fail far from here."""
        hints = typing.get_type_hints(cls)
        for name, value in values.items():
            expected = hints.get(name)
            options = typing.get_args(expected) if isinstance(expected, types.UnionType) \
                else (typing.get_origin(expected) or expected,)
            if float in options:
                options = (*options, int)
            if all(isinstance(o, type) for o in options) and (
                    isinstance(value, bool) or not isinstance(value, options)):
                raise LedgerError(self.path, f"a {cls.__name__} row holds {name} = "
                                             f"{str(value)[:40]!r}, not {expected}")
        return cls(**values)

    def set_run_price(self, run_id: str, price_hr: float) -> None:
        with self._tx() as db:
            db.execute("UPDATE runs SET price_hr=? WHERE run_id=?", (price_hr, run_id))

    def run(self, run_id: str) -> RunRow:
        """A run by id or unique id prefix (or job name, latest run first)."""
        rows = self._rows("SELECT * FROM runs WHERE run_id=?", (run_id,))
        if not rows:
            rows = self._rows(
                "SELECT * FROM runs WHERE run_id LIKE ? ESCAPE '\\' ORDER BY started_at DESC",
                (run_id.replace("%", r"\%").replace("_", r"\_") + "%",))
            names = self._rows("SELECT * FROM runs WHERE name=? ORDER BY started_at DESC",
                               (run_id,))
            if names and len(rows) != 1:
                rows = names[:1]
        if not rows:
            raise InputError(f"no run {run_id!r} in the ledger {self.path}",
                             hint="list runs with `gpucost ps --all`")
        if len(rows) > 1:
            raise InputError(f"run {run_id!r} is ambiguous: "
                             + ", ".join(r["run_id"] for r in rows[:5]),
                             hint="give more of the run id")
        return self._run_row(rows[0])

    def runs(self) -> list[RunRow]:
        return [self._run_row(r) for r in self._rows("SELECT * FROM runs ORDER BY started_at")]

    # resources --------------------------------------------------------------------------------
    def intent(self, *, run_id: str, provider: str, token: str, kind: str, region: str = "",
               price_hr: float = 0.0, config: Mapping[str, Any] | None = None) -> int:
        """Record that a provider call is about to create something; returns the row id."""
        now = time.time()
        with self._tx() as db:
            cur = db.execute(
                "INSERT INTO resources (run_id, provider, config, token, resource_id, kind, "
                "region, state, price_hr, meta, created_at, updated_at) "
                "VALUES (?,?,?,?,NULL,?,?,'requested',?,'{}',?,?)",
                (run_id, provider, json.dumps(dict(config or {})), token, kind, region,
                 price_hr, now, now))
            assert cur.lastrowid is not None
            return cur.lastrowid

    def record(self, row_id: int, resources: list[Resource], state: str) -> list[int]:
        """Record what the provider call created; the intent row takes the first resource."""
        ids: list[int] = []
        now = time.time()
        with self._tx() as db:
            base = db.execute("SELECT * FROM resources WHERE id=?", (row_id,)).fetchone()
            if not resources:
                db.execute("UPDATE resources SET state='failed', updated_at=? WHERE id=?",
                           (now, row_id))
                return ids
            for i, res in enumerate(resources):
                meta = json.dumps(dict(res.meta))
                if i == 0:
                    db.execute("UPDATE resources SET resource_id=?, state=?, meta=?, kind=?, "
                               "price_hr=?, updated_at=? WHERE id=?",
                               (res.resource_id, state, meta, res.kind, res.price_hr, now,
                                row_id))
                    ids.append(row_id)
                else:
                    cur = db.execute(
                        "INSERT INTO resources (run_id, provider, config, token, resource_id, "
                        "kind, region, state, price_hr, meta, created_at, updated_at) "
                        "VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                        (base["run_id"], base["provider"], base["config"], res.token,
                         res.resource_id, res.kind, res.region, state, res.price_hr, meta,
                         base["created_at"], now))
                    assert cur.lastrowid is not None
                    ids.append(cur.lastrowid)
        return ids

    def set_state(self, row_id: int, state: str) -> None:
        with self._tx() as db:
            db.execute("UPDATE resources SET state=?, updated_at=? WHERE id=?",
                       (state, time.time(), row_id))

    def resources(self, run_id: str | None = None, *, live_only: bool = False) -> list[ResourceRow]:
        query = "SELECT * FROM resources"
        args: tuple[Any, ...] = ()
        clauses = []
        if run_id is not None:
            clauses.append("run_id=?")
            args += (run_id,)
        if live_only:
            clauses.append(f"state IN ({','.join('?' * len(LIVE_STATES))})")
            args += LIVE_STATES
        if clauses:
            query += " WHERE " + " AND ".join(clauses)
        rows = self._rows(query + " ORDER BY id", args)
        try:
            return [self._typed(ResourceRow, {**dict(r), "config": json.loads(r["config"]),
                                              "meta": json.loads(r["meta"])}) for r in rows]
        except (ValueError, TypeError, RecursionError) as err:
            raise LedgerError(self.path, f"a resource row holds broken JSON: {err}") from None

    @staticmethod
    def utc(ts: float) -> str:
        return _utc(ts)
