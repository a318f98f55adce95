"""Run an unmodified training script under the profiler, in this process.

The script runs through ``runpy.run_path(..., run_name="__main__")`` with ``sys.argv`` set to
its own arguments, after two hooks are installed:

- global optimizer step hooks (``torch.optim.optimizer.register_optimizer_step_*_hook``): each
  ``optimizer.step()`` ends a profiler step and is timed as the optimizer share;
- ``torch.utils.data.DataLoader.__iter__`` returns the profiler's timing wrapper, so the wait
  for each batch and its sample count are measured.

A script that uses :class:`StepProfiler` itself also works: profilers it creates delegate to
the runner's (see :func:`~gpucost.profiler.core.driving`), and once it marks steps with
``prof.step()`` those marks, not ``optimizer.step()``, end the steps.

After warm-up, detail and ``steps`` timed steps the profiler raises
:class:`~gpucost.profiler.core.ProfilingComplete` out of ``optimizer.step()``; it unwinds the
script and is caught here. A script that ends early, raises, or is interrupted (SIGINT, or
SIGTERM, turned into the same unwinding) leaves what was measured: the caller builds a partial
profile from it, or gets a clear error when too few steps were timed.
"""

from __future__ import annotations

import os
import runpy
import sys
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from gpucost.errors import InputError
from gpucost.profiler.core import ProfilingComplete, StepProfiler, driving, sigterm_raises
from gpucost.profiler.environment import redact_args

OUTCOMES = ("complete", "ended", "crashed", "interrupted")


# Not in errors.py: unwinds the profiled script on SIGTERM and is caught by run_script.
class Terminated(BaseException):
    """SIGTERM arrived while the script ran."""


@dataclass
class ScriptRun:
    profiler: StepProfiler
    outcome: str  # one of OUTCOMES
    error: BaseException | None = None
    traceback: str = ""  # the script's own frames, for a crash


def _script_traceback(exc: BaseException, script: Path) -> str:
    """The traceback from the script's first frame on (runpy and gpucost frames dropped)."""
    tb: TracebackType | None = exc.__traceback__
    target = str(script.resolve())
    while tb is not None and os.path.abspath(tb.tb_frame.f_code.co_filename) != target:
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb or exc.__traceback__))


@contextmanager
def _script_context(script: Path, args: Sequence[str]) -> Iterator[None]:
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [str(script), *args]
    sys.path.insert(0, str(script.resolve().parent))  # as `python script.py` would
    try:
        with sigterm_raises(Terminated):
            yield
    finally:
        sys.argv = saved_argv
        sys.path[:] = saved_path


@contextmanager
def _timed_dataloaders(prof: StepProfiler) -> Iterator[None]:
    from torch.utils.data import DataLoader

    original = DataLoader.__iter__

    def timed_iter(loader: Any) -> Any:
        return prof.wrap(original(loader), stop_when_done=False)

    DataLoader.__iter__ = timed_iter  # type: ignore[method-assign]
    try:
        yield
    finally:
        DataLoader.__iter__ = original  # type: ignore[method-assign]


def run_script(script: str | os.PathLike[str], args: Sequence[str] = (), *,
               name: str | None = None, steps: int = 20, warmup: int = 3, trace_steps: int = 2,
               precision: str | None = None, batch_size: int | None = None,
               sample_unit: str = "samples") -> ScriptRun:
    """Run ``script`` with ``args`` until ``steps`` timed optimizer steps are measured."""
    path = Path(script)
    if not path.is_file():
        raise InputError(f"training script {str(path)!r} not found",
                         hint="pass the path of a Python file that runs a training loop")
    prof = StepProfiler(name=name or path.stem, steps=steps, warmup=warmup,
                        trace_steps=trace_steps, batch_size=batch_size, precision=precision,
                        sample_unit=sample_unit, stop_when_done=True,
                        source=" ".join(["gpucost profile", path.name, *redact_args(args)]))
    run = ScriptRun(profiler=prof, outcome="ended")
    prof.hook_all_optimizers()
    prof.start()
    try:
        with _script_context(path, args), _timed_dataloaders(prof), driving(prof):
            runpy.run_path(str(path), run_name="__main__")
    except ProfilingComplete:
        run.outcome = "complete"
    except SystemExit as exc:
        if exc.code not in (None, 0):
            run.outcome, run.error = "crashed", exc
    except (KeyboardInterrupt, Terminated) as exc:
        run.outcome, run.error = "interrupted", exc
        prof.partial = True
    except BaseException as exc:  # the user's script failed: report it, keep the measurement
        run.outcome, run.error = "crashed", exc
        run.traceback = _script_traceback(exc, path)
        prof.partial = True
    finally:
        prof.close()
    return run
