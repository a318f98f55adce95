"""Google Cloud."""

from gpucost.providers._provider import Provider, Rates, SkyPilot

# Its catalog prices a GPU machine as two rows in the same zone: the host VM and the attached
# GPUs. The host comes from GCP's naming: A100 -> a2-highgpu-<n>g (16 -> a2-megagpu-16g),
# A100-80GB -> a2-ultragpu-<n>g, H100 -> a3-highgpu-<n>g, H100-MEGA -> a3-megagpu-8g, H200 ->
# a3-ultragpu-8g, B200 -> a4-highgpu-8g (host price 0.0: the B200 row carries it all), L4 ->
# every g2-standard size with that many L4s (one offer each); T4, V100, P4 and P100 attach to
# any N1 host.
_HOST_BY_ACCELERATOR: dict[str, str] = {
    "A100": "a2-highgpu-{n}g", "A100-80GB": "a2-ultragpu-{n}g", "H100": "a3-highgpu-{n}g",
    "H100-MEGA": "a3-megagpu-{n}g", "H200": "a3-ultragpu-{n}g", "B200": "a4-highgpu-{n}g",
}
_G2_BY_L4_COUNT: dict[int, tuple[int, ...]] = {1: (4, 8, 12, 16, 32), 2: (24,), 4: (48,),
                                               8: (96,)}
_N1_ACCELERATORS = ("T4", "V100", "P4", "P100")


def host_types(accelerator: str, count: int) -> tuple[str, ...]:
    """The machine types an accelerator row of ``count`` GPUs attaches to: the family's
    ``<n>g`` size, every g2-standard size with that many L4s, or for the N1 GPUs
    n1-standard-(8 x GPUs), at most 96 vCPUs (a common pairing that keeps data loading off the
    critical path)."""
    if accelerator in _HOST_BY_ACCELERATOR:
        if accelerator == "A100" and count == 16:
            return ("a2-megagpu-16g",)
        return (_HOST_BY_ACCELERATOR[accelerator].format(n=count),)
    if accelerator == "L4":
        return tuple(f"g2-standard-{v}" for v in _G2_BY_L4_COUNT.get(count, ()))
    if accelerator in _N1_ACCELERATORS:
        return (f"n1-standard-{min(8 * count, 96)}",)
    return ()


PROVIDER = Provider(
    name="gcp",
    display_name="Google Cloud",
    rates=Rates(
        "pd-balanced (us-central1)", 0.10, None, 0.12, 0.0,
        "https://cloud.google.com/compute/disks-image-pricing (pd-balanced $0.100/GB-month); "
        "https://cloud.google.com/vpc/network-pricing (Premium Tier internet egress 0-1 TiB "
        "$0.12/GB, ingress free)", "2025-06"),
    skypilot=SkyPilot(
        "gcp", hosted_catalog=True, catalog_memory="per_gpu",
        # GPU machine types documentation (maximum network bandwidth incl. GPUDirect NICs)
        network_gbps={"a2-highgpu-8g": 100, "a2-megagpu-16g": 100, "a2-ultragpu-8g": 100,
                      "a3-highgpu-8g": 1000, "a3-megagpu-8g": 1800, "a3-ultragpu-8g": 3600,
                      "a4-highgpu-8g": 3600},
        host_types=host_types,
        host_gpu_names={
            "A100": "A100 SXM4 40GB", "A100-80GB": "A100 SXM4 80GB", "H100": "H100 SXM5 80GB",
            "H100-MEGA": "H100 SXM5 80GB", "H200": "H200 SXM 141GB", "V100": "V100 SXM2 16GB",
            "P100": "P100 PCIe 16GB"}),
    # inter-continental, to or from Asia (0.05 NA-EU), list price
    cross_continent_usd_gb=0.08,
    price_source="gpucost.providers.prices.gcp:SOURCE",
)
