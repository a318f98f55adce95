"""The `torchrun` provider: several processes with torch.distributed on this machine.

It launches the job through PyTorch's own elastic launcher (``python -m torch.distributed.run``),
one process per GPU (``gpu_count`` of the plan; on a CPU-only machine that many CPU processes).
The training script picks its backend: NCCL when CUDA is available, gloo otherwise.
:func:`torchrun_argv` also builds the multi-node form (c10d rendezvous at the first node) that
remote providers put in their bootstrap scripts.
"""

from __future__ import annotations

import math
import shlex
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar

from gpucost.errors import InputError
from gpucost.executor.base import VERIFY_SNIPPET, JobSpec
from gpucost.executor.local import LocalProvider, python_argv

if TYPE_CHECKING:
    from gpucost.planfile import Plan

RDZV_PORT = 29400
REMOTE_RUN_DIR = "/var/lib/gpucost/run"


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


def remote_script(plan: Plan, run_id: str, *, on_exit: str, rendezvous: Sequence[str] = (),
                  log_path: str = "/var/log/gpucost-train.log") -> str:
    """The bootstrap a remote machine runs at boot: verify the GPU with a real matmul, resume
    from the newest S3 checkpoint, run the job through torchrun under a hard ``timeout``, and
    run ``on_exit`` (shut down, stop itself) whatever happened. ``rendezvous`` lines must set
    ``GPUCOST_RDZV`` (host:port of the first node) for multi-node plans."""
    o, ck = plan.offer, plan.checkpoint
    multi = o.nodes > 1
    argv = torchrun_argv(plan.job.command, nproc_per_node=max(1, round(o.gpu_count)),
                         nnodes=o.nodes, rdzv_endpoint="RDZV_PLACEHOLDER" if multi else "",
                         run_id=run_id, python="python3")
    command = shlex.join(argv).replace("RDZV_PLACEHOLDER", '"$GPUCOST_RDZV"')
    env = {"GPUCOST_RUN_ID": run_id, "GPUCOST_TOKEN": f"gpucost-{run_id}",
           "GPUCOST_RUN_DIR": REMOTE_RUN_DIR, "GPUCOST_CHECKPOINT_DIR": f"{REMOTE_RUN_DIR}/ckpt"}
    if ck.enabled:
        env.update(GPUCOST_CHECKPOINT_TARGET=ck.target, GPUCOST_CHECKPOINT_NAMESPACE=plan.job.name,
                   GPUCOST_CHECKPOINT_EVERY=f"{ck.every_epochs or 1:g}")
    lines = [
        "#!/bin/bash",
        f"# gpucost bootstrap for run {run_id}: verify the GPU, run the job, then: {on_exit}",
        "set -u",
        f"exec >>{shlex.quote(log_path)} 2>&1",
        f"trap {shlex.quote(on_exit)} EXIT  # the machine is released whatever happens",
        *(f"export {k}={shlex.quote(v)}" for k, v in env.items()),
        'mkdir -p "$GPUCOST_CHECKPOINT_DIR"',
        "python3 - <<'GPUCOST_VERIFY' || exit 1",
        VERIFY_SNIPPET.rstrip("\n"),
        "GPUCOST_VERIFY",
        *(rendezvous if multi else ()),
    ]
    if ck.enabled and ck.resume and ck.target.startswith("s3://"):
        lines.append("export GPUCOST_RESUME_FROM=$(python3 -c 'import pathlib; from gpucost."
                     "executor.checkpoints import CheckpointStore as S; p = S.from_env()."
                     f"fetch_latest(pathlib.Path(\"{REMOTE_RUN_DIR}\")); print(p or \"\")')")
    lines += [
        f"cd {shlex.quote(plan.job.workdir)} 2>/dev/null || true",
        f"timeout --signal=TERM --kill-after=60 {math.ceil(plan.safety.timeout_hours * 3600)} "
        f"{command}",
    ]
    return "\n".join(lines) + "\n"
