"""Verify on arrival, the second half: the job's measured throughput against the plan's.

The first half (a real matmul where the job will run) is the provider's
:meth:`~gpucost.executor.base.Provider.verify_hardware`; this module turns the first throughput
the job reports into a deviation from the plan and a re-estimated $/job.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpucost.format import usd_text
from gpucost.planfile import Plan


@dataclass(frozen=True)
class VerifyResult:
    measured: float  # samples/s, whole group
    planned: float  # samples/s, whole group
    deviation_pct: float
    within_margin: bool
    reestimated_cost_usd: float
    reestimated_hours: float

    def message(self, margin_pct: float) -> str:
        word = "within" if self.within_margin else "outside"
        return (f"verify: measured {self.measured:.1f} samples/s vs planned {self.planned:.1f} "
                f"({self.deviation_pct:+.0f}%, {word} the {margin_pct:g}% margin); re-estimated "
                f"$/job {usd_text(self.reestimated_cost_usd)} over {self.reestimated_hours:.3g} h")


def verify_throughput(plan: Plan, measured: float,
                      price_hr: float | None = None) -> VerifyResult:
    """Compare the job's measured throughput with the plan's and re-estimate $/job from it
    (at ``price_hr`` USD/h per node when it differs from the plan's, after a spot fallback)."""
    planned = plan.workload.throughput
    deviation = (measured - planned) / planned * 100.0
    samples = plan.total_samples or 0.0
    est = plan.estimate
    setup_hours = max(0.0, est.hours - samples / planned / 3600.0)
    hours = setup_hours + samples / measured / 3600.0
    compute = plan.offer.nodes * (plan.offer.price_hr if price_hr is None else price_hr) * hours
    # Only the compute term scales with throughput; storage, egress, setup stay as planned.
    cost = est.cost_usd - est.compute_usd + compute if est.compute_usd > 0 else max(
        est.cost_usd * planned / measured, compute)
    return VerifyResult(measured=measured, planned=planned, deviation_pct=deviation,
                        within_margin=abs(deviation) <= plan.safety.verify_margin_pct,
                        reestimated_cost_usd=cost, reestimated_hours=hours)
