"""No worker of `--workers 2` outlives its supervisor: not when the reader of its
output went away before SIGTERM (a write to the broken pipe ended the supervisor
before it stopped them), not when the supervisor is killed outright. Either way the
ports are free and the next start serves."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
from pathlib import Path

import httpx
import pytest

from tests.support.gateways import (
    API_KEY,
    children,
    default_config_dict,
    start_process,
    stop_process,
    wait_for,
    write_config,
)


def alive(pid: int) -> bool:
    """Whether `pid` still runs (a zombie waiting for its reaper does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def refused(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


@pytest.mark.parametrize("ending", ["reader gone, then SIGTERM", "SIGKILL"])
async def test_no_worker_outlives_its_supervisor(tmp_path: Path, ending: str) -> None:
    data = default_config_dict()
    data["storage"] |= {"sqlite_path": str(tmp_path / "gateway.db")}
    data["operations"] = {"request_log": False}
    path = str(write_config(tmp_path, data))
    gw = start_process("--config", path, "--workers", "2")
    assert gw.http_port and gw.grpc_port, "".join(gw.output)
    workers = children(gw.process.pid)
    assert len(workers) == 2, "".join(gw.output)
    try:
        if ending == "SIGKILL":
            gw.process.kill()
        else:
            assert gw.process.stdout is not None
            gw.process.stdout.close()  # whoever read the gateway's output is gone
            gw.process.send_signal(signal.SIGTERM)
        await asyncio.to_thread(gw.process.wait, 60)
        await wait_for(lambda: not any(alive(pid) for pid in workers), timeout_s=60)
        assert refused(gw.http_port) and refused(gw.grpc_port)
    finally:
        for pid in [gw.process.pid, *workers]:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
    if ending != "SIGKILL":
        assert gw.process.returncode == 0

    ports = ["--http-port", str(gw.http_port), "--grpc-port", str(gw.grpc_port)]
    again = start_process("--config", path, "--workers", "2", *ports)
    try:
        assert again.http_port == gw.http_port, "".join(again.output)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}") as http:
            reply = await http.get("/v1/models", headers={"x-api-key": API_KEY})
            assert reply.status_code == 200
    finally:
        output = stop_process(again, timeout_s=60)
    assert again.process.returncode == 0, output
