"""Rank offers by dollars per job, not dollars per hour (`gpucost compare`, `gpucost.compare`).

A *plan* is an offer (instance type in a region, from a price snapshot) x a market (on-demand
or spot) x a node count. For each plan: predicted group throughput (``gpucost.model.perf``),
hours for the job, and the expected $/job. Everything here runs over numpy columns, because
the command line cannot afford pandas' import; the Python API converts to a DataFrame at the
edge (:func:`compare`).

The performance model is called once per distinct (GPU, GPUs per node, nodes, link, network)
configuration, not once per offer: a 100,000-offer catalog has a few hundred of those.
"""

from __future__ import annotations

import datetime as dt
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from gpucost.errors import InputError, NoOffersError, UnknownProviderError
from gpucost.model.economics import COST_UNITS, JobParams, job_costs
from gpucost.model.fabrics import Fabrics, resolve_fabrics
from gpucost.pricing.registry import DEFAULT_MAX_AGE_DAYS, is_stale
from gpucost.pricing.snapshot import Offers, Snapshot, load_snapshots, merge_offers
from gpucost.profile import Profile, resolve_profile

if TYPE_CHECKING:
    import pandas as pd

Market = Literal["any", "on-demand", "spot"]
SortKey = Literal["cost", "time"]

COMPARE_KIND = "compare"  # schema gpucost-compare
COMPARE_SCHEMA_VERSION = 1


@dataclass(frozen=True, slots=True)
class Job:
    """How much training: total samples (in the profile's sample unit)."""

    samples: float
    description: str

    def __post_init__(self) -> None:
        from gpucost.limits import MAX_JOB_SAMPLES

        if not 0 < self.samples <= MAX_JOB_SAMPLES:  # NaN fails too
            raise InputError(
                f"the job is {self.samples:g} samples ({self.description}); at most "
                f"{MAX_JOB_SAMPLES:g} are planned",
                hint="check the units of --epochs, --dataset-size, --samples or --steps",
            )

    @classmethod
    def from_args(
        cls,
        profile: Profile,
        *,
        epochs: float | None = None,
        dataset_size: float | None = None,
        samples: float | None = None,
        steps: float | None = None,
    ) -> Job:
        given = [name for name, v in (("samples", samples), ("steps", steps)) if v is not None]
        if epochs is not None or dataset_size is not None:
            given.append("epochs/dataset-size")
        if len(given) > 1:
            raise InputError(
                f"give one job size, not {' and '.join(given)}",
                hint="use --epochs with --dataset-size, or --samples, or --steps",
            )
        unit = profile.sample_unit
        if samples is not None:
            _check_positive("samples", samples)
            return cls(float(samples), f"{_fmt_count(samples)} {unit}")
        if steps is not None:
            _check_positive("steps", steps)
            global_batch = profile.batch_size * profile.device_count
            return cls(
                float(steps) * global_batch,
                f"{_fmt_count(steps)} steps x {global_batch} {unit} (the profile's global batch)",
            )
        if epochs is None and dataset_size is None:
            if profile.epochs and profile.dataset_size:
                epochs, dataset_size = profile.epochs, profile.dataset_size
            else:
                raise InputError(
                    "no job size given and the profile has no default job",
                    hint="use --epochs with --dataset-size, or --samples, or --steps",
                )
        if epochs is None or dataset_size is None:
            missing = "--dataset-size" if dataset_size is None else "--epochs"
            if missing == "--dataset-size" and profile.dataset_size:
                dataset_size = profile.dataset_size
            elif missing == "--epochs" and profile.epochs:
                epochs = profile.epochs
            else:
                raise InputError(f"--epochs and --dataset-size go together: {missing} is missing")
        assert epochs is not None and dataset_size is not None
        _check_positive("epochs", epochs)
        _check_positive("dataset-size", dataset_size)
        return cls(
            float(epochs) * float(dataset_size),
            f"{_fmt_count(epochs)} epochs x {_fmt_count(dataset_size)} {unit}",
        )


def _check_positive(name: str, value: float) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise InputError(f"{name} must be a positive number, got {value!r}")


def _fmt_count(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.3g}"


@dataclass(frozen=True)
class Filters:
    gpus: tuple[str, ...] = ()  # canonical names; empty = all
    providers: tuple[str, ...] = ()
    regions: tuple[str, ...] = ()  # exact region names or prefixes ("us-", "europe")
    market: Market = "any"
    max_price_hr: float | None = None  # per node, in the plan's market
    min_gpu_memory_gb: float | None = None
    gpu_counts: tuple[float, ...] = ()
    max_nodes: int = 1


