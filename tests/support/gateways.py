"""Test support: configs, in-process gateways and gateway processes on loopback."""

from __future__ import annotations

import asyncio
import copy
import functools
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from server.base import config
from server.cli import serve as app

API_KEY = "gw-dev-api-key-0000000000"
ROUTER_KEY = "gw-dev-router-key-000000000"
ROOT = Path(__file__).resolve().parents[2]
# The bound on a storage call in the test configs: a loaded machine answers slowly, and
# the default (2 s) would turn that into a 503 no test means. Tests of a stalled store
# set their own.
PATIENT_STORAGE_S = 10.0


@functools.cache
def _embedded_default() -> dict[str, Any]:
    text = (ROOT / "server" / "base" / "default_config.yaml").read_text()
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def default_config_dict() -> dict[str, Any]:
    """The embedded default config as a dict, with instant simulated providers."""
    data = copy.deepcopy(_embedded_default())
    data["server"] = {"host": "127.0.0.1", "grpc_port": 0, "http_port": 0}
    # Keys and the usage ledger in memory: tests leave no database file behind.
    data["storage"] = {"sqlite_path": ":memory:", "timeout_s": PATIENT_STORAGE_S}
    for model in data["models"]:
        for provider in model["providers"]:
            provider["params"] = {"ttft_ms": 0, "tokens_per_second": 0}
    return data


def patched(data: dict[str, Any], **server: Any) -> dict[str, Any]:
    out = copy.deepcopy(data)
    out["server"].update(server)
    return out


@asynccontextmanager
async def running_gateway(
    data: dict[str, Any] | None = None, *, grpc_target: str | None = None
) -> AsyncIterator[app.Running]:
    """Starts a gateway (or, with grpc_target, an edge facade) in this event loop."""
    cfg = config.parse(data if data is not None else default_config_dict(), "test config")
    running = await app.start(cfg, grpc_target=grpc_target)
    try:
        yield running
    finally:
        await running.stop()


@asynccontextmanager
async def openai_gateway(data: dict[str, Any]) -> AsyncIterator[tuple[Any, str]]:
    """A gateway on `data`, an `openai` SDK client of it (no retries) and its base URL."""
    import openai

    async with running_gateway(data) as gw:
        base = f"http://127.0.0.1:{gw.http_port}"
        sdk = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key=API_KEY, max_retries=0)
        async with sdk:
            yield sdk, base


@dataclass
class GatewayProcess:
    process: subprocess.Popen[str]
    grpc_port: int | None
    http_port: int | None
    output: list[str]


# A `gateway` command run to its end (keys, migrate, a start-up that fails): the bound
# is a hang's; each run imports the gateway, slow on two cores running two suites.
COMMAND_TIMEOUT_S = 120


def start_process(
    *args: str, env: dict[str, str] | None = None, timeout_s: float = 120
) -> GatewayProcess:
    """Runs the `gateway` command and waits until it prints its listening ports. The
    bound is a hang's, not a start's: `--workers 2` starts three processes that each
    import the whole gateway, and two suites at once on two cores passed 60 s."""
    process = subprocess.Popen(
        [sys.executable, "-m", "server.cli.main", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=ROOT,
    )
    output: list[str] = []
    grpc_port = http_port = None
    assert process.stdout is not None
    # A gateway that never gets ready is killed, which ends the read below.
    late = threading.Event()
    watchdog = threading.Timer(timeout_s, lambda: (late.set(), process.kill()))
    watchdog.start()
    for line in process.stdout:
        output.append(line)
        if m := re.search(r"gRPC listening on [\d.]+:(\d+)", line):
            grpc_port = int(m.group(1))
        if m := re.search(r"HTTP listening on http://[\d.]+:(\d+)", line):
            http_port = int(m.group(1))
        if "gateway: ready" in line or "error" in line:
            break
    watchdog.cancel()
    if late.is_set():
        raise TimeoutError(f"the gateway was not ready in {timeout_s}s:\n{''.join(output)}")
    return GatewayProcess(process, grpc_port, http_port, output)


def stop_process(gw: GatewayProcess, timeout_s: float = 10) -> str:
    if gw.process.poll() is None:
        gw.process.send_signal(signal.SIGTERM)
    out, _ = gw.process.communicate(timeout=timeout_s)
    return "".join(gw.output) + (out or "")


def write_config(tmp_path: Path, data: dict[str, Any]) -> Path:
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


async def ledger_counts(gw: Any) -> list[tuple[int, int]]:
    """The ledger's (prompt, completion) tokens of each call so far, in order."""
    await gw.gateway.accounts.ledger.flush()
    rows = await gw.gateway.store.db.fetch(
        "SELECT prompt_tokens, completion_tokens FROM usage_records ORDER BY rowid"
    )
    return [(r["prompt_tokens"], r["completion_tokens"]) for r in rows]


async def wait_for(predicate, timeout_s: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError("condition not met in time")
        await asyncio.sleep(0.01)


async def eventually(check, timeout_s: float = 30.0):  # type: ignore[no-untyped-def]
    """Runs the async `check` until it passes (returns without an AssertionError), for
    a state another process reaches in its own time (a worker's flush, a settlement
    elsewhere); its last failure is raised after `timeout_s`."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        try:
            return await check()
        except AssertionError:
            if asyncio.get_running_loop().time() > deadline:
                raise
        await asyncio.sleep(0.05)


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (a supervisor's workers), from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found
