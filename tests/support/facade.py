"""Shared helpers of the facade tests: both facade modes, raw SSE parsing."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from tests.support.gateways import API_KEY, ROUTER_KEY, default_config_dict, running_gateway

MODES = ["in_process", "edge"]
A = {"x-api-key": API_KEY}
B = {"x-router-key": ROUTER_KEY}
CHAT = {"model": "sim-mini", "messages": [{"role": "user", "content": "Say hello."}]}


@asynccontextmanager
async def facade(mode: str, data: dict[str, Any] | None = None) -> AsyncIterator[str]:
    """Serves `data` and yields the facade's base URL: the gateway's own facade
    (in_process), or an edge facade forwarding to the gateway over gRPC (edge)."""
    data = data if data is not None else default_config_dict()
    async with running_gateway(data) as gw:
        if mode == "in_process":
            yield f"http://127.0.0.1:{gw.http_port}"
        else:
            async with running_gateway(data, grpc_target=f"127.0.0.1:{gw.grpc_port}") as edge:
                yield f"http://127.0.0.1:{edge.http_port}"


@asynccontextmanager
async def client(mode: str, data: dict[str, Any] | None = None) -> AsyncIterator[httpx.AsyncClient]:
    async with facade(mode, data) as url, httpx.AsyncClient(base_url=url, timeout=10) as c:
        yield c


# Runs a test once per facade mode; the test takes a `mode` argument.
both_modes = pytest.mark.parametrize("mode", MODES)


def set_params(data: dict[str, Any], model: str, **params: Any) -> dict[str, Any]:
    """Sets simulated-provider params on every provider of `model`."""
    for m in data["models"]:
        if m["id"] == model:
            for provider in m["providers"]:
                provider["params"].update(params)
    return data


async def sse(response: httpx.Response) -> tuple[bytes, list[bytes]]:
    """Reads a whole SSE body raw; returns it and its events (split on blank lines)."""
    raw = b"".join([part async for part in response.aiter_raw()])
    assert raw.endswith(b"\n\n"), raw[-80:]
    return raw, raw[:-2].split(b"\n\n")


def data_events(events: list[bytes]) -> list[Any]:
    """The JSON payloads of `data:` events, [DONE] excluded; comments skipped."""
    out = []
    for e in events:
        if e.startswith(b":"):
            continue
        assert e.startswith(b"data: "), e
        assert b"\n" not in e, e
        if e != b"data: [DONE]":
            out.append(json.loads(e[len(b"data: ") :]))
    return out


async def declared_past(
    url: str, path: str, headers: dict[str, str], length: int, head: bytes
) -> tuple[int, Any]:
    """POSTs `head` alone under a Content-Length of `length` and reads the answer, which
    must come before the rest of the body (never sent) is read: its status and the JSON
    error object."""
    host, _, port = url.removeprefix("http://").rstrip("/").partition(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        async with asyncio.timeout(60):  # a gateway waiting for the body never answers
            lines = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
            writer.write(
                f"POST {path} HTTP/1.1\r\nhost: {host}\r\n{lines}content-length: {length}\r\n\r\n"
                .encode() + head
            )  # fmt: skip
            await writer.drain()
            status_line = await reader.readline()
            answer_headers = (await reader.readuntil(b"\r\n\r\n")).lower()
            size = int(answer_headers.partition(b"content-length: ")[2].partition(b"\r\n")[0])
            answer = await reader.readexactly(size)
    finally:
        writer.close()
    return int(status_line.split()[1]), json.loads(answer)["error"]
