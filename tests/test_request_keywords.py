"""The planning request's keywords are declared once (``RequestArgs``): the Python API, the command
line and the TUI take them from there, and ``gpucost.predict`` shares the model's parameters.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

import gpucost
from gpucost.cli import build_parser
from gpucost.cli.jobargs import request_args, request_from_args
from gpucost.model.economics import JobParams
from gpucost.planning.request import (
    EconomicsArgs,
    FilterArgs,
    RequestArgs,
    build_request,
    make_filters,
    option_dest,
)

README = Path(__file__).resolve().parents[1] / "README.md"


def _python_blocks(marker: str) -> list[str]:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    return [b for b in blocks if marker in b]


def test_the_readme_python_examples_run_as_shown(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's compare/plan and predict blocks, executed verbatim (in a folder of their
    own: the planning block writes plan.toml where it runs)."""
    (planning,) = _python_blocks("gpucost.compare(")
    scope: dict[str, Any] = {}
    monkeypatch.chdir(tmp_path)
    exec(planning, scope)
    assert (tmp_path / "plan.toml").is_file()
    frame, advice = scope["frame"], scope["advice"]
    assert len(frame) and set(frame["gpu"]) <= set(make_filters(gpu=["A100", "H100"]).gpus)
    assert frame["nodes"].max() <= 4
    assert advice.request.constraints.deadline_hours == 24
    assert advice.request.constraints.budget_usd == 300
    assert advice.request.filters.market == "on-demand"  # plan's default, as in the README
    (predicting,) = _python_blocks("gpucost.predict(")
    exec(predicting, scope)
    assert scope["pred"].nodes == 2 and scope["pred"].throughput > 0


def _keywords(function: Any) -> dict[str, inspect.Parameter]:
    return dict(inspect.signature(function).parameters)


def test_compare_plan_and_build_request_take_the_declared_keywords() -> None:
    declared = {f.name for f in fields(RequestArgs)}
    assert set(_keywords(build_request)) == declared
    assert set(_keywords(gpucost.plan)) == declared
    assert set(_keywords(gpucost.compare)) == {*declared, "limit"}
    for function in (build_request, gpucost.compare, gpucost.plan):
        params = list(_keywords(function).values())
        assert params[0].name == "profile"
        assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params[1:]), function
        assert all(p.annotation is not inspect.Parameter.empty for p in params), function
    assert _keywords(gpucost.compare)["market"].default == "any"
    assert _keywords(gpucost.plan)["market"].default == "on-demand"  # as `gpucost plan`


@pytest.mark.parametrize("function", [gpucost.compare, gpucost.plan])
def test_every_keyword_is_documented(function: Any) -> None:
    doc = inspect.getdoc(function) or ""
    missing = [name for name in _keywords(function) if f"``{name}``" not in doc]
    assert not missing, f"{function.__name__}'s docstring does not say what {missing} mean"


def test_a_misspelt_keyword_names_the_function_called() -> None:
    with pytest.raises(TypeError, match=r"^compare\(\) got an unexpected keyword argument 'epoch'"):
        gpucost.compare(epoch=10)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"^make_filters\(\) got an unexpected keyword"):
        make_filters(gpus="A100")  # type: ignore[call-arg]


def test_make_filters_takes_the_filter_keywords_of_the_request() -> None:
    assert set(_keywords(make_filters)) == {f.name for f in fields(FilterArgs)}
    assert {f.name for f in fields(FilterArgs)} <= {f.name for f in fields(RequestArgs)}


def test_economics_keywords_are_job_params_fields() -> None:
    names = {f.name for f in fields(JobParams)}
    assert {f.name for f in fields(EconomicsArgs)} <= names


def _namespace(*argv: str) -> Any:
    return build_parser().parse_args(list(argv))


def test_every_option_dest_a_keyword_names_exists_on_a_command() -> None:
    """A keyword read from the command line names an attribute that compare, plan or scale
    fills; a keyword only the Python API takes is on none of them."""
    commands = [vars(_namespace(c)) for c in ("compare", "plan", "scale")]
    for f in fields(RequestArgs):
        dest = option_dest(f)
        if dest:
            assert any(dest in ns for ns in commands), f"{f.name}: no option fills {dest!r}"
        else:
            assert not any(f.name in ns for ns in commands), f.name


