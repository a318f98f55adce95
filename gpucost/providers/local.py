"""Your own machine (`compare --include-local`): one node, no rent, no setup."""

from gpucost.providers._provider import Provider

PROVIDER = Provider(name="local", display_name="this machine", max_nodes=1)
