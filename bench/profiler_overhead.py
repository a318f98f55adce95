"""Overhead of the always-on profiler, against the same training loop without it, in one run.

    python bench/profiler_overhead.py [--model mlp] [--batch 64] [--steps 100] [--rounds 15]

Three variants of one loop (a built-in model, forward + backward + optimizer step, batches
from an iterator) run in rotating order for several rounds: plain; under StepProfiler's
always-on part (loader wrapper, optimizer hooks, step marker; the census and trace steps are
switched off, as they are never part of the timed steps); and under torch.profiler, for
comparison. Each prints its best round's time per step (other processes only ever add time,
so the minimum is the steadiest estimate) and its median, with ratios to plain. Because timing
noise on a shared machine is larger than the profiler's cost, the always-on cost is also
measured directly: the same instrumentation around an empty step, in microseconds, and as a
share of the plain step.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from gpucost.profiler import StepProfiler, build
from gpucost.profiler.core import quiet_stderr
from gpucost.profiler.models import Workload


def _plain(w: Workload, batches: Iterator[Any], steps: int) -> None:
    for _, (x, y) in zip(range(steps), batches, strict=False):
        w.forward_backward(x, y)
        w.optimizer.step()
        w.optimizer.zero_grad(set_to_none=True)


def _always_on(w: Workload, batches: Iterator[Any], steps: int) -> None:
    prof = StepProfiler(steps=steps, warmup=0, census=False, trace_steps=0, model=w.model,
                        calibrate=False)
    with prof:
        prof.hook_optimizer(w.optimizer)
        for x, y in prof.wrap(batches):
            w.forward_backward(x, y)
            w.optimizer.step()
            w.optimizer.zero_grad(set_to_none=True)
    assert prof.steps_timed == steps


def _torch_profiler(w: Workload, batches: Iterator[Any], steps: int) -> None:
    from torch.profiler import ProfilerActivity, profile

    trace = profile(activities=[ProfilerActivity.CPU])
    with quiet_stderr():
        trace.__enter__()  # type: ignore[no-untyped-call]
    try:
        _plain(w, batches, steps)
    finally:
        with quiet_stderr():
            trace.__exit__(None, None, None)  # type: ignore[no-untyped-call]


def instrumentation_cost_s(steps: int = 20_000) -> float:
    """Seconds per step of the always-on part alone: one batch, one optimizer step, a marker."""
    model = torch.nn.Linear(1, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    prof = StepProfiler(warmup=0, census=False, trace_steps=0, model=model, calibrate=False)
    batch = (torch.zeros(1, 1),)

    def endless() -> Iterator[tuple[torch.Tensor]]:
        while True:
            yield batch

    pre, post = prof._pre_opt, prof._post_opt_mark  # what optimizer.step's hooks call
    wrapped = iter(prof.wrap(endless()))
    bare = endless()
    with prof:
        start = time.perf_counter()
        for _ in range(steps):
            next(wrapped)
            pre(opt, (), {})
            post(opt, (), {})
        instrumented = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(steps):
        next(bare)
    baseline = time.perf_counter() - start
    return (instrumented - baseline) / steps


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--model", default="mlp")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1: steadier)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    w = build(args.model)
    batch = w.make_batch(args.batch)

    def batches() -> Iterator[Any]:
        while True:
            yield batch

    _plain(w, batches(), 10)  # warm-up
    variants: dict[str, Callable[[Workload, Iterator[Any], int], None]] = {
        "plain": _plain, "gpucost always-on": _always_on, "torch.profiler": _torch_profiler}
    per_step: dict[str, list[float]] = {name: [] for name in variants}
    names = list(variants)
    for r in range(args.rounds):
        for name in names[r % 3:] + names[: r % 3]:  # rotate the order: no variant always first
            start = time.perf_counter()
            variants[name](w, batches(), args.steps)
            per_step[name].append((time.perf_counter() - start) / args.steps)

    best_plain = min(per_step["plain"])
    median_plain = statistics.median(per_step["plain"])
    print(f"{args.model}, batch {args.batch}, {args.steps} steps x {args.rounds} rounds, "
          f"{args.threads} thread(s), torch {torch.__version__}")
    print(f"  {'variant':18s} {'best ms/step':>12s} {'ratio':>7s} {'median ms/step':>15s} "
          f"{'ratio':>7s}")
    for name in names:
        best, med = min(per_step[name]), statistics.median(per_step[name])
        print(f"  {name:18s} {best * 1e3:12.3f} {best / best_plain:7.3f} {med * 1e3:15.3f} "
              f"{med / median_plain:7.3f}")
    plain = best_plain
    cost = instrumentation_cost_s()
    print(f"always-on instrumentation alone: {cost * 1e6:.2f} µs/step = "
          f"{100 * cost / plain:.3f} % of the plain step (goal < 1 %)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
