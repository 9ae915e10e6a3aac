"""What the operability middlewares cost per call, in CPU time, in one process: the
same unary and streaming calls through the RPC table with accounting only, then with
the observer (metrics, request log line, dashboard feed) and, last, with tracing on
(spans into an in-memory exporter). CPU time (time.process_time) is used so that other
work on a shared machine does not blur the figures.

Run: python -m bench.ops_cost [--calls N] [--rounds R]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import logging
import time

from gateway.v1 import chat_service_pb2 as chat

from server.accounting.accounts import Accounting
from server.application import rpcs
from server.base import config
from server.base.call import Call
from server.base.pipeline import RpcMethod
from server.cli.serve import Gateway, open_gateway
from server.ops import requestlog, tracing
from tests.support.gateways import API_KEY, default_config_dict

UNARY = "/gateway.v1.ChatService/CreateChatCompletion"
STREAM = "/gateway.v1.ChatService/StreamChatCompletion"
MESSAGES = [chat.ChatMessage(role="user", content="hello")]


async def per_call_us(table: dict[str, RpcMethod], calls: int) -> tuple[float, float]:
    unary, stream = table[UNARY], table[STREAM]
    meta = {"x-api-key": API_KEY}

    async def one_unary() -> None:
        await unary.unary(
            chat.CreateChatCompletionRequest(model="sim-mini", messages=MESSAGES), Call(meta)
        )

    async def one_stream() -> None:
        request = chat.StreamChatCompletionRequest(model="sim-mini", messages=MESSAGES)
        async for _ in stream.stream(request, Call(meta)):
            pass

    out = []
    for work in (one_unary, one_stream):
        for _ in range(50):
            await work()  # warm up
        started = time.process_time()
        for _ in range(calls):
            await work()
        out.append((time.process_time() - started) / calls * 1e6)
    return out[0], out[1]


async def build(cfg: config.Config, observed: bool) -> tuple[Gateway, dict[str, RpcMethod]]:
    """The gateway's own table (tracing, observer, accounting), or accounting alone."""
    gateway = await open_gateway(cfg)
    if observed:
        return gateway, gateway.table
    return gateway, rpcs.table(gateway.services, [Accounting(gateway.accounts)])


async def main(calls: int, rounds: int) -> None:
    data = default_config_dict()
    data["routing"]["policy"] = "ordered"
    for key in data["keys"]:
        key.pop("requests_per_minute", None)
    cfg = config.parse(data, "bench")
    requestlog.install(io.StringIO())  # the line is built and written, to memory
    logging.getLogger("server").setLevel(logging.WARNING)
    # Rounds alternate between the set-ups and each keeps its best round, so a burst of
    # other work on the machine does not land on one set-up only.
    names = ["accounting only", "+ observer (metrics, log line, dashboard feed)"]
    built = [await build(cfg, False), await build(cfg, True)]
    best: dict[str, list[float]] = {}
    for _ in range(rounds):
        for name, (_, table) in zip(names, built, strict=True):
            figures = await per_call_us(table, calls)
            best[name] = [min(a, b) for a, b in zip(best.get(name, figures), figures, strict=True)]
    for gateway, _ in built:
        await gateway.aclose()
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    tracing.enable(provider)
    gateway, table = await build(cfg, True)
    name = "+ tracing (in-memory exporter)"
    for _ in range(rounds):
        figures = await per_call_us(table, calls)
        best[name] = [min(a, b) for a, b in zip(best.get(name, figures), figures, strict=True)]
    await gateway.aclose()
    tracing.enable(None)
    print(f"CPU time per call, best of {rounds} rounds of {calls} calls (sim-mini, instant)\n")
    print("| middlewares | unary µs | stream µs |")
    print("|---|---|---|")
    for name, (unary, stream) in best.items():
        print(f"| {name} | {unary:.0f} | {stream:.0f} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(main(args.calls, args.rounds))
