"""The Python API's planning calls: :func:`compare` (a DataFrame) and :func:`plan` (advice).

Both take the keywords of :class:`gpucost.planning.request.RequestArgs` (the command line's
options, declared once there) as a typed keyword-only signature; ``help(gpucost.compare)`` lists
them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gpucost.planning.advice import Advice, advise
from gpucost.planning.ranking import rank
from gpucost.planning.request import API_ONLY, RequestArgs, keywords_of

if TYPE_CHECKING:
    import pandas as pd

_KEYWORDS = """
    ``profile`` is a :class:`Profile`, a path to a profile JSON, or the name of an embedded
    example (default: the ResNet-50 example). The keywords:

    - the job: ``epochs`` with ``dataset_size``, or ``samples``, or ``steps`` (optimizer steps
      of the profile's global batch); default the profile's typical job;
    - filters: ``gpu``, ``provider``, ``region`` (a name or a list), ``market`` ("any",
      "on-demand" or "spot"), ``max_price_hr`` ($/h per node), ``min_gpu_memory_gb``,
      ``gpu_count`` (GPUs per node, one or a list), ``max_nodes`` (default 1), ``cpu_arch``
      ("x86-64", "arm64" or "any"; default the profile's host CPU);
    - constraints: ``deadline_hours``, ``budget_usd``;
    - economics: ``data_gb``, ``checkpoint_gb``, ``results_gb`` (GB), ``setup_minutes``,
      ``interruption_rate_per_hr`` (per node-hour), ``p_no_capacity`` (0..1),
      ``max_wait_capacity_hours``;
    - prices: ``prices`` (snapshot files or folders; default the newest per source) or
      ``snapshots`` (loaded :class:`Snapshot` objects), ``include_local`` (True: this machine;
      or a :class:`gpucost.planning.request.LocalMachineArgs`), ``stale_days``, ``now``;
    - ``sort`` ("cost" or "time"), ``inter_node_gbps`` and ``inter_node_transport`` ("rdma" or
      "tcp": the network between nodes in place of each offer's published fabric).
"""


@dataclass(frozen=True)
class CompareArgs(RequestArgs):
    """:func:`compare`'s arguments: the request and how many of the best plans to keep."""

    limit: int | None = field(default=None, kw_only=True, metadata=API_ONLY)


@dataclass(frozen=True)
class PlanArgs(RequestArgs):
    """:func:`plan`'s arguments: the request, on-demand capacity only unless ``market`` says
    otherwise (as `gpucost plan` without --spot)."""

    market: str = field(default="on-demand", kw_only=True)


def _compare(args: CompareArgs) -> pd.DataFrame:
    ranking = rank(args.build())
    if args.limit is not None:
        ranking = ranking.head(args.limit)
    return ranking.to_pandas()


def _plan(args: PlanArgs) -> Advice:
    return advise(args.build())


compare = keywords_of(CompareArgs, _compare, "compare", f"""\
    Plans for a profile and a job, ranked by expected $/job; a pandas DataFrame.

{_KEYWORDS}
    ``limit`` keeps that many of the best plans (default all).

    Columns are the fields of :class:`gpucost.planning.plans.PlanRow`: provider, region,
    instance_type, gpu, gpu_count, nodes, market, price_hr, hours (compute), total_hours
    (expected wall clock), cost_usd and its terms, risk, worst_usd, throughput, peak_gb and how
    the batch fits (micro_batch, grad_accum_steps, sharding), price_date. Plans whose batch fits
    their GPU no way are left out; ``frame.attrs`` carries their count, the job and the price
    sources.
    """)

plan = keywords_of(PlanArgs, _plan, "plan", f"""\
    The advice for a profile, a job and constraints: the cheapest plan meeting
    ``deadline_hours``, the fastest within ``budget_usd``, the Pareto front, and what to relax
    when nothing fits. As `gpucost plan`, on-demand capacity only unless ``market="any"``
    allows spot.

{_KEYWORDS}
    ``gpucost.plan_file(advice)`` turns its pick into the plan `gpucost plan -o` writes;
    ``gpucost.save_plan`` writes it.
    """)
