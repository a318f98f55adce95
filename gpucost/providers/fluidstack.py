"""Fluidstack: launched through SkyPilot; no price source of its own."""

from gpucost.providers._provider import Provider, SkyPilot

PROVIDER = Provider(
    name="fluidstack",
    display_name="Fluidstack",
    skypilot=SkyPilot("fluidstack"),
)
