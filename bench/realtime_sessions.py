"""WebSocket sessions on one gateway worker: memory per open idle session, and CPU per
event relayed over a socket against the same events over SSE.

The gateway runs as its own process (one worker) with `sim`, the embedded simulated
provider answering at once with 200 tokens. Reported:

- resident memory per idle session: N Realtime sessions (`GET /v1/realtime`) opened
  and held (each has had its `session.created`), the worker's RSS before and after;
- the worker's CPU per event written to the client: R responses one after another on
  one Responses WebSocket, on one Realtime session, and as R `POST /v1/responses`
  streams and R chat completion streams over SSE (one connection each way);
- the same for a Realtime session relayed to an upstream that serves the Realtime API
  (`rt`: a loopback upstream in this process answering each response.create with 200
  deltas at once), and, with `--idle rt`, the memory per idle relayed session (each
  holding its upstream's socket too) in place of a served one's.

    python -m bench.realtime_sessions                 # 1000 sessions, 50 responses
    python -m bench.realtime_sessions --sessions 2000 --responses 100
    python -m bench.realtime_sessions --no-deflate    # clients without permessage-deflate
    python -m bench.realtime_sessions --idle rt       # idle sessions relayed upstream
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import websockets
import yaml

from bench.perf import KEY, cpu_s, free_port, wait_port

ROOT = Path(__file__).resolve().parent.parent


# The loopback Realtime upstream's key, given to the gateway in its environment.
UPSTREAM_KEY_ENV = "BENCH_REALTIME_UPSTREAM_KEY"
DELTAS = 200


async def realtime_upstream(ws: Any) -> None:
    """A Realtime upstream: session.created, then each response.create answered with
    DELTAS text deltas and response.done at once."""
    await ws.send(json.dumps({"type": "session.created", "session": {"model": "up"}}))
    count = 0
    async for message in ws:
        if json.loads(message).get("type") != "response.create":
            continue
        count += 1
        at = {"response_id": f"r{count}", "item_id": f"i{count}", "output_index": 0,
              "content_index": 0}  # fmt: skip
        frames = [json.dumps({"type": "response.created", "response": {"id": f"r{count}"}})]
        frames += [json.dumps({"type": "response.output_text.delta", **at, "delta": " word"})
                   for _ in range(DELTAS)]  # fmt: skip
        usage = {"input_tokens": 10, "output_tokens": DELTAS, "total_tokens": 10 + DELTAS}
        frames.append(json.dumps({"type": "response.done", "response": {
            "id": f"r{count}", "status": "completed", "usage": usage}}))  # fmt: skip
        for frame in frames:
            await ws.send(frame)


def start_gateway(
    tmp: Path, sessions: int, upstream_port: int
) -> tuple[subprocess.Popen[bytes], int]:
    simulated = {"id": "sim-1", "type": "primary", "adapter": "simulated",
                 "params": {"ttft_ms": 0, "tokens_per_second": 0, "min_reply_tokens": 200,
                            "max_reply_tokens": 200}}  # fmt: skip
    relayed = {"id": "rt-up", "type": "primary", "adapter": "openai",
               "params": {"base_url": f"http://127.0.0.1:{upstream_port}/v1", "model": "up",
                          "api_key_env": UPSTREAM_KEY_ENV, "realtime_api": True}}  # fmt: skip
    http_port = free_port()
    config = {
        "server": {"host": "127.0.0.1", "grpc_port": free_port(), "http_port": http_port,
                   "websockets": {"sessions_per_key": sessions + 10,
                                  "frames_per_s": 1000}},
        "storage": {"sqlite_path": str(tmp / "gateway.db")},
        "models": [{"id": "sim", "owned_by": "bench", "created": 0,
                    "price": {"input": 1, "output": 2}, "providers": [simulated]},
                   {"id": "rt", "owned_by": "bench", "created": 0,
                    "price": {"input": 1, "output": 2}, "providers": [relayed]}],
        "routing": {"profiles": {p: ["sim"] for p in ("economy", "balanced", "quality")}},
        "keys": [{"name": "bench", "kind": "api", "secret": KEY}],
    }  # fmt: skip
    path = tmp / "gateway.yaml"
    path.write_text(yaml.safe_dump(config))
    argv = [sys.executable, "-m", "server.cli.main", "serve", "--config", str(path),
            "--log-level", "WARNING"]  # fmt: skip
    env = {**os.environ, UPSTREAM_KEY_ENV: "sk-bench-upstream"}
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    wait_port(http_port)
    return proc, http_port


def rss_kb(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(status.split("VmRSS:")[1].split()[0])


AUTH = {"Authorization": f"Bearer {KEY}"}
# permessage-deflate offered by the clients (Codex offers it, the openai SDK does not).
DEFLATE: dict[str, Any] = {}


async def idle_sessions(port: int, pid: int, count: int, model: str = "sim") -> dict[str, Any]:
    url = f"ws://127.0.0.1:{port}/v1/realtime?model={model}"
    # One session first: what every session shares (imports, first allocations) is in
    # the baseline.
    warm = await websockets.connect(url, additional_headers=AUTH, **DEFLATE)
    await warm.recv()
    before = rss_kb(pid)
    sockets = []
    for _ in range(count):
        ws = await websockets.connect(url, additional_headers=AUTH, **DEFLATE)
        await ws.recv()  # session.created
        sockets.append(ws)
    await asyncio.sleep(1.0)  # the worker's allocations settle
    after = rss_kb(pid)
    await asyncio.gather(*(ws.close() for ws in [warm, *sockets]))
    return {"sessions": count, "rss_before_mb": round(before / 1024, 1),
            "rss_after_mb": round(after / 1024, 1),
            "kb_per_session": round((after - before) / count, 1)}  # fmt: skip


async def over_socket(port: int, responses: int) -> int:
    events = 0
    url = f"ws://127.0.0.1:{port}/v1/responses"
    async with websockets.connect(url, additional_headers=AUTH, **DEFLATE) as ws:
        for _ in range(responses):
            await ws.send(json.dumps({"type": "response.create", "model": "sim",
                                      "input": "Tell me a story", "store": False}))  # fmt: skip
            while True:
                events += 1
                if json.loads(await ws.recv())["type"] == "response.completed":
                    break
    return events


async def over_realtime(port: int, responses: int, model: str = "sim") -> int:
    events = 0
    url = f"ws://127.0.0.1:{port}/v1/realtime?model={model}"
    async with websockets.connect(url, additional_headers=AUTH, **DEFLATE) as ws:
        await ws.recv()
        for _ in range(responses):
            # A fresh conversation each time, as the other paths send one prompt.
            await ws.send(json.dumps({"type": "response.create", "response": {
                "conversation": "none", "input": [{"type": "message", "role": "user",
                "content": [{"type": "input_text", "text": "Tell me a story"}]}]}}))  # fmt: skip
            while True:
                events += 1
                if json.loads(await ws.recv())["type"] == "response.done":
                    break
    return events


async def over_sse(port: int, responses: int, chat: bool) -> int:
    events = 0
    if chat:
        path = "/v1/chat/completions"
        body: dict[str, Any] = {"model": "sim", "stream": True,
                                "messages": [{"role": "user", "content": "Tell me a story"}]}  # fmt: skip
    else:
        path = "/v1/responses"
        body = {"model": "sim", "stream": True, "input": "Tell me a story", "store": False}
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers=AUTH) as client:
        for _ in range(responses):
            async with client.stream("POST", path, json=body) as reply:
                async for line in reply.aiter_lines():
                    events += line.startswith("data: ")
    return events


async def measure(port: int, pid: int, args: argparse.Namespace) -> dict[str, Any]:
    # One model's idle sessions a run: memory freed by the first would be reused by a
    # second, which would then look cheaper than it is.
    report: dict[str, Any] = {
        f"idle_{args.idle}": await idle_sessions(port, pid, args.sessions, args.idle)
    }
    paths = {
        "responses_websocket": lambda: over_socket(port, args.responses),
        "realtime_websocket": lambda: over_realtime(port, args.responses),
        "realtime_relayed": lambda: over_realtime(port, args.responses, "rt"),
        "responses_sse": lambda: over_sse(port, args.responses, chat=False),
        "chat_sse": lambda: over_sse(port, args.responses, chat=True),
    }
    for name, run in paths.items():
        await run()  # warm
        started_cpu, started = cpu_s(pid), time.monotonic()
        events = await run()
        used = cpu_s(pid) - started_cpu
        report[name] = {"events": events, "us_cpu_per_event": round(used * 1e6 / events, 1),
                        "seconds": round(time.monotonic() - started, 2)}  # fmt: skip
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--responses", type=int, default=50)
    parser.add_argument("--idle", choices=("sim", "rt"), default="sim",
                        help="the idle sessions' model: sim (served), rt (relayed)")  # fmt: skip
    parser.add_argument("--no-deflate", action="store_true",
                        help="clients offer no permessage-deflate")  # fmt: skip
    args = parser.parse_args()
    if args.no_deflate:
        DEFLATE["compression"] = None
    print(json.dumps(asyncio.run(run(args)), indent=2))


async def run(args: argparse.Namespace) -> dict[str, Any]:
    async with websockets.serve(realtime_upstream, "127.0.0.1", 0) as upstream:
        upstream_port = upstream.sockets[0].getsockname()[1]
        with tempfile.TemporaryDirectory() as tmp:
            proc, port = start_gateway(Path(tmp), args.sessions, upstream_port)
            try:
                return await measure(port, proc.pid, args)
            finally:
                proc.terminate()
                proc.wait(10)


if __name__ == "__main__":
    main()
