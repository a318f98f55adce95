"""One JSON envelope for every machine-readable output, strict JSON only, --json everywhere."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from goldens import assert_golden

from gpucost.cli import build_parser, main
from gpucost.envelope import ENVELOPE_KEYS, dumps, envelope, json_safe

REPO_ROOT = Path(__file__).resolve().parents[1]
EXAMPLE_PLAN = str(REPO_ROOT / "examples" / "plan.toml")

# command line -> the kind its schema names
COMMANDS: dict[str, tuple[list[str], str]] = {
    "compare": (["compare", "-n", "2"], "compare"),
    "plan": (["plan", "--epochs", "1"], "plan-advice"),
    "explain": (["explain", EXAMPLE_PLAN], "explain"),
    "predict": (["predict", "--gpu", "L4"], "predict"),
    "scale": (["scale", "--gpu", "A100", "-N", "2"], "scale"),
    "breakeven": (["breakeven", "--running-hr", "2", "--disk-gb", "100", "--gb-month", "0.1",
                   "--setup-min", "10", "--idle-hours", "5"], "breakeven"),
    "gpus": (["gpus"], "gpus"),
    "gpu": (["gpus", "T4"], "gpu"),
    "prices-show": (["prices", "show", "--gpu", "H100", "--limit", "2"], "prices-show"),
    "preflight": (["preflight", EXAMPLE_PLAN, "--today", "2026-12-01"], "preflight"),
    "runs": (["ps", "--all"], "runs"),
    "resources": (["ps"], "resources"),
    "probe": (["probe", "--epochs", "1", "--dry-run"], "probe"),
}


def _strict(text: str) -> dict[str, Any]:
    def refuse(token: str) -> None:
        raise AssertionError(f"{token} is not JSON")

    doc = json.loads(text, parse_constant=refuse)
    assert isinstance(doc, dict)
    return doc


def _shape(value: Any) -> Any:
    """Keys and value types, not values: what the golden of an envelope pins down."""
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shape(value[0])] if value else []
    return type(value).__name__


@pytest.mark.parametrize("name", sorted(COMMANDS))
@pytest.mark.parametrize("flag", [["--format", "json"], ["--json"]])
def test_every_json_output_is_one_envelope(
    name: str, flag: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    argv, kind = COMMANDS[name]
    assert main([*argv, *flag]) == 0
    doc = _strict(capsys.readouterr().out)
    assert tuple(doc)[:4] == ENVELOPE_KEYS
    assert doc["schema"] == f"gpucost-{kind}" and doc["schema_version"] == 1
    dt.datetime.strptime(doc["generated_at"], "%Y-%m-%dT%H:%M:%SZ")


@pytest.mark.parametrize("name", ["breakeven", "gpu", "predict", "scale", "compare"])
def test_envelope_shape_golden(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv, _ = COMMANDS[name]
    assert main([*argv, "--json"]) == 0
    doc = _strict(capsys.readouterr().out)
    header = {k: doc[k] for k in ("schema", "schema_version")}
    shape = {"header": header, "body": _shape({k: doc[k] for k in list(doc)[4:]})}
    assert_golden(f"envelope/{name}.json", json.dumps(shape, indent=2) + "\n")


def test_breakeven_document_golden(capsys: pytest.CaptureFixture[str]) -> None:
    argv, _ = COMMANDS["breakeven"]
    assert main([*argv, "--json"]) == 0
    doc = _strict(capsys.readouterr().out)
    doc["generated_at"] = "<time>"
    doc["gpucost_version"] = "<version>"
    assert_golden("envelope/breakeven_document.json", json.dumps(doc, indent=2) + "\n")


def test_no_break_even_is_null_not_infinity(capsys: pytest.CaptureFixture[str]) -> None:
    # A disk of 0 GB costs nothing stopped: the break-even idle time is infinite.
    assert main(["breakeven", "--running-hr", "2", "--disk-gb", "0", "--gb-month", "0.1",
                 "--json"]) == 0
    out = capsys.readouterr().out
    assert "Infinity" not in out and "NaN" not in out
    assert _strict(out)["breakeven_hours"] is None


def test_non_finite_numbers_become_null_everywhere() -> None:
    doc = envelope("x", {"a": math.inf, "b": [np.float64("nan"), -math.inf, 1.5],
                         "c": np.arange(2), "d": (np.int64(3), Path("/p"))})
    text = dumps(doc)
    assert _strict(text)["b"] == [None, None, 1.5]
    assert json_safe({"c": np.array([1.0, np.inf])}) == {"c": [1.0, None]}
    assert _strict(text)["d"] == [3, "/p"]


def test_body_cannot_override_the_envelope() -> None:
    with pytest.raises(ValueError, match="envelope keys"):
        envelope("x", {"schema": "mine"})


def _subparsers(parser: argparse.ArgumentParser, path: str = "") -> list[tuple[str, Any]]:
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out.append((f"{path} {name}".strip(), sub))
                out += _subparsers(sub, f"{path} {name}")
    return out


def test_every_format_option_has_its_json_alias() -> None:
    with_format = []
    for name, sub in _subparsers(build_parser()):
        options = {o for a in sub._actions for o in a.option_strings}
        if "--format" in options:
            with_format.append(name)
            assert "--json" in options, f"`gpucost {name}` has --format but no --json"
            fmt = next(a for a in sub._actions if "--format" in a.option_strings)
            assert "json" in fmt.choices, name
    assert {"compare", "plan", "explain", "predict", "scale", "breakeven", "gpus", "prices show",
            "prices diff", "status", "ps", "preflight", "profile", "probe"} <= set(with_format)
