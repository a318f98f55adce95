"""Shared fixtures. Every test gets its own GPUCOST_HOME: nothing touches ~/.gpucost."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"


def pytest_configure(config: pytest.Config) -> None:
    # Ctrl-C as an interactive shell delivers it. A job that a script starts in the background
    # (a CI runner's `cmd &`, `.ci/run` under `nohup ... &`) inherits SIGINT ignored, and so do
    # the processes it starts: the tests that interrupt a profile or a price refresh waited for
    # a signal that never arrived (the in-process one ran 10**6 steps). A handled signal is
    # reset to the default in the children pytest execs.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    # One update path for every golden output: GPUCOST_UPDATE_GOLDENS=1 rewrites the text
    # goldens (tests/goldens.py) and the TUI's SVG snapshots (syrupy's --snapshot-update).
    from goldens import updating

    if updating() and hasattr(config.option, "update_snapshots"):
        config.option.update_snapshots = True


@pytest.fixture(autouse=True)
def _isolated_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("gpucost-home")
    monkeypatch.setenv("GPUCOST_HOME", str(home))
    yield home


@pytest.fixture
def shared_data() -> Path:
    """The reference data folder beside the project; tests that need it skip without it."""
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data is not present on this machine")
    return SHARED_DATA
