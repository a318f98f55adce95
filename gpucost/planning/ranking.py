"""Rank offers by dollars per job, not dollars per hour.

A *plan* is an offer (instance type in a region, from a price snapshot) x a market (on-demand
or spot) x a node count. For each plan: the memory rule (:mod:`gpucost.planning.fit`), the
predicted group throughput (:mod:`gpucost.model.perf`), hours for the job, and the expected
$/job (:func:`gpucost.model.economics.job_costs`). Everything runs over numpy columns, in chunks
of at most :data:`CHUNK_ROWS` plans, so memory and time grow linearly with offers x node counts.

Node counts: every count up to :data:`DENSE_NODE_COUNTS`, then :data:`COUNTS_PER_DOUBLING`
counts per doubling (about 9 % apart) up to the limit, which is the smaller of ``max_nodes``
and the provider's node limit. The performance model is called once per distinct
(GPU, GPUs per node, nodes, link, network) configuration, not once per plan.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from gpucost import providers
from gpucost.catalog import get_gpu, match_note
from gpucost.envelope import envelope
from gpucost.errors import InputError, NoOffersError, UnknownProviderError
from gpucost.factor import Factor, packed_codes
from gpucost.format import usd
from gpucost.limits import MAX_NODES, node_limit
from gpucost.measurements import source_for
from gpucost.model.bands import NO_BAND, Band
from gpucost.model.economics import CostInputs, job_costs, offer_terms
from gpucost.model.fabrics import resolve_fabrics
from gpucost.model.memory import activation_gb_per_sample, unknown_memory_note
from gpucost.model.perf import predict
from gpucost.planning.fit import MemoryPlan, cpu_memory_plan, plan_memory
from gpucost.planning.plans import PLAN_UNITS, Plans
from gpucost.planning.request import Filters, Job, Request, SortKey
from gpucost.pricing.registry import is_stale
from gpucost.pricing.snapshot import Offers, cpu_archs, merge_offers
from gpucost.profile import Profile

if TYPE_CHECKING:
    import pandas as pd

COMPARE_KIND = "compare"  # schema gpucost-compare
COMPARE_SCHEMA_VERSION = 1  # memory columns (peak_gb, micro_batch, ...) and "unfit" were added

DENSE_NODE_COUNTS = 32
COUNTS_PER_DOUBLING = 8
CHUNK_ROWS = 1 << 16  # plans costed at once
_MARKETS = np.array(["on-demand", "spot"], dtype=object)  # indexed by "is spot"


def node_counts(max_nodes: int) -> npt.NDArray[np.int64]:
    """The node counts considered up to ``max_nodes`` (always included)."""
    top = min(max_nodes, MAX_NODES)
    dense = np.arange(1, min(top, DENSE_NODE_COUNTS) + 1)
    if top <= DENSE_NODE_COUNTS:
        return dense.astype(np.int64)
    steps = math.ceil(math.log2(top / DENSE_NODE_COUNTS) * COUNTS_PER_DOUBLING)
    ladder = np.rint(DENSE_NODE_COUNTS * 2.0 ** (np.arange(1, steps + 1) / COUNTS_PER_DOUBLING))
    counts = np.unique(np.concatenate([dense, ladder[ladder < top], [top]]))
    return counts.astype(np.int64)


@dataclass(frozen=True)
class PriceSource:
    """One price snapshot behind a ranking."""

    source: str
    date: str
    age_days: float
    stale: bool
    offers: int
    path: str | None

    def record(self) -> dict[str, Any]:
        return {"source": self.source, "date": self.date, "age_days": self.age_days,
                "stale": self.stale, "offers": self.offers, "path": self.path}


@dataclass
class Ranking:
    """Ranked plans, the plans the memory rule left out, and what a reader needs to trust them."""

    request: Request
    plans: Plans  # the plans that fit (some re-planned), best first
    unfit: Plans  # left out: the per-device batch fits no way on their GPU; same order
    sources: list[PriceSource]
    generated_at: dt.datetime
    notes: list[str] = field(default_factory=list)

    @property
    def profile(self) -> Profile:
        return self.request.profile

    @property
    def job(self) -> Job:
        return self.request.job

    @property
    def sort(self) -> SortKey:
        return self.request.sort

    def __len__(self) -> int:
        return len(self.plans)

    def head(self, n: int) -> Ranking:
        return Ranking(self.request, self.plans.take(np.arange(min(n, len(self.plans)))),
                       self.unfit.take(np.arange(min(n, len(self.unfit)))), self.sources,
                       self.generated_at, self.notes)

    def to_dict(self, *, show_unfit: bool = False) -> dict[str, Any]:
        """The versioned JSON document of ``gpucost compare --format json``."""
        profile = self.profile
        body: dict[str, Any] = {
            "profile": {
                "name": profile.name,
                "gpu": profile.gpu,
                "precision": profile.precision,
                "batch_size": profile.batch_size,
                "throughput": profile.throughput,
                "sample_unit": profile.sample_unit,
                "source": profile.source,
            },
            "job": {"samples": self.job.samples, "description": self.job.description},
            "sort": self.sort,
            "price_sources": [s.record() for s in self.sources],
            "notes": self.notes,
            "units": PLAN_UNITS,
            "plans": self.plans.records(),
        }
        if show_unfit:
            body["unfit_plans"] = self.unfit.records()
        return envelope(COMPARE_KIND, body, schema_version=COMPARE_SCHEMA_VERSION,
                        generated_at=self.generated_at)

    def to_pandas(self) -> pd.DataFrame:
        import pandas as pd

        frame = pd.DataFrame(self.plans.columns())
        frame.attrs["job"] = self.job.description
        frame.attrs["profile"] = self.profile.name
        frame.attrs["price_sources"] = [s.record() for s in self.sources]
        frame.attrs["unfit_plans"] = len(self.unfit)
        frame.attrs["notes"] = list(self.notes)  # what a family name matched, stale prices, ...
        return frame


def _region_mask(regions: np.ndarray, wanted: Sequence[str]) -> npt.NDArray[np.bool_]:
    mask = np.zeros(len(regions), dtype=bool)
    lowered = np.char.lower(regions.astype(str))
    for item in wanted:
        mask |= np.char.startswith(lowered, item.lower())
    return mask


def filter_offers(offers: Offers, filters: Filters) -> Offers:
    """Offers passing the filters (markets and node counts are applied when plans expand).

    Your own machine (provider "local", there only with ``--include-local``) passes the GPU,
    provider, region and GPU-count filters, which choose among the clouds' offers."""
    cloud = offers.provider != "local"
    mask = np.ones(len(offers), dtype=bool)
    if filters.gpus:
        mask &= np.isin(offers.gpu, np.array(filters.gpus)) | ~cloud
    if filters.providers:
        known = sorted(set(offers.provider[cloud].tolist()))
        for name in filters.providers:
            if name not in known and name != "local":
                raise UnknownProviderError(name, known)
        mask &= np.isin(offers.provider, np.array(filters.providers)) | ~cloud
    if filters.regions:
        mask &= _region_mask(offers.region, filters.regions) | ~cloud
    if filters.min_gpu_memory_gb is not None:
        mask &= offers.gpu_memory_gb >= filters.min_gpu_memory_gb
    if filters.gpu_counts:
        mask &= np.isin(offers.gpu_count, np.array(filters.gpu_counts, dtype=float)) | ~cloud
    return offers if mask.all() else offers.select(mask)  # no copy when every offer passes


