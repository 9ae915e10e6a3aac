"""Fair shares of a saturated model, through the openai SDK: sim-mini capped at two
calls in flight whose calls may wait for a slot; a key flooding it with eight calls at
once gets them all served in turn (none refused), while another key's call, sent
during the flood, takes the next free slot instead of queueing behind the flood. In one
process, and on two workers sharing the cap through Redis."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.support.gateways import (
    default_config_dict,
    eventually,
    running_gateway,
    start_process,
    stop_process,
    write_config,
)
from tests.support.shared_state import REDIS_URL

FLOOD = "gw-fair-flood-api-key-0001"
STEADY = "gw-fair-steady-api-key-001"
HELLO: Any = [{"role": "user", "content": "hello"}]
# Long enough that all eight flood calls are in while the first two hold the slots.
TTFT_MS = 1000


def fair_config() -> dict[str, Any]:
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
    return data


@contextlib.asynccontextmanager
async def gateway(how: str, tmp_path: Path, prefix: str) -> AsyncIterator[str]:
    data = fair_config()
    if how == "one-process":
        async with running_gateway(data) as gw:
            yield f"http://127.0.0.1:{gw.http_port}"
        return
    data["storage"] |= {"sqlite_path": str(tmp_path / "gw.db"), "redis_url": REDIS_URL,
                        "redis_prefix": f"{prefix}{uuid.uuid4().hex[:6]}:"}  # fmt: skip
    gw = start_process("--config", str(write_config(tmp_path, data)), "--workers", "2")
    try:
        yield f"http://127.0.0.1:{gw.http_port}"
    finally:
        stop_process(gw)


@pytest.mark.parametrize("how", ["one-process", "two-workers-redis"])
async def test_a_flooding_key_waits_its_turn_and_another_key_is_not_held_behind_it(
    how: str, tmp_path: Path, redis_prefix: str
) -> None:
    async with gateway(how, tmp_path, redis_prefix) as base:
        flood = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key=FLOOD, max_retries=0)
        steady = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key=STEADY, max_retries=0)

        async def ask(client: openai.AsyncOpenAI) -> float:
            started = time.monotonic()
            await client.chat.completions.create(model="sim-mini", messages=HELLO, max_tokens=4)
            return time.monotonic() - started

        async def flood_waits() -> None:  # it fills both slots, and five more wait
            async with httpx.AsyncClient(base_url=base) as http:
                text = (await http.get("/metrics")).text
            found = re.search(r"^gateway_calls_waiting (\S+)$", text, re.M)
            assert found is not None and float(found.group(1)) >= 5

        async with flood, steady:
            flooding = [asyncio.create_task(ask(flood)) for _ in range(8)]
            await eventually(flood_waits, timeout_s=30)
            await ask(steady)
            # Seven flood calls or more were in before it: queued behind them, it would end
            # after them. It took a free slot before them instead: the next one, or on a
            # loaded machine (its call reaching the gateway a round late) the one after,
            # so no more than two rounds of two and the one beside it ended before it (and
            # on two workers one more, while its worker polled for a slot the other freed).
            flood_done_before = sum(task.done() for task in flooding)
            for _ in range(2):
                await ask(steady)
            flood_took = await asyncio.gather(*flooding)
    assert flood_done_before <= (5 if how == "one-process" else 6), flood_done_before
    # Eight flood calls through two slots, with the steady key's three among them: the last
    # waited three upstream calls or more.
    assert max(flood_took) >= 3.5 * TTFT_MS / 1000, flood_took
