"""Tests chosen mutants of a `make mutate` tree in one Python process, against tests
chosen for them, and records each result where mutmut keeps its own (the mutants'
`.meta` files), so that `python -m tools.mutation_report` counts them.

mutmut runs every mutant against the tests that reached its function while it
gathered its stats over the whole selection, which takes hours; the mutants of a few
functions that fast unit tests reach need seconds each. So: run `make mutate` once
(its mutant generation is what is needed; its stats phase may be stopped), then

    python -m tools.mutation_in_process --tests tests/unit/providers --tests tests/unit/x.py \\
        'server.providers.openai.x_counts__mutmut_*' 'server.providers.http.x_check_status*'

Each mutant is switched on by its name (MUTANT_UNDER_TEST, read by mutmut's trampolines
at every call) and pytest runs in this process (`-x`: the first failure kills it), so
only tests that call the mutated code in this process can kill it: not a gateway
started as a subprocess. A test that hangs fails at `--timeout` seconds (killed, as
mutmut counts a timeout). The memo caches (functools) of the tree's modules are emptied
between mutants, so that no mutant's result is served to the next. Mutants that already
have a result are skipped unless `--again`.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import fnmatch
import io
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MUTANTS = ROOT / "build" / "mutation" / "tree" / "mutants"
# pytest's exit codes: 0 every test passed (the mutant survived), 1 one failed (killed),
# 5 none collected.
PASSED, FAILED = 0, 1
PACKAGES = ("server", "http_facade")


def chosen(patterns: list[str], again: bool) -> dict[Path, list[str]]:
    """The mutants matching `patterns`, by the .meta file that records them."""
    found: dict[Path, list[str]] = {}
    for meta in sorted(MUTANTS.rglob("*.py.meta")):
        codes = json.loads(meta.read_text())["exit_code_by_key"]
        names = [
            n for n, code in codes.items()
            if any(fnmatch.fnmatchcase(n, p) for p in patterns) and (again or code is None)
        ]  # fmt: skip
        if names:
            found[meta] = names
    return found


def record(meta: Path, results: dict[str, tuple[int, float]]) -> None:
    """Adds `results` to `meta`, under a lock (runs of other functions of the same
    module may record theirs at the same time) and replacing the file whole (a reader
    never sees half of it)."""
    with open(meta.with_name(meta.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        data = json.loads(meta.read_text())
        for name, (code, seconds) in results.items():
            data["exit_code_by_key"][name] = code
            data.setdefault("durations_by_key", {})[name] = seconds
        written = meta.with_name(meta.name + ".new")
        written.write_text(json.dumps(data, indent=4))
        os.replace(written, meta)


def use_tree() -> None:
    """Imports the tree's modules (the mutated ones) rather than the checkout's."""
    if any(p in sys.modules for p in PACKAGES):
        raise SystemExit("the gateway's modules were imported before the tree was chosen")
    os.chdir(MUTANTS)
    keep = [p for p in sys.path if p and Path(p).resolve() != ROOT]
    sys.path[:] = [str(MUTANTS), *keep]


def forget_memos() -> None:
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] in PACKAGES and module is not None:
            for value in list(vars(module).values()):
                if callable(getattr(value, "cache_clear", None)):
                    value.cache_clear()


def pytest_run(mutant: str, args: list[str]) -> int:
    import pytest

    os.environ["MUTANT_UNDER_TEST"] = mutant
    forget_memos()
    with contextlib.redirect_stdout(io.StringIO()) as out:
        code = int(pytest.main(args))
    if mutant == "" and code != PASSED:
        print(out.getvalue()[-4000:])
    return code


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("patterns", nargs="+", help="mutant names (fnmatch patterns)")
    parser.add_argument(
        "--tests", action="append", required=True, help="a pytest path or node id (repeated)"
    )
    parser.add_argument("--timeout", type=float, default=30, help="seconds a test may take")
    parser.add_argument("--again", action="store_true", help="test mutants with a result too")
    args = parser.parse_args()
    if not MUTANTS.is_dir():
        raise SystemExit(f"no mutants in {MUTANTS}: run `make mutate` first")
    todo = chosen(args.patterns, args.again)
    use_tree()
    # Without the unraisable-exception plugin: its full garbage collection at each
    # session's end, over every module this process has imported, took most of a run.
    pytest_args = [
        *args.tests, "-x", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
        "-p", "no:unraisableexception", "-m", "not slow and not browser",
        "--timeout", f"{args.timeout:g}",
    ]  # fmt: skip
    if (code := pytest_run("", pytest_args)) != PASSED:
        raise SystemExit(f"the tests fail without any mutant (pytest exit code {code})")
    counts = {"killed": 0, "survived": 0, "other": 0}
    for meta, names in todo.items():
        for name in names:
            started = time.monotonic()
            code = pytest_run(name, pytest_args)
            # Each as it finishes, so a stopped run keeps what it tested.
            record(meta, {name: (code, round(time.monotonic() - started, 3))})
            status = {FAILED: "killed", PASSED: "survived"}.get(code, "other")
            counts[status] += 1
            if code != FAILED:
                print(f"{name}: {status} (pytest exit code {code})", flush=True)
    os.environ["MUTANT_UNDER_TEST"] = ""
    print(", ".join(f"{n} {status}" for status, n in counts.items()))


if __name__ == "__main__":
    main()
