"""Every third-party import is a declared dependency; pins the snapshots rely on hold."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

REPO_ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
# modules of this repository that tests, benchmarks and scripts import by their own name
LOCAL = {"gpucost"} | {
    p.stem for folder in ("tests", "bench", "scripts", "examples")
    for p in (REPO_ROOT / folder).rglob("*.py")
}


# import name -> distribution, for extras this environment does not install (gpucost[skypilot]
# has an environment of its own in .ci/run)
_NOT_INSTALLED_HERE = {"sky": "skypilot"}


def _requirements() -> dict[str, list[Requirement]]:
    project = PYPROJECT["project"]
    groups = {"core": [Requirement(r) for r in project["dependencies"]]}
    for extra, reqs in project["optional-dependencies"].items():
        groups[extra] = [Requirement(r) for r in reqs if not r.startswith("gpucost[")]
    return groups


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _imports(folder: str) -> dict[str, str]:
    """Top-level third-party module -> one file importing it."""
    found: dict[str, str] = {}
    for path in sorted((REPO_ROOT / folder).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in LOCAL:
                    found.setdefault(top, str(path.relative_to(REPO_ROOT)))
    return found


@pytest.mark.parametrize("folder", ["gpucost", "tests", "bench", "scripts"])
def test_every_import_is_declared(folder: str) -> None:
    declared = {_normal(r.name) for reqs in _requirements().values() for r in reqs}
    # pytest's own dependency, and the snapshot plugin's, come with what is declared
    declared |= {"packaging", "syrupy"}
    dists = importlib.metadata.packages_distributions()
    missing = []
    for module, where in _imports(folder).items():
        names = {_normal(d) for d in dists.get(module, [_NOT_INSTALLED_HERE.get(module, module)])}
        if not names & declared:
            missing.append(f"{module} ({where})")
    assert not missing, f"imported but not declared in pyproject.toml: {missing}"


def test_textual_is_pinned_to_the_version_of_the_svg_snapshots() -> None:
    (textual,) = [r for r in _requirements()["tui"] if r.name == "textual"]
    installed = Version(importlib.metadata.version("textual"))
    assert textual.specifier.contains(installed), (textual, installed)
    nxt = Version(f"{installed.major}.{installed.minor + 1}.0")
    assert not textual.specifier.contains(nxt), "a new textual minor would change the SVGs"


def test_nvml_bindings_are_declared_for_include_local() -> None:
    assert "nvidia-ml-py" in {_normal(r.name) for r in _requirements()["local"]}
    assert "local" in PYPROJECT["project"]["optional-dependencies"]["all"][0]


def _pandas_imports(tree: ast.AST) -> list[tuple[ast.AST | None, ast.AST]]:
    """(enclosing function or TYPE_CHECKING block or None, import node) for each pandas import."""
    out: list[tuple[ast.AST | None, ast.AST]] = []

    def visit(node: ast.AST, owner: ast.AST | None) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                names = ([a.name for a in child.names] if isinstance(child, ast.Import)
                         else [child.module or ""])
                if any(n.split(".")[0] == "pandas" for n in names):
                    out.append((owner, child))
            is_function = isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            is_typing = isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test)
            visit(child, child if is_function or is_typing else owner)

    visit(tree, None)
    return out


def test_pandas_is_imported_only_where_a_dataframe_is_returned() -> None:
    offenders, seen = [], 0
    for path in sorted((REPO_ROOT / "gpucost").rglob("*.py")):
        for owner, node in _pandas_imports(ast.parse(path.read_text(encoding="utf-8"))):
            seen += 1
            typing_only = isinstance(owner, ast.If)
            returns_frame = isinstance(owner, ast.FunctionDef) and owner.returns is not None \
                and "DataFrame" in ast.unparse(owner.returns)
            if not (typing_only or returns_frame):
                offenders.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno}")
    assert seen >= 2  # the API's DataFrames (gpucost.compare, Offers.to_pandas) are found
    assert not offenders, f"pandas imported where no DataFrame is returned: {offenders}"
