"""Control: a reload read and checked before it is recorded, swapped in only once the
record is written (a record that fails leaves the running config), a relayed change
made here (a reload, a provider switch), and providers named or refused by id."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from server.application.control import Control, ReloadRefused
from server.application.pipeline.state import Live, snapshot_of
from server.base import config
from server.base.errors import InvalidArgument, NotFound
from server.providers import registry
from server.routing.policies import build_router
from tests.support.gateways import default_config_dict


def control_of(data: dict[str, Any]) -> tuple[Control, list[str], dict[str, Any]]:
    """A Control over `data`, reading `file` on a reload; the results it reports."""
    first = config.parse(data, "gateway.yaml")
    file = {"data": data}
    results: list[str] = []

    def source() -> tuple[config.Config, str]:
        return config.parse(file["data"], "gateway.yaml"), "gateway.yaml"

    live = Live(snapshot_of(first, registry.build, build_router))
    made = Control(live, registry.build, build_router, source, on_reload=results.append)
    return made, results, file


def keys(made: Control) -> set[str]:
    return {k.name for k in made.live.current.config.keys}


async def test_a_reload_is_swapped_in_only_after_its_body(caplog) -> None:
    data = default_config_dict()
    made, results, file = control_of(data)
    before = made.live.current
    file["data"] = {**data, "keys": [*data["keys"], {"name": "new", "kind": "api",
                                                      "secret": "gw-test-new-key-00000"}]}  # fmt: skip
    async with made.reloading() as prepared:
        assert made.live.current is before  # checked, not yet in
        assert prepared.before is before.config and prepared.source == "gateway.yaml"
        assert "new" in {k.name for k in prepared.config.keys}
        assert prepared.answer is None
    assert made.live.current is prepared.fresh and "new" in keys(made)
    assert prepared.answer is not None and prepared.answer.source == "gateway.yaml"
    assert results == ["ok"]

    file["data"] = data
    with pytest.raises(RuntimeError, match="not recorded"):
        async with made.reloading():
            raise RuntimeError("not recorded")
    assert "new" in keys(made) and results == ["ok"]  # nothing swapped, nothing counted

    file["data"] = {**data, "colour": "blue"}
    with caplog.at_level(logging.ERROR), pytest.raises(ReloadRefused) as refused:
        async with made.reloading():
            raise AssertionError("a refused reload runs no body")
    assert refused.value.message.startswith("config not reloaded: gateway.yaml")
    assert refused.value.metadata == {}
    assert results == ["ok", "refused"] and "config reload refused" in caplog.text
    file["data"] = data
    answer = await made.reload()
    assert answer.source == "gateway.yaml" and answer.providers == 16 and answer.models == 8
    assert results == ["ok", "refused", "ok"] and "new" not in keys(made)


async def test_a_relayed_change_is_made_here(caplog) -> None:
    caplog.set_level(logging.INFO, logger="server.application.control")
    data = default_config_dict()
    made, results, file = control_of(data)
    file["data"] = {**data, "keys": data["keys"][:1]}
    await made.apply({"op": "reload"})
    assert keys(made) == {data["keys"][0]["name"]} and results == ["ok"]
    await made.apply({"op": "provider", "provider": "sim-mini-primary", "enabled": False})
    assert made.find("sim-mini-primary").config.enabled is False
    assert made.overrides == {"sim-mini-primary": False}
    assert "provider sim-mini-primary disabled at run time" in caplog.messages
    await made.apply({"op": "provider", "provider": "sim-mini-primary", "enabled": True})
    assert made.find("sim-mini-primary").config.enabled is True
    assert "provider sim-mini-primary enabled at run time" in caplog.messages
    with pytest.raises(NotFound):
        await made.apply({"op": "provider", "provider": "nope", "enabled": True})
    await made.everywhere({"op": "reload"})  # alone: everywhere already
    sent: list[dict[str, Any]] = []

    class Relay:
        async def everywhere(self, change: dict[str, Any]) -> None:
            sent.append(change)

    made.relay = Relay()
    await made.everywhere({"op": "reload"})
    assert sent == [{"op": "reload"}]


def test_a_provider_is_named_by_its_id() -> None:
    made, _, _ = control_of(default_config_dict())
    assert made.find("sim-pro-backup").id == "sim-pro-backup"
    with pytest.raises(InvalidArgument) as empty:
        made.find("")
    assert empty.value.metadata["field"] == "provider_id"
    assert empty.value.message == "provider_id: is required"
    with pytest.raises(NotFound) as missing:
        made.find("nope")
    assert missing.value.message == "provider 'nope' does not exist"
    assert missing.value.metadata == {"provider": "nope"}


async def test_a_gateway_without_a_file_refuses_to_reload() -> None:
    first = config.parse(default_config_dict(), "x")
    made = Control(Live(snapshot_of(first, registry.build, build_router)), registry.build,
                   build_router)  # fmt: skip
    with pytest.raises(ReloadRefused) as refused:
        await made.reload()
    assert refused.value.message == "this gateway runs on a config with no file to reload"
    assert refused.value.metadata == {}
