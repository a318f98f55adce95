"""Imports: the light paths stay light, and gpucost's own modules are imported at module top.

`gpucost compare` is the command people run most and `gpucost --help` the first: neither may
load the heavy optional packages, and --help not even numpy. The command line imports only the
module of the command named (:mod:`gpucost.cli`'s registry is its one lazy import point), so
each command module imports what it needs at its top. Inside functions, an import of one of
gpucost's own modules hides a cycle or a slow path; the ones left are listed below with the
reason each must stay (a ratchet: a new one fails this test until it is justified here).
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from gpucost.cli import COMMANDS

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("torch", "textual", "boto3", "pandas", "sky")


def _modules_loaded(*argv: str) -> set[str]:
    """The modules a real `gpucost ARGV` process imported."""
    code = ("import runpy, sys\n"
            f"sys.argv = ['gpucost', *{list(argv)!r}]\n"
            "try:\n    runpy.run_module('gpucost', run_name='__main__')\n"
            "except SystemExit:\n    pass\n"
            "sys.stderr.write('\\nMODULES ' + ' '.join(sorted(sys.modules)) + '\\n')\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=300)
    line = next(x for x in done.stderr.splitlines() if x.startswith("MODULES "))
    return set(line.split()[1:])


def _top_modules_loaded(*argv: str) -> set[str]:
    """The top-level packages a real `gpucost ARGV` process imported."""
    return {m.partition(".")[0] for m in _modules_loaded(*argv)}


def _command_modules(loaded: set[str]) -> set[str]:
    """The command modules of gpucost.cli among ``loaded`` (not the shared helpers)."""
    return loaded & {f"gpucost.cli.{c.module}" for c in COMMANDS}


@pytest.mark.parametrize("argv", [("--help",), (), ("nosuch",)])
def test_help_imports_no_command_module_no_numpy_and_no_heavy_package(
        argv: tuple[str, ...]) -> None:
    """The top-level help, and the errors that print or point to it, come from the registry's
    help lines: no command's module is imported to say what the commands are."""
    loaded = _modules_loaded(*argv)
    assert "gpucost.cli" in loaded  # the probe ran gpucost at all
    assert not _command_modules(loaded), sorted(_command_modules(loaded))
    tops = {m.partition(".")[0] for m in loaded}
    assert not tops & {"numpy", *HEAVY}, sorted(tops & {"numpy", *HEAVY})


@pytest.mark.parametrize("argv, module", [(("gpus", "--help"), "gpus"),
                                          (("status", "--help"), "runs"),
                                          (("scale", "--help"), "scale")])
def test_a_command_imports_its_own_module_and_the_ones_it_reuses_only(
        argv: tuple[str, ...], module: str) -> None:
    """`gpucost scale` reuses predict's group arguments (so imports gpucost.cli.predict); no
    command loads another's module for nothing."""
    reuses = {"scale": {"gpucost.cli.predict"}}.get(module, set())
    assert _command_modules(_modules_loaded(*argv)) == {f"gpucost.cli.{module}", *reuses}


@pytest.mark.parametrize("argv", [("compare",), ("compare", "--help")])
def test_compare_imports_no_heavy_package(argv: tuple[str, ...]) -> None:
    loaded = _top_modules_loaded(*argv)
    assert "numpy" in loaded  # it really ranked (--help: its module imports the ranking)
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


# The in-function imports of gpucost's own modules that stay, per file, and why. (The public
# API in gpucost/__init__.py loads its parts on first use through importlib, on purpose, so that
# `import gpucost` stays cheap: it has no import statement here to count.)
ALLOWED: dict[str, tuple[int, str]] = {
    # The command modules import at their top what their command needs; these two commands
    # need an extra's package, which `gpucost tui --help` and `gpucost profile --help` (and
    # build_parser(), which builds every command's parser) must not load.
    "gpucost/cli/profile.py": (4, "command body: the profiler imports torch (an extra)"),
    "gpucost/cli/tui.py": (1, "command body: the TUI imports textual (an extra)"),
    # planfile imports this module, and the run commands (ps, status, launch) read plan files
    # without numpy, which model.fabrics loads.
    "gpucost/measurements.py": (1, "model.fabrics (numpy) stays lazy for the run commands"),
    # The runner imports verify, and cli/runs.py (status, ps, logs, stop, down, cleanup) hosts
    # launch, so it imports the runner: the planning core (numpy) loads only to name the
    # cheaper plan when a run is stopped.
    "gpucost/executor/verify.py": (2, "the ranking (numpy) stays lazy for the run commands"),
}


def _names_gpucost(node: ast.AST) -> bool:
    """Whether ``node`` is an import of one of gpucost's own modules."""
    if isinstance(node, ast.ImportFrom):
        return bool(node.level) or (node.module or "").startswith("gpucost")
    return isinstance(node, ast.Import) and any(a.name.startswith("gpucost") for a in node.names)


def _own_imports_in_functions(path: Path) -> int:
    tree = ast.parse(path.read_text())
    count = 0

    def visit(node: ast.AST, in_function: bool) -> None:
        nonlocal count
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            if in_function and _names_gpucost(child):
                count += 1
            visit(child, inner)

    visit(tree, False)
    return count


def test_own_modules_are_imported_at_module_top() -> None:
    found = Counter({str(p.relative_to(ROOT)): _own_imports_in_functions(p)
                     for p in sorted((ROOT / "gpucost").rglob("*.py"))})
    unexpected = {path: n for path, n in found.items() if n > ALLOWED.get(path, (0, ""))[0]}
    assert not unexpected, (
        f"imports of gpucost's modules inside functions: {unexpected}; move them to the "
        "module's top, or add the file to ALLOWED with the reason they must stay")


@pytest.mark.parametrize("path", sorted(ALLOWED))
def test_allowed_inner_imports_are_still_there(path: str) -> None:
    """An entry whose imports moved to the top is removed, so the ratchet only tightens."""
    assert _own_imports_in_functions(ROOT / path) == ALLOWED[path][0], path
