"""Fields that change nothing in the answer are accepted, not refused: `store`,
`service_tier`, `prompt_cache_key`, `prompt_cache_retention` and `safety_identifier` reach an OpenAI-compatible
upstream under their own names, and any other upstream (the simulated one here) answers
as if they were not there. A value outside OpenAI's own set is still a 400 naming it."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest

from tests.support.gateways import API_KEY, default_config_dict, running_gateway
from tests.support.upstreams.base import serving
from tests.support.upstreams.config import model, provider, with_models
from tests.support.upstreams.openai import OpenAIWire

HINTS: dict[str, Any] = {
    "store": False,
    "service_tier": "auto",
    "prompt_cache_key": "session-42",
    "prompt_cache_retention": "24h",
    "safety_identifier": "user-hash-1",
}
HELLO = [{"role": "user", "content": "hello"}]


async def test_an_openai_upstream_gets_them_under_their_names() -> None:
    async with serving(OpenAIWire()) as fake:
        data = with_models(model("plain", provider("p-openai", "openai", fake.url)))
        async with running_gateway(data) as gw:
            sdk = openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{gw.http_port}/v1",
                                     api_key=API_KEY, max_retries=0)  # fmt: skip
            reply = await sdk.chat.completions.create(model="plain", messages=HELLO, **HINTS)
            await sdk.close()
    assert reply.choices[0].message.content
    sent = fake.seen[-1].body
    assert {name: sent.get(name) for name in HINTS} == HINTS


async def test_other_upstreams_answer_as_without_them() -> None:
    async with running_gateway(default_config_dict()) as gw:
        base = f"http://127.0.0.1:{gw.http_port}"
        async with httpx.AsyncClient(base_url=base) as c:
            headers = {"x-api-key": API_KEY}
            plain = await c.post("/v1/chat/completions", headers=headers,
                                 json={"model": "sim-mini", "messages": HELLO})  # fmt: skip
            hinted = await c.post("/v1/chat/completions", headers=headers,
                                  json={"model": "sim-mini", "messages": HELLO, **HINTS})  # fmt: skip
            assert hinted.status_code == 200, hinted.text
            assert hinted.json()["choices"][0]["message"] == plain.json()["choices"][0]["message"]
            streamed = await c.post("/v1/chat/completions", headers=headers, json={
                "model": "sim-mini", "messages": HELLO, "stream": True, **HINTS})  # fmt: skip
            assert streamed.status_code == 200 and streamed.text.endswith("data: [DONE]\n\n")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("service_tier", "ultra"),
        ("store", "yes"),
        ("prompt_cache_key", "k" * 513),
        ("prompt_cache_retention", "forever"),
    ],  # fmt: skip
)
async def test_a_value_outside_the_set_is_still_a_400(field: str, value: Any) -> None:
    async with (
        running_gateway(default_config_dict()) as gw,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}") as c,
    ):
        reply = await c.post("/v1/chat/completions", headers={"x-api-key": API_KEY},
                             json={"model": "sim-mini", "messages": HELLO, field: value})  # fmt: skip
    assert reply.status_code == 400
    assert reply.json()["error"]["param"] == field
