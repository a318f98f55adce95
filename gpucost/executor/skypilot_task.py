"""A plan as a SkyPilot task: what the ``skypilot`` engine submits and ``--export skypilot`` writes.

The task pins the plan's offer (``infra: cloud/region/zone``, instance type, accelerators, spot or
not, disk, node count), syncs the job's workdir, mounts an S3 checkpoint target, installs the
workdir's requirements in ``setup``, and in ``run`` checks the GPU with a real matmul, then runs
the command under torchrun with SkyPilot's node variables (``SKYPILOT_NODE_IPS``,
``SKYPILOT_NODE_RANK``, ``SKYPILOT_NUM_NODES``, ``SKYPILOT_NUM_GPUS_PER_NODE``) and the plan's hard
timeout. On a managed (spot) job SkyPilot re-provisions after a preemption and runs ``run`` again:
the job resumes from the newest checkpoint in the mounted folder.

A marketplace plan (``[marketplace]``) asks for a machine like the planned one, not the one
found while planning: a plan pins its region but not the datacentre. Where the provider's
declaration (``gpucost.providers``, its ``SkyPilot``) says its offers are gone by launch, the
plan pins no instance type at all, only the accelerator in the spelling of SkyPilot's catalog
of that cloud, the region, the disk and spot or not; SkyPilot picks an instance type from its
own catalog and rents a live offer like it at launch. How each cloud spells GPUs and regions
is its declaration's; this module names no provider. What of the plan's search SkyPilot cannot
ask for is said in words (:func:`not_enforced`), in the task's header and in
``gpucost launch --dry-run``.

Pure data and text: nothing here imports ``sky`` (the planning path and ``--dry-run`` work
without SkyPilot installed). The YAML is written without a YAML library: every scalar is a JSON
string or number, which YAML reads unchanged.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpucost import providers
from gpucost.errors import InputError
from gpucost.executor import SKYPILOT_CLOUDS
from gpucost.executor.base import VERIFY_SNIPPET
from gpucost.executor.torchrun import script_args
from gpucost.format import usd_text
from gpucost.limits import node_limit
from gpucost.planfile import SKYPILOT_TASK_MARK, Plan
from gpucost.providers import SkyPilot
from gpucost.terminal import printable

# Catalog names whose SkyPilot accelerator name is not derived by the rule in skypilot_gpu().
_SKYPILOT_GPU = {"A100 SXM4 80GB": "A100-80GB", "A100 PCIe 80GB": "A100-80GB",
                 "V100 SXM2 32GB": "V100-32GB", "RTX A6000": "A6000", "RTX A5000": "A5000",
                 "RTX A4000": "A4000", "RTX 6000 Ada": "RTX6000-Ada"}

CHECKPOINT_MOUNT = "/gpucost/checkpoints"  # where an S3 checkpoint target appears on each node
REMOTE_RUN_DIR = "/tmp/gpucost-run"  # the job's progress files on the node
RDZV_PORT = 8008
IDLE_MINUTES = 10  # autostop/autodown after this long with no job (the plan's idle policy)
AWS_ZONE_ID = re.compile(r"[a-z]+\d+-az\d+")


def skypilot_gpu(name: str) -> str:
    """SkyPilot's accelerator name for a catalog GPU name: "H100 SXM5 80GB" -> "H100"."""
    if name in _SKYPILOT_GPU:
        return _SKYPILOT_GPU[name]
    if name.startswith("RTX "):
        return name.replace(" ", "")  # RTX 4090 -> RTX4090
    return re.split(r"[ -]", name, maxsplit=1)[0]


def _declared(provider: str) -> SkyPilot:
    """How SkyPilot knows ``provider`` (its defaults where SkyPilot does not launch on it)."""
    found = providers.find(provider)
    return found.skypilot if found is not None and found.skypilot is not None \
        else SkyPilot(provider)


def accelerator(plan: Plan) -> str:
    """The plan's GPU in the spelling of SkyPilot's catalog of the plan's cloud."""
    o = plan.offer
    spell = _declared(o.provider).accelerator
    return spell(o.gpu, o.instance_type) if spell is not None else skypilot_gpu(o.gpu)


