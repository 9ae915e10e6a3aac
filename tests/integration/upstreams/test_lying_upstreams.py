"""Upstreams that lie or flood, as real loopback servers: one that ignores max_tokens is
cut at it (with a small slack) and billed within it, streamed or whole, and a failed
call is billed for what was relayed and asked for, never for what the upstream claims
or sent past the bound; a budget holds within one reservation against such an
upstream."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx

from server.base import tokens
from tests.support.faults import SSE_HEAD, RawRequest, http_response, raw_upstream
from tests.support.gateways import API_KEY, running_gateway
from tests.support.upstreams.config import model, provider, with_models

HEADERS = {"x-api-key": API_KEY}
# An upstream's usage report that claims far more than anyone asked for.
CLAIMED = {"prompt_tokens": 9, "completion_tokens": 2_000_000_000}


def _flooding(chunk_bytes: int, chunks: int, fail: bool = False):  # type: ignore[no-untyped-def]
    """Streams `chunks` deltas of `chunk_bytes` whatever max_tokens says, then a usage
    report claiming two billion tokens, or with `fail`, cuts the connection instead."""

    async def handler(request: RawRequest, writer: asyncio.StreamWriter) -> None:
        writer.write(SSE_HEAD)
        piece = json.dumps(
            {"choices": [{"index": 0, "delta": {"content": "word " * (chunk_bytes // 5)}}]}
        )
        for _ in range(chunks):
            writer.write(f"data: {piece}\n\n".encode())
            await writer.drain()
        if fail:
            writer.transport.abort()
            return
        last = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": CLAIMED}
        writer.write(f"data: {json.dumps(last)}\n\ndata: [DONE]\n\n".encode())

    return handler


def _whole(text_bytes: int):  # type: ignore[no-untyped-def]
    """Answers with `text_bytes` of text whatever max_tokens says, and no usage."""

    async def handler(request: RawRequest, writer: asyncio.StreamWriter) -> None:
        answer = {"id": "x", "object": "chat.completion", "choices": [{
            "index": 0, "message": {"role": "assistant", "content": "word " * (text_bytes // 5)},
            "finish_reason": "stop"}]}  # fmt: skip
        writer.write(http_response(json.dumps(answer)))

    return handler


def _config(url: str, tmp_path: Path, stream: bool = True, **key: Any) -> dict[str, Any]:
    data = with_models(model("liar", provider("liar", "openai", url, stream=stream,
                                              read_timeout_s=5)))  # fmt: skip
    data["keys"][0].update(key)
    data["storage"] |= {"sqlite_path": str(tmp_path / "gw.db")}
    return data


async def _ledger(gw: Any) -> list[Any]:
    await gw.gateway.accounts.ledger.flush()
    return await gw.gateway.store.db.fetch(
        "SELECT status, completion_tokens, total_cost_usd FROM usage_records ORDER BY id"
    )


def _sse_text(body: str) -> tuple[str, str | None, dict[str, Any] | None]:
    text, finish, usage = [], None, None
    for line in body.splitlines():
        if line.startswith("data: {"):
            chunk = json.loads(line[6:])
            for choice in chunk.get("choices", ()):
                text.append(choice["delta"].get("content", ""))
                finish = choice.get("finish_reason") or finish
            usage = chunk.get("usage") or usage
    return "".join(text), finish, usage


async def test_a_stream_past_max_tokens_is_cut_there_and_billed_within_it(tmp_path: Path) -> None:
    async with (
        raw_upstream(_flooding(64 * 1024, 200)) as liar,
        running_gateway(_config(liar.url, tmp_path)) as gw,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}", timeout=30) as c,
    ):
        reply = await c.post("/v1/chat/completions", headers=HEADERS, json={
            "model": "liar", "max_tokens": 100, "stream": True,
            "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": "Be brief."}]})  # fmt: skip
        assert reply.status_code == 200
        text, finish, usage = _sse_text(reply.text)
        # Cut at max_tokens and its slack, not after 12 MiB; the upstream let go.
        slack = (100 + tokens.COMPLETION_SLACK_TOKENS) * tokens.BYTES_PER_TOKEN
        assert 0 < len(text) <= slack
        assert finish == "length"
        assert usage is not None and usage["completion_tokens"] <= 100
        await asyncio.wait_for(liar.closed.wait(), 5)
        rows = await _ledger(gw)
    assert [(r["status"], r["completion_tokens"]) for r in rows] == [("OK", 100)]


async def test_a_whole_answer_past_max_tokens_is_cut_there_and_billed_within_it(
    tmp_path: Path,
) -> None:
    async with (
        raw_upstream(_whole(200_000)) as liar,
        running_gateway(_config(liar.url, tmp_path, stream=False)) as gw,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}", timeout=30) as c,
    ):
        reply = await c.post("/v1/chat/completions", headers=HEADERS, json={
            "model": "liar", "max_tokens": 50,
            "messages": [{"role": "user", "content": "Be brief."}]})  # fmt: skip
        assert reply.status_code == 200, reply.text
        answer = reply.json()
        choice = answer["choices"][0]
        slack = (50 + tokens.COMPLETION_SLACK_TOKENS) * tokens.BYTES_PER_TOKEN
        assert 0 < len(choice["message"]["content"]) <= slack
        assert choice["finish_reason"] == "length"
        assert answer["usage"]["completion_tokens"] <= 50
        rows = await _ledger(gw)
    assert [(r["status"], r["completion_tokens"]) for r in rows] == [("OK", 50)]


async def test_a_failed_call_is_billed_for_what_was_relayed_and_asked_for(tmp_path: Path) -> None:
    # Twenty 512 KiB deltas, then the connection cut: the call fails after its first token.
    async with (
        raw_upstream(_flooding(512 * 1024, 20, fail=True)) as liar,
        running_gateway(_config(liar.url, tmp_path, budget_usd=1.0)) as gw,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}", timeout=30) as c,
    ):
        reply = await c.post("/v1/chat/completions", headers=HEADERS, json={
            "model": "liar", "stream": True,
            "messages": [{"role": "user", "content": "Hi"}]})  # fmt: skip
        text, finish, _ = _sse_text(reply.text)
        rows = await _ledger(gw)
    # A budgeted key's request is bounded by the reservation's max_tokens (1,024).
    assert len(text) <= (1024 + tokens.COMPLETION_SLACK_TOKENS) * tokens.BYTES_PER_TOKEN
    assert finish == "length"
    assert [r["completion_tokens"] for r in rows] == [1024]
    assert rows[0]["total_cost_usd"] < 0.005  # 1,024 tokens at $4 a million, and the prompt


async def test_a_budget_holds_within_one_reservation_against_a_lying_upstream(
    tmp_path: Path,
) -> None:
    async with (
        raw_upstream(_flooding(64 * 1024, 50)) as liar,
        running_gateway(_config(liar.url, tmp_path, budget_usd=0.02)) as gw,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}", timeout=30) as c,
    ):
        statuses = []
        for _ in range(12):
            reply = await c.post("/v1/chat/completions", headers=HEADERS, json={
                "model": "liar", "stream": True,
                "messages": [{"role": "user", "content": "Hi"}]})  # fmt: skip
            statuses.append(reply.status_code)
            if reply.status_code == 429:
                break
        rows = await _ledger(gw)
    assert statuses[-1] == 429 and statuses.count(200) >= 2, statuses
    spent = sum(r["total_cost_usd"] or 0 for r in rows)
    assert spent <= 0.02, spent
