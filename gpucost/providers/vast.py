"""Vast.ai: a marketplace of hosts' offers ("asks") that are rented by others within minutes."""

import re

from gpucost.providers._provider import (
    MARKETPLACE_MONTH_HOURS,
    Marketplace,
    Provider,
    Rates,
    SkyPilot,
)

# SkyPilot's Vast catalog: instance types "<n>x-<Vast gpu_name, spaces as _>-<cpus>-<RAM MiB>",
# regions Vast's geolocation "<place>, <country>, <continent>" ("Texas, US, NA", "US, NA").
INSTANCE_TYPE = re.compile(r"\d+x-(.+)-\d+-\d+")
REGION = re.compile(r"(?:.+, )?([A-Z]{2}), ([A-Z]{2})")
# Vast gpu_names that SkyPilot's Vast catalog renames (sky/catalog/data_fetchers/fetch_vast.py)
_RENAMED = {"TeslaV100": "V100", "TeslaT4": "T4", "TeslaP100": "P100",
            "QRTX6000": "RTX6000", "QRTX8000": "RTX8000"}


def gpu_name(name: str, instance_type: str = "") -> str:
    """Vast's own gpu_name for the plan's GPU: the one in a SkyPilot Vast instance type, else
    the catalog name without its memory size, and for data-centre boards only the model
    ("A100 SXM4 40GB" -> "A100"; Vast writes "A100 SXM4", which SkyPilot reduces the same)."""
    if bucket := INSTANCE_TYPE.fullmatch(instance_type):
        return bucket[1].replace("_", " ")
    name = re.sub(r"\s+\d+GB$", "", name)
    return name if name.startswith(("RTX", "GTX", "Quadro")) else name.split(" ")[0]


def accelerator(name: str, instance_type: str = "") -> str:
    """SkyPilot's Vast accelerator name, made from Vast's gpu_name as SkyPilot's Vast catalog
    makes it: no spaces, "Ada" -> "-Ada", the variant dropped ("RTX 3060 Ti" -> "RTX3060",
    "H100 SXM" -> "H100", "RTX 4070S Ti" -> "RTX4070")."""
    gpu = re.sub("Ada", "-Ada", re.sub(r"\s", "", gpu_name(name, instance_type)))
    gpu = re.sub(r"(Ti|PCIE|SXM4|SXM|NVL)$", "", gpu)
    gpu = re.sub(r"(RTX\d0\d0)(S|D)$", r"\1", gpu)
    return _RENAMED.get(gpu, gpu)


PROVIDER = Provider(
    name="vast",
    display_name="Vast.ai",
    month_hours=MARKETPLACE_MONTH_HOURS,
    # Storage and transfer are priced per offer: a snapshot from the Vast API carries them.
    rates=Rates(
        "per offer (storage_cost)", None, None, None, None,
        "https://docs.vast.ai (each offer states storage_cost $/GB-month billed on 720 h, and "
        "inet_up_cost/inet_down_cost $/GB; see a snapshot from the Vast API)", "2025-06"),
    max_nodes=1,  # SkyPilot's Vast cloud lists multi-node as unsupported
    skypilot=SkyPilot(
        "vast", hosted_catalog=True, catalog_memory="per_instance", instance_type_gpu=INSTANCE_TYPE,
        label="Vast", gpu_name=gpu_name, accelerator=accelerator,
        # Its instance types are SkyPilot's inventions over offers that come and go.
        pins_instance_type=False, region_country=REGION,
        mounts_object_store=False,  # SkyPilot's Vast cloud mounts no object store
        spot_is_bid=True),  # SkyPilot bids the offer's minimum bid
    # The reliability score of hosts that rarely drop rentals (the catalogs give none per offer).
    marketplace=Marketplace(min_reliability=0.95),
    price_source="gpucost.providers.prices.vast:SOURCE",
)
