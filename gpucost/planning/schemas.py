"""The JSON Schema of ``gpucost compare --format json``, published in docs/schemas/.

A plan's properties and its units table come from the one declaration of a plan's columns
(:mod:`gpucost.planning.columns`), so the schema cannot drift from the output; the test suite
checks that the published file is what this module derives, and validates real output
against it. ``python -m gpucost.planning.schemas docs/schemas`` rewrites the file.
"""

from __future__ import annotations

import json
from typing import Any

from gpucost.envelope import SCHEMA_PREFIX
from gpucost.planning.columns import PLAN_UNITS, plan_schema
from gpucost.planning.ranking import COMPARE_KIND, COMPARE_SCHEMA_VERSION

_TEXT = {"type": "string"}
_NUMBER = {"type": "number"}
_COUNT = {"type": "integer", "minimum": 0}


def _object(properties: dict[str, Any], description: str,
            optional: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "object", "description": description, "properties": properties,
            "required": [k for k in properties if k not in optional],
            "additionalProperties": False}


def compare_schema() -> dict[str, Any]:
    """The JSON Schema of the document ``gpucost compare --format json`` prints (and
    ``Ranking.to_dict`` returns, without the two totals the command adds)."""
    plans = {"type": "array", "items": {"$ref": "#/$defs/plan"}}
    document = _object({
        "schema": {"const": SCHEMA_PREFIX + COMPARE_KIND},
        "schema_version": {"const": COMPARE_SCHEMA_VERSION},
        "gpucost_version": _TEXT,
        "generated_at": {"type": "string", "description": "UTC, to the second, with a Z"},
        "profile": _object({
            "name": _TEXT, "gpu": _TEXT, "precision": _TEXT,
            "batch_size": {"type": "integer", "description": "samples per device"},
            "throughput": {"type": "number", "description": "sample_unit per second, measured"},
            "sample_unit": _TEXT, "source": _TEXT,
        }, "The workload profile the plans were predicted from."),
        "job": _object({"samples": {"type": "number", "description": "in the profile's unit"},
                        "description": _TEXT}, "How much training."),
        "sort": {"enum": ["cost", "time"]},
        "price_sources": {"type": "array", "items": _object({
            "source": _TEXT, "date": _TEXT, "age_days": _NUMBER, "stale": {"type": "boolean"},
            "offers": _COUNT, "path": {"type": ["string", "null"]},
        }, "One price snapshot behind the ranking.")},
        "notes": {"type": "array", "items": _TEXT},
        "units": _object({name: {"const": unit} for name, unit in PLAN_UNITS.items()},
                         "Each plan column's unit."),
        "plans": plans | {"description": "The plans that fit, best first."},
        "unfit_plans": plans | {"description": "With --show-unfit: the plans whose per-device "
                                "batch fits their GPU no way, in the same order."},
        "plans_total": _COUNT | {"description": "gpucost compare: plans before --limit"},
        "unfit_total": _COUNT | {"description": "gpucost compare: plans left out as unfit"},
    }, "Offers ranked by expected dollars per job: gpucost compare --format json.",
        optional=("unfit_plans", "plans_total", "unfit_total"))
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": SCHEMA_PREFIX + COMPARE_KIND, **document,
            "$defs": {"plan": plan_schema()}}


def json_schemas() -> dict[str, str]:
    """The published JSON Schemas of plans (docs/schemas/), file name -> text."""
    return {f"{SCHEMA_PREFIX}{COMPARE_KIND}.schema.json":
            json.dumps(compare_schema(), indent=2) + "\n"}


if __name__ == "__main__":  # python -m gpucost.planning.schemas docs/schemas
    import sys
    from pathlib import Path

    from gpucost._io import atomic_write_text

    for file_name, text in json_schemas().items():
        atomic_write_text(Path(sys.argv[1]) / file_name, text)
