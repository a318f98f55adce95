"""The documents of a run's folder, as declared models: what each field holds, checked on read.

    status.json     RunStatusFile  the launcher's view (rewritten on every poll)
    progress.json   Report         the training script's latest gpucost.report()
    metrics.jsonl   Report         one per line: every report so far

The launcher writes status.json and gpucost.report() writes the other two, but a reader cannot
trust that: a crash, a full disk or a hand edit leaves strings or lists where numbers or objects
belong. Each read goes through these models (strict: no "3" for 3, no NaN), and a damaged file
is one :class:`RunFileError` naming the file, the field and what was expected. A status.json is
read into its model once and handed on as that object (to :mod:`gpucost.executor.records`, the
CLI and the TUI), read by attribute.
Their JSON Schemas are published in docs/schemas/ (``python -m gpucost.executor.runfiles
docs/schemas`` rewrites them).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gpucost._io import parse_json, read_text
from gpucost.errors import RunFileError as RunFileError  # re-exported: its old home
from gpucost.limits import MAX_METRICS_BYTES, MAX_RUN_FILE_BYTES

Number = Annotated[float, Field(allow_inf_nan=False)]
NonNegative = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]
Document = TypeVar("Document", bound=BaseModel)


class Report(BaseModel):
    """One gpucost.report() call."""

    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)

    time: NonNegative  # Unix time of the report
    epoch: NonNegative | None = None  # epochs completed
    metrics: dict[str, Number] = Field(default_factory=dict)
    throughput: Positive | None = None  # samples/s over all processes, last epoch
    checkpoint: str | None = None  # where the checkpoint was shipped, if it was


class Verification(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow", frozen=True)

    deviation_pct: Number
    within_margin: bool
    reestimated_cost_usd: NonNegative | None = None


class RunStatusFile(BaseModel):
    """status.json. Every field is optional (a launcher that died early wrote few of them);
    fields this gpucost does not know are kept, for newer launchers."""

    model_config = ConfigDict(strict=True, extra="allow", frozen=True)

    run_id: str | None = None
    name: str | None = None
    state: str = "unknown"
    provider: str | None = None
    elapsed_s: NonNegative | None = None
    cost_usd: NonNegative | None = None
    budget_cap_usd: Positive | None = None
    timeout_s: Positive | None = None
    epoch: NonNegative | None = None
    epochs: Positive | None = None
    eta_s: NonNegative | None = None
    metrics: dict[str, Number] = Field(default_factory=dict)
    throughput: Positive | None = None
    planned_throughput: Positive | None = None
    launcher_pid: int | None = None
    final: bool = False
    checkpoint: str | None = None
    verify: Verification | None = None
    updated_at: NonNegative | None = None
    reason: str | None = None  # why the run ended, when its launcher could not say (the guard)
    # said once the spend passes planfile.BUDGET_WARN_SHARE of budget_cap_usd (the launcher)
    budget_warning: str | None = None
    # the measured throughput outside the prediction's band (a SkyPilot run's launcher)
    throughput_warning: str | None = None

    def replaced(self, **changes: Any) -> RunStatusFile:
        """This status with ``changes`` (values of its fields' types: the ledger's end, the
        job's last report), which :meth:`document` then writes as set. A name that is no
        field would land among the unknown fields unseen: it is refused."""
        if misnamed := sorted(set(changes) - set(type(self).model_fields)):
            raise TypeError(f"RunStatusFile has no field {', '.join(misnamed)}")
        return self.model_copy(update=changes)

    def document(self) -> dict[str, Any]:
        """The JSON object of status.json: the fields the file held or a change set, and the
        fields this gpucost does not know, as they were (none added, so the file reads the
        same to an older gpucost)."""
        return self.model_dump(mode="json", exclude_unset=True)


def read_status(path: Path) -> RunStatusFile | None:
    """status.json checked against RunStatusFile (None when absent)."""
    if not path.exists():
        return None
    return _parsed(RunStatusFile, _read_document(path), path)


def read_report(path: Path) -> dict[str, Any] | None:
    """progress.json checked against Report (None when absent)."""
    if not path.exists():
        return None
    return _check(Report, _read_document(path), path)


def read_reports(path: Path) -> list[dict[str, Any]]:
    """metrics.jsonl: each line checked against Report. A line cut short by a crash mid-write
    (only the last can be) is skipped; any other damaged line is an error."""
    if not path.exists():
        return []
    text = read_text(path, what="metrics file", error=RunFileError, max_bytes=MAX_METRICS_BYTES)
    lines = text.splitlines()
    reports = []
    for number, line in enumerate(lines, 1):
        where = f"{path} line {number}"
        try:
            doc = parse_json(line, origin=where, error=RunFileError)
        except RunFileError:
            if number == len(lines) and not text.endswith("\n"):
                continue
            raise
        reports.append(_check(Report, doc, where))
    return reports


def problem(model: type[BaseModel], doc: Any) -> tuple[tuple[str | int, ...], str] | None:
    """The first field of ``doc`` that ``model`` refuses, and why (None when it is valid)."""
    try:
        model.model_validate(doc)
    except ValidationError as err:
        return _first_problem(err)
    return None


def _first_problem(err: ValidationError) -> tuple[tuple[str | int, ...], str]:
    first = err.errors(include_url=False)[0]
    return tuple(first["loc"]), _expected(first)


def _read_document(path: Path) -> Any:
    text = read_text(path, what="run file", error=RunFileError, max_bytes=MAX_RUN_FILE_BYTES)
    return parse_json(text, origin=str(path), error=RunFileError)


def _parsed(model: type[Document], doc: Any, where: str | Path) -> Document:
    """``doc`` as ``model``, or one RunFileError naming the file and the first bad field."""
    if not isinstance(doc, dict):
        raise RunFileError(f"{where} is not a JSON object", hint=_HINT)
    try:
        return model.model_validate(doc)
    except ValidationError as err:
        loc, expected = _first_problem(err)
        field = ".".join(str(part) for part in loc)
        raise RunFileError(f"{where}: {field} {expected}", hint=_HINT) from None


def _check(model: type[BaseModel], doc: Any, where: str | Path) -> dict[str, Any]:
    """``doc`` itself once ``model`` accepts it (reports are still handed on as documents)."""
    _parsed(model, doc, where)
    return dict(doc)


def _expected(error: Any) -> str:
    if error["type"] == "missing":
        return "is missing"
    shown = json.dumps(error.get("input"), default=str)
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    return f"{error['msg'].replace('Input should', 'should', 1)}, got {shown}"


_HINT = "the file is damaged; the run's train.log and launcher.log are plain text"


def json_schemas() -> dict[str, str]:
    """The published JSON Schemas (docs/schemas/), file name -> text."""
    return {f"{name}.schema.json": json.dumps(model.model_json_schema(), indent=2) + "\n"
            for name, model in (("run-status", RunStatusFile), ("run-report", Report))}


if __name__ == "__main__":  # python -m gpucost.executor.runfiles docs/schemas
    import sys

    from gpucost._io import atomic_write_text

    for file_name, text in json_schemas().items():
        atomic_write_text(Path(sys.argv[1]) / file_name, text)