@dataclass
class Ranking:
    """Ranked plans as numpy columns, plus what a reader needs to trust them."""

    profile: Profile
    job: Job
    columns: dict[str, np.ndarray]
    sources: list[dict[str, Any]]
    sort: SortKey
    generated_at: dt.datetime
    notes: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.columns["cost_usd"])

    def head(self, n: int) -> Ranking:
        return Ranking(
            self.profile,
            self.job,
            {k: v[:n] for k, v in self.columns.items()},
            self.sources,
            self.sort,
            self.generated_at,
            self.notes,
        )

    def records(self) -> list[dict[str, Any]]:
        cols = {k: v.tolist() for k, v in self.columns.items()}
        out = []
        for i in range(len(self)):
            row = {}
            for k, values in cols.items():
                value = values[i]
                row[k] = None if isinstance(value, float) and math.isnan(value) else value
            out.append(row)
        return out

    def to_dict(self) -> dict[str, Any]:
        """The versioned JSON document of ``gpucost compare --format json``."""
        from gpucost.envelope import envelope

        body = {
            "profile": {
                "name": self.profile.name,
                "gpu": self.profile.gpu,
                "precision": self.profile.precision,
                "batch_size": self.profile.batch_size,
                "throughput": self.profile.throughput,
                "sample_unit": self.profile.sample_unit,
                "source": self.profile.source,
            },
            "job": {"samples": self.job.samples, "description": self.job.description},
            "sort": self.sort,
            "price_sources": self.sources,
            "notes": self.notes,
            "units": PLAN_UNITS,
            "plans": self.records(),
        }
        return envelope(
            COMPARE_KIND,
            body,
            schema_version=COMPARE_SCHEMA_VERSION,
            generated_at=self.generated_at,
        )

    def to_pandas(self) -> pd.DataFrame:
        import pandas as pd

        frame = pd.DataFrame(self.columns)
        frame.attrs["job"] = self.job.description
        frame.attrs["profile"] = self.profile.name
        frame.attrs["price_sources"] = self.sources
        return frame


# The plan table's columns and their units, in output order.
PLAN_UNITS: dict[str, str] = {
    "provider": "",
    "region": "",
    "zone": "",
    "instance_type": "",
    "gpu": "",
    "gpu_count": "GPUs per node",
    "nodes": "nodes",
    "market": "on-demand|spot",
    "price_hr": "USD/h per node",
    "throughput": "samples/s (whole group)",
    "hours": "h (compute)",
    "cost_usd": "USD (expected, whole job)",
    **COST_UNITS,
    "usd_per_hour_total": "USD/h (all nodes)",
    "efficiency": "fraction of linear scaling",
    "gpu_memory_gb": "GB per GPU",
    "price_date": "date of the price data",
    "source": "price snapshot source",
    "stale": "price data older than the threshold",
}


def _region_mask(regions: np.ndarray, wanted: Sequence[str]) -> np.ndarray:
    mask = np.zeros(len(regions), dtype=bool)
    lowered = np.char.lower(regions.astype(str))
    for item in wanted:
        mask |= np.char.startswith(lowered, item.lower())
    return mask


def filter_offers(offers: Offers, filters: Filters) -> Offers:
    """Offers passing the filters (markets and node counts are applied when plans expand)."""
    mask = np.ones(len(offers), dtype=bool)
    if filters.gpus:
        mask &= np.isin(offers["gpu"], np.array(filters.gpus))
    if filters.providers:
        known = sorted(set(offers["provider"].tolist()))
        for name in filters.providers:
            if name not in known:
                raise UnknownProviderError(name, known)
        mask &= np.isin(offers["provider"], np.array(filters.providers))
    if filters.regions:
        mask &= _region_mask(offers["region"], filters.regions)
    if filters.min_gpu_memory_gb is not None:
        mask &= offers["gpu_memory_gb"] >= filters.min_gpu_memory_gb
    if filters.gpu_counts:
        mask &= np.isin(offers["gpu_count"], np.array(filters.gpu_counts, dtype=float))
    return _drop_zone_duplicates(offers.select(mask))


def _drop_zone_duplicates(offers: Offers) -> Offers:
    """One row per (provider, region, instance type, prices): zones that only repeat a region's
    prices add nothing to a ranking. Zones with their own spot price stay."""
    if len(offers) < 2:
        return offers
    key = offers.row_codes(("provider", "region", "instance_type", "source", "price_hr",
                            "spot_price_hr"))
    _, first = np.unique(key, return_index=True)
    return offers.select(np.sort(first))


