"""The Gemini dialect on the wire, read raw: SSE with `alt=sse` and the JSON-array
stream without it, `%3A` for the colon, the key in its three places, the model list
chosen by Google's key, errors in Google's shape (mid-stream too), Gemini's turn rules,
the same methods over gRPC, and one ledger row per call."""

from __future__ import annotations

import json
from typing import Any

import grpc
import httpx
import pytest
from gateway.v1 import gemini_pb2, gemini_service_pb2, gemini_service_pb2_grpc

from tests.support.facade import both_modes, client, set_params
from tests.support.gateways import API_KEY, default_config_dict, running_gateway

G = {"x-goog-api-key": API_KEY}
HELLO = {"contents": [{"role": "user", "parts": [{"text": "Say hello."}]}]}
PATH = "/v1beta/models/sim-mini"


async def raw(c: httpx.AsyncClient, path: str, body: Any, headers: Any = G) -> httpx.Response:
    async with c.stream("POST", path, json=body, headers=headers) as response:
        await response.aread()
    return response


@both_modes
async def test_sse_stream_is_whole_answers_without_done(mode: str) -> None:
    async with client(mode) as c:
        response = await raw(c, f"{PATH}:streamGenerateContent?alt=sse", HELLO)
    assert response.headers["content-type"].startswith("text/event-stream")
    events = response.content.removesuffix(b"\n\n").split(b"\n\n")
    chunks = [json.loads(e.removeprefix(b"data: ")) for e in events]
    assert all(e.startswith(b"data: {") for e in events) and b"[DONE]" not in response.content
    assert all(c["candidates"][0]["content"]["role"] == "model" for c in chunks)
    last = chunks[-1]
    assert last["candidates"][0]["finishReason"] == "STOP"
    usage = last["usageMetadata"]
    assert usage["totalCostUsd"] == pytest.approx(usage["inputCostUsd"] + usage["outputCostUsd"])
    assert usage["totalTokenCount"] == usage["promptTokenCount"] + usage["candidatesTokenCount"]
    assert "usageMetadata" not in chunks[0]


@both_modes
async def test_without_alt_sse_the_stream_is_one_json_array(mode: str) -> None:
    async with client(mode) as c:
        response = await raw(c, f"{PATH}:streamGenerateContent", HELLO)
    assert response.status_code == 200 and response.headers["content-type"] == "application/json"
    chunks = json.loads(response.content)
    assert isinstance(chunks, list) and len(chunks) > 2
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"


async def test_a_colon_sent_as_percent_3a_is_the_same_method() -> None:
    async with client("in_process") as c:
        response = await c.post(f"{PATH}%3AgenerateContent", json=HELLO, headers=G)
        encoded = await c.post("/v1/models/sim-mini%3AcountTokens", json=HELLO, headers=G)
    assert response.status_code == 200 and response.json()["candidates"]
    assert encoded.status_code == 200 and encoded.json()["totalTokens"] > 0


async def test_the_key_in_its_three_places() -> None:
    async with client("in_process") as c:
        for path, headers in [
            (f"{PATH}:generateContent", G),
            (f"{PATH}:generateContent?key={API_KEY}", {}),
            (f"{PATH}:generateContent", {"authorization": f"Bearer {API_KEY}"}),
        ]:
            response = await c.post(path, json=HELLO, headers=headers)
            assert response.status_code == 200, (path, response.text)
        missing = await c.post(f"{PATH}:generateContent", json=HELLO)
        wrong = await c.post(f"{PATH}:generateContent?key=nope", json=HELLO)
        # A key header wins over the query's key, as over a Bearer token.
        header_wins = await c.post(
            f"{PATH}:generateContent?key={API_KEY}", json=HELLO, headers={"x-goog-api-key": "nope"}
        )
        api_header = await c.post(
            f"{PATH}:generateContent", json=HELLO,
            headers={"x-api-key": API_KEY, "x-goog-api-key": "nope"},
        )  # fmt: skip
    assert api_header.status_code == 200
    for response in (missing, wrong, header_wins):
        error = response.json()["error"]
        assert response.status_code == 401 and error["status"] == "UNAUTHENTICATED"
        assert error["code"] == 401 and "nope" not in error["message"]


async def test_the_model_list_follows_googles_key() -> None:
    async with client("in_process") as c:
        gemini = (await c.get("/v1/models", headers=G)).json()
        by_query = (await c.get(f"/v1/models?key={API_KEY}&pageSize=2")).json()
        openai = (await c.get("/v1/models", headers={"x-api-key": API_KEY})).json()
        one = (await c.get("/v1beta/models/models/sim-pro", headers=G)).json()
        openai_one = (await c.get("/v1/models/sim-pro", headers={"x-api-key": API_KEY})).json()
    assert [m["name"] for m in gemini["models"]][:2] == ["models/sim-mini", "models/sim-standard"]
    assert "nextPageToken" not in gemini
    assert len(by_query["models"]) == 2 and by_query["nextPageToken"] == "models/sim-standard"
    assert openai["object"] == "list" and openai["data"][0]["id"] == "sim-mini"
    assert (
        one["name"] == "models/sim-pro" and "generateContent" in one["supportedGenerationMethods"]
    )
    assert one["inputTokenLimit"] > 0 and openai_one["object"] == "model"