def cloud_of(plan: Plan) -> str:
    cloud = plan.offer.provider
    if cloud not in SKYPILOT_CLOUDS:
        raise InputError(f"SkyPilot cannot launch on provider {cloud!r}",
                         hint="plan for a cloud SkyPilot supports: "
                              + ", ".join(sorted(SKYPILOT_CLOUDS)))
    if plan.offer.nodes > node_limit(cloud):
        raise InputError(f"SkyPilot launches no multi-node cluster on {cloud}, and this plan has "
                         f"{plan.offer.nodes} nodes",
                         hint="plan again with --max-nodes 1, or on another provider")
    return cloud


def _region(plan: Plan) -> str:
    """The region asked for: the offer's, or on a cloud whose regions name a country, the
    offer's when it lies in the country the plan's search asks for ("" where the plan has none,
    or its region is not in SkyPilot's spelling, as in a plan made from a provider's own price
    source: "US-Texas")."""
    o, search = plan.offer, plan.marketplace
    pattern = _declared(o.provider).region_country
    if pattern is None:
        return o.region
    country = search.region if search is not None else ""
    found = pattern.fullmatch(o.region)
    return o.region if found and country and found[1] == country else ""


def _mounts_s3(plan: Plan) -> bool:
    """An ``s3://`` checkpoint target is mounted on the nodes, where SkyPilot's cloud mounts
    object stores; elsewhere the job ships and fetches its checkpoints itself."""
    ck = plan.checkpoint
    return (ck.enabled and ck.target.startswith("s3://")
            and _declared(plan.offer.provider).mounts_object_store)


def not_enforced(plan: Plan) -> list[str]:
    """What of the plan SkyPilot does not enforce for it, one sentence each (empty for a plan
    that names its machine)."""
    o, search, ck = plan.offer, plan.marketplace, plan.checkpoint
    sky = _declared(o.provider)
    name = sky.label or o.provider
    lines = []
    if not sky.pins_instance_type:
        region = _region(plan) if sky.region_country is not None else ""
        lines.append(
            f"{o.provider}: SkyPilot chooses the machine at launch, from its own {name} catalog "
            f"and {name}'s live offers: {accelerator(plan)}:{max(1, round(o.gpu_count))} "
            + (f"in region {region!r}" if region else "in any region")
            + f", at least {math.ceil(plan.disk.size_gb)} GB of disk"
            + (", interruptible" if o.market == "spot" else "")
            + f"; the planned offer was {o.instance_type or 'not named'}")
        own = sky.gpu_name(o.gpu, o.instance_type) if sky.gpu_name is not None else o.gpu
        if own.replace(" ", "") != accelerator(plan):
            lines.append(f"{o.provider}: {accelerator(plan)} is SkyPilot's {name} name, without "
                         f"the variant: any card {name} lists under it may come, not only the "
                         f"planned {o.gpu}")
        if region:
            lines.append(f"{o.provider}: SkyPilot's {name} provisioner searches offers by the "
                         f"region's last two letters ({region[-2:]}, the continent), so the "
                         f"country {search.region if search else ''} is not guaranteed")
        elif sky.region_country is not None and search is not None and search.region:
            lines.append(f"{o.provider}: the plan's country {search.region} is not asked for: "
                         f"its region {o.region!r} is not one of SkyPilot's {name} regions")
    if o.market == "spot" and sky.spot_is_bid:
        lines.append(f"{o.provider}: SkyPilot bids the offer's minimum bid; being outbid is a "
                     "preemption, which the managed job recovers from")
    if ck.enabled and ck.target.startswith("s3://") and not sky.mounts_object_store:
        lines.append(f"{o.provider}: SkyPilot mounts no object store on {name}: the job ships "
                     f"each checkpoint to {ck.target} itself through gpucost.report, and a "
                     f"recovered job fetches the newest from there, when gpucost[aws] is in "
                     f"the workdir's requirements.txt")
    if search is not None:
        cap = usd_text(plan.safety.budget_cap_usd)
        lines.append(f"{o.provider}: max {search.max_price_hr:g} USD/h is not enforced "
                     f"(SkyPilot rents the offer it finds); the budget cap {cap} still "
                     f"ends the run, counting spend at the plan's {o.price_hr:g} USD/h per node, "
                     f"not at the price of the machine rented")
        if search.min_reliability > 0:
            lines.append(f"{o.provider}: host reliability >= {search.min_reliability:g} is not "
                         f"enforced (SkyPilot's search has no reliability filter)")
        if search.min_inet_down_mbps > 0:
            lines.append(f"{o.provider}: download bandwidth >= {search.min_inet_down_mbps:g} "
                         f"Mbit/s is not enforced (SkyPilot's search has no bandwidth filter)")
    return lines


