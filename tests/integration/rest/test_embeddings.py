"""POST /v1/embeddings and GET /v1/models/{model}: the openai SDK in both facade modes,
gRPC, the OpenAI-compatible adapter against a fake upstream that checks the request
shape, and the accounting (rate limits, budget, ledger) every generation gets."""

from __future__ import annotations

import base64
import math
import struct
from collections.abc import AsyncIterator
from typing import Any

import grpc
import openai
import pytest
from gateway.v1 import embedding_service_pb2 as emb
from gateway.v1 import embedding_service_pb2_grpc
from gateway.v1 import model_service_pb2 as models
from google.protobuf import struct_pb2

from tests.support.facade import MODES, both_modes, client, facade
from tests.support.gateways import API_KEY, default_config_dict, running_gateway
from tests.support.grpc_stubs import API, details
from tests.support.upstreams.base import Fault, serving
from tests.support.upstreams.checks import KEY
from tests.support.upstreams.config import PRICE, model, provider, with_models
from tests.support.upstreams.openai import OpenAIWire, fake_vector

DIMENSIONS = 256  # sim-embed's in the embedded default


def sdk_at(url: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=f"{url}/v1", api_key=API_KEY, max_retries=0)


def norm(vector: list[float]) -> float:
    return math.sqrt(sum(x * x for x in vector))


@pytest.fixture(params=MODES)
async def sdk(request: pytest.FixtureRequest) -> AsyncIterator[openai.AsyncOpenAI]:
    async with facade(request.param) as url, sdk_at(url) as c:
        yield c


# -- GET /v1/models/{model} ----------------------------------------------------------


async def test_models_retrieve(sdk: openai.AsyncOpenAI) -> None:
    got = await sdk.models.retrieve("sim-standard")
    assert (got.id, got.object, got.owned_by) == ("sim-standard", "model", "simulated")
    assert got.created == 1767225600
    listed = {m.id: m async for m in sdk.models.list()}
    assert listed["sim-standard"] == got
    with pytest.raises(openai.NotFoundError) as caught:
        await sdk.models.retrieve("no-such-model")
    assert caught.value.status_code == 404
    assert "no-such-model" in caught.value.message


async def test_model_ids_with_slashes_and_colons() -> None:
    data = default_config_dict()
    for new_id in ("meta-llama/Llama-3.1-8B", "llama3.1:8b"):
        data["models"].append({**data["models"][0], "id": new_id, "providers": [
            {**p, "id": f"{new_id}-{p['type']}"} for p in data["models"][0]["providers"]
        ]})  # fmt: skip
    async with client("in_process", data) as c:
        for new_id in ("meta-llama/Llama-3.1-8B", "llama3.1:8b"):
            got = await c.get(f"/v1/models/{new_id}", headers={"x-api-key": API_KEY})
            assert got.status_code == 200, got.text
            assert got.json() == {
                "id": new_id, "object": "model", "created": 1767225600, "owned_by": "simulated"
            }  # fmt: skip


@both_modes
async def test_get_model_needs_an_api_key(mode: str) -> None:
    async with client(mode) as c:
        assert (await c.get("/v1/models/sim-mini")).status_code == 401


async def test_get_model_over_grpc(stubs) -> None:  # type: ignore[no-untyped-def]
    got = await stubs.models.GetModel(models.GetModelRequest(model="sim-pro"), metadata=API)
    assert (got.id, got.object, got.owned_by) == ("sim-pro", "model", "simulated")
    for name, code in (("nope", grpc.StatusCode.NOT_FOUND), ("", grpc.StatusCode.INVALID_ARGUMENT)):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stubs.models.GetModel(models.GetModelRequest(model=name), metadata=API)
        assert caught.value.code() == code
        assert "ErrorInfo" in details(caught.value)


# -- embeddings through the openai SDK (the simulated provider) ----------------------


