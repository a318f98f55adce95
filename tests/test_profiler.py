"""The step profiler on real torch (CPU): verdicts, FLOP counts, memory, the batch probe."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from census_models import frame_loop, frames

pytest.importorskip("torch")
import torch
from torch import nn

from gpucost.errors import ProfileError
from gpucost.profile import OperatorStat, Profile
from gpucost.profiler import (
    MemoryLimitExceeded,
    OpCensus,
    StepProfiler,
    build,
    probe_batch,
    profile_model,
)
from gpucost.profiler.verdict import StepFacts, decide


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    # Two OpenMP threads on a shared 2-core CI machine stall each other by 10x at random;
    # one thread keeps timing-based verdicts steady.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _backward(loss: torch.Tensor) -> None:
    loss.backward()  # type: ignore[no-untyped-call]


def _train(model: nn.Module, batches: Iterator[tuple[torch.Tensor, torch.Tensor]],
           prof: StepProfiler, opt: torch.optim.Optimizer) -> Profile:
    with prof:
        prof.hook_optimizer(opt)
        for x, y in prof.wrap(batches):
            _backward(nn.functional.mse_loss(model(x), y))
            opt.step()
            opt.zero_grad(set_to_none=True)
    return prof.result()


def _forever(batch: int, d_in: int, d_out: int, sleep_s: float = 0.0
             ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    x, y = torch.randn(batch, d_in), torch.randn(batch, d_out)
    while True:
        if sleep_s:
            time.sleep(sleep_s)
        yield x, y


# ---- verdicts -----------------------------------------------------------------------------
def test_a_loader_that_sleeps_is_dataloader_bound() -> None:
    model = nn.Linear(32, 8)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    p = _train(model, _forever(16, 32, 8, sleep_s=0.02), StepProfiler(steps=5, model=model), opt)
    assert p.verdict is not None and p.verdict.kind == "dataloader-bound"
    assert "num_workers" in p.verdict.advice and "faster GPU will not help" in p.verdict.advice
    assert p.breakdown is not None and p.breakdown.data_s >= 0.02
    assert p.breakdown.data_s / p.step_time_s > 0.5
    assert p.batch_size == 16  # counted from the batches that came through the wrapper


def test_tiny_batches_on_a_tiny_model_are_host_bound() -> None:
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    p = _train(model, _forever(2, 4, 2), StepProfiler(steps=20, model=model), opt)
    assert p.verdict is not None and p.verdict.kind == "host-bound", p.verdict
    assert "raise the batch size" in p.verdict.advice
    assert p.environment["launch_floor_us"] > 0
    assert p.breakdown is not None and p.breakdown.host_s > p.breakdown.compute_s


def test_a_matmul_heavy_model_is_compute_bound() -> None:
    model = nn.Sequential(*[nn.Linear(512, 512, bias=False) for _ in range(3)])
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    p = _train(model, _forever(256, 512, 512), StepProfiler(steps=4, model=model), opt)
    assert p.verdict is not None and p.verdict.kind == "compute-bound", p.verdict
    assert p.operators and p.operators[0].name in ("aten::mm", "aten::addmm")
    top = p.operators[0]
    assert top.flops / top.bytes_moved > p.environment["ridge_flop_per_byte"]


def test_an_elementwise_heavy_model_is_memory_bound() -> None:
    width = 1 << 15
    model = nn.Sequential(nn.LayerNorm(width), nn.GELU(), nn.LayerNorm(width), nn.Tanh())
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    p = _train(model, _forever(64, width, width), StepProfiler(steps=4, model=model), opt)
    assert p.verdict is not None and p.verdict.kind == "memory-bound", p.verdict
    assert "memory bandwidth" in p.verdict.advice


@pytest.mark.parametrize(("facts", "kind"), [
    (dict(data_s=0.4), "dataloader-bound"),
    (dict(host_s=0.6), "host-bound"),
    (dict(operators=[OperatorStat("aten::mm", 1, 0.5, flops=1e9, bytes_moved=1e6)]),
     "compute-bound"),
    (dict(operators=[OperatorStat("aten::add", 1, 0.5, flops=0.0, bytes_moved=1e6)]),
     "memory-bound"),
    (dict(flops_per_step=1e6, bytes_per_step=1e6), "memory-bound"),
    (dict(ridge_flop_per_byte=None), "unknown"),
])
def test_verdict_rules(facts: dict[str, object], kind: str) -> None:
    base: dict[str, object] = dict(step_s=1.0, data_s=0.0, host_s=0.0, ops_per_step=100,
                                   operators=[], flops_per_step=None, bytes_per_step=None,
                                   ridge_flop_per_byte=10.0)
    verdict = decide(StepFacts(**{**base, **facts}))  # type: ignore[arg-type]
    assert verdict.kind == kind
    assert verdict.reason and verdict.advice


# ---- FLOPs, bytes, memory -----------------------------------------------------------------
def test_flops_per_step_of_an_mlp_match_a_hand_count() -> None:
    d_in, hidden, d_out, batch = 64, 32, 10, 8
    model = nn.Sequential(nn.Linear(d_in, hidden), nn.ReLU(), nn.Linear(hidden, d_out))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    p = _train(model, _forever(batch, d_in, d_out), StepProfiler(steps=2, model=model), opt)
    macs = d_in * hidden + hidden * d_out
    # forward 2*B*macs; backward: weight grads 2*B*macs, input grads of every layer but the
    # first (the data needs no gradient) 2*B*hidden*d_out
    hand = 2 * batch * macs + 2 * batch * macs + 2 * batch * hidden * d_out
    assert p.flops_per_step == pytest.approx(hand)
    assert p.param_count == macs + hidden + d_out
    assert p.param_bytes == 4 * p.param_count
    mm = {op.name: op for op in p.operators}
    assert mm["aten::addmm"].flops == pytest.approx(2 * batch * macs)
    assert mm["aten::addmm"].bytes_moved > 4 * batch * (d_in + d_out)


def test_census_counts_storage_kept_alive_by_autograd() -> None:
    # ReLU saves its output for backward through a new tensor sharing the storage: the
    # ledger must not drop the storage when the first tensor dies.
    batch, width, layers = 256, 128, 4
    model = nn.Sequential(*[m for _ in range(layers) for m in (nn.Linear(width, width),
                                                               nn.ReLU())])
    x = torch.randn(batch, width)
    with OpCensus() as census:
        loss = model(x).sum()
        after_forward = census.live_bytes
    activation = batch * width * 4
    # each ReLU output is saved (for its own backward and the next Linear's weight gradient);
    # the Linear outputs are not, and are freed
    assert layers * activation <= after_forward < 2 * layers * activation
    del loss


def _lstm_cell_step(steps: int) -> None:
    """A recurrent step unrolled by hand (bench/census_scaling.py's): an LSTM cell over
    ``steps`` time steps, each saving its gates for backward."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    try:
        from census_scaling import lstm_step
    finally:
        sys.path.pop(0)
    lstm_step(steps)


@pytest.mark.parametrize("step", [
    lambda: _lstm_cell_step(200),
    lambda: nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 64))(
        torch.randn(256, 64)).sum().backward(),
], ids=["lstm-cell", "mlp"])
def test_census_peak_is_the_ledgers_high_water_mark_within_its_tolerance(
        step: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # The census sweeps its ledger only when the peak may have grown by more than the
    # tolerance; with no tolerance it sweeps at every allocation that could set a peak.
    from gpucost.profiler import flops

    def peak() -> int:
        with OpCensus() as census:
            step()
        return census.peak_live_bytes

    tolerance = flops.PEAK_TOLERANCE
    fast = peak()
    monkeypatch.setattr(flops, "PEAK_TOLERANCE", 0.0)
    exact = peak()
    assert exact / (1.0 + tolerance) <= fast <= exact


def test_census_counts_a_storage_at_the_address_of_one_freed_since_its_last_sweep() -> None:
    # The allocator may hand a freed block's address to the next request of its size; the
    # ledger, which has not yet seen the first storage die, must count the second, not skip it
    # as one it already holds. Fed the storages as the dispatch mode feeds them, with the reuse
    # made certain rather than left to the allocator.
    from torch.multiprocessing.reductions import StorageWeakRef

    census = OpCensus()
    # every storage made while the first is alive, so that none can hold its block for real
    first, second, third, fourth = (torch.ones(16_384).untyped_storage() for _ in range(4))
    size, address = first.nbytes(), first.data_ptr()
    census._allocated(address, size, StorageWeakRef(first))
    del first
    census._allocated(address, size, StorageWeakRef(second))  # first's address, reused
    for storage in (third, fourth):
        census._allocated(storage.data_ptr(), size, StorageWeakRef(storage))
    assert census.peak_live_bytes == 3 * size
    # and a storage handed over again while alive is counted once
    census._allocated(fourth.data_ptr(), size, StorageWeakRef(fourth))
    assert census.live_bytes == 3 * size


def test_a_long_recurrent_step_is_counted_in_time_linear_in_its_length() -> None:
    # Each allocation used to ask every live storage whether it was still alive: quadratic
    # in the step's saved tensors, about 5 minutes for 2,000 time steps of an LSTM cell (10 s
    # now; bench/census_scaling.py measures the shape). A generous deadline for a loaded
    # machine.
    started = time.perf_counter()
    with OpCensus() as census:
        _lstm_cell_step(1500)
    assert time.perf_counter() - started < 90.0
    assert census.peak_live_bytes > 0


@pytest.mark.parametrize("bag", [False, True], ids=["embedding", "embedding-bag"])
def test_census_charges_an_embedding_the_rows_it_looks_up(bag: bool) -> None:
    # A gather reads the rows its indices name, not the table; its dense backward zero-fills a
    # table-sized gradient once per step, whatever the batch. So the operators' bytes grow with
    # the lookups and not with the table, and the zero fill grows with the table alone.
    dim, lookups = 64, 40

    def census(rows: int, batch: int) -> OpCensus:
        torch.manual_seed(0)
        table = nn.EmbeddingBag(rows, dim, mode="sum") if bag else nn.Embedding(rows, dim)
        ids = torch.randint(0, 1000, (batch, lookups // 4))
        with OpCensus() as c:
            table(ids).sum().backward()
        return c

    small, large, double = census(1_000, 4), census(100_000, 4), census(1_000, 8)
    assert small.bytes_moved == large.bytes_moved
    row_bytes = dim * 4
    assert small.fixed_bytes == 1_000 * row_bytes
    assert large.fixed_bytes == 100_000 * row_bytes
    assert double.fixed_bytes == small.fixed_bytes

    def embedding_bytes(c: OpCensus) -> float:
        return sum(n for op, n in c.bytes_moved.items() if "embedding" in op)

    # the forward reads 40 rows and writes them out; the backward reads their gradients and
    # scatters them into 40 rows: about 4 x 40 rows, against 2 x 1,000 for whole tables
    assert 2 * lookups * row_bytes <= embedding_bytes(small) < 5 * lookups * row_bytes
    assert embedding_bytes(double) > 1.8 * embedding_bytes(small)
    assert large.total_bytes == sum(large.bytes_moved.values()) + large.fixed_bytes



@pytest.mark.parametrize("bag", [False, True], ids=["embedding", "embedding-bag"])
def test_census_counts_a_sparse_gradient_by_its_rows(bag: bool) -> None:
    # nn.Embedding(sparse=True), common in recommenders, returns a sparse COO gradient: it has
    # no storage of its own (the census used to fail on it) and fills no table.
    rows, dim = 100_000, 64
    table = (nn.EmbeddingBag(rows, dim, mode="sum", sparse=True) if bag
             else nn.Embedding(rows, dim, sparse=True))
    with OpCensus() as census:
        table(torch.randint(0, 1000, (4, 10))).sum().backward()
    assert table.weight.grad is not None and table.weight.grad.is_sparse
    assert census.fixed_bytes == 0.0
    # 40 rows looked up, a few times over: nowhere near the 25.6 MB table
    assert sum(census.bytes_moved.values()) < 20 * 40 * dim * 4
    assert 0 < census.peak_bytes < 20 * 40 * dim * 4


# ---- the batch probe ----------------------------------------------------------------------
def test_probe_finds_the_largest_power_of_two_under_a_memory_limit() -> None:
    width = 256
    model = nn.Sequential(*[m for _ in range(4) for m in (nn.Linear(width, width), nn.ReLU())])
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step(batch: int) -> None:
        _backward(model(torch.randn(batch, width)).sum())
        opt.step()

    def peak(batch: int) -> int:
        model.zero_grad(set_to_none=True)
        params = sum(p.numel() * p.element_size() for p in model.parameters())
        with OpCensus(baseline_bytes=params) as census:
            step(batch)
        return census.peak_bytes

    p512, p1024 = peak(512), peak(1024)
    # four saved ReLU outputs per sample at least: memory really grows with the batch
    assert p1024 - p512 >= 4 * 512 * width * 4
    limit = (p512 + p1024) // 2
    result = probe_batch(step, model, optimizer=opt, memory_limit_bytes=limit)
    assert result.local_batch == 512
    assert result.tried[-1] == (1024, False)
    assert all(fitted for _, fitted in result.tried[:-1])
    assert not result.capped
    # the failure was a real one, raised mid-step by the allocation that crossed the limit
    model.zero_grad(set_to_none=True)
    with pytest.raises(MemoryLimitExceeded), OpCensus(baseline_bytes=0, limit_bytes=limit):
        step(1024)
    # and the model trains normally afterwards
    model.zero_grad(set_to_none=True)
    step(512)
    assert all(p.grad is not None for p in model.parameters())


def test_probe_reports_the_global_batch_and_its_cap() -> None:
    model = nn.Linear(8, 8)

    def step(batch: int) -> None:
        _backward(model(torch.randn(batch, 8)).sum())

    result = probe_batch(step, model, max_batch=16, device_count=4)
    assert (result.local_batch, result.global_batch, result.capped) == (16, 64, True)
    with pytest.raises(ProfileError, match="does not fit"):
        probe_batch(step, model, memory_limit_bytes=1)


# ---- library API, partial runs -------------------------------------------------------------
def test_a_loop_that_stops_early_gives_a_partial_profile_or_a_clear_error(tmp_path: Path) -> None:
    model = nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    prof = StepProfiler(steps=50, warmup=1, model=model)
    with pytest.raises(RuntimeError, match="boom"), prof:
        prof.hook_optimizer(opt)
        for i, (x, y) in enumerate(prof.wrap(_forever(4, 8, 2))):
            if i == 9:
                raise RuntimeError("boom")
            _backward(nn.functional.mse_loss(model(x), y))
            opt.step()
    p = prof.result()
    assert p.partial and p.steps_measured == 9 - 1 - 3  # 1 warm-up, 1 census, 2 trace
    assert Profile.load(prof.save(tmp_path / "p.json")) == p

    short = StepProfiler(steps=10, model=model)
    with short:
        for _ in range(4):
            short.step()
    with pytest.raises(ProfileError, match="at least 8 optimizer steps"):
        short.result()


def _three_marked_steps(name: str) -> StepProfiler:
    """A Linear model's steps under a StepProfiler of ``name``, marked by hand (batch 8)."""
    model = nn.Linear(16, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(8, 16), torch.randn(8, 4)
    with StepProfiler(name=name, steps=3, warmup=1, model=model, batch_size=8) as prof:
        while not prof.done:
            _backward(nn.functional.mse_loss(model(x), y))
            opt.step()
            opt.zero_grad()
            prof.step()
    return prof


def test_explicit_step_marker_and_batch_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                             ) -> None:
    monkeypatch.chdir(tmp_path)
    path = _three_marked_steps("manual").save()
    assert path == Path("profiles/manual.json")
    p = Profile.load(path)
    assert (p.batch_size, p.steps_measured, p.partial, p.gpu) == (8, 3, False, "CPU")
    assert p.step_time_p10_s is not None and p.step_time_p90_s is not None
    assert p.step_time_p10_s <= p.step_time_s <= p.step_time_p90_s
    assert p.environment["cpu_matmul_gflops"] > 0 and p.environment["torch"] == torch.__version__


def test_a_profiler_name_with_a_path_in_it_saves_one_file_in_profiles(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    assert _three_marked_steps("../team/exp1").save() == Path("profiles/team-exp1.json")
    assert [p.relative_to(tmp_path) for p in tmp_path.rglob("*.json")] == [
        Path("work/profiles/team-exp1.json")]


@pytest.mark.parametrize("name", ["mlp", "cnn", "vit", "transformer"])
def test_reference_models_train_and_profile(name: str) -> None:
    batch = 2 if name == "transformer" else 8
    profile, _ = profile_model(name, batch_size=batch, steps=2, warmup=1, trace_steps=1)
    assert profile.name == name and profile.batch_size == batch
    assert profile.flops_per_sample is not None and profile.flops_per_sample > 0
    assert profile.verdict is not None and profile.verdict.kind != "unknown"
    workload = build(name)
    assert profile.param_count == sum(p.numel() for p in workload.model.parameters())
    assert profile.sample_unit == ("sequences" if name == "transformer" else "images")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signalled_reference_run_keeps_a_partial_profile(
        sig: int, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpucost.profiler import reference

    def build_then_signal(*args: Any, **kwargs: Any) -> Any:
        workload = build(*args, **kwargs)
        step, calls = workload.optimizer.step, [0]

        def counted_step(*a: Any, **k: Any) -> Any:
            calls[0] += 1
            if calls[0] == 12:  # warm-up 1, detail 1, then 10 timed steps
                os.kill(os.getpid(), sig)
            return step(*a, **k)

        workload.optimizer.step = counted_step
        return workload

    monkeypatch.setattr(reference, "build", build_then_signal)
    before = signal.getsignal(signal.SIGTERM)
    profile, _ = reference.profile_model("mlp", batch_size=8, steps=10**6, warmup=1,
                                         trace_steps=1)
    assert profile.partial and profile.steps_measured is not None
    assert 8 <= profile.steps_measured <= 12
    assert signal.getsignal(signal.SIGTERM) is before  # the handler is put back


@pytest.mark.parametrize(("weights", "autocast", "expected"), [
    (torch.float32, False, "fp32"),
    (torch.float32, True, "amp"),
    (torch.bfloat16, False, "bf16"),
])
def test_precision_is_detected_from_the_dtypes_matmuls_run_at(
        weights: torch.dtype, autocast: bool, expected: str) -> None:
    model = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 4)).to(weights)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(8, 16, dtype=weights), torch.randn(8, 4, dtype=weights)
    with StepProfiler(steps=2, warmup=1, trace_steps=1, model=model, batch_size=8,
                      calibrate=False) as prof:
        while not prof.done:
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                loss = nn.functional.mse_loss(model(x).float(), y.float())
            _backward(loss)
            opt.step()
            prof.step()
    assert prof.result().precision == expected


def _frame_loop_census(batch: int) -> OpCensus:
    torch.manual_seed(0)
    model = frame_loop()
    opt = torch.optim.Adam(model.parameters())
    (x,) = frames(batch)
    with OpCensus(step_shapes=[p.shape for p in model.parameters()]) as census:
        model(x).square().mean().backward()
        opt.step()
    return census


def test_census_tells_a_steps_weight_bytes_from_a_samples() -> None:
    # The layer reads its 256 KB weight and sums its gradient once a frame, 50 times a step
    # whatever the batch; Adam reads and writes it and its states once. That is the step's
    # share; what grows with the batch is the frames' activations.
    small, large = _frame_loop_census(2), _frame_loop_census(8)
    weight = 256 * 256 * 4
    assert small.step_bytes == pytest.approx(large.step_bytes, rel=0.01)
    assert small.step_bytes > 50 * 2 * weight
    per_sample_small = (small.total_bytes - small.step_bytes) / 2
    per_sample_large = (large.total_bytes - large.step_bytes) / 8
    assert per_sample_small == pytest.approx(per_sample_large, rel=0.1)


def test_a_profiled_frame_loop_moves_the_same_bytes_a_sample_at_any_batch() -> None:
    # gpucost's translation of a profiled step took 3 x the parameter bytes as the step's share
    # and charged the rest to the samples: the 50 per-frame weight reads came to 3.7x more
    # bytes a sample at batch 2 than at batch 8.
    from gpucost.model import translate

    def per_sample(batch: int) -> float:
        census = _frame_loop_census(batch)
        profile = Profile.from_measurement(
            gpu="A100 SXM4 80GB", throughput=1000.0, batch_size=batch, precision="fp32",
            param_count=256 * 257, name="frame loop").with_changes(
                flops_per_sample=census.total_flops / batch, bytes_per_step=census.total_bytes,
                step_bytes=census.step_bytes)
        return translate.workload_terms(profile).bytes_per_flop

    assert per_sample(2) == pytest.approx(per_sample(8), rel=0.1)


def test_a_step_that_touches_no_parameter_has_zero_step_bytes() -> None:
    # The census counts 0 bytes shaped as a parameter when the step never uses the model's
    # parameters; the profile refused that count ("step_bytes must be a positive number").
    model = nn.Linear(32, 8)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def batches() -> Iterator[torch.Tensor]:
        while True:
            yield torch.randn(16, 32, requires_grad=True)

    prof = StepProfiler(steps=5, model=model)
    with prof:
        prof.hook_optimizer(opt)
        for x in prof.wrap(batches()):
            _backward((x * x).sum())
            opt.step()
    profile = prof.result()
    assert profile.step_bytes == 0.0 and profile.bytes_per_step
