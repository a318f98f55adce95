"""Rank a generated catalog of 100,000 offers for one profile, end to end through the public API.

    python bench/compare_speed.py [--offers 100000] [--repeat 5]

Prints the median wall time of ``gpucost.compare(...)`` (snapshot load, filtering, prediction,
costing, ranking, DataFrame) next to a naive per-row Python loop over the same offers measured
in the same run, and their ratio. Goals: under 1 s, at least 50x faster than the naive loop.
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

import gpucost
from gpucost.catalog import all_gpus
from gpucost.model.perf import predict
from gpucost.pricing.snapshot import Offers, Snapshot, write_snapshot


def generate_offers(n: int, seed: int = 0) -> Offers:
    rng = np.random.default_rng(seed)
    gpus = [g for g in all_gpus() if g.vendor == "NVIDIA"]
    pick = rng.integers(0, len(gpus), n)
    counts = rng.choice(np.array([1.0, 2.0, 4.0, 8.0]), n)
    base = np.array([g.fp16_tflops or g.fp32_tflops for g in gpus])[pick] / 100.0
    price = np.round(base * counts * rng.uniform(0.6, 1.8, n), 4)
    spot = np.where(rng.random(n) < 0.5, np.round(price * rng.uniform(0.3, 0.7, n), 4), np.nan)
    providers = np.array(["aws", "gcp", "azure", "lambda", "runpod", "vast"])
    regions = np.array([f"region-{i}" for i in range(40)])
    return Offers.from_columns(
        {
            "provider": providers[rng.integers(0, len(providers), n)].tolist(),
            "region": regions[rng.integers(0, len(regions), n)].tolist(),
            "instance_type": [f"inst-{i}" for i in range(n)],
            "gpu": [gpus[i].name for i in pick],
            "gpu_count": counts.tolist(),
            "gpu_memory_gb": [gpus[i].memory_gb for i in pick],
            "price_hr": price.tolist(),
            "spot_price_hr": [None if np.isnan(x) else float(x) for x in spot],
            "storage_gb_month": [0.1] * n,
            "egress_gb": [0.09] * n,
            "intra_node_link": rng.choice(np.array(["nvlink", "pcie"]), n).tolist(),
        }
    )


def naive_rank(offers: Offers, profile: gpucost.Profile, samples: float) -> list[tuple[float, int]]:
    """The obvious per-row loop: predict and cost each offer and market, then sort."""
    rows = offers.to_records()
    ranked = []
    for i, row in enumerate(rows):
        pred = predict(
            profile,
            gpu=row["gpu"],
            gpus_per_node=max(1, round(row["gpu_count"])),
            nodes=1,
            intra_node_link=row["intra_node_link"] or None,
        )
        hours = samples / pred.throughput / 3600.0
        ranked.append((row["price_hr"] * hours, i))
        if row["spot_price_hr"] is not None and not np.isnan(row["spot_price_hr"]):
            ranked.append((row["spot_price_hr"] * hours, i))
    ranked.sort()
    return ranked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--offers", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    offers = generate_offers(args.offers)
    profile = gpucost.Profile.from_measurement(
        gpu="V100 SXM2 16GB",
        throughput=833.42,
        batch_size=256,
        precision="amp",
        param_count=25.6e6,
        flops_per_sample=24.6e9,
    )
    samples = 90 * 1_281_167
    with tempfile.TemporaryDirectory() as tmp:
        snap = Snapshot(source="bench", fetched_at=dt.datetime.now(dt.UTC), offers=offers)
        path = write_snapshot(snap, Path(tmp))
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            frame = gpucost.compare(profile, samples=samples, prices=[path])
            times.append(time.perf_counter() - t0)
        fast = statistics.median(times)
        t0 = time.perf_counter()
        naive = naive_rank(offers, profile, samples)
        slow = time.perf_counter() - t0
    assert len(frame) == len(naive), (len(frame), len(naive))
    # the naive loop prices compute only: compare it with the compute term of the full $/job
    assert abs(frame["compute_usd"].min() - naive[0][0]) <= 1e-6 * naive[0][0]
    print(f"offers: {args.offers:,}  plans ranked: {len(frame):,}")
    print(f"gpucost.compare (median of {args.repeat}): {fast:.3f} s   [goal < 1 s]")
    print(f"naive per-row loop (1 run):        {slow:.3f} s")
    print(f"speed-up: {slow / fast:.0f}x   [goal >= 50x]")


if __name__ == "__main__":
    main()
