"""Does a multi-process training script keep its work under ``if __name__ == "__main__":``?

A process started with the spawn or forkserver method (``mp.spawn``, always; DataLoader workers
on macOS and Windows, and on Linux from Python 3.14, whose default is forkserver) imports the
entry script again as ``__mp_main__``. Whatever the script does at import time then runs once
more in every worker: at best a crash ("An attempt has been made to start a new process before
the current process has finished its bootstrapping phase"), at worst a fork bomb billed by the
hour. The script is parsed with :mod:`ast`, never run.

What counts as reached at import time: every module-level statement outside a ``__main__``
guard (also inside ``try``/``with``/loops, and class bodies), and every module-level function
or class named there (called, or passed as in ``fire.Fire(main)``), transitively. A guard is
``__name__ == "__main__"`` either way round, ``in ("__main__", ...)``, a conjunct of ``and``;
``!=`` or ``not`` guards protect their ``else`` branch.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

_SPAWNERS = frozenset({
    "torch.multiprocessing.spawn", "torch.multiprocessing.start_processes",
    "torch.multiprocessing.Process", "torch.multiprocessing.Pool",
    "torch.multiprocessing.get_context", "multiprocessing.Process", "multiprocessing.Pool",
    "multiprocessing.get_context", "multiprocessing.pool.Pool",
    "concurrent.futures.ProcessPoolExecutor",
    "torch.distributed.elastic.multiprocessing.start_processes",
})
_DISTRIBUTED = frozenset({"torch.distributed.init_process_group"})


@dataclass(frozen=True)
class Site:
    """A place where the script starts processes (or joins a process group)."""

    kind: str  # spawn | workers | distributed
    what: str  # as written, e.g. "mp.spawn" or "DataLoader(num_workers=4)"
    line: int


@dataclass(frozen=True)
class Reached:
    """A site that runs at import time, and the import-time statement that leads to it."""

    site: Site
    entry_line: int  # the unguarded module-level statement
    via: tuple[str, ...]  # function and class names on the way, outermost first


@dataclass(frozen=True)
class GuardAnalysis:
    sites: tuple[Site, ...]
    reached: tuple[Reached, ...]
    has_guard: bool

    @property
    def multiprocess(self) -> bool:
        return bool(self.sites)

    @property
    def ok(self) -> bool:
        return not self.reached


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def _aliases(tree: ast.Module) -> dict[str, str]:
    """Local name -> qualified name, from every import in the file."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    names[a.asname] = a.name
                else:
                    head = a.name.split(".")[0]
                    names[head] = head
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                names[a.asname or a.name] = f"{node.module}.{a.name}"
    return names


def _qualify(dotted: str, aliases: dict[str, str]) -> str:
    head, _, rest = dotted.partition(".")
    base = aliases.get(head, head)
    return f"{base}.{rest}" if rest else base


def _site_of(call: ast.Call, aliases: dict[str, str]) -> Site | None:
    dotted = _dotted(call.func)
    if dotted is None:
        return None
    qual = _qualify(dotted, aliases)
    if qual in _SPAWNERS:
        return Site("spawn", dotted, call.lineno)
    if qual in _DISTRIBUTED:
        return Site("distributed", dotted, call.lineno)
    if qual.split(".")[-1] == "DataLoader":
        for kw in call.keywords:
            if kw.arg == "num_workers":
                if isinstance(kw.value, ast.Constant) and kw.value.value == 0:
                    return None
                # A variable may well be > 0: count it.
                shown = ast.unparse(kw.value)
                return Site("workers", f"{dotted}(num_workers={shown})", call.lineno)
    return None


