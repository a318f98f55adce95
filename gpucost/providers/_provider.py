"""The shape of a provider's declaration: every figure and name gpucost holds about one provider.

Plain frozen dataclasses and no imports of gpucost's own: the command line reads the registry to
build its help, so a declaration costs a few microseconds to load and pulls in nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

HYPERSCALER_MONTH_HOURS = 730.0  # 8,760 h / 12: AWS, GCP, Azure convert $/month to $/h this way
MARKETPLACE_MONTH_HOURS = 720.0  # 30-day month: the marketplaces bill storage on 720 h


@dataclass(frozen=True, slots=True)
class Rates:
    """Storage and data-transfer prices: what a $/hour list leaves out. Every figure is USD:
    storage in $/GB-month for the disk type a training VM uses, transfer in $/GB (first paid
    tier, to the internet); ``None`` is unknown (NaN in a snapshot). They change rarely, so each
    carries the public page it was read from and when."""

    storage_kind: str  # the disk type the figure is for
    storage_gb_month: float | None  # $/GB-month while the machine runs
    storage_stopped_gb_month: float | None  # $/GB-month while it is stopped (None: same as running)
    egress_gb: float | None  # $/GB out to the internet, first paid tier
    ingress_gb: float | None  # $/GB in
    source: str
    as_of: str  # YYYY-MM: when the source was read

    @property
    def stopped_gb_month(self) -> float | None:
        """$/GB-month a stopped machine's disk costs."""
        if self.storage_stopped_gb_month is not None:
            return self.storage_stopped_gb_month
        return self.storage_gb_month


@dataclass(frozen=True, slots=True)
class SkyPilot:
    """How SkyPilot knows the provider: the cloud it launches on, and its price catalog."""

    cloud: str  # SkyPilot's name for the cloud (`sky launch --cloud ...`)
    # The hosted catalog's GPU offers are ones the planner can use (`prices refresh
    # skypilot-hosted` downloads them); False where the catalog rents no GPUs gpucost models.
    hosted_catalog: bool = False
    # What the catalog's GpuInfo memory is: per GPU, the instance's total, or in wrong units
    # (then gpucost's GPU catalog says).
    catalog_memory: Literal["per_gpu", "per_instance", "unreliable"] = "unreliable"

    # How its catalog rows read (pricing.sources.skypilot_catalog):
    # instance families (the type up to its first ".") whose GPUs sit on an SXM board (NVLink)
    sxm_families: tuple[str, ...] = ()
    sxm_only_models: tuple[str, ...] = ()  # GPU models it rents only as SXM boards
    # Instance network bandwidth, Gbit/s, where the cloud states one figure (not "up to").
    network_gbps: Mapping[str, float] = field(default_factory=dict)
    # Where the accelerator column drops the GPU's variant but the instance type keeps it: a
    # pattern whose group 1 is the GPU as the provider writes it, spaces as "_".
    instance_type_gpu: re.Pattern[str] | None = None
    # A cloud that prices the host VM and its GPUs as two rows: the host types an accelerator
    # row of (accelerator, count) attaches to, and the catalog GPU each accelerator is.
    host_types: Callable[[str, int], tuple[str, ...]] | None = None
    host_gpu_names: Mapping[str, str] = field(default_factory=dict)

    # How a plan becomes its SkyPilot resources (executor.skypilot_task):
    label: str = ""  # the cloud's name in sentences for users
    # (catalog GPU, instance type) -> the provider's own GPU name and SkyPilot's accelerator
    # name for it; None: SkyPilot's common spelling (executor.skypilot_task.skypilot_gpu)
    gpu_name: Callable[[str, str], str] | None = None
    accelerator: Callable[[str, str], str] | None = None
    # False where an offer is gone by launch: SkyPilot picks a machine from its own catalog.
    pins_instance_type: bool = True
    # A marketplace region whose group 1 is its country: asked for only where the country is
    # the plan's search's (None: the plan's region is asked for as it is).
    region_country: re.Pattern[str] | None = None
    mounts_object_store: bool = True  # False: the job ships its checkpoints itself
    spot_is_bid: bool = False  # spot is a bid that a higher one outbids (a preemption)


@dataclass(frozen=True, slots=True)
class Marketplace:
    """A marketplace rents out machines that come and go: a plan records a search for a machine
    like the planned one, not the machine (``[marketplace]`` in a plan file)."""

    min_reliability: float  # the host reliability the search asks for (0: the provider states none)


@dataclass(frozen=True, slots=True)
class Provider:
    """Everything gpucost knows about one provider.

    Setup times and inter-node fabrics are sourced tables of rules, so they stay rows in
    ``gpucost/model/setup_times.csv`` and ``fabrics.csv``, keyed by ``name`` (a test checks that
    every key there is a registered provider).
    """

    name: str  # the offers' provider column, the --provider value, the plan's provider
    display_name: str
    month_hours: float = HYPERSCALER_MONTH_HOURS  # the provider's $/month -> $/hour convention
    rates: Rates | None = None
    max_nodes: int | None = None  # the largest group gpucost can launch; None: gpucost's limit
    skypilot: SkyPilot | None = None  # None: SkyPilot does not launch on it
    marketplace: Marketplace | None = None
    # Moving data to another continent, USD/GB, where the data is stored with this provider
    # (None: it leaves through internet egress, preflight's default).
    cross_continent_usd_gb: float | None = None
    # Instance-type prefixes of its GPU machines on Arm hosts, where the type alone says so.
    arm_instance_prefixes: tuple[str, ...] = ()
    # "module:attribute" of its live price source (a PriceSource), imported only by the pricing
    # registry: a source pulls httpx or boto3 and the snapshot format. None: no live source.
    price_source: str | None = None
