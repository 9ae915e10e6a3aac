"""The layers import one way: transports and the command line on top, the core and
what it uses below. Read from the source, so a stray import fails here, not in review."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BELOW_TRANSPORTS = ("base", "application", "accounting", "routing", "providers", "storage", "ops")
TRANSPORTS = ("grpc", "grpc_status", "grpc_health", "grpc_reflection", "fastapi", "starlette",
              "uvicorn", "http_facade", "server.grpc_api", "server.cli")  # fmt: skip


def imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def modules(*layers: str) -> list[Path]:
    return sorted(p for layer in layers for p in (ROOT / "server" / layer).rglob("*.py"))


def under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


@pytest.mark.parametrize("path", modules(*BELOW_TRANSPORTS), ids=lambda p: str(p.relative_to(ROOT)))
def test_nothing_below_the_transports_imports_a_transport(path: Path) -> None:
    leaks = sorted(n for n in imports(path) if under(n, TRANSPORTS))
    assert not leaks, f"{path.relative_to(ROOT)} imports {leaks}"


@pytest.mark.parametrize("path", modules("storage"), ids=lambda p: str(p.relative_to(ROOT)))
def test_storage_knows_only_the_core_vocabulary(path: Path) -> None:
    allowed = ("server.storage", "server.base")
    leaks = sorted(n for n in imports(path) if n.startswith("server.") and not under(n, allowed))
    assert not leaks, f"{path.relative_to(ROOT)} imports {leaks}"


@pytest.mark.parametrize("path", modules("providers"), ids=lambda p: str(p.relative_to(ROOT)))
def test_providers_know_nothing_of_admission_routing_or_storage(path: Path) -> None:
    upward = ("server.routing", "server.storage", "server.application.handlers", "server.base.pipeline",
              "server.accounting.admission", "server.accounting.tab")  # fmt: skip
    leaks = sorted(n for n in imports(path) if under(n, upward))
    assert not leaks, f"{path.relative_to(ROOT)} imports {leaks}"


def test_every_layer_is_a_package_that_says_what_it_is() -> None:
    for layer in (*BELOW_TRANSPORTS, "grpc_api", "cli"):
        init = ROOT / "server" / layer / "__init__.py"
        assert ast.get_docstring(ast.parse(init.read_text())), f"{init} needs a docstring"
