"""How fast a caller's cancel reaches the upstream: the time from a client cancelling
a stream (a gRPC cancel, or a REST client closing its connection) to the fake upstream
seeing its connection closed.

Two moments are measured: mid-stream (after a few tokens of a slow stream) and before
the first token (the upstream hangs). Gateway, fake upstream and client share one
process and one clock (time.perf_counter). Writes bench/results/cancel_latency.md.

Run: python -m bench.cancel_latency [--runs N]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import grpc
import httpx
from gateway.v1 import chat_service_pb2 as chat
from gateway.v1 import chat_service_pb2_grpc

from tests.support.gateways import API_KEY, running_gateway
from tests.support.upstreams.base import FakeUpstream, Fault, serving
from tests.support.upstreams.config import model, provider, with_models
from tests.support.upstreams.openai import OpenAIWire

RESULTS = Path(__file__).resolve().parent / "results" / "cancel_latency.md"
LONG_REPLY = tuple(f" word{i}" for i in range(400))


async def until(predicate: Callable[[], bool], what: str, timeout_s: float = 5) -> None:
    """Polls `predicate` every half millisecond."""
    for _ in range(int(timeout_s / 0.0005)):
        if predicate():
            return
        await asyncio.sleep(0.0005)
    raise TimeoutError(what)


async def cancel_once(
    stub: chat_service_pb2_grpc.ChatServiceStub, fake: FakeUpstream, after_chunks: int
) -> float:
    """Starts a stream, cancels it after `after_chunks` chunks (0: while the upstream
    holds the request, before the first token) and returns the seconds until the
    upstream saw its connection closed."""
    closed, asked = len(fake.disconnects), len(fake.seen)
    call = stub.StreamChatCompletion(
        chat.StreamChatCompletionRequest(
            model="slow", messages=[chat.ChatMessage(role="user", content="hi")]
        ),
        metadata=(("x-api-key", API_KEY),),
        timeout=10,
    )
    if after_chunks:
        received = 0
        async for _ in call:
            received += 1
            if received > after_chunks:  # the role chunk, then content
                break
    else:
        await until(lambda: len(fake.seen) > asked, "the upstream never got the request")
        await asyncio.sleep(0.02)
    cancelled_at = time.perf_counter()
    call.cancel()
    await until(lambda: len(fake.disconnects) > closed, "the upstream never saw the cancel")
    return fake.disconnects[-1] - cancelled_at


async def disconnect_once(
    client: httpx.AsyncClient, fake: FakeUpstream, after_events: int
) -> float:
    """The REST twin of cancel_once: the client drops its connection."""
    closed, asked = len(fake.disconnects), len(fake.seen)
    body = {"model": "slow", "stream": True, "messages": [{"role": "user", "content": "hi"}]}

    async def read() -> None:
        async with client.stream("POST", "/v1/chat/completions", json=body) as response:
            received = 0
            async for line in response.aiter_lines():
                received += line.startswith("data: ")
                if received > after_events:
                    return

    if after_events:
        await read()  # leaving the unfinished response closes its connection
        cancelled_at = time.perf_counter()
    else:
        task = asyncio.create_task(read())
        await until(lambda: len(fake.seen) > asked, "the upstream never got the request")
        await asyncio.sleep(0.02)
        cancelled_at = time.perf_counter()
        task.cancel()
    await until(lambda: len(fake.disconnects) > closed, "the upstream never saw the disconnect")
    return fake.disconnects[-1] - cancelled_at


async def measure(runs: int) -> dict[str, list[float]]:
    """Seconds from cancel to upstream close, per scenario."""
    async with serving(OpenAIWire(), text=LONG_REPLY) as fake:
        data = with_models(
            model("slow", provider("slow-1", "openai", fake.url, read_timeout_s=30)),
            request_timeout_s=30,
        )
        async with (
            running_gateway(data) as running,
            grpc.aio.insecure_channel(f"127.0.0.1:{running.grpc_port}") as channel,
            httpx.AsyncClient(
                base_url=f"http://127.0.0.1:{running.http_port}",
                headers={"x-api-key": API_KEY},
                timeout=10,
            ) as client,
        ):
            stub = chat_service_pb2_grpc.ChatServiceStub(channel)
            results: dict[str, list[float]] = {}
            for when, fault, after in (
                ("mid-stream", Fault("slow_body", delay_s=0.01), 3),
                ("before first token", Fault("hang"), 0),
            ):
                fake.default = fault
                grpc_runs = [await cancel_once(stub, fake, after) for _ in range(runs)]
                rest_runs = [await disconnect_once(client, fake, after) for _ in range(runs)]
                results[f"gRPC cancel, {when}"] = grpc_runs
                results[f"REST disconnect, {when}"] = rest_runs
            return results


def table(results: dict[str, list[float]]) -> str:
    lines = [
        "| caller goes away | runs | median ms | p95 ms | max ms |",
        "|---|---|---|---|---|",
    ]
    for name, values in results.items():
        ms = sorted(v * 1000 for v in values)
        p95 = ms[min(len(ms) - 1, int(len(ms) * 0.95))]
        lines.append(
            f"| {name} | {len(ms)} | {statistics.median(ms):.2f} | {p95:.2f} | {ms[-1]:.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    results = asyncio.run(measure(args.runs))
    text = (
        "# Cancellation latency\n\n"
        "Time from a caller going away mid-request (a gRPC cancel; a REST client closing "
        "its connection) to the upstream (a fake OpenAI-compatible server on loopback) "
        "seeing its connection closed. One process, one clock.\n"
        "Command: `python -m bench.cancel_latency --runs "
        f"{args.runs}`\n\n{table(results)}\n"
    )
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
