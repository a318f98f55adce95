"""Microsoft Azure."""

from gpucost.providers._provider import Provider, Rates, SkyPilot

PROVIDER = Provider(
    name="azure",
    display_name="Azure",
    rates=Rates(
        "Premium SSD P30, 1 TiB (East US), approx. per GB", 0.132, None, 0.087, 0.0,
        "https://azure.microsoft.com/pricing/details/managed-disks/ (P30 1,024 GiB $135.17/month); "
        "https://azure.microsoft.com/pricing/details/bandwidth/ (internet egress from North "
        "America, first 10 TB, $0.087/GB; ingress free)", "2025-06"),
    skypilot=SkyPilot("azure", hosted_catalog=True),
    cross_continent_usd_gb=0.05,  # inter-continental transfer, list price
    price_source="gpucost.providers.prices.azure:SOURCE",
)
