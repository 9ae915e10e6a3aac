"""Admin changes under `--workers 2` reach every worker before the 200: a reload that
removes a key, and a provider switch, hold on every new connection, whichever worker
served the change; a worker started again after a crash gets the switches made before
it; a worker that cannot confirm in time makes the change a 503 CHANGE_NOT_EVERYWHERE."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests.integration.ops.test_worker_crash import said
from tests.support.gateways import API_KEY, children, start_process, stop_process, write_config
from tests.support.shared_state import ADMIN_KEY, config_with

ADMIN = {"x-admin-key": ADMIN_KEY}
API = {"x-api-key": API_KEY}
DOOMED = {"x-api-key": "gw-test-doomed-key-000000"}
# Each request on a connection of its own, which the kernel gives either worker.
CONNECTIONS = 40


async def on_new_connections(
    port: int, path: str, key: dict[str, str] = DOOMED, **params: Any
) -> list[httpx.Response]:
    async with httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{port}", headers={"connection": "close"}, timeout=60
    ) as http:
        return [await http.get(path, headers=key, params=params) for _ in range(CONNECTIONS)]


async def primary_enabled(port: int) -> set[bool]:
    """Whether sim-mini-primary is enabled, as each new connection's worker says."""
    replies = await on_new_connections(port, "/v1/providers", API, model="sim-mini")
    return {
        next(p["enabled"] for p in r.json()["providers"] if p["id"] == "sim-mini-primary")
        for r in replies
    }


async def test_reloads_and_switches_reach_every_worker(tmp_path: Path, pg_url: str) -> None:
    # On PostgreSQL: a worker stopped inside one of its own SQLite writes (the ledger's
    # flush, the files' sweep) would hold the one database lock, and the other's audit
    # record of the switch would wait for it instead of the change for its confirmation.
    data = config_with(database_url=pg_url)
    data["keys"].append({"name": "doomed", "kind": "api", "secret": DOOMED["x-api-key"]})
    data["operations"] = {"request_log": False}
    path = write_config(tmp_path, data)
    gw = start_process("--config", str(path), "--workers", "2")
    assert gw.http_port is not None, "".join(gw.output)
    port = gw.http_port
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
            replies = await on_new_connections(port, "/v1/models")
            assert {r.status_code for r in replies} == {200}

            data["keys"] = [k for k in data["keys"] if k["name"] != "doomed"]
            path.write_text(yaml.safe_dump(data))
            reload = await http.post("/v1/admin/config:reload", headers=ADMIN, json={})
            assert reload.status_code == 200, reload.text
            replies = await on_new_connections(port, "/v1/models")
            assert {r.status_code for r in replies} == {401}

            off = await http.post("/v1/admin/providers/sim-mini-primary:disable", headers=ADMIN,
                                  json={})  # fmt: skip
            assert off.status_code == 200, off.text
            assert await primary_enabled(port) == {False}

            # A worker started again holds the switch made before it started.
            victim = children(gw.process.pid)[0]
            os.kill(victim, signal.SIGKILL)
            await said(gw, "is serving again")
            assert await primary_enabled(port) == {False}

            # A worker that cannot answer: the change is not confirmed everywhere.
            stopped = children(gw.process.pid)[0]
            os.kill(stopped, signal.SIGSTOP)
            try:
                # Some of these reach the stopped worker and wait for it; of 24, one reaches
                # the other but once in 2**24 (each new connection's worker is a coin toss).
                pending = {asyncio.ensure_future(_enable(port)) for _ in range(24)}
                answer = None
                while answer is None and pending:
                    done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                    answer = next((r for r in (d.result() for d in done) if r is not None), None)
            finally:
                os.kill(stopped, signal.SIGCONT)
            assert answer is not None
            error = answer.json()["error"]
            assert answer.status_code == 503 and error["code"] == "change_not_everywhere"
            assert "made on 1 of 2 workers" in error["message"]
            await asyncio.gather(*pending)
            # Sent again once every worker answers: made everywhere.
            on = await http.post("/v1/admin/providers/sim-mini-primary:enable", headers=ADMIN,
                                 json={})  # fmt: skip
            assert on.status_code == 200, on.text
            assert await primary_enabled(port) == {True}
    finally:
        output = stop_process(gw, timeout_s=60)
    assert gw.process.returncode == 0, output
    assert "Traceback" not in output


async def _enable(port: int) -> httpx.Response | None:
    """An enable on a new connection: its answer when it is a 503, else None."""
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=90) as http:
        with contextlib.suppress(httpx.TimeoutException):
            reply = await http.post("/v1/admin/providers/sim-mini-primary:enable", headers=ADMIN,
                                    json={})  # fmt: skip
            return reply if reply.status_code == 503 else None
    return None
