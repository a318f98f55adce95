"""Verda (formerly DataCrunch): launched through SkyPilot,
priced from its catalog (`prices import skypilot-catalog`)."""

from gpucost.providers._provider import Provider, SkyPilot

PROVIDER = Provider(
    name="verda",
    display_name="Verda",
    max_nodes=1,  # SkyPilot's Verda cloud lists multi-node as unsupported
    skypilot=SkyPilot("verda", catalog_memory="per_gpu",
                      sxm_only_models=("A100", "H100", "H200")),
)
