"""Assembles the runtime image's whole file system under one folder, from the build stage:
the Python interpreter, its standard library (less what a server never imports), the
gateway's venv, every shared library these load (their `ldd` closure), CA certificates and
a non-root user. The runtime stage copies that folder onto an empty image: no shell, no
package manager, nothing a server does not run.

    python3 rootfs.py VENV ROOT
"""

from __future__ import annotations

import compileall
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

USER_ID = 10001
STATE = "var/lib/gateway"
# Standard-library parts a server never imports (most are separate packages on Debian).
UNUSED = (
    "test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3", "pydoc_data",
    "site-packages",  # the base's own pip and setuptools: the venv does not see them
)  # fmt: skip
LIBRARY = re.compile(r"(?:=>\s*)?(/\S+)\s+\(0x")


def copy(path: Path, root: Path) -> None:
    """Copies `path` to the same place under `root`, following its symlinks so each link
    on the way is kept as a link (the loader finds libraries by their sonames)."""
    while True:
        target = root / path.relative_to("/")
        if target.exists() or target.is_symlink():
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_symlink():
            shutil.copy2(path, target)
            return
        link = os.readlink(path)
        target.symlink_to(link)
        path = (path.parent / link).resolve() if not os.path.isabs(link) else Path(link)


def shared_objects(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*.so*") if p.is_file() and not p.is_symlink()]


def libraries(binaries: list[Path]) -> set[Path]:
    """Every library the binaries load, as `ldd` resolves them (the loader included)."""
    found: set[Path] = set()
    for binary in binaries:
        listed = subprocess.run(["ldd", str(binary)], capture_output=True, text=True).stdout
        found.update(Path(m.group(1)) for m in map(LIBRARY.search, listed.splitlines()) if m)
    return found


def main(venv: Path, root: Path) -> None:
    python = Path(sys.executable).resolve()
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    dynload = Path(sysconfig.get_paths()["platstdlib"]) / "lib-dynload"
    for name in UNUSED:
        shutil.rmtree(stdlib / name, ignore_errors=True)
    for folder in (stdlib, venv):
        for cache in list(folder.rglob("__pycache__")):
            shutil.rmtree(cache)
    # Debug symbols are most of a compiled extension's size, and no server reads them.
    ours = shared_objects(venv)
    subprocess.run(["strip", "--strip-unneeded", *map(str, ours)], check=True)
    # Compiled once here: a read-only root file system could not keep them, and every
    # start would compile the standard library and the gateway again.
    for folder in (stdlib, venv):
        compileall.compile_dir(
            folder, quiet=2, workers=0,
            invalidation_mode=compileall.py_compile.PycInvalidationMode.UNCHECKED_HASH,
        )  # fmt: skip
    for top in Path("/").iterdir():  # a merged /usr's links (/lib -> usr/lib) kept as links
        if top.is_symlink() and top.is_dir():
            (root / top.resolve().relative_to("/")).mkdir(parents=True, exist_ok=True)
            (root / top.name).symlink_to(os.readlink(top))
    for path in (python, Path(sys.executable), venv, stdlib):
        copy_tree(path, root)
    binaries = [python, *ours, *shared_objects(dynload)]
    for library in sorted(libraries(binaries)):
        copy(library, root)
    copy(Path("/etc/ssl/certs/ca-certificates.crt"), root)
    etc = root / "etc"
    (etc / "passwd").write_text(f"gateway:x:{USER_ID}:{USER_ID}::/{STATE}:/nonexistent\n")
    (etc / "group").write_text(f"gateway:x:{USER_ID}:\n")
    for folder, mode in ((STATE, 0o750), ("tmp", 0o1777)):
        (root / folder).mkdir(parents=True, exist_ok=True)
        os.chmod(root / folder, mode)
    os.chown(root / STATE, USER_ID, USER_ID)


def copy_tree(path: Path, root: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.copytree(path, root / path.relative_to("/"), symlinks=True, dirs_exist_ok=True)
    else:
        copy(path, root)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
