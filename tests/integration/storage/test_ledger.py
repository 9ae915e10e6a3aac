"""The usage ledger: every request recorded, written off the request path, unaffected
by a slow or absent database, and drained on SIGTERM."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from urllib.parse import urlsplit

import asyncpg
import grpc
import pytest
from gateway.v1 import chat_service_pb2 as chat
from gateway.v1 import model_service_pb2 as models
from gateway.v1 import router_service_pb2 as router

from server.base.tokens import estimate
from tests.support.facade import set_params
from tests.support.faults import tcp_proxy
from tests.support.gateways import running_gateway, start_process, stop_process, write_config
from tests.support.grpc_stubs import API, ROUTER, Stubs
from tests.support.shared_state import AdminClient, config_with
from tests.support.upstreams.anthropic import AnthropicWire
from tests.support.upstreams.base import Usage, serving
from tests.support.upstreams.config import model, provider, with_models
from tests.support.upstreams.openai import OpenAIWire

HELLO = [chat.ChatMessage(role="user", content="hello")]


def _chat(model: str = "sim-mini", **extra) -> chat.CreateChatCompletionRequest:  # type: ignore[no-untyped-def]
    return chat.CreateChatCompletionRequest(model=model, messages=HELLO, **extra)


async def test_every_request_is_recorded_success_or_failure(tmp_path):
    config = config_with(sqlite_path=str(tmp_path / "gw.db"), limits={"count_listings": True})
    async with running_gateway(config) as gw:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel:
            _, secret = await AdminClient(channel).create("rec", requests_per_minute=2)
            stubs, mine = Stubs(channel), (("x-api-key", secret),)
            ok = await stubs.chat.CreateChatCompletion(
                _chat(), metadata=(*mine, ("x-request-id", "req-ok-1"))
            )
            stream = stubs.chat.StreamChatCompletion(
                chat.StreamChatCompletionRequest(model="sim-pro", messages=HELLO), metadata=mine
            )
            assert [c async for c in stream][-1].choices[0].finish_reason == "stop"
            for bad in (_chat(temperature=5), _chat("no-such")):
                with pytest.raises(grpc.aio.AioRpcError):
                    await stubs.chat.CreateChatCompletion(bad, metadata=mine)
            with pytest.raises(grpc.aio.AioRpcError) as limited:
                await stubs.models.ListModels(models.ListModelsRequest(), metadata=mine)
            assert limited.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        ledger = gw.gateway.accounts.ledger
        await ledger.flush()
        rows = await gw.gateway.store.db.fetch("SELECT * FROM usage_records ORDER BY id")
    assert [(r["method"], r["status"], r["error_reason"]) for r in rows] == [
        ("CreateChatCompletion", "OK", ""),
        ("StreamChatCompletion", "OK", ""),
        ("CreateChatCompletion", "INVALID_ARGUMENT", "INVALID_ARGUMENT"),
        ("CreateChatCompletion", "NOT_FOUND", "MODEL_NOT_FOUND"),
        ("ListModels", "RESOURCE_EXHAUSTED", "RATE_LIMITED"),
    ]
    first = rows[0]
    assert first["request_id"] == "req-ok-1" and first["key_name"] == "rec"
    assert (first["model"], first["provider"]) == ("sim-mini", "sim-mini-primary")
    assert first["prompt_tokens"] == ok.usage.prompt_tokens
    assert first["completion_tokens"] == ok.usage.completion_tokens
    assert first["total_cost_usd"] == pytest.approx(ok.usage.total_cost_usd)
    assert first["input_cost_usd"] == pytest.approx(ok.usage.input_cost_usd)
    assert first["latency_ms"] > 0 and first["ttft_ms"] is not None
    assert rows[1]["model"] == "sim-pro" and rows[1]["total_tokens"] > 0
    assert rows[3]["model"] == "no-such" and rows[3]["total_cost_usd"] is None
    assert rows[3]["prompt_tokens"] == rows[3]["completion_tokens"] == 0


async def test_a_row_carries_every_cost_and_the_route_that_chose_its_model(tmp_path):
    config = config_with(sqlite_path=str(tmp_path / "gw.db"))
    config["routing"]["record_prompts"] = True
    standard = next(m for m in config["models"] if m["id"] == "sim-standard")
    standard["providers"][0]["params"]["cached_ratio"] = 0.5
    standard["aliases"] = ["house-standard"]
    async with running_gateway(config) as gw:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel:
            stubs = Stubs(channel)
            cached = await stubs.chat.CreateChatCompletion(
                chat.CreateChatCompletionRequest(
                    model="sim-standard",
                    messages=[chat.ChatMessage(role="user", content="w " * 200)],
                ),
                metadata=API,
            )
            routed = await stubs.router.Infer(
                router.InferRequest(prompt="Prove that there are infinitely many primes."),
                metadata=ROUTER,
            )
        await gw.gateway.accounts.ledger.flush()
        rows = await gw.gateway.store.db.fetch("SELECT * FROM usage_records ORDER BY id")
    first, second = rows
    assert cached.usage.prompt_tokens_details.cached_tokens > 0
    assert first["model"] == "sim-standard"  # the model that answered, not the alias
    for field in ("input_cost_usd", "output_cost_usd", "cache_input_cost_usd", "total_cost_usd"):
        assert first[field] == pytest.approx(getattr(cached.usage, field)), field
    assert first["cached_tokens"] == cached.usage.prompt_tokens_details.cached_tokens
    assert first["cache_write_tokens"] == 0 and first["cache_write_cost_usd"] is None
    assert first["reasoning_tokens"] == cached.usage.completion_tokens_details.reasoning_tokens
    assert (first["route_profile"], first["difficulty"], first["prompt"]) == ("", None, None)
    assert second["model"] == routed.model and second["route_profile"] == "balanced"
    # The answer shows the difficulty to four places; the row keeps it whole.
    assert second["difficulty"] == pytest.approx(routed.route.difficulty, abs=5e-5)
    assert "infinitely many primes" in second["prompt"]


async def test_a_row_holds_the_callers_token_details_and_cache_hits(tmp_path):
    async with serving(AnthropicWire()) as claude, serving(OpenAIWire()) as oa:
        claude.usage = Usage(prompt_tokens=100, cached_tokens=60, cache_write_tokens=25,
                             cache_write_1h_tokens=10)  # fmt: skip
        oa.usage = Usage(prompt_tokens=30, reasoning_tokens=7)
        data = with_models(model("an", provider("an-1", "anthropic", claude.url)),
                           model("oa", provider("oa-1", "openai", oa.url)))  # fmt: skip
        data["storage"] |= {"sqlite_path": str(tmp_path / "gw.db")}
        data["response_cache"] = {"keys": ["*"]}
        async with running_gateway(data) as gw:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel:
                create = Stubs(channel).chat.CreateChatCompletion
                written = await create(_chat("an"), metadata=API)
                paid = await create(_chat("oa", temperature=0), metadata=API)
                hit = await create(_chat("oa", temperature=0), metadata=API)
            await gw.gateway.accounts.ledger.flush()
            rows = await gw.gateway.store.db.fetch("SELECT * FROM usage_records ORDER BY id")
    anthropic_row, paid_row, hit_row = rows
    assert written.usage.HasField("cache_write_cost_usd")
    assert (anthropic_row["cache_write_tokens"], anthropic_row["cache_write_1h_tokens"]) == (25, 10)
    assert anthropic_row["cache_write_cost_usd"] == pytest.approx(
        written.usage.cache_write_cost_usd
    )
    assert anthropic_row["total_cost_usd"] == pytest.approx(written.usage.total_cost_usd)
    assert (
        paid_row["reasoning_tokens"] == paid.usage.completion_tokens_details.reasoning_tokens == 7
    )
    assert not paid_row["response_cached"]
    assert hit.usage.response_cached and hit_row["response_cached"]
    assert hit_row["total_cost_usd"] == 0
    # The times the caller was told, to the microsecond.
    assert anthropic_row["ttft_ms"] == pytest.approx(written.usage.ttft_ms, abs=1e-3)
    assert paid_row["ttft_ms"] == pytest.approx(paid.usage.ttft_ms, abs=1e-3)


async def test_failed_calls_are_recorded_as_their_failure_never_ok(tmp_path):
    """A stream broken after its first token, a stream its caller cancelled, a unary
    call whose every provider failed and one broken mid-answer: each row carries the
    call's failure, the provider that broke it, and the tokens that did go out."""
    data = config_with(sqlite_path=str(tmp_path / "gw.db"))
    set_params(data, "sim-mini", fail_after_tokens=1)
    set_params(data, "sim-standard", error_rate=1.0)
    set_params(data, "sim-pro", tokens_per_second=5, min_reply_tokens=40, max_reply_tokens=40)
    async with running_gateway(data) as gw:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel:
            stubs = Stubs(channel)

            def meta(request_id: str):  # type: ignore[no-untyped-def]
                return (*API, ("x-request-id", request_id))

            broken = stubs.chat.StreamChatCompletion(
                chat.StreamChatCompletionRequest(model="sim-mini", messages=HELLO),
                metadata=meta("broken-stream"),
            )
            received = []
            with pytest.raises(grpc.aio.AioRpcError) as failed:
                async for chunk in broken:
                    received.append(chunk)
            assert failed.value.code() == grpc.StatusCode.UNAVAILABLE
            assert [c.choices[0].delta.content for c in received][1] == "(simulated)"

            cancelled = stubs.chat.StreamChatCompletion(
                chat.StreamChatCompletionRequest(model="sim-pro", messages=HELLO),
                metadata=meta("cancelled-stream"),
            )
            async for chunk in cancelled:
                if chunk.choices[0].delta.content:
                    break
            cancelled.cancel()

            for model, request_id in (("sim-standard", "unary-failed"),
                                      ("sim-mini", "unary-broken")):  # fmt: skip
                with pytest.raises(grpc.aio.AioRpcError) as failed:
                    await stubs.chat.CreateChatCompletion(_chat(model), metadata=meta(request_id))
                assert failed.value.code() == grpc.StatusCode.UNAVAILABLE
        ledger = gw.gateway.accounts.ledger
        deadline = time.monotonic() + 5
        while True:
            await ledger.flush()
            rows = await gw.gateway.store.db.fetch(
                "SELECT request_id, status, error_reason, provider, completion_tokens "
                "FROM usage_records ORDER BY id"
            )
            if len(rows) == 4 or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.05)
    got = {r["request_id"]: (r["status"], r["error_reason"], r["provider"]) for r in rows}
    assert got == {
        "broken-stream": ("UNAVAILABLE", "UPSTREAM_ERROR", "sim-mini-primary"),
        "cancelled-stream": ("CANCELLED", "CANCELLED", "sim-pro-primary"),
        "unary-failed": ("UNAVAILABLE", "ALL_PROVIDERS_FAILED", ""),
        "unary-broken": ("UNAVAILABLE", "UPSTREAM_ERROR", "sim-mini-primary"),
    }
    tokens = {r["request_id"]: r["completion_tokens"] for r in rows}
    # The text that went out before the stream broke (the gateway counts it itself: the
    # upstream never reported), and before the cancel.
    assert tokens["broken-stream"] == estimate("(simulated)")
    assert tokens["cancelled-stream"] >= estimate("(simulated)")


