"""One URL rule in every dialect and adapter (server/base/urls.py): a URL a caller asks
an upstream to fetch is an https URL of a public host, whatever field carries it, so no
caller can point a self-hosted upstream at an address inside its network."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from server.base import urls
from server.base.errors import InvalidArgument
from server.base.generation import GenerationRequest, ImagePart, Message
from tests.integration.upstreams.test_adapters import build, collect
from tests.support.faults import RawRequest, http_response, raw_upstream
from tests.support.gateways import API_KEY, running_gateway

HOSTILE = [
    "http://example.com/cat.png",  # not https (what /v1/messages used to forward)
    "https://127.0.0.1/cat.png",
    "https://10.0.0.8/cat.png",
    "https://169.254.169.254/latest/meta-data/",  # the clouds' metadata service
    "https://100.64.0.1/x.png",  # shared address space
    "https://localhost/cat.png",
    "https://api.localhost/cat.png",
    "https://metadata.google.internal/computeMetadata/v1/",
    "https://printer.local/x.png",
    "https://intranet/cat.png",  # a one-label name: the resolver's search list
    "https://2130706433/cat.png",  # 127.0.0.1 in decimal
    "https://0x7f.1/cat.png",  # and in hex
    "https://[::1]/cat.png",
    "https://[::ffff:10.0.0.1]/cat.png",
    "https://[64:ff9b::a00:1]/cat.png",  # NAT64 of 10.0.0.1
    "https://[fd00::1]/cat.png",
    "https://user:secret@example.com/cat.png",
    "https://example.com:99999/cat.png",
    "file:///etc/passwd",
    "gopher://example.com/",
    "https://example.com/" + "a" * urls.MAX_URL_CHARS,
]
PUBLIC = ["https://example.com/cat.png", "https://8.8.8.8/cat.png",
          "https://[2001:4860:4860::8888]/cat.png", "https://upload.wikimedia.org/a.png"]  # fmt: skip


def test_the_rule() -> None:
    assert [u for u in HOSTILE if urls.refusal(u) is None] == []
    assert [u for u in PUBLIC if urls.refusal(u) is not None] == []


def _chat(url: str) -> tuple[str, dict[str, Any]]:
    content = [{"type": "text", "text": "What is it?"},
               {"type": "image_url", "image_url": {"url": url}}]  # fmt: skip
    return "/v1/chat/completions", {
        "model": "sim-mini", "messages": [{"role": "user", "content": content}]}  # fmt: skip


def _messages(block: dict[str, Any], **more: Any) -> tuple[str, dict[str, Any]]:
    return "/v1/messages", {"model": "sim-mini", "max_tokens": 16, **more,
                            "messages": [{"role": "user", "content": [block]}]}  # fmt: skip


def _responses(part: dict[str, Any] | None = None, **more: Any) -> tuple[str, dict[str, Any]]:
    content = [{"type": "input_text", "text": "What is it?"}, *([part] if part else [])]
    return "/v1/responses", {"model": "sim-mini", **more,
                             "input": [{"role": "user", "content": content}]}  # fmt: skip


def _gemini(url: str) -> tuple[str, dict[str, Any]]:
    part = {"fileData": {"mimeType": "image/png", "fileUri": url}}
    return "/v1beta/models/sim-mini:generateContent", {
        "contents": [{"role": "user", "parts": [{"text": "What is it?"}, part]}]}  # fmt: skip


# Every field of every dialect that carries a URL for an upstream to fetch. (An MCP
# server's URL is stricter: only configured servers and mcp.remote_urls, see
# tests/integration/mcp/test_model_calls.py.)
FIELDS: dict[str, tuple[Callable[[str], tuple[str, dict[str, Any]]], str]] = {
    "chat image": (_chat, "messages[0].content[1].image_url.url"),
    "messages image": (lambda u: _messages({"type": "image", "source": {"type": "url", "url": u}}),
                       "messages[0].content[0].source.url"),
    "messages document": (
        lambda u: _messages({"type": "document", "source": {"type": "url", "url": u}}),
        "messages[0].content[0].source.url"),
    "responses image": (lambda u: _responses({"type": "input_image", "image_url": u}),
                        "input[0].content[1].image_url"),
    "responses file": (lambda u: _responses({"type": "input_file", "file_url": u}),
                       "input[0].content[1].file_url"),
    "gemini file": (_gemini, "contents[0].parts[1].fileData.fileUri"),
}  # fmt: skip


@pytest.fixture(scope="module")
async def gateway_url():
    async with running_gateway() as gw:
        yield f"http://127.0.0.1:{gw.http_port}"


@pytest.mark.parametrize("field", FIELDS)
async def test_every_dialect_refuses_a_url_outside_the_rule_naming_its_field(
    gateway_url: str, field: str
) -> None:
    make, param = FIELDS[field]
    async with httpx.AsyncClient(base_url=gateway_url, timeout=10,
                                 headers={"x-api-key": API_KEY}) as client:  # fmt: skip
        for url in HOSTILE:
            path, body = make(url)
            reply = await client.post(path, json=body)
            assert reply.status_code == 400, (url, reply.text)
            error = reply.json()["error"]
            assert error.get("param", param) == param, (url, error)
            assert param in str(error), (url, error)
        for url in PUBLIC:  # refused, if at all, for what the model lacks, not the URL
            path, body = make(url)
            reply = await client.post(path, json=body)
            assert param not in reply.text, (url, reply.text)


@pytest.mark.parametrize("adapter", ["openai", "anthropic", "gemini"])
async def test_every_adapter_applies_the_rule_before_asking_its_upstream(adapter: str) -> None:
    seen: list[RawRequest] = []

    async def answer(request: RawRequest, writer: Any) -> None:
        seen.append(request)
        writer.write(http_response("{}"))

    async with raw_upstream(answer) as upstream:
        provider = build(adapter, upstream.url, stream=False)
        image = ImagePart("https://169.254.169.254/latest/meta-data/")
        request = GenerationRequest(messages=(Message("user", "What is it?", (image,)),))
        try:
            with pytest.raises(InvalidArgument, match="private or internal address"):
                await collect(provider.generate(request))
        finally:
            await provider.aclose()
    assert seen == []
