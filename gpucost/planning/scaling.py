"""One offer over node counts: time, throughput, efficiency and $/job, and the knee.

The knee is the first node count from which doubling the nodes cuts the job's wall-clock time
(setup included, as in every $/job) by less than KNEE_TIME_CUT: the hourly bill doubles, so
$/job rises by more than half while the job finishes only a little sooner. `gpucost scale` and
the TUI's plan screen both use it.

Which offer a curve follows (:func:`cheapest_offer_curve`, :func:`mixed_node_curve`) is decided
here too, so the command line only parses and prints.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from gpucost.catalog import get_gpu
from gpucost.errors import InputError, NoOffersError
from gpucost.format import usd
from gpucost.limits import node_limit
from gpucost.model.fabrics import fabric_for
from gpucost.model.memory import unknown_memory_note
from gpucost.model.perf import predict
from gpucost.planning.plans import PlanRow, Plans
from gpucost.planning.ranking import Ranking, rank
from gpucost.planning.request import Request, make_filters
from gpucost.pricing.snapshot import Offers, Snapshot
from gpucost.profile import Profile

KNEE_TIME_CUT = 0.25  # doubling the nodes must cut the job's time by at least this fraction
SCALING_MAX_NODES = 16
OVERRIDE_SOURCE = "gpucost-scale-overrides"  # the one offer a curve at your own terms ranks
PRICE_GIVEN = "--price-hr"  # a curve's price source when the price is the caller's


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
    mine = tuple(s for s in request.snapshots if s.source == row.source)
    filters = make_filters(gpu=row.gpu, provider=row.provider, market=row.market,
                           gpu_count=row.gpu_count, max_nodes=2 * max_nodes,
                           cpu_arch=request.filters.cpu_arch)
    full = rank(replace(request, snapshots=mine, filters=filters))
    return offer_curve(full.plans, row, max_nodes)


@dataclass(frozen=True)
class OfferCurve:
    """A curve, the request its plans were ranked with and where its offer comes from."""

    request: Request  # one GPU count per node; your terms' one offer as its only snapshot
    scaling: Scaling
    price_source: str  # the offer ("provider instance (region), prices of DATE") or PRICE_GIVEN
    notes: tuple[str, ...]  # what was defaulted or left out, in words


def cheapest_offer_curve(request: Request, gpu: str, *, max_nodes: int,
                         gpus_per_node: int | None = None, price_hr: float | None = None,
                         link: str | None = None) -> OfferCurve:
    """The curve of the cheapest on-demand offer of ``gpu`` up to ``max_nodes`` (``request``
    ranks groups of up to twice that: the knee at max_nodes needs them), at ``gpus_per_node``
    (None: 1, else the fewest an offer has). ``price_hr`` ($/h per node) and ``link`` (the
    GPUs' link inside a node) replace the offer's terms; with no offer, a bare one at
    ``price_hr``."""
    notes: list[str] = []
    if gpus_per_node is None:
        gpus_per_node, note = _fewest_gpus_per_node(request, gpu)
        notes.append(note)
    request = replace(request, filters=replace(request.filters,
                                               gpu_counts=(float(gpus_per_node),)))
    ranking = _try_rank(request)
    single, skipped = (_first_fit(ranking.plans, max_nodes) if ranking is not None
                       else (None, ""))
    label = (f"{single.provider} {single.instance_type} ({single.region}), prices of "
             f"{single.price_date}" if single else "")
    if price_hr is not None or link or single is None:
        request = replace(request, snapshots=(_override_snapshot(
            request, single, gpu, gpus_per_node, price_hr=price_hr, link=link,
            max_nodes=max_nodes),))
        ranking = rank(request)
        if price_hr is not None:
            label = PRICE_GIVEN
            skipped = ""  # your price, not the cheapest offer's
        if not ranking.plans.nodes.size:
            raise InputError(f"no group of {gpus_per_node}x {gpu} fits the profile's batch",
                             hint=ranking.notes[-1] if ranking.notes else "")
        single, _ = _first_fit(ranking.plans)
    assert ranking is not None and single is not None
    notes += [skipped, unknown_memory_note(request.profile) or ""]
    return OfferCurve(request, offer_curve(ranking.plans, single, max_nodes), label,
                      tuple(n for n in notes if n))


def slowest_member(profile: Profile, node: Sequence[str]) -> str:
    """The GPU that sets a mixed node's pace (as predict gives the group)."""
    return predict(profile, gpus_per_node=len(node), member_gpus=list(node)).gpu


def mixed_node_curve(request: Request, node: Sequence[str], *, max_nodes: int,
                     price_hr: float, link: str | None = None) -> OfferCurve:
    """A mixed node (``node``: its GPUs' catalog names) at ``price_hr`` $/h: one bare offer
    named after the slowest member (:func:`slowest_member`, the GPU ``request`` names), ranked
    by the planning core with ``Request.node_gpus``. An offer has one GPU type, so no offer in
    the snapshots holds a mixed node."""
    slowest = slowest_member(request.profile, node)
    request = replace(request, node_gpus=tuple(node))
    request = replace(request, snapshots=(_override_snapshot(
        request, None, slowest, len(node), price_hr=price_hr, link=link,
        max_nodes=max_nodes),))
    ranking = rank(request)
    if not ranking.plans.nodes.size:
        raise InputError(f"no mixed node of {' + '.join(node)} fits the profile's batch",
                         hint=ranking.notes[-1] if ranking.notes else "")
    single, _ = _first_fit(ranking.plans)
    assert single is not None
    unknown = unknown_memory_note(request.profile)
    return OfferCurve(request, offer_curve(ranking.plans, single, max_nodes), PRICE_GIVEN,
                      (unknown,) if unknown else ())


def _override_snapshot(request: Request, row: PlanRow | None, gpu: str, per_node: int, *,
                       price_hr: float | None, link: str | None, max_nodes: int) -> Snapshot:
    """One offer: the cheapest one found (or a bare one) with ``price_hr`` and ``link``
    applied. A mixed node's bare offer is named after its slowest member (``gpu``) and holds its
    smallest member's memory. The request's network (every offer's fabric) stays the
    request's, so the offer keeps its provider's setup time, storage and transfer terms."""
    members = request.node_gpus or (gpu,)
    bare_name = "+".join(request.node_gpus) if request.node_gpus else f"{per_node}x-{gpu}"
    price = price_hr if price_hr is not None else (row.price_hr if row else None)
    if price is None:
        raise InputError(f"no on-demand offer for {per_node}x {gpu} in the price snapshots",
                         hint="pass --price-hr")
    # A custom offer, not the provider's: your price for a group where the offer's provider
    # launches one node.
    own = row is not None and not (price_hr is not None and node_limit(row.provider) < max_nodes)
    record: dict[str, Any] = {
        "provider": row.provider if row and own else "custom",
        "region": row.region if row and own else "custom",
        "instance_type": row.instance_type if row else bare_name,
        "gpu": gpu,
        "gpu_count": per_node,
        "gpu_memory_gb": min(get_gpu(g).memory_gb for g in members),
        "price_hr": price,
        "intra_node_link": link or "",
    }
    if row is not None:
        original = next(s for s in request.snapshots if s.source == row.source)
        mask = ((original.offers.instance_type == row.instance_type)
                & (original.offers.region == row.region))
        i = int(mask.nonzero()[0][0])
        for name in ("storage_gb_month", "egress_gb", "ingress_gb", "month_hours", "reliability",
                     "network_gbps"):
            record[name] = float(original.offers[name][i])
        if not link:
            record["intra_node_link"] = str(original.offers.intra_node_link[i])
    now = request.now or dt.datetime.now(dt.UTC)
    return Snapshot(source=OVERRIDE_SOURCE, fetched_at=now, offers=Offers.from_records([record]))


def _try_rank(request: Request) -> Ranking | None:
    """The ranking, or None when no offer matches (the overrides may still price the group)."""
    try:
        return rank(request)
    except NoOffersError:
        return None


def _first_fit(plans: Plans, max_nodes: int = 1) -> tuple[PlanRow | None, str]:
    """The first (cheapest) plan at the fewest nodes that fit (1, unless the model's training
    state needs sharding over more GPUs than one node holds), on a provider where a group of
    ``max_nodes`` can be launched if there is one: a curve is no curve on one node. With it, a
    note when that passed over a cheaper plan ("" when not)."""
    if not plans.nodes.size:
        return None, ""
    fewest = plans.nodes == plans.nodes.min()
    scales = np.array([node_limit(str(p)) >= max_nodes for p in plans.provider], dtype=bool)
    candidates = np.flatnonzero(fewest & scales)
    first = int(np.flatnonzero(fewest)[0])
    if not candidates.size or int(candidates[0]) == first:
        return plans.row(first), ""
    row, cheaper = plans.row(int(candidates[0])), plans.row(first)
    skipped = sorted({str(p) for p in plans.provider[fewest & ~scales]})
    return row, (
        f"offers on {', '.join(skipped)} left out: gpucost launches one node only there; the "
        f"cheapest, {cheaper.label()}, is {usd(cheaper.cost_usd, exact=True)}/job at "
        f"{cheaper.nodes} node(s), where this curve starts at {usd(row.cost_usd, exact=True)} "
        f"(its curve: --price-hr {cheaper.price_hr:g})")


def _fewest_gpus_per_node(request: Request, gpu: str) -> tuple[int, str]:
    """GPUs per node when not given: 1, or the fewest whole GPUs per node of any on-demand offer
    for the GPU when none has one (with a note saying so)."""
    found = _try_rank(replace(request, filters=replace(request.filters, max_nodes=1)))
    counts = found.plans.gpu_count if found is not None else np.array([])
    whole = sorted({int(c) for c in counts.tolist() if c >= 1 and float(c).is_integer()})
    if not whole or whole[0] == 1:
        return 1, ""
    return whole[0], (f"-k not given: no on-demand offer has 1 x {gpu} per node, so "
                      f"{whole[0]} per node, the fewest one has (-k K to choose)")


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
