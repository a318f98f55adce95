"""The stated limits every reader of a gpucost file enforces, in one place.

A value past one of these is a damaged or hostile file, not a bigger job: the readers refuse it
with one line naming the file and the field, rather than ask torchrun for 1e308 processes or
price a job at 1e308 USD/h.
"""

from __future__ import annotations

from gpucost import providers

# Prices are USD per hour for one node (machine). The dearest listed 8-GPU machines cost about
# 100 USD/h on demand; a hundred times that leaves room for bigger machines (and for tests that
# reach a budget cap within seconds) while 1e308 stays out.
MAX_PRICE_HR_USD = 10_000.0
# The largest group planned (compare/plan --max-nodes) and accepted in a plan file: the largest
# published training clusters run ~2,000-4,000 8-GPU nodes (e.g. 16,384 H100s for Llama 3).
MAX_NODES = 4096

MAX_GPUS_PER_NODE = 64  # the largest machines listed today carry 16
# A profile's per-device batch: recommendation models run ~1e5 samples per device; past 1e7 it
# is a damaged file (2**63 overflowed numpy's integers in the ranking).
MAX_BATCH_SIZE = 10_000_000

# Files: the deepest real document (a profile's operator table) nests 3 levels.
MAX_NESTING = 32
MAX_PLAN_BYTES = 1 << 20
MAX_POLICY_BYTES = 1 << 20
MAX_PROFILE_BYTES = 32 << 20  # a full per-operator table is a few hundred KB
MAX_RUN_FILE_BYTES = 1 << 20  # status.json, progress.json
MAX_METRICS_BYTES = 64 << 20  # metrics.jsonl: one line per report
# A price snapshot: the largest embedded one is 1.2 MB and ~6,000 offers. Ranking holds about
# 3.5 KB per offer at its peak (python bench/large_snapshot.py: 863 MiB for 250,000 offers, 3.3
# GB for 1,000,000), so the offers compare reads, one file or all merged, stop at what a laptop
# holds; the byte cap keeps the JSON parse before that count under a few hundred MB.
MAX_SNAPSHOT_BYTES = 64 << 20
MAX_SNAPSHOT_OFFERS = 250_000
MAX_CATALOG_BYTES = 256 << 20  # one imported catalog CSV (SkyPilot's largest is tens of MB)

# Provider APIs (gpucost.http, gpucost.pricing.refresh). A server that drips one byte every few
# seconds never trips a per-read timeout; these deadlines end it anyway.
HTTP_READ_TIMEOUT_S = 30.0  # connecting, or waiting for the next byte
HTTP_REQUEST_DEADLINE_S = 120.0  # one request: every attempt, backoff and the whole answer
MAX_ANSWER_BYTES = 64 << 20  # one answer (the largest price-API page is a few MB)
REFRESH_DEADLINE_S = 300.0  # `gpucost prices refresh` as a whole, every source together
# An answer with fewer offers than this fraction of the previous snapshot's is refused as
# suspicious: real catalogs move by a few percent a day, a cut-off or filtered answer by more.
MAX_REFRESH_SHRINK = 0.5

# Planning inputs (command-line options and the Python API's job size). Past these a number is
# a typo or a unit slip (hours for minutes, bytes for GB), not a bigger job: refused, exit 2.
MAX_JOB_SAMPLES = 1e15  # the largest published pretraining runs are ~1.5e13 tokens
MAX_EPOCHS = 1e6
MAX_DATA_GB = 1e6  # a petabyte on each node
MAX_DEADLINE_HOURS = 87_600.0  # ten years
MAX_BUDGET_USD = 1e9
MAX_STALE_DAYS = 3650.0
MAX_INTERRUPTIONS_PER_HR = 60.0  # one a minute
MAX_NETWORK_GBPS = 100_000.0  # 100 Tbit/s per node
# NCCL's socket transport opens at most 64 sockets per connection (MAX_SOCKETS, net_socket.cc).
MAX_TCP_STREAMS = 64
MAX_GRAD_ACCUM = 1_000_000
# A throughput measured by hand (`gpucost profile --measured`): the largest models published
# hold ~2e12 parameters, and no step moves 1e12 samples a second.
MAX_PARAM_COUNT = 1e15
MAX_SAMPLES_PER_S = 1e12
MAX_ELECTRICITY_USD_KWH = 10.0
MAX_LOCAL_POWER_W = 100_000.0
MAX_GPU_MEMORY_GB = 10_000.0
MAX_STORAGE_USD_GB_MONTH = 100.0
MAX_TRANSFER_USD_GB = 100.0


def node_limit(provider: str) -> int:
    """The most nodes a plan on ``provider`` may have: no plan gpucost cannot launch. A provider
    declares its own cap (:mod:`gpucost.providers`: your machine is one node; SkyPilot launches
    one node on the clouds whose SkyPilot cloud lists multi-node as unsupported, which
    tests/test_skypilot_engine.py checks); others: MAX_NODES."""
    declared = providers.find(provider)
    return MAX_NODES if declared is None or declared.max_nodes is None else declared.max_nodes
