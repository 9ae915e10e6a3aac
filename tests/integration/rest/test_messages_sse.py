"""`POST /v1/messages` with `"stream": true`, byte for byte against golden transcripts
(tests/fixtures/messages/, framed as Anthropic's streaming docs frame their examples):
named events, the keep-alive `ping`, and a failure after the start as an `error` event
with no `message_stop`.

The transcripts hold the reply of a deterministic upstream; only what a clock decides
(latency_ms, ttft_ms) is masked before comparing. `GOLDEN_UPDATE=1` rewrites them.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from tests.support.facade import A, both_modes, client, set_params, sse
from tests.support.gateways import default_config_dict, patched
from tests.support.upstreams.anthropic import AnthropicWire
from tests.support.upstreams.base import serving
from tests.support.upstreams.config import model, provider, with_models

GOLDEN = Path(__file__).resolve().parents[2] / "fixtures" / "messages"
REQUEST_ID = "0123456789abcdef0123456789abcdef"
HEADERS = {**A, "anthropic-version": "2023-06-01", "x-request-id": REQUEST_ID}
HELLO = [{"role": "user", "content": "Say hello."}]
WEATHER = {
    "name": "get_weather",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}
_CLOCKS = re.compile(rb'"(latency_ms|ttft_ms)":[0-9.e+-]+')


def masked(raw: bytes) -> bytes:
    return _CLOCKS.sub(rb'"\1":0', raw)


def check_golden(name: str, raw: bytes) -> None:
    path = GOLDEN / name
    if os.environ.get("GOLDEN_UPDATE"):
        path.write_bytes(masked(raw))
    assert masked(raw) == path.read_bytes()


def events(raw: bytes) -> list[tuple[str, Any]]:
    out = []
    for frame in raw[:-2].split(b"\n\n"):
        name, data = frame.split(b"\n")
        assert name.startswith(b"event: ") and data.startswith(b"data: "), frame
        payload = json.loads(data[len(b"data: ") :])
        assert payload["type"] == name[len(b"event: ") :].decode()
        out.append((payload["type"], payload))
    return out


async def stream(c: Any, body: dict[str, Any]) -> bytes:
    async with c.stream("POST", "/v1/messages", json={**body, "stream": True},
                        headers=HEADERS) as response:  # fmt: skip
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        raw, _ = await sse(response)
    return raw


@both_modes
@pytest.mark.parametrize(
    ("name", "body"),
    [
        ("text.sse", {"max_tokens": 6, "messages": HELLO}),
        ("tool_use.sse", {"max_tokens": 50, "messages": HELLO, "tools": [WEATHER],
                          "tool_choice": {"type": "any"}}),
        ("thinking.sse", {"max_tokens": 1030, "messages": HELLO,
                          "thinking": {"type": "enabled", "budget_tokens": 1024}}),
    ],
)  # fmt: skip
async def test_transcripts(mode: str, name: str, body: dict[str, Any]) -> None:
    async with client(mode) as c:
        raw = await stream(c, {"model": "sim-mini", **body})
    check_golden(name, raw)
    kinds = [kind for kind, _ in events(raw)]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]


@both_modes
async def test_failure_after_the_start_is_an_error_event(mode: str) -> None:
    data = set_params(default_config_dict(), "sim-mini", fail_after_tokens=2)
    for provider_ in data["models"][0]["providers"]:
        provider_["params"]["fail_after_tokens"] = 2
    async with client(mode, data) as c:
        raw = await stream(c, {"model": "sim-mini", "max_tokens": 20, "messages": HELLO})
    check_golden("error.sse", raw)
    kinds = [kind for kind, _ in events(raw)]
    assert kinds[-1] == "error" and "message_stop" not in kinds and "message_delta" not in kinds
    _, error = events(raw)[-1]
    assert error["error"]["type"] == "api_error"
    assert "Traceback" not in error["error"]["message"]


@both_modes
async def test_ping_while_the_upstream_is_slow(mode: str) -> None:
    # Half a second between tokens (see test_keepalive_comments_while_waiting).
    data = set_params(
        patched(default_config_dict(), keepalive_s=0.05), "sim-mini", tokens_per_second=2
    )
    async with client(mode, data) as c:
        raw = await stream(c, {"model": "sim-mini", "max_tokens": 3, "messages": HELLO})
    assert b'event: ping\ndata: {"type":"ping"}\n\n' in raw
    assert [kind for kind, _ in events(raw)][-1] == "message_stop"


async def test_anthropic_upstream_passes_through() -> None:
    """Thinking with its signature, a server tool's blocks and citations come back from
    an Anthropic upstream as it sent them (ping dropped: the gateway sends its own)."""
    async with serving(AnthropicWire()) as fake:
        data = with_models(model("claude-x", provider("claude-x-p", "anthropic", fake.url)))
        async with client("in_process", data) as c:
            raw = await stream(c, {
                "model": "claude-x", "max_tokens": 2000, "messages": HELLO,
                "thinking": {"type": "enabled", "budget_tokens": 1024},
                "tools": [{"type": "web_search_20250305", "name": "web_search", "max_uses": 2}],
            })  # fmt: skip
        assert fake.seen[-1].body["tools"] == [
            {"type": "web_search_20250305", "name": "web_search", "max_uses": 2}
        ]
    check_golden("anthropic_passthrough.sse", raw)
    starts = [e["content_block"]["type"] for k, e in events(raw) if k == "content_block_start"]
    assert starts == ["thinking", "server_tool_use", "web_search_tool_result", "text"]
