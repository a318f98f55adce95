"""Google Cloud."""

from gpucost.providers._provider import Provider, Rates, SkyPilot

PROVIDER = Provider(
    name="gcp",
    display_name="Google Cloud",
    rates=Rates(
        "pd-balanced (us-central1)", 0.10, None, 0.12, 0.0,
        "https://cloud.google.com/compute/disks-image-pricing (pd-balanced $0.100/GB-month); "
        "https://cloud.google.com/vpc/network-pricing (Premium Tier internet egress 0-1 TiB "
        "$0.12/GB, ingress free)", "2025-06"),
    skypilot=SkyPilot("gcp", hosted_catalog=True, catalog_memory="per_gpu"),
    # inter-continental, to or from Asia (0.05 NA-EU), list price
    cross_continent_usd_gb=0.08,
    price_source="gpucost.providers.prices.gcp:SOURCE",
)
