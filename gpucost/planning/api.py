"""The Python API's planning calls: :func:`compare` (a DataFrame) and :func:`plan` (advice)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpucost.planning.advice import Advice, advise
from gpucost.planning.ranking import rank
from gpucost.planning.request import build_request

if TYPE_CHECKING:
    import pandas as pd


def compare(profile: Any = None, *, limit: int | None = None, **request: Any) -> pd.DataFrame:
    """Plans for a profile and a job, ranked by expected $/job; a pandas DataFrame.

    ``profile`` is a :class:`Profile`, a path to a profile JSON, or the name of an embedded
    example (default: the ResNet-50 example). The other keywords are those of
    :func:`gpucost.planning.request.build_request`: the job (``epochs`` with ``dataset_size``,
    or ``samples``, or ``steps``), filters (``gpu``, ``provider``, ``region``, ``market``,
    ``max_price_hr``, ``min_gpu_memory_gb``, ``gpu_count``, ``max_nodes``), economics
    (``data_gb``, ``checkpoint_gb``, ``results_gb``, ``setup_minutes``,
    ``interruption_rate_per_hr``), ``prices`` and ``include_local``.

    Columns are the fields of :class:`gpucost.planning.plans.PlanRow`: provider, region,
    instance_type, gpu, gpu_count, nodes, market, price_hr, hours (compute), total_hours
    (expected wall clock), cost_usd and its terms, risk, worst_usd, throughput, peak_gb and how
    the batch fits (micro_batch, grad_accum_steps, sharding), price_date. Plans whose batch fits
    their GPU no way are left out; ``frame.attrs`` carries their count, the job and the price
    sources.
    """
    ranking = rank(build_request(profile, **request))
    if limit is not None:
        ranking = ranking.head(limit)
    return ranking.to_pandas()


def plan(profile: Any = None, **request: Any) -> Advice:
    """The advice for a profile, a job and constraints (``deadline_hours``, ``budget_usd``, and
    the keywords of :func:`compare`): the cheapest plan meeting the deadline, the fastest within
    the budget, the Pareto front, and what to relax when nothing fits. As `gpucost plan`,
    on-demand capacity only unless ``market="any"`` allows spot.
    :func:`gpucost.planning.planbuild.to_plan` turns a pick into a plan file."""
    request.setdefault("market", "on-demand")
    return advise(build_request(profile, **request))