async def test_float_embeddings(sdk: openai.AsyncOpenAI) -> None:
    got = await sdk.embeddings.create(
        model="sim-embed", input=["first text", "second text"], encoding_format="float"
    )
    assert got.object == "list" and got.model == "sim-embed"
    assert [d.index for d in got.data] == [0, 1]
    assert all(d.object == "embedding" for d in got.data)
    first, second = (d.embedding for d in got.data)
    assert len(first) == len(second) == DIMENSIONS
    assert norm(first) == pytest.approx(1.0) and norm(second) == pytest.approx(1.0)
    assert first != second
    again = await sdk.embeddings.create(
        model="sim-embed", input="second text", encoding_format="float"
    )
    assert again.data[0].embedding == pytest.approx(second)  # deterministic per text
    usage = got.usage
    assert usage.prompt_tokens == usage.total_tokens > 0
    extra = usage.model_extra or {}
    # sim-embed costs $0.02 per million input tokens.
    assert extra["input_cost_usd"] == pytest.approx(usage.prompt_tokens * 0.02 / 1e6)
    assert extra["total_cost_usd"] == pytest.approx(extra["input_cost_usd"])
    assert extra["latency_ms"] >= 0 and "ttft_ms" not in extra


async def test_base64_embeddings_decode_to_the_float_ones(sdk: openai.AsyncOpenAI) -> None:
    # The SDK asks for base64 unless told otherwise, and decodes it itself.
    decoded = await sdk.embeddings.create(model="sim-embed", input="hello", dimensions=32)
    floats = await sdk.embeddings.create(
        model="sim-embed", input="hello", dimensions=32, encoding_format="float"
    )
    assert len(decoded.data[0].embedding) == 32
    assert decoded.data[0].embedding == pytest.approx(floats.data[0].embedding, abs=1e-6)
    raw = await sdk.embeddings.with_raw_response.create(
        model="sim-embed", input="hello", dimensions=32, encoding_format="base64"
    )
    written = raw.http_response.json()["data"][0]["embedding"]
    assert isinstance(written, str)
    unpacked = struct.unpack("<32f", base64.b64decode(written))
    assert list(unpacked) == pytest.approx(floats.data[0].embedding, abs=1e-6)


async def test_dimensions_shorten_as_openai_does(sdk: openai.AsyncOpenAI) -> None:
    full = await sdk.embeddings.create(model="sim-embed", input="x", encoding_format="float")
    short = await sdk.embeddings.create(
        model="sim-embed", input="x", dimensions=8, encoding_format="float"
    )
    head = full.data[0].embedding[:8]
    assert short.data[0].embedding == pytest.approx([v / norm(head) for v in head])
    with pytest.raises(openai.BadRequestError) as caught:
        await sdk.embeddings.create(model="sim-embed", input="x", dimensions=DIMENSIONS + 1)
    assert "at most 256" in caught.value.message


async def test_token_id_inputs(sdk: openai.AsyncOpenAI) -> None:
    one = await sdk.embeddings.create(model="sim-embed", input=[1, 2, 3], encoding_format="float")
    many = await sdk.embeddings.create(
        model="sim-embed", input=[[1, 2, 3], [4]], encoding_format="float"
    )
    assert len(one.data) == 1 and len(many.data) == 2
    assert many.data[0].embedding == pytest.approx(one.data[0].embedding)
    assert one.usage.prompt_tokens == 3 and many.usage.prompt_tokens == 4


@both_modes
@pytest.mark.parametrize(
    ("body", "param", "words"),
    [
        ({"input": "x"}, "model", "required"),
        ({"model": "sim-embed"}, "input", "required"),
        ({"model": "sim-embed", "input": ""}, "input", "empty"),
        ({"model": "sim-embed", "input": []}, "input", "empty"),
        ({"model": "sim-embed", "input": ["a", ""]}, "input[1]", "empty"),
        ({"model": "sim-embed", "input": ["a", [1]]}, "input", "mix"),
        ({"model": "sim-embed", "input": [1, -2]}, "input", "non-negative"),
        ({"model": "sim-embed", "input": [[1.5]]}, "input[0]", "integers"),
        ({"model": "sim-embed", "input": {"a": 1}}, "input", "must be a string"),
        ({"model": "sim-embed", "input": ["a"] * 2049}, "input", "2048"),
        ({"model": "sim-embed", "input": "x", "encoding_format": "int8"}, "encoding_format", ""),
        ({"model": "sim-embed", "input": "x", "dimensions": 0}, "dimensions", "between"),
        ({"model": "sim-embed", "input": "x", "dimensions": "8"}, "dimensions", "integer"),
    ],
)
async def test_bad_requests_name_the_field(
    mode: str, body: dict[str, Any], param: str, words: str
) -> None:
    async with client(mode) as c:
        got = await c.post("/v1/embeddings", json=body, headers={"x-api-key": API_KEY})
    assert got.status_code == 400, got.text
    error = got.json()["error"]
    assert error["param"] == param and error["type"] == "invalid_request_error"
    assert words in error["message"]
    assert "Traceback" not in got.text


