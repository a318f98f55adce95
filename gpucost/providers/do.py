"""DigitalOcean: launched through SkyPilot; no price source of its own."""

from gpucost.providers._provider import Provider, SkyPilot

PROVIDER = Provider(
    name="do",
    display_name="DigitalOcean",
    skypilot=SkyPilot("do"),
)
