"""CPU per rerank of 100 documents and per transcription of a 1 MB file against a chat
call's, in one process, through the
gateway's own RPC table (every middleware: tracing hook, observer, accounting, and the
ledger row): the transport-neutral work each call costs, without HTTP or JSON. The
simulated providers answer at once (no pacing), so the figures are the gateway's own
(but for the simulated transcript's hash of the file, about a millisecond a megabyte).
CPU time (time.process_time) keeps other work on a shared machine out of them.

Run: python -m bench.operations_cpu [--calls N] [--rounds R]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import logging
import time
from collections.abc import Awaitable, Callable

from gateway.v1 import audio_service_pb2 as audio
from gateway.v1 import chat_service_pb2 as chat
from gateway.v1 import rerank_service_pb2 as rerank
from google.protobuf import struct_pb2

from server.base import config
from server.base.call import Call
from server.cli.serve import open_gateway
from server.ops import requestlog
from server.providers.simulated_audio import wav
from tests.support.gateways import API_KEY, default_config_dict

CHAT = "/gateway.v1.ChatService/CreateChatCompletion"
RERANK = "/gateway.v1.RerankService/RerankDocuments"
TRANSCRIBE = "/gateway.v1.AudioService/CreateTranscription"
# A passage of about 60 words, made distinct per document.
PASSAGE = (
    "The capital city hosts the national parliament, the supreme court and most of the "
    "ministries; its museums draw millions of visitors each year, and its river port, "
    "once the busiest in the region, now serves mostly pleasure boats and ferries that "
    "cross to the old town on the far bank, where the market has been held since the "
    "twelfth century. Document number {i}."
)


async def main(calls: int, rounds: int) -> None:
    data = default_config_dict()
    for model in data["models"]:
        for provider in model["providers"]:
            provider["params"] |= {"ttft_ms": 0, "tokens_per_second": 0}
    for key in data["keys"]:
        key.pop("requests_per_minute", None)
    data.pop("response_cache", None)
    cfg = config.parse(data, "bench")
    requestlog.install(io.StringIO())
    logging.getLogger("server").setLevel(logging.WARNING)
    gateway = await open_gateway(cfg)
    table = gateway.table
    meta = {"x-api-key": API_KEY}
    documents = [struct_pb2.Value(string_value=PASSAGE.format(i=i)) for i in range(100)]

    async def one_chat() -> None:
        request = chat.CreateChatCompletionRequest(
            model="sim-mini",
            messages=[chat.ChatMessage(role="user", content="What is the capital of France?")],
        )
        await table[CHAT].unary(request, Call(meta))

    async def one_rerank() -> None:
        request = rerank.RerankDocumentsRequest(
            model="sim-rerank", query="Which city hosts the parliament?", documents=documents,
            top_n=10, return_documents=True,
        )  # fmt: skip
        await table[RERANK].unary(request, Call(meta))

    megabyte = wav(bytes(1 << 20))

    async def one_transcription() -> None:
        request = audio.CreateTranscriptionRequest(model="sim-audio", file=megabyte)
        await table[TRANSCRIBE].unary(request, Call(meta))

    works: dict[str, Callable[[], Awaitable[None]]] = {
        "chat completion (sim-mini, unary)": one_chat,
        "rerank of 100 documents (sim-rerank, top_n 10)": one_rerank,
        "transcription of a 1 MB WAV (sim-audio, json)": one_transcription,
    }
    best: dict[str, float] = {}
    for _ in range(rounds):
        for name, work in works.items():
            for _ in range(20):
                await work()  # warm up
            started = time.process_time()
            for _ in range(calls):
                await work()
            spent = (time.process_time() - started) / calls * 1e6
            best[name] = min(best.get(name, spent), spent)
    await gateway.aclose()
    print(f"CPU time per call, best of {rounds} rounds of {calls} calls\n")
    print("| call | CPU µs |")
    print("|---|---|")
    for name, us in best.items():
        print(f"| {name} | {us:.0f} |")
    chat_us, rerank_us, transcribe_us = best.values()
    print(f"\nrerank / chat: {rerank_us / chat_us:.2f}")
    print(f"transcription / chat: {transcribe_us / chat_us:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(main(args.calls, args.rounds))
