"""/v1/responses streams, raw, against golden transcripts (tests/fixtures/responses):
event names, key sets, key order and values, with ids, timestamps and timings
replaced by placeholders. The transcripts follow the event sequences OpenAI documents
for a text answer and a function call; `UPDATE_GOLDEN=1` rewrites them."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.facade import A
from tests.support.gateways import running_gateway
from tests.support.upstreams.base import serving
from tests.support.upstreams.config import model, provider, with_models
from tests.support.upstreams.openai import OpenAIWire

GOLDEN = Path(__file__).resolve().parents[2] / "fixtures" / "responses"
ID = re.compile(r"^(resp|msg|fc|rs|call)_[0-9a-f]{48}$")
VOLATILE = {"created_at", "completed_at", "latency_ms", "ttft_ms"}
TOOL = {
    "type": "function", "name": "get_weather", "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]},
}  # fmt: skip


def normalized(raw: str) -> str:
    """The transcript with each id named by its kind and order of appearance."""
    names: dict[str, str] = {}

    def walk(value: Any, key: str = "") -> Any:
        if key == "tools":  # echoed as sent: a JSON object, whose key order is free
            return json.loads(json.dumps(value, sort_keys=True))
        if isinstance(value, dict):
            return {k: walk(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        if key in VOLATILE and value is not None:
            return f"<{key}>"
        if isinstance(value, str) and ID.match(value):
            kind = value.split("_", 1)[0]
            if value not in names:
                names[value] = f"<{kind}-{sum(n.startswith(f'<{kind}-') for n in names.values())}>"
            return names[value]
        return value

    out = []
    for block in raw.strip().split("\n\n"):
        name, data = block.split("\n", 1)
        payload = walk(json.loads(data.removeprefix("data: ")))
        out.append(f"{name}\ndata: {json.dumps(payload)}\n")
    return "\n".join(out)


@pytest.mark.parametrize(
    ("golden", "body"),
    [
        ("text_stream.sse", {"input": "Say hello.", "instructions": "Be brief."}),
        ("function_call_stream.sse", {"input": "Weather in Paris?", "tools": [TOOL]}),
    ],
)
async def test_stream_matches_golden(golden: str, body: dict[str, Any]) -> None:
    async with serving(OpenAIWire()) as upstream:
        data = with_models(model("gpt-fake", provider("fake-primary", "openai", upstream.url)))
        async with (
            running_gateway(data) as gw,
            httpx.AsyncClient(
                base_url=f"http://127.0.0.1:{gw.http_port}", headers=A, timeout=10
            ) as client,
        ):
            r = await client.post(
                "/v1/responses", json={"model": "gpt-fake", "stream": True, **body}
            )
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/event-stream")
    assert "[DONE]" not in r.text
    got = normalized(r.text)
    path = GOLDEN / golden
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(got)
    assert got == path.read_text()


async def test_error_event_after_start_is_numbered(config_dict: dict[str, Any]) -> None:
    """A failure the handler does not turn into response.failed (the gateway shutting
    down) ends the stream with OpenAI's error event, numbered after the others."""
    from http_facade.errors import OPENAI_RESPONSES, stream_error_body
    from server.base.errors import ShuttingDown

    body = stream_error_body(ShuttingDown("stopping"), OPENAI_RESPONSES, 7)
    assert body == {"type": "error", "code": "shutting_down", "message": "stopping",
                    "param": None, "sequence_number": 7}  # fmt: skip
