"""A profile as a few lines of text for a person (the CLI's summary)."""

from __future__ import annotations

from gpucost.profile import Profile


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms"


def summary_lines(p: Profile) -> list[str]:
    head = (f"profile {p.name}: {p.gpu}, {p.precision}, batch {p.batch_size}, "
            f"{p.steps_measured} timed steps" + (" (PARTIAL)" if p.partial else ""))
    lines = [head]
    spread = ""
    if p.step_time_p10_s is not None and p.step_time_p90_s is not None:
        spread = f" (p10 {_ms(p.step_time_p10_s)}, p90 {_ms(p.step_time_p90_s)})"
    lines.append(f"step: {_ms(p.step_time_s)} median{spread} -> "
                 f"{p.throughput:,.1f} {p.sample_unit}/s")
    if p.breakdown is not None:
        b = p.breakdown
        total = max(b.total_s, 1e-12)
        parts = [("data", b.data_s), ("host/launch", b.host_s), ("compute", b.compute_s),
                 ("optimizer", b.optimizer_s)]
        lines.append("breakdown: " + " | ".join(f"{k} {_ms(v)} ({100 * v / total:.0f} %)"
                                                 for k, v in parts))
    facts = [f"params {p.param_count / 1e6:.3g} M"]
    if p.flops_per_sample is not None:
        facts.append(f"{p.flops_per_sample / 1e9:.3g} GFLOP/sample (fwd+bwd)")
    if p.peak_memory_gb is not None:
        facts.append(f"peak memory {p.peak_memory_gb:.3g} GB")
    if p.max_batch_size is not None:
        facts.append(f"max batch {p.max_batch_size}")
    lines.append("; ".join(facts))
    if p.operators:
        top = ", ".join(f"{op.name.removeprefix('aten::')} {_ms(op.time_s)}"
                        for op in p.operators[:4])
        lines.append(f"top operators per step: {top}")
    if p.verdict is not None:
        lines.append(f"verdict: {p.verdict.kind}: {p.verdict.reason}")
        lines.append(f"advice: {p.verdict.advice}")
    warning = busy_machine_warning(p)
    if warning:
        lines.append(warning)
    return lines


def busy_machine_warning(p: Profile) -> str | None:
    """A CPU profile taken while other processes kept every core busy is not to be trusted:
    torch's OpenMP threads then wait on each other and small operators slow down by 10-100x."""
    env = p.environment
    load, cpus = env.get("load_avg_1m"), env.get("cpu_count")
    if env.get("device") != "cpu" or not load or not cpus or load <= cpus:
        return None
    return (f"warning: the machine was busy (load {load:.1f} on {cpus} CPUs), so CPU timings "
            "are unreliable: rerun on an idle machine, or with OMP_NUM_THREADS=1")
