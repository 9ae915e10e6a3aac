"""Requests for paths the gateway does not serve are counted and logged (method, path
without its query, client address: no secrets), and the 404 says which path to use when
the caller nearly had it."""

from __future__ import annotations

import json
import logging

import httpx
import pytest

from tests.support.gateways import API_KEY, default_config_dict, running_gateway

HEADERS = {"x-api-key": API_KEY}
HELLO = {"model": "sim-mini", "messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.parametrize(
    ("method", "path", "instead"),
    [
        ("POST", "/chat/completions", "use POST /v1/chat/completions"),
        ("GET", "/models/sim-mini", "use GET /v1/models/sim-mini"),
        ("POST", "/v1/v1/chat/completions", "use POST /v1/chat/completions"),
        ("GET", "/models", "use GET /v1/models"),
        # A path of two routes (GET /v1/models/{model} matches too): the POST one.
        (
            "POST",
            "/models/sim-mini:generateContent",
            "use POST /v1/models/sim-mini:generateContent",
        ),
        ("POST", "/models", "use GET /v1/models"),  # no POST route there: the one that is
        ("POST", "/api/generate", None),
    ],
)
async def test_a_near_miss_is_told_the_path_to_use(
    method: str, path: str, instead: str | None
) -> None:
    async with (
        running_gateway(default_config_dict()) as gw,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}") as c,
    ):
        reply = await c.request(method, path, headers=HEADERS, json=HELLO)
    assert reply.status_code == 404
    message = reply.json()["error"]["message"]
    assert message.startswith(f"no route for {method} {path}")
    if instead is None:
        assert "use" not in message
    else:
        assert message.endswith(instead)


async def test_unknown_paths_are_counted_and_logged_without_secrets(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="gateway.requests")
    async with (
        running_gateway(default_config_dict()) as gw,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}") as c,
    ):
        await c.post("/api/chat?key=sk-secret-value", headers=HEADERS, json=HELLO)
        await c.get("/v1beta/tunedModels", headers=HEADERS)
        await c.delete("/v1/chat/completions", headers=HEADERS)  # a wrong method
        metrics = (await c.get("/metrics")).text
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "gateway.requests"]
    unknown = [line for line in lines if line.get("reason") == "NO_ROUTE"]
    assert [(u["method"], u["path"], u["status"]) for u in unknown] == [
        ("POST", "/api/chat", "NOT_FOUND"),
        ("GET", "/v1beta/tunedModels", "NOT_FOUND"),
        ("DELETE", "/v1/chat/completions", "METHOD_NOT_ALLOWED"),
    ]
    assert all(u["client"] == "127.0.0.1" for u in unknown)
    assert "sk-secret-value" not in caplog.text
    assert 'gateway_unknown_routes_total{method="POST"} 1.0' in metrics
    assert 'gateway_unknown_routes_total{method="GET"} 1.0' in metrics