def test_plan_options_reach_the_request() -> None:
    args = _namespace("plan", "--samples", "1e6", "--deadline-hours", "24", "--budget", "300",
                      "--min-gpu-memory", "40", "--gpu", "A100", "--provider", "AWS",
                      "--region", "us-", "--max-nodes", "3", "--data-gb", "5",
                      "--checkpoint-gb", "2", "--results-gb", "1", "--setup-min", "7",
                      "--interruption-rate", "0.1", "--max-wait-hours", "3",
                      "--p-no-capacity", "0.2", "--cpu-arch", "any")
    values = request_args(args)
    assert (values.samples, values.deadline_hours, values.budget_usd) == (1e6, 24, 300)
    assert (values.min_gpu_memory_gb, values.max_nodes, values.cpu_arch) == (40, 3, "any")
    request = request_from_args(args, market="on-demand")
    assert request.economics == JobParams(data_gb=5, checkpoint_gb=2, results_gb=1,
                                          setup_minutes=7, interruption_rate_per_hr=0.1,
                                          p_no_capacity=0.2, max_wait_capacity_hours=3)
    assert request.filters.providers == ("aws",) and request.filters.regions == ("us-",)
    assert request.filters.min_gpu_memory_gb == 40 and request.filters.market == "on-demand"


def test_compare_options_reach_the_request() -> None:
    args = _namespace("compare", "--epochs", "2", "--dataset-size", "1000", "--spot",
                      "--max-price-hr", "9", "--gpu-count", "8", "--sort", "time",
                      "--stale-days", "5")
    request = request_from_args(args)
    assert (request.job.epochs, request.job.dataset_size) == (2, 1000)
    assert request.filters.market == "spot" and request.filters.max_price_hr == 9
    assert request.filters.gpu_counts == (8.0,)
    assert (request.sort, request.stale_days) == ("time", 5)


def test_scale_network_options_reach_the_request() -> None:
    from gpucost.cli.scale import build_curve

    args = _namespace("scale", "--gpu", "A100", "-N", "2", "--network-gbps", "100",
                      "--transport", "rdma")
    request = build_curve(args).request
    assert (request.inter_node_gbps, request.inter_node_transport) == (100, "rdma")


def test_the_tui_form_carries_the_apps_economics() -> None:
    from gpucost.profile import resolve_profile
    from gpucost.tui.session import JobInputs

    params = JobParams(data_gb=3, checkpoint_gb=1, results_gb=2, setup_minutes=5,
                       interruption_rate_per_hr=0.2, p_no_capacity=0.1,
                       max_wait_capacity_hours=4)
    profile = resolve_profile(None)
    request = JobInputs(samples=1e6, spot=False, max_nodes=2, budget_usd=50).request(
        profile, build_request(profile).snapshots, params=params)
    assert request.economics == params
    assert request.filters.market == "on-demand" and request.filters.max_nodes == 2
    assert request.constraints.budget_usd == 50


def test_predict_has_one_parameter_list() -> None:
    from gpucost.model import perf

    assert inspect.signature(gpucost.predict) == inspect.signature(perf.predict)
    assert inspect.unwrap(gpucost.predict) is perf.predict
    assert "stored measurements" in (gpucost.predict.__doc__ or "")
    p = gpucost.Profile.from_measurement(gpu="V100 SXM2 16GB", throughput=1200.0,
                                         batch_size=256, precision="amp", param_count=25.6e6)
    with pytest.raises(TypeError):
        gpucost.predict(p, gpu="T4", node=2)  # type: ignore[call-arg]
    # positional as the model takes them: gpu, gpus_per_node, nodes
    assert gpucost.predict(p, "T4", 2, 2).throughput == gpucost.predict(
        p, gpu="T4", gpus_per_node=2, nodes=2).throughput
    with pytest.raises(TypeError, match="multiple values for argument 'gpu'"):
        gpucost.predict(p, "T4", gpu="A10G")  # type: ignore[misc]
    with pytest.raises(TypeError, match="positional"):
        gpucost.predict(p, "T4", 1, 1, None, None, "nvlink")  # type: ignore[misc]
    with pytest.raises(TypeError, match="profile"):
        gpucost.predict(gpu="T4")  # type: ignore[call-arg]
