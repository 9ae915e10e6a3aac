"""The least a chat completion proxy on the gateway's stack can cost: uvicorn (the
facade's HTTP server, on uvloop) and the gateway's upstream client, with nothing
between them but reading the body's JSON to find the model and whether it streams.

No key, no limits, no ledger, no metrics, no contract messages: each request is sent as
it came to the upstream (`--upstream`, the base URL under which `/unary` and `/stream`
answer, as bench/load_servers.py's nginx does) and the answer goes back as it came,
a stream chunk by chunk. `bench.load` loads it beside the gateway, so that LiteLLM's CPU
over this floor's is the most any gateway built this way could show against it.

    python -m bench.proxy_floor --port P --upstream http://127.0.0.1:U
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import orjson
import uvicorn

from server.cli.serving import event_loop
from server.providers.http import Client, HttpParams

JSON = [(b"content-type", b"application/json")]
SSE = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]


def proxy(upstream: str) -> Any:
    clients = {
        mode: Client(HttpParams(base_url=f"{upstream}/{mode}/v1", model="bench"), {})
        for mode in ("unary", "stream")
    }

    async def app(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        stream = orjson.loads(body).get("stream") is True
        client = clients["stream" if stream else "unary"]
        async with client.stream("POST", "/chat/completions", content=body) as answer:
            if not stream:
                data = b"".join([chunk async for chunk in answer.aiter_bytes()])
                await send({"type": "http.response.start", "status": 200, "headers": JSON})
                await send({"type": "http.response.body", "body": data})
                return
            await send({"type": "http.response.start", "status": 200, "headers": SSE})
            async for chunk in answer.aiter_bytes():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True)
    args = parser.parse_args()
    config = uvicorn.Config(
        proxy(args.upstream), host="127.0.0.1", port=args.port, http="httptools",
        log_level="warning", access_log=False, lifespan="off", loop="none",
    )  # fmt: skip
    with asyncio.Runner(loop_factory=event_loop()) as runner:
        runner.run(uvicorn.Server(config).serve())


if __name__ == "__main__":
    main()
