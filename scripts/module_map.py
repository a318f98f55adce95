"""Write the module map of docs/architecture.md: every module of the gpucost package with its one
job, the first sentence of its docstring.

    python scripts/module_map.py            # rewrite the map between the markers
    python scripts/module_map.py --check    # exit 1 when the committed map is out of date

The map sits between ``<!-- modules:begin -->`` and ``<!-- modules:end -->``; a module without a
docstring is listed as "(no docstring)", which tests/test_architecture_doc.py refuses.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "gpucost"
DOC = REPO / "docs" / "architecture.md"
BEGIN, END = "<!-- modules:begin -->", "<!-- modules:end -->"
MISSING = "(no docstring)"


def one_job(path: Path) -> str:
    """The first sentence of a module's docstring, on one line."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    if not doc:
        return MISSING
    first = " ".join(doc.strip().split("\n\n")[0].split())
    end = first.find(". ")
    return (first if end < 0 else first[:end + 1]).replace("|", "\\|")


def module_map() -> str:
    rows = ["| module | its one job |", "| --- | --- |"]
    for path in sorted(PACKAGE.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        name = path.relative_to(REPO).with_suffix("").as_posix().replace("/", ".")
        rows.append(f"| `{name.removesuffix('.__init__')}` | {one_job(path)} |")
    return "\n".join(rows)


def with_map(text: str) -> str:
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    return f"{head}{BEGIN}\n{module_map()}\n{END}{tail}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--check", action="store_true", help="exit 1 if the map is out of date")
    args = ap.parse_args()
    text = DOC.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        print(f"{DOC}: no {BEGIN} ... {END} markers", file=sys.stderr)
        return 2
    new = with_map(text)
    if args.check:
        return 0 if new == text else 1
    DOC.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
