"""`gateway probe`, the image's health check: 0 from a ready gateway over REST and gRPC,
1 with the reason from a port where none answers."""

from __future__ import annotations

import asyncio
import socket
import sys

from tests.support.gateways import running_gateway


async def probe(*args: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "server.cli.main", "probe", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, err.decode()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_a_ready_gateway_passes_over_rest_and_grpc():
    async with running_gateway() as gw:
        assert await probe("--url", f"http://127.0.0.1:{gw.http_port}/readyz") == (0, "")
        assert await probe("--grpc", f"127.0.0.1:{gw.grpc_port}") == (0, "")


async def test_no_gateway_fails_saying_why():
    port = closed_port()
    code, said = await probe("--url", f"http://127.0.0.1:{port}/readyz", "--timeout", "1")
    assert code == 1 and said.startswith("gateway: not ready:") and "refused" in said
    code, said = await probe("--grpc", f"127.0.0.1:{port}", "--timeout", "1")
    assert code == 1 and "UNAVAILABLE" in said


async def test_a_path_that_is_not_ready_fails_with_its_status():
    async with running_gateway() as gw:
        code, said = await probe("--url", f"http://127.0.0.1:{gw.http_port}/no-such-path")
    assert code == 1 and "answered 404" in said
