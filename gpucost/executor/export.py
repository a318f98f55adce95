"""Export a plan as a SkyPilot task YAML (``gpucost plan --export skypilot``).

For users who launch through SkyPilot: the task pins the plan's cloud, region, instance type,
accelerators, node count and market, runs the job through torchrun across SkyPilot's nodes under
the plan's hard timeout, and asks SkyPilot to autostop (or tear down, per the idle policy) when
the cluster goes idle. The budget cap cannot be expressed in a task: the YAML says so in a comment.

The YAML is written without a YAML library: every scalar is emitted as a JSON string or number,
which YAML reads unchanged.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from pathlib import Path
from typing import Any

from gpucost.errors import InputError
from gpucost.executor.base import VERIFY_SNIPPET
from gpucost.executor.torchrun import script_args
from gpucost.plan import Plan

# gpucost provider name -> SkyPilot cloud name
CLOUDS = {"aws": "aws", "gcp": "gcp", "azure": "azure", "lambda": "lambda", "runpod": "runpod",
          "vast": "vast", "oci": "oci", "paperspace": "paperspace", "fluidstack": "fluidstack",
          "cudo": "cudo", "nebius": "nebius", "do": "do"}

# Catalog names whose SkyPilot accelerator name is not derived by the rule in skypilot_gpu().
_SKYPILOT_GPU = {"A100 SXM4 80GB": "A100-80GB", "A100 PCIe 80GB": "A100-80GB",
                 "V100 SXM2 32GB": "V100-32GB", "RTX A6000": "A6000", "RTX A5000": "A5000",
                 "RTX A4000": "A4000", "RTX 6000 Ada": "RTX6000-Ada"}


def skypilot_gpu(name: str) -> str:
    """SkyPilot's accelerator name for a catalog GPU name: "H100 SXM5 80GB" -> "H100"."""
    if name in _SKYPILOT_GPU:
        return _SKYPILOT_GPU[name]
    if name.startswith("RTX "):
        return name.replace(" ", "")  # RTX 4090 -> RTX4090
    return re.split(r"[ -]", name, maxsplit=1)[0]


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    return json.dumps(str(value))


def _block(text: str, indent: str = "  ") -> str:
    return "|\n" + "".join(f"{indent}{line}\n" if line else "\n" for line in text.splitlines())


def export_skypilot(plan: Plan, plan_path: str | Path | None = None) -> str:
    """The plan as a SkyPilot task YAML string."""
    o, safety = plan.offer, plan.safety
    cloud = CLOUDS.get(o.provider)
    if cloud is None:
        raise InputError(f"SkyPilot cannot launch on provider {o.provider!r}",
                         hint="export a plan for a cloud SkyPilot supports: "
                              + ", ".join(sorted(CLOUDS)))
    gpus = max(1, round(o.gpu_count))
    resources: dict[str, Any] = {"cloud": cloud, "accelerators": f"{skypilot_gpu(o.gpu)}:{gpus}",
                                 "use_spot": o.market == "spot"}
    if o.region:
        resources["region"] = o.region
    if o.zone:
        resources["zone"] = o.zone
    if o.instance_type and o.provider not in ("vast", "runpod"):  # these name offers, not types
        resources["instance_type"] = o.instance_type
    if plan.disk.size_gb > 0:
        resources["disk_size"] = math.ceil(plan.disk.size_gb)
    resources["autostop"] = {"idle_minutes": 10, "down": plan.idle.policy == "destroy"}

    envs = {"GPUCOST_RUN_ID": plan.job.name}
    ck = plan.checkpoint
    if ck.enabled:
        envs.update(GPUCOST_CHECKPOINT_TARGET=ck.target, GPUCOST_CHECKPOINT_NAMESPACE=plan.job.name,
                    GPUCOST_CHECKPOINT_EVERY=f"{ck.every_epochs or 1:g}")
    # torchrun across SkyPilot's nodes: the first IP in SKYPILOT_NODE_IPS is the rendezvous.
    torchrun = ("python3 -m torch.distributed.run "
                '--nnodes="$SKYPILOT_NUM_NODES" --node-rank="$SKYPILOT_NODE_RANK" '
                '--nproc-per-node="$SKYPILOT_NUM_GPUS_PER_NODE" '
                '--master-addr="$(echo "$SKYPILOT_NODE_IPS" | head -n1)" --master-port=8008 '
                + shlex.join(script_args(plan.job.command)))
    run = "\n".join([
        "set -e",
        "python3 - <<'GPUCOST_VERIFY'",
        VERIFY_SNIPPET.rstrip("\n"),
        "GPUCOST_VERIFY",
        f"timeout --signal=TERM --kill-after=60 {math.ceil(safety.timeout_hours * 3600)} "
        + torchrun,
    ])
    lines = [
        f"# SkyPilot task exported by gpucost from {plan_path or 'a plan'}",
        f"# estimate: {plan.estimate.cost_usd:.2f} USD over {plan.estimate.hours:.3g} h at "
        f"{o.price_hr:g} USD/h per node ({o.price_source or 'price source not given'})",
        f"# budget cap {safety.budget_cap_usd:.2f} USD is NOT enforced by SkyPilot; the "
        f"{safety.timeout_hours:g} h timeout is, by `timeout` in run",
        f"name: {_scalar(plan.job.name)}",
    ]
    # SkyPilot syncs a local workdir to every node; a remote path in the plan is not one.
    if plan_path is not None and plan.workdir(plan_path).is_dir():
        lines.append(f"workdir: {_scalar(plan.workdir(plan_path))}")
    lines += [f"num_nodes: {o.nodes}", "resources:"]
    for key, value in resources.items():
        if isinstance(value, dict):
            lines.append(f"  {key}:")
            lines += [f"    {k}: {_scalar(v)}" for k, v in value.items()]
        else:
            lines.append(f"  {key}: {_scalar(value)}")
    lines.append("envs:")
    lines += [f"  {k}: {_scalar(v)}" for k, v in envs.items()]
    lines.append("run: " + _block(run).rstrip("\n"))
    return "\n".join(lines) + "\n"
