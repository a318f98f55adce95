"""The `gpucost` command: a thin front end over the Python API.

Each command lives in its own module under ``gpucost.cli`` exposing ``register(subparsers)``,
which adds its parser and sets ``handler`` (``Callable[[argparse.Namespace], int]``). Modules are
listed explicitly below; they import only light modules at top level so that every command,
`gpucost compare` above all, starts fast. Errors from the exception tree become one line on
stderr and an exit code: 0 ok, 1 policy violated, 2 usage/input error, 3 stale data or internal;
any other exception is a bug, reported in one line as an internal error (exit 3).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from gpucost import __version__
from gpucost.errors import GpuCostError, InputError

# Explicit registry, in help order. Each entry is a module of this package.
COMMAND_MODULES: tuple[str, ...] = (
    # plan
    "compare",
    "plan",
    "explain",
    "predict",
    "scale",
    "breakeven",
    # measure and know
    "profile",
    "calibrate",
    "gpus",
    "prices",
    # run and check
    "runs",
    "probe",
    "preflight",
    "tui",
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        # A usage error is an input error like any other: one line and exit 2 from main(),
        # pointing to the help instead of printing the whole usage.

        raise InputError(f"{message} (see `{self.prog} --help`)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="gpucost",
        description="Train on rented GPUs for the least money: "
        "$/job from measured throughput, not $/hour.",
    )
    parser.add_argument("--version", action="version", version=f"gpucost {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMAND_MODULES:
        module = importlib.import_module(f"gpucost.cli.{name}")
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        # Building the parser imports every command's module (about half a second): a Ctrl-C
        # then is an interrupt like any other, not a traceback.
        parser = build_parser()
        args = parser.parse_args(argv)
        handler = getattr(args, "handler", None)
        if handler is None:
            parser.print_help()
            return 2
        return int(handler(args))
    except GpuCostError as err:
        print(f"gpucost: error: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("gpucost: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as err:
        # A bug in gpucost, not the user's input: one line and exit 3 (internal error), as the
        # README promises, rather than a traceback; GPUCOST_DEBUG=1 shows the traceback.
        if os.environ.get("GPUCOST_DEBUG"):
            raise
        detail = " ".join(str(err).split()) or "no message"
        print(f"gpucost: internal error: {type(err).__name__}: {detail} (a bug in gpucost; "
              "run again with GPUCOST_DEBUG=1 for the traceback)", file=sys.stderr)
        return 3


if __name__ == "__main__":
    raise SystemExit(main())
