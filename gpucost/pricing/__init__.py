"""Price data: the snapshot format, refreshes from live sources, catalog importers and the
per-provider rates."""
