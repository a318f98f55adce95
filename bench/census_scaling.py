"""How the census's cost grows with a step's length, against the same step without it, in one run.

    python bench/census_scaling.py [--steps 500] [--rounds 3]

A recurrent step unrolled by hand (an LSTM cell of 64 over T time steps, batch 4, a linear
head, backward) keeps a few storages alive per time step until its backward. The census
(``OpCensus``: FLOPs, bytes and the memory ledger) runs every operator through a Python
dispatch mode, so it costs tens of microseconds an operator whatever the step: its time should
double when T does. Printed, for T and 2T (best of ``--rounds``): the plain step, the census
step, their ratio, and the census's 2T over T time (2 for a cost linear in the step, 4 for a
quadratic one; before its ledger swept lazily it read 4-7 from 500 time steps up).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
from torch import nn

from gpucost.profiler import OpCensus


def lstm_step(steps: int) -> None:
    torch.manual_seed(0)
    cell, head = nn.LSTMCell(64, 64), nn.Linear(64, 8)
    x = torch.randn(steps, 4, 64)
    h = c = torch.zeros(4, 64)
    outs = []
    for t in range(steps):
        h, c = cell(x[t], (h, c))
        outs.append(head(h))
    torch.stack(outs).pow(2).mean().backward()


def best_of(rounds: int, run: object) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        run()  # type: ignore[operator]
        times.append(time.perf_counter() - started)
    return min(times)


def censused(steps: int) -> None:
    with OpCensus():
        lstm_step(steps)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    census_s = {}
    for steps in (args.steps, 2 * args.steps):
        plain = best_of(args.rounds, lambda s=steps: lstm_step(s))
        census_s[steps] = best_of(args.rounds, lambda s=steps: censused(s))
        print(f"T = {steps:5d}: plain {plain:.3f} s, census {census_s[steps]:.2f} s "
              f"({census_s[steps] / plain:.0f}x)")
    print(f"census time, 2T over T: {census_s[2 * args.steps] / census_s[args.steps]:.2f} "
          "(2: linear in the step's length; 4: quadratic)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
