"""Each adapter reads its provider's documented stream (tests/fixtures/transcripts/),
served byte for byte from a raw upstream on loopback: the text, the finish reason and
the usage come out as the provider meant them."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

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
from tests.support.upstreams import bedrock
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
    ("azure_openai", "azure_openai_chat_stream.sse",
     "/openai/deployments/gpt-fake/chat/completions?api-version=2024-10-21", "Hello!", "stop",
     TokenCounts(9, 2)),
    ("bedrock", "bedrock_converse_stream.jsonl",
     f"/model/{quote(bedrock.MODEL, safe='')}/converse-stream", "Hello!", "stop", TokenCounts(9, 2)),
]  # fmt: skip
# Params the adapters need beyond the common ones.
PARAMS: dict[str, dict[str, Any]] = {"azure_openai": {"deployment": "gpt-fake"}}


def served(transcript: str) -> bytes:
    """The transcript's bytes as the upstream sends them: SSE as it is; Bedrock's events
    (kept as JSON lines, one documented event each) in AWS's binary event-stream framing."""
    body = (TRANSCRIPTS / transcript).read_bytes()
    if not transcript.endswith(".jsonl"):
        return SSE_HEAD + body
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/vnd.amazon.eventstream\r\n"
    events = [json.loads(line) for line in body.splitlines()]
    return (
        head
        + b"connection: close\r\n\r\n"
        + b"".join(bedrock.event(e["event"], e["data"]) for e in events)
    )


@pytest.mark.parametrize("adapter, transcript, path, text, finish, counts", CASES,
                         ids=[c[0] for c in CASES])  # fmt: skip
async def test_the_adapter_reads_the_documented_stream(
    adapter: str, transcript: str, path: str, text: str, finish: str, counts: TokenCounts
):
    body = served(transcript)

    async def answer(request: RawRequest, writer: asyncio.StreamWriter) -> None:
        writer.write(body)

    async with raw_upstream(answer) as upstream:
        entry = provider(f"{adapter}-golden", adapter, upstream.url, **PARAMS.get(adapter, {}))
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