async def test_errors_name_the_field_in_googles_shape() -> None:
    async with client("in_process") as c:
        empty = await c.post(f"{PATH}:generateContent", json={"contents": []}, headers=G)
        unknown = await c.post(f"{PATH}:generateContent", json={**HELLO, "nope": 1}, headers=G)
        bad = await c.post(
            f"{PATH}:generateContent",
            json={**HELLO, "generationConfig": {"candidateCount": 9}},
            headers=G,
        )
    error = empty.json()["error"]
    assert (empty.status_code, error["code"], error["status"]) == (400, 400, "INVALID_ARGUMENT")
    violations = [d for d in error["details"] if d["@type"].endswith("BadRequest")]
    assert violations[0]["fieldViolations"][0]["field"] == "contents"
    assert unknown.status_code == 400 and "nope" in unknown.json()["error"]["message"]
    assert bad.json()["error"]["message"].startswith("generationConfig.candidateCount")


async def test_function_responses_must_answer_the_calls_just_before() -> None:
    call = {"functionCall": {"id": "c1", "name": "f", "args": {}}}
    answer = {"functionResponse": {"id": "c1", "name": "f", "response": {"output": "ok"}}}
    stray = {"functionResponse": {"id": "c2", "name": "g", "response": {}}}
    tools = [{"functionDeclarations": [{"name": "f"}, {"name": "g"}]}]

    def turns(*parts: Any) -> dict[str, Any]:
        return {"tools": tools, "contents": [
            {"role": "user", "parts": [{"text": "Go."}]},
            {"role": "model", "parts": [call]},
            {"role": "user", "parts": list(parts)},
        ]}  # fmt: skip

    async with client("in_process") as c:
        ok = await c.post(f"{PATH}:generateContent", json=turns(answer), headers=G)
        by_name = await c.post(
            f"{PATH}:generateContent",
            json=turns({"functionResponse": {"name": "f", "response": {"output": "ok"}}}),
            headers=G,
        )
        refused = await c.post(f"{PATH}:generateContent", json=turns(answer, stray), headers=G)
    assert ok.status_code == 200, ok.text
    assert by_name.status_code == 200, by_name.text
    assert refused.status_code == 400
    assert refused.json()["error"]["message"].startswith("contents[2].parts[1].functionResponse")


@pytest.mark.parametrize("alt", ["?alt=sse", ""])
async def test_a_failure_mid_stream_ends_with_an_error_not_a_finish(alt: str) -> None:
    data = set_params(default_config_dict(), "sim-mini", fail_after_tokens=3)
    data["models"][0]["providers"] = data["models"][0]["providers"][:1]
    async with (
        running_gateway(data) as gw,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}") as c,
    ):
        response = await raw(c, f"{PATH}:streamGenerateContent{alt}", HELLO)
    if alt:
        events = response.content.removesuffix(b"\n\n").split(b"\n\n")
        chunks = [json.loads(e.removeprefix(b"data: ")) for e in events]
    else:
        chunks = json.loads(response.content)
    assert chunks[-1]["error"]["status"] == "UNAVAILABLE"
    assert not any("finishReason" in c.get("candidates", [{}])[0] for c in chunks[:-1])


async def test_grpc_serves_every_method_and_the_ledger_counts_each_call() -> None:
    async with running_gateway(default_config_dict()) as gw:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel:
            stub = gemini_service_pb2_grpc.GeminiServiceStub(channel)
            meta = (("x-goog-api-key", API_KEY),)
            contents = [gemini_pb2.GeminiContent(role="user", parts=[
                gemini_pb2.GeminiPart(text="Hello.")])]  # fmt: skip
            whole = await stub.GenerateContent(
                gemini_service_pb2.GenerateContentRequest(model="sim-mini", contents=contents),
                metadata=meta,
            )
            chunks = [c async for c in stub.StreamGenerateContent(
                gemini_service_pb2.StreamGenerateContentRequest(
                    model="models/sim-mini", contents=contents), metadata=meta)]  # fmt: skip
            counted = await stub.CountTokens(
                gemini_service_pb2.CountTokensRequest(model="sim-mini", contents=contents),
                metadata=meta,
            )
            listed = await stub.ListGeminiModels(
                gemini_service_pb2.ListGeminiModelsRequest(), metadata=meta
            )
            with pytest.raises(grpc.aio.AioRpcError) as denied:
                await stub.GenerateContent(
                    gemini_service_pb2.GenerateContentRequest(model="sim-mini", contents=contents)
                )
        await gw.gateway.accounts.ledger.flush()
        rows = await gw.gateway.store.db.fetch("SELECT method, status, model FROM usage_records")
    assert whole.candidates[0].finish_reason == "STOP" and whole.usage_metadata.total_cost_usd > 0
    assert chunks[-1].candidates[0].finish_reason == "STOP" and len(chunks) > 2
    assert counted.total_tokens > 0 and listed.models[0].name == "models/sim-mini"
    assert denied.value.code() == grpc.StatusCode.UNAUTHENTICATED
    generations = [r for r in rows if r["method"] in ("GenerateContent", "StreamGenerateContent")]
    assert sorted(r["method"] for r in generations) == ["GenerateContent", "StreamGenerateContent"]
    assert all(r["status"] == "OK" and r["model"] == "sim-mini" for r in generations)