def _predict_configs(
    profile: Profile,
    gpu: np.ndarray,
    gpu_count: np.ndarray,
    nodes: np.ndarray,
    link: np.ndarray,
    fabrics: Fabrics,
) -> tuple[np.ndarray, np.ndarray]:
    """Throughput (samples/s) and scaling efficiency per row, one model call per distinct config."""
    from gpucost.measurements import source_for
    from gpucost.model.perf import predict

    gpu_names, gpu_code = np.unique(gpu, return_inverse=True)
    link_names, link_code = np.unique(link, return_inverse=True)
    net_values, net_code = np.unique(fabrics.gbps, return_inverse=True)
    transports, transport_code = np.unique(fabrics.transport, return_inverse=True)
    # the workload's own stored measurements, per target GPU (the profile itself if none)
    sources = [source_for(profile, str(g)).profile if g != "CPU" else profile
               for g in gpu_names]
    # Fractional GPUs (AWS g6f) run one process on a slice: predict one GPU, then scale down.
    whole = np.maximum(np.rint(gpu_count), 1.0).astype(np.int64)
    fraction = np.where(gpu_count < 1.0, gpu_count, 1.0)
    # One row per distinct configuration, compared column by column: a key packed into one
    # integer by fixed radices collides once a count passes its radix (1 GPU x 4,097 nodes
    # packed like 2 GPUs x 1 node).
    config = np.stack([gpu_code, whole, nodes.astype(np.int64), link_code, net_code,
                       transport_code], axis=1)
    unique_keys, first, inverse = np.unique(
        config, axis=0, return_index=True, return_inverse=True
    )
    inverse = inverse.reshape(-1)
    throughput = np.empty(len(unique_keys))
    efficiency = np.empty(len(unique_keys))
    for j, i in enumerate(first):
        if gpu_names[gpu_code[i]] == "CPU":
            # a machine without a GPU (``--include-local``) runs only a CPU-measured profile,
            # at its measured speed; NaN drops the row otherwise
            throughput[j] = profile.throughput if profile.gpu == "CPU" else np.nan
            efficiency[j] = 1.0
            continue
        pred = predict(
            sources[gpu_code[i]],
            gpu=str(gpu_names[gpu_code[i]]),
            gpus_per_node=int(whole[i]),
            nodes=int(nodes[i]),
            inter_node_gbps=float(net_values[net_code[i]]),
            intra_node_link=str(link_names[link_code[i]]) or None,
            inter_node_transport=str(transports[transport_code[i]]),
        )
        throughput[j] = pred.throughput
        efficiency[j] = pred.efficiency
    return throughput[inverse] * fraction, efficiency[inverse]


def _expand(offers: Offers, filters: Filters) -> dict[str, np.ndarray]:
    """Offers x markets x node counts, as plan columns (before prediction)."""
    n = len(offers)
    base = np.arange(n)
    parts_idx: list[np.ndarray] = []
    parts_market: list[np.ndarray] = []
    parts_price: list[np.ndarray] = []
    if filters.market in ("any", "on-demand"):
        parts_idx.append(base)
        parts_market.append(np.full(n, "on-demand"))
        parts_price.append(offers["price_hr"])
    if filters.market in ("any", "spot"):
        has_spot = ~np.isnan(offers["spot_price_hr"]) & (offers["spot_price_hr"] > 0)
        parts_idx.append(base[has_spot])
        parts_market.append(np.full(int(has_spot.sum()), "spot"))
        parts_price.append(offers["spot_price_hr"][has_spot])
    idx = np.concatenate(parts_idx)
    market = np.concatenate(parts_market)
    price = np.concatenate(parts_price)
    if filters.max_price_hr is not None:
        keep = price <= filters.max_price_hr
        idx, market, price = idx[keep], market[keep], price[keep]
    node_counts = np.arange(1, max(1, filters.max_nodes) + 1, dtype=np.float64)
    k = len(node_counts)
    cols = {name: np.repeat(arr[idx], k) for name, arr in offers.columns.items()}
    cols["market"] = np.repeat(market, k)
    cols["on_demand_hr"] = cols["price_hr"]  # the fallback price of spot plans
    cols["price_hr"] = np.repeat(price, k)
    cols["nodes"] = np.tile(node_counts, len(idx))
    return cols


