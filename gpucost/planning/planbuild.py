"""A recommended plan as a plan file (:class:`gpucost.planfile.Plan`), with every assumption behind
its estimate written down."""

from __future__ import annotations

import datetime as dt
import math
import shlex
from collections.abc import Sequence

from gpucost.errors import InputError, PolicyViolation
from gpucost.format import usd
from gpucost.jobname import name_from_label
from gpucost.marketplace import search_for
from gpucost.model.economics import DISK_HEADROOM, SYSTEM_DISK_GB, breakeven, outlives_instance
from gpucost.model.memory import unknown_memory_note
from gpucost.planfile import (
    BUDGET_WARN_SHARE,
    AssumptionsSection,
    CheckpointSection,
    DiskSection,
    EstimateSection,
    IdleSection,
    JobSection,
    OfferSection,
    Plan,
    SafetySection,
    SpotSection,
    WorkloadSection,
)
from gpucost.planning.advice import Advice, Choice
from gpucost.planning.reasons import estimate_terms

TIMEOUT_FACTOR = 1.5  # the executor's hard limit, over the expected hours
# What the estimate does not hold and the limit must: the job process's own start (the
# interpreter, torch's import, CUDA's context, data-loader workers, NCCL's rendezvous), seconds to
# minutes that no profile times. Without it a job of seconds on your own machine, where setup is
# nothing, was stopped at 1.5x its estimate before its first step.
STARTUP_ALLOWANCE_HOURS = 5.0 / 60.0
BUDGET_CAP_FACTOR = 1.25  # the executor's spending cap over the expected cost, without a budget


def safety_timeout_hours(hours: float) -> float:
    """The executor's hard limit for a run expected to take ``hours`` (setup included), before
    any wait for spot capacity: TIMEOUT_FACTOR x the hours, plus the job's start-up."""
    return hours * TIMEOUT_FACTOR + STARTUP_ALLOWANCE_HOURS


def limit_hours(hours: float) -> float:
    """``hours`` as a plan file writes a limit: rounded up to 0.001 h, never below it."""
    return math.ceil(hours * 1000) / 1000


def budget_cap(cost_usd: float, worst_usd: float, budget_usd: float | None) -> tuple[float, str]:
    """The executor's spending cap for a plan, whole cents up, and where it comes from: the
    user's budget when one is given (what they said they would spend; never below the
    estimate, or the run could not finish), else the larger of the worst case and
    :data:`BUDGET_CAP_FACTOR` x the expected cost."""
    if budget_usd is not None:
        cap, basis = max(budget_usd, cost_usd), "your budget"
    elif worst_usd > cost_usd * BUDGET_CAP_FACTOR:
        cap, basis = worst_usd, "the worst case; no budget given"
    else:
        cap, basis = cost_usd * BUDGET_CAP_FACTOR, (
            f"{BUDGET_CAP_FACTOR:g}x the expected cost; no budget given")
    return math.ceil(round(cap * 100, 6)) / 100, basis


def _r(x: float, digits: int = 4) -> float:
    return round(float(x), digits)


def _opt(x: float | None) -> float | None:
    return None if x is None else float(x)


