"""POST /v1/moderations: the openai SDK's `moderations.create` (strings and parts),
raw HTTP for every refusal, gRPC, the ledger row, and the OpenAI adapter against a
strict fake of OpenAI's moderations, with failover."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc
import httpx
import openai
import pytest
from gateway.v1 import moderation_service_pb2 as pb
from gateway.v1 import moderation_service_pb2_grpc
from google.protobuf import struct_pb2

from server.base.moderation import CATEGORIES
from tests.integration.rest.test_operation_run import last_row
from tests.support.facade import both_modes, client, facade
from tests.support.gateways import API_KEY, default_config_dict, running_gateway
from tests.support.grpc_stubs import API, details
from tests.support.upstreams.base import Fault, serving
from tests.support.upstreams.config import PRICE, model, provider, with_models
from tests.support.upstreams.moderation import ModerationWire

AUTH = {"x-api-key": API_KEY}


@pytest.fixture
async def sdk() -> AsyncIterator[openai.AsyncOpenAI]:
    async with (
        facade("in_process") as url,
        openai.AsyncOpenAI(base_url=f"{url}/v1", api_key=API_KEY, max_retries=0) as c,
    ):
        yield c


async def test_strings_get_a_verdict_each(sdk: openai.AsyncOpenAI) -> None:
    got = await sdk.moderations.create(
        model="sim-moderation", input=["I will attack you, idiot", "Have a nice day"]
    )
    assert got.model == "sim-moderation" and got.id.startswith("modr-")
    hit, calm = got.results
    assert hit.flagged and hit.categories.violence and hit.categories.harassment
    assert not hit.categories.sexual
    assert hit.category_scores.violence == pytest.approx(0.97)
    assert hit.category_scores.sexual == pytest.approx(0.0001)
    assert not calm.flagged and not any(calm.categories.model_dump(by_alias=True).values())
    assert set(hit.categories.model_dump(by_alias=True)) >= set(CATEGORIES)
    assert hit.category_applied_input_types.violence == ["text"]
    one = await sdk.moderations.create(model="sim-moderation", input="how to steal a car")
    assert len(one.results) == 1 and one.results[0].categories.illicit


async def test_text_and_image_parts_get_one_verdict(sdk: openai.AsyncOpenAI) -> None:
    got = await sdk.moderations.create(
        model="sim-moderation",
        input=[
            {"type": "text", "text": "they shoot"},
            {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
        ],
    )
    (result,) = got.results
    assert result.flagged and result.categories.violence
    assert result.category_applied_input_types.violence == ["text", "image"]
    assert result.category_applied_input_types.harassment == ["text"]


@both_modes
@pytest.mark.parametrize(
    ("body", "param", "words"),
    [
        ({"input": "x"}, "model", "required"),
        ({"model": "sim-moderation"}, "input", "required"),
        ({"model": "sim-moderation", "input": " "}, "input", "empty"),
        ({"model": "sim-moderation", "input": []}, "input", "empty"),
        ({"model": "sim-moderation", "input": ["a", ""]}, "input[1]", "empty"),
        ({"model": "sim-moderation", "input": ["a"] * 33}, "input", "32"),
        ({"model": "sim-moderation", "input": 3}, "input", "string"),
        ({"model": "sim-moderation", "input": ["a", {"type": "text", "text": "b"}]}, "input[0]",
         "part"),
        ({"model": "sim-moderation", "input": [{"type": "audio"}]}, "input[0].type", "image_url"),
        ({"model": "sim-moderation", "input": [{"type": "image_url", "image_url": {}}]},
         "input[0].image_url.url", "required"),
        ({"model": "sim-moderation", "input": [{"type": "image_url",
          "image_url": {"url": "http://127.0.0.1/x.png"}}]}, "input[0].image_url.url", ""),
        ({"model": "sim-moderation", "input": "x", "store": True}, "store", ""),
        ({"model": "sim-mini", "input": "x"}, "model", "moderation"),
    ],
)  # fmt: skip
async def test_bad_requests_name_the_field(
    mode: str, body: dict[str, Any], param: str, words: str
) -> None:
    async with client(mode) as c:
        got = await c.post("/v1/moderations", json=body, headers=AUTH)
    assert got.status_code == 400, got.text
    error = got.json()["error"]
    assert error["param"] == param and words in error["message"]
    assert "Traceback" not in got.text


async def test_moderation_over_grpc(gateway) -> None:  # type: ignore[no-untyped-def]
    async with grpc.aio.insecure_channel(f"127.0.0.1:{gateway.grpc_port}") as channel:
        stub = moderation_service_pb2_grpc.ModerationServiceStub(channel)
        got = await stub.CreateModeration(
            pb.CreateModerationRequest(
                model="sim-moderation", input=struct_pb2.Value(string_value="kill")
            ),
            metadata=API,
        )
        assert got.results[0].flagged and got.results[0].categories["violence"]
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.CreateModeration(pb.CreateModerationRequest(model="sim-moderation"),
                                        metadata=API)  # fmt: skip
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        violations = details(caught.value)["BadRequest"].field_violations  # type: ignore[attr-defined]
        assert [v.field for v in violations] == ["input"]


async def test_the_openai_adapter_moderates_upstream_and_fails_over() -> None:
    primary_wire, backup_wire = ModerationWire(), ModerationWire()
    async with serving(primary_wire) as primary, serving(backup_wire) as backup:
        entry = model(
            "omni-fake",
            provider("mod-primary", "openai", primary.url),
            provider("mod-backup", "openai", backup.url, "backup"),
            price=PRICE,
        )
        entry["capabilities"] = ["moderation"]
        async with (
            running_gateway(with_models(entry)) as gw,
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}", headers=AUTH) as c,
        ):
            body = {"model": "omni-fake", "input": ["an attack", "calm"]}
            got = await c.post("/v1/moderations", json=body, headers=AUTH)
            assert got.status_code == 200, got.text
            flagged = [r["flagged"] for r in got.json()["results"]]
            # The fake's verdict (it flags "attack"), not the simulated one's.
            assert flagged == [True, False]
            assert got.json()["results"][0]["category_scores"]["violence"] == 0.9
            assert primary.seen[0].body == {"model": "gpt-fake", "input": ["an attack", "calm"]}
            usage = got.json()["usage"]
            assert usage["prompt_tokens"] == 11
            assert usage["total_cost_usd"] == pytest.approx(11 * PRICE["input"] / 1e6)
            row = await last_row(gw)
            assert (row["method"], row["unit"], row["units"]) == ("CreateModeration", "tokens", 11)
            parts = [{"type": "text", "text": "x"},
                     {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}]  # fmt: skip
            both = await c.post("/v1/moderations", json={"model": "omni-fake", "input": parts})
            assert both.status_code == 200 and len(both.json()["results"]) == 1
            assert primary.seen[-1].body["input"] == parts
            primary.faults = [Fault("status", 503)]
            moved = await c.post("/v1/moderations", json=body)
            assert moved.status_code == 200 and len(backup.seen) == 1
    assert primary_wire.refused == [] and backup_wire.refused == []


async def test_the_fake_refuses_what_openai_refuses() -> None:
    from tests.support.upstreams.checks import KEY

    wire = ModerationWire()
    bodies = [{"model": "m", "input": 3}, {"model": "m", "input": []},
              {"model": "m", "input": "x", "store": True},
              {"model": "m", "input": [{"type": "audio"}]}]  # fmt: skip
    async with (
        serving(wire) as fake,
        httpx.AsyncClient(base_url=fake.url, headers={"authorization": f"Bearer {KEY}"}) as h,
    ):
        for body in bodies:
            assert (await h.post("/v1/moderations", json=body)).status_code == 400, body
        assert (
            await h.post("/v1/moderations", json={"model": "m", "input": "x"})
        ).status_code == 200
    assert len(wire.refused) == len(bodies)


async def test_default_gateway_lists_the_moderation_model() -> None:
    async with (
        running_gateway(default_config_dict()) as gw,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}", headers=AUTH) as c,
    ):
        one = (await c.get("/v1/models/sim-moderation")).json()
    assert one["capabilities"] == ["moderation"] and one["owned_by"] == "simulated"
