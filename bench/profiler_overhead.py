"""Overhead of the always-on profiler, against the same training loop without it, in one run.

    python bench/profiler_overhead.py [--model mlp] [--batch 64] [--steps 100] [--rounds 15]

Three variants of one loop (a built-in model, forward + backward + optimizer step, batches
from an iterator) run in rotating order for several rounds: plain; under StepProfiler's
always-on part (loader wrapper, optimizer hooks, step marker; the census and trace steps are
switched off, as they are never part of the timed steps); and under torch.profiler, for
comparison. What a user pays is the always-on step time over the plain one: each round gives
one such ratio from two runs moments apart, and their median, with a bootstrap 95 % interval
for the noise, is printed for two separate measurements (on a shared machine one round's
ratio wanders by +-15 %, and the best-of-rounds of each variant by several per cent: neither
alone says what the profiler costs). The always-on cost is also measured directly: the same
instrumentation around an empty step, in microseconds, and as a share of the plain step.
"""

from __future__ import annotations

import argparse
import random
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


def _paired_ratios(w: Workload, batch: Any, steps: int, rounds: int,
                   variants: dict[str, Callable[[Workload, Iterator[Any], int], None]]
                   ) -> dict[str, list[float]]:
    """Per round, each variant's time per step; the order rotates between rounds."""

    def batches() -> Iterator[Any]:
        while True:
            yield batch

    per_step: dict[str, list[float]] = {name: [] for name in variants}
    names = list(variants)
    for r in range(rounds):
        for name in names[r % len(names):] + names[: r % len(names)]:
            start = time.perf_counter()
            variants[name](w, batches(), steps)
            per_step[name].append((time.perf_counter() - start) / steps)
    return per_step


def _median_ci(values: list[float], draws: int = 2000) -> tuple[float, float, float]:
    """Median and a bootstrap 95 % interval of it."""
    rng = random.Random(0)
    medians = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(draws))
    return statistics.median(values), medians[int(0.025 * draws)], medians[int(0.975 * draws)]


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
    _plain(w, iter([batch] * 10), 10)  # warm-up
    variants: dict[str, Callable[[Workload, Iterator[Any], int], None]] = {
        "plain": _plain, "gpucost always-on": _always_on, "torch.profiler": _torch_profiler}
    print(f"{args.model}, batch {args.batch}, {args.steps} steps x {args.rounds} rounds, "
          f"{args.threads} thread(s), torch {torch.__version__}")
    plain_s = []
    for measurement in (1, 2):  # measured twice: the two estimates show the noise between runs
        per_step = _paired_ratios(w, batch, args.steps, args.rounds, variants)
        plain_s += per_step["plain"]
        print(f" measurement {measurement}:")
        print(f"  {'variant':18s} {'best ms/step':>12s} {'median ms/step':>15s} "
              f"{'paired ratio to plain: median [95 % interval]':>47s}")
        for name in variants:
            ratios = [v / p for v, p in zip(per_step[name], per_step["plain"], strict=True)]
            med, lo, hi = _median_ci(ratios)
            paired = "" if name == "plain" else f"{med:.3f} [{lo:.3f}, {hi:.3f}]"
            print(f"  {name:18s} {min(per_step[name]) * 1e3:12.3f} "
                  f"{statistics.median(per_step[name]) * 1e3:15.3f} {paired:>47s}")
    cost = instrumentation_cost_s()
    print("what a user pays: the always-on step over the plain step, each round's pair (the "
          "rounds' noise is the interval); goal <= 1.01")
    print(f"always-on instrumentation alone: {cost * 1e6:.2f} µs/step = "
          f"{100 * cost / min(plain_s):.3f} % of the fastest plain step, "
          f"{100 * cost / statistics.median(plain_s):.3f} % of the median one")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
