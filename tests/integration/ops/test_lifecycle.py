"""A gateway process through its life: ready, reloaded on SIGHUP, drained on SIGTERM
with streams in flight (they finish, the ledger is written, the exit code is 0)."""

from __future__ import annotations

import asyncio
import signal
import sqlite3

import grpc
import httpx
import yaml
from gateway.v1 import chat_service_pb2 as chat
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.support.gateways import API_KEY, eventually, start_process, stop_process, write_config
from tests.support.grpc_stubs import API, Stubs
from tests.support.shared_state import ADMIN_KEY, config_with

HELLO = [chat.ChatMessage(role="user", content="hello")]


def slow(data: dict, model: str, tokens_per_second: float) -> dict:
    for m in data["models"]:
        if m["id"] == model:
            for p in m["providers"]:
                p["params"] = {"ttft_ms": 0, "tokens_per_second": tokens_per_second}
    return data


def rows(path: str) -> list[tuple[str, str]]:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT method, status FROM usage_records ORDER BY id").fetchall()


async def health_status(port: int, service: str = "") -> int:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        answer = await health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=service), timeout=2
        )
        return answer.status


async def test_sigterm_turns_not_ready_then_finishes_streams_and_exits_0(tmp_path):
    db = str(tmp_path / "gw.db")
    data = slow(config_with(sqlite_path=db), "sim-standard", 10)
    # The readiness delay: long enough for the checks below on a loaded machine.
    data["operations"] = {"readiness_delay_s": 2.5, "drain_s": 20}
    gw = start_process("--config", str(write_config(tmp_path, data)))
    try:
        assert gw.http_port and gw.grpc_port, "".join(gw.output)
        base = f"http://127.0.0.1:{gw.http_port}"
        async with (
            httpx.AsyncClient(base_url=base, timeout=30) as rest,
            grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel,
        ):
            assert (await rest.get("/healthz")).status_code == 200
            assert (await rest.get("/readyz")).json() == {"ready": True, "problems": []}
            assert await health_status(gw.grpc_port) == health_pb2.HealthCheckResponse.SERVING
            body = {
                "model": "sim-standard", "max_tokens": 20, "stream": True,
                "messages": [{"role": "user", "content": "a long answer please"}],
            }  # fmt: skip
            grpc_stream = Stubs(channel).chat.StreamChatCompletion(
                chat.StreamChatCompletionRequest(
                    model="sim-standard", messages=HELLO, max_tokens=20
                ),
                metadata=API,
            )
            async with rest.stream(
                "POST", "/v1/chat/completions", json=body, headers={"x-api-key": API_KEY}
            ) as sse:
                lines = sse.aiter_lines()
                assert (await anext(lines)).startswith("data: ")
                first = await grpc_stream.read()
                assert first.choices[0].delta.role == "assistant"

                gw.process.send_signal(signal.SIGTERM)

                async def not_ready() -> None:  # once the signal is handled
                    ready = await rest.get("/readyz")
                    assert ready.status_code == 503, ready.text
                    assert "draining: shutting down" in ready.json()["problems"]

                # Not ready, while the listeners still answer.
                await eventually(not_ready)
                assert await health_status(gw.grpc_port) == (
                    health_pb2.HealthCheckResponse.NOT_SERVING
                )
                assert await health_status(gw.grpc_port, "gateway.v1.ChatService") == (
                    health_pb2.HealthCheckResponse.NOT_SERVING
                )
                # Both streams in flight run to their end.
                rest_events = [line async for line in lines if line.startswith("data: ")]
                assert rest_events[-1] == "data: [DONE]"
                assert '"finish_reason":"length"' in rest_events[-2].replace(" ", "")
                chunks = []
                while (chunk := await grpc_stream.read()) is not grpc.aio.EOF:
                    chunks.append(chunk)
                assert chunks[-1].choices[0].finish_reason == "length"
        code = await asyncio.to_thread(gw.process.wait, 30)
    finally:
        output = stop_process(gw, timeout_s=30)
    assert code == 0, output
    assert "gateway: stopped" in output
    assert sorted(rows(db)) == [("StreamChatCompletion", "OK")] * 2


async def test_sighup_reloads_and_an_invalid_file_is_refused(tmp_path):
    data = slow(config_with(sqlite_path=str(tmp_path / "gw.db")), "sim-pro", 20)
    path = write_config(tmp_path, data)
    gw = start_process("--config", str(path))
    admin = {"x-admin-key": ADMIN_KEY}
    api = {"x-api-key": API_KEY}
    try:
        assert gw.http_port, "".join(gw.output)
        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{gw.http_port}", timeout=30
        ) as rest:

            async def model_ids() -> list[str]:
                listing = await rest.get("/v1/models", headers=api)
                return [m["id"] for m in listing.json()["data"]]

            async def price(model: str) -> float:
                reply = await rest.post(
                    "/v1/chat/completions",
                    json={"model": model, "messages": [{"role": "user", "content": "hi"}]},
                    headers=api,
                )
                return (
                    reply.json()["usage"]["input_cost_usd"] / reply.json()["usage"]["prompt_tokens"]
                )

            before = await price("sim-mini")
            # A slow stream starts on the old config and must survive the reload.
            body = {
                "model": "sim-pro", "max_tokens": 30, "stream": True,
                "messages": [{"role": "user", "content": "hi"}],
            }  # fmt: skip
            async with rest.stream("POST", "/v1/chat/completions", json=body, headers=api) as sse:
                lines = sse.aiter_lines()
                await anext(lines)
                changed = yaml.safe_load(path.read_text())
                changed["models"][0]["price"]["input"] = 0.30  # sim-mini, twice the price
                extra = {**changed["models"][0], "id": "sim-extra"}
                extra["providers"] = [{**p, "id": "x-" + p["id"]} for p in extra["providers"]]
                changed["models"].append(extra)
                path.write_text(yaml.safe_dump(changed))
                gw.process.send_signal(signal.SIGHUP)
                for _ in range(100):
                    if "sim-extra" in await model_ids():
                        break
                    await asyncio.sleep(0.05)
                assert "sim-extra" in await model_ids()
                assert await price("sim-mini") == 2 * before
                events = [line async for line in lines if line.startswith("data: ")]
                assert events[-1] == "data: [DONE]" and "error" not in "".join(events)

            # An invalid file: refused with the reason, and the running config stays.
            path.write_text(yaml.safe_dump({**changed, "routing": {"profiles": {"economy": []}}}))
            refused = await rest.post("/v1/admin/config:reload", json={}, headers=admin)
            assert refused.status_code == 400
            error = refused.json()["error"]
            assert error["code"] == "config_invalid"
            assert "profiles: missing balanced, quality" in error["message"]
            gw.process.send_signal(signal.SIGHUP)  # refused too; the process lives on
            await asyncio.sleep(0.3)
            assert "sim-extra" in await model_ids()
            assert await price("sim-mini") == 2 * before
            assert (
                await rest.post("/v1/admin/config:reload", json={}, headers=api)
            ).status_code == 401

            path.write_text(yaml.safe_dump(data))  # back to the start, through the RPC
            done = await rest.post("/v1/admin/config:reload", json={}, headers=admin)
            assert done.status_code == 200, done.text
            assert done.json()["source"] == str(path)
            assert done.json()["models"] == len(data["models"])
            assert "sim-extra" not in await model_ids()
    finally:
        output = stop_process(gw)
    assert gw.process.returncode == 0, output
    assert "config reload refused" in output and "profiles: missing" in output
