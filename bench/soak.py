"""A soak with faults: N mixed requests (default 20,000) against a gateway process
backed by PostgreSQL and Redis, with a faulty upstream and hostile callers. Every 2,000
requests it reports the gateway's RSS and open file descriptors and the ledger's row
count; at the end (after SIGTERM drains the ledger) the ledger count against the
number of requests that should have a row. Writes bench/results/soak.md.

Mix: REST and gRPC, unary and streamed; an upstream that answers well, with 500, with
impossible usage (1e309, -5, 3e9), with a stream cut short, or slowly; callers that
go away mid-stream, send unpaired surrogates, a NUL in `model`, a wrong key.

Run: python -m bench.soak [--requests N] [--concurrency C] [--sqlite]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import asyncpg
import grpc
import httpx
import yaml
from gateway.v1 import chat_service_pb2 as chat
from gateway.v1 import chat_service_pb2_grpc

from bench.overhead import free_port, wait_port

ROOT = Path(__file__).resolve().parent.parent
KEY = "soak-api-key-0000000000000"
PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/test"
REDIS = "redis://127.0.0.1:6379/0"
FAULTS = ["ok", "ok", "ok", "ok", "status", "usage", "cut", "slow"]


async def upstream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """An OpenAI-compatible upstream with faults, one request per connection."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            (int(line.split(b":")[1]) for line in head.split(b"\r\n")
             if line.lower().startswith(b"content-length")), 0,
        )  # fmt: skip
        body = json.loads(await reader.readexactly(length))
        fault = random.choice(FAULTS)
        if fault == "status":
            data = b'{"error": {"message": "overloaded, key sk-soak-secret-0123456789"}}'
            writer.write(b"HTTP/1.1 500 X\r\ncontent-length: %d\r\n\r\n" % len(data) + data)
            return
        if fault == "slow":
            await asyncio.sleep(0.05)
        usage = {"prompt_tokens": 9, "completion_tokens": 4}
        if fault == "usage":
            usage = {"prompt_tokens": random.choice([1e309, -5, 3e9]), "completion_tokens": 4}
        usage_text = json.dumps(usage).replace("Infinity", "1e309")
        if not body.get("stream"):
            data = (
                '{"choices": [{"index": 0, "message": {"role": "assistant", "content": '
                f'"soak reply"}}, "finish_reason": "stop"}}], "usage": {usage_text}}}'
            ).encode()
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                         b"content-length: %d\r\n\r\n" % len(data) + data)  # fmt: skip
            return
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n")
        for piece in ("soak", " reply", " here"):
            chunk = {"choices": [{"index": 0, "delta": {"content": piece}}]}
            writer.write(f"data: {json.dumps(chunk)}\n\n".encode())
            await writer.drain()
            if fault == "cut":
                return
        last = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        writer.write(f"data: {json.dumps(last)}\n\n".encode())
        writer.write(f'data: {{"choices": [], "usage": {usage_text}}}\n\ndata: [DONE]\n\n'.encode())
        await writer.drain()
    except (OSError, asyncio.IncompleteReadError, ValueError):
        pass
    finally:
        writer.close()


def config(upstream_port: int, database_url: str | None, sqlite: str, prefix: str) -> dict:
    sim = {"ttft_ms": 0, "tokens_per_second": 0}
    storage: dict = {"sqlite_path": sqlite, "redis_prefix": prefix}
    if database_url:
        storage.update(database_url=database_url, redis_url=REDIS)
    return {
        "server": {"host": "127.0.0.1", "grpc_port": free_port(), "http_port": free_port(),
                   "request_timeout_s": 10, "send_timeout_s": 5},
        "storage": storage,
        "models": [
            {"id": "soak", "owned_by": "bench", "created": 0, "price": {"input": 1, "output": 2},
             "providers": [
                 {"id": "faulty", "type": "primary", "adapter": "openai",
                  "params": {"base_url": f"http://127.0.0.1:{upstream_port}/v1", "model": "soak",
                             "read_timeout_s": 2}},
                 {"id": "sim-backup", "type": "backup", "adapter": "simulated", "params": sim}]},
        ],
        "routing": {"profiles": {p: ["soak"] for p in ("economy", "balanced", "quality")}},
        "keys": [{"name": "soak", "kind": "api", "secret": KEY, "requests_per_minute": 10**6}],
    }  # fmt: skip


