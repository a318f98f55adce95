"""Typed column tables, each column declared once.

A table is one generic dataclass whose fields are annotated with the kind variables below
(:data:`Float`, :data:`Int`, :data:`Bool`, :data:`Text`) and declared with :func:`column`, which
keeps the unit (and a JSON name, where the field's own name hides its unit, and the checks a
table read from files applies) as field metadata.
Specialised with numpy arrays it is the column table, specialised with ``float, int, bool, str``
it is one typed row, so the two cannot disagree; the units table, the JSON and CSV column names
and the JSON Schema of a row are read off the same fields (:func:`columns_of`).

Imports no numpy: ``gpucost --help`` loads the modules that declare tables' rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from functools import cache
from typing import Any, TypeVar

Float = TypeVar("Float")  # float64 column / float row value; NaN and infinities are JSON null
Int = TypeVar("Int")  # int64 column / int
Bool = TypeVar("Bool")  # bool column / bool
Text = TypeVar("Text")  # object column of str / str

_KINDS = {"Float": "float", "Int": "int", "Bool": "bool", "Text": "text"}
_JSON_TYPES: dict[str, Any] = {"float": ["number", "null"], "int": "integer",
                               "bool": "boolean", "text": "string"}


def column(unit: str, *, json_name: str | None = None, check: object = None) -> Any:
    """A column of a table: its unit ("" for a name), and its name in JSON, CSV and DataFrames
    when that differs from the field's. ``check``: what a table read from files validates the
    column's cells against (a price snapshot's offers: :class:`gpucost.pricing.snapshot.Column`)."""
    return field(metadata={"unit": unit, "json_name": json_name, "check": check})


@dataclass(frozen=True, slots=True)
class ColumnSpec:
    """One declared column, as read off its field."""

    name: str  # the field's name
    json_name: str  # its name in JSON, CSV and DataFrames
    kind: str  # "float" | "int" | "bool" | "text"
    unit: str

    def json_schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": _JSON_TYPES[self.kind]}
        if self.unit:
            schema["description"] = self.unit
        return schema


@cache
def columns_of(table: type) -> tuple[ColumnSpec, ...]:
    """The columns of a table declared with :func:`column`, in field order."""
    specs = []
    for f in fields(table):
        annotation = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", "")
        kind = _KINDS.get(annotation.rsplit(".", 1)[-1])
        if kind is None or "unit" not in f.metadata:
            raise TypeError(f"{table.__name__}.{f.name} is not a column: annotate it Float, Int, "
                            "Bool or Text and declare it with gpucost.columns.column()")
        specs.append(ColumnSpec(f.name, f.metadata["json_name"] or f.name, kind,
                                f.metadata["unit"]))
    return tuple(specs)


def units(table: type) -> dict[str, str]:
    """JSON name -> unit, in column order."""
    return {c.json_name: c.unit for c in columns_of(table)}


def row_schema(table: type, description: str) -> dict[str, Any]:
    """The JSON Schema of one row of ``table`` as JSON: every column, nothing else."""
    specs = columns_of(table)
    return {"type": "object", "description": description,
            "properties": {c.json_name: c.json_schema() for c in specs},
            "required": [c.json_name for c in specs], "additionalProperties": False}
