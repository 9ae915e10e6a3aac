"""Waiting instead of refusing (`traffic.*.max_wait_s`), through the openai SDK with its
retries off: a call the rate limit would refuse waits for the bucket's next slot, in
order, and is served; the wait is in the ledger (`queue_ms`, part of `latency_ms`); a
line that is full, or a wait longer than `max_wait_s`, is a 429 at once with an honest
Retry-After; a caller that goes away leaves the line."""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

import httpx
import openai
import pytest

from tests.support.gateways import default_config_dict, eventually, running_gateway
from tests.support.upstreams.base import Fault, serving
from tests.support.upstreams.config import model, provider
from tests.support.upstreams.openai import OpenAIWire

PATIENT = "gw-patient-api-key-0000001"
IMPATIENT = "gw-patient-api-key-0000002"
SLOW = "gw-patient-api-key-0000003"
HASTY = "gw-patient-api-key-0000004"
HELLO: Any = [{"role": "user", "content": "hello"}]
# A bucket of two requests refilled over two seconds: a slot every second.
WINDOW_S = 2
# The same bucket refilled over six seconds, for the test that must see two calls waiting
# at once: a loaded machine may take most of a second to send the second.
PATIENT_WINDOW_S = 6


def waiting_config(window_s: float = WINDOW_S) -> dict[str, Any]:
    data = default_config_dict()
    data["limits"] = {"window_s": window_s}
    data["keys"] += [
        {"name": "patient", "kind": "api", "secret": PATIENT, "requests_per_minute": 2},
        {"name": "impatient", "kind": "api", "secret": IMPATIENT, "requests_per_minute": 2},
        # One request per window of two seconds: a wait of two seconds for the next.
        {"name": "slow", "kind": "api", "secret": SLOW, "requests_per_minute": 1},
        {"name": "hasty", "kind": "api", "secret": HASTY, "requests_per_minute": 1},
    ]
    data["traffic"] = {"keys": {
        # Long enough for the second slot out (a whole window away) at any pace.
        "patient": {"max_wait_s": 2 * window_s, "max_waiting": 2},
        "slow": {"max_wait_s": 1.5},
        "hasty": {"max_wait_s": 5},
    }}  # fmt: skip
    data["operations"] = {"request_log": False}
    return data


def sdk(base: str, key: str, timeout: float = 30) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0, timeout=timeout)


async def ask(client: openai.AsyncOpenAI) -> float:
    """Sends one call; the time it ended."""
    await client.chat.completions.create(model="sim-mini", messages=HELLO, max_tokens=5)
    return time.monotonic()


def waiting(metrics: str) -> float:
    found = re.search(r"^gateway_calls_waiting (\S+)$", metrics, re.M)
    return float(found.group(1)) if found else 0.0


@pytest.fixture
async def base_and_store() -> Any:
    async with running_gateway(waiting_config()) as gw:
        yield f"http://127.0.0.1:{gw.http_port}", gw.gateway


@pytest.fixture
async def patient_gateway() -> Any:
    async with running_gateway(waiting_config(PATIENT_WINDOW_S)) as gw:
        yield f"http://127.0.0.1:{gw.http_port}", gw.gateway