def filter_cpu_arch(offers: Offers, filters: Filters) -> tuple[Offers, str]:
    """The offers on the filters' host CPU (your own machine stays, as with the other filters),
    and a note on the offers this left out ("" when none)."""
    if filters.cpu_arch == "any" or not len(offers):
        return offers, ""
    arch = cpu_archs(offers)
    other = (arch != filters.cpu_arch) & (offers.provider != "local")
    if not other.any():
        return offers, ""
    gpus = ", ".join(sorted(set(offers.gpu[other].tolist())))
    arches = ", ".join(sorted(set(arch[other].tolist())))
    return offers.select(~other), (
        f"{int(other.sum()):,} offers on {arches} hosts left out ({gpus}): plans run on "
        f"{filters.cpu_arch} hosts; --cpu-arch any plans them too")


@dataclass(frozen=True)
class _OfferFactors:
    """The text columns a ranking groups rows by or shows, each factorised once (see
    :mod:`gpucost.factor`)."""

    provider: Factor
    region: Factor
    gpu: Factor
    intra_node_link: Factor
    source: Factor
    price_date: Factor  # the ISO timestamp's date

    @classmethod
    def of(cls, offers: Offers) -> _OfferFactors:
        return cls(Factor.of(offers.provider), Factor.of(offers.region), Factor.of(offers.gpu),
                   Factor.of(offers.intra_node_link), Factor.of(offers.source),
                   Factor.of(offers.fetched_at.astype("U10")))

    def take(self, rows: npt.NDArray[np.int64]) -> _OfferFactors:
        return _OfferFactors(*(getattr(self, f.name).take(rows) for f in fields(self)))


