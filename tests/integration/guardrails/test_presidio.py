"""A guardrail of `kind: presidio` (the extra, installed with the suite): Presidio's
named entities redacted before an upstream sees them, its scans off the event loop (a
health check answers while a long one runs), and the kind refused at start-up when the
extra is missing."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
import openai
import pytest

from server.guardrails.presidio import available
from tests.support.gateways import API_KEY, running_gateway
from tests.support.upstreams.base import serving
from tests.support.upstreams.config import model, provider, with_models
from tests.support.upstreams.openai import OpenAIWire

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not available(), reason="the presidio extra is not installed"),
]
GUARDRAIL = {"id": "ner", "kind": "presidio", "detectors": ["email", "credit_card"],
             "entities": ["PERSON"]}  # fmt: skip


def config(url: str) -> dict[str, Any]:
    data = with_models(model("oa", provider("oa-p", "openai", url)), request_timeout_s=60)
    data["guardrails"] = [GUARDRAIL]
    data["default_guardrails"] = ["ner"]
    return data


async def test_named_entities_never_reach_the_upstream() -> None:
    async with serving(OpenAIWire()) as oa, running_gateway(config(oa.url)) as gw:
        sdk = openai.AsyncOpenAI(
            base_url=f"http://127.0.0.1:{gw.http_port}/v1", api_key=API_KEY, max_retries=0
        )
        text = "My name is Alice Smith, mail alice@example.com, card 4111 1111 1111 1111."
        reply = await sdk.chat.completions.with_raw_response.create(
            model="oa", messages=[{"role": "user", "content": text}]
        )
        sent = json.dumps(oa.seen[-1].body)
        for value in ("Alice Smith", "alice@example.com", "4111 1111 1111 1111"):
            assert value not in sent
        assert "[PERSON_1]" in sent and "[EMAIL_1]" in sent
        assert "input:redact:PERSON=1" in reply.headers["x-gateway-guardrails"]


async def test_a_long_scan_leaves_the_loop_free() -> None:
    long = "Alice Smith met Bob Jones in Paris and wrote to carol@example.org. " * 400
    async with serving(OpenAIWire()) as oa, running_gateway(config(oa.url)) as gw:
        url = f"http://127.0.0.1:{gw.http_port}"
        async with httpx.AsyncClient(base_url=url, timeout=60) as c:
            body = {"model": "oa", "messages": [{"role": "user", "content": long}]}
            scan = asyncio.ensure_future(
                c.post("/v1/chat/completions", json=body, headers={"x-api-key": API_KEY})
            )
            await asyncio.sleep(0.3)  # the scan is running
            started = time.perf_counter()
            health = await c.get("/healthz")
            waited = time.perf_counter() - started
            answer = await scan
    assert answer.status_code == 200, answer.text
    assert health.status_code == 200 and waited < 0.5
    assert "carol@example.org" not in json.dumps(oa.seen[-1].body)
