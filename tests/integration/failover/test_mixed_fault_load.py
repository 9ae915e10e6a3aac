"""A mixed fault load over gRPC: thousands of requests, unary and streamed, against
fake upstreams of every wire format failing at random in every way the fault injector
knows. Every request must end in a complete answer or a clear error: none lost, none
hung, no partial text passed off as finished.

The counts are printed: `pytest tests/integration/failover/test_mixed_fault_load.py -q -s`.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from typing import Any

import grpc
from gateway.v1 import chat_service_pb2 as chat

from tests.support.gateways import running_gateway
from tests.support.grpc_stubs import API, Stubs, details
from tests.support.upstreams.anthropic import AnthropicWire
from tests.support.upstreams.base import TEXT, Fault, serving
from tests.support.upstreams.config import model, provider, with_models
from tests.support.upstreams.openai import OpenAIWire
from tests.support.upstreams.tgi import TgiWire

REQUESTS = 3000
CONCURRENCY = 50
WHOLE = "".join(TEXT)
CLEAR_CODES = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}

# Each upstream answers each request with one of these, at these weights.
FAULT_MIX: list[tuple[Fault, int]] = [
    (Fault(), 70),
    (Fault("status", 500), 6),
    (Fault("status", 503), 2),
    (Fault("status", 429, retry_after="1"), 4),
    (Fault("cut", after_tokens=0), 3),
    (Fault("cut", after_tokens=2), 4),
    (Fault("abort", after_tokens=2), 3),
    (Fault("malformed", after_tokens=1), 3),
    (Fault("slow_body", delay_s=0.002), 2),
    (Fault("slow_headers", delay_s=0.5), 1),
    (Fault("hang"), 2),
]


def _picker(seed: int) -> Any:
    rng = random.Random(seed)
    faults, weights = zip(*FAULT_MIX, strict=True)
    return lambda: rng.choices(faults, weights)[0]


def _config(urls: dict[str, str]) -> dict[str, Any]:
    fast: dict[str, Any] = {
        "read_timeout_s": 0.2,
        "breaker": {"failure_threshold": 3, "cooldown_s": 0.2},
    }
    data = with_models(
        model(
            "mix-a",
            provider("a-openai", "openai", urls["openai"], **fast),
            provider("a-anthropic", "anthropic", urls["anthropic"], "backup", **fast),
            provider("a-tgi", "tgi", urls["tgi"], "backup", **fast),
        ),
        model(
            "mix-b",
            provider("b-tgi", "tgi", urls["tgi"], **fast),
            provider("b-openai", "openai", urls["openai"], "backup", **fast),
        ),
        model("mix-alone", provider("c-anthropic", "anthropic", urls["anthropic"], **fast)),
        request_timeout_s=2,
    )
    for key in data["keys"]:
        key.pop("requests_per_minute", None)
    return data


async def one(stubs: Stubs, rng: random.Random) -> str:
    """Runs one request; returns its outcome: `complete`, `error:<CODE>` or `bad:...`."""
    model_id = rng.choice(["mix-a", "mix-a", "mix-b", "mix-alone"])
    messages = [chat.ChatMessage(role="user", content="hi")]
    try:
        if rng.random() < 0.5:
            answer = await stubs.chat.CreateChatCompletion(
                chat.CreateChatCompletionRequest(model=model_id, messages=messages),
                metadata=API,
                timeout=30,  # the gateway's own deadline (2 s) answers first, loaded or not
            )
            choice = answer.choices[0]
            if choice.message.content == WHOLE and choice.finish_reason == "stop":
                return "complete"
            return f"bad:unary {choice.finish_reason} {choice.message.content!r}"
        chunks = [
            c
            async for c in stubs.chat.StreamChatCompletion(
                chat.StreamChatCompletionRequest(model=model_id, messages=messages),
                metadata=API,
                timeout=30,
            )
        ]
        text = "".join(c.choices[0].delta.content for c in chunks)
        finish = chunks[-1].choices[0].finish_reason
        if text == WHOLE and finish == "stop":
            return "complete"
        return f"bad:stream ended {finish!r} with {text!r}"
    except grpc.aio.AioRpcError as exc:
        reason = details(exc)["ErrorInfo"].reason  # type: ignore[attr-defined]
        if exc.code() in CLEAR_CODES and exc.details() and reason:
            return f"error:{exc.code().name}"
        return f"bad:{exc.code().name} {exc.details()}"


async def test_mixed_fault_load_loses_nothing():
    async with (
        serving(OpenAIWire(), pick=_picker(1)) as openai,
        serving(AnthropicWire(), pick=_picker(2)) as anthropic,
        serving(TgiWire(), pick=_picker(3)) as tgi,
    ):
        urls = {"openai": openai.url, "anthropic": anthropic.url, "tgi": tgi.url}
        async with (
            running_gateway(_config(urls)) as running,
            grpc.aio.insecure_channel(f"127.0.0.1:{running.grpc_port}") as channel,
        ):
            stubs = Stubs(channel)
            rng = random.Random(7)
            outcomes: Counter[str] = Counter()
            pending = iter(range(REQUESTS))

            async def worker() -> None:
                for _ in pending:
                    try:
                        outcome = await asyncio.wait_for(one(stubs, rng), timeout=60)
                    except TimeoutError:
                        outcome = "hung"
                    outcomes[outcome] += 1

            started = time.perf_counter()
            await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
            took = time.perf_counter() - started
    complete = outcomes["complete"]
    errors = sum(n for o, n in outcomes.items() if o.startswith("error:"))
    print(
        f"\nmixed fault load: {REQUESTS} requests, concurrency {CONCURRENCY}, {took:.1f}s: "
        f"{complete} complete, {errors} clear errors "
        f"({', '.join(f'{o}={n}' for o, n in sorted(outcomes.items()) if o.startswith('error'))}), "
        f"{outcomes['hung']} hung, "
        f"{sum(n for o, n in outcomes.items() if o.startswith('bad'))} bad"
    )
    bad = {o: n for o, n in outcomes.items() if o.startswith("bad") or o == "hung"}
    assert bad == {}
    assert complete + errors == REQUESTS, "every request accounted for"
    assert complete > REQUESTS * 0.6 and errors > 0
