"""Run commands: launch a plan, watch runs, stop them, and make sure nothing is left running.

    gpucost launch plan.toml [--dry-run] [--detach]
    gpucost ps [--all]            live resources with cost so far
    gpucost status RUN [--format json]
    gpucost logs RUN [-f]         the last 1 MiB of train.log (-f: then what is appended)
    gpucost stop RUN              stop the job; the plan's idle policy applies
    gpucost down RUN | --all      stop the job and destroy every resource of the run
    gpucost cleanup [--stopped]   destroy what the ledger knows that has no live launcher
    gpucost cleanup --forget RUN  drop RUN's entries for creates that never made anything
"""

from __future__ import annotations

import argparse
import errno
import os
import selectors
import stat
import subprocess
import sys
import time
from pathlib import Path

from gpucost.cli import add_command
from gpucost.envelope import add_format_argument, print_document
from gpucost.errors import InputError
from gpucost.executor.control import (
    Sweep,
    cleanup,
    down_many,
    forget,
    leftover_processes,
    request_stop,
)
from gpucost.executor.ledger import Ledger
from gpucost.executor.records import read_record
from gpucost.executor.rundir import RunDir
from gpucost.executor.runfiles import RunStatusFile
from gpucost.executor.runner import Runner
from gpucost.format import amount, text_table
from gpucost.planfile import load_plan
from gpucost.terminal import printable


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = add_command(sub, "launch")
    p.add_argument("plan", type=Path, help="plan file (TOML), e.g. examples/plan.toml")
    p.add_argument("--dry-run", action="store_true", help="say what would happen; create nothing")
    p.add_argument("--detach", action="store_true",
                   help="supervise in the background; follow with `gpucost status RUN`")
    p.add_argument("--run-id", help=argparse.SUPPRESS)
    p.add_argument("--detached-child", action="store_true", help=argparse.SUPPRESS)
    p.set_defaults(handler=_launch)

    p = add_command(sub, "ps")
    p.add_argument("--all", action="store_true", help="list every run in the ledger instead")
    add_format_argument(p)
    p.set_defaults(handler=_ps)

    p = add_command(sub, "status")
    p.add_argument("run", help="run id (or a unique prefix, or the job name for its latest run)")
    add_format_argument(p)  # json: status.json as it is, in the envelope
    p.set_defaults(handler=_status)

    p = add_command(sub, "logs")
    p.add_argument("run")
    p.add_argument("-f", "--follow", action="store_true", help="keep printing until the run ends")
    p.set_defaults(handler=_logs)

    p = add_command(sub, "stop")
    p.add_argument("run")
    p.set_defaults(handler=_stop)

    p = add_command(sub, "down")
    p.add_argument("run", nargs="?")
    p.add_argument("--all", action="store_true", help="every run with live resources")
    p.set_defaults(handler=_down)

    p = add_command(sub, "cleanup")
    p.add_argument("--stopped", action="store_true",
                   help="also destroy machines kept stopped by an idle policy")
    p.add_argument("--forget", metavar="RUN", help="drop RUN's ledger entries for creates "
                   "that never made anything (no id; the provider cannot be asked)")
    p.set_defaults(handler=_cleanup)


def _err(message: str) -> None:
    print(f"gpucost: {message}", file=sys.stderr, flush=True)


# The detached launcher prints this once its run is in the ledger and its run folder exists.
DETACHED_READY = "gpucost-detached-launcher-ready"
DETACH_START_S = 120.0  # the longest a detached launcher may take to get there


def _launch(args: argparse.Namespace) -> int:
    plan = load_plan(args.plan)
    runner = Runner(plan, args.plan, echo=_err, run_id=args.run_id)
    if args.dry_run:
        print("\n".join(runner.describe()))
        return 0
    if args.detach:
        return _detach(args.plan, runner.run_id)
    on_started = _detached_ready if args.detached_child else None
    result = runner.launch(on_started=on_started)
    print(f"{result.run_id} {result.state}")
    return result.exit_code


def _detach(plan: Path, run_id: str) -> int:
    """Start the launcher in the background and wait until it has started the run; what made it
    fail before that (an unreadable ledger, a missing workdir) is this command's error."""
    # A new session: the launcher outlives this terminal and gets no Ctrl-C meant for it.
    child = subprocess.Popen([sys.executable, "-m", "gpucost", "launch", str(plan), "--run-id",
                              run_id, "--detached-child"], stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             start_new_session=True)
    said = _read_until_eof(child, DETACH_START_S)
    if said is None:
        child.kill()
        child.wait()
        _err(f"error: the background launcher did not start run {run_id} within "
             f"{DETACH_START_S:g} s and was killed (run `gpucost launch {plan}` in the "
             "foreground to see why)")
        return 3
    lines = said.decode("utf-8", errors="replace").splitlines()
    if DETACHED_READY not in lines:
        code = child.wait()
        for line in lines:
            print(line, file=sys.stderr)
        if not lines:
            _err(f"error: the background launcher exited with code {code} before starting run "
                 f"{run_id}")
        return code or 3
    print(run_id)
    _err(f"launched in the background; `gpucost status {run_id}`, "
         f"`gpucost logs {run_id} -f`, `gpucost stop {run_id}`")
    return 0


