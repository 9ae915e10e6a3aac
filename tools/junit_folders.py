"""Test-seconds and outcomes per test folder, summed from pytest's junit XML files.

    python -m tools.junit_folders run1.xml [run2.xml ...]

One table per file: the folder (two levels under tests/, e.g. integration/storage), its
tests, failures and the seconds its tests took summed over the workers that ran them.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import dataclass


@dataclass
class Folder:
    tests: int = 0
    failed: int = 0
    seconds: float = 0.0


def folder_of(classname: str) -> str:
    """`tests.integration.storage.test_x.TestY` -> `integration/storage`."""
    parts = classname.split(".")
    if parts and parts[0] == "tests":
        parts = parts[1:]
    packages = [p for p in parts[:2] if not p.startswith("test_")]
    return "/".join(packages) or "(top)"


def folders(path: str) -> dict[str, Folder]:
    found: dict[str, Folder] = defaultdict(Folder)
    for case in ET.parse(path).getroot().iter("testcase"):
        folder = found[folder_of(case.get("classname", ""))]
        folder.tests += 1
        folder.seconds += float(case.get("time", "0") or 0)
        if case.find("failure") is not None or case.find("error") is not None:
            folder.failed += 1
    return found


def table(path: str) -> str:
    found = folders(path)
    rows = sorted(found.items(), key=lambda item: -item[1].seconds)
    total = Folder(
        sum(f.tests for f in found.values()),
        sum(f.failed for f in found.values()),
        sum(f.seconds for f in found.values()),
    )
    lines = [f"{path}", "| folder | tests | failed | seconds |", "|---|---|---|---|"]
    for name, f in [*rows, ("all", total)]:
        lines.append(f"| {name} | {f.tests} | {f.failed} | {f.seconds:.0f} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    print("\n\n".join(table(path) for path in argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
