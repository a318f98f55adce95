"""Cudo Compute: launched through SkyPilot; no price source of its own."""

from gpucost.providers._provider import Provider, SkyPilot

PROVIDER = Provider(
    name="cudo",
    display_name="Cudo Compute",
    skypilot=SkyPilot("cudo"),
)
