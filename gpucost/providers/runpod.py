"""RunPod: a marketplace of pods in its secure and community clouds."""

from gpucost.providers._provider import (
    MARKETPLACE_MONTH_HOURS,
    Marketplace,
    Provider,
    Rates,
    SkyPilot,
)

PROVIDER = Provider(
    name="runpod",
    display_name="RunPod",
    month_hours=MARKETPLACE_MONTH_HOURS,
    rates=Rates(
        "pod volume disk", 0.10, 0.20, 0.0, 0.0,
        "https://docs.runpod.io/pods/pricing (volume disk $0.10/GB-month running, $0.20/GB-month "
        "while the pod is stopped; network volume $0.07/GB-month; no data transfer fees)",
        "2025-06"),
    # SkyPilot's RunPod cloud lists multi-node as unsupported (tests/test_skypilot_engine.py).
    max_nodes=1,
    # Its catalog states GPU memory in wrong units.
    skypilot=SkyPilot("runpod", hosted_catalog=True),
    # A plan pins the region, not the datacentre; RunPod states no host reliability.
    marketplace=Marketplace(min_reliability=0.0),
    price_source="gpucost.providers.prices.runpod:SOURCE",
)
