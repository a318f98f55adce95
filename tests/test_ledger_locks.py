"""The ledger's SQLite locks survive a second Ledger opened in the same process.

POSIX advisory locks belong to the process: closing *any* descriptor of the file drops all of
them (SQLite's "How To Corrupt Your Database Files", 2.2). When opening a Ledger probed the file
with open()/close(), a second Ledger in a process that already had one (the launcher does) took
away the first one's lock, and the next process to close its own connection believed it was the
last one: it checkpointed and deleted the write-ahead log under the first connection, whose next
read was "disk I/O error" (seen as a flaky launch test).
"""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import sys
from pathlib import Path

from gpucost.executor.ledger import Ledger

READ_AND_CLOSE = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("SELECT count(*) FROM runs").fetchall()
db.close()
"""


def _add_run(ledger: Ledger, run_id: str, tmp_path: Path) -> None:
    ledger.create_run(run_id=run_id, name="job", plan_path=str(tmp_path / "plan.toml"),
                      provider="local", run_dir=str(tmp_path / run_id), price_hr=0.0,
                      nodes=1, budget_cap_usd=1.0)


def test_a_second_ledger_in_the_process_keeps_the_first_ones_lock(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    first = Ledger(path)
    _add_run(first, "a", tmp_path)
    second = Ledger(path)  # the same process opens it again
    second.close()
    # Another process reads and closes: with the first connection's lock intact it is not the
    # last connection, so it leaves the write-ahead log alone.
    subprocess.run([sys.executable, "-c", READ_AND_CLOSE, str(path)], check=True, timeout=60)
    assert Path(f"{path}-wal").exists()
    _add_run(first, "b", tmp_path)
    assert [r.run_id for r in first.runs()] == ["a", "b"]
    first.close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT count(*) FROM runs").fetchone() == (2,)


OPEN_LEDGER = """
import sys
from gpucost.executor.ledger import Ledger
with Ledger(sys.argv[1]) as ledger:
    print(len(ledger.runs()))
"""


def test_a_new_ledger_opened_while_another_process_writes_it_waits_for_it(
        tmp_path: Path) -> None:
    """Switching a new ledger to write-ahead logging needs the file to itself, and while another
    process is writing it SQLite says "database is locked" at once, without its busy timeout
    (two launches at once on a fresh machine: one failed saying the ledger was unreadable)."""
    path = tmp_path / "ledger.sqlite"
    path.touch()
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # a write under way, as a new ledger's first one is
    opener = subprocess.Popen([sys.executable, "-c", OPEN_LEDGER, str(path)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with contextlib.suppress(subprocess.TimeoutExpired):
        opener.wait(timeout=2.0)  # before the fix it gave up at once
    writer.execute("COMMIT")
    writer.close()
    out, err = opener.communicate(timeout=60)
    assert opener.returncode == 0, err
    assert out.strip() == "0"
