"""The watchdog: a SkyPilot run's hard timeout and budget cap, outliving its launcher.

    python -m gpucost.executor.watchdog RUN_ID [--timeout-at T]

A local or torchrun job runs under its guard (:mod:`gpucost.executor.guard`), which enforces
the two limits on this machine. A SkyPilot job runs on the cloud's nodes, where no guard of ours
does, so the launcher starts this process in a session of its own with the run: until the run
ends it checks the hard timeout and the budget deadline (spend from the ledger's billed
segments: nodes x the price of the accepted create), and once one passes and the launcher has
not acted on it within :data:`WATCH_GRACE_S` (it is dead, or hung), it cancels the job, releases
the machines through the run's provider (:mod:`gpucost.executor.control`) and records the end.
It holds the run's one-run-per-job locks until the run ends, as the local guard does, so a
second launch of the job is refused while the first one runs in the cloud, its launcher dead or
not. It sits above the guard and control (it uses both), so neither imports it.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from gpucost.errors import GpuCostError
from gpucost.executor.control import Sweep, destroy_rows
from gpucost.executor.guard import END_STATES, LIMIT_NOTES, limit_reached, record_end
from gpucost.executor.ledger import Ledger
from gpucost.format import usd_text
from gpucost.planfile import BUDGET_WARN_SHARE

WATCH_POLL_S = 1.0  # the watchdog reads the ledger this often
WATCH_GRACE_S = 60.0  # a live launcher past a limit gets this long to end the run itself


def _note(message: str) -> None:
    """One line in launcher.log (the watchdog's stderr)."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    print(f"{stamp} gpucost watchdog: {message}", file=sys.stderr, flush=True)


def budget_warning(cost_usd: float, cap_usd: float) -> str | None:
    """The warning once the spend passes :data:`~gpucost.planfile.BUDGET_WARN_SHARE` of the
    budget cap (None before): the launcher says it once in the run's log and status.json, the
    watchdog in launcher.log, before the cap ends the run."""
    if cap_usd <= 0 or cost_usd < BUDGET_WARN_SHARE * cap_usd:
        return None
    return (f"budget warning: {usd_text(cost_usd)} spent, {cost_usd / cap_usd * 100:.0f} % of "
            f"the {usd_text(cap_usd)} cap; the run stops at the cap (`gpucost stop` ends it "
            "now)")


def watch(run_id: str, *, timeout_at: float | None, poll_s: float = WATCH_POLL_S,
          launcher_grace_s: float = WATCH_GRACE_S) -> int:
    """The watchdog of a run whose job runs where no guard of ours does (SkyPilot): until the
    run ends, check its hard timeout and its budget deadline (spend from the ledger's billed
    segments: nodes x the price of the accepted create); once one passes and the launcher has
    not acted on it within ``launcher_grace_s`` (it is dead, or hung), cancel the job and
    release the machines through the run's provider, and record the end."""
    with Ledger() as ledger:
        since: float | None = None  # when the launcher was first seen past a limit
        warned = False
        while True:
            run = ledger.run(run_id)
            if run.ended_at is not None:
                return 0
            now = time.time()
            if not warned and (warning := budget_warning(run.cost_usd(now),
                                                         run.budget_cap_usd)):
                warned = True
                _note(f"run {run_id}: {warning}")
            limit = limit_reached(now, timeout_at, run.budget_at(now))
            if limit is not None:
                since = now if since is None else since
                if not run.owner_alive or now - since >= launcher_grace_s:
                    break
            time.sleep(poll_s)
        _note(f"{LIMIT_NOTES[limit]} and the launcher of run {run_id} has not ended it: "
              "releasing its resources")
        sweep = Sweep()
        destroy_rows(ledger, run, sweep, include_stopped=True)
        for line in sweep.done + sweep.failed:
            _note(line)
        if sweep.failed:
            return 3  # the rows stay live: `gpucost cleanup` retries
        record_end(ledger, run_id, END_STATES[limit], f"{LIMIT_NOTES[limit]}; the watchdog "
                   "released the run's resources", job_over=False)
    return limit


def start_watchdog(run_id: str, timeout_at: float, log_path: Path,
                   hold_fds: Sequence[int] = ()) -> subprocess.Popen[bytes]:
    """Start :func:`watch` for ``run_id`` in a session of its own (it outlives the launcher),
    holding ``hold_fds`` (the run's locks) open until the run ends."""
    with open(log_path, "ab") as log:
        return subprocess.Popen([sys.executable, "-m", "gpucost.executor.watchdog", run_id,
                                 f"--timeout-at={timeout_at!r}"], stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, pass_fds=tuple(hold_fds))


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m gpucost.executor.watchdog",
                                description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("run_id", metavar="RUN_ID", help="the run to watch (budget from the ledger)")
    p.add_argument("--timeout-at", type=float, help="unix time of the hard timeout")
    args = p.parse_args(argv)
    try:
        return watch(args.run_id, timeout_at=args.timeout_at)
    except GpuCostError as err:  # an unreadable ledger: one line in launcher.log
        _note(f"the watchdog of run {args.run_id} stopped: {err}")
        return 3


if __name__ == "__main__":
    raise SystemExit(main())
