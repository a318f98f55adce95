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
    skypilot=SkyPilot(
        "aws", hosted_catalog=True, catalog_memory="per_gpu",
        sxm_families=("p3", "p3dn", "p4d", "p4de", "p5", "p5e", "p5en", "p6-b200", "p6-b300"),
        # EC2 accelerated-computing instance specifications (network performance, EFA)
        network_gbps={
            "p3.8xlarge": 10, "p3.16xlarge": 25, "p3dn.24xlarge": 100,
            "p4d.24xlarge": 400, "p4de.24xlarge": 400, "p5.4xlarge": 100,
            "p5.48xlarge": 3200, "p5e.48xlarge": 3200, "p5en.48xlarge": 3200,
            "p6-b200.48xlarge": 3200, "p6-b300.48xlarge": 6400,
            "g4dn.12xlarge": 50, "g4dn.16xlarge": 50, "g4dn.metal": 100,
            "g5.12xlarge": 40, "g5.24xlarge": 50, "g5.48xlarge": 100,
            "g6.12xlarge": 40, "g6.24xlarge": 50, "g6.48xlarge": 100,
            "g6e.12xlarge": 100, "g6e.24xlarge": 200, "g6e.48xlarge": 400,
        }),
    cross_continent_usd_gb=0.02,
    # GPU instances on Graviton hosts (g5g: T4G); the SkyPilot import leaves them out, a refresh
    # from AWS's own API may not.
    arm_instance_prefixes=("g5g.",),  # inter-region transfer, list price
    price_source="gpucost.providers.prices.aws:SOURCE",
)