def fold_zones(
    offers: Offers, factors: _OfferFactors
) -> tuple[Offers, _OfferFactors, int, npt.NDArray[np.int64]]:
    """One row per (provider, region, instance type, prices): zones that only repeat a region's
    prices add nothing to a ranking (identical rows would fill its top). Zones with their own
    spot price stay; their on-demand rows are one per region (``_one_per_region``). Also how
    many rows were folded, and each kept row's (provider, region, instance type, source,
    on-demand price) code for ``_one_per_region``."""
    if not len(offers):
        return offers, factors, 0, np.zeros(0, dtype=np.int64)
    machine = (factors.provider, factors.region, Factor.of(offers.instance_type),
               factors.source, Factor.of(offers.price_hr))
    region = packed_codes(machine, len(offers))
    spot = Factor.of(offers.spot_price_hr)  # NaN (no spot offer) is one value
    _, first = np.unique(packed_codes((*machine, spot), len(offers)), return_index=True)
    if len(first) == len(offers):  # no zone repeats its region: nothing to copy
        return offers, factors, 0, region
    kept = np.sort(first)
    return offers.select(kept), factors.take(kept), len(offers) - len(kept), region[kept]


@dataclass(frozen=True)
class _Config:
    """A predicted group: throughput, scaling efficiency and how its batch fits."""

    throughput: float
    efficiency: float
    memory: MemoryPlan
    band: Band  # measured over predicted throughput, 10th-90th percentile of held-out errors


class _Predictor:
    """Throughput and memory plan per distinct configuration, each computed once."""

    def __init__(self, profile: Profile, node_gpus: tuple[str, ...] = ()) -> None:
        self.profile = profile
        self.node_gpus = node_gpus  # a mixed node's GPUs (Request.node_gpus)
        self.cache: dict[tuple[str, int, int, str, float, str, float], _Config] = {}
        self.memory: dict[tuple[str, int, float], MemoryPlan] = {}
        # the profile's activations per sample: the same for every group, found once
        self.activations: tuple[float | None, str] | None = None
        self.sources: dict[str, Profile] = {}

    def source(self, gpu: str) -> Profile:
        """What to predict ``gpu`` from: the workload's own stored measurements for it (the
        profile itself when none are stored)."""
        found = self.sources.get(gpu)
        if found is None:
            found = source_for(self.profile, gpu).profile
            self.sources[gpu] = found
        return found

    def memory_plan(self, gpu: str, group_gpus: int, share: float) -> MemoryPlan:
        """``share``: of one GPU, below 1 for a fractional offer (its slice's memory)."""
        key = (gpu, group_gpus, share)
        found = self.memory.get(key)
        if found is None:
            specs = [get_gpu(g).share(share) for g in self.node_gpus or (gpu,)]
            smallest = min(specs, key=lambda spec: spec.memory_gb)
            if self.activations is None:
                self.activations = activation_gb_per_sample(self.profile)
            found = plan_memory(self.profile, smallest, group_gpus,
                                activations=self.activations)
            self.memory[key] = found
        return found

    def config(self, gpu: str, per_node: int, nodes: int, link: str, net: float,
               transport: str, share: float) -> _Config:
        key = (gpu, per_node, nodes, link, net, transport, share)
        found = self.cache.get(key)
        if found is not None:
            return found
        profile = self.profile
        if gpu == "CPU":
            # a machine without a GPU (``--include-local``) runs only a CPU-measured profile,
            # at its measured speed; NaN drops the row otherwise
            speed = profile.throughput if profile.gpu == "CPU" else math.nan
            found = _Config(speed, 1.0, cpu_memory_plan(profile), NO_BAND)
        else:
            memory = self.memory_plan(gpu, per_node * nodes, share)
            pred = predict(
                self.source(gpu),
                gpu=gpu,
                gpus_per_node=per_node,
                nodes=nodes,
                inter_node_gbps=net,
                intra_node_link=link or None,
                inter_node_transport=transport,
                batch_size=memory.micro_batch,
                grad_accum_steps=memory.grad_accum_steps,
                member_gpus=self.node_gpus * nodes if self.node_gpus else None,
            )
            throughput = pred.throughput
            if memory.extra_allreduce and pred.gpu_count > 1:
                step = pred.step_time_s + memory.extra_allreduce * pred.allreduce_s
                throughput = pred.samples_per_step / step
            found = _Config(throughput, pred.efficiency, memory, pred.band)
        self.cache[key] = found
        return found


