"""Shadeform: launched through SkyPilot,
priced from its catalog (`prices import skypilot-catalog`)."""

from gpucost.providers._provider import Provider, SkyPilot

PROVIDER = Provider(
    name="shadeform",
    display_name="Shadeform",
    max_nodes=1,  # SkyPilot's Shadeform cloud lists multi-node as unsupported
    skypilot=SkyPilot("shadeform"),
)
