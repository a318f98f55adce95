"""Vast.ai: a marketplace of hosts' offers ("asks") that are rented by others within minutes."""

from gpucost.providers._provider import (
    MARKETPLACE_MONTH_HOURS,
    Marketplace,
    Provider,
    Rates,
    SkyPilot,
)

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
    skypilot=SkyPilot("vast", hosted_catalog=True, catalog_memory="per_instance"),
    # The reliability score of hosts that rarely drop rentals (the catalogs give none per offer).
    marketplace=Marketplace(min_reliability=0.95),
    price_source="gpucost.providers.prices.vast:SOURCE",
)
