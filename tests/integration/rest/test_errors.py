"""Every error path of the facade: status, body shape, headers, in both modes."""

from __future__ import annotations

import json
import math
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from server.accounting.accounts import Accounts
from tests.support.facade import CHAT, MODES, A, B, both_modes, client, facade
from tests.support.gateways import API_KEY, ROUTER_KEY, default_config_dict

ERROR_FIELDS = {"message", "type", "code", "param"}
INFER = {"prompt": "Summarize this."}


@pytest.fixture(scope="module")
async def urls() -> AsyncIterator[dict[str, str]]:
    """One gateway per mode for the whole module (the limits of the dev keys are ample)."""
    async with facade("in_process") as local, facade("edge") as edge:
        yield {"in_process": local, "edge": edge}


@pytest.fixture(params=MODES)
async def c(
    urls: dict[str, str], request: pytest.FixtureRequest
) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=urls[request.param], timeout=10) as http:
        yield http


def error_of(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    assert response.headers["x-request-id"]
    assert "Traceback" not in response.text and 'File "' not in response.text
    body = response.json()
    assert list(body) == ["error"]
    assert set(body["error"]) == ERROR_FIELDS
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    return dict(body["error"])


CASES: list[tuple[str, str, str, dict[str, str], Any, int, str, str | None]] = [
    # id, method, path, headers, json body, status, error type, param
    ("no-api-key", "POST", "/v1/chat/completions", {}, CHAT, 401, "authentication_error", None),
    ("wrong-api-key", "POST", "/v1/chat/completions", {"x-api-key": "x" * 24}, CHAT, 401,
     "authentication_error", None),
    ("router-key-on-a", "POST", "/v1/chat/completions", {"x-api-key": ROUTER_KEY}, CHAT, 401,
     "authentication_error", None),
    ("router-header-on-a", "GET", "/v1/models", B, None, 401, "authentication_error", None),
    ("no-router-key", "POST", "/v1/infer", {}, INFER, 401, "authentication_error", None),
    ("api-key-on-b", "POST", "/v1/infer", {"x-router-key": API_KEY}, INFER, 401,
     "authentication_error", None),
    ("api-header-on-b", "GET", "/v1/deployments", A, None, 401, "authentication_error", None),
    ("unknown-model", "POST", "/v1/chat/completions", A, {**CHAT, "model": "nope"}, 404,
     "invalid_request_error", None),
    ("unknown-model-providers", "GET", "/v1/providers?model=nope", A, None, 404,
     "invalid_request_error", None),
    ("unknown-deployment", "POST", "/v1/deployments/nope/invoke", B, INFER, 404,
     "not_found_error", None),
    ("chat-temperature-3", "POST", "/v1/chat/completions", A, {**CHAT, "temperature": 3}, 400,
     "invalid_request_error", "temperature"),
    ("infer-temperature-1.5", "POST", "/v1/infer", B, {**INFER, "temperature": 1.5}, 400,
     "invalid_request_error", "temperature"),
    ("chat-top-p-2", "POST", "/v1/chat/completions", A, {**CHAT, "top_p": 2}, 400,
     "invalid_request_error", "top_p"),
    ("infer-top-p-2", "POST", "/v1/infer", B, {**INFER, "top_p": 2}, 400,
     "invalid_request_error", "top_p"),
    ("max-tokens-0", "POST", "/v1/chat/completions", A, {**CHAT, "max_tokens": 0}, 400,
     "invalid_request_error", "max_tokens"),
    ("max-new-tokens-0", "POST", "/v1/deployments/summarizer/invoke", B,
     {"inputs": "x", "parameters": {"max_new_tokens": 0}}, 400, "invalid_request_error",
     "parameters.max_new_tokens"),
    ("both-prompt-and-inputs", "POST", "/v1/deployments/summarizer/invoke", B,
     {"prompt": "x", "inputs": "y"}, 400, "invalid_request_error", "inputs"),
    ("neither-prompt-nor-inputs", "POST", "/v1/deployments/summarizer/invoke", B, {}, 400,
     "invalid_request_error", "prompt"),
    ("unknown-profile", "POST", "/v1/infer", B, {**INFER, "profile": "cheapest"}, 400,
     "invalid_request_error", "profile"),
    ("providers-without-model", "GET", "/v1/providers", A, None, 400, "invalid_request_error",
     "model"),
    ("wrong-type-temperature", "POST", "/v1/chat/completions", A, {**CHAT, "temperature": "hot"},
     400, "invalid_request_error", "temperature"),
    ("wrong-type-nested", "POST", "/v1/chat/completions", A,
     {**CHAT, "messages": [{"role": 5, "content": "x"}]}, 400, "invalid_request_error",
     "messages[0].role"),
    ("wrong-type-messages", "POST", "/v1/chat/completions", A, {**CHAT, "messages": "hi"}, 400,
     "invalid_request_error", "messages"),
    ("wrong-type-stream", "POST", "/v1/chat/completions", A, {**CHAT, "stream": "yes"}, 400,
     "invalid_request_error", "stream"),
    ("max-tokens-not-integer", "POST", "/v1/completions", A,
     {"model": "sim-mini", "prompt": "x", "max_tokens": 1.5}, 400, "invalid_request_error",
     "max_tokens"),
    ("max-tokens-over-int32", "POST", "/v1/completions", A,
     {"model": "sim-mini", "prompt": "x", "max_tokens": 2**40}, 400, "invalid_request_error",
     "max_tokens"),
    ("body-not-object", "POST", "/v1/chat/completions", A, [CHAT], 400, "invalid_request_error",
     None),
    ("unknown-path", "GET", "/v1/nothing-here", A, None, 404, "not_found_error", None),
    ("unknown-path-post", "POST", "/v2/chat/completions", A, CHAT, 404, "not_found_error", None),
]  # fmt: skip


@pytest.mark.parametrize(
    "method,path,headers,body,status,kind,param", [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
async def test_error(
    c: httpx.AsyncClient,
    method: str,
    path: str,
    headers: dict[str, str],
    body: Any,
    status: int,
    kind: str,
    param: str | None,
) -> None:
    response = await c.request(method, path, headers=headers, json=body)
    error = error_of(response, status)
    assert error["type"] == kind
    assert error["param"] == param


async def test_unknown_fields_are_ignored(c: httpx.AsyncClient) -> None:
    body = {**CHAT, "n": 1, "user": "someone", "logit_bias": {}, "temperature": None}
    response = await c.post("/v1/chat/completions", json=body, headers=A)
    assert response.status_code == 200, response.text


async def test_malformed_json(c: httpx.AsyncClient) -> None:
    for raw in (b'{"model": ', b"\xff\xfe", b'{"temperature": NaN}'):
        response = await c.post("/v1/chat/completions", content=raw, headers=A)
        error = error_of(response, 400)
        assert error["type"] == "invalid_request_error"


async def test_body_too_large(c: httpx.AsyncClient) -> None:
    big = {**CHAT, "messages": [{"role": "user", "content": "x" * (1 << 20)}]}
    error = error_of(await c.post("/v1/chat/completions", json=big, headers=A), 413)
    assert error["code"] == "request_too_large"

    async def chunks() -> AsyncIterator[bytes]:  # no content-length: counted while read
        yield json.dumps(big).encode()

    response = await c.post("/v1/chat/completions", content=chunks(), headers=A)
    error_of(response, 413)


async def test_wrong_method(c: httpx.AsyncClient) -> None:
    for method, path in [("GET", "/v1/chat/completions"), ("POST", "/v1/models"),
                         ("DELETE", "/v1/deployments"), ("GET", "/v1/infer")]:  # fmt: skip
        error = error_of(await c.request(method, path, headers=A), 405)
        assert error["code"] == "method_not_allowed"


async def test_request_id(c: httpx.AsyncClient) -> None:
    response = await c.post(
        "/v1/chat/completions", json=CHAT, headers={**A, "x-request-id": "abc-123"}
    )
    assert response.headers["x-request-id"] == "abc-123"
    assert response.json()["id"] == "chatcmpl-abc-123"
    response = await c.get("/v1/nothing", headers={"x-request-id": "abc-124"})
    assert response.headers["x-request-id"] == "abc-124"
    response = await c.get("/v1/models", headers={**A, "x-request-id": "bad id\x7f"})
    assert response.headers["x-request-id"] != "bad id"
    assert len(response.headers["x-request-id"]) == 32


async def test_providers(c: httpx.AsyncClient) -> None:
    response = await c.get("/v1/providers", params={"model": "sim-mini"}, headers=A)
    assert response.status_code == 200
    providers = response.json()["providers"]
    assert [(p["id"], p["type"], p["enabled"]) for p in providers] == [
        ("sim-mini-primary", "primary", True),
        ("sim-mini-backup", "backup", True),
    ]
    assert all(isinstance(p["params"], dict) for p in providers)
    assert providers[0]["params"]["ttft_ms"] == 0


def slot_left(started: float, first_done: float, asked: float, answered: float) -> set[int]:
    """The Retry-After of a request refused by a 2-a-minute bucket (a slot every 30 s)
    whose first request was admitted between `started` and `first_done` and second at
    once after, refused between `asked` and `answered`: 30 s less the time since the
    first, rounded up (one value unless a second's boundary falls inside what the
    clocks here cannot tell apart)."""
    return {math.ceil(30 - (answered - started)), math.ceil(30 - (asked - first_done))}


@both_modes
async def test_rate_limit_429(mode: str) -> None:
    data = default_config_dict()
    data["limits"] = {**data.get("limits", {}), "count_listings": True}
    for key in data["keys"]:
        if key["kind"] == "api":
            key["requests_per_minute"] = 2
    async with client(mode, data) as http:
        started = time.monotonic()
        for remaining in ("1", "0"):
            ok = await http.get("/v1/models", headers=A)
            if remaining == "1":
                first_done = time.monotonic()
            assert ok.status_code == 200
            assert ok.headers["x-ratelimit-limit-requests"] == "2"
            assert ok.headers["x-ratelimit-remaining-requests"] == remaining
        asked = time.monotonic()
        limited = await http.post("/v1/chat/completions", json=CHAT, headers=A)
        error = error_of(limited, 429)
        assert error["type"] == "rate_limit_error"
        assert error["code"] == "rate_limited"
        retry_after = limited.headers["retry-after"]
        # The bucket refills a slot 30 s after the first request, less the time since:
        # whole seconds rounded up, and exactly in retry-after-ms.
        answered = time.monotonic()
        assert int(retry_after) in slot_left(started, first_done, asked, answered)
        wait_ms = int(limited.headers["retry-after-ms"])
        assert 30_000 - (answered - started) * 1000 - 1 <= wait_ms
        assert wait_ms <= 30_000 - (asked - first_done) * 1000 + 1
        assert limited.headers["retry_after"] == retry_after
        assert limited.headers["x-ratelimit-limit-requests"] == "2"
        assert limited.headers["x-ratelimit-remaining-requests"] == "0"
        assert "x-ratelimit-reset-requests" in limited.headers
        # Streaming requests are limited the same way, before any event.
        asked = time.monotonic()
        limited = await http.post("/v1/chat/completions", json={**CHAT, "stream": True}, headers=A)
        error_of(limited, 429)
        left = slot_left(started, first_done, asked, time.monotonic())
        assert int(limited.headers["retry_after"]) in left


async def test_unexpected_exception_is_a_generic_500(
    c: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("secret internal detail")

    monkeypatch.setattr(Accounts, "identify", broken)
    response = await c.get("/v1/models", headers={**A, "x-request-id": "req-500"})
    error = error_of(response, 500)
    assert "secret internal detail" not in response.text
    assert "req-500" in error["message"]
    assert response.headers["x-request-id"] == "req-500"


async def test_facade_bug_is_a_generic_500(
    c: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    from http_facade import codec

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("secret internal detail")

    monkeypatch.setattr(codec, "to_dict", broken)
    response = await c.get("/v1/models", headers={**A, "x-request-id": "req-bug"})
    error = error_of(response, 500)
    assert "secret internal detail" not in response.text
    assert error["code"] == "internal" and "req-bug" in error["message"]


async def test_only_allow_listed_headers_reach_the_rpc(
    c: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[dict[str, str]] = []
    original = Accounts.identify

    async def spy(self, call, *args, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(dict(call.metadata))
        return await original(self, call, *args, **kwargs)

    monkeypatch.setattr(Accounts, "identify", spy)
    headers = {**A, "x-request-id": "req-allow", "cookie": "a=b", "x-other": "1"}
    response = await c.get("/v1/models", headers=headers)
    assert response.status_code == 200
    (metadata,) = seen
    assert metadata.get("x-api-key") == API_KEY
    assert metadata.get("x-request-id") == "req-allow"
    assert "cookie" not in metadata and "x-other" not in metadata
    assert "authorization" not in metadata
