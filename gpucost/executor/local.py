"""The `local` provider: the job runs on this machine under its guard.

"Provisioning" this machine creates nothing; the job's guard (:mod:`gpucost.executor.guard`) is
the resource the ledger tracks. The guard runs in its own session, so it outlives the launcher
and enforces the hard timeout and the budget cap by itself; it holds every process the job
starts, in whatever session, and ends them all when it is stopped. Every one of them carries
``GPUCOST_TOKEN`` in its environment, so a guard killed outright, or a launcher killed before it
could record the pid, still leaves processes that :meth:`LocalProvider.find` and
:meth:`LocalProvider.destroy` reach (by reading /proc/<pid>/environ); :meth:`destroy` also ends
what the guard wrote in the run's process record, which a process started with a clean
environment does not escape (:mod:`gpucost.executor.containment`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from gpucost._optional import require_installed
from gpucost.errors import ExecutorError, InputError
from gpucost.executor.base import (
    VERIFY_SNIPPET,
    JobSpec,
    Provider,
    ProvisionRequest,
    Resource,
    ResourceState,
)
from gpucost.executor.containment import end_processes, leftovers, processes_by_token, record_path
from gpucost.executor.guard import GUARD_EXIT_S, KILL_WAIT_S, STOP_GRACE_S
from gpucost.executor.ledger import process_start

VERIFY_TIMEOUT_S = 300.0


def token_processes(token: str) -> list[int]:
    """Live processes on this machine started for ``token`` by this state folder's runs (from
    their environment: a run of the same id under another GPUCOST_HOME is not ours to end)."""
    return processes_by_token().get(token, []) if token else []


def _end_processes(token: str, record: Path | None) -> None:
    """SIGTERM what carries ``token`` or is in the run's process ``record``, SIGKILL what is
    left after the grace (a guard killed outright leaves its job's processes to this)."""
    end_processes(lambda: leftovers(token, record), STOP_GRACE_S, KILL_WAIT_S)


def _record_of(resource: Resource) -> Path | None:
    record = resource.meta.get("record")
    return Path(record) if isinstance(record, str) and record else None


def python_argv(argv: Sequence[str]) -> list[str]:
    """Run a plan's ``python ...`` command with this interpreter (the one gpucost runs in)."""
    if not argv:
        raise InputError("the job command is empty", hint='set [job] command = ["python", ...]')
    head = Path(argv[0]).name
    if head in ("python", "python3") or head.startswith("python3."):
        return [sys.executable, *argv[1:]]
    return list(argv)


class LocalProvider(Provider):
    name = "local"
    unsupported: ClassVar[Mapping[str, str]] = {
        "spot": "this machine has no spot market",
        "multi-node": "the local provider runs on this one machine; use torchrun for several "
                      "processes here, or a cloud provider for several nodes",
        "stop": "stopping a local run ends the job; there is no machine to keep",
    }

    runs_locally = True

    def __init__(self) -> None:
        self._procs: dict[int, subprocess.Popen[bytes]] = {}

    def provision(self, request: ProvisionRequest) -> list[Resource]:
        if request.nodes != 1:
            raise InputError(f"{self.name} runs on one machine, the plan asks for "
                             f"{request.nodes} nodes", hint=self.unsupported["multi-node"])
        return [Resource(provider=self.name, resource_id=f"host:{socket.gethostname()}",
                         token=request.token, kind="host", region="local")]

    def check_ready(self) -> None:
        # The on-arrival matmul (and torchrun) import torch in a child process of this Python:
        # without it that child dies and the run ends as failed, which reads like a bug.
        require_installed("torch", needed_for=f"launching on the {self.name} provider")

    def wait(self, resources: Sequence[Resource], timeout_s: float) -> None:
        return None  # this machine is already up

    def job_argv(self, job: JobSpec) -> list[str]:
        return python_argv(job.argv)

    def verify_hardware(self, resources: Sequence[Resource], workdir: Path) -> dict[str, Any]:
        try:
            done = subprocess.run([sys.executable, "-c", VERIFY_SNIPPET], cwd=workdir,
                                  capture_output=True, text=True, timeout=VERIFY_TIMEOUT_S,
                                  check=False)
        except subprocess.TimeoutExpired:
            raise ExecutorError(f"the on-arrival matmul did not finish in {VERIFY_TIMEOUT_S:g} s",
                                hint="the device is hung or far slower than planned") from None
        except OSError as err:
            raise ExecutorError(f"cannot run the on-arrival matmul in {workdir}: {err}") from err
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise ExecutorError(f"the on-arrival matmul failed: {last}",
                                hint="a torch wheel built for another CUDA architecture fails "
                                     "here; install one that supports this GPU")
        result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        return result

    def run(self, resources: Sequence[Resource], job: JobSpec) -> Resource:
        argv = self.job_argv(job)
        if shutil.which(argv[0], path=os.environ.get("PATH")) is None and not (
                job.workdir / argv[0]).is_file():
            raise ExecutorError(f"cannot start {argv[0]!r} in {job.workdir}: no such program",
                                hint="check [job] command and workdir in the plan")
        guard = [sys.executable, "-m", "gpucost.executor.guard"]
        if job.timeout_at is not None:
            guard.append(f"--timeout-at={job.timeout_at!r}")
        if job.budget_at is not None:
            guard.append(f"--budget-at={job.budget_at!r}")
        token = resources[0].token if resources else ""
        env = {**os.environ, **job.env, "GPUCOST_TOKEN": token, "PYTHONUNBUFFERED": "1"}
        job.log_path.parent.mkdir(parents=True, exist_ok=True)
        # O_NOFOLLOW: a train.log link planted in a reused run folder is not written through.
        try:
            fd = os.open(job.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW,
                         0o644)
        except OSError as err:
            raise ExecutorError(f"cannot open {job.log_path}: {err.strerror}",
                                hint="remove it if it is a link; the run writes its log there "
                                     "itself") from None
        with open(fd, "ab") as log:
            try:
                proc = subprocess.Popen([*guard, "--", *argv], cwd=job.workdir, env=env,
                                        stdout=log, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, start_new_session=True,
                                        pass_fds=tuple(job.inherit_fds))
            except OSError as err:
                raise ExecutorError(f"cannot start {argv[0]!r} in {job.workdir}: {err}",
                                    hint="check [job] command and workdir in the plan") from err
        self._procs[proc.pid] = proc
        run_dir = job.env.get("GPUCOST_RUN_DIR")
        return Resource(provider=self.name, resource_id=str(proc.pid), token=token,
                        kind="process", region="local",
                        meta={"start": process_start(proc.pid) or "", "argv": argv,
                              "record": str(record_path(run_dir)) if run_dir else ""})

    def _alive(self, resource: Resource) -> bool:
        pid = int(resource.resource_id)
        proc = self._procs.get(pid)
        if proc is not None:
            return proc.poll() is None
        start = resource.meta.get("start")
        return process_start(pid) is not None and (not start or process_start(pid) == start)

    def status(self, resource: Resource) -> ResourceState:
        if resource.kind == "host":
            return "running"
        return "running" if self._alive(resource) else "exited"

    def exit_code(self, resource: Resource) -> int | None:
        proc = self._procs.get(int(resource.resource_id)) if resource.kind == "process" else None
        return None if proc is None else proc.poll()

    def stop(self, resource: Resource) -> None:
        self.destroy(resource)

    def destroy(self, resource: Resource) -> None:
        """Stop the guard (it ends the job's whole tree within its grace), then end whatever
        still carries the run's token or is in its process record (everything, when the guard
        itself was killed)."""
        if resource.kind != "process":
            return
        pid = int(resource.resource_id)
        if self._alive(resource):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + GUARD_EXIT_S
            while time.monotonic() < deadline and self._alive(resource):
                time.sleep(0.05)
            if self._alive(resource):
                os.kill(pid, signal.SIGKILL)
        proc = self._procs.get(pid)
        if proc is not None:
            proc.wait(timeout=KILL_WAIT_S)
        _end_processes(resource.token, _record_of(resource))

    def find(self, token: str) -> list[Resource]:
        """The processes started for ``token`` whose parent was not (the guard, or, when the
        guard is gone, what it left behind)."""
        pids = token_processes(token)
        found = []
        for pid in pids:
            try:
                parent = os.getppid() if pid == os.getpid() else _parent(pid)
            except OSError:
                continue
            start = process_start(pid)
            if parent not in pids and start is not None:
                found.append(Resource(provider=self.name, resource_id=str(pid), token=token,
                                      kind="process", region="local", meta={"start": start}))
        return found


def _parent(pid: int) -> int:
    text = Path(f"/proc/{pid}/stat").read_text()
    return int(text[text.rfind(")") + 2:].split()[1])
