"""The `local` provider: the job runs as a supervised process group on this machine.

"Provisioning" this machine creates nothing; the job process is the resource the ledger tracks.
It runs in its own session (process group), so stopping it stops every child it started, and it
carries ``GPUCOST_TOKEN`` in its environment, so a launcher killed before it could record the pid
leaves a process that :meth:`LocalProvider.find` still recognises (by reading /proc/<pid>/environ).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from gpucost.errors import ExecutorError, InputError
from gpucost.executor.base import (
    VERIFY_SNIPPET,
    JobSpec,
    Provider,
    ProvisionRequest,
    Resource,
    ResourceState,
)
from gpucost.executor.ledger import process_start

STOP_GRACE_S = 10.0  # SIGTERM, then SIGKILL after this many seconds
VERIFY_TIMEOUT_S = 300.0


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
        token = resources[0].token if resources else ""
        env = {**os.environ, **job.env, "GPUCOST_TOKEN": token, "PYTHONUNBUFFERED": "1"}
        job.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(job.log_path, "ab") as log:
            try:
                proc = subprocess.Popen(argv, cwd=job.workdir, env=env, stdout=log,
                                        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        start_new_session=True)
            except OSError as err:
                raise ExecutorError(f"cannot start {argv[0]!r} in {job.workdir}: {err}",
                                    hint="check [job] command and workdir in the plan") from err
        self._procs[proc.pid] = proc
        return Resource(provider=self.name, resource_id=str(proc.pid), token=token,
                        kind="process", region="local",
                        meta={"start": process_start(proc.pid) or "", "argv": argv})

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
        if resource.kind != "process" or not self._alive(resource):
            return
        pid = int(resource.resource_id)
        for sig, grace in ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(pid, sig)
            except ProcessLookupError:
                break
            except PermissionError:  # not a group leader we own: signal the process itself
                os.kill(pid, sig)
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline and self._alive(resource):
                time.sleep(0.05)
            if not self._alive(resource):
                break
        proc = self._procs.get(pid)
        if proc is not None:
            proc.wait(timeout=5.0)

    def find(self, token: str) -> list[Resource]:
        """Process-group leaders on this machine started for ``token``."""
        if not token:
            return []
        needle = f"GPUCOST_TOKEN={token}".encode()
        found = []
        for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else ():
            if not entry.name.isdigit():
                continue
            pid = int(entry.name)
            try:
                environ = (entry / "environ").read_bytes()
                is_leader = os.getpgid(pid) == pid
            except (OSError, ProcessLookupError):
                continue
            if is_leader and needle in environ.split(b"\0"):
                start = process_start(pid)
                if start is not None:
                    found.append(Resource(provider=self.name, resource_id=str(pid), token=token,
                                          kind="process", region="local",
                                          meta={"start": start}))
        return found
