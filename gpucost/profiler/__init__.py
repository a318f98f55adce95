"""The step profiler: measure a training step, explain its bottleneck, probe the largest batch.

Importing this package imports torch; the planning path never does.

- :class:`StepProfiler` wraps a loop you can edit (``prof.wrap(loader)``, ``prof.step()``) or
  one you cannot (``prof.hook_optimizer(opt)``) and builds a :class:`~gpucost.profile.Profile`.
- :func:`run_script` runs an unmodified training script under it (``gpucost profile train.py``).
- :func:`probe_batch` finds the largest power-of-two batch that fits.
- :func:`profile_model` profiles a built-in reference workload (``gpucost profile --model``).
"""

from __future__ import annotations

from gpucost._optional import require

# Every module here imports torch: without it, one line naming the extra, whichever is imported
# (so the imports below come after this call).
# ruff: noqa: E402
require("torch", needed_for="the profiler (gpucost.profiler)")

from gpucost.profiler.core import ProfilingComplete, StepProfiler
from gpucost.profiler.flops import MemoryLimitExceeded, OpCensus
from gpucost.profiler.models import MODEL_NAMES, Workload, build
from gpucost.profiler.probe import ProbeResult, probe_batch
from gpucost.profiler.reference import profile_model
from gpucost.profiler.runner import ScriptRun, run_script

__all__ = [
    "MODEL_NAMES",
    "MemoryLimitExceeded",
    "OpCensus",
    "ProbeResult",
    "ProfilingComplete",
    "ScriptRun",
    "StepProfiler",
    "Workload",
    "build",
    "probe_batch",
    "profile_model",
    "run_script",
]
