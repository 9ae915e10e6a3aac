"""The layers import one way, as docs/architecture.md draws them:

    base < storage < {accounting, providers, routing} < application < ops
         < {grpc_api, http_facade} < cli

A module imports only from its own layer and the layers below it; layers on one rung
(in braces) import none of each other. Inside the application the pipeline stands below
the dialects, the dialects below the application's root modules, and no dialect imports
another. Only the composition root imports the provider adapters (through their
registry). Every import counts, relative ones and those under TYPE_CHECKING included,
and no modules import each other in a circle. Read from the source, so a stray import
fails here, not in review."""

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
    ("server.accounting", "server.guardrails", "server.providers", "server.routing"),
    ("server.application",),
    ("server.ops",),
    ("server.grpc_api", "http_facade"),
    ("server.cli",),
)
RUNG = {layer: i for i, rung in enumerate(RUNGS) for layer in rung}
# Inside the application, from the bottom: the shared pipeline, the dialects (each its
# own folder), the root's modules (the other handlers, control, the RPC table).
APPLICATION = "server.application"
PIPELINE = f"{APPLICATION}.pipeline"
DIALECTS = f"{APPLICATION}.dialects"
# The one module that builds the adapters, and the one that may import it.
ADAPTERS = "server.providers"
COMPOSITION_ROOT = "server.cli.serve"
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
    `package.name` when that is a module of ours, and a relative import as the module
    it names."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = absolute(path, node.level, node.module)
            for alias in node.names:
                full = f"{base}.{alias.name}"
                names.add(full if full in MODULES else base)
    return names


def absolute(path: Path, level: int, module: str | None) -> str:
    """The module a `from` import names, its dots read from `path`'s package."""
    if level == 0:
        return module or ""
    package = module_of(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    package = package[: len(package) - (level - 1)]
    return ".".join([*package, module] if module else package)


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


def order_lines() -> list[str]:
    """The layer order as the architecture page draws it, rendered from RUNGS: the
    rungs joined by `<`, broken before the rung that starts the second line."""
    names = [
        rung[0].split(".")[-1]
        if len(rung) == 1
        else "{" + ", ".join(n.split(".")[-1] for n in rung) + "}"
        for rung in RUNGS
    ]
    first = names.index("ops") + 1
    return [" < ".join(names[:first]), "< " + " < ".join(names[first:])]


def test_the_architecture_page_draws_the_same_order() -> None:
    page = [line.strip() for line in (ROOT / "docs" / "architecture.md").read_text().splitlines()]
    first, second = order_lines()
    assert first in page, f"docs/architecture.md should draw {first!r}"
    assert page[page.index(first) + 1] == second, f"...followed by {second!r}"


def wing(module: str) -> tuple[int, str] | None:
    """A module's place inside the application: (0, pipeline), (1, its dialect's
    package) or (2, root); None outside the application."""
    if not under(module, (APPLICATION,)) or module == APPLICATION:
        return None
    if under(module, (PIPELINE,)):
        return 0, PIPELINE
    if under(module, (DIALECTS,)) and module != DIALECTS:
        return 1, ".".join(module.split(".")[:4])
    return 2, APPLICATION


APPLICATION_MODULES = sorted(m for m in MODULES if wing(m) is not None)


@pytest.mark.parametrize("module", APPLICATION_MODULES, ids=str)
def test_the_application_stands_pipeline_below_dialects_below_its_root(module: str) -> None:
    home = wing(module)
    assert home is not None
    wrong = []
    for name, _ in ours(MODULES[module]):
        there = wing(name)
        if there is None or there == home:
            continue
        if there[0] >= home[0]:
            wrong.append(name)
    assert not wrong, f"{module} imports up or into another dialect: {wrong}"


@pytest.mark.parametrize("module", sorted(MODULES), ids=str)
def test_only_the_composition_root_imports_the_adapters(module: str) -> None:
    if under(module, (ADAPTERS,)) or module == COMPOSITION_ROOT:
        return
    leaks = [n for n, _ in ours(MODULES[module]) if under(n, (ADAPTERS,))]
    assert not leaks, f"{module} imports adapters {leaks}; only {COMPOSITION_ROOT} may"


def test_the_checks_see_what_they_look_for(tmp_path: Path) -> None:
    """The readers find what they must: a relative import, and the placement rules."""
    fake = ROOT / "server" / "application" / "dialects" / "chat" / "service.py"
    assert absolute(fake, 1, "reply") == "server.application.dialects.chat.reply"
    assert absolute(fake, 3, "pipeline.engine") == "server.application.pipeline.engine"
    assert wing("server.application.dialects.chat.reply") == (1, "server.application.dialects.chat")
    assert wing("server.application.pipeline.engine") == (0, PIPELINE)
    assert wing("server.application.rpcs") == (2, APPLICATION)
    assert wing("server.providers.openai") is None
