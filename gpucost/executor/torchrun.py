"""The `torchrun` provider: several processes with torch.distributed on this machine.

It launches the job through PyTorch's own elastic launcher (``python -m torch.distributed.run``),
one process per GPU (``gpu_count`` of the plan; on a CPU-only machine that many CPU processes).
The training script picks its backend: NCCL when CUDA is available, gloo otherwise. (Across
nodes the SkyPilot task runs torchrun with SkyPilot's node variables: see ``skypilot_task``.)
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import ClassVar

from gpucost.errors import InputError
from gpucost.executor.base import JobSpec
from gpucost.executor.local import LocalProvider, python_argv


def script_args(argv: Sequence[str]) -> list[str]:
    """The plan's command without its interpreter: what torchrun takes after its options."""
    full = python_argv(argv)
    if full[0] != sys.executable:
        raise InputError(f"torchrun runs Python scripts; the job command starts with {argv[0]!r}",
                         hint='write [job] command as ["python", "train.py", ...]')
    if len(full) < 2:
        raise InputError("the job command names no script", hint='add the script: ["python", '
                         '"train.py"]')
    return full[1:]


def torchrun_argv(argv: Sequence[str], *, nproc_per_node: int) -> list[str]:
    """``python -m torch.distributed.run --standalone ...``: one node, this one."""
    if nproc_per_node < 1:
        raise InputError("torchrun needs at least one process")
    return [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc_per_node}",
            "--standalone", *script_args(argv)]


class TorchrunProvider(LocalProvider):
    name = "torchrun"
    unsupported: ClassVar[Mapping[str, str]] = {
        **LocalProvider.unsupported,
        "multi-node": "torchrun here starts processes on this machine only; SkyPilot runs "
                      "multi-node plans in the cloud",
    }

    def job_argv(self, job: JobSpec) -> list[str]:
        return torchrun_argv(job.argv, nproc_per_node=job.nproc_per_node)