def _read_until_eof(child: subprocess.Popen[bytes], timeout_s: float) -> bytes | None:
    """What the child wrote until it closed its output (it goes on running); None on timeout."""
    assert child.stdout is not None
    deadline = time.monotonic() + timeout_s
    said = b""
    with selectors.DefaultSelector() as sel:
        sel.register(child.stdout, selectors.EVENT_READ)
        while (left := deadline - time.monotonic()) > 0:
            if not sel.select(left):
                continue
            chunk = os.read(child.stdout.fileno(), 65536)
            if not chunk:
                child.stdout.close()
                return said
            said += chunk
    return None


def _detached_ready() -> None:
    """In the detached launcher: tell `launch --detach` the run has started, then let go of its
    pipe (later messages go to the run's launcher.log)."""
    print(DETACHED_READY, flush=True)
    sys.stderr.flush()
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    os.close(devnull)


def _table(rows: list[list[str]]) -> str:
    rows = [[printable(cell, keep="") for cell in row] for row in rows]  # ids, states: any text
    return text_table(rows[0], rows[1:])


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


def _epoch(status: RunStatusFile, sep: str = "/") -> str:
    """"2 / 3" (status) or "2/3" (ps): the last epoch of the planned ones; "-" before any."""
    epoch, epochs = status.epoch, status.epochs
    return (f"{epoch:g}" if epoch is not None else "-") + (f"{sep}{epochs:g}" if epochs else "")


def _ps(args: argparse.Namespace) -> int:
    now = time.time()
    with Ledger() as ledger:
        if args.all:
            # what `status` and the TUI say of each run (a damaged status.json: the ledger's)
            runs = [(run, read_record(run, damaged_status_ok=True)) for run in ledger.runs()]
            if args.format == "json":
                print_document("runs", {"runs": [
                    {"run_id": run.run_id, "provider": run.provider, "state": record.state,
                     "final": record.final, "epoch": record.status.epoch,
                     "epochs": record.status.epochs, "checkpoint": record.status.checkpoint,
                     "launcher_alive": run.owner_alive,
                     "age_s": now - run.started_at, "cost_usd": run.cost_usd(now)}
                    for run, record in runs]})
                return 0
            rows = [["RUN", "PROVIDER", "STATE", "EPOCH", "LAUNCHER", "AGE", "COST_USD"]]
            for run, record in runs:
                rows.append([run.run_id, run.provider, record.state, _epoch(record.status),
                             "alive" if run.owner_alive else "gone",
                             _age(now - run.started_at), amount(run.cost_usd(now))])
            print(_table(rows) if len(rows) > 1 else "no runs in the ledger")
            return 0
        live = ledger.resources(live_only=True)
        # Processes a guard killed outright left running, whatever the ledger says (one row
        # each, less those already listed as the run's resources).
        listed = {(res.run_id, res.resource_id) for res in live}
        left = [(run_id, str(pid)) for run_id, pids in leftover_processes(ledger).items()
                for pid in pids if (run_id, str(pid)) not in listed]
        if args.format == "json":
            print_document("resources", {"resources": [
                {"run_id": res.run_id, "provider": res.provider, "kind": res.kind,
                 "resource_id": res.resource_id, "state": res.state,
                 "age_s": now - res.created_at,
                 "run_cost_usd": ledger.run(res.run_id).cost_usd(now),
                 "launcher_alive": ledger.run(res.run_id).owner_alive} for res in live] + [
                {"run_id": run_id, "provider": ledger.run(run_id).provider,
                 "kind": "leftover-process", "resource_id": pid, "state": "running",
                 "age_s": None, "run_cost_usd": ledger.run(run_id).cost_usd(now),
                 "launcher_alive": False} for run_id, pid in left]})
            return 0
        if not live and not left:
            print("no live resources")
            return 0
        rows = [["RUN", "PROVIDER", "KIND", "ID", "STATE", "AGE", "RUN_COST_USD", "LAUNCHER"]]
        for res in live:
            run = ledger.run(res.run_id)
            rows.append([res.run_id, res.provider, res.kind, res.resource_id or "(unknown)",
                         res.state, _age(now - res.created_at), amount(run.cost_usd(now)),
                         "alive" if run.owner_alive else "gone: `gpucost cleanup`"])
        for run_id, pid in left:
            run = ledger.run(run_id)
            rows.append([run_id, run.provider, "leftover process", pid, "running", "-",
                         amount(run.cost_usd(now)), "gone: `gpucost cleanup`"])
        print(_table(rows))
    return 0


