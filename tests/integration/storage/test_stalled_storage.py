"""A stalled database or Redis, through a TCP proxy the test controls: requests that
need storage fail fast with an error that names storage, requests that do not need it
go on, and start-up with a wrong Redis URL says so in one line (issue 12, items 2, 7)."""

from __future__ import annotations

import time
from urllib.parse import urlsplit

import grpc
import httpx
import pytest
from gateway.v1 import chat_service_pb2 as chat

from tests.support.faults import tcp_proxy
from tests.support.gateways import running_gateway, start_process, stop_process, write_config
from tests.support.grpc_stubs import API, Stubs, details
from tests.support.shared_state import AdminClient, config_with

HELLO = [chat.ChatMessage(role="user", content="hello")]
REQUEST = chat.CreateChatCompletionRequest(model="sim-mini", messages=HELLO)
BODY = {"model": "sim-mini", "messages": [{"role": "user", "content": "hello"}]}


async def _fails_fast_naming_storage(stubs: Stubs, metadata, limit_s: float = 2.0) -> None:  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    with pytest.raises(grpc.aio.AioRpcError) as failed:
        await stubs.chat.CreateChatCompletion(REQUEST, metadata=metadata, timeout=30)
    took = time.perf_counter() - started
    assert failed.value.code() == grpc.StatusCode.UNAVAILABLE, failed.value.details()
    assert details(failed.value)["ErrorInfo"].reason == "STORAGE_UNAVAILABLE"  # type: ignore[attr-defined]
    assert took < limit_s, f"took {took:.2f}s"


async def test_a_stalled_postgres_fails_stored_keys_fast_and_names_storage(pg_url):
    target = urlsplit(pg_url)
    async with tcp_proxy("127.0.0.1", target.port or 5432) as proxy:
        url = f"postgresql://postgres@127.0.0.1:{proxy.port}{target.path}"
        data = config_with(
            database_url=url, ledger={"flush_interval_s": 0.05, "drain_timeout_s": 1}
        )
        data["storage"].update({"timeout_s": 0.5, "key_cache_ttl_s": 0})
        async with running_gateway(data) as gw:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel:
                _, secret = await AdminClient(channel).create("stalled-db")
                _, known = await AdminClient(channel).create("stalled-db-known")
                stubs, mine = Stubs(channel), (("x-api-key", secret),)
                await stubs.chat.CreateChatCompletion(REQUEST, metadata=(("x-api-key", known),))
                proxy.stall()
                try:
                    await _fails_fast_naming_storage(stubs, mine)
                    # A key looked up shortly before is served from its cached lookup.
                    await stubs.chat.CreateChatCompletion(REQUEST, metadata=(("x-api-key", known),))
                    # A key from the config needs no database: it goes on being served.
                    reply = await stubs.chat.CreateChatCompletion(REQUEST, metadata=API)
                    assert reply.choices[0].finish_reason == "stop"
                    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}") as c:
                        rest = await c.post(
                            "/v1/chat/completions", json=BODY, headers={"x-api-key": secret}
                        )
                    assert rest.status_code == 503, rest.text
                    assert rest.json()["error"]["code"] == "storage_unavailable"
                    assert rest.headers["retry-after"] == "1"
                finally:
                    proxy.resume()
                await stubs.chat.CreateChatCompletion(REQUEST, metadata=mine)
            proxy.stall()  # shutdown with a stalled database still ends


async def test_a_cut_postgres_connection_is_storage_unavailable_not_internal(pg_url):
    target = urlsplit(pg_url)
    async with tcp_proxy("127.0.0.1", target.port or 5432) as proxy:
        data = config_with(
            database_url=f"postgresql://postgres@127.0.0.1:{proxy.port}{target.path}"
        )
        data["storage"].update({"timeout_s": 0.5, "key_cache_ttl_s": 0})
        data["ledger"] = {"drain_timeout_s": 1}
        async with (
            running_gateway(data) as gw,
            grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel,
        ):
            _, secret = await AdminClient(channel).create("cut-db")
            stubs, mine = Stubs(channel), (("x-api-key", secret),)
            proxy.stall()
            proxy.cut()
            try:
                await _fails_fast_naming_storage(stubs, mine)
            finally:
                proxy.resume()


@pytest.mark.parametrize("fail_open", [False, True])
async def test_a_stalled_redis(fail_open, redis_prefix):
    async with tcp_proxy("127.0.0.1", 6379) as proxy:
        data = config_with(
            redis_url=f"redis://127.0.0.1:{proxy.port}/0",
            redis_prefix=redis_prefix + f"stall{int(fail_open)}:",
        )
        data["storage"]["timeout_s"] = 0.5
        data["limits"] = {"fail_open": fail_open}
        async with (
            running_gateway(data) as gw,
            grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel,
        ):
            stubs = Stubs(channel)
            await stubs.chat.CreateChatCompletion(REQUEST, metadata=API)
            proxy.stall()
            try:
                if fail_open:
                    started = time.perf_counter()
                    reply = await stubs.chat.CreateChatCompletion(REQUEST, metadata=API)
                    assert reply.choices[0].finish_reason == "stop"
                    assert time.perf_counter() - started < 2
                else:
                    await _fails_fast_naming_storage(stubs, API)
            finally:
                proxy.resume()
                proxy.cut()  # the stalled connections are of no use any more


@pytest.mark.parametrize(
    "url, said",
    [
        ("redis://127.0.0.1:1/0", "cannot reach Redis"),
        ("nonsense://x", "not a usable Redis URL"),
        ("redis+cluster://:pw-secret@127.0.0.1:1", "cannot reach Redis"),
        ("redis+cluster://127.0.0.1", "not a usable Redis URL"),
        ("redis+sentinel://:pw-secret@127.0.0.1:1/gateway", "cannot reach Redis"),
        ("redis+sentinel://127.0.0.1:1", "not a usable Redis URL"),
    ],
)
def test_a_wrong_redis_url_at_start_up_is_one_clear_line(tmp_path, url, said):
    data = config_with()
    data["storage"]["redis_url"] = url
    gw = start_process("--config", str(write_config(tmp_path, data)))
    output = stop_process(gw)
    assert gw.process.returncode != 0
    assert f"storage.redis_url: {said}" in output, output
    assert "Traceback" not in output and "pw-secret" not in output, output


@pytest.mark.parametrize(
    "query, field",
    [
        ("start_time=-99999999999999", "start_time"),
        ("end_time=9223372036854775807", "end_time"),
        ("start_time=0&end_time=99999999999999", "end_time"),
    ],
)
async def test_extreme_usage_times_are_a_400(pg_url, query, field):
    async with (
        running_gateway(config_with(database_url=pg_url)) as gw,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}") as client,
    ):
        reply = await client.get(f"/v1/usage?{query}", headers=dict(API))
        assert reply.status_code == 400, reply.text
        assert reply.json()["error"]["param"] == field
        fine = await client.get("/v1/usage?start_time=0&end_time=253402300799", headers=dict(API))
        assert fine.status_code == 200, fine.text