async def test_a_locked_database_does_not_slow_requests(pg_url):
    data = config_with(database_url=pg_url, ledger={"flush_interval_s": 0.05})
    async with running_gateway(data) as gw:
        db = gw.gateway.store.db
        before = await _count(db)
        blocker = await asyncpg.connect(pg_url)
        tx = blocker.transaction()
        await tx.start()
        # Every ledger write now waits on this lock.
        await blocker.execute("LOCK TABLE usage_records IN ACCESS EXCLUSIVE MODE")
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel:
                stubs = Stubs(channel)
                await stubs.chat.CreateChatCompletion(_chat(), metadata=API)
                await asyncio.sleep(0.2)  # the flusher is stuck on the lock by now
                slowest = 0.0
                for _ in range(40):
                    started = time.perf_counter()
                    await stubs.chat.CreateChatCompletion(_chat(), metadata=API)
                    slowest = max(slowest, time.perf_counter() - started)
            # A request that waited on the ledger would wait for the lock, held all along,
            # or fail at the storage bound (2 s): far beyond a loaded machine's slowest.
            assert slowest < 2, f"a request took {slowest:.3f}s while the ledger was blocked"
            assert gw.gateway.accounts.ledger.pending >= 40  # held, not lost
        finally:
            await tx.rollback()
            await blocker.close()
        deadline = time.monotonic() + 5
        while await _count(db) < before + 41:
            assert time.monotonic() < deadline, "the buffered records never reached the database"
            await asyncio.sleep(0.05)


