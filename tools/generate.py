"""Generates the Python code for the contract under proto/ into generated/.

`python -m tools.generate` rewrites generated/; `--check` regenerates into a scratch
folder and fails when generated/ differs, so a stale checkout cannot pass CI.
"""

import argparse
import filecmp
import sys
import tempfile
from pathlib import Path

import google.api
import grpc_tools
from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "proto"
OUT = ROOT / "generated"
PACKAGE = Path("gateway") / "v1"


def generate(out: Path) -> None:
    protos = sorted(str(p.relative_to(PROTO_ROOT)) for p in (PROTO_ROOT / PACKAGE).glob("*.proto"))
    googleapis = Path(google.api.__path__[0]).parent.parent
    well_known = Path(grpc_tools.__file__).parent / "_proto"
    args = [
        "protoc",
        f"-I{PROTO_ROOT}",
        f"-I{googleapis}",
        f"-I{well_known}",
        f"--python_out={out}",
        f"--pyi_out={out}",
        f"--grpc_python_out={out}",
        *protos,
    ]
    if protoc.main(args) != 0:
        sys.exit("protoc failed")
    for package in (out / "gateway", out / PACKAGE):
        (package / "__init__.py").write_text('"""Generated from proto/; do not edit."""\n')


def differences(left: Path, right: Path) -> list[str]:
    cmp = filecmp.dircmp(left, right, ignore=["__pycache__"])
    found = [f"{p}: only in {left.name}" for p in cmp.left_only]
    found += [f"{p}: only in {right.name}" for p in cmp.right_only]
    found += [f"{p}: differs" for p in cmp.diff_files]
    for sub in cmp.common_dirs:
        found += differences(left / sub, right / sub)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail when generated/ is stale")
    if not parser.parse_args().check:
        generate(OUT)
        return
    with tempfile.TemporaryDirectory() as scratch:
        fresh = Path(scratch) / "generated"
        fresh.mkdir()
        generate(fresh)
        stale = differences(OUT, fresh) if OUT.exists() else ["generated/ is missing"]
    if stale:
        sys.exit("generated/ is stale; run `make generate`:\n  " + "\n  ".join(stale))
    print("generated/ is fresh")


if __name__ == "__main__":
    main()