def rank(
    profile: Profile,
    job: Job,
    snapshots: Sequence[Snapshot],
    filters: Filters = Filters(),
    *,
    sort: SortKey = "cost",
    stale_days: float = DEFAULT_MAX_AGE_DAYS,
    now: dt.datetime | None = None,
    job_params: JobParams | None = None,
) -> Ranking:
    """Every plan that passes the filters, ranked by expected $/job (or by expected time).

    ``job_params`` (data, checkpoint and results GB, setup minutes, interruption rate) feed the
    full $/job of :func:`gpucost.model.economics.job_costs`; the default moves no data.
    """
    now = now or dt.datetime.now(dt.UTC)
    if sort not in ("cost", "time"):
        raise InputError(f"sort must be 'cost' or 'time', got {sort!r}")
    if filters.max_nodes < 1:
        raise InputError(f"max nodes must be at least 1, got {filters.max_nodes}")
    offers = merge_offers(snapshots)
    total = len(offers)
    offers = filter_offers(offers, filters)
    cols = _expand(offers, filters)
    if len(cols["nodes"]) == 0:
        raise NoOffersError(
            f"no offer matches the filters ({total:,} offers before filtering)",
            hint="relax --gpu/--provider/--region/--max-price-hr/--spot, "
            "or run `gpucost prices show`",
        )
    fabrics = resolve_fabrics(cols["provider"], cols["instance_type"], cols["network_gbps"])
    # what a multi-node plan's nodes talk over (a one-node plan crosses no network)
    cols["inter_node_fabric"] = np.where(cols["nodes"] > 1, fabrics.description, "")
    throughput, efficiency = _predict_configs(
        profile,
        cols["gpu"],
        cols["gpu_count"],
        cols["nodes"],
        cols["intra_node_link"],
        fabrics,
    )
    runnable = np.isfinite(throughput) & (throughput > 0)
    if not runnable.all():
        cols = {k: v[runnable] for k, v in cols.items()}
        throughput, efficiency = throughput[runnable], efficiency[runnable]
        if not len(throughput):
            raise NoOffersError(
                "no offer can run this profile (a GPU profile cannot be "
                "predicted on a CPU-only machine)",
                hint="add cloud prices, or measure the profile on this CPU",
            )
    hours = job.samples / throughput / 3600.0
    costs = job_costs(cols, hours, job_params or JobParams())
    wall = costs["total_hours"]
    order_keys = (costs["cost_usd"], wall) if sort == "cost" else (wall, costs["cost_usd"])
    order = np.lexsort(order_keys[::-1])

    stale_sources = {s.source for s in snapshots if is_stale(s, stale_days, now)}
    out: dict[str, np.ndarray] = {
        "provider": cols["provider"],
        "region": cols["region"],
        "zone": cols["zone"],
        "instance_type": cols["instance_type"],
        "gpu": cols["gpu"],
        "gpu_count": cols["gpu_count"],
        "nodes": cols["nodes"].astype(np.int64),
        "market": cols["market"],
        "price_hr": cols["price_hr"],
        "throughput": throughput,
        "hours": hours,
        **costs,
        "usd_per_hour_total": cols["nodes"] * cols["price_hr"],
        "efficiency": efficiency,
        "inter_node_fabric": cols["inter_node_fabric"],
        "gpu_memory_gb": cols["gpu_memory_gb"],
        "price_date": cols["fetched_at"].astype("U10"),  # ISO timestamp -> its date
        "source": cols["source"],
        "stale": np.isin(cols["source"], np.array(sorted(stale_sources), dtype=str)),
    }
    out = {k: v[order] for k, v in out.items()}
    sources = [
        {
            "source": s.source,
            "date": s.date,
            "age_days": round(s.age_days(now), 1),
            "stale": s.source in stale_sources,
            "offers": len(s.offers),
            "path": str(s.path) if s.path else None,
        }
        for s in snapshots
    ]
    notes = []
    if stale_sources:
        notes.append(
            f"price data older than {stale_days:g} days from: "
            f"{', '.join(sorted(stale_sources))}; run `gpucost prices refresh`"
        )
    return Ranking(profile, job, out, sources, sort, now, notes)


