"""The TUI's screens: offers, plan detail, runs, and the dialogs (confirm, write plan, help)."""