@dataclass(frozen=True)
class _ConfigCodes:
    """Per offer: small integer codes of the columns a performance prediction depends on."""

    gpu: npt.NDArray[np.int64]
    gpus: int
    link: npt.NDArray[np.int64]
    links: int
    net: npt.NDArray[np.int64]  # the fabric's Gbit/s per node
    nets: int
    transport: npt.NDArray[np.int64]  # the fabric's transport (rdma, tcp)
    transports: int
    net_gbps: npt.NDArray[np.float64]  # per offer: its fabric's Gbit/s and transport
    transport_name: npt.NDArray[np.str_]
    fabric: npt.NDArray[np.object_]  # per offer: its fabric in words
    node_limit: npt.NDArray[np.int64]  # the provider's largest group
    share: npt.NDArray[np.int64]  # the share of one GPU (below 1: a fractional offer)
    shares: int
    share_of: npt.NDArray[np.float64]  # per offer: that share

    @classmethod
    def of(cls, offers: Offers, factors: _OfferFactors, request: Request) -> _ConfigCodes:
        def codes(values: np.ndarray) -> tuple[npt.NDArray[np.int64], int]:
            factor = Factor.of(values)
            return factor.codes, factor.radix

        provider = factors.provider
        # Fractional GPUs (AWS g6f) run one process on a slice: one GPU's speed, scaled down
        # after the prediction, with the slice's memory
        share_of = np.minimum(offers.gpu_count, 1.0)
        limits = np.array([node_limit(str(p)) for p in provider.values], dtype=np.int64)
        fabrics = resolve_fabrics(provider, offers.instance_type,
                                  offers.network_gbps, set_gbps=request.inter_node_gbps,
                                  set_transport=request.inter_node_transport)
        return cls(factors.gpu.codes, factors.gpu.radix, factors.intra_node_link.codes,
                   factors.intra_node_link.radix, *codes(fabrics.gbps),
                   *codes(fabrics.transport), np.asarray(fabrics.gbps, dtype=np.float64),
                   np.asarray(fabrics.transport, dtype=str),
                   np.asarray(fabrics.description).astype(object),
                   limits[provider.codes], *codes(share_of), share_of)


