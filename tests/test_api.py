"""The public API: what `import gpucost` offers, and what it costs to import."""

from __future__ import annotations

import subprocess
import sys

import gpucost


def test_all_lists_exactly_the_lazy_exports() -> None:
    assert set(gpucost.__all__) == {"__version__", *gpucost._EXPORTS}


def test_every_export_resolves_to_a_callable_or_class() -> None:
    for name in gpucost._EXPORTS:
        assert callable(getattr(gpucost, name)), name


def test_submodules_do_not_shadow_the_functions_of_the_same_name() -> None:
    code = (
        "import gpucost.planning.api, gpucost.planfile, gpucost.reporting, gpucost; "
        "assert callable(gpucost.compare) and callable(gpucost.report); "
        "assert callable(gpucost.plan); import types; "
        "assert not isinstance(gpucost.compare, types.ModuleType); "
        "assert not isinstance(gpucost.plan, types.ModuleType)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_import_is_cheap() -> None:
    code = (
        "import sys, gpucost; "
        "print(sorted(m for m in ('numpy', 'pandas', 'torch', 'textual', 'boto3', 'rich') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
