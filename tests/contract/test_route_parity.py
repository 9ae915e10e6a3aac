"""The facade serves exactly the REST mapping the contract annotates, nothing else."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import httpx
import pytest
from gateway.v1 import rest_pb2
from google.api import annotations_pb2
from starlette.routing import Route, WebSocketRoute

from http_facade.app import create_app
from server.base.config import ServerConfig
from server.base.pipeline import SERVICES
from tests.support.facade import both_modes, client

VERBS = ("get", "put", "post", "delete", "patch")


def annotated(with_header: bool = False) -> dict[tuple[str, ...], str]:
    """(verb, path template) -> full method name, for every annotated RPC; with
    `with_header`, the header (and query parameter) that selects a binding sharing its
    path is in the key."""
    found = {}
    for service in SERVICES:
        for method in service.methods:
            options = method.GetOptions()
            assert options.HasExtension(annotations_pb2.http), f"{method.full_name} unannotated"
            rule = options.Extensions[annotations_pb2.http]
            selects = options.Extensions[rest_pb2.RestMethodOptions.rest_method]
            header = (
                f"{selects.when_header}?{selects.when_query}"
                if selects.when_query
                else (selects.when_header)
            )
            for one in (rule, *rule.additional_bindings):
                verb = one.WhichOneof("pattern")
                assert verb in VERBS
                key = (verb.upper(), getattr(one, verb), *((header,) if with_header else ()))
                found.setdefault(key, method.full_name)
    return found


def served(app) -> set[tuple[str, str]]:  # type: ignore[no-untyped-def]
    pairs = set()
    for route in app.routes:
        if isinstance(route, WebSocketRoute):
            pairs.add(("WEBSOCKET", route.path))
            continue
        assert isinstance(route, Route)
        for verb in route.methods or ():
            pairs.add((verb, route.path))
    return pairs


@pytest.fixture
async def edge_app() -> AsyncIterator[object]:
    app = create_app(ServerConfig(), grpc_target="127.0.0.1:9")
    yield app
    await app.state.backend.aclose()


def test_every_rpc_is_annotated_and_streaming_paths_pair_up() -> None:
    routes = annotated(with_header=True)
    assert len(set(routes.values())) == sum(len(s.methods) for s in SERVICES)
    for (verb, path, header), name in routes.items():
        if path.endswith(":stream"):
            assert name.split(".")[-1].startswith("Stream")
            assert (verb, path.removesuffix(":stream"), header) in routes


async def test_routes_match_annotations_exactly(edge_app) -> None:  # type: ignore[no-untyped-def]
    paths = {(verb, re.sub(r":[a-z_]+\}", "}", path)) for verb, path in served(edge_app)}
    # A variable's pattern (`{model=**}`) is how it matches, not part of its name.
    # Plus the OpenAPI document, itself generated from those annotations.
    expected = {(verb, re.sub(r"=[^}]*\}", "}", t)) for verb, t in annotated()}
    # And the WebSocket sessions (api.md).
    live = "/ws/google.ai.generativelanguage.{}.GenerativeService.BidiGenerateContent"
    sockets = {("WEBSOCKET", "/v1/responses"), ("WEBSOCKET", "/v1/realtime"),
               *(("WEBSOCKET", live.format(v)) for v in ("v1beta", "v1alpha"))}  # fmt: skip
    assert paths == expected | {("GET", "/openapi.json")} | sockets


async def test_in_process_and_edge_serve_the_same_routes(edge_app) -> None:  # type: ignore[no-untyped-def]
    from server.base.config import parse
    from server.cli.serve import build_gateway
    from tests.support.gateways import default_config_dict

    gateway = build_gateway(parse(default_config_dict(), "test"))
    try:
        local = create_app(ServerConfig(), table=gateway.table)
        assert served(local) == served(edge_app)
    finally:
        await gateway.aclose()


def _matches(template: str, path: str) -> bool:
    pattern = re.escape(template)
    pattern = re.sub(r"\\\{[^}]*=\\\*\\\*\\\}", ".+", pattern)
    pattern = re.sub(r"\\\{[^}]*\\\}", "[^/:]+", pattern)
    return re.fullmatch(pattern, path) is not None


@both_modes
async def test_each_annotated_route_answers_and_nothing_else(mode: str) -> None:
    routes = annotated()
    async with client(mode) as c:
        for verb, template in routes:
            path = re.sub(r"\{[^}]+\}", "summarizer", template)
            # No key: every served route reaches the RPC, which asks for one.
            response = await c.request(verb, path, json={} if verb == "POST" else None)
            assert response.status_code == 401, (verb, path, response.text)
            # A path another template also matches (`models/{model=**}` matches the
            # model `x:generateContent`) is served for that one's verb too.
            for other in {"GET", "POST", "PUT", "DELETE", "PATCH"} - {
                v for v, t in routes if t == template or _matches(t, path)
            }:
                response = await c.request(other, path)
                assert response.status_code == 405, (other, path)
                assert response.json()["error"]["code"] == "method_not_allowed"
        for path in ("/", "/docs", "/redoc", "/v1", "/v1/modelz/sim-mini",
                     "/v1/deployments/summarizer", "/v1/chat/completions:other",
                     "/v1/deployments/a/b/invoke", "/v1/deployments/a:b/invoke"):  # fmt: skip
            response = await c.get(path)
            assert response.status_code == 404, path
            assert response.json()["error"]["type"] == "not_found_error"


@both_modes
async def test_head_is_not_served(mode: str) -> None:
    async with client(mode) as c:
        response = await c.head("/v1/models")
        assert response.status_code == 405


@both_modes
async def test_path_parameter_reaches_the_request(mode: str) -> None:
    from tests.support.gateways import ROUTER_KEY

    async with client(mode) as c:
        headers = {"x-router-key": ROUTER_KEY}
        response = await c.post(
            "/v1/deployments/analyst/invoke", json={"prompt": "x"}, headers=headers
        )
        assert response.status_code == 200
        assert response.json()["deployment_id"] == "analyst"
        assert response.json()["model"] == "sim-pro"
        # The path wins over a body field of the same name.
        response = await c.post(
            "/v1/deployments/analyst/invoke",
            json={"prompt": "x", "deployment_id": "summarizer"},
            headers=headers,
        )
        assert response.json()["deployment_id"] == "analyst"


@both_modes
async def test_unary_responses_of_interface_b(mode: str) -> None:
    from tests.support.gateways import ROUTER_KEY

    headers = {"x-router-key": ROUTER_KEY}
    async with client(mode) as c:
        infer = (await c.post("/v1/infer", json={"prompt": "x"}, headers=headers)).json()
        assert infer["route"]["profile"] == "balanced"
        assert infer["object"] == "text_completion"
        assert isinstance(infer["created"], int)
        invoked = await c.post(
            "/v1/deployments/summarizer/invoke", json={"inputs": "x"}, headers=headers
        )
        body = invoked.json()
        assert body["generated_text"] == body["choices"][0]["text"]
        assert body["details"]["generated_tokens"] == body["usage"]["completion_tokens"]
        plain = (
            await c.post("/v1/deployments/summarizer/invoke", json={"prompt": "x"}, headers=headers)
        ).json()
        assert "generated_text" not in plain and "details" not in plain
        listed = (await c.get("/v1/deployments", headers=headers)).json()
        assert [d["id"] for d in listed["data"]] == ["summarizer", "assistant", "analyst"]


@both_modes
async def test_timeout_setting_is_the_rpc_deadline(mode: str) -> None:
    from tests.support.facade import CHAT, set_params
    from tests.support.gateways import API_KEY, default_config_dict, patched

    data = set_params(
        patched(default_config_dict(), request_timeout_s=0.2), "sim-mini", ttft_ms=2000
    )
    async with client(mode, data) as c:
        response = await c.post("/v1/chat/completions", json=CHAT, headers={"x-api-key": API_KEY})
    assert response.status_code == 504, response.text
    assert response.json()["error"]["type"] == "timeout_error"


def test_httpx_available() -> None:
    assert httpx.__version__
