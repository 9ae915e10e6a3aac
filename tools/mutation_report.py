"""Writes the report of a mutation run (`make mutate`): the kill rate per module and
every surviving mutant with its diff, or the reason it is left alive.

Reads mutmut's own record of the results (`mutmut results --all true`) in the copy
`make mutate` runs in (build/mutation/tree). A survivor
that no test can kill (an equivalent mutant: the change does not change behaviour) is
listed in tools/mutation_explained.txt as `<mutant name>  <why>`; the report counts it
as explained, not as a gap.

    python -m tools.mutation_report --seconds 1234 --output build/mutation/report.md

mutmut tests a mutant again only when its function changes, not when the tests do;
`--forget-survivors [PATTERN ...]` clears the recorded result of every survivor and
timeout (in mutants/*.meta) whose name matches a pattern (all, without one), so that
the next run tests them against the tests as they are now; explained survivors keep
theirs (they survive any test).
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MUTMUT = str(Path(sys.executable).with_name("mutmut"))
EXPLAINED = ROOT / "tools" / "mutation_explained.txt"
# The copy of the checkout `make mutate` runs mutmut in (MUTATION_TREE in the Makefile).
TREE = ROOT / "build" / "mutation" / "tree"
# mutmut's words for a mutant the tests caught, and for one they did not.
CAUGHT = {"killed", "timeout", "segfault", "caught by type check"}
MISSED = {"survived", "no tests", "suspicious"}
# mutmut's exit codes for a mutant that ran out of time.
TIMEOUTS = (36, 24, -24, 152, 255)


def results() -> dict[str, str]:
    """Every mutant's name and status, as mutmut recorded them."""
    out = subprocess.run(
        [MUTMUT, "results", "--all", "true"],
        cwd=TREE,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found = {}
    for line in out.splitlines():
        name, sep, status = line.strip().rpartition(": ")
        if sep and "__mutmut_" in name:
            found[name] = status.strip()
    return found


def explained() -> dict[str, str]:
    reasons = {}
    if EXPLAINED.exists():
        for line in EXPLAINED.read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                name, _, why = line.strip().partition(" ")
                reasons[name] = why.strip()
    return reasons


def module_of(name: str) -> str:
    return name.rsplit(".", 1)[0]


def diff(name: str) -> str:
    shown = subprocess.run(
        [MUTMUT, "show", name], cwd=TREE, capture_output=True, text=True, check=False
    )
    return shown.stdout.strip()


def report(found: dict[str, str], reasons: dict[str, str], seconds: int | None) -> str:
    by_module: dict[str, Counter[str]] = defaultdict(Counter)
    for name, status in found.items():
        counts = by_module[module_of(name)]
        if status in MISSED and name in reasons:
            status = "explained"
        counts[status] += 1
    lines = ["# Mutation testing", ""]
    if seconds is not None:
        lines += [f"Run time: {seconds // 60} min {seconds % 60} s.", ""]
    lines += [
        "| module | mutants | tested | killed | timeout | explained | survived | kill rate |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for module in sorted(by_module):
        c = by_module[module]
        total = sum(c.values())
        tested = total - c["not checked"] - c["skipped"] - c["check was interrupted by user"]
        caught = sum(c[s] for s in CAUGHT)
        missed = sum(c[s] for s in MISSED)
        rate = f"{100 * (caught + c['explained']) / tested:.1f}%" if tested else "-"
        lines.append(
            f"| {module} | {total} | {tested} | {c['killed']} | {c['timeout']} | "
            f"{c['explained']} | {missed} | {rate} |"
        )
    lines += [
        "",
        "Kill rate: mutants killed, timed out or explained, of those tested.",
        "",
        "## Surviving mutants",
        "",
    ]
    survivors = sorted(n for n, s in found.items() if s in MISSED and n not in reasons)
    if not survivors:
        lines.append("None.")
    for name in survivors:
        lines += [f"### {name} ({found[name]})", "", "```diff", diff(name), "```", ""]
    # Each with its diff: mutmut numbers a function's mutants afresh when the function
    # changes, so a reason written for one mutant may come to stand beside another.
    lines += ["## Explained survivors", ""]
    for name in sorted(n for n in reasons if found.get(n) in MISSED):
        lines += [f"### {name}", "", reasons[name], "", "```diff", diff(name), "```", ""]
    return "\n".join(lines) + "\n"


def forget_survivors(patterns: list[str]) -> int:
    """Clears the result of every mutant matching `patterns` the tests let survive,
    unless it is explained; returns how many."""
    keep = explained()
    forgotten = 0
    for meta in (TREE / "mutants").rglob("*.meta"):
        data = json.loads(meta.read_text())
        codes = data.get("exit_code_by_key", {})
        # pytest's exit code 0: every test passed, the mutant survived; 5 and 33: no test
        # reached it. Timeouts too: with many children a slow survivor can run out of
        # its time limit and pass for caught.
        survived = [
            name for name, code in codes.items()
            if code in (0, 5, 33, *TIMEOUTS) and name not in keep
            and (not patterns or any(fnmatch.fnmatchcase(name, p) for p in patterns))
        ]  # fmt: skip
        for name in survived:
            codes[name] = None
        if survived:
            meta.write_text(json.dumps(data, indent=4))
            forgotten += len(survived)
    return forgotten


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=None, help="how long the run took")
    parser.add_argument("--output", type=Path, default=ROOT / "build/mutation/report.md")
    parser.add_argument(
        "--forget-survivors",
        nargs="*",
        metavar="PATTERN",
        help="clear the results of the survivors matching a pattern (all, without one) "
        "so that the next run tests them again",
    )
    args = parser.parse_args()
    if args.forget_survivors is not None:
        print(f"{forget_survivors(args.forget_survivors)} survivors will be tested again")
        return
    text = report(results(), explained(), args.seconds)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text)
    print(text.split("## Surviving mutants")[0])


if __name__ == "__main__":
    main()
