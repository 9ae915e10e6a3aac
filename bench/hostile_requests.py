"""What a hostile request costs the gateway: CPU time and resident memory.

Starts the gateway on its embedded default (the simulated models, their context
windows taken out as in every provider example, and three models served by hostile
upstreams on loopback), sends each request of a set built to eat a naive
implementation `--repeat` times each, and reports for each: the HTTP status, the
gateway's CPU milliseconds per request (from /proc, the process's own user + system
time), the slowest answer, and how much its resident set grew (peak, VmHWM) over the
run so far. The set:

- bodies under 64 KiB: schemas with `$ref` cycles, huge `minLength`/`minItems`,
  self-referencing `anyOf`, deep nesting, a keyword of the wrong type, n=128 choices;
- stored state that amplifies: a Responses continuation pointing at a stored 55 KB
  item 180 times in a 9 KB body, one whose conversation grew past the gateway's
  ceiling one reference at a time, and a key out of requests continuing a 0.9 MB stored
  response;
- upstreams that lie or flood: one that ignores max_tokens and streams 12 MiB, one
  that sends headers without end, one whose 200 KB gzip answer inflates to 200 MB.

    python -m bench.hostile_requests [--repeat 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import yaml

from bench.perf import free_port, wait_port

TICKS = os.sysconf("SC_CLK_TCK")
KEY = "gw-dev-api-key-0000000000"
# A key of one request a minute, for the refusals that must come before stored state.
SPENT_KEY = "gw-bench-spent-key-00000000"
HELLO = [{"role": "user", "content": "hi"}]
CHAT = "/v1/chat/completions"
RESPONSES = "/v1/responses"
DEFAULT_CONFIG = Path(__file__).parent.parent / "server" / "base" / "default_config.yaml"
# One case: the path, the body, the key.
Case = tuple[str, bytes, str]


def structured(schema: Any) -> dict[str, Any]:
    fmt = {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}
    return {"model": "sim-mini", "messages": HELLO, "response_format": fmt}


def tool(parameters: Any) -> dict[str, Any]:
    spec = {"type": "function", "function": {"name": "f", "parameters": parameters}}
    return {"model": "sim-mini", "messages": HELLO, "tools": [spec], "tool_choice": "required"}


def requests() -> dict[str, bytes]:
    wide = {"type": "object", "properties": {f"p{i}": {"$ref": "#"} for i in range(2000)}}
    refs = {f"p{i}": {"$ref": "#/$defs/a"} for i in range(6)}
    deep = {"$defs": {"a": {"type": "object", "properties": refs}}, "$ref": "#/$defs/a"}
    long = {"type": "object", "properties": {"s": {"type": "string", "minLength": 200_000_000}}}
    items = {"type": "array", "minItems": 10**9, "items": {"type": "string", "minLength": 10**6}}
    bodies: dict[str, Any] = {
        "schema: $ref cycle, 2000 wide": structured(wide),
        "schema: $ref cycle, 6 wide": structured(deep),
        "schema: minLength 2e8": structured(long),
        "schema: minItems 1e9 of minLength 1e6": structured(items),
        "schema: anyOf of itself x3000": structured({"anyOf": [{"$ref": "#"}] * 3000}),
        "schema: minimum 'abc' (400)": structured({"type": "integer", "minimum": "abc"}),
        "tool: $ref cycle, 2000 wide": tool(wide),
        "tool: minItems 1e9": tool({"type": "object", "properties": {"a": items}}),
        "n=128, max_tokens 4096": {
            "model": "sim-mini", "messages": HELLO, "n": 128, "max_tokens": 4096,
        },
    }  # fmt: skip
    out = {name: (CHAT, json.dumps(body).encode(), KEY) for name, body in bodies.items()}
    nest = 30_000
    out["JSON nested 30000 deep (400)"] = (
        CHAT,
        b'{"model": "sim-mini", "x": ' + b"[" * nest + b"]" * nest + b"}",
        KEY,
    )
    for model in ("ignores-max-tokens", "endless-headers", "gzip-bomb"):
        ask = {"model": model, "messages": HELLO, "max_tokens": 100}
        out[f"upstream: {model}"] = (CHAT, json.dumps(ask).encode(), KEY)
    for name, (_, body, _) in out.items():
        assert len(body) < 64 * 1024, f"{name} is {len(body)} bytes"
    return out


def stored_state(client: httpx.Client) -> dict[str, Case]:
    """Continuations of responses stored for the purpose: each expands what it sends."""
    big = "lorem ipsum dolor sit amet " * 2000  # 55 KB, about 13,500 tokens
    headers = {"x-api-key": KEY}

    def stored(key: str, content: str, previous: str | None = None, ref: str = "") -> Any:
        given: list[Any] = [{"role": "user", "content": content}] if content else []
        given += [{"type": "item_reference", "id": ref}] if ref else []
        body = {"model": "sim-mini", "input": given, "max_output_tokens": 16,
                **({"previous_response_id": previous} if previous else {})}  # fmt: skip
        reply = client.post(RESPONSES, json=body, headers={"x-api-key": key})
        reply.raise_for_status()
        return reply.json()

    first = stored(KEY, big)
    items = client.get(f"{RESPONSES}/{first['id']}/input_items", headers=headers).json()
    item = items["data"][0]["id"]
    many = [{"type": "item_reference", "id": item}] * 180
    grown, previous = None, first["id"]
    for _ in range(40):  # one more reference a turn, until the ceiling refuses the next
        body = {"model": "sim-mini", "previous_response_id": previous, "max_output_tokens": 16,
                "input": [{"type": "item_reference", "id": item}]}  # fmt: skip
        reply = client.post(RESPONSES, json=body, headers=headers)
        if reply.status_code != 200:
            grown = body
            break
        previous = reply.json()["id"]
    assert grown is not None, "the ceiling never refused the conversation"
    large = stored(SPENT_KEY, "x" * 900_000)  # its one request this minute
    out = {
        "responses: 180 references to a 55 KB item (400)": {
            "model": "sim-mini", "previous_response_id": first["id"], "input": many},
        "responses: a conversation past the ceiling (400)": grown,
        "responses: 429 continuing 0.9 MB of stored state": {
            "model": "sim-mini", "previous_response_id": large["id"], "input": "and?"},
        "responses: 429 continuing nothing (its baseline)": {
            "model": "sim-mini", "input": "and?"},
    }  # fmt: skip
    keys = {name: SPENT_KEY if "429" in name else KEY for name in out}
    return {name: (RESPONSES, json.dumps(body).encode(), keys[name]) for name, body in out.items()}


# -- upstreams that lie or flood --------------------------------------------------------

Writer = Callable[[asyncio.StreamWriter], Awaitable[None]]


async def _ignores_max_tokens(writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n")
    piece = json.dumps({"choices": [{"index": 0, "delta": {"content": "word " * 13_000}}]})
    for _ in range(200):  # 12.4 MiB, whatever max_tokens said
        writer.write(f"data: {piece}\n\n".encode())
        await writer.drain()
    usage = {"prompt_tokens": 9, "completion_tokens": 2_000_000_000}
    writer.write(f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n".encode())


async def _endless_headers(writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTP/1.1 200 OK\r\n")
    for i in range(300_000):  # 2.6 GB of headers
        writer.write(b"x-flood-%d: %s\r\n" % (i, b"y" * 8000))
        await writer.drain()


def _bomb() -> bytes:
    squeeze = zlib.compressobj(9, zlib.DEFLATED, 31)
    return b"".join(squeeze.compress(b" " * (1 << 20)) for _ in range(200)) + squeeze.flush()


BOMB = _bomb()


async def _gzip_bomb(writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                 b"content-encoding: gzip\r\ncontent-length: %d\r\n\r\n" % len(BOMB) + BOMB)  # fmt: skip


UPSTREAMS: dict[str, Writer] = {
    "ignores-max-tokens": _ignores_max_tokens,
    "endless-headers": _endless_headers,
    "gzip-bomb": _gzip_bomb,
}


def serve_upstreams() -> dict[str, int]:
    """The hostile upstreams on loopback, in a thread of their own; their ports."""
    ports: dict[str, int] = {}
    started = threading.Event()

    async def main() -> None:
        for name, write in UPSTREAMS.items():

            async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                            write: Writer = write) -> None:  # fmt: skip
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                    length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                                   if line.lower().startswith(b"content-length:")), 0)  # fmt: skip
                    await reader.readexactly(length)
                    await write(writer)
                    await writer.drain()
                except (OSError, asyncio.IncompleteReadError):
                    pass
                finally:
                    writer.close()

            server = await asyncio.start_server(serve, "127.0.0.1", 0)
            ports[name] = server.sockets[0].getsockname()[1]
        started.set()
        await asyncio.Event().wait()

    threading.Thread(target=asyncio.run, args=(main(),), daemon=True).start()
    started.wait(10)
    return ports


def bench_config(ports: dict[str, int]) -> dict[str, Any]:
    """The embedded default without context windows, a key of one request a minute, and
    a model for each hostile upstream."""
    data = yaml.safe_load(DEFAULT_CONFIG.read_text())
    for model in data["models"]:
        model.pop("context_window", None)
    data.setdefault("keys", []).append(
        {"name": "spent", "kind": "api", "secret": SPENT_KEY, "requests_per_minute": 1}
    )
    for name, port in ports.items():
        params = {"base_url": f"http://127.0.0.1:{port}/v1", "model": name, "stream": True,
                  "read_timeout_s": 10}  # fmt: skip
        data["models"].append({"id": name, "owned_by": "bench", "created": 0,
                               "price": {"input": 1.0, "output": 4.0},
                               "providers": [{"id": name, "type": "primary", "adapter": "openai",
                                              "params": params}]})  # fmt: skip
    return data


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def peak_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main(repeat: int) -> None:
    port = free_port()
    ports = serve_upstreams()
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "gateway.yaml"
        config.write_text(yaml.safe_dump(bench_config(ports)))
        argv = [sys.executable, "-m", "server.cli.main", "--config", str(config),
                "--http-port", str(port), "--grpc-port", str(free_port()),
                "--log-level", "ERROR"]  # fmt: skip
        # In the scratch folder: the config keeps its ledger in ./gateway.db.
        proc = subprocess.Popen(argv, cwd=tmp, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)  # fmt: skip
        try:
            wait_port(port)
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as client:
                headers = {"x-api-key": KEY, "content-type": "application/json"}
                for _ in range(20):  # warm up
                    client.post(CHAT, json={"model": "sim-mini", "messages": HELLO},
                                headers=headers)  # fmt: skip
                cases = {**requests(), **stored_state(client)}
                base = peak_mb(proc.pid)
                print(f"gateway peak RSS after warm-up: {base:.1f} MB; {repeat} requests each\n")
                print(
                    "| request | bytes | status | CPU ms/request | wall ms (max) | peak RSS +MB |"
                )
                print("|---|---|---|---|---|---|")
                for name, (path, body, key) in cases.items():
                    headers = {"x-api-key": key, "content-type": "application/json"}
                    before, walls, status = cpu_s(proc.pid), [], 0
                    for _ in range(repeat):
                        started = time.perf_counter()
                        status = client.post(path, content=body, headers=headers).status_code
                        walls.append(time.perf_counter() - started)
                    cpu = (cpu_s(proc.pid) - before) / repeat * 1000
                    grown = peak_mb(proc.pid) - base
                    print(f"| {name} | {len(body)} | {status} | {cpu:.1f} | "
                          f"{max(walls) * 1000:.0f} | {grown:.1f} |")  # fmt: skip
        finally:
            proc.terminate()
            proc.wait(30)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    main(parser.parse_args().repeat)
