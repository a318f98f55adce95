"""The `__main__` guard check: parsed, never run; guards in odd places; the verdict vs reality."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gpucost.preflight.mainguard import analyse_source

SPAWN_MAIN = """
import torch.multiprocessing as mp

def work(rank):
    print(rank)

def main():
    mp.spawn(work, nprocs=2)
"""


def _verdict(source: str) -> tuple[bool, bool, list[str]]:
    """(multiprocess, ok, [what@line -> via]) for a script."""
    found = analyse_source(textwrap.dedent(source))
    return found.multiprocess, found.ok, [
        f"{r.site.what}@{r.entry_line}" + (f" via {'.'.join(r.via)}" if r.via else "")
        for r in found.reached]


GUARDED = {
    "plain": 'if __name__ == "__main__":\n    main()\n',
    "reversed": "if '__main__' == __name__:\n    main()\n",
    "with an and": 'import os\nif __name__ == "__main__" and not os.environ.get("DRY"):\n'
                   "    main()\n",
    "and, guard second": 'import os\nif os.environ.get("GO") and __name__ == "__main__":\n'
                         "    main()\n",
    "in a tuple": 'if __name__ in ("__main__",):\n    main()\n',
    "else of !=": 'if __name__ != "__main__":\n    pass\nelse:\n    main()\n',
    "else of not ==": 'if not __name__ == "__main__":\n    pass\nelse:\n    main()\n',
    "inside try/else": "try:\n    import numpy\nexcept ImportError:\n    numpy = None\nelse:\n"
                       '    if __name__ == "__main__":\n        main()\n',
    "inside try body": 'try:\n    if __name__ == "__main__":\n        main()\n'
                       "except KeyboardInterrupt:\n    pass\n",
    "inside with": 'import contextlib\nwith contextlib.suppress(KeyboardInterrupt):\n'
                   '    if __name__ == "__main__":\n        main()\n',
    "nested ifs": 'import sys\nif sys.platform != "emscripten":\n'
                  '    if __name__ == "__main__":\n        main()\n',
}


@pytest.mark.parametrize("tail", GUARDED.values(), ids=GUARDED.keys())
def test_guarded_scripts_pass(tail: str) -> None:
    multiprocess, ok, reached = _verdict(SPAWN_MAIN + tail)
    assert multiprocess and ok, reached


UNGUARDED = {
    "no guard": ("main()\n", "mp.spawn@9 via main"),
    "code after the guard": ('if __name__ == "__main__":\n    print("hi")\nmain()\n',
                             "mp.spawn@11 via main"),
    "or is no guard": ('if __name__ == "__main__" or True:\n    main()\n',
                       "mp.spawn@10 via main"),
    "body of !=": ('if __name__ != "__main__":\n    main()\n', "mp.spawn@10 via main"),
    "passed, not called": ("import fire\nfire.Fire(main)\n", "mp.spawn@10 via main"),
    "in try without guard": ("try:\n    main()\nexcept KeyboardInterrupt:\n    pass\n",
                             "mp.spawn@10 via main"),
    "in a loop": ("for attempt in range(3):\n    main()\n", "mp.spawn@10 via main"),
    "guard in a function": ('def run():\n    if __name__ == "__main__":\n        pass\n'
                            "    main()\nrun()\n", "mp.spawn@13 via run.main"),
}


@pytest.mark.parametrize(("tail", "expected"), UNGUARDED.values(), ids=UNGUARDED.keys())
def test_unguarded_scripts_fail(tail: str, expected: str) -> None:
    multiprocess, ok, reached = _verdict(SPAWN_MAIN + tail)
    assert multiprocess and not ok
    assert reached[0] == expected


def test_direct_imports_and_pools() -> None:
    _, ok, reached = _verdict("""
        from torch.multiprocessing import spawn
        def f(i): pass
        spawn(f, nprocs=2)
    """)
    assert not ok and reached == ["spawn@4"]
    _, ok, reached = _verdict("""
        from multiprocessing import Pool
        with Pool(4) as pool:
            print(pool.map(abs, [-1, -2]))
    """)
    assert not ok and reached == ["Pool@3"]
    _, ok, reached = _verdict("""
        import concurrent.futures as cf
        if __name__ == "__main__":
            with cf.ProcessPoolExecutor() as ex:
                ex.map(abs, [1])
    """)
    assert ok


def test_methods_reached_through_a_class() -> None:
    _, ok, reached = _verdict("""
        import torch.multiprocessing as mp
        class Trainer:
            def fit(self):
                self._launch()
            def _launch(self):
                mp.spawn(print, nprocs=2)
        Trainer().fit()
    """)
    assert not ok and reached == ["mp.spawn@8 via Trainer"]  # a used class: all its methods


def test_dataloader_workers_count_when_iterated_at_import() -> None:
    loader = """
        from torch.utils.data import DataLoader
        loader = DataLoader(range(10), batch_size=2, num_workers=N)
    """
    # Built at import and iterated under the guard: a worker re-import only rebuilds it.
    multiprocess, ok, _ = _verdict(loader.replace("N", "4") + """
        if __name__ == "__main__":
            for batch in loader:
                print(batch)
    """)
    assert multiprocess and ok
    multiprocess, ok, reached = _verdict(loader.replace("N", "4") + """
        for batch in loader:
            print(batch)
    """)
    assert multiprocess and not ok and reached == ["DataLoader(num_workers=4)@3"]
    # num_workers=0 loads in the main process: nothing to re-import.
    multiprocess, ok, _ = _verdict(loader.replace("N", "0") + """
        for batch in loader:
            print(batch)
    """)
    assert not multiprocess and ok
    # A variable may be > 0: counted.
    multiprocess, _, _ = _verdict(loader.replace("N", "args.workers"))
    assert multiprocess


def test_process_group_alone_is_its_own_kind() -> None:
    found = analyse_source("import torch.distributed as dist\n"
                           "dist.init_process_group('gloo')\n")
    assert [r.site.kind for r in found.reached] == ["distributed"]


def test_single_process_script() -> None:
    multiprocess, ok, _ = _verdict("import torch\nprint(torch.ones(2).sum())\n")
    assert not multiprocess and ok


def test_syntax_error_is_raised_not_run() -> None:
    with pytest.raises(SyntaxError):
        analyse_source("def broken(:\n    pass\n")


SPAWN_SCRIPT = """
import multiprocessing

def square(x):
    print(x * x)

def main():
    worker = multiprocessing.get_context("spawn").Process(target=square, args=(3,))
    worker.start()
    worker.join()
    raise SystemExit(worker.exitcode)
"""


@pytest.mark.parametrize("guarded", [True, False], ids=["guarded", "unguarded"])
def test_verdict_matches_what_really_happens(tmp_path: Path, guarded: bool) -> None:
    """Run both scripts for real with the spawn start method: the check predicts the outcome."""
    source = SPAWN_SCRIPT + ('if __name__ == "__main__":\n    main()\n' if guarded
                             else "main()\n")
    script = tmp_path / "job.py"
    script.write_text(source)
    assert analyse_source(source).ok is guarded
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=30, check=False, cwd=tmp_path)
    if guarded:
        assert done.returncode == 0 and done.stdout.strip() == "9"
    else:
        assert done.returncode != 0
        assert "bootstrapping phase" in done.stderr
