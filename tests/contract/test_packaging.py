"""Every package of the gateway's source ships: pyproject.toml lists them one by one
(the generated code lives elsewhere), and a folder missing from the list would be
missing from an installed gateway while every test from the source tree passes."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib

from tests.support.gateways import ROOT


def test_every_source_package_is_listed() -> None:
    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for top in ("server", "http_facade")
        for init in (ROOT / top).rglob("__init__.py")
    }
    assert found - listed == set()


def _imported_top_modules() -> set[str]:
    """Every top-level module the gateway's source imports absolutely, itself aside."""
    names: set[str] = set()
    for top in ("server", "http_facade", "generated"):
        for path in (ROOT / top).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    names.update(alias.name.split(".")[0] for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names.add(node.module.split(".")[0])
    return names - set(sys.stdlib_module_names) - {"server", "http_facade", "gateway"}


def _locked(lock: str) -> set[str]:
    pinned = re.findall(r"^([A-Za-z0-9._-]+)==", (ROOT / lock).read_text(), re.MULTILINE)
    return {_canonical(name) for name in pinned}


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _optional_extras() -> set[str]:
    """The distributions of the optional extras an operator installs on purpose (imported
    where they are used, so the gateway starts without them), the test tools aside."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    return {
        _canonical(re.split(r"[<>=!~\[; ]", requirement)[0])
        for extra, requirements in extras.items()
        if extra != "dev"
        for requirement in requirements
    }


def test_every_imported_distribution_is_in_the_runtime_lock() -> None:
    # The image installs the runtime lock alone: a module the gateway imports that only
    # the dev lock brings passes every test here and stops the gateway in the image.
    distributions = importlib.metadata.packages_distributions()
    runtime = _locked("requirements.lock") | _optional_extras()
    missing = {
        module: distributions.get(module, [])
        for module in _imported_top_modules()
        if not any(_canonical(d) in runtime for d in distributions.get(module, []))
    }
    assert missing == {}
