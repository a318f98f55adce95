"""Nebius: launched through SkyPilot, priced from its catalog (`prices import skypilot-catalog`)."""

from gpucost.providers._provider import Provider, SkyPilot

PROVIDER = Provider(
    name="nebius",
    display_name="Nebius",
    skypilot=SkyPilot("nebius", catalog_memory="per_gpu",
                      sxm_only_models=("A100", "H100", "H200")),
)
