"""Budgets and token limits hold while requests are in flight together, on every
backend: in memory, in Redis, and shared by `gateway serve --workers 2`.

The upstream holds each request long enough for all the others to be admitted while it
is in flight (and counts how many it holds at once), so a backend that forgets what the
requests in flight reserved lets them all through; an upstream that answers at once
would let each settle before the next is admitted and hide it.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from server.base import costs, tokens
from server.base.config import Price
from server.base.generation import GenerationRequest, Message
from tests.support.gateways import running_gateway, start_process, stop_process, write_config
from tests.support.shared_state import REDIS_URL, config_with
from tests.support.upstreams.base import FakeUpstream, Fault, serving
from tests.support.upstreams.config import PRICE, model, provider
from tests.support.upstreams.openai import OpenAIWire

# Long enough for every request of a burst to be admitted while the first are held.
HOLD_S = 3.0  # long enough that the whole burst arrives while two are held, loaded or not
BURST = 24
MAX_TOKENS = 20
BUDGET_KEY = "overlap-budget-key-0000000"
TOKENS_KEY = "overlap-tokens-key-0000000"
BODY = {
    "model": "held",
    "max_tokens": MAX_TOKENS,
    "messages": [{"role": "user", "content": "hello"}],
}
REQUEST = GenerationRequest(messages=(Message("user", "hello"),), max_tokens=MAX_TOKENS)
# What one request reserves: its worst-case cost, and its prompt estimate plus max_tokens.
EACH_USD = costs.max_cost([Price(**PRICE)], REQUEST, 1024)
EACH_TOKENS = tokens.estimate_prompt(REQUEST) + MAX_TOKENS
# Room for two requests' reservations, not three.
ROOM = 2.5


def config(upstream: FakeUpstream, **storage: Any) -> dict[str, Any]:
    data = config_with(**storage)
    data["models"].append(model("held", provider("held-p", "openai", upstream.url,
                                                 read_timeout_s=10)))  # fmt: skip
    data["keys"] += [
        {"name": "overlap-budget", "kind": "api", "secret": BUDGET_KEY,
         "budget_usd": round(EACH_USD * ROOM, 12)},
        {"name": "overlap-tokens", "kind": "api", "secret": TOKENS_KEY,
         "tokens_per_minute": int(EACH_TOKENS * ROOM)},
    ]  # fmt: skip
    return data


@asynccontextmanager
async def gateway_url(backend: str, upstream: FakeUpstream, tmp_path: Any, prefix: str) -> AsyncIterator[str]:  # fmt: skip
    """The REST base URL of a gateway keeping its limits on `backend`."""
    if backend == "memory":
        async with running_gateway(config(upstream)) as gw:
            yield f"http://127.0.0.1:{gw.http_port}"
    elif backend == "redis":
        data = config(
            upstream, redis_url=REDIS_URL, redis_prefix=f"{prefix}{uuid.uuid4().hex[:6]}:"
        )
        async with running_gateway(data) as gw:
            yield f"http://127.0.0.1:{gw.http_port}"
    else:
        data = config(upstream, sqlite_path=str(tmp_path / "gateway.db"))
        gw = start_process("--config", str(write_config(tmp_path, data)), "--workers", "2",
                           timeout_s=60)  # fmt: skip
        try:
            assert gw.http_port, "".join(gw.output)
            yield f"http://127.0.0.1:{gw.http_port}"
        finally:
            stop_process(gw, timeout_s=60)


BACKENDS = [
    pytest.param("memory"),
    pytest.param("redis"),
    pytest.param("workers", marks=pytest.mark.slow),
]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, redis_prefix: str) -> str:
    return str(request.param)


async def burst(url: str, key: str) -> list[httpx.Response]:
    limits = httpx.Limits(max_connections=BURST)
    async with httpx.AsyncClient(base_url=url, timeout=30, limits=limits) as http:
        return await asyncio.gather(*(
            http.post("/v1/chat/completions", json=BODY, headers={"x-api-key": key})
            for _ in range(BURST)
        ))  # fmt: skip


async def test_a_budget_admits_only_what_fits_beside_the_requests_in_flight(
    backend: str, tmp_path: Any, redis_prefix: str
):
    async with (
        serving(OpenAIWire(), default=Fault("slow_headers", delay_s=HOLD_S)) as upstream,
        gateway_url(backend, upstream, tmp_path, redis_prefix) as url,
    ):
        answers = await burst(url, BUDGET_KEY)
    statuses = sorted(r.status_code for r in answers)
    assert statuses == [200] * 2 + [429] * (BURST - 2), statuses
    # The two admitted were held together: the others were refused while they were.
    assert upstream.peak_in_flight == 2 and len(upstream.seen) == 2
    refused = next(r for r in answers if r.status_code == 429)
    assert refused.json()["error"]["code"] == "budget_exhausted"
    assert "reserved by requests in flight" in refused.json()["error"]["message"]
    spent = sum(r.json()["usage"]["total_cost_usd"] for r in answers if r.status_code == 200)
    assert spent <= EACH_USD * ROOM


async def test_a_token_limit_admits_only_what_fits_beside_the_requests_in_flight(
    backend: str, tmp_path: Any, redis_prefix: str
):
    async with (
        serving(OpenAIWire(), default=Fault("slow_headers", delay_s=HOLD_S)) as upstream,
        gateway_url(backend, upstream, tmp_path, redis_prefix) as url,
    ):
        answers = await burst(url, TOKENS_KEY)
    statuses = sorted(r.status_code for r in answers)
    assert statuses == [200] * 2 + [429] * (BURST - 2), statuses
    assert upstream.peak_in_flight == 2 and len(upstream.seen) == 2
    refused = next(r for r in answers if r.status_code == 429)
    assert refused.json()["error"]["code"] == "rate_limited"
    assert refused.headers["x-ratelimit-limit-tokens"] == str(int(EACH_TOKENS * ROOM))
