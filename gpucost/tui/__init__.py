"""The Textual front end (`gpucost tui`, the ``tui`` extra). Import :mod:`gpucost.tui.app`."""
