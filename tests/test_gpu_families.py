"""GPU names in filters: a family name means every variant in the catalog, and says which.

`--gpu A100` in compare and plan (and the API's ``gpu=``) is all four A100s, the 80 GB card the
bert profile was measured on included; `A100 SXM4 80GB` is that one card. Where one GPU must be
chosen (predict, scale), the family default is taken and a note names it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from gpucost.catalog import match_gpu_names, resolve_gpu_name
from gpucost.errors import UnknownGpuError
from gpucost.planning.request import make_filters

A100S = ("A100 SXM4 40GB", "A100 SXM4 80GB", "A100 PCIe 40GB", "A100 PCIe 80GB")


def test_a_family_name_matches_every_variant_and_an_exact_name_one() -> None:
    assert match_gpu_names("A100") == A100S
    assert match_gpu_names("nvidia a100") == A100S
    assert set(match_gpu_names("H100")) == {"H100 SXM5 80GB", "H100 PCIe 80GB", "H100 NVL 94GB"}
    assert set(match_gpu_names("RTX 6000")) == {"Quadro RTX 6000", "RTX 6000 Ada"}
    # what the name states narrows the family
    assert match_gpu_names("A100 80GB") == ("A100 SXM4 80GB", "A100 PCIe 80GB")
    assert match_gpu_names("A100 SXM4") == ("A100 SXM4 40GB", "A100 SXM4 80GB")
    # a catalog name, in any case and spacing, is that GPU alone
    assert match_gpu_names("A100 SXM4 80GB") == ("A100 SXM4 80GB",)
    assert match_gpu_names("a100  sxm4 80gb") == ("A100 SXM4 80GB",)
    assert match_gpu_names("Quadro RTX 6000") == ("Quadro RTX 6000",)
    assert match_gpu_names("RTX 6000 Ada") == ("RTX 6000 Ada",)
    # names of one row stay one row; neighbours with a longer name are not variants
    assert match_gpu_names("T4g") == ("T4",)
    assert match_gpu_names("L40") == ("L40",)
    assert match_gpu_names("RTX 4060") == ("RTX 4060",)
    with pytest.raises(UnknownGpuError):
        match_gpu_names("A100 64GB")
    # a single choice keeps the documented default
    assert resolve_gpu_name("A100") == "A100 SXM4 40GB"


def test_filters_take_the_whole_family() -> None:
    filters = make_filters(gpu=["A100", "A100 SXM4 80GB", "T4"])
    assert filters.gpus == (*A100S, "T4")
    assert "GPUs A100 (A100 SXM4 40GB, A100 SXM4 80GB, A100 PCIe 40GB, A100 PCIe 80GB)" in (
        filters.describe())


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    from gpucost.cli import main

    assert main([*argv, "--format", "json"]) == 0
    body: dict[str, Any] = json.loads(capsys.readouterr().out)
    return body


def test_compare_with_a_family_name_plans_every_variant(
        capsys: pytest.CaptureFixture[str]) -> None:
    family = _json(capsys, "compare", "-p", "bert-large-a100-fp16", "--gpu", "A100",
                   "--limit", "100000")
    counts = {gpu: len(_json(capsys, "compare", "-p", "bert-large-a100-fp16", "--gpu", gpu,
                             "--limit", "100000")["plans"]) for gpu in A100S}
    assert all(counts.values())
    assert {p["gpu"] for p in family["plans"]} == set(A100S)
    assert len(family["plans"]) == sum(counts.values())
    assert ("--gpu A100 matched A100 SXM4 40GB, A100 SXM4 80GB, A100 PCIe 40GB, A100 PCIe 80GB"
            in family["notes"])
    exact = _json(capsys, "compare", "-p", "bert-large-a100-fp16", "--gpu", "A100 SXM4 80GB")
    assert {p["gpu"] for p in exact["plans"]} == {"A100 SXM4 80GB"}
    assert not [n for n in exact["notes"] if "matched" in n]


def test_the_api_filter_takes_the_family_and_says_so() -> None:
    import gpucost

    frame = gpucost.compare("bert-large-a100-fp16", gpu="H100")
    gpus = set(frame["gpu"])
    assert {"H100 SXM5 80GB", "H100 PCIe 80GB"} <= gpus <= set(match_gpu_names("H100"))
    assert any("--gpu H100 matched" in n for n in frame.attrs["notes"])


def test_predict_and_scale_say_which_variant_they_took(
        capsys: pytest.CaptureFixture[str]) -> None:
    pred = _json(capsys, "predict", "--gpu", "A100")
    assert pred["gpu"] == "A100 SXM4 40GB"
    (note,) = pred["notes"]
    assert "took A100 SXM4 40GB" in note and "A100 SXM4 80GB" in note
    assert _json(capsys, "predict", "--gpu", "A100 SXM4 80GB")["notes"] == []
    curve = _json(capsys, "scale", "--gpu", "H100", "-N", "2")
    assert curve["gpu"] == "H100 SXM5 80GB"
    assert any("took H100 SXM5 80GB" in n for n in curve["notes"])


# --- the host CPU: an offer column, x86-64 unless asked -----------------------------------------

def test_cpu_arch_is_stated_or_inferred_per_offer() -> None:
    from gpucost.errors import SnapshotError
    from gpucost.pricing.snapshot import Offers, cpu_archs

    base = {"region": "r", "price_hr": 1.0, "gpu_count": 1}
    offers = Offers.from_records([
        {**base, "provider": "lambda", "instance_type": "gpu_1x_gh200", "gpu": "GH200 96GB"},
        {**base, "provider": "aws", "instance_type": "g5g.xlarge", "gpu": "T4"},
        {**base, "provider": "aws", "instance_type": "g4dn.xlarge", "gpu": "T4"},
        {**base, "provider": "x", "instance_type": "t", "gpu": "T4", "cpu_arch": "arm64"},
    ])
    assert cpu_archs(offers).tolist() == ["arm64", "arm64", "x86-64", "arm64"]
    with pytest.raises(SnapshotError, match="cpu_arch"):
        Offers.from_records([{**base, "provider": "x", "instance_type": "t", "gpu": "T4",
                              "cpu_arch": "sparc"}])


def test_plans_default_to_x86_hosts_and_say_what_they_left_out(
        capsys: pytest.CaptureFixture[str]) -> None:
    bert = ["compare", "-p", "bert-large-a100-fp16", "--limit", "100000", "--gpu", "GH200",
            "--gpu", "H100"]
    default = _json(capsys, *bert)
    assert default["plans"] and not [p for p in default["plans"] if p["gpu"].startswith("GH200")]
    (note,) = [n for n in default["notes"] if "arm64 hosts left out" in n]
    assert "GH200 96GB" in note and "--cpu-arch any" in note
    both = _json(capsys, *bert, "--cpu-arch", "any")
    assert {p["gpu"] for p in both["plans"] if p["gpu"].startswith("GH200")} == {"GH200 96GB"}
    assert len(both["plans"]) > len(default["plans"])
    arm = _json(capsys, *bert, "--cpu-arch", "arm64")
    assert {p["gpu"] for p in arm["plans"]} == {"GH200 96GB"}
    # scale takes the GPU it is given, whatever host it comes on
    assert _json(capsys, "scale", "--gpu", "GH200", "-N", "2")["gpu"] == "GH200 96GB"


def test_a_profile_measured_on_arm_plans_arm_hosts(tmp_path: Any) -> None:
    from gpucost.planning.request import build_request
    from gpucost.profile import resolve_profile

    bert = resolve_profile("bert-large-a100-fp16")
    arm = bert.with_changes(environment={"platform": "Linux-6.8.0-aarch64-with-glibc2.39"})
    x86 = bert.with_changes(environment={"platform": "Linux-6.8.0-x86_64-with-glibc2.39"})
    assert build_request(arm).filters.cpu_arch == "arm64"
    assert build_request(x86).filters.cpu_arch == "x86-64"
    assert build_request(bert).filters.cpu_arch == "x86-64"  # none recorded
    assert build_request(arm, cpu_arch="any").filters.cpu_arch == "any"


def test_the_scaling_curve_of_an_arm_plan_keeps_its_host() -> None:
    """The TUI's curve re-ranks the plan's offer: with the request's CPU architecture, not the
    default one, which would leave the GH200 out of its own curve."""
    from gpucost.planning.ranking import rank
    from gpucost.planning.request import build_request
    from gpucost.planning.scaling import scaling_curve

    request = build_request(gpu="GH200", cpu_arch="any")
    row = rank(request).plans.row(0)
    curve = scaling_curve(request, row, max_nodes=2)
    assert [p.nodes for p in curve.points] == [1, 2]
    assert {p.row.gpu for p in curve.points} == {"GH200 96GB"}
