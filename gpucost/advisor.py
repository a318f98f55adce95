"""The advisor: every offer x market x node count under the user's constraints, the Pareto front of
(expected hours, expected cost), and two recommendations with their reasons in words:

- the cheapest plan that meets the deadline (and the budget),
- the fastest plan within the budget (and the deadline).

When nothing meets the constraints it says which one to relax and by how much (a later
deadline, a bigger budget, spot capacity, more nodes, less GPU memory, other regions). A chosen
plan becomes a :class:`gpucost.plan.Plan` with every assumption written down (:func:`to_plan`).
"""

from __future__ import annotations

import datetime as dt
import math
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from gpucost.errors import InputError, NoOffersError
from gpucost.marketplace import search_for
from gpucost.model.economics import JobParams, breakeven
from gpucost.plan import (
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
from gpucost.pricing.snapshot import Snapshot
from gpucost.profile import Profile
from gpucost.ranking import Filters, Job, Ranking, make_filters, rank

ESTIMATE_TERMS = (
    "compute_usd",
    "setup_usd",
    "storage_usd",
    "egress_usd",
    "ingress_usd",
    "checkpoint_usd",
    "spot_rework_usd",
)
TIMEOUT_FACTOR = 1.5  # the executor's hard limit, over the expected hours
BUDGET_CAP_FACTOR = 1.25  # the executor's spending cap, over the expected cost
MAX_NODES_TRIED = 16  # when a deadline needs more nodes, the most the advisor suggests
TIE_FRACTION = 0.01  # plans within 1 % on one criterion are ranked by the other


@dataclass(frozen=True)
class Constraints:
    deadline_hours: float | None = None
    budget_usd: float | None = None
    min_gpu_memory_gb: float | None = None
    regions: tuple[str, ...] = ()
    spot_allowed: bool = False
    max_nodes: int = 1
    gpus: tuple[str, ...] = ()
    providers: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("deadline_hours", "budget_usd", "min_gpu_memory_gb"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value > 0):
                raise InputError(
                    f"{name.replace('_', ' ')} must be a positive number, got {value!r}"
                )
        if isinstance(self.max_nodes, bool) or self.max_nodes < 1:
            raise InputError(f"max nodes must be a positive integer, got {self.max_nodes!r}")

    def describe(self) -> str:
        parts = []
        if self.deadline_hours is not None:
            parts.append(f"deadline {self.deadline_hours:g} h")
        if self.budget_usd is not None:
            parts.append(f"budget ${self.budget_usd:,.2f}")
        if self.min_gpu_memory_gb is not None:
            parts.append(f">= {self.min_gpu_memory_gb:g} GB per GPU")
        if self.regions:
            parts.append("regions " + ", ".join(self.regions))
        parts.append("spot allowed" if self.spot_allowed else "on-demand only")
        parts.append(f"up to {self.max_nodes} node{'s' if self.max_nodes > 1 else ''}")
        return ", ".join(parts)


@dataclass(frozen=True)
class Choice:
    """One recommended plan: its row of the ranking and why it was picked."""

    kind: str  # "cheapest" | "fastest"
    index: int  # row in the ranking
    row: dict[str, Any]
    reasons: tuple[str, ...]


@dataclass
class Advice:
    ranking: Ranking
    constraints: Constraints
    params: JobParams
    feasible: npt.NDArray[np.bool_]
    pareto: npt.NDArray[np.int64]  # row indices of the (hours, cost) front of feasible plans
    cheapest: Choice | None
    fastest: Choice | None
    fits: npt.NDArray[np.bool_]  # the profile's per-device batch fits the row's GPU
    peak_gb: npt.NDArray[np.float64]  # predicted peak memory per GPU, GB (NaN: unknown)
    relax: list[str] = field(default_factory=list)  # non-empty when nothing is feasible

    @property
    def ok(self) -> bool:
        return self.cheapest is not None


def pareto_front(hours: npt.ArrayLike, cost: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """Indices of the plans no other plan beats on both time and cost, fastest first.

    A plan is dominated when another is no slower and no dearer and better on one; of identical
    plans the first is kept.
    """
    h = np.asarray(hours, dtype=np.float64)
    c = np.asarray(cost, dtype=np.float64)
    order = np.lexsort((c, h))  # by hours, then cost
    best_cost = np.minimum.accumulate(c[order])
    # a plan stays when it is strictly cheaper than every faster (or equally fast) plan before it
    previous_best = np.concatenate(([np.inf], best_cost[:-1]))
    keep = c[order] < previous_best
    return order[keep].astype(np.int64)


def pick(
    hours: npt.NDArray[np.float64], cost: npt.NDArray[np.float64], idx: npt.NDArray[np.int64]
) -> tuple[int, int]:
    """(cheapest, fastest) among the rows ``idx``. Near-ties go to the other criterion: a plan
    0.5 % faster is not worth four times the money."""
    near_cheapest = idx[cost[idx] <= cost[idx].min() * (1 + TIE_FRACTION)]
    cheapest = int(near_cheapest[np.lexsort((cost[near_cheapest], hours[near_cheapest]))[0]])
    near_fastest = idx[hours[idx] <= hours[idx].min() * (1 + TIE_FRACTION)]
    fastest = int(near_fastest[np.lexsort((hours[near_fastest], cost[near_fastest]))[0]])
    return cheapest, fastest


def memory_fit(
    profile: Profile, gpu: npt.NDArray[np.str_]
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.float64]]:
    """Per row: does the profile's per-device batch fit the GPU, and the predicted peak GB.

    One estimate per distinct GPU (:func:`gpucost.model.memory.fit_memory`); a CPU row fits.
    """
    from gpucost.catalog import get_gpu
    from gpucost.model.memory import fit_memory

    names, inverse = np.unique(gpu, return_inverse=True)
    fits = np.ones(len(names), dtype=bool)
    peak = np.full(len(names), np.nan)
    for j, name in enumerate(names.tolist()):
        if name == "CPU":
            continue
        fit = fit_memory(profile, get_gpu(name))
        fits[j] = fit.fits
        if fit.peak_gb is not None:
            peak[j] = fit.peak_gb
    return fits[inverse], peak[inverse]


def _row(ranking: Ranking, i: int) -> dict[str, Any]:
    return {k: (v[i].item() if hasattr(v[i], "item") else v[i]) for k, v in ranking.columns.items()}


def plan_label(row: dict[str, Any]) -> str:
    nodes = int(row["nodes"])
    gpus = f"{row['gpu_count']:g}x {row['gpu']}"
    where = f"{row['provider']} {row['instance_type']}" + (
        f" ({row['region']})" if row["region"] else ""
    )
    group = f"{nodes} x {where}" if nodes > 1 else where
    return f"{group}, {gpus}{' per node' if nodes > 1 else ''}, {row['market']}"


def _money(x: float) -> str:
    return f"${x:,.2f}"


def _breakdown(row: dict[str, Any]) -> str:
    parts = [
        f"{name.removesuffix('_usd').replace('_', ' ')} {_money(row[name])}"
        for name in ESTIMATE_TERMS
        if row[name] >= 0.005
    ]
    return ", ".join(parts)


def _reasons(
    kind: str,
    row: dict[str, Any],
    ranking: Ranking,
    mask: npt.NDArray[np.bool_],
    constraints: Constraints,
    alt: dict[str, Any] | None,
    chosen: int,
) -> tuple[str, ...]:
    cols = ranking.columns
    n = int(mask.sum())
    reasons: list[str] = []
    if kind == "cheapest":
        scope = (
            f"within the {constraints.deadline_hours:g} h deadline"
            if constraints.deadline_hours is not None
            else "with no deadline"
        )
        reasons.append(
            f"cheapest of {n:,} plans that finish {scope}: {_money(row['cost_usd'])} "
            f"expected over {row['total_hours']:.1f} h"
        )
    else:
        scope = (
            f"within the {_money(constraints.budget_usd)} budget even at worst"
            if constraints.budget_usd is not None
            else "with no budget limit"
        )
        reasons.append(
            f"fastest of {n:,} plans {scope}: {row['total_hours']:.1f} h for "
            f"{_money(row['cost_usd'])} expected"
        )
    reasons.append(f"$/job = {_breakdown(row)}")
    reasons.append(
        f"{row['throughput']:,.0f} {ranking.profile.sample_unit}/s predicted at "
        f"{_money(row['price_hr'] * row['nodes'])}/h; the cost is per job, not per "
        f"hour: a faster offer can be cheaper"
    )
    if row["nodes"] > 1:
        reasons.append(f"{int(row['nodes'])} nodes scale at {row['efficiency']:.0%} of linear")
    if row["interruption_rate"] > 0:
        interval = row["checkpoint_interval_hours"]
        ckpt = (
            f"checkpoint every {interval * 60:.0f} min of work (Young/Daly)"
            if interval is not None and math.isfinite(interval)
            else "no checkpoints"
        )
        reasons.append(
            f"{row['market']}: {row['interruptions']:.2f} interruptions expected "
            f"({row['risk']:.0%} chance of at least one), {ckpt}; the expected "
            f"cost includes {_money(row['spot_rework_usd'])} of rework; worst case "
            f"{_money(row['worst_usd'])}"
        )
    if alt is not None:
        if kind == "cheapest":
            reasons.append(
                f"the fastest plan ({plan_label(alt)}) takes {alt['total_hours']:.1f} h "
                f"for {_money(alt['cost_usd'])}"
            )
        else:
            reasons.append(
                f"the cheapest plan ({plan_label(alt)}) costs {_money(alt['cost_usd'])} "
                f"over {alt['total_hours']:.1f} h"
            )
    others = np.flatnonzero(mask)
    others = others[others != chosen]
    if len(others):
        key = cols["cost_usd"] if kind == "cheapest" else cols["total_hours"]
        r = _row(ranking, int(others[np.argmin(key[others])]))
        if kind == "cheapest":
            d = r["cost_usd"] - row["cost_usd"]
            reasons.append(
                f"next cheapest: {plan_label(r)} at {_money(r['cost_usd'])} "
                f"({'+' if d >= 0 else '-'}{_money(abs(d))}"
                + (f", {r['total_hours']:.1f} h)" if d < 0 else ")")
            )
        else:
            d = r["total_hours"] - row["total_hours"]
            reasons.append(
                f"next fastest: {plan_label(r)} at {r['total_hours']:.2f} h ({d:+.2f} h) "
                f"for {_money(r['cost_usd'])}"
            )
    return tuple(reasons)


def _filters(c: Constraints) -> Filters:
    return make_filters(
        gpu=c.gpus or None,
        provider=c.providers or None,
        region=c.regions or None,
        market="any" if c.spot_allowed else "on-demand",
        min_gpu_memory_gb=c.min_gpu_memory_gb,
        max_nodes=c.max_nodes,
    )


def _rank(
    profile: Profile,
    job: Job,
    snapshots: Sequence[Snapshot],
    c: Constraints,
    params: JobParams,
    now: dt.datetime | None,
) -> Ranking:
    return rank(profile, job, snapshots, _filters(c), now=now, job_params=params)


def _meets(ranking: Ranking, c: Constraints) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    """Per row: (meets the deadline, within the budget)."""
    hours, cost = ranking.columns["total_hours"], ranking.columns["cost_usd"]
    on_time = (
        np.ones(len(hours), dtype=bool) if c.deadline_hours is None else hours <= c.deadline_hours
    )
    affordable = np.ones(len(cost), dtype=bool) if c.budget_usd is None else cost <= c.budget_usd
    return on_time, affordable


def advise(
    profile: Profile,
    job: Job,
    snapshots: Sequence[Snapshot],
    constraints: Constraints = Constraints(),
    params: JobParams | None = None,
    *,
    now: dt.datetime | None = None,
) -> Advice:
    """Rank every plan under the constraints and pick the cheapest and the fastest."""
    params = params or JobParams()
    try:
        ranking = _rank(profile, job, snapshots, constraints, params, now)
    except NoOffersError as err:
        relax = _relax_filters(profile, job, snapshots, constraints, params, now)
        raise NoOffersError(
            err.message + ("; " + "; ".join(relax) if relax else ""), hint=err.hint
        ) from None
    cols = ranking.columns
    hours, cost = cols["total_hours"], cols["cost_usd"]
    on_time, affordable = _meets(ranking, constraints)
    fits, peak = memory_fit(profile, cols["gpu"])
    feasible = on_time & affordable & fits
    idx = np.flatnonzero(feasible)
    pareto = idx[pareto_front(hours[idx], cost[idx])]
    if not len(idx):
        relax = _relax(
            profile,
            job,
            snapshots,
            constraints,
            params,
            now,
            ranking,
            on_time,
            affordable,
            fits,
            peak,
        )
        return Advice(ranking, constraints, params, feasible, pareto, None, None, fits, peak, relax)
    cheapest_i, fastest_i = pick(hours, cost, idx)
    if constraints.budget_usd is not None:
        # The fastest plan within the budget stays within it even at its worst (interrupted at
        # the worst moment, finished on-demand): the budget is the run's hard cap.
        safe = idx[cols["worst_usd"][idx] <= constraints.budget_usd]
        fastest_i = pick(hours, cost, safe)[1] if len(safe) else cheapest_i
    cheap_row, fast_row = _row(ranking, cheapest_i), _row(ranking, fastest_i)
    same = cheapest_i == fastest_i
    cheapest = Choice(
        "cheapest",
        cheapest_i,
        cheap_row,
        _reasons(
            "cheapest",
            cheap_row,
            ranking,
            feasible,
            constraints,
            None if same else fast_row,
            cheapest_i,
        ),
    )
    fastest = Choice(
        "fastest",
        fastest_i,
        fast_row,
        _reasons(
            "fastest",
            fast_row,
            ranking,
            feasible,
            constraints,
            None if same else cheap_row,
            fastest_i,
        ),
    )
    return Advice(ranking, constraints, params, feasible, pareto, cheapest, fastest, fits, peak)


def _relax(
    profile: Profile,
    job: Job,
    snapshots: Sequence[Snapshot],
    c: Constraints,
    params: JobParams,
    now: dt.datetime | None,
    ranking: Ranking,
    on_time: npt.NDArray[np.bool_],
    affordable: npt.NDArray[np.bool_],
    fits: npt.NDArray[np.bool_],
    peak: npt.NDArray[np.float64],
) -> list[str]:
    """Which constraint to relax, and by how much, when no plan meets them all."""
    cols = ranking.columns
    hours, cost = cols["total_hours"], cols["cost_usd"]
    out: list[str] = []
    any_fits = bool(fits.any())
    if not any_fits:
        out.append(
            f"the per-device batch of {ranking.profile.batch_size} fits none of these GPUs "
            f"(predicted peak {np.nanmin(peak):.1f} GB "
            "at best): use a smaller batch with gradient accumulation, or allow bigger GPUs"
        )
        fits = np.ones(len(hours), dtype=bool)
    on_time, affordable = on_time & fits, affordable & fits
    if c.deadline_hours is not None:
        pool = affordable if affordable.any() else fits
        need = float(hours[pool].min())
        if need > c.deadline_hours:
            within = " within the budget" if affordable.any() and c.budget_usd is not None else ""
            out.append(
                f"extend the deadline to {math.ceil(need * 10) / 10:g} h "
                f"(+{need - c.deadline_hours:.1f} h): the fastest plan{within} takes "
                f"{need:.1f} h"
            )
    if c.budget_usd is not None:
        pool = on_time if on_time.any() else fits
        need = float(cost[pool].min())
        if need > c.budget_usd:
            meeting = (
                " that meets the deadline" if on_time.any() and c.deadline_hours is not None else ""
            )
            out.append(
                f"raise the budget to {_money(math.ceil(need * 100) / 100)} "
                f"(+{_money(need - c.budget_usd)}): the cheapest plan{meeting} costs "
                f"{_money(need)}"
            )
    if not any_fits:
        return out  # spot or more nodes bring no other GPU: nothing would fit either
    # Constraints that are not numbers: would spot capacity or more nodes meet everything?
    # The relaxed ranking holds every row of this one, none feasible, so only the rows it adds
    # can be picked: rank spot plans alone, and all the node limits tried at once (the most
    # nodes, then the rows within each limit). Rows keep their relative order, so the pick is
    # the one a full re-rank under the relaxed constraints would make.
    filters = _filters(c)
    tries: list[tuple[str, Filters, tuple[int, ...]]] = []
    if not c.spot_allowed:
        tries.append(("allow spot capacity (--spot)", replace(filters, market="spot"), ()))
    if c.deadline_hours is not None and c.max_nodes < MAX_NODES_TRIED:
        limits = tuple(sorted({min(MAX_NODES_TRIED, c.max_nodes * k) for k in (2, 4, 8)}))
        tries.append(("", replace(filters, max_nodes=limits[-1]), limits))
    for text, relaxed_filters, limits in tries:
        try:
            relaxed = rank(profile, job, snapshots, relaxed_filters, now=now, job_params=params)
        except NoOffersError:
            continue
        r_on_time, r_affordable = _meets(relaxed, c)
        feasible = r_on_time & r_affordable & memory_fit(profile, relaxed.columns["gpu"])[0]
        r_hours, r_cost = relaxed.columns["total_hours"], relaxed.columns["cost_usd"]
        for limit in limits or (c.max_nodes,):
            idx = np.flatnonzero(feasible & (relaxed.columns["nodes"] <= limit))
            if not len(idx):
                continue
            row = _row(relaxed, pick(r_hours, r_cost, idx)[0])
            if limits:  # name the node count the plan needs
                text = f"allow {int(row['nodes'])} nodes (--max-nodes {int(row['nodes'])})"
            out.append(
                f"or {text}: {plan_label(row)} meets all constraints at "
                f"{_money(row['cost_usd'])} in {row['total_hours']:.1f} h"
            )
            return out
    return out


def _relax_filters(
    profile: Profile,
    job: Job,
    snapshots: Sequence[Snapshot],
    c: Constraints,
    params: JobParams,
    now: dt.datetime | None,
) -> list[str]:
    """When the filters leave no offer at all: which filter to drop."""
    out = []
    for text, relaxed in (
        ("lower the GPU memory minimum", replace(c, min_gpu_memory_gb=None)),
        ("drop the region filter", replace(c, regions=())),
        ("allow spot capacity", replace(c, spot_allowed=True)),
        ("drop the GPU filter", replace(c, gpus=())),
        ("drop the provider filter", replace(c, providers=())),
    ):
        if relaxed == c:
            continue
        try:
            r = _rank(profile, job, snapshots, relaxed, params, now)
        except NoOffersError:
            continue
        if text.startswith("lower the GPU memory"):
            most = float(np.nanmax(r.columns["gpu_memory_gb"]))
            text += f" to {most:g} GB (the most any matching offer has)"
        out.append(f"{text}: {len(r):,} plans would match")
    return out


# ---- the plan file ------------------------------------------------------------------------


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
    epochs: float | None = None,
    dataset_size: float | None = None,
    expected_return_hours: float | None = None,
    p_no_gpus: float = 0.0,
    checkpoint_target: str = "local:checkpoints",
    now: dt.datetime | None = None,
) -> Plan:
    """The plan file for one recommended plan, with every assumption behind its estimate."""
    row = choice.row
    ranking, c, params = advice.ranking, advice.constraints, advice.params
    profile = ranking.profile
    argv = shlex.split(command) if isinstance(command, str) else list(command)
    if not argv:
        raise InputError("the command is empty", hint='give --command "python train.py ..."')
    entry = next((a for a in argv if a.endswith(".py")), None)
    nodes = int(row["nodes"])
    running = row["price_hr"] * nodes
    price_date = str(row["price_date"])
    spot = row["market"] == "spot"
    interval = row["checkpoint_interval_hours"]
    has_interval = interval is not None and math.isfinite(interval)

    # stop vs destroy after the job, for the whole group
    be = breakeven(
        running,
        row["disk_gb"] * nodes,
        row["storage_gb_month"],
        month_hours=row["month_hours"],
        setup_minutes=row["setup_hours"] * 60.0,
        ingress_gb=params.data_gb * nodes,
        ingress_usd_gb=row["ingress_gb"],
        p_no_gpus=p_no_gpus,
    )
    if row["provider"] == "local":
        policy = "stop"  # your own machine: nothing to rebuild, nothing billed while off
    elif expected_return_hours is not None:
        policy = be.policy(expected_return_hours)
    else:
        policy = "destroy"  # no return planned: stopping would bill the disk for nothing

    cost, hours = float(row["cost_usd"]), float(row["total_hours"])
    peak = float(advice.peak_gb[choice.index])
    cap = max(cost * BUDGET_CAP_FACTOR, float(row["worst_usd"]))
    if c.budget_usd is not None:
        cap = max(min(cap, c.budget_usd), cost)
    max_wait = params.max_wait_capacity_hours
    timeout = hours * TIMEOUT_FACTOR + (max_wait if spot else 0.0)
    if c.deadline_hours is not None:
        timeout = max(min(timeout, c.deadline_hours), hours)

    notes = [
        f"prices from {row['source']} dated {price_date}: {_money(row['price_hr'])}/h per node "
        f"({row['market']})",
        f"throughput {row['throughput']:,.1f} {profile.sample_unit}/s predicted by "
        f"gpucost.model.perf from the {profile.gpu} profile {profile.name!r}"
        + (f" ({profile.source})" if profile.source else ""),
        f"job: {ranking.job.description} = {ranking.job.samples:,.0f} {profile.sample_unit}",
        (
            "setup: none, your own machine is ready and holds the data"
            if row["provider"] == "local"
            else f"setup {row['setup_hours'] * 60:.0f} min: {row['setup_minutes']:g} min "
            f"provisioning and image ({row['setup_source']}) + {params.data_gb:g} GB download at "
            f"{row['download_gbps']:g} Gbit/s"
            + (" (assumed: the offer gives no bandwidth)" if row["bandwidth_assumed"] else "")
        ),
        f"disk {row['disk_gb']:g} GB per node = data {params.data_gb:g} GB + "
        f"{params.checkpoints_kept} checkpoints x {params.checkpoint_gb:g} GB + results "
        f"{params.results_gb:g} GB, plus 30 % headroom; billed by allocated size at "
        f"${row['storage_gb_month']:g}/GB-month over {row['month_hours']:g} h months"
        + (" (assumed: the offer gives no disk price)" if row["storage_price_assumed"] else ""),
        f"interruptions {row['interruption_rate']:.4g}/h per node: {row['rate_source']}",
    ]
    if has_interval:
        notes.append(
            f"checkpoint every {interval * 60:.1f} min of work: Young/Daly "
            f"sqrt(2 x {params.checkpoint_hours * 3600:.1f} s per checkpoint / "
            f"{row['interruption_rate'] * row['nodes']:.4g} interruptions per h)"
        )
    if math.isfinite(peak):
        notes.append(
            f"memory: predicted peak {peak:.1f} GB per GPU for batch {profile.batch_size} on "
            f"{row['gpu']} ({int((~advice.fits).sum()):,} plans on GPUs it would not fit "
            "were left out)"
        )
    notes.append(f"after the job: {be.advice(expected_return_hours)}")
    notes.append(
        f"safety: timeout {timeout:.1f} h and budget cap {_money(cap)} for the "
        f"executor; worst case {_money(row['worst_usd'])}"
    )
    notes.extend(choice.reasons)

    samples = ranking.job.samples
    return Plan(
        created_at=(now or dt.datetime.now(dt.UTC)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        job=JobSection(
            name=name or profile.name,
            command=argv,
            workdir=".",
            entry_script=entry,
            epochs=_opt(epochs),
            dataset_size=_opt(dataset_size),
            samples=float(samples),
            data_gb=float(params.data_gb),
            checkpoint_gb=float(params.checkpoint_gb),
            results_gb=float(params.results_gb),
            deadline_hours=_opt(c.deadline_hours),
            budget_usd=_opt(c.budget_usd),
            spot=c.spot_allowed,
        ),
        offer=OfferSection(
            provider=str(row["provider"]),
            instance_type=str(row["instance_type"]),
            gpu=str(row["gpu"]),
            gpu_count=float(row["gpu_count"]),
            price_hr=float(row["price_hr"]),
            nodes=nodes,
            market=str(row["market"]),
            region=str(row["region"]),
            zone=str(row["zone"]),
            price_source=str(row["source"]),
            price_date=price_date,
            on_demand_price_hr=float(row["on_demand_hr"]) if spot else None,
        ),
        workload=WorkloadSection(
            throughput=_r(row["throughput"], 3),
            profile=profile_ref,
            profile_gpu=profile.gpu,
            precision=profile.precision,
            batch_size=profile.batch_size,
            sample_unit=profile.sample_unit,
            throughput_source=f"predicted from the {profile.gpu} profile {profile.name!r}",
            peak_memory_gb=round(peak, 2) if math.isfinite(peak) else None,
            torch_version=(
                str(profile.environment["torch"]) if "torch" in profile.environment else None
            ),
        ),
        safety=SafetySection(  # rounded up: a limit must never fall below the estimate
            timeout_hours=math.ceil(timeout * 1000) / 1000,
            budget_cap_usd=math.ceil(cap * 100) / 100,
        ),
        checkpoint=CheckpointSection(
            enabled=params.checkpoint_gb > 0,
            every_epochs=1.0 if epochs is not None and params.checkpoint_gb > 0 else None,
            interval_minutes=_r(interval * 60.0, 2) if has_interval else None,
            target=checkpoint_target,
            resume=params.checkpoint_gb > 0,
        ),
        spot=SpotSection(
            interruption_rate_per_hr=float(f"{row['interruption_rate']:.6g}"),
            rate_source=str(row["rate_source"]),
            max_wait_capacity_hours=float(max_wait) if spot else 0.0,
            fallback="on-demand" if spot else "none",
        ),
        disk=DiskSection(
            size_gb=float(row["disk_gb"]),
            storage_gb_month=float(row["storage_gb_month"]),
            month_hours=float(row["month_hours"]),
        ),
        idle=IdleSection(
            policy=policy,
            expected_return_hours=_opt(expected_return_hours),
            breakeven_hours=(
                _r(be.breakeven_hours, 2) if math.isfinite(be.breakeven_hours) else None
            ),
        ),
        estimate=EstimateSection(
            hours=_r(hours, 6), cost_usd=_r(cost), **{t: _r(row[t]) for t in ESTIMATE_TERMS}
        ),
        assumptions=AssumptionsSection(notes=notes),
        marketplace=search_for(
            provider=str(row["provider"]), gpu_count=float(row["gpu_count"]),
            price_hr=float(row["price_hr"]), region=str(row["region"]),
            download_gbps=float(row["download_gbps"]), disk_gb=float(row["disk_gb"]),
            bandwidth_assumed=bool(row["bandwidth_assumed"])),
    )
