"""The one provider interface the executor drives: provision, wait, run, status, stop, destroy.

A provider turns a :class:`ProvisionRequest` into :class:`Resource` handles (a process on this
machine, a SkyPilot cluster or managed job). Every request carries a ``token`` that the provider
attaches to what it creates (a tag, a label, an environment variable), so that
:meth:`Provider.find` can recover a resource whose id never reached the ledger because the
launcher died between the provider's answer and the ledger write.

Each provider says in words what it does not support (:attr:`Provider.unsupported`), so the
front ends can tell a user why a command does nothing rather than pretend.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

if TYPE_CHECKING:
    from gpucost.planfile import Plan

# Lifecycle of one resource as the ledger and `gpucost ps` show it.
ResourceState = Literal["requested", "pending", "running", "stopped", "exited", "destroyed",
                        "failed", "unknown"]
LIVE_STATES: tuple[str, ...] = ("requested", "pending", "running", "stopped", "unknown")


@dataclass(frozen=True)
class ProvisionRequest:
    """What to create for one run (one entry per node count, not per node)."""

    run_id: str
    token: str  # idempotency/recovery token attached to everything created
    instance_type: str
    gpu_count: int  # per node
    nodes: int = 1
    market: Literal["on-demand", "spot"] = "on-demand"
    region: str = ""
    zone: str = ""
    price_hr: float = 0.0  # USD/h per node
    disk_gb: float = 0.0


@dataclass(frozen=True)
class Resource:
    """A handle to something that costs money until destroyed."""

    provider: str
    resource_id: str
    token: str
    region: str = ""
    kind: str = "instance"
    price_hr: float = 0.0  # USD/h
    meta: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class JobSpec:
    """The job to run on provisioned resources."""

    argv: Sequence[str]
    workdir: Path
    env: Mapping[str, str]
    log_path: Path
    nproc_per_node: int = 1
    # Wall-clock deadlines (unix time) the job must not outlive: the hard timeout, and when the
    # budget cap is reached at the run's price. The launcher enforces them too; an engine that
    # can enforce them without the launcher (the local guard, `timeout` in a SkyPilot task)
    # keeps them when the launcher dies.
    timeout_at: float | None = None
    budget_at: float | None = None
    # Descriptors the job's supervisor must hold open for the run's life (the run lock).
    inherit_fds: Sequence[int] = ()


class Provider(abc.ABC):
    """One place to rent compute. Methods raise ProviderError subclasses on failure."""

    name: str = ""
    #: operation -> why this provider cannot do it, in words for users
    unsupported: ClassVar[Mapping[str, str]] = {}
    #: the job runs on this machine (the launcher resumes it); a SkyPilot task resumes itself
    runs_locally: ClassVar[bool] = False
    #: no guard of ours runs the job (SkyPilot's nodes): a watchdog process on this machine
    #: enforces the hard timeout and the budget cap when the launcher dies
    needs_watchdog: ClassVar[bool] = False

    def config(self) -> dict[str, Any]:
        """What `gpucost cleanup` needs to reach the same provider later (no secrets)."""
        return {}

    def bind(self, plan: Plan, plan_path: Path, run_id: str,  # noqa: B027 (optional hook)
             log_path: Path) -> None:
        """Told once which run it serves, before anything else (an engine that submits the
        whole job, such as SkyPilot, builds it here)."""

    def measure_for_probe(self) -> None:  # noqa: B027 (optional hook)
        """Told, after :meth:`bind`, that the run is a probe: its launcher records one
        measurement at the probe's end, so the provider records none of its own."""

    def check_ready(self) -> None:  # noqa: B027 (optional hook)
        """Raise InputError when the engine cannot run here (its SDK is not installed), before
        the launch writes anything."""

    def dry_run_lines(self) -> list[str]:
        """What the engine would submit, for ``launch --dry-run``; nothing by default."""
        return []

    @abc.abstractmethod
    def provision(self, request: ProvisionRequest) -> list[Resource]:
        """Create the resources; returns once the provider has accepted the request."""

    @abc.abstractmethod
    def wait(self, resources: Sequence[Resource], timeout_s: float) -> None:
        """Block until every resource is running or raise ProviderError after ``timeout_s``."""

    @abc.abstractmethod
    def run(self, resources: Sequence[Resource], job: JobSpec) -> Resource:
        """Start the job; returns a handle whose :meth:`status` reports its progress."""

    @abc.abstractmethod
    def status(self, resource: Resource) -> ResourceState:
        """The resource's state as the provider sees it now."""

    @abc.abstractmethod
    def stop(self, resource: Resource) -> None:
        """Stop billing for compute while keeping the disk (if the provider can)."""

    @abc.abstractmethod
    def destroy(self, resource: Resource) -> None:
        """Release the resource for good. Destroying something already gone is not an error."""

    def verify_hardware(self, resources: Sequence[Resource],
                        workdir: Path) -> dict[str, Any] | None:
        """Run :data:`VERIFY_SNIPPET` where the job will run; None when the task does it there."""
        return None

    def exit_code(self, resource: Resource) -> int | None:
        """The job's exit code once it has ended, when the provider can tell."""
        return None

    def find(self, token: str) -> list[Resource]:
        """Resources carrying ``token`` that are not destroyed (recovery after a crash)."""
        return []

    def supports(self, operation: str) -> bool:
        return operation not in self.unsupported

    def status_fields(self) -> dict[str, Any]:
        """What only the provider measures, for status.json (SkyPilot: the log's throughput)."""
        return {}

    def stop_reason(self) -> str | None:
        """Why the run must stop now, by what only the provider measures (None: it need not)."""
        return None


# Run on arrival, before the job: a real matrix multiply on the GPU, so that a torch wheel built
# for another CUDA architecture fails here (it reports CUDA available and dies at the first
# kernel) rather than an hour into the run. Prints one JSON line.
VERIFY_SNIPPET = """\
import json, math, torch
out = {"torch": torch.__version__, "cuda_available": torch.cuda.is_available()}
if torch.cuda.is_available():
    a = torch.randn(2048, 2048, device="cuda")
    s = float((a @ a).abs().sum().item())
    torch.cuda.synchronize()
    out.update(device=torch.cuda.get_device_name(0), device_count=torch.cuda.device_count(),
               capability="%d.%d" % torch.cuda.get_device_capability(0), checksum=s)
else:
    a = torch.randn(256, 256)
    out.update(device="cpu", device_count=0, checksum=float((a @ a).abs().sum().item()))
assert math.isfinite(out["checksum"]), "matmul returned a non-finite result"
print(json.dumps(out))
"""