@both_modes
async def test_unknown_model_and_missing_key(mode: str) -> None:
    async with client(mode) as c:
        body = {"model": "nope", "input": "x"}
        assert (
            await c.post("/v1/embeddings", json=body, headers={"x-api-key": API_KEY})
        ).status_code == 404
        assert (
            await c.post("/v1/embeddings", json={**body, "model": "sim-embed"})
        ).status_code == 401


# -- the OpenAI-compatible adapter, and models that cannot embed --------------------


async def test_openai_adapter_sends_openais_shape_and_fails_over() -> None:
    wire = OpenAIWire()
    async with serving(wire) as primary, serving(OpenAIWire()) as backup:
        data = with_models(
            model(
                "text-embedding-fake",
                provider("emb-primary", "openai", primary.url),
                provider("emb-backup", "openai", backup.url, "backup"),
            )
        )
        async with (
            facade("in_process", data) as url,
            openai.AsyncOpenAI(base_url=f"{url}/v1", api_key=API_KEY, max_retries=0) as sdk,
        ):
            got = await sdk.embeddings.create(
                model="text-embedding-fake", input=["a", "b", "c"], dimensions=4, user="u-1"
            )
            # The SDK asks for base64 (float32) and decodes it.
            for i, d in enumerate(got.data):
                assert d.embedding == pytest.approx(fake_vector(i, 4), abs=1e-6)
            # Usage comes from the upstream (the fake reports 20 prompt tokens).
            assert got.usage.prompt_tokens == 20
            extra = got.usage.model_extra or {}
            assert extra["input_cost_usd"] == pytest.approx(20 * PRICE["input"] / 1e6)
            (seen,) = primary.seen
            assert seen.path == "/v1/embeddings"
            assert seen.headers["authorization"] == f"Bearer {KEY}"
            assert seen.body == {
                "model": "gpt-fake", "input": ["a", "b", "c"], "encoding_format": "float",
                "dimensions": 4, "user": "u-1",
            }  # fmt: skip
            tokens = await sdk.embeddings.create(model="text-embedding-fake", input=[[5, 6]])
            assert primary.seen[-1].body["input"] == [[5, 6]]
            assert len(tokens.data) == 1
            # A failing primary fails over to the backup.
            primary.faults = [Fault("status", 503)]
            moved = await sdk.embeddings.create(model="text-embedding-fake", input="x")
            assert len(moved.data) == 1 and len(backup.seen) == 1
            # An upstream 400 is the caller's 400, with no failover.
            primary.faults = [Fault("status", 400)]
            with pytest.raises(openai.BadRequestError):
                await sdk.embeddings.create(model="text-embedding-fake", input="x")
            assert len(backup.seen) == 1
    assert wire.refused == []


async def test_fake_upstream_refuses_what_openai_refuses() -> None:
    """The fake's checks can fail: a body OpenAI would refuse gets its 400."""
    import httpx

    wire = OpenAIWire()
    auth = {"authorization": f"Bearer {KEY}"}
    async with (
        serving(wire) as fake,
        httpx.AsyncClient(base_url=fake.url, headers=auth) as http,
    ):
        for body in (
            {"model": "m", "input": "x", "seed": 1},
            {"model": "m", "input": []},
            {"model": "m", "input": ["a", 1]},
            {"model": "m", "input": "x", "encoding_format": "int8"},
            {"model": "m", "input": "x", "dimensions": 0},
        ):
            assert (await http.post("/v1/embeddings", json=body)).status_code == 400, body
        ok = await http.post("/v1/embeddings", json={"model": "m", "input": [[1, 2]]})
        assert ok.status_code == 200
    assert len(wire.refused) == 5