def _status(args: argparse.Namespace) -> int:
    with Ledger() as ledger:
        run = ledger.run(args.run)
    # state from the ledger, epoch and checkpoint from the job's own reports (records.py)
    status = read_record(run).status
    if args.format == "json":
        print_document("run-status", {"run_id": run.run_id, "provider": run.provider,
                                      "status": status.document()})
        return 0
    lines = [
        f"run       {run.run_id} ({run.provider})",
        f"state     {status.state}",
        f"epoch     {_epoch(status, ' / ')}",
        f"eta       {_age(status.eta_s) if status.eta_s is not None else '-'}",
        f"elapsed   {_age(status.elapsed_s or 0.0)}",
        f"cost      {amount(status.cost_usd or run.cost_usd())} USD of "
        f"{amount(run.budget_cap_usd)} cap",
    ]
    if status.throughput:
        lines.append(f"speed     {status.throughput:.1f} samples/s (planned "
                     f"{status.planned_throughput or 0:g})")
    for key, value in status.metrics.items():
        lines.append(f"{key:<9} {value:.6g}")
    if status.checkpoint:
        lines.append(f"ckpt      {status.checkpoint}")
    if status.budget_warning:
        lines.append(f"warning   {status.budget_warning}")
    if status.reason:
        lines.append(f"reason    {status.reason}")
    if "orphaned" in status.state and not status.final:
        lines.append("hint      run `gpucost cleanup` to release its resources")
    # status.json and the metric names are the job's own writing: no escape sequence reaches
    # the terminal, and a newline in a value cannot forge a line.
    print("\n".join(printable(line, keep="") for line in lines))
    return 0


# `logs` prints at most this much of a log: the end, where a failure is; the whole file is in
# the run folder. -f then reads what is appended, this much at a time.
LOG_TAIL_BYTES = 1 << 20


def _open_run_file(path: Path) -> int | None:
    """A read descriptor on ``path``, a regular file in its run folder; None if it is absent.

    O_NOFOLLOW: a link planted in a reused run folder is not followed out of it; O_NONBLOCK so a
    FIFO there cannot hang the open; a device (/dev/zero) or FIFO is refused by its type."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise InputError(f"{path} is a symbolic link; gpucost reads run files only inside "
                             "the run folder",
                             hint="remove the link; the run writes its log there itself") from None
        raise InputError(f"cannot read {path}: {err.strerror}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise InputError(f"{path} is not a regular file",
                         hint="remove it; the run writes its log there itself")
    return fd


def _logs(args: argparse.Namespace) -> int:
    with Ledger() as ledger:
        run = ledger.run(args.run)
    rd = RunDir(run.run_dir)
    pos: int | None = None  # None: not opened yet; the first read starts at the tail
    while True:
        fd = _open_run_file(rd.log_path)
        chunk = b""
        if fd is not None:
            try:
                size = os.fstat(fd).st_size
                if pos is None or pos > size:  # the first read, or the log was replaced
                    pos = max(0, size - LOG_TAIL_BYTES)
                    if pos:
                        _err(f"{rd.log_path}: the first {pos} bytes are left out; "
                             f"the last {LOG_TAIL_BYTES >> 20} MiB follow")
                chunk = os.pread(fd, LOG_TAIL_BYTES, pos)
            finally:
                os.close(fd)
            pos += len(chunk)
        sys.stdout.write(chunk.decode("utf-8", errors="replace"))
        sys.stdout.flush()
        if len(chunk) == LOG_TAIL_BYTES:
            continue  # more is there already: print it before sleeping
        if not args.follow:
            return 0
        status = rd.read_status()
        if (status is not None and status.final) or not run.supervised:
            return 0
        time.sleep(0.5)


def _stop(args: argparse.Namespace) -> int:
    for line in request_stop(args.run):
        print(line)
    return 0


def _down(args: argparse.Namespace) -> int:
    if bool(args.run) == bool(args.all):
        raise InputError("give one run id or --all", hint="`gpucost ps` lists live runs")
    with Ledger() as ledger:
        if args.all:
            targets = sorted({r.run_id for r in ledger.resources(live_only=True)}
                             | {r.run_id for r in ledger.runs()
                                if r.supervised})
        else:
            targets = [ledger.run(args.run).run_id]
        sweep = down_many(targets, ledger)
    print("\n".join(sweep.done) if sweep.done or sweep.failed else "nothing to destroy")
    return _report_failures(sweep)


def _cleanup(args: argparse.Namespace) -> int:
    if args.forget:
        print("\n".join(forget(args.forget)) or "nothing to forget")
        return 0
    with Ledger() as ledger:
        sweep = cleanup(ledger, include_stopped=args.stopped)
    print("\n".join(sweep.done) if sweep.done or sweep.failed else "nothing to clean up")
    return _report_failures(sweep)


def _report_failures(sweep: Sweep) -> int:
    """Each resource left behind on its own line, then the summary naming the providers."""
    error = sweep.failure()
    if error is None:
        return 0
    for line in sweep.failed:
        _err(f"error: {line}")
    _err(f"error: {error}")
    return error.exit_code