async def test_records_wait_out_an_unavailable_database(pg_url):
    """PostgreSQL goes away (every connection reset, new ones closed at once) while
    requests go on: their records wait in the buffer, the writes are retried, and when
    the database is back every record lands, none dropped."""
    target = urlsplit(pg_url)
    async with tcp_proxy("127.0.0.1", target.port or 5432) as proxy:
        url = f"postgresql://postgres@127.0.0.1:{proxy.port}{target.path}"
        data = config_with(database_url=url, ledger={"flush_interval_s": 0.05})
        async with running_gateway(data) as gw:
            ledger, usage = gw.gateway.accounts.ledger, gw.gateway.store.usage
            before, written = await usage.count(), ledger.written
            proxy.down()
            async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel:
                for _ in range(20):
                    await Stubs(channel).chat.CreateChatCompletion(_chat(), metadata=API)
            # The flusher tried, and tried again, while the database was away.
            deadline = time.monotonic() + 5
            while proxy.refused < 3:
                assert time.monotonic() < deadline, "the ledger never tried to write"
                await asyncio.sleep(0.05)
            assert ledger.written == written and ledger.dropped == 0
            proxy.up()
            deadline = time.monotonic() + 10
            while await usage.count() < before + 20:
                assert time.monotonic() < deadline, "the records never reached the database"
                await asyncio.sleep(0.05)
            assert await usage.count() == before + 20
            assert (ledger.dropped, ledger.poisoned, ledger.pending) == (0, 0, 0)


async def _count(db) -> int:  # type: ignore[no-untyped-def]
    row = await db.fetchrow("SELECT COUNT(*) AS n FROM usage_records")
    return int(row["n"])


def _rows(path: str) -> int:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT COUNT(*) FROM usage_records").fetchone()[0]


async def test_sigterm_drains_the_ledger_buffer(tmp_path):
    db = str(tmp_path / "drain.db")
    # Nothing is flushed before shutdown: an hour between flushes, batches never fill.
    data = config_with(sqlite_path=db, ledger={"flush_interval_s": 3600, "batch_size": 100_000})
    gw = start_process("--config", str(write_config(tmp_path, data)))
    try:
        assert gw.grpc_port, "".join(gw.output)
        async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel:
            stubs = Stubs(channel)
            await asyncio.gather(*(
                stubs.chat.CreateChatCompletion(_chat(), metadata=API) for _ in range(30)
            ))  # fmt: skip
        assert _rows(db) == 0
    finally:
        output = stop_process(gw)
    assert gw.process.returncode == 0, output
    assert "drained; 30 records written" in output
    assert _rows(db) == 30
