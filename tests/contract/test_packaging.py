"""Every package of the gateway's source ships: pyproject.toml lists them one by one
(the generated code lives elsewhere), and a folder missing from the list would be
missing from an installed gateway while every test from the source tree passes."""

from __future__ import annotations

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
