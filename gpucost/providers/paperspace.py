"""Paperspace: launched through SkyPilot; no price source of its own."""

from gpucost.providers._provider import Provider, SkyPilot

PROVIDER = Provider(
    name="paperspace",
    display_name="Paperspace",
    skypilot=SkyPilot("paperspace"),
)