async def test_models_whose_providers_cannot_embed_get_400() -> None:
    data = with_models(
        model(
            "claude-and-tgi",
            provider("claude-p", "anthropic", "http://127.0.0.1:9"),
            provider("tgi-b", "tgi", "http://127.0.0.1:9", "backup"),
        )
    )
    async with facade("in_process", data) as url, sdk_at(url) as sdk:
        with pytest.raises(openai.BadRequestError) as caught:
            await sdk.embeddings.create(model="claude-and-tgi", input="x")
    message = caught.value.message
    assert "embeddings" in message and "claude-and-tgi" in message
    assert caught.value.param == "model"


# -- gRPC ------------------------------------------------------------------------------


def _value(python: Any) -> struct_pb2.Value:
    value = struct_pb2.Value()
    if isinstance(python, str):
        value.string_value = python
    else:
        value.list_value.extend(python)
    return value


async def test_create_embeddings_over_grpc(gateway) -> None:  # type: ignore[no-untyped-def]
    async with grpc.aio.insecure_channel(f"127.0.0.1:{gateway.grpc_port}") as channel:
        stub = embedding_service_pb2_grpc.EmbeddingServiceStub(channel)
        got = await stub.CreateEmbeddings(
            emb.CreateEmbeddingsRequest(model="sim-embed", input=_value(["a", "b"]), dimensions=6),
            metadata=API,
        )
        assert [d.index for d in got.data] == [0, 1]
        vector = [v.number_value for v in got.data[0].embedding.list_value.values]
        assert len(vector) == 6 and norm(vector) == pytest.approx(1.0)
        assert got.usage.prompt_tokens == 2 and got.usage.HasField("total_cost_usd")
        packed = await stub.CreateEmbeddings(
            emb.CreateEmbeddingsRequest(
                model="sim-embed", input=_value("a"), dimensions=6, encoding_format="base64"
            ),
            metadata=API,
        )
        decoded = struct.unpack("<6f", base64.b64decode(packed.data[0].embedding.string_value))
        assert list(decoded) == pytest.approx(vector, abs=1e-6)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.CreateEmbeddings(
                emb.CreateEmbeddingsRequest(model="sim-embed", input=_value("a"), dimensions=0),
                metadata=API,
            )
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        violations = details(caught.value)["BadRequest"].field_violations  # type: ignore[attr-defined]
        assert [v.field for v in violations] == ["dimensions"]


# -- accounting -------------------------------------------------------------------------

LIMITED = "gw-embedding-key-000000000"


async def test_embeddings_are_rate_limited_budgeted_and_in_the_ledger() -> None:
    data = default_config_dict()
    # 0.02 USD per million tokens: a budget of 2e-7 USD is 10 tokens' worth.
    data["keys"].append({
        "name": "embedder", "kind": "api", "secret": LIMITED, "tokens_per_minute": 1000,
        "budget_usd": 2e-7, "budget_period": "monthly",
    })  # fmt: skip
    async with running_gateway(data) as gw:
        import httpx

        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}") as c:
            mine = {"authorization": f"Bearer {LIMITED}"}
            body = {"model": "sim-embed", "input": "abcdefgh" * 2}  # 4 estimated tokens
            first = await c.post("/v1/embeddings", json=body, headers=mine)
            assert first.status_code == 200, first.text
            assert first.json()["usage"]["prompt_tokens"] == 4
            assert int(first.headers["x-ratelimit-remaining-tokens"]) <= 1000 - 4
            assert (await c.post("/v1/embeddings", json=body, headers=mine)).status_code == 200
            await gw.gateway.accounts.settled()
            # 8 tokens spent of 10: the next 4 do not fit the budget.
            refused = await c.post("/v1/embeddings", json=body, headers=mine)
            assert refused.status_code == 429, refused.text
            assert refused.json()["error"]["code"] == "budget_exhausted"
            usage = (await c.get("/v1/usage", headers=mine)).json()
    (row,) = [m for m in usage["by_model"] if m["model"] == "sim-embed"]
    # The refused request is in the ledger too, as an error without tokens.
    assert (row["requests"], row["errors"]) == (3, 1)
    assert row["prompt_tokens"] == 8 and row["completion_tokens"] == 0
    assert row["cost_usd"] == pytest.approx(8 * 0.02 / 1e6)
    assert usage["budget"]["spent_usd"] == pytest.approx(8 * 0.02 / 1e6)
