"""Fair shares of a saturated model, through the openai SDK: sim-mini capped at two
calls in flight whose calls may wait for a slot; a key flooding it with eight calls at
once gets them all served in turn (none refused), while another key's calls, sent
during the flood, are served in about an upstream call's time instead of queueing
behind the flood."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import openai

from tests.support.gateways import default_config_dict, running_gateway, wait_for

FLOOD = "gw-fair-flood-api-key-0001"
STEADY = "gw-fair-steady-api-key-001"
HELLO: Any = [{"role": "user", "content": "hello"}]
TTFT_MS = 300


async def test_a_flooding_key_waits_its_turn_and_another_key_is_not_held_behind_it() -> None:
    data = default_config_dict()
    for model in data["models"]:
        for provider in model["providers"]:
            provider["params"] = {"ttft_ms": TTFT_MS, "tokens_per_second": 0}
    data["keys"] += [
        {"name": "flood", "kind": "api", "secret": FLOOD},
        {"name": "steady", "kind": "api", "secret": STEADY},
    ]
    data["traffic"] = {
        "models": {"sim-mini": {"max_in_flight": 2, "max_wait_s": 30}},
        "keys": {"flood": {"priority": "batch"}},
    }
    data["operations"] = {"request_log": False}
    async with running_gateway(data) as gw:
        base = f"http://127.0.0.1:{gw.http_port}/v1"
        flood = openai.AsyncOpenAI(base_url=base, api_key=FLOOD, max_retries=0)
        steady = openai.AsyncOpenAI(base_url=base, api_key=STEADY, max_retries=0)

        async def ask(client: openai.AsyncOpenAI) -> float:
            started = time.monotonic()
            await client.chat.completions.create(model="sim-mini", messages=HELLO, max_tokens=4)
            return time.monotonic() - started

        async with flood, steady:
            flooding = [asyncio.create_task(ask(flood)) for _ in range(8)]
            traffic = gw.gateway.accounts.traffic
            # The flood fills both slots and waits.
            await wait_for(lambda: traffic.waiting >= 6, timeout_s=10)
            steady_took = [await ask(steady) for _ in range(3)]
            flood_took = await asyncio.gather(*flooding)
    # Eight flood calls through two slots: the last waited three upstream calls or more.
    assert max(flood_took) >= 3.5 * TTFT_MS / 1000, flood_took
    # The steady key's calls, each sent while the flood waited, were not queued behind
    # it: each took one upstream call and the wait for one slot's release at most.
    assert max(steady_took) < 3 * TTFT_MS / 1000, (steady_took, flood_took)