def _guard_kind(test: ast.expr) -> str | None:
    """'main' when ``test`` is true only in the main script, 'other' when only on import."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return "main" if any(_guard_kind(v) == "main" for v in test.values) else None
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _guard_kind(test.operand)
        return {"main": "other", "other": "main"}.get(inner or "")
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return None
    left, op, right = test.left, test.ops[0], test.comparators[0]

    def is_name(n: ast.expr) -> bool:
        return isinstance(n, ast.Name) and n.id == "__name__"

    def is_main(n: ast.expr) -> bool:
        return isinstance(n, ast.Constant) and n.value == "__main__"

    if (is_name(left) and is_main(right)) or (is_main(left) and is_name(right)):
        if isinstance(op, ast.Eq | ast.Is):
            return "main"
        if isinstance(op, ast.NotEq | ast.IsNot):
            return "other"
    if is_name(left) and isinstance(right, ast.Tuple | ast.List | ast.Set) \
            and any(is_main(e) for e in right.elts):
        if isinstance(op, ast.In):
            return "main"
        if isinstance(op, ast.NotIn):
            return "other"
    return None


@dataclass
class _Walker:
    aliases: dict[str, str]
    # name -> (definition nodes executed when the name is used)
    defs: dict[str, list[ast.AST]] = field(default_factory=dict)
    # (node, line of the statement) executed at import time
    import_time: list[tuple[ast.AST, int]] = field(default_factory=list)
    has_guard: bool = False
    loops_at_import: bool = False  # a DataLoader starts its workers when iterated

    def block(self, stmts: Iterable[ast.stmt], guarded: bool) -> None:
        for stmt in stmts:
            self.stmt(stmt, guarded)

    def run(self, node: ast.AST | None, line: int, guarded: bool) -> None:
        if node is not None and not guarded:
            self.import_time.append((node, line))
            if any(isinstance(n, ast.comprehension) for n in ast.walk(node)):
                self.loops_at_import = True

    def stmt(self, s: ast.stmt, guarded: bool) -> None:
        if isinstance(s, ast.If):
            kind = _guard_kind(s.test)
            if kind is not None:
                self.has_guard = True
            self.run(s.test, s.lineno, guarded)
            self.block(s.body, guarded or kind == "main")
            self.block(s.orelse, guarded or kind == "other")
        elif isinstance(s, ast.Try | ast.TryStar):
            self.block(s.body, guarded)
            for handler in s.handlers:
                self.block(handler.body, guarded)
            self.block(s.orelse, guarded)
            self.block(s.finalbody, guarded)
        elif isinstance(s, ast.With | ast.AsyncWith):
            for item in s.items:
                self.run(item.context_expr, s.lineno, guarded)
            self.block(s.body, guarded)
        elif isinstance(s, ast.For | ast.AsyncFor | ast.While):
            self.loops_at_import = self.loops_at_import or not guarded
            self.run(s.iter if isinstance(s, ast.For | ast.AsyncFor) else s.test, s.lineno,
                     guarded)
            self.block(s.body, guarded)
            self.block(s.orelse, guarded)
        elif isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef):
            self.defs.setdefault(s.name, []).append(s)
            for deco in s.decorator_list:
                self.run(deco, s.lineno, guarded)
        elif isinstance(s, ast.ClassDef):
            # The class body runs at import; its methods run when the class is used.
            self.defs.setdefault(s.name, []).append(s)
            for deco in (*s.decorator_list, *s.bases):
                self.run(deco, s.lineno, guarded)
            for inner in s.body:
                if not isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef):
                    self.stmt(inner, guarded)
        else:
            self.run(s, s.lineno, guarded)


def _names(node: ast.AST) -> Iterator[str]:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
            yield sub.id
        elif isinstance(sub, ast.Attribute):
            yield sub.attr  # self.train(), Trainer.fit: methods by name


def _sites(node: ast.AST, aliases: dict[str, str]) -> Iterator[Site]:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            site = _site_of(sub, aliases)
            if site is not None:
                yield site


def analyse_source(source: str, filename: str = "<script>") -> GuardAnalysis:
    """Parse ``source``; raises SyntaxError when it is not valid Python."""
    tree = ast.parse(source, filename=filename)
    aliases = _aliases(tree)
    walker = _Walker(aliases)
    walker.block(tree.body, guarded=False)
    for node in ast.walk(tree):  # methods, reachable by attribute name
        if isinstance(node, ast.ClassDef):
            for inner in node.body:
                if isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef):
                    walker.defs.setdefault(inner.name, []).append(inner)
    reached: dict[tuple[str, int], Reached] = {}
    for node, line in walker.import_time:
        # Breadth-first from each import-time statement; the first path found is the shortest.
        seen: set[str] = set()
        frontier: list[tuple[ast.AST, tuple[str, ...]]] = [(node, ())]
        while frontier:
            current, via = frontier.pop(0)
            bodies = [current] if not via else [
                stmt for stmt in getattr(current, "body", [])]
            for body in bodies:
                for site in _sites(body, aliases):
                    if site.kind == "workers" and not via and not walker.loops_at_import:
                        continue  # built at import but only iterated under the guard
                    reached.setdefault((site.what, site.line), Reached(site, line, via))
            for name in _names(current):
                if name in walker.defs and name not in seen:
                    seen.add(name)
                    frontier.extend((d, (*via, name)) for d in walker.defs[name])
    all_sites = sorted({(s.line, s.what): s for s in _sites(tree, aliases)}.values(),
                       key=lambda s: s.line)
    return GuardAnalysis(tuple(all_sites),
                         tuple(sorted(reached.values(), key=_severity_order)),
                         walker.has_guard)


def _severity_order(r: Reached) -> tuple[int, int, int]:
    """Spawns first (they always re-import), then workers, then process groups; short paths."""
    return (("spawn", "workers", "distributed").index(r.site.kind), len(r.via), r.site.line)


def analyse_file(path: str | Path) -> GuardAnalysis:
    p = Path(path)
    return analyse_source(p.read_text(encoding="utf-8"), filename=str(p))
