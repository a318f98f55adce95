"""The `torchrun` provider: several processes with torch.distributed on this machine.

It launches the job through PyTorch's own elastic launcher (``python -m torch.distributed.run``),
one process per GPU (``gpu_count`` of the plan; on a CPU-only machine that many CPU processes).
The training script picks its backend: NCCL when CUDA is available, gloo otherwise.
:func:`torchrun_argv` also builds the multi-node form (c10d rendezvous at the first node) that
remote providers put in their bootstrap scripts.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import ClassVar

from gpucost.errors import InputError
from gpucost.executor.base import JobSpec
from gpucost.executor.local import LocalProvider, python_argv

RDZV_PORT = 29400


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


def torchrun_argv(argv: Sequence[str], *, nproc_per_node: int, nnodes: int = 1,
                  rdzv_endpoint: str = "", run_id: str = "gpucost",
                  python: str = sys.executable) -> list[str]:
    """``python -m torch.distributed.run ...`` for one node or, with an endpoint, several."""
    if nproc_per_node < 1 or nnodes < 1:
        raise InputError("torchrun needs at least one process on at least one node")
    cmd = [python, "-m", "torch.distributed.run", f"--nproc-per-node={nproc_per_node}"]
    if nnodes == 1:
        cmd.append("--standalone")
    else:
        if not rdzv_endpoint:
            raise InputError("a multi-node torchrun needs a rendezvous endpoint (host:port)")
        cmd += [f"--nnodes={nnodes}", "--rdzv-backend=c10d", f"--rdzv-endpoint={rdzv_endpoint}",
                f"--rdzv-id={run_id}", "--max-restarts=0"]
    return [*cmd, *script_args(argv)]


class TorchrunProvider(LocalProvider):
    name = "torchrun"
    unsupported: ClassVar[Mapping[str, str]] = {
        **LocalProvider.unsupported,
        "multi-node": "torchrun here starts processes on this machine only; remote providers "
                      "use the same launcher with a c10d rendezvous across nodes",
    }

    def job_argv(self, job: JobSpec) -> list[str]:
        return torchrun_argv(job.argv, nproc_per_node=job.nproc_per_node)
