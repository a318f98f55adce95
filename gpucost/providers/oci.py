"""Oracle Cloud Infrastructure: launched through SkyPilot; no price source of its own."""

from gpucost.providers._provider import Provider, SkyPilot

PROVIDER = Provider(
    name="oci",
    display_name="Oracle Cloud",
    skypilot=SkyPilot("oci"),
)
