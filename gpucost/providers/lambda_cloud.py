"""Lambda (the module is not called ``lambda``: that is a Python keyword)."""

from gpucost.providers._provider import Provider, Rates, SkyPilot

PROVIDER = Provider(
    name="lambda",
    display_name="Lambda",
    rates=Rates(
        "persistent filesystem", 0.20, None, 0.0, 0.0,
        "https://lambda.ai/pricing (filesystem storage $0.20/GB-month; no egress or ingress fees). "
        "Lambda instances cannot be stopped, only terminated: keep data on a filesystem",
        "2025-06"),
    skypilot=SkyPilot("lambda", hosted_catalog=True, catalog_memory="per_gpu",
                      sxm_families=("gpu_8x_a100", "gpu_8x_v100", "gpu_8x_v100_n")),
    price_source="gpucost.providers.prices.lambda_cloud:SOURCE",
)
