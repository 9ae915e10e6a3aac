"""The layers import one way, as docs/architecture.md draws them:

    base < storage < {accounting, providers, routing} < application < ops
         < {grpc_api, http_facade} < cli

A module imports only from its own layer and the layers below it; layers on one rung
(in braces) import none of each other. Every import counts, those under TYPE_CHECKING
included, and no modules import each other in a circle. Read from the source, so a stray
import fails here, not in review."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Rungs from the bottom; the layers on one rung are independent of each other.
RUNGS: tuple[tuple[str, ...], ...] = (
    ("server.base",),
    ("server.storage",),
    ("server.accounting", "server.providers", "server.routing"),
    ("server.application",),
    ("server.ops",),
    ("server.grpc_api", "http_facade"),
    ("server.cli",),
)
RUNG = {layer: i for i, rung in enumerate(RUNGS) for layer in rung}
TRANSPORTS = ("grpc", "grpc_status", "grpc_health", "grpc_reflection", "fastapi", "starlette",
              "uvicorn", "http_facade", "server.grpc_api", "server.cli")  # fmt: skip


def source_files() -> list[Path]:
    files = [*(ROOT / "server").rglob("*.py"), *(ROOT / "http_facade").rglob("*.py")]
    return sorted(p for p in files if p.name != "__init__.py" or p.parent.name != "server")


def module_of(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_of(p): p for p in source_files()}


def imports(path: Path) -> set[str]:
    """Every module `path` imports; `from package import name` counts as the module
    `package.name` when that is a module of ours."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                names.add(full if full in MODULES else node.module)
    return names


def layer(module: str) -> str | None:
    return next((lay for lay in RUNG if module == lay or module.startswith(lay + ".")), None)


def ours(path: Path) -> Iterator[tuple[str, str]]:
    """(imported module, its layer) of each of our modules that `path` imports."""
    for name in sorted(imports(path)):
        found = layer(name)
        if found is not None:
            yield name, found


def under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


@pytest.mark.parametrize("module", sorted(MODULES), ids=str)
def test_imports_point_down(module: str) -> None:
    home = layer(module)
    assert home is not None, f"{module} is in no layer; add its package to RUNGS"
    upward = [
        f"{name} ({found})"
        for name, found in ours(MODULES[module])
        if found != home and RUNG[found] >= RUNG[home]
    ]
    assert not upward, f"{module} ({home}) imports up or sideways: {upward}"


def test_no_modules_import_each_other_in_a_circle() -> None:
    graph = {m: {n for n, _ in ours(p) if n in MODULES and n != m} for m, p in MODULES.items()}
    done: set[str] = set()
    path: list[str] = []

    def visit(module: str) -> None:
        if module in path:
            circle = path[path.index(module) :] + [module]
            raise AssertionError("import circle: " + " -> ".join(circle))
        if module in done:
            return
        path.append(module)
        for name in sorted(graph[module]):
            visit(name)
        path.pop()
        done.add(module)

    for module in sorted(graph):
        visit(module)


BELOW_TRANSPORTS = [m for m in MODULES if RUNG[layer(m) or "server.cli"] < RUNG["server.grpc_api"]]


@pytest.mark.parametrize("module", sorted(BELOW_TRANSPORTS), ids=str)
def test_nothing_below_the_transports_imports_a_transport(module: str) -> None:
    leaks = sorted(n for n in imports(MODULES[module]) if under(n, TRANSPORTS))
    assert not leaks, f"{module} imports {leaks}"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if layer(m) == "server.providers"))
def test_providers_know_nothing_of_admission_routing_or_storage(module: str) -> None:
    leaks = [n for n, found in ours(MODULES[module]) if found not in ("server.base", layer(module))]
    assert not leaks, f"{module} imports {leaks}"


def test_the_floor_imports_nothing_else_of_the_server() -> None:
    for module in (m for m in MODULES if layer(m) == "server.base"):
        leaks = [n for n, found in ours(MODULES[module]) if found != "server.base"]
        assert not leaks, f"{module} imports {leaks}"


def test_every_layer_is_a_package_that_says_what_it_is() -> None:
    for lay in RUNG:
        init = ROOT.joinpath(*lay.split("."), "__init__.py")
        assert ast.get_docstring(ast.parse(init.read_text())), f"{init} needs a docstring"


def test_the_architecture_page_draws_the_same_order() -> None:
    page = (ROOT / "docs" / "architecture.md").read_text()
    assert "base < storage < {accounting, providers, routing} < application < ops" in page
