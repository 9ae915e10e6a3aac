"""Concurrency caps (`traffic.*.max_in_flight`): calls and open streams of a key or a
model past the cap are refused with CONCURRENCY_LIMITED naming the level, across the
workers of one gateway (the parent's shared state) and across two instances on Redis;
a stream that ends gives its slot back, and the in-flight count is a metric."""

from __future__ import annotations

import asyncio
import contextlib
import re
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
from tests.support.shared_state import ADMIN_KEY, REDIS_URL

KEY = "gw-caps-api-key-000000000001"
OTHER = "gw-caps-api-key-000000000002"
HELLO = [{"role": "user", "content": "hello"}]


def capped_config(**traffic: Any) -> dict[str, Any]:
    """Two API keys; sim-mini and sim-standard stream slowly (20 tokens a second), so a
    stream of 400 tokens stays open for the whole test."""
    data = default_config_dict()
    for model in data["models"]:
        for provider in model["providers"]:
            provider["params"] = {"ttft_ms": 0, "tokens_per_second": 20}
    data["keys"] += [
        {"name": "caps", "kind": "api", "secret": KEY},
        {"name": "other", "kind": "api", "secret": OTHER},
        {"name": "test-admin", "kind": "admin", "secret": ADMIN_KEY},
    ]
    data["traffic"] = traffic
    data["operations"] = {"request_log": False}
    return data


def in_flight(metrics: str, level: str, name: str) -> float | None:
    pattern = rf'gateway_in_flight_by_level{{level="{level}",name="{name}"}} (\S+)'
    found = re.search(pattern, metrics)
    return float(found.group(1)) if found else None


async def open_stream(sdk: openai.AsyncOpenAI, model: str = "sim-mini") -> Any:
    """A streamed chat completion, open and past its first chunk."""
    stream = await sdk.chat.completions.create(
        model=model,
        messages=HELLO,
        max_tokens=400,
        stream=True,  # type: ignore[arg-type]
    )
    await stream.__anext__()
    return stream


async def test_a_key_and_a_model_past_their_caps_are_refused_naming_the_level() -> None:
    data = capped_config(keys={"caps": {"max_in_flight": 2}},
                         models={"sim-standard": {"max_in_flight": 1}})  # fmt: skip
    async with running_gateway(data) as gw:
        base = f"http://127.0.0.1:{gw.http_port}"
        sdk = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key=KEY, max_retries=0)
        other = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key=OTHER, max_retries=0)
        async with sdk, other, httpx.AsyncClient(base_url=base) as http:
            first, second = await open_stream(sdk), await open_stream(sdk)
            with pytest.raises(openai.RateLimitError) as refused:
                await sdk.chat.completions.create(model="sim-mini", messages=HELLO,  # type: ignore[arg-type]
                                                  max_tokens=5)  # fmt: skip
            assert refused.value.status_code == 429
            assert "key 'caps' has 2 calls in flight" in refused.value.message
            assert refused.value.response.headers["retry-after"] == "1"
            assert refused.value.response.json()["error"]["code"] == "concurrency_limited"
            assert in_flight((await http.get("/metrics")).text, "key", "caps") == 2
            # The admin API shows each rule with its calls in flight.
            state = await http.get("/v1/admin/traffic", headers={"x-admin-key": ADMIN_KEY})
            levels = {(lv["level"], lv["name"]): lv for lv in state.json()["levels"]}
            assert levels[("key", "caps")]["in_flight"] == 2
            assert levels[("key", "caps")]["max_in_flight"] == 2
            assert levels[("model", "sim-standard")].get("in_flight", 0) == 0
            # Another key is not held back by this one's cap.
            answer = await other.chat.completions.create(model="sim-mini", messages=HELLO,  # type: ignore[arg-type]
                                                         max_tokens=5)  # fmt: skip
            assert answer.choices[0].message.content

            # A stream the caller closes gives its slot back.
            await first.close()

            async def one_left() -> None:
                assert in_flight((await http.get("/metrics")).text, "key", "caps") == 1

            await eventually(one_left, timeout_s=10)
            answer = await sdk.chat.completions.create(model="sim-mini", messages=HELLO,  # type: ignore[arg-type]
                                                       max_tokens=5)  # fmt: skip
            assert answer.choices[0].message.content
            await second.close()

            # The model's cap holds whichever key calls.
            held = await open_stream(other, "sim-standard")
            with pytest.raises(openai.RateLimitError) as refused:
                await sdk.chat.completions.create(model="sim-standard", messages=HELLO,  # type: ignore[arg-type]
                                                  max_tokens=5)  # fmt: skip
            assert "model 'sim-standard' has 1 calls in flight" in refused.value.message
            await held.close()


@contextlib.asynccontextmanager
async def gateways(tmp_path: Path, data: dict[str, Any], how: str, prefix: str) -> Any:
    """The base URLs of two workers of one gateway (`workers`) or of two gateways on
    one Redis (`redis`)."""
    if how == "workers":
        data["storage"]["sqlite_path"] = str(tmp_path / "gw.db")
        gw = start_process("--config", str(write_config(tmp_path, data)), "--workers", "2")
        try:
            yield [f"http://127.0.0.1:{gw.http_port}"] * 2
        finally:
            stop_process(gw)
        return
    data["storage"] |= {"redis_url": REDIS_URL, "redis_prefix": prefix}
    processes = []
    try:
        for i in range(2):
            folder = tmp_path / f"gw{i}"
            folder.mkdir()
            data["storage"]["sqlite_path"] = str(folder / "gw.db")
            processes.append(start_process("--config", str(write_config(folder, data))))
        yield [f"http://127.0.0.1:{gw.http_port}" for gw in processes]
    finally:
        for gw in processes:
            stop_process(gw)


@pytest.mark.parametrize("how", ["workers", "redis"])
async def test_the_cap_holds_across_workers_and_instances(
    tmp_path: Path, how: str, redis_prefix: str
) -> None:
    data = capped_config(keys={"caps": {"max_in_flight": 3}})
    async with gateways(tmp_path, data, how, f"{redis_prefix}{how}:") as bases:
        clients = [
            openai.AsyncOpenAI(base_url=f"{base}/v1", api_key=KEY, max_retries=0) for base in bases
        ]

        async def attempt(i: int) -> Any:
            try:
                return await open_stream(clients[i % 2])
            except openai.RateLimitError as exc:
                return exc

        # Six streams at once, split between the two: three open, three refused.
        results = await asyncio.gather(*(attempt(i) for i in range(6)))
        refused = [r for r in results if isinstance(r, openai.RateLimitError)]
        opened = [r for r in results if not isinstance(r, openai.RateLimitError)]
        assert len(opened) == 3 and len(refused) == 3
        assert {r.response.json()["error"]["code"] for r in refused} == {"concurrency_limited"}
        for stream in opened:
            await stream.close()

        async def room_again() -> None:  # the slots come back on both
            streams = []
            try:
                for client in (*clients, clients[0]):  # the whole cap, on both
                    streams.append(await open_stream(client))
            except openai.RateLimitError as exc:
                raise AssertionError(f"still held: {exc}") from exc
            finally:
                for stream in streams:
                    await stream.close()

        await eventually(room_again, timeout_s=15)
        for client in clients:
            await client.close()