class Soak:
    def __init__(self, http_port: int, grpc_port: int) -> None:
        self.http = httpx.AsyncClient(base_url=f"http://127.0.0.1:{http_port}", timeout=15)
        self.channel = grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port}")
        self.stub = chat_service_pb2_grpc.ChatServiceStub(self.channel)
        self.sent = 0
        self.ledgered = 0  # requests that were admitted, so must have a ledger row
        self.outcomes: dict[str, int] = {}

    def note(self, kind: str, ledgered: bool) -> None:
        self.sent += 1
        self.ledgered += ledgered
        self.outcomes[kind] = self.outcomes.get(kind, 0) + 1

    async def one(self, i: int) -> None:
        kind = random.choice(
            ["rest", "rest", "rest_stream", "rest_stream", "grpc", "grpc_stream",
             "disconnect", "surrogate", "nul_model", "bad_key"]
        )  # fmt: skip
        body = {"model": "soak", "messages": [{"role": "user", "content": f"hello {i}"}]}
        headers = {"x-api-key": KEY}
        try:
            if kind == "rest":
                await self.http.post("/v1/chat/completions", json=body, headers=headers)
            elif kind == "rest_stream":
                async with self.http.stream(
                    "POST", "/v1/chat/completions", json={**body, "stream": True}, headers=headers
                ) as r:
                    async for _ in r.aiter_bytes():
                        pass
            elif kind == "disconnect":
                async with self.http.stream(
                    "POST", "/v1/chat/completions", json={**body, "stream": True}, headers=headers
                ) as r:
                    async for _ in r.aiter_bytes():
                        break  # goes away after the first bytes
            elif kind == "surrogate":
                raw = json.dumps(body).replace("hello", "\\ud800hello").encode()
                await self.http.post("/v1/chat/completions", content=raw, headers=headers)
            elif kind == "nul_model":
                await self.http.post(
                    "/v1/chat/completions", json={**body, "model": "so\x00ak"}, headers=headers
                )
            elif kind == "bad_key":
                await self.http.post("/v1/chat/completions", json=body, headers={"x-api-key": "x"})
            else:
                request = chat.CreateChatCompletionRequest(
                    model="soak", messages=[chat.ChatMessage(role="user", content=f"hi {i}")]
                )
                meta = (("x-api-key", KEY),)
                try:
                    if kind == "grpc":
                        await self.stub.CreateChatCompletion(request, metadata=meta, timeout=15)
                    else:
                        stream = chat.StreamChatCompletionRequest(
                            model="soak", messages=request.messages
                        )
                        async for _ in self.stub.StreamChatCompletion(
                            stream, metadata=meta, timeout=15
                        ):
                            pass
                except grpc.aio.AioRpcError:
                    pass
        except httpx.HTTPError:
            pass
        self.note(kind, kind not in ("surrogate", "bad_key"))


def spawn_gateway(config_path: Path, log_path: Path) -> subprocess.Popen[bytes]:
    with log_path.open("w") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "server.cli.main", "--config", str(config_path),
             "--log-level", "WARNING"],
            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip


def rss_and_fds(pid: int) -> tuple[float, int]:
    status = Path(f"/proc/{pid}/status").read_text()
    rss_kb = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS"))
    return rss_kb / 1024, len(os.listdir(f"/proc/{pid}/fd"))


async def ledger_count(database_url: str | None, sqlite: str) -> int:
    if database_url:
        conn = await asyncpg.connect(database_url)
        try:
            return int(await conn.fetchval("SELECT COUNT(*) FROM usage_records"))
        finally:
            await conn.close()
    import sqlite3

    with sqlite3.connect(sqlite) as db:
        return int(db.execute("SELECT COUNT(*) FROM usage_records").fetchone()[0])