def to_plan(
    choice: Choice,
    advice: Advice,
    *,
    profile_ref: str,
    command: str | Sequence[str] = ("python", "train.py"),
    name: str | None = None,
    expected_return_hours: float | None = None,
    p_no_gpus: float = 0.0,
    checkpoint_target: str = "local:checkpoints",
    now: dt.datetime | None = None,
) -> Plan:
    """The plan file for one recommended plan, with every assumption behind its estimate."""
    row = choice.row
    ranking, request = advice.ranking, advice.request
    c, params, job = request.constraints, request.economics, request.job
    profile = ranking.profile
    argv = shlex.split(command) if isinstance(command, str) else list(command)
    if not argv:
        raise InputError("the command is empty", hint='give --command "python train.py ..."')
    entry = next((a for a in argv if a.endswith(".py")), None)
    nodes = row.nodes
    spot = row.market == "spot"
    interval = row.checkpoint_interval_hours
    has_interval = math.isfinite(interval)

    # stop vs destroy after the job, for the whole group
    be = breakeven(
        row.usd_per_hour_total,
        row.disk_gb * nodes,
        row.storage_gb_month,
        month_hours=row.month_hours,
        setup_minutes=row.setup_hours * 60.0,
        ingress_gb=params.data_gb * nodes,
        ingress_usd_gb=row.ingress_gb,
        p_no_gpus=p_no_gpus,
    )
    if row.provider == "local":
        policy = "stop"  # your own machine: nothing to rebuild, nothing billed while off
    elif expected_return_hours is not None:
        policy = be.policy(expected_return_hours)
    else:
        policy = "destroy"  # no return planned: stopping would bill the disk for nothing

    cost, hours = row.cost_usd, row.total_hours
    cap, cap_basis = budget_cap(cost, row.worst_usd, c.budget_usd)
    max_wait = params.max_wait_capacity_hours
    timeout = safety_timeout_hours(hours) + (max_wait if spot else 0.0)
    timeout_basis = (f"{TIMEOUT_FACTOR:g}x the expected {hours:.2g} h and "
                     f"{STARTUP_ALLOWANCE_HOURS * 60:g} min for the job to start"
                     + (f", and {max_wait:g} h of waiting for spot capacity"
                        if spot and max_wait else ""))
    if c.deadline_hours is not None and timeout > c.deadline_hours:
        timeout, timeout_basis = max(c.deadline_hours, hours), "your deadline"

    notes = [
        f"prices from {row.source} dated {row.price_date}: {usd(row.price_hr, exact=True)}/h "
        f"per node ({row.market})",
        f"throughput {row.throughput:,.1f} {profile.sample_unit}/s predicted by "
        f"gpucost.model.perf from the {profile.gpu} profile {profile.name!r}"
        + (f" ({profile.source})" if profile.source else ""),
        f"job: {job.description} = {job.samples:,.0f} {profile.sample_unit}",
        (
            "setup: none, your own machine is ready and holds the data"
            if row.provider == "local"
            else f"setup {row.setup_hours * 60:.0f} min: {row.setup_minutes:g} min "
            f"provisioning and image ({row.setup_source}) + {params.data_gb:g} GB download at "
            f"{row.download_gbps:g} Gbit/s"
            + (" (assumed: the offer gives no bandwidth)" if row.bandwidth_assumed else "")
        ),
        f"disk {row.disk_gb:g} GB per node = {SYSTEM_DISK_GB:g} GB OS and image + (data "
        f"{params.data_gb:g} GB + {params.checkpoints_kept} checkpoints x "
        f"{params.checkpoint_gb:g} GB + results {params.results_gb:g} GB) plus "
        f"{DISK_HEADROOM:.0%} headroom; billed by allocated size at "
        f"${row.storage_gb_month:g}/GB-month over {row.month_hours:g} h months"
        + (" (assumed: the offer gives no disk price)" if row.storage_price_assumed else ""),
        f"interruptions {row.interruption_rate:.4g}/h per node: {row.rate_source}",
    ]
    if has_interval:
        notes.append(
            f"checkpoint every {interval * 60:.1f} min of work: Young/Daly "
            f"sqrt(2 x {params.checkpoint_hours * 3600:.1f} s per checkpoint / "
            f"{row.interruption_rate * row.nodes:.4g} interruptions per h)"
        )
    if math.isfinite(row.peak_gb):
        notes.append(
            f"memory: predicted peak {row.peak_gb:.1f} GB per GPU for batch "
            f"{profile.batch_size} on {row.gpu}"
            + (f" ({row.memory_note})" if row.memory_note else "")
            + f"; {len(ranking.unfit):,} plans on GPUs it would not fit were left out"
        )
    elif unknown := unknown_memory_note(profile):
        notes.append(unknown)
    notes.append(f"after the job: {be.advice(expected_return_hours)}")
    notes.append(
        f"safety: timeout {timeout:.1f} h ({timeout_basis}) and budget cap "
        f"{usd(cap, exact=True)} "
        f"({cap_basis}) for the executor, which warns at {BUDGET_WARN_SHARE * 100:.0f} % of it; "
        f"worst case {usd(row.worst_usd, exact=True)}"
    )
    notes.extend(choice.reasons)

    # A reclaimed spot instance takes its disk along: there the plan checkpoints only to an
    # object store, and is priced as restart-from-zero without one (economics.job_costs).
    checkpoints = params.checkpoint_gb > 0 and (not spot or outlives_instance(checkpoint_target))
    return Plan(
        created_at=(now or dt.datetime.now(dt.UTC)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        job=JobSection(
            name=name or name_from_label(profile.name, "job"),
            command=argv,
            workdir=".",
            entry_script=entry,
            epochs=_opt(job.epochs),
            dataset_size=_opt(job.dataset_size),
            samples=float(job.samples),
            data_gb=float(params.data_gb),
            checkpoint_gb=float(params.checkpoint_gb),
            results_gb=float(params.results_gb),
            deadline_hours=_opt(c.deadline_hours),
            budget_usd=_opt(c.budget_usd),
            spot=request.filters.market != "on-demand",
        ),
        offer=OfferSection(
            provider=row.provider,
            instance_type=row.instance_type,
            gpu=row.gpu,
            gpu_count=row.gpu_count,
            price_hr=row.price_hr,
            nodes=nodes,
            market=row.market,
            region=row.region,
            zone=row.zone,
            price_source=row.source,
            price_date=row.price_date,
            on_demand_price_hr=row.on_demand_hr if spot else None,
        ),
        workload=WorkloadSection(
            throughput=_r(row.throughput, 3),
            profile=profile_ref,
            profile_gpu=profile.gpu,
            precision=profile.precision,
            batch_size=profile.batch_size,
            sample_unit=profile.sample_unit,
            throughput_source=f"predicted from the {profile.gpu} profile {profile.name!r}",
            peak_memory_gb=round(row.peak_gb, 2) if math.isfinite(row.peak_gb) else None,
            torch_version=(
                str(profile.environment["torch"]) if "torch" in profile.environment else None
            ),
            micro_batch=row.micro_batch,
            grad_accum_steps=row.grad_accum_steps,
            sharding=row.sharding,
        ),
        safety=SafetySection(  # rounded up: a limit must never fall below the estimate
            timeout_hours=limit_hours(timeout),
            budget_cap_usd=cap,
        ),
        checkpoint=CheckpointSection(
            enabled=checkpoints,
            every_epochs=1.0 if job.epochs is not None and checkpoints else None,
            interval_minutes=_r(interval * 60.0, 2) if has_interval else None,
            target=checkpoint_target,
            resume=checkpoints,
        ),
        spot=SpotSection(
            interruption_rate_per_hr=float(f"{row.interruption_rate:.6g}"),
            rate_source=row.rate_source,
            max_wait_capacity_hours=float(max_wait) if spot else 0.0,
            fallback="on-demand" if spot else "none",
        ),
        disk=DiskSection(
            size_gb=row.disk_gb,
            storage_gb_month=row.storage_gb_month,
            month_hours=row.month_hours,
        ),
        idle=IdleSection(
            policy=policy,
            expected_return_hours=_opt(expected_return_hours),
            breakeven_hours=(
                _r(be.breakeven_hours, 2) if math.isfinite(be.breakeven_hours) else None
            ),
        ),
        estimate=EstimateSection(
            hours=_r(hours, 6), cost_usd=_r(cost),
            **{t: _r(v) for t, v in estimate_terms(row).items()}
        ),
        assumptions=AssumptionsSection(notes=notes),
        marketplace=search_for(
            provider=row.provider, gpu_count=row.gpu_count, price_hr=row.price_hr,
            region=row.region, download_gbps=row.download_gbps, disk_gb=row.disk_gb,
            bandwidth_assumed=row.bandwidth_assumed),
    )


def plan_file(
    advice: Advice,
    pick: str = "cheapest",
    *,
    profile_ref: str | None = None,
    command: str | Sequence[str] = ("python", "train.py"),
    name: str | None = None,
    expected_return_hours: float | None = None,
    p_no_gpus: float = 0.0,
    checkpoint_target: str = "local:checkpoints",
) -> Plan:
    """The plan file for ``advice``'s ``pick`` ("cheapest" or "fastest"), as `gpucost plan -o`
    writes it; PolicyViolation, saying what to relax, when no plan meets the constraints.
    ``profile_ref``: how the plan names its profile (default the profile's name)."""
    if pick not in ("cheapest", "fastest"):
        raise InputError(f"pick must be cheapest or fastest, got {pick!r}")
    if not advice.ok:
        raise PolicyViolation(f"no plan meets the constraints ({advice.describe()})",
                              hint="; ".join(advice.relax) or "relax the constraints")
    if expected_return_hours is not None and not expected_return_hours >= 0:
        raise InputError(f"the expected return must be >= 0 hours, got {expected_return_hours}")
    choice = advice.cheapest if pick == "cheapest" else advice.fastest
    assert choice is not None
    return to_plan(choice, advice, profile_ref=profile_ref or advice.ranking.profile.name,
                   command=command, name=name, expected_return_hours=expected_return_hours,
                   p_no_gpus=p_no_gpus, checkpoint_target=checkpoint_target)