def compare(
    profile: Profile | str | os.PathLike[str] | None = None,
    *,
    epochs: float | None = None,
    dataset_size: float | None = None,
    samples: float | None = None,
    steps: float | None = None,
    gpu: str | Sequence[str] | None = None,
    provider: str | Sequence[str] | None = None,
    region: str | Sequence[str] | None = None,
    market: Market = "any",
    max_price_hr: float | None = None,
    min_gpu_memory_gb: float | None = None,
    gpu_count: float | Sequence[float] | None = None,
    max_nodes: int = 1,
    sort: SortKey = "cost",
    prices: Sequence[str | os.PathLike[str]] | None = None,
    limit: int | None = None,
    data_gb: float = 0.0,
    checkpoint_gb: float = 0.0,
    results_gb: float = 0.0,
    setup_minutes: float | None = None,
    interruption_rate_per_hr: float | None = None,
    include_local: bool = False,
) -> pd.DataFrame:
    """Plans for a profile and a job, ranked by expected $/job; a pandas DataFrame.

    ``profile`` is a :class:`Profile`, a path to a profile JSON, or the name of an embedded
    example (default: the ResNet-50 example). Give the job as ``epochs`` with ``dataset_size``,
    or ``samples``, or ``steps`` (of the profile's global batch); without any, the profile's
    default job is used. ``prices`` are snapshot files or folders (default: the newest snapshot
    per source, user-refreshed first, else the embedded default).

    The job's data (``data_gb`` downloaded per node), ``checkpoint_gb`` (one checkpoint),
    ``results_gb`` (copied off) and ``setup_minutes`` (provisioning and image; default per provider
    and instance family, :mod:`gpucost.model.setup_times`) price setup,
    storage, transfers and spot rework; ``interruption_rate_per_hr`` overrides the sourced
    rates; ``include_local`` adds this machine (electricity at the default $/kWh).

    Columns include provider, region, instance_type, gpu, gpu_count, nodes, market, price_hr,
    hours (compute), total_hours (expected wall clock), cost_usd and its terms (compute_usd,
    setup_usd, storage_usd, egress_usd, ingress_usd, checkpoint_usd, spot_rework_usd), risk,
    worst_usd, throughput, price_date; ``frame.attrs`` carries the job and price sources.
    """
    prof = profile if isinstance(profile, Profile) else resolve_profile(profile)
    job = Job.from_args(
        prof, epochs=epochs, dataset_size=dataset_size, samples=samples, steps=steps
    )
    filters = make_filters(
        gpu=gpu,
        provider=provider,
        region=region,
        market=market,
        max_price_hr=max_price_hr,
        min_gpu_memory_gb=min_gpu_memory_gb,
        gpu_count=gpu_count,
        max_nodes=max_nodes,
    )
    params = JobParams(
        data_gb=data_gb,
        checkpoint_gb=checkpoint_gb,
        results_gb=results_gb,
        setup_minutes=setup_minutes,
        interruption_rate_per_hr=interruption_rate_per_hr,
    )
    snapshots = load_snapshots(prices)
    if include_local:
        from gpucost.local import local_snapshot

        snapshots = [*snapshots, local_snapshot()]
    ranking = rank(prof, job, snapshots, filters, sort=sort, job_params=params)
    if limit is not None:
        ranking = ranking.head(limit)
    return ranking.to_pandas()


def _as_tuple(value: Any) -> tuple[Any, ...]:
    if value is None:
        return ()
    if isinstance(value, str | int | float):
        return (value,)
    return tuple(value)


def make_filters(
    *,
    gpu: str | Sequence[str] | None = None,
    provider: str | Sequence[str] | None = None,
    region: str | Sequence[str] | None = None,
    market: str = "any",
    max_price_hr: float | None = None,
    min_gpu_memory_gb: float | None = None,
    gpu_count: float | Sequence[float] | None = None,
    max_nodes: int = 1,
) -> Filters:
    """Validated filters; GPU names in any spelling the catalog resolves."""
    from gpucost.catalog import resolve_gpu_name

    if market not in ("any", "on-demand", "spot"):
        raise InputError(f"market must be any, on-demand or spot, got {market!r}")
    for name, value in (
        ("max price per hour", max_price_hr),
        ("min GPU memory", min_gpu_memory_gb),
    ):
        if value is not None:
            _check_positive(name, value)
    counts = _as_tuple(gpu_count)
    for c in counts:
        _check_positive("GPU count", c)
    if isinstance(max_nodes, bool) or not isinstance(max_nodes, int) or max_nodes < 1:
        raise InputError(f"max nodes must be a positive integer, got {max_nodes!r}")
    return Filters(
        gpus=tuple(resolve_gpu_name(g) for g in _as_tuple(gpu)),
        providers=tuple(p.lower() for p in _as_tuple(provider)),
        regions=_as_tuple(region),
        market=market,  # type: ignore[arg-type]
        max_price_hr=max_price_hr,
        min_gpu_memory_gb=min_gpu_memory_gb,
        gpu_counts=tuple(float(c) for c in counts),
        max_nodes=max_nodes,
    )
