"""A plan's columns are declared once (gpucost.planning.columns): the typed row, the column
table, the cost model's output, the units table, the JSON and CSV columns and the published
JSON Schema are all read off that one declaration."""

from __future__ import annotations

import csv
import io
import json
import re
from collections import Counter
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import pytest
from goldens import UPDATE_ENV, updating

from gpucost.cli import main
from gpucost.columns import Float, column, columns_of
from gpucost.model.economics import JobCosts
from gpucost.planning.columns import PLAN_COLUMNS, PLAN_UNITS, PlanColumns
from gpucost.planning.plans import PlanRow, Plans
from gpucost.planning.schemas import compare_schema, json_schemas

REPO_ROOT = Path(__file__).resolve().parents[1]
SCHEMA_DIR = REPO_ROOT / "docs" / "schemas"
COLUMN_LINE = re.compile(r"^\s+(\w+): (?:Float|Int|Bool|Text) = column\(", re.MULTILINE)


def test_every_plan_column_is_declared_on_one_line_of_the_package() -> None:
    declared = Counter(
        name for path in (REPO_ROOT / "gpucost").rglob("*.py")
        for name in COLUMN_LINE.findall(path.read_text(encoding="utf-8")))
    names = [f.name for f in fields(PlanColumns)]
    assert len(names) == 52
    assert {name: declared[name] for name in names} == dict.fromkeys(names, 1)


def test_row_table_units_and_outputs_are_the_same_columns_in_the_same_order() -> None:
    names = [f.name for f in fields(PlanColumns)]
    assert [f.name for f in fields(PlanRow)] == names
    assert [f.name for f in fields(Plans)] == names
    outputs = [c.json_name for c in columns_of(PlanColumns)]
    assert list(PLAN_UNITS) == outputs == list(PLAN_COLUMNS)
    # the two per-GB prices are named by their unit in every output
    renamed = {n: o for n, o in zip(names, outputs, strict=True) if n != o}
    assert renamed == {"egress_gb": "egress_usd_per_gb", "ingress_gb": "ingress_usd_per_gb"}


def test_the_cost_model_output_is_the_plan_s_own_cost_columns() -> None:
    plan_fields = {f.name: f for f in fields(PlanColumns)}
    cost_fields = fields(JobCosts)
    assert len(cost_fields) == 27 and cost_fields[0].name == "cost_usd"
    # the very same declarations: one unit, one JSON name, nothing to keep in step
    assert all(plan_fields[f.name] is f for f in cost_fields)
    order = list(plan_fields)
    positions = [order.index(f.name) for f in cost_fields]
    assert positions == sorted(positions)


def test_a_field_not_declared_as_a_column_is_refused() -> None:
    @dataclass(frozen=True)
    class Table:
        price: Float = column("USD/h")
        note: str = ""

    with pytest.raises(TypeError, match=r"Table\.note is not a column"):
        columns_of(Table)


def _compare(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["compare", "-n", "4", *args]) == 0
    return capsys.readouterr().out


def test_json_records_and_csv_header_follow_the_declaration(
        capsys: pytest.CaptureFixture[str]) -> None:
    doc = json.loads(_compare(capsys, "--format", "json"))
    assert doc["units"] == PLAN_UNITS
    assert doc["plans"] and all(list(p) == list(PLAN_COLUMNS) for p in doc["plans"])
    header = next(csv.reader(io.StringIO(_compare(capsys, "--format", "csv"))))
    assert header == list(PLAN_COLUMNS)


def test_the_published_compare_schema_is_the_derived_one() -> None:
    for name, text in json_schemas().items():
        if updating():
            (SCHEMA_DIR / name).write_text(text, encoding="utf-8")
        assert (SCHEMA_DIR / name).read_text(encoding="utf-8") == text, (
            f"docs/schemas/{name} is out of date: rerun with {UPDATE_ENV}=1 or "
            "python -m gpucost.planning.schemas docs/schemas")
    assert list(compare_schema()["$defs"]["plan"]["properties"]) == list(PLAN_COLUMNS)


def test_compare_output_passes_the_published_schema_and_a_wrong_one_does_not(
        capsys: pytest.CaptureFixture[str]) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((SCHEMA_DIR / "gpucost-compare.schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    doc: dict[str, Any] = json.loads(_compare(capsys, "--json", "--show-unfit"))
    jsonschema.validate(doc, schema)
    plan = doc["plans"][0]
    for broken in ({**plan, "cost_usd": "12.5"}, {**plan, "nodes": 1.5},
                   {k: v for k, v in plan.items() if k != "worst_usd"},
                   {**plan, "egress_gb": 0.09}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({**doc, "plans": [broken]}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**doc, "units": {**doc["units"], "cost_usd": "EUR"}}, schema)
