"""Amazon Web Services."""

from gpucost.providers._provider import Provider, Rates, SkyPilot

PROVIDER = Provider(
    name="aws",
    display_name="AWS",
    rates=Rates(
        "EBS gp3 (us-east-1)", 0.08, None, 0.09, 0.0,
        "https://aws.amazon.com/ebs/pricing/ (gp3 $0.08/GB-month); "
        "https://aws.amazon.com/ec2/pricing/on-demand/ Data Transfer (first 10 TB/month out "
        "$0.09/GB, in free)", "2025-06"),
    skypilot=SkyPilot("aws", hosted_catalog=True, catalog_memory="per_gpu"),
    cross_continent_usd_gb=0.02,
    # GPU instances on Graviton hosts (g5g: T4G); the SkyPilot import leaves them out, a refresh
    # from AWS's own API may not.
    arm_instance_prefixes=("g5g.",),  # inter-region transfer, list price
    price_source="gpucost.providers.prices.aws:SOURCE",
)
