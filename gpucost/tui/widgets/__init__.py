"""The TUI's widgets: the job form, the offers table, the scaling chart."""
