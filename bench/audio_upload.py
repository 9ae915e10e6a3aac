"""What a transcription upload costs the REST facade in process: CPU per call of a
1 MB file sent as OpenAI's multipart form (read, joined, transcribed by the simulated
provider, answered) against a chat call's over the same facade, and the memory the
gateway holds per upload in flight (tracemalloc's peak over one call, less the body the
client already holds), in multiples of the file's size. tracemalloc sees Python's
objects only: the request message's own copy of the file (protobuf's arena) is not in
the figure.

Run: python -m bench.audio_upload [--calls N] [--megabytes M]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import logging
import time
import tracemalloc

import httpx

from http_facade.app import create_app
from server.base import config
from server.cli.serve import open_gateway
from server.ops import requestlog
from server.providers.simulated_audio import wav
from tests.support.gateways import API_KEY, default_config_dict

BOUNDARY = "bench-boundary"


def form(audio: bytes) -> bytes:
    head = (f'--{BOUNDARY}\r\ncontent-disposition: form-data; name="model"\r\n\r\nsim-audio\r\n'
            f'--{BOUNDARY}\r\ncontent-disposition: form-data; name="file"; filename="a.wav"'
            "\r\n\r\n").encode()  # fmt: skip
    return head + audio + f"\r\n--{BOUNDARY}--\r\n".encode()


async def main(calls: int, megabytes: int) -> None:
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
    app = create_app(cfg.server, table=gateway.table)
    headers = {"x-api-key": API_KEY, "content-type": f"multipart/form-data; boundary={BOUNDARY}"}
    chat = {"model": "sim-mini", "messages": [{"role": "user", "content": "Capital of France?"}]}
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://bench") as c:

        async def one_chat() -> None:
            got = await c.post("/v1/chat/completions", json=chat, headers={"x-api-key": API_KEY})
            assert got.status_code == 200, got.text

        one_mb = form(wav(bytes(1 << 20)))

        async def one_transcription(body: bytes = one_mb) -> None:
            got = await c.post("/v1/audio/transcriptions", content=body, headers=headers)
            assert got.status_code == 200, got.text

        spent = {}
        for name, work in (("chat completion (sim-mini)", one_chat),
                           ("transcription of a 1 MB WAV (sim-audio)", one_transcription)):  # fmt: skip
            for _ in range(10):
                await work()
            started = time.process_time()
            for _ in range(calls):
                await work()
            spent[name] = (time.process_time() - started) / calls * 1e6
        big = form(wav(bytes(megabytes << 20)))
        await one_transcription(big)
        tracemalloc.start()
        baseline = tracemalloc.get_traced_memory()[0]
        await one_transcription(big)
        peak = tracemalloc.get_traced_memory()[1] - baseline
        tracemalloc.stop()
    await gateway.aclose()
    print(f"CPU per call over the REST facade in process, mean of {calls} calls\n")
    print("| call | CPU µs |\n|---|---|")
    for name, us in spent.items():
        print(f"| {name} | {us:.0f} |")
    chat_us, transcribe_us = spent.values()
    print(f"\ntranscription / chat: {transcribe_us / chat_us:.2f}")
    print(f"Python objects held per {megabytes} MB upload in flight: "
          f"{peak / (1 << 20):.1f} MB ({peak / len(big):.2f}x the file)")  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--megabytes", type=int, default=10)
    args = parser.parse_args()
    asyncio.run(main(args.calls, args.megabytes))