def managed(plan: Plan) -> bool:
    """Spot plans run as managed jobs, which SkyPilot recovers after a preemption."""
    return plan.offer.market == "spot"


def _spot(plan: Plan, market: str | None) -> bool:
    return (market or plan.offer.market) == "spot"


def _infra(cloud: str, region: str, zone: str) -> dict[str, str]:
    """``infra: cloud/region/zone`` where the names fit SkyPilot's pattern; a marketplace region
    such as Vast's "Germany, DE, EU" goes in the separate ``region`` field. AWS catalogs give
    zone ids ("use2-az1"), which name a different zone in each account: those are left out."""
    if AWS_ZONE_ID.fullmatch(zone):
        zone = ""
    if not region:
        return {"infra": cloud}
    if re.fullmatch(r"[\w.-]+", region) and re.fullmatch(r"[\w.-]*", zone):
        return {"infra": "/".join(p for p in (cloud, region, zone) if p)}
    return {"cloud": cloud, "region": region, **({"zone": zone} if zone else {})}


def _run_script(plan: Plan, *, checkpoint_dir: str, fetch: bool) -> str:
    """Verify the GPU, find the newest checkpoint, run torchrun across SkyPilot's nodes."""
    torchrun = ("python3 -m torch.distributed.run "
                '--nnodes="$SKYPILOT_NUM_NODES" --node-rank="$SKYPILOT_NODE_RANK" '
                '--nproc-per-node="$SKYPILOT_NUM_GPUS_PER_NODE" '
                '--master-addr="$(echo "$SKYPILOT_NODE_IPS" | head -n1)" '
                f"--master-port={RDZV_PORT} " + shlex.join(script_args(plan.job.command)))
    lines = ["set -e", "python3 - <<'GPUCOST_VERIFY'", VERIFY_SNIPPET.rstrip("\n"),
             "GPUCOST_VERIFY", 'mkdir -p "$GPUCOST_CHECKPOINT_DIR" "$GPUCOST_RUN_DIR"']
    ck = plan.checkpoint
    if ck.enabled and ck.resume:
        # After a preemption the recovered job starts here again: resume from the newest.
        if fetch:  # not mounted: the newest readable one from the bucket (gpucost's own check)
            lines.append('GPUCOST_RESUME_FROM="$(python3 -c \'import os, pathlib; from gpucost.'
                         'executor.checkpoints import CheckpointStore as S; p = S.from_env().'
                         'fetch_latest(pathlib.Path(os.environ["GPUCOST_CHECKPOINT_DIR"])); '
                         'print(p or "")\' 2>/dev/null)" || true')
        else:
            lines.append(f'GPUCOST_RESUME_FROM="$(ls -1 {shlex.quote(checkpoint_dir)}/epoch-*.pt '
                         '2>/dev/null | sort | tail -n1)"')
        lines.append("export GPUCOST_RESUME_FROM")
    lines.append(f"timeout --signal=TERM --kill-after=60 "
                 f"{math.ceil(plan.safety.timeout_hours * 3600)} {torchrun}")
    return "\n".join(lines) + "\n"


