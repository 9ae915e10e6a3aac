"""Each adapter reads its provider's documented stream (tests/fixtures/transcripts/),
served byte for byte from a raw upstream on loopback: the text, the finish reason and
the usage come out as the provider meant them."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from server.base.config import ProviderConfig
from server.base.generation import (
    Finished,
    GenerationRequest,
    Message,
    TextDelta,
    TokenCounts,
)
from server.providers import registry
from tests.support.faults import SSE_HEAD, RawRequest, raw_upstream
from tests.support.upstreams.config import provider

TRANSCRIPTS = Path(__file__).resolve().parents[2] / "fixtures" / "transcripts"
REQUEST = GenerationRequest(messages=(Message("user", "Say hello."),), max_tokens=64)

CASES = [
    # adapter, transcript, path asked, text, finish, counts
    ("openai", "openai_chat_stream.sse", "/v1/chat/completions", "Hello!", "stop",
     TokenCounts(9, 2)),
    ("anthropic", "anthropic_messages_stream.sse", "/v1/messages", "Hello!", "stop",
     TokenCounts(25, 15)),
    ("tgi", "tgi_generate_stream.sse", "/generate_stream", "Hello!", "stop",
     TokenCounts(6, 3)),
    ("gemini", "gemini_stream_generate_content.sse",
     "/v1beta/models/gemini-fake:streamGenerateContent?alt=sse", "Hello!", "stop",
     TokenCounts(4, 26, reasoning_tokens=24)),
]  # fmt: skip


@pytest.mark.parametrize("adapter, transcript, path, text, finish, counts", CASES,
                         ids=[c[0] for c in CASES])  # fmt: skip
async def test_the_adapter_reads_the_documented_stream(
    adapter: str, transcript: str, path: str, text: str, finish: str, counts: TokenCounts
):
    body = (TRANSCRIPTS / transcript).read_bytes()

    async def answer(request: RawRequest, writer: asyncio.StreamWriter) -> None:
        writer.write(SSE_HEAD + body)

    async with raw_upstream(answer) as upstream:
        entry = provider(f"{adapter}-golden", adapter, upstream.url)
        p = registry.build(ProviderConfig.model_validate(entry), "models[0].providers[0]")
        events: list[Any] = []
        try:
            async for event in p.generate(REQUEST):
                events.append(event)
        finally:
            await p.aclose()
    (asked,) = upstream.requests
    assert asked.path == path
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == text
    assert events[-1] == Finished(finish, counts)
    assert sum(isinstance(e, Finished) for e in events) == 1