@dataclass(frozen=True)
class _OfferText:
    """Per offer, the text columns a plan shows, as object arrays: every plan of an offer then
    shares its strings instead of holding a fixed-width copy (and, but for the instance type
    and zone, every offer of one value too)."""

    provider: npt.NDArray[np.object_]
    region: npt.NDArray[np.object_]
    zone: npt.NDArray[np.object_]
    instance_type: npt.NDArray[np.object_]
    gpu: npt.NDArray[np.object_]
    intra_node_link: npt.NDArray[np.object_]
    source: npt.NDArray[np.object_]
    price_date: npt.NDArray[np.object_]

    @classmethod
    def of(cls, offers: Offers, factors: _OfferFactors) -> _OfferText:
        return cls(
            provider=factors.provider.objects(),
            region=factors.region.objects(),
            zone=offers.zone.astype(object),
            instance_type=offers.instance_type.astype(object),
            gpu=factors.gpu.objects(),
            intra_node_link=factors.intra_node_link.objects(),
            source=factors.source.objects(),
            price_date=factors.price_date.objects(),
        )


def _chunk_plans(
    request: Request,
    offers: Offers,
    base_offer: npt.NDArray[np.int64],
    base_spot: npt.NDArray[np.bool_],
    base_price: npt.NDArray[np.float64],
    counts: npt.NDArray[np.int64],
    predictor: _Predictor,
    factors: _OfferFactors,
    text: _OfferText,
    codes: _ConfigCodes,
    stale_sources: npt.NDArray[np.object_],
) -> tuple[Plans, npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    """Plans for some offer x market rows, each at every node count in ``counts`` its provider
    allows, with throughput, memory plan and $/job; and per plan, whether it can run at all
    (a GPU profile cannot be predicted on a CPU) and whether its batch fits."""
    allowed = counts[None, :] <= codes.node_limit[base_offer][:, None]
    row_base, count_index = np.nonzero(allowed)
    nodes = counts[count_index]
    offer = base_offer[row_base]
    spot = base_spot[row_base]
    price = base_price[row_base]
    gpu_count = offers.gpu_count[offer]
    whole = np.maximum(np.rint(gpu_count), 1.0).astype(np.int64)
    fraction = codes.share_of[offer]
    gpu = text.gpu[offer]

    # one prediction per distinct configuration in the chunk: a key packed from the codes of
    # GPU, its share, GPUs per node, node count, link and fabric, each digit below its radix
    key = np.zeros(len(offer), dtype=np.int64)
    for code, radix in ((codes.gpu[offer], codes.gpus), (np.minimum(whole, 4096), 4097),
                        (count_index, len(counts)), (codes.link[offer], codes.links),
                        (codes.net[offer], codes.nets),
                        (codes.transport[offer], codes.transports),
                        (codes.share[offer], codes.shares)):
        key = key * radix + code
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    configs = [predictor.config(str(gpu[i]), int(whole[i]), int(nodes[i]),
                                str(text.intra_node_link[o]), float(codes.net_gbps[o]),
                                str(codes.transport_name[o]), float(codes.share_of[o]))
               for i, o in zip(first.tolist(), offer[first].tolist(), strict=True)]
    inverse = inverse.reshape(-1)
    throughput = np.array([c.throughput for c in configs])[inverse] * fraction
    efficiency = np.array([c.efficiency for c in configs])[inverse]
    band_low = np.array([c.band.low for c in configs])[inverse]
    band_high = np.array([c.band.high for c in configs])[inverse]
    memory = [c.memory for c in configs]
    fits = np.array([m.fits for m in memory], dtype=bool)[inverse]
    peak = np.array([m.peak_gb for m in memory])[inverse]
    micro = np.array([m.micro_batch for m in memory], dtype=np.int64)[inverse]
    accum = np.array([m.grad_accum_steps for m in memory], dtype=np.int64)[inverse]
    sharding = np.array([m.sharding for m in memory], dtype=object)[inverse]
    note = np.array([m.reason for m in memory], dtype=object)[inverse]
    # a row the profile cannot run at all (a GPU profile on a CPU-only machine) is dropped;
    # a row whose batch does not fit is kept, marked, and costed at the unchanged batch
    runnable = np.isfinite(throughput) & (throughput > 0)

    market_text = np.where(spot, "spot", "on-demand")
    market = _MARKETS[spot.astype(np.int64)]  # one str per market, shared by its plans
    # the cost model matches these against its tables: fixed-width text compares fastest
    inputs = CostInputs(
        provider=offers.provider[offer],
        instance_type=offers.instance_type[offer],
        market=market_text,
        reliability=offers.reliability[offer],
        nodes=nodes.astype(np.float64),
        price_hr=price,
        on_demand_hr=offers.price_hr[offer],
        network_gbps=offers.network_gbps[offer],
        storage_gb_month=offers.storage_gb_month[offer],
        egress_gb=offers.egress_gb[offer],
        ingress_gb=offers.ingress_gb[offer],
        month_hours=offers.month_hours[offer],
    )
    hours = request.job.samples / np.where(runnable, throughput, 1.0) / 3600.0
    # setup and interruption rates depend on the offer and market, not on the node count
    terms = offer_terms(
        request.economics, provider=factors.provider.take(base_offer),
        instance_type=offers.instance_type[base_offer],
        market=np.where(base_spot, "spot", "on-demand"),
        reliability=offers.reliability[base_offer]).take(row_base)
    costs = job_costs(inputs, hours, request.economics, terms=terms)
    source = text.source[offer]
    plans = Plans(
        provider=text.provider[offer],
        region=text.region[offer],
        zone=text.zone[offer],
        instance_type=text.instance_type[offer],
        gpu=gpu,
        gpu_count=gpu_count,
        nodes=nodes,
        market=market,
        price_hr=price,
        throughput=throughput,
        hours=hours,
        # compute hours scale with 1 / throughput: the band of the throughput bounds them
        cost_low_usd=costs.cost_usd - costs.compute_usd * (1.0 - 1.0 / band_high),
        cost_high_usd=costs.cost_usd + costs.compute_usd * (1.0 / band_low - 1.0),
        **costs.columns(),  # the expected $/job, its terms and the unit prices behind them
        usd_per_hour_total=nodes * price,
        efficiency=efficiency,
        # what a multi-node plan's nodes talk over (a one-node plan crosses no network)
        inter_node_fabric=np.where(nodes > 1, codes.fabric[offer], ""),
        gpu_memory_gb=offers.gpu_memory_gb[offer],
        peak_gb=peak,
        micro_batch=micro,
        grad_accum_steps=accum,
        sharding=sharding,
        memory_note=note,
        price_date=text.price_date[offer],
        source=source,
        stale=np.isin(source, stale_sources),
    )
    return plans, runnable, fits


def _one_per_region(region: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The first offer of each (provider, region, instance type, on-demand price) code: zones
    kept for their own spot prices share their region's on-demand price."""
    return np.sort(np.unique(region, return_index=True)[1]).astype(np.int64)


def _base_rows(
    offers: Offers, filters: Filters, on_demand: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_], npt.NDArray[np.float64]]:
    """Offer x market rows: (offer index, spot?, $/h per node in that market); ``on_demand``:
    the offers that carry the on-demand market (``_one_per_region``)."""
    idx: list[npt.NDArray[np.int64]] = []
    spot: list[npt.NDArray[np.bool_]] = []
    price: list[npt.NDArray[np.float64]] = []
    if filters.market in ("any", "on-demand"):
        idx.append(on_demand)
        spot.append(np.zeros(len(on_demand), dtype=bool))
        price.append(offers.price_hr[on_demand])
    if filters.market in ("any", "spot"):
        has_spot = ~np.isnan(offers.spot_price_hr) & (offers.spot_price_hr > 0)
        idx.append(np.flatnonzero(has_spot).astype(np.int64))
        spot.append(np.ones(int(has_spot.sum()), dtype=bool))
        price.append(offers.spot_price_hr[has_spot])
    base_idx, base_spot, base_price = np.concatenate(idx), np.concatenate(spot), np.concatenate(
        price)
    if filters.max_price_hr is not None:
        keep = base_price <= filters.max_price_hr
        base_idx, base_spot, base_price = base_idx[keep], base_spot[keep], base_price[keep]
    return base_idx, base_spot, base_price


def rank(request: Request) -> Ranking:
    """Every plan that passes the filters, ranked by expected $/job (or by expected time); the
    plans whose per-device batch fits no way on their GPU are kept apart in ``unfit``."""
    now = request.now or dt.datetime.now(dt.UTC)
    filters = request.filters
    if filters.max_nodes < 1:
        raise InputError(f"max nodes must be at least 1, got {filters.max_nodes}")
    if filters.max_nodes > MAX_NODES:
        raise InputError(f"max nodes must be at most {MAX_NODES:,}, got {filters.max_nodes:,}",
                         hint=f"gpucost plans groups of up to {MAX_NODES:,} nodes")
    snapshots = request.snapshots
    offers = merge_offers(snapshots)
    total = len(offers)
    offers, arch_note = filter_cpu_arch(filter_offers(offers, filters), filters)
    offers, factors, zones_folded, region = fold_zones(offers, _OfferFactors.of(offers))
    per_region = _one_per_region(region)
    base_offer, base_spot, base_price = _base_rows(offers, filters, per_region)
    if not len(base_offer):
        raise NoOffersError(
            f"no offer matches the filters ({total:,} offers before filtering)",
            hint=arch_note or "relax --gpu/--provider/--region/--max-price-hr/--spot, "
            "or run `gpucost prices show`",
        )
    text = _OfferText.of(offers, factors)
    stale = sorted({s.source for s in snapshots if is_stale(s, request.stale_days, now)})
    stale_sources = np.array(stale, dtype=object)
    counts = node_counts(filters.max_nodes)
    codes = _ConfigCodes.of(offers, factors, request)
    predictor = _Predictor(request.profile, request.node_gpus)
    per_chunk = max(1, CHUNK_ROWS // len(counts))
    chunks: list[Plans] = []
    keeps: list[npt.NDArray[np.bool_]] = []
    drops: list[npt.NDArray[np.bool_]] = []
    local_unrunnable = 0
    for start in range(0, len(base_offer), per_chunk):
        part = slice(start, start + per_chunk)
        chunk, runnable, fits = _chunk_plans(request, offers, base_offer[part], base_spot[part],
                                             base_price[part], counts, predictor, factors,
                                             text, codes, stale_sources)
        chunks.append(chunk)
        keeps.append(runnable & fits)
        drops.append(runnable & ~fits)
        local_unrunnable += int(np.count_nonzero(~runnable & (chunk.provider == "local")))
    every = chunks[0] if len(chunks) == 1 else Plans.concat(chunks)
    # one gather each for the ranked plans and the left-out ones, in their final order
    kept, dropped = np.flatnonzero(np.concatenate(keeps)), np.flatnonzero(np.concatenate(drops))
    if not len(kept) and not len(dropped):
        raise NoOffersError(
            "no offer can run this profile (a GPU profile cannot be "
            "predicted on a CPU-only machine)",
            hint="add cloud prices, or measure the profile on this CPU",
        )
    plans = every.take(kept[_order(every, kept, request.sort)])
    left_out = every.take(dropped[_order(every, dropped, request.sort)])
    sources = [
        PriceSource(s.source, s.date, round(s.age_days(now), 1), s.source in stale,
                    len(s.offers), str(s.path) if s.path else None)
        for s in snapshots
    ]
    notes = [note for given, matched in filters.gpu_matches
             if filters.gpus and (note := match_note(given, matched))]
    notes += [arch_note] if arch_note else []
    on_demand_zones = len(offers) - len(per_region) if filters.market != "spot" else 0
    if zones_folded or on_demand_zones:
        notes.append(f"zones that repeat their region's prices are one row per region "
                     f"({zones_folded + on_demand_zones:,} zone rows folded; spot keeps each "
                     "zone's own price)")
    if filters.market == "on-demand":
        notes.append("spot offers not searched: on-demand only (--spot, or market=\"any\" "
                     "in Python, ranks spot capacity too)")
    verdict = request.profile.verdict
    if verdict is not None and verdict.kind in ("dataloader-bound", "host-bound"):
        # the prediction keeps that time as measured on every GPU: say why fast GPUs gain little
        notes.append(f"profile {request.profile.name} is {verdict.kind} ({verdict.reason}): a "
                     f"faster GPU than its {request.profile.gpu} shortens only the device part "
                     f"of a step, so extra GPU speed is money for little time; {verdict.advice}")
    if local_unrunnable:
        notes.append("your machine (--include-local) left out: it has no GPU, and a profile "
                     "measured on a GPU cannot be predicted on a CPU (profile the job on this "
                     "machine with `gpucost profile` to plan it here)")
    if stale:
        notes.append(
            f"price data older than {request.stale_days:g} days from: "
            f"{', '.join(stale)}; run `gpucost prices refresh`"
        )
    notes += memory_notes(request.profile, plans, left_out)
    notes += band_notes(plans)
    if filters.max_nodes > DENSE_NODE_COUNTS:
        notes.append(
            f"node counts above {DENSE_NODE_COUNTS} step about "
            f"{2 ** (1 / COUNTS_PER_DOUBLING) - 1:.0%} apart; groups are capped per provider "
            f"({', '.join(f'{k} {v}' for k, v in sorted(providers.node_limits().items()))}, others "
            f"{MAX_NODES:,})"
        )
    return Ranking(request, plans, left_out, sources, now, notes)


def _order(plans: Plans, rows: npt.NDArray[np.int64], sort: SortKey) -> npt.NDArray[np.int64]:
    """The order of ``rows`` of ``plans`` by $/job, then time (or time, then $/job); rows equal
    in both keep their order (as ``np.lexsort``)."""
    cost, wall = plans.cost_usd[rows], plans.total_hours[rows]
    first, second = (cost, wall) if sort == "cost" else (wall, cost)
    return _sorted_by(first, second)


def _sorted_by(first: npt.NDArray[np.float64],
               second: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
    """``np.lexsort((second, first))`` with one sort of the whole column, not two: the runs
    that tie on ``first`` (a few hundred of 150,000 plans) are then sorted by ``second``."""
    order = np.argsort(first, kind="stable").astype(np.int64)
    ranked = first[order]
    # NaN ties NaN, as in numpy's sorts
    tied = (ranked[1:] == ranked[:-1]) | (np.isnan(ranked[1:]) & np.isnan(ranked[:-1]))
    if tied.any():
        run = np.cumsum(np.concatenate(([True], ~tied)))  # each position's run of equal keys
        in_tie = np.zeros(len(order), dtype=bool)
        in_tie[1:] |= tied
        in_tie[:-1] |= tied
        at = np.flatnonzero(in_tie)
        order[at] = order[at][np.lexsort((second[order[at]], run[at]))]
    return order


def band_notes(plans: Plans, top: int = 5) -> list[str]:
    """When the cheapest plan's cost band overlaps the next ones' (``gpucost.model.bands``),
    say how many: their order is within the prediction's error."""
    if len(plans) < 2:
        return []
    order = np.argsort(plans.cost_usd[:10 * top], kind="stable")[:top]
    first = int(order[0])
    close = [int(i) for i in order[1:]
             if plans.cost_low_usd[i] <= plans.cost_high_usd[first]]
    if not close:
        return []
    return [f"the cheapest plan's cost band ({usd(plans.cost_low_usd[first])}-"
            f"{usd(plans.cost_high_usd[first])}, about 8 in 10 held-out predictions) overlaps "
            f"the next {len(close)}: their order is within the prediction's error; measure "
            "them before a long run"]


def memory_notes(profile: Profile, plans: Plans, unfit: Plans) -> list[str]:
    """What the memory rule did, in words."""
    unknown = unknown_memory_note(profile)
    notes = [unknown] if unknown else []
    replanned = int(np.count_nonzero(plans.memory_note != ""))
    if replanned:
        notes.append(
            f"{replanned:,} plans re-planned so batch {profile.batch_size} fits their GPU "
            "(micro-batches with gradient accumulation, or sharded states), at their "
            "predicted throughput cost"
        )
    if len(unfit):
        reasons = sorted(set(unfit.memory_note.tolist()))
        notes.append(
            f"{len(unfit):,} plans left out: the per-device batch fits no way on their GPU "
            f"({reasons[0]}{'; ...' if len(reasons) > 1 else ''}); --show-unfit lists them"
        )
    return notes