def task_config(plan: Plan, plan_path: str | Path | None = None, *,
                run_id: str | None = None, market: str | None = None) -> dict[str, Any]:
    """The plan as a SkyPilot task config (what ``sky.Task.from_yaml_config`` reads), in the
    plan's market or ``market`` (on-demand after a spot plan's fallback)."""
    spot = _spot(plan, market)
    o, ck = plan.offer, plan.checkpoint
    cloud = cloud_of(plan)
    gpus = max(1, round(o.gpu_count))
    # A marketplace plan asks for a machine like the planned one in its region, not that one
    # datacentre (its [marketplace] search says what is alike).
    zone = "" if plan.marketplace is not None else o.zone
    region = _region(plan)
    resources: dict[str, Any] = {**_infra(cloud, region, zone),
                                 "accelerators": f"{accelerator(plan)}:{gpus}",
                                 "use_spot": spot}
    if o.instance_type and _declared(cloud).pins_instance_type:  # else SkyPilot picks one
        resources["instance_type"] = o.instance_type
    disk_gb = max(plan.disk.size_gb, plan.marketplace.min_disk_gb if plan.marketplace else 0)
    if disk_gb > 0:
        resources["disk_size"] = math.ceil(disk_gb)
    if spot:
        # Preemptions are recovered (re-provisioned, run again); errors of the job itself are not.
        resources["job_recovery"] = {"strategy": "FAILOVER", "max_restarts_on_errors": 0}
    else:
        resources["autostop"] = {"idle_minutes": IDLE_MINUTES,
                                 "down": plan.idle.policy == "destroy"}
    run_id = run_id or plan.job.name
    envs = {"GPUCOST_RUN_ID": run_id, "GPUCOST_RUN_DIR": REMOTE_RUN_DIR,
            "GPUCOST_CHECKPOINT_DIR": f"{REMOTE_RUN_DIR}/checkpoints",
            "GPUCOST_REPORT_TO_LOG": "1"}  # reports come home as log markers (executor.markers)
    config: dict[str, Any] = {"name": plan.job.name}
    # SkyPilot syncs a local workdir to every node; a path that is not a folder here is not one.
    workdir = plan.workdir(plan_path) if plan_path is not None else None
    if workdir is not None and workdir.is_dir():
        config["workdir"] = str(workdir)
    config["num_nodes"] = o.nodes
    config["resources"] = resources
    if ck.enabled:
        envs.update(GPUCOST_CHECKPOINT_TARGET=ck.target, GPUCOST_CHECKPOINT_NAMESPACE=plan.job.name,
                    GPUCOST_CHECKPOINT_EVERY=f"{ck.every_epochs or 1:g}")
        if _mounts_s3(plan):
            # Written through to the bucket as the job saves; a recovered job reads them back.
            config["file_mounts"] = {CHECKPOINT_MOUNT: {"source": ck.target,
                                                        "mode": "MOUNT_CACHED"}}
            envs["GPUCOST_CHECKPOINT_DIR"] = f"{CHECKPOINT_MOUNT}/{plan.job.name}"
    config["envs"] = envs
    torch = plan.workload.torch_version
    config["setup"] = "\n".join([
        "set -e",
        "if [ -f requirements.txt ]; then python3 -m pip install -r requirements.txt; fi",
        "python3 -c 'import torch' 2>/dev/null || python3 -m pip install "
        + shlex.quote(f"torch=={torch.split('+')[0]}" if torch else "torch"),
    ]) + "\n"
    config["run"] = _run_script(plan, checkpoint_dir=envs["GPUCOST_CHECKPOINT_DIR"],
                                fetch=ck.target.startswith("s3://") and not _mounts_s3(plan))
    return config


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    return json.dumps(str(value))


def _yaml(value: Any, indent: str) -> list[str]:
    lines = []
    for key, item in value.items():
        if isinstance(item, Mapping):
            lines.append(f"{indent}{_scalar(key) if '/' in key else key}:")
            lines += _yaml(item, indent + "  ")
        elif isinstance(item, str) and "\n" in item:
            lines.append(f"{indent}{key}: |")
            lines += [f"{indent}  {line}" if line else "" for line in item.splitlines()]
        else:
            lines.append(f"{indent}{key}: {_scalar(item)}")
    return lines


def task_yaml(plan: Plan, plan_path: str | Path | None = None, *,
              run_id: str | None = None) -> str:
    """The task as YAML, with a header saying what SkyPilot enforces and what gpucost does."""
    o, safety = plan.offer, plan.safety
    header = [
        f"{SKYPILOT_TASK_MARK} from {plan_path or 'a plan'}",
        f"# estimate: {plan.estimate.cost_usd:.2f} USD over {plan.estimate.hours:.3g} h at "
        f"{o.price_hr:g} USD/h per node ({o.price_source or 'price source not given'})",
        f"# the {safety.timeout_hours:g} h timeout is enforced by `timeout` in run; the budget cap "
        f"{safety.budget_cap_usd:.2f} USD only by `gpucost launch` (not by `sky launch` of this "
        "file)",
    ]
    if managed(plan):
        header.append("# spot: submit as a managed job (`sky jobs launch`), which recovers from "
                      "preemptions")
    header += [f"# {line}" for line in not_enforced(plan)]
    # The header quotes plan values (the price source, a path, a region): a line break in one
    # would end the comment and start a top-level key of the task, so each stays one line.
    header = [printable(line, keep="") for line in header]
    return "\n".join(header + _yaml(task_config(plan, plan_path, run_id=run_id), "")) + "\n"
