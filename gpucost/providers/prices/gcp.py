"""GCP Cloud Billing Catalog: a GPU machine's price composed from its GPU, vCPU and RAM SKUs.

Compute Engine (service 6F81-5844-456A) prices a GPU per GPU-hour, separately from the VM it is
attached to, which is priced per vCPU-hour ("<Series> Instance Core") and per GiB-hour of memory
("<Series> Instance Ram"). A machine's $/h is therefore

    gpus x GPU SKU + vCPUs x Core SKU + RAM GiB x Ram SKU

for every region in all three SKUs' ``serviceRegions``. ``MACHINES`` gives each accelerator-
optimized machine type's GPUs, vCPUs and memory (cloud.google.com/compute/docs/gpus and
/accelerator-optimized-machines); T4 and V100 attach to N1 VMs ("N1 Predefined Instance Core"),
priced on n1-standard-(8 x GPUs) as the SkyPilot importer does. On-demand uses
``usageType == "OnDemand"`` SKUs and spot the ``"Preemptible"`` ones; a region without all three
spot SKUs has no spot price (NaN). Commitment SKUs are ignored. A price is ``units`` (an int64 as
a string) + ``nanos`` / 1e9, summed in Decimal. "Balanced PD Capacity" SKUs (per GiB-month) give
the region's disk price, converted to $/GB-month; regions without one take the rates table's
figure.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections import Counter
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from gpucost.catalog import get_gpu
from gpucost.errors import ProviderError
from gpucost.http import RetryingHttp
from gpucost.pricing.rates import offer_rates
from gpucost.pricing.snapshot import Snapshot
from gpucost.pricing.sources.base import (
    HttpPriceSource,
    build_snapshot,
    expect,
    gpu_link,
    now_utc,
    parsing,
    resolve_gpu,
)
from gpucost.providers.gcp import PROVIDER

COMPUTE_SERVICE = "6F81-5844-456A"
SKUS_PATH = f"/v1/services/{COMPUTE_SERVICE}/skus"
PAGE_SIZE = 5000  # the API's maximum
MAX_PAGES = 1000
GIB_PER_GB = Decimal(10**9) / Decimal(2**30)  # a $/GiB price times this is $/GB

# machine type -> (series of its Core/Ram SKUs, GPU as the SKU describes it, GPUs, vCPUs, RAM GiB)
_ACCELERATOR_OPTIMIZED: dict[str, tuple[str, str, int, int, int]] = {
    "a2-highgpu-1g": ("A2", "A100", 1, 12, 85),
    "a2-highgpu-2g": ("A2", "A100", 2, 24, 170),
    "a2-highgpu-4g": ("A2", "A100", 4, 48, 340),
    "a2-highgpu-8g": ("A2", "A100", 8, 96, 680),
    "a2-megagpu-16g": ("A2", "A100", 16, 96, 1360),
    "a2-ultragpu-1g": ("A2", "A100 80GB", 1, 12, 170),
    "a2-ultragpu-2g": ("A2", "A100 80GB", 2, 24, 340),
    "a2-ultragpu-4g": ("A2", "A100 80GB", 4, 48, 680),
    "a2-ultragpu-8g": ("A2", "A100 80GB", 8, 96, 1360),
    "a3-highgpu-8g": ("A3", "H100 80GB", 8, 208, 1872),
    "g2-standard-4": ("G2", "L4", 1, 4, 16),
    "g2-standard-8": ("G2", "L4", 1, 8, 32),
    "g2-standard-12": ("G2", "L4", 1, 12, 48),
    "g2-standard-16": ("G2", "L4", 1, 16, 64),
    "g2-standard-24": ("G2", "L4", 2, 24, 96),
    "g2-standard-32": ("G2", "L4", 1, 32, 128),
    "g2-standard-48": ("G2", "L4", 4, 48, 192),
    "g2-standard-96": ("G2", "L4", 8, 96, 384),
}
# The GPU as the catalog names it, for each SKU spelling above (A2 boards are SXM4).
# T4 and V100 attach to general-purpose N1 VMs; like the SkyPilot importer, gpucost prices them
# on n1-standard-(8 x GPUs) (3.75 GB per vCPU), a common pairing that keeps data loading fed.
_N1_ATTACHED = {"T4": (1, 2, 4), "V100": (1, 2, 4, 8)}
MACHINES: tuple[tuple[str, str, str, int, int, int], ...] = (
    *((machine, *shape) for machine, shape in _ACCELERATOR_OPTIMIZED.items()),
    *((f"n1-standard-{8 * n}", "N1", model, n, 8 * n, int(8 * n * 3.75))
      for model, counts in _N1_ATTACHED.items() for n in counts),
)
GPU_NAMES = {"A100": "A100 SXM4 40GB", "A100 80GB": "A100 SXM4 80GB", "H100 80GB": "H100 SXM5 80GB",
             "L4": "L4", "T4": "T4", "V100": "V100 SXM2 16GB"}

_PREFIX = r"^(?:Spot Preemptible |Preemptible )?"
_GPU_SKU = re.compile(_PREFIX + r"Nvidia (?:Tesla )?(?P<model>.+?) GPU running in ", re.IGNORECASE)
_CORE_SKU = re.compile(_PREFIX + r"(?P<series>[A-Z0-9]+) (?:Predefined )?Instance Core running in ")
_RAM_SKU = re.compile(_PREFIX + r"(?P<series>[A-Z0-9]+) (?:Predefined )?Instance Ram running in ")
_DISK_SKU = re.compile(r"^Balanced PD Capacity in ")


def money(unit_price: Mapping[str, Any]) -> Decimal:
    """``units`` + ``nanos``/1e9 exactly; both carry the sign of a negative amount."""
    units = int(expect(unit_price.get("units", "0"), (str, int), "units"))
    nanos = expect(unit_price.get("nanos", 0), int, "nanos")
    if unit_price.get("currencyCode", "USD") != "USD":
        raise ValueError(f"currencyCode {unit_price['currencyCode']!r}, expected USD")
    amount = Decimal(units) + Decimal(nanos) / Decimal(10**9)
    if amount < 0:
        raise ValueError(f"negative price {amount}")
    return amount


class GcpSource(HttpPriceSource, declared=PROVIDER):
    credentials_hint = ("set GOOGLE_API_KEY to an API key with the Cloud Billing API enabled "
                        "(console.cloud.google.com/apis/credentials)")
    api_key_env = "GOOGLE_API_KEY"
    default_base_url = "https://cloudbilling.googleapis.com"

    def auth(self, secret: str) -> tuple[dict[str, str], dict[str, str]]:
        return {}, ({"key": secret} if secret else {})

    def fetch(self, client: RetryingHttp, *, now: dt.datetime | None = None) -> Snapshot:
        fetched_at = now_utc(now)
        skus: list[Any] = []
        token = ""
        pages = 0
        while True:
            params = {"currencyCode": "USD", "pageSize": str(PAGE_SIZE)}
            if token:
                params["pageToken"] = token
            page = client.get_json(SKUS_PATH, params=params)
            pages += 1
            with parsing(self.name, "SKU page"):
                expect(page, dict, "the answer")
                skus.extend(expect(page.get("skus", []), list, "skus"))
                token = str(expect(page.get("nextPageToken", ""), str, "nextPageToken"))
            if not token:
                break
            if pages >= MAX_PAGES:
                raise ProviderError(f"{self.name}: more than {MAX_PAGES} SKU pages; paging loops?")
        rows, counts = self.compose(skus)
        return build_snapshot(self, rows, fetched_at=fetched_at, provenance={
            "endpoint": SKUS_PATH, "pages": pages, "skus_read": len(skus), **counts,
            "machines_table": "cloud.google.com/compute/docs/accelerator-optimized-machines",
        })

    def compose(self, skus: list[Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Offers per (machine type, region) from the SKU list."""
        # (kind, key, market) -> region -> $/unit; kind gpu|core|ram, market OnDemand|Preemptible
        prices: dict[tuple[str, str, str], dict[str, Decimal]] = {}
        disk: dict[str, Decimal] = {}
        used: Counter[str] = Counter()
        for index, sku in enumerate(skus):
            with parsing(self.name, f"SKU {index}"):
                expect(sku, dict, "SKU")
                description = str(sku["description"])
                usage = str(sku["category"]["usageType"])
                regions = [str(r) for r in expect(sku.get("serviceRegions", []), list,
                                                  "serviceRegions")]
                expression = sku["pricingInfo"][0]["pricingExpression"]
                rates = expect(expression["tieredRates"], list, "tieredRates")
                # The last tier is the steady rate (earlier tiers are free allowances).
                amount = money(rates[-1]["unitPrice"]) if rates else None
                unit = str(expression["usageUnit"])
            if amount is None:
                used["without a price"] += 1
                continue
            if _DISK_SKU.match(description) and usage == "OnDemand" and unit == "GiBy.mo":
                for region in regions:
                    disk[region] = amount * GIB_PER_GB
                used["disk"] += 1
                continue
            if usage not in ("OnDemand", "Preemptible"):
                used[f"usage {usage}"] += 1
                continue
            # TPU and some spot SKUs say OnDemand: the description's prefix is authoritative.
            market = "Preemptible" if ("Preemptible" in description or usage == "Preemptible") \
                else "OnDemand"
            match = None
            for kind, pattern, want_unit in (("gpu", _GPU_SKU, "h"), ("core", _CORE_SKU, "h"),
                                             ("ram", _RAM_SKU, "GiBy.h")):
                match = pattern.match(description)
                if match:
                    if unit != want_unit:
                        raise ProviderError(f"{self.name}: SKU {sku.get('skuId')!r} "
                                            f"({description}) is priced per {unit!r}, "
                                            f"expected {want_unit!r}")
                    key = match["model"] if kind == "gpu" else match["series"]
                    for region in regions:
                        prices.setdefault((kind, key, market), {})[region] = amount
                    used[kind] += 1
                    break
            if match is None:
                used["other"] += 1

        rows = []
        for machine, series, model, gpus, vcpus, ram_gib in MACHINES:
            gpu = resolve_gpu(GPU_NAMES[model])
            if gpu is None:
                continue
            machine_price = {market: self._machine_price(prices, series, model, gpus, vcpus,
                                                         ram_gib, market)
                             for market in ("OnDemand", "Preemptible")}
            for region, hourly in sorted(machine_price["OnDemand"].items()):
                spot = machine_price["Preemptible"].get(region)
                rates = offer_rates(self.provider)
                if region in disk:
                    rates["storage_gb_month"] = float(disk[region])
                rows.append({
                    "provider": self.provider, "region": region, "instance_type": machine,
                    "gpu": gpu, "gpu_count": float(gpus), "gpu_memory_gb": _memory(gpu),
                    "vcpus": float(vcpus), "ram_gb": float(ram_gib), "price_hr": float(hourly),
                    "spot_price_hr": math.nan if spot is None else float(spot),
                    **rates, "intra_node_link": gpu_link(gpu),
                })
        return rows, {"skus_used": dict(sorted(used.items())),
                      "regions_with_disk_price": len(disk)}

    @staticmethod
    def _machine_price(prices: Mapping[tuple[str, str, str], Mapping[str, Decimal]], series: str,
                       model: str, gpus: int, vcpus: int, ram_gib: int,
                       market: str) -> dict[str, Decimal]:
        gpu = prices.get(("gpu", model, market), {})
        core = prices.get(("core", series, market), {})
        ram = prices.get(("ram", series, market), {})
        return {region: gpus * gpu[region] + vcpus * core[region] + ram_gib * ram[region]
                for region in gpu.keys() & core.keys() & ram.keys()}


def _memory(gpu: str) -> float:
    return get_gpu(gpu).memory_gb


SOURCE = GcpSource()
