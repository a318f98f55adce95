"""One offer over node counts: time, throughput, efficiency and $/job, and the knee.

The knee is the first node count from which doubling the nodes cuts the job's wall-clock time
(setup included, as in every $/job) by less than KNEE_TIME_CUT: the hourly bill doubles, so
$/job rises by more than half while the job finishes only a little sooner. `gpucost scale` and
the TUI's plan screen both use it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from gpucost.errors import InputError
from gpucost.limits import node_limit

if TYPE_CHECKING:
    from gpucost.planning.plans import PlanRow, Plans
    from gpucost.planning.request import Request
    from gpucost.profile import Profile

KNEE_TIME_CUT = 0.25  # doubling the nodes must cut the job's time by at least this fraction
SCALING_MAX_NODES = 16


@dataclass(frozen=True)
class ScalePoint:
    nodes: int
    throughput: float  # samples/s, whole group
    efficiency: float  # fraction of linear scaling
    compute_hours: float  # the job's compute alone
    hours: float  # expected wall clock, setup included
    cost_usd: float  # expected $/job
    row: PlanRow


@dataclass(frozen=True)
class Scaling:
    points: tuple[ScalePoint, ...]  # increasing node counts up to max_nodes
    knee: int | None  # None: no knee up to max_nodes
    cheapest: int  # node count with the lowest $/job
    fabric: str  # what the offer's nodes talk over


def curve_note(scaling: Scaling) -> str:
    """What the curve says about adding nodes, in one line (`gpucost scale` and the TUI)."""
    provider = scaling.points[0].row.provider
    if node_limit(provider) == 1:
        return (f"one node only: gpucost launches no group of nodes on {provider} (SkyPilot has "
                "no multi-node cluster there)")
    if scaling.knee is None:
        return (f"no knee up to {scaling.points[-1].nodes} nodes: doubling the nodes still cuts "
                f"the time by at least {KNEE_TIME_CUT:.0%}")
    return (f"knee: {scaling.knee} node(s) - from there, doubling the nodes cuts the time by "
            f"less than {KNEE_TIME_CUT:.0%} while $/job rises by more than half")


def knee_nodes(hours: Mapping[int, float], cut: float = KNEE_TIME_CUT) -> int | None:
    """The first node count n (in increasing order) from which doubling to 2n cuts the job's
    time by less than ``cut``; counts whose double is not in ``hours`` are not judged. None:
    every judged count still scales."""
    if not hours:
        raise InputError("a scaling curve needs at least one point")
    for n in sorted(hours):
        if 2 * n in hours and hours[2 * n] > (1.0 - cut) * hours[n]:
            return n
    return None


def offer_curve(plans: Plans, row: PlanRow, max_nodes: int) -> Scaling:
    """The plans of ``row``'s offer and market in ``plans`` (ranked up to 2 x max_nodes, which
    judging the knee at max_nodes needs), as a curve up to ``max_nodes``."""
    import numpy as np  # here, not at the top: `gpucost --help` reads KNEE_TIME_CUT

    mask = ((plans.instance_type == row.instance_type) & (plans.region == row.region)
            & (plans.zone == row.zone) & (plans.market == row.market)
            & (plans.provider == row.provider) & (plans.source == row.source))
    idx = np.flatnonzero(mask)
    seen: dict[int, ScalePoint] = {}
    for i in idx[np.argsort(plans.nodes[idx], kind="stable")]:
        r = plans.row(int(i))
        seen.setdefault(r.nodes, ScalePoint(r.nodes, r.throughput, r.efficiency, r.hours,
                                            r.total_hours, r.cost_usd, r))
    if not seen:
        raise InputError(f"no plan for {row.label()} fits", hint="try another GPU or offer")
    points = tuple(seen[n] for n in sorted(seen) if n <= max_nodes)
    knee = knee_nodes({n: p.hours for n, p in seen.items()})
    if knee is not None and knee > max_nodes:
        knee = None
    cheapest = min(points, key=lambda p: p.cost_usd).nodes
    fabric = next((p.row.inter_node_fabric for p in seen.values() if p.nodes > 1), "")
    return Scaling(points, knee, cheapest, fabric)


def scaling_curve(request: Request, row: PlanRow, *,
                  max_nodes: int = SCALING_MAX_NODES) -> Scaling:
    """The plan's offer at 1..max_nodes nodes, same market, same economics as the request."""
    from gpucost.planning.ranking import rank
    from gpucost.planning.request import make_filters

    mine = tuple(s for s in request.snapshots if s.source == row.source)
    filters = make_filters(gpu=row.gpu, provider=row.provider, market=row.market,
                           gpu_count=row.gpu_count, max_nodes=2 * max_nodes,
                           cpu_arch=request.filters.cpu_arch)
    full = rank(replace(request, snapshots=mine, filters=filters))
    return offer_curve(full.plans, row, max_nodes)


@dataclass(frozen=True)
class BatchPoint:
    """The offer's group at one per-GPU batch and node count."""

    batch: int  # per GPU per step
    nodes: int
    throughput: float  # samples/s, whole group
    efficiency: float  # fraction of linear scaling at this batch


def batch_efficiency(profile: Profile, row: PlanRow, nodes: tuple[int, ...],
                     batches: tuple[int, ...], *, network_gbps: float | None = None,
                     transport: str | None = None) -> tuple[BatchPoint, ...]:
    """How scaling efficiency moves with the per-GPU batch on ``row``'s offer: a small batch
    leaves less compute to hide the gradient sync behind (seed 003: 8 T4s at batch 16 are
    sync-bound, at 64-128 they balance). The same predict the curve's plans use, over the
    offer's fabric (or the network given), at each batch as given (no memory re-plan: the
    question is the batch itself)."""
    from gpucost.model.fabrics import fabric_for
    from gpucost.model.perf import predict

    fabric = fabric_for(row.provider, row.instance_type)
    gbps = fabric.gbps if network_gbps is None else network_gbps
    how = fabric.transport if transport is None else transport
    points = []
    for batch in batches:
        for n in nodes:
            pred = predict(profile, gpu=row.gpu, gpus_per_node=int(row.gpu_count), nodes=n,
                           inter_node_gbps=gbps, inter_node_transport=how, batch_size=batch,
                           fit_batch="keep")
            points.append(BatchPoint(batch, n, pred.throughput, pred.efficiency))
    return tuple(points)
