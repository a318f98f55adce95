"""The `gpucost` command: a thin front end over the Python API.

:data:`COMMANDS` lists every command in help order: its name, its one-line help and the module
under ``gpucost.cli`` that implements it. That module's ``register(subparsers)`` adds the full
parser (through :func:`add_command`, which takes the help line from here) and sets ``handler``
(``Callable[[argparse.Namespace], int]``); it imports what the command needs at its top.

This registry is the one lazy import point of the command line: :func:`main` imports only the
module of the command named on the command line. `gpucost --help`, `gpucost` alone and a
misspelt command get light stand-ins built from the help lines, so they load no command module
(and no numpy), and the help reads as it would with every parser built (:func:`build_parser`
with no command builds them all, for tests and documentation).

Errors from the exception tree become one line on stderr and an exit code: 0 ok, 1 policy
violated, 2 usage/input error, 3 stale data or internal; any other exception is a bug, reported
in one line as an internal error (exit 3).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from gpucost import __version__
from gpucost.errors import GpuCostError, InputError


@dataclass(frozen=True)
class Command:
    name: str  # the word on the command line
    help: str  # its line in `gpucost --help`
    module: str  # the module of gpucost.cli that registers it (several commands may share one)


# In help order; a module's commands are consecutive (it registers them together).
COMMANDS: tuple[Command, ...] = (
    # plan
    Command("compare", "rank offers by $/job for a profile and a job", "compare"),
    Command("plan", "recommend a plan under a deadline and a budget, and write it as plan.toml",
            "plan"),
    Command("explain", "show every $/job term of a plan, with units and price date", "explain"),
    Command("predict", "predict a profile's throughput on another GPU and node count", "predict"),
    Command("scale", "scaling curve: time, throughput, efficiency and $/job per node count, "
            "with knee", "scale"),
    Command("breakeven", "stop or destroy a machine between runs: break-even idle hours",
            "breakeven"),
    # measure and know
    Command("profile", "measure a training step (your script or a built-in model) and write a "
            "profile", "profile"),
    Command("calibrate", "list or forget the measurements your own runs taught the model",
            "calibrate"),
    Command("gpus", "list the GPU catalog (specs, units, sources) or show one GPU", "gpus"),
    Command("prices", "price snapshots: import a catalog, show what is loaded", "prices"),
    # run and check
    Command("launch", "run a plan: provision, verify, supervise, tear down", "runs"),
    Command("ps", "live resources and what they have cost so far", "runs"),
    Command("status", "a run's state, epoch, ETA, cost so far and metrics", "runs"),
    Command("logs", "a run's training log", "runs"),
    Command("stop", "stop a run's job; its idle policy then applies", "runs"),
    Command("down", "stop a run and destroy all its resources", "runs"),
    Command("cleanup", "destroy resources whose launcher is gone", "runs"),
    Command("probe", "run the close candidates for a few minutes each, measure, and re-rank",
            "probe"),
    Command("preflight", "check a plan file before launching it (for CI)", "preflight"),
    Command("tui", "browse plans, shape a job, write a plan file, watch runs (terminal UI)",
            "tui"),
)
_BY_NAME = {c.name: c for c in COMMANDS}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        # A usage error is an input error like any other: one line and exit 2 from main(),
        # pointing to the help instead of printing the whole usage.

        raise InputError(f"{message} (see `{self.prog} --help`)")


def add_command(sub: Any, name: str, **kwargs: Any) -> argparse.ArgumentParser:
    """The parser of command ``name``, with its help line from :data:`COMMANDS`; ``kwargs``
    (description, usage...) go to ``add_parser``."""
    parser: argparse.ArgumentParser = sub.add_parser(name, help=_BY_NAME[name].help, **kwargs)
    return parser


def command_word(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names: its first word that is not an option (the top-level options,
    -h and --version, take no value), or None."""
    for i, word in enumerate(argv):
        if word == "--":
            return argv[i + 1] if i + 1 < len(argv) else None
        if not word.startswith("-"):
            return word
    return None


def build_parser(load: Collection[str] | None = None) -> argparse.ArgumentParser:
    """The command line's parser: the full parsers of the commands in ``load`` (names from
    :data:`COMMANDS`; with the others of their modules) and stand-ins for the rest; with
    ``load`` None, every command's full parser."""
    parser = _Parser(
        prog="gpucost",
        description="Train on rented GPUs for the least money: "
        "$/job from measured throughput, not $/hour.",
    )
    parser.add_argument("--version", action="version", version=f"gpucost {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    wanted = {_BY_NAME[name].module for name in (_BY_NAME if load is None else load)}
    registered: set[str] = set()
    for entry in COMMANDS:
        if entry.module not in wanted:
            # a stand-in: its line in the help, and a valid choice that is never parsed
            add_command(sub, entry.name)
        elif entry.module not in registered:
            registered.add(entry.module)
            importlib.import_module(f"gpucost.cli.{entry.module}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    try:
        # Building the parser imports the command's module (a fraction of a second for the
        # planning commands): a Ctrl-C then is an interrupt like any other, not a traceback.
        word = command_word(words)
        parser = build_parser([word] if word in _BY_NAME else [])
        args = parser.parse_args(words)
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
        # The reader stopped early (`gpucost compare | head`): not a failure. Point stdout at
        # /dev/null so the interpreter's last flush finds no closed pipe (the handling Python's
        # signal documentation gives for SIGPIPE).
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
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
