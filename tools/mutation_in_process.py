"""Tests mutants that `make mutate` generated, one after another in one process, against
tests named here: far faster than mutmut's own run when a module's tests are a few fast
files (no fork, no start-up per mutant, no stats over the whole selection).

Run it after `make mutate` has generated the mutants in build/mutation/tree/mutants
(it may be stopped once its "Running stats" phase begins):

    python -m tools.mutation_in_process 'server.storage.audit.*' \\
        --tests tests/unit/storage/test_audit_store.py tests/unit/cli/test_audit_verify.py

It first runs the tests once on the unchanged code, noting which functions each test
reaches (mutmut's own trampolines, under MUTANT_UNDER_TEST=stats) and how long it takes.
Then, for each mutant matching a pattern that has no result yet (and, with --again,
each survivor), it runs the tests that reach the mutant's function, fastest first, stopping
at the first failure, and writes pytest's exit code where mutmut keeps it (the module's
.meta file in the tree), so `python -m tools.mutation_report` counts it. A mutant no
test reaches is recorded as mutmut records it (33, "no tests"). A mutant that hangs is
stopped by pytest-timeout and counts as killed. Only tests that run the code in this
process can kill a mutant: a gateway started in a subprocess runs the unmutated code.
The checkout's tests are copied into the tree first, so new tests count at once.
`-m` leaves out slow and browser tests (--marks changes it; add `and not postgres` to
run the SQLite half of tests parametrised over both databases).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import fnmatch
import io
import json
import os
import shutil
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MUTANTS = ROOT / "build" / "mutation" / "tree" / "mutants"
# pytest's options for every run: quiet, in a fixed order, no cache written into the tree.
# Without the unraisable-exception plugin: its full garbage collection at each session's
# end, over every module this process has imported, took most of a run.
QUIET = [
    "-q", "-p", "no:randomly", "-p", "no:cacheprovider", "--no-header", "-p", "no:warnings",
    "-p", "no:unraisableexception",
]  # fmt: skip
MARKS = "not slow and not browser"
# pytest's exit codes of a mutant no test caught: every test passed, none ran, none reached it.
SURVIVED = (0, 5, 33)


def mangled(mutant: str) -> str:
    """The function a mutant changes, as mutmut's trampolines name it."""
    return mutant.partition("__mutmut_")[0]


class Reach:
    """A pytest plugin noting the functions each test reaches, and its duration."""

    def __init__(self) -> None:
        self.tests_by_function: dict[str, set[str]] = defaultdict(set)
        self.duration: dict[str, float] = defaultdict(float)
        self.failed: list[str] = []

    def pytest_runtest_logreport(self, report: Any) -> None:
        from mutmut.state import state

        self.duration[report.nodeid] += report.duration
        if report.failed:
            self.failed.append(report.nodeid)
        hits = state()._stats
        for function in hits:
            self.tests_by_function[function].add(report.nodeid)
        hits.clear()


def run_pytest(args: list[str], log: io.TextIOBase, plugins: list[Any] | None = None) -> int:
    import pytest

    with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        return int(pytest.main([*args, *QUIET], plugins=plugins or []))


def metas() -> list[Path]:
    return sorted(MUTANTS.rglob("*.py.meta"))


def pending(patterns: list[str], again: bool) -> list[tuple[Path, str]]:
    found = []
    for meta in metas():
        codes = json.loads(meta.read_text())["exit_code_by_key"]
        for name, code in codes.items():
            if any(fnmatch.fnmatchcase(name, p) for p in patterns) and (
                code is None or (again and code in SURVIVED)
            ):
                found.append((meta, name))
    return found


def record(meta: Path, name: str, code: int, seconds: float) -> None:
    """Adds one result to `meta`, under a lock (runs over other functions of the same
    module may record theirs at the same time) and replacing the file whole (a reader
    never sees half of it)."""
    with open(meta.with_name(meta.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        data = json.loads(meta.read_text())
        data["exit_code_by_key"][name] = code
        data.setdefault("durations_by_key", {})[name] = seconds
        written = meta.with_name(meta.name + ".new")
        written.write_text(json.dumps(data, indent=4))
        os.replace(written, meta)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("patterns", nargs="+", help="mutant names, * wildcards allowed")
    parser.add_argument("--tests", nargs="+", required=True, help="pytest paths or node ids")
    parser.add_argument("--deselect", nargs="*", default=[], help="node id prefixes to leave out")
    parser.add_argument("--marks", default=MARKS, help="pytest -m expression of the tests run")
    parser.add_argument("--again", action="store_true", help="test the survivors again")
    parser.add_argument("--log", type=Path, default=ROOT / "build/mutation/in_process.log")
    args = parser.parse_args()

    args.log = args.log.resolve()
    # The tests as they are now in the checkout (new ones too), beside the mutated code.
    shutil.copytree(ROOT / "tests", MUTANTS / "tests", dirs_exist_ok=True)
    # The mutated tree first on the path, so that `server` and `http_facade` are its.
    os.chdir(MUTANTS)
    sys.path.insert(0, str(MUTANTS))
    import server

    assert Path(server.__file__).resolve().is_relative_to(MUTANTS), server.__file__
    args.log.parent.mkdir(parents=True, exist_ok=True)
    log = args.log.open("a")
    selection = [*args.tests, "-m", args.marks, *(f"--deselect={d}" for d in args.deselect)]

    os.environ["MUTANT_UNDER_TEST"] = "stats"
    reach = Reach()
    code = run_pytest(selection, log, [reach])
    if code != 0:
        sys.exit(f"the tests fail on the unchanged code ({code}): {reach.failed}; see {args.log}")
    todo = pending(args.patterns, args.again)
    print(f"{len(todo)} mutants to test; {len(reach.duration)} tests", flush=True)
    counts: dict[int, int] = defaultdict(int)
    for n, (meta, name) in enumerate(todo, 1):
        tests = sorted(
            reach.tests_by_function.get(mangled(name), ()), key=lambda t: reach.duration[t]
        )
        started = time.monotonic()
        if not tests:
            code = 33
        else:
            os.environ["MUTANT_UNDER_TEST"] = name
            # A hang's bound: a few times what the tests take on the unchanged code.
            bound = 20 + 5 * sum(reach.duration[t] for t in tests)
            print(f"== {name}", file=log, flush=True)
            code = run_pytest([*tests, "-x", f"--timeout={bound:.0f}", "-m", args.marks], log)
        os.environ["MUTANT_UNDER_TEST"] = ""
        record(meta, name, code, time.monotonic() - started)
        counts[code] += 1
        if code in SURVIVED:
            print(f"survived ({code}): {name}", flush=True)
        if n % 50 == 0:
            print(f"{n}/{len(todo)} {dict(counts)}", flush=True)
    print(f"done: {dict(counts)}", flush=True)


if __name__ == "__main__":
    main()
