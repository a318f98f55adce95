"""`gpucost tui`: the Textual front end over the same ranking, plan and run files."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from gpucost._optional import require
from gpucost.cli import add_command
from gpucost.errors import InputError
from gpucost.profile import resolve_profile


def register(sub: Any) -> None:
    p = add_command(
        sub, "tui",
        description="A terminal UI: the ranked plans for a profile and a job, re-ranked as you "
        "change the job (epochs, deadline, budget, spot, nodes, GPU), each plan's breakdown, "
        "scaling curve and break-even, a key to write the plan file, and live runs. Needs the "
        "tui extra: pip install 'gpucost[tui]'.",
    )
    p.add_argument("--profile", "-p", help="profile JSON file or example name "
                   "(default: resnet50-v100-amp)")
    p.add_argument("--prices", action="append", metavar="PATH",
                   help="price snapshot file or folder (repeatable; default: newest per source)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    require("textual", needed_for="the terminal UI")
    from gpucost.tui.app import GpuCostApp

    if args.profile is not None and not Path(args.profile).exists():
        resolve_profile(args.profile)  # a bad name fails here, as one line, not inside the UI
    for path in args.prices or ():
        if not Path(path).exists():
            raise InputError(f"--prices {path}: no such file or folder",
                             hint="give a snapshot file or folder, or leave --prices out")
    GpuCostApp(profile=args.profile, prices=args.prices).run()
    return 0
