"""The names a caller may put in `model`: a model's id, one of its aliases (a client's
built-in model name), or a routing profile, which is then routed as /v1/infer routes."""

from __future__ import annotations

import httpx
import pytest

from server.base import config
from server.cli.serve import Running
from tests.support.gateways import API_KEY, default_config_dict, running_gateway

HEADERS = {"x-api-key": API_KEY}
HELLO = [{"role": "user", "content": "Hello"}]


def client(gw: Running) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}")


def with_alias() -> dict:
    data = default_config_dict()
    mini = next(m for m in data["models"] if m["id"] == "sim-mini")
    mini["aliases"] = ["gpt-4o-mini", "claude-haiku-4-5"]
    return data


async def test_an_alias_serves_its_model_and_answers_with_the_id() -> None:
    async with running_gateway(with_alias()) as gw, client(gw) as c:
        reply = await c.post(
            "/v1/chat/completions",
            json={"model": "claude-haiku-4-5", "messages": HELLO},
            headers=HEADERS,
        )
        assert reply.status_code == 200, reply.text
        assert reply.json()["model"] == "sim-mini"
        assert "x-gateway-route" not in reply.headers
        found = await c.get("/v1/models/gpt-4o-mini", headers=HEADERS)
        assert found.status_code == 200 and found.json()["id"] == "sim-mini"


@pytest.mark.parametrize("profile", ["economy", "quality"])
async def test_a_profile_named_as_the_model_is_routed(profile: str) -> None:
    data = default_config_dict()
    async with running_gateway(data) as gw, client(gw) as c:
        reply = await c.post(
            "/v1/chat/completions", json={"model": profile, "messages": HELLO}, headers=HEADERS
        )
        assert reply.status_code == 200, reply.text
        route = dict(
            part.strip().split("=", 1) for part in reply.headers["x-gateway-route"].split(";")
        )
        assert route["profile"] == profile
        assert route["model"] == reply.json()["model"]
        assert route["model"] in data["routing"]["profiles"][profile]


def test_an_alias_may_not_shadow_a_model_or_a_profile() -> None:
    data = with_alias()
    data["models"][0]["aliases"] = ["balanced"]
    with pytest.raises(config.ConfigError, match="routing profile"):
        config.parse(data, "test")
    data = with_alias()
    data["models"][0]["aliases"] = ["sim-mini"]
    with pytest.raises(config.ConfigError, match="duplicate 'sim-mini'"):
        config.parse(data, "test")