async def main(requests: int, concurrency: int, use_sqlite: bool) -> str:
    server = await asyncio.start_server(upstream, "127.0.0.1", 0)
    upstream_port = server.sockets[0].getsockname()[1]
    tmp = Path(tempfile.mkdtemp(prefix="soak-"))
    database_url, db_name = None, f"gw_soak_{uuid.uuid4().hex[:10]}"
    if not use_sqlite:
        admin = await asyncpg.connect(PG_ADMIN)
        await admin.execute(f'CREATE DATABASE "{db_name}"')
        await admin.close()
        database_url = f"postgresql://postgres@127.0.0.1:5432/{db_name}"
    sqlite = str(tmp / "soak.db")
    cfg = config(upstream_port, database_url, sqlite, f"soak:{db_name}:")
    path = tmp / "gateway.yaml"
    path.write_text(yaml.safe_dump(cfg))
    process = spawn_gateway(path, tmp / "gateway.log")
    lines = [
        f"# Soak: {requests} mixed requests with faults",
        "",
        f"Storage: {'SQLite' if use_sqlite else 'PostgreSQL + Redis'}; concurrency {concurrency}.",
        "",
        "| requests | RSS MiB | open fds | ledger rows | elapsed s |",
        "|---:|---:|---:|---:|---:|",
    ]
    try:
        await wait_port(cfg["server"]["http_port"])
        await wait_port(cfg["server"]["grpc_port"])
        soak = Soak(cfg["server"]["http_port"], cfg["server"]["grpc_port"])
        started = time.perf_counter()
        queue = iter(range(requests))

        async def worker() -> None:
            for i in queue:
                await soak.one(i)

        async def report() -> None:
            mark = 0
            while soak.sent < requests:
                await asyncio.sleep(0.05)
                if soak.sent // 2000 > mark:
                    mark = soak.sent // 2000
                    rss, fds = rss_and_fds(process.pid)
                    rows = await ledger_count(database_url, sqlite)
                    line = (
                        f"| {soak.sent} | {rss:.1f} | {fds} | {rows} | "
                        f"{time.perf_counter() - started:.0f} |"
                    )
                    lines.append(line)
                    print(line, flush=True)

        await asyncio.gather(report(), *(worker() for _ in range(concurrency)))
        await soak.http.aclose()
        await soak.channel.close()
        process.send_signal(signal.SIGTERM)
        process.wait(60)
        rows = await ledger_count(database_url, sqlite)
        lines += [
            "",
            f"Requests sent: {soak.sent}; admitted (each owes one ledger row): {soak.ledgered}; "
            f"ledger rows after SIGTERM: {rows}; gateway exit code {process.returncode}.",
            "",
            "Mix: " + ", ".join(f"{k} {v}" for k, v in sorted(soak.outcomes.items())),
        ]
        text = (tmp / "gateway.log").read_text()
        lines.append(
            f"Gateway log: {len(text.splitlines())} lines, {text.count('Traceback')} tracebacks."
        )
    finally:
        if process.poll() is None:
            process.kill()
        server.close()
        if database_url:
            admin = await asyncpg.connect(PG_ADMIN)
            await admin.execute(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')
            await admin.close()
            from redis.asyncio import Redis

            client = Redis.from_url(REDIS)
            keys = [k async for k in client.scan_iter(match=f"soak:{db_name}:*")]
            if keys:
                await client.delete(*keys)
            await client.aclose()
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--sqlite", action="store_true", help="SQLite, no Redis")
    args = parser.parse_args()
    report = asyncio.run(main(args.requests, args.concurrency, args.sqlite))
    out = ROOT / "bench" / "results" / "soak.md"
    out.parent.mkdir(exist_ok=True)
    out.write_text(report)
    print(report)
