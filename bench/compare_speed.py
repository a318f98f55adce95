"""Rank a generated catalog of 100,000 offers for one profile, end to end through the public API.

    python bench/compare_speed.py [--offers 100000] [--repeat 5]

Prints the median wall time of ``gpucost.compare(...)`` (snapshot load, filtering, prediction,
costing, ranking, DataFrame) next to a naive per-row Python loop over the same offers measured
in the same run — the same model called plan by plan: ``predict()`` and the library's
``job_costs()`` on one row at a time, then a sort (timed on a sample of offers and scaled, since
it is slow) — and their ratio; and one ``predict()`` call's time, as the naive loop and
`gpucost scale` make it (tests/test_perf_model.py keeps only a deadline ten times as loose).
Goals: under 1 s, at least 50x faster than the naive loop, predict() under 300 us per call.
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
from gpucost.catalog import all_gpus, get_gpu
from gpucost.model.economics import CostInputs, JobParams, job_costs
from gpucost.model.perf import predict
from gpucost.planning.fit import plan_memory
from gpucost.pricing.snapshot import Offers, Snapshot, write_snapshot


def generate_offers(n: int, seed: int = 0) -> Offers:
    rng = np.random.default_rng(seed)
    # x86-64 hosts only: compare leaves Grace (arm64) hosts out unless asked, the naive loop
    # would not
    gpus = [g for g in all_gpus() if g.vendor == "NVIDIA" and not g.name.startswith(("GH", "GB"))]
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


# what the cost model reads from the offer itself (the rest is the plan's market and node count)
_COST_INPUT_OFFER_COLUMNS = ("provider", "instance_type", "reliability", "network_gbps",
                             "storage_gb_month", "egress_gb", "ingress_gb", "month_hours")


def naive_rank(
    offers: Offers, profile: gpucost.Profile, samples: float, limit: int | None = None
) -> tuple[list[tuple[float, int]], int]:
    """The obvious per-row loop over the same model: for every offer and market, predict its
    throughput and price the job with the library's own cost function, then sort.

    Returns the ranked (cost, row) pairs and the number of offers visited; ``limit`` stops
    early so that a slow loop can be timed on a sample and extrapolated.
    """
    rows = offers.to_records()
    if limit is not None:
        rows = rows[:limit]
    params = JobParams()
    ranked = []
    for i, row in enumerate(rows):
        per_node = max(1, round(row["gpu_count"]))
        memory = plan_memory(profile, get_gpu(row["gpu"]), per_node)
        if not memory.fits:  # left out by the memory rule, as compare leaves it out
            continue
        pred = predict(
            profile,
            gpu=row["gpu"],
            gpus_per_node=per_node,
            nodes=1,
            intra_node_link=row["intra_node_link"] or None,
            batch_size=memory.micro_batch,
            grad_accum_steps=memory.grad_accum_steps,
        )
        hours = samples / pred.throughput / 3600.0
        markets = [("on-demand", row["price_hr"])]
        if row["spot_price_hr"] is not None and not np.isnan(row["spot_price_hr"]):
            markets.append(("spot", row["spot_price_hr"]))
        for market, price in markets:
            one = CostInputs(
                **{k: np.array([row[k]]) for k in _COST_INPUT_OFFER_COLUMNS},
                market=np.array([market]),
                nodes=np.array([1.0]),
                price_hr=np.array([price]),
                on_demand_hr=np.array([row["price_hr"]]),
            )
            cost = job_costs(one, np.array([hours]), params).cost_usd[0]
            ranked.append((float(cost), i))
    ranked.sort()
    return ranked, len(rows)


PREDICT_GPUS = ("T4", "V100 SXM2 16GB", "A100 SXM4 80GB", "H100 SXM5 80GB", "RTX 4090", "L4")


def predict_per_call_s(profile: gpucost.Profile, calls: int = 3000) -> float:
    """Seconds per ``predict()`` call over GPUs, node counts and batch sizes, best of three."""
    predict(profile, gpu="A100 SXM4 80GB", gpus_per_node=8, nodes=2)  # warm the catalog
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for i in range(calls):
            predict(profile, gpu=PREDICT_GPUS[i % len(PREDICT_GPUS)], gpus_per_node=8,
                    nodes=1 + i % 4, inter_node_gbps=100.0, intra_node_link="nvlink",
                    batch_size=(None, 128)[i % 2])
        best = min(best, (time.perf_counter() - t0) / calls)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--offers", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--naive-sample",
        type=int,
        default=10_000,
        help="offers the naive loop visits; its time is scaled to all offers",
    )
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
        sample = min(args.naive_sample, len(offers))
        t0 = time.perf_counter()
        naive, visited = naive_rank(offers, profile, samples, limit=sample)
        slow = (time.perf_counter() - t0) * len(offers) / visited
    # the same plans get the same price: check on the sample the naive loop visited
    first = offers.select(np.arange(sample))
    with tempfile.TemporaryDirectory() as tmp:
        part = write_snapshot(
            Snapshot(source="bench", fetched_at=dt.datetime.now(dt.UTC), offers=first), Path(tmp)
        )
        check = gpucost.compare(profile, samples=samples, prices=[part])
    assert len(check) == len(naive), (len(check), len(naive))
    assert abs(check["cost_usd"].iloc[0] - naive[0][0]) <= 1e-6 * naive[0][0]
    print(f"offers: {args.offers:,}  plans ranked: {len(frame):,}")
    print(f"gpucost.compare (median of {args.repeat}): {fast:.3f} s   [goal < 1 s]")
    print(
        f"naive per-row loop (memory rule + predict + job_costs per plan; {sample:,} offers timed, "
        f"scaled to {args.offers:,}): {slow:.3f} s"
    )
    print(f"speed-up: {slow / fast:.0f}x   [goal >= 50x]")
    print(f"predict(): {predict_per_call_s(profile) * 1e6:.0f} us per call   [goal < 300 us]")


if __name__ == "__main__":
    main()