async def test_the_sdk_waits_out_the_limit_in_order_and_the_ledger_counts_the_wait(
    patient_gateway: Any,
) -> None:
    base, gateway = patient_gateway
    async with sdk(base, PATIENT) as patient, sdk(base, IMPATIENT) as impatient:
        for client in (patient, impatient):  # both buckets spent
            await ask(client)
            await ask(client)
        # Without max_wait_s: refused at once, as before.
        with pytest.raises(openai.RateLimitError):
            await ask(impatient)
        # With it: the two next calls wait for the next two slots, first come first served.
        started = time.monotonic()
        first = asyncio.create_task(ask(patient))
        await eventually(_waiting_is(base, 1), timeout_s=5)
        second = asyncio.create_task(ask(patient))
        await eventually(_waiting_is(base, 2), timeout_s=5)
        # The line (max_waiting 2) is full: a third is refused at once, while they wait.
        with pytest.raises(openai.RateLimitError) as refused:
            await ask(patient)
        assert not first.done() and not second.done()
        assert int(refused.value.response.headers["retry-after"]) >= 1
        ended = await asyncio.gather(first, second)
    assert ended[0] <= ended[1]  # in order
    assert ended[1] - started >= 0.9 * PATIENT_WINDOW_S / 2  # the second slot is a slot away

    await gateway.accounts.ledger.flush()
    rows = await gateway.store.db.fetch(
        "SELECT queue_ms, latency_ms, status FROM usage_records WHERE key_name = 'patient' "
        "ORDER BY ts"
    )
    queued = [r["queue_ms"] for r in rows if r["status"] == "OK"]
    assert queued[:2] == [0, 0] and 0 < queued[2] <= queued[3]
    assert all(r["latency_ms"] >= r["queue_ms"] for r in rows)


def _waiting_is(base: str, count: int) -> Any:
    async def check() -> None:
        async with httpx.AsyncClient(base_url=base) as http:
            assert waiting((await http.get("/metrics")).text) == count

    return check


async def test_a_wait_past_max_wait_s_is_refused_at_once_and_a_caller_gone_leaves_the_line(
    base_and_store: Any,
) -> None:
    base, _ = base_and_store
    async with sdk(base, SLOW) as slow, sdk(base, HASTY, timeout=0.3) as hasty:
        await ask(slow)
        # The next slot is two seconds away, past max_wait_s (1.5): refused at once, and
        # told the real wait.
        started = time.monotonic()
        with pytest.raises(openai.RateLimitError) as refused:
            await ask(slow)
        assert time.monotonic() - started < 1.0
        assert refused.value.response.headers["retry-after"] == "2"
        assert 1000 < int(refused.value.response.headers["retry-after-ms"]) <= 2000
        # A caller that waits (its next slot two seconds away, within its max_wait_s)
        # but gives up after 0.3 s leaves the line then, not at its slot.
        await ask(hasty)
        started = time.monotonic()
        with pytest.raises(openai.APITimeoutError):
            await ask(hasty)
        await eventually(_waiting_is(base, 0), timeout_s=1)
        assert time.monotonic() - started < 1.9


async def test_the_sdk_waits_out_an_upstreams_429_when_the_model_may_wait() -> None:
    async with serving(OpenAIWire()) as upstream:
        data = waiting_config()
        no_trip = {"failure_threshold": 1000}
        data["models"] += [
            model("busy", provider("busy-up", "openai", upstream.url, breaker=no_trip)),
            model("busy-now", provider("busy-now-up", "openai", upstream.url, breaker=no_trip)),
        ]
        data["traffic"]["models"] = {"busy": {"max_wait_s": 5}}
        async with running_gateway(data) as gw, sdk(f"http://127.0.0.1:{gw.http_port}",
                                                     IMPATIENT) as client:  # fmt: skip
            # Busy once, then free: the call waits the upstream's Retry-After and is served.
            upstream.faults = [Fault("status", 429, retry_after="1")]
            asked = len(upstream.seen)
            started = time.monotonic()
            raw = await client.chat.completions.with_raw_response.create(
                model="busy", messages=HELLO
            )
            assert raw.parse().choices[0].message.content
            assert int(raw.headers["x-gateway-queue-ms"]) >= 900
            assert time.monotonic() - started >= 0.9 and len(upstream.seen) - asked == 2
            # A model without max_wait_s: the upstream's 429 comes back at once.
            upstream.faults = [Fault("status", 429, retry_after="1")]
            with pytest.raises(openai.APIStatusError) as refused:
                await client.chat.completions.create(model="busy-now", messages=HELLO)
            assert refused.value.response.headers["retry-after"] == "1"
            await gw.gateway.accounts.ledger.flush()
            rows = await gw.gateway.store.db.fetch(
                "SELECT queue_ms FROM usage_records WHERE model = 'busy' AND status = 'OK'"
            )
    assert [r["queue_ms"] >= 900 for r in rows] == [True]
