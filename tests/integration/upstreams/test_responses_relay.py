"""A Responses API stream to an upstream of the Responses API relays the upstream's
text fragments as it wrote them (a real loopback upstream writing raw SSE, raw HTTP,
the openai SDK): each is numbered in the gateway's stream and placed under the
gateway's item, the upstream's other fields (logprobs among them) kept; the response the stream
completes, the stored response and the ledger hold the same text and the upstream's
usage, or its estimate when there is none; a stream past max_output_tokens is cut
there."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from server.base import tokens
from tests.support.faults import SSE_HEAD, RawRequest, http_response, raw_upstream, sse_upstream
from tests.support.gateways import API_KEY, ledger_counts, running_gateway
from tests.support.upstreams.config import model, provider, with_models

HEADERS = {"authorization": f"Bearer {API_KEY}"}
USAGE = {"input_tokens": 8, "output_tokens": 3, "total_tokens": 11}
# The upstream's own places of its text (after a reasoning item of its own, say).
AT = {"item_id": "msg_upstream", "output_index": 1, "content_index": 1}


def _deltas(*texts: str, **extra: Any) -> list[dict[str, Any]]:
    return [{"type": "response.output_text.delta", **AT, "delta": t, "logprobs": [],
             "obfuscation": f"ob{i}", **extra} for i, t in enumerate(texts)]  # fmt: skip


def _stream(deltas: list[dict[str, Any]], usage: dict[str, Any] | None = USAGE) -> list[dict]:
    """OpenAI's events of one message: opened, its fragments, closed, completed."""
    text = "".join(d["delta"] for d in deltas)
    item = {"id": "msg_upstream", "type": "message", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}  # fmt: skip
    response = {"id": "resp_upstream", "object": "response", "status": "completed",
                "model": "upstream-model", "output": [item], "usage": usage}  # fmt: skip
    opened = {**response, "status": "in_progress", "output": [], "usage": None}
    part = {"type": "output_text", "text": "", "annotations": []}
    return [
        {"type": "response.created", "response": opened},
        {"type": "response.output_item.added", "output_index": 0,
         "item": {**item, "status": "in_progress", "content": []}},
        {"type": "response.content_part.added", **AT, "part": part},
        *deltas,
        {"type": "response.output_text.done", **AT, "text": text},
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {"type": "response.completed", "response": response},
    ]  # fmt: skip


def _upstream(events: list[dict[str, Any]], seen: list[Any], pause_s: float = 0) -> Callable:
    """A Responses API upstream writing `events` in one go, or a read each."""
    frames = [
        f"event: {e['type']}\ndata: {json.dumps({**e, 'sequence_number': i})}\n\n".encode()
        for i, e in enumerate(events)
    ]
    return sse_upstream(frames, seen, pause_s)


def _whole(response: dict[str, Any]) -> Callable:
    """A Responses API upstream answering with `response`, whole."""

    async def handler(request: RawRequest, writer: asyncio.StreamWriter) -> None:
        writer.write(http_response(json.dumps(response)))
        await writer.drain()

    return handler


def _config(url: str, tmp_path: Path, stream: bool = True) -> dict[str, Any]:
    # The SDK's first use imports its types in this loop, which the gateway's reads of
    # the upstream share: a longer read timeout than the fakes' usual half second.
    upstream = provider("resp-p", "openai", url, read_timeout_s=5, stream=stream)
    upstream["params"]["responses_api"] = True
    data = with_models(model("resp", upstream))
    data["storage"] |= {"sqlite_path": str(tmp_path / "gw.db")}
    return data


async def _post(gw: Any, **body: Any) -> httpx.Response:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}", timeout=30) as c:
        return await c.post("/v1/responses", headers=HEADERS, json={
            "model": "resp", "input": "Hi", "stream": True, **body})  # fmt: skip


def _events(reply: httpx.Response) -> list[dict[str, Any]]:
    assert reply.status_code == 200, reply.text
    events = []
    for frame in reply.content.split(b"\n\n")[:-1]:
        name, data = frame.split(b"\n")
        event = json.loads(data.removeprefix(b"data: "))
        assert name == b"event: " + event["type"].encode()
        events.append(event)
    return events


async def test_text_fragments_are_relayed_under_the_gateways_item_and_numbers(
    tmp_path: Path,
) -> None:
    seen: list[RawRequest] = []
    async with (
        raw_upstream(_upstream(_stream(_deltas("Hel", "lo", "!")), seen)) as upstream,
        running_gateway(_config(upstream.url, tmp_path)) as gw,
    ):
        events = _events(await _post(gw))
        completed = events[-1]["response"]
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}") as c:
            stored = (await c.get(f"/v1/responses/{completed['id']}", headers=HEADERS)).json()
        rows = await ledger_counts(gw)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    added = next(e for e in events if e["type"] == "response.output_item.added")
    item_id = added["item"]["id"]
    assert item_id != "msg_upstream"
    deltas = [e for e in events if e["type"] == "response.output_text.delta"]
    assert [d["delta"] for d in deltas] == ["Hel", "lo", "!"]
    assert [d["obfuscation"] for d in deltas] == ["ob0", "ob1", "ob2"]
    assert {(d["item_id"], d["output_index"], d["content_index"]) for d in deltas} == {
        (item_id, 0, 0)
    }
    assert completed["status"] == "completed" and completed["id"] != "resp_upstream"
    assert completed["output"][0]["content"][0]["text"] == "Hello!"
    assert completed["usage"]["input_tokens"] == 8 and "total_cost_usd" in completed["usage"]
    assert stored["output"][0]["content"][0]["text"] == "Hello!"
    assert rows[0] == (8, 3)  # (the GET is a row of its own)
    assert seen[0].json()["stream"] is True


async def test_the_openai_sdk_reads_a_relayed_stream(tmp_path: Path) -> None:
    events = _stream(_deltas("One", " two", " three"))
    async with (
        raw_upstream(_upstream(events, [], pause_s=0.005)) as upstream,
        running_gateway(_config(upstream.url, tmp_path)) as gw,
    ):
        sdk = openai.AsyncOpenAI(
            base_url=f"http://127.0.0.1:{gw.http_port}/v1", api_key=API_KEY, max_retries=0
        )
        async with sdk, sdk.responses.stream(model="resp", input="Count.") as stream:
            deltas = [e.delta async for e in stream if e.type == "response.output_text.delta"]
            final = await stream.get_final_response()
    assert deltas == ["One", " two", " three"]
    assert final.output_text == "One two three"
    assert final.usage is not None and final.usage.output_tokens == 3


async def test_an_upstreams_logprobs_reach_the_caller(tmp_path: Path) -> None:
    """Relayed (a stream's fragments) or decoded (a whole answer), an upstream's
    logprobs reach the caller, and the response carries them."""
    top = {"token": " here", "logprob": -1.5, "bytes": list(b" here")}
    logprob = {"token": " there", "logprob": -0.5, "bytes": list(b" there"), "top_logprobs": [top]}
    deltas = _deltas("Hi", " there", "!")
    deltas[1]["logprobs"] = [logprob]
    include = ["message.output_text.logprobs"]
    async with (
        raw_upstream(_upstream(_stream(deltas), [])) as upstream,
        running_gateway(_config(upstream.url, tmp_path)) as gw,
    ):
        events = _events(await _post(gw, include=include, top_logprobs=1))
        whole = await _post(gw, include=include, top_logprobs=1, stream=False)
    written = [e for e in events if e["type"] == "response.output_text.delta"]
    assert [d["delta"] for d in written] == ["Hi", " there", "!"]
    assert written[1]["logprobs"] == [logprob]
    streamed = events[-1]["response"]["output"][0]["content"][0]["logprobs"]
    assert whole.status_code == 200, whole.text
    gathered = whole.json()["output"][0]["content"][0]["logprobs"]
    assert streamed == gathered == [logprob]


@pytest.mark.parametrize("pause_s", [0.002, 0], ids=["a read each", "one read"])
async def test_a_relayed_stream_past_max_output_tokens_is_cut_there(
    tmp_path: Path, pause_s: float
) -> None:
    flood = _deltas(*["word " * 8] * 100)
    async with (
        raw_upstream(_upstream(_stream(flood), [], pause_s=pause_s)) as upstream,
        running_gateway(_config(upstream.url, tmp_path)) as gw,
    ):
        events = _events(await _post(gw, max_output_tokens=50))
        rows = await ledger_counts(gw)
    text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert 0 < len(text) <= (50 + tokens.COMPLETION_SLACK_TOKENS) * tokens.BYTES_PER_TOKEN
    last = events[-1]["response"]
    assert last["status"] == "incomplete"
    assert last["incomplete_details"] == {"reason": "max_output_tokens"}
    assert last["output"][0]["content"][0]["text"] == text
    assert [completion for _, completion in rows] == [50]


async def test_without_usage_the_relayed_text_is_billed_by_estimate(tmp_path: Path) -> None:
    async with (
        raw_upstream(_upstream(_stream(_deltas("Hel", "lo"), usage=None), [])) as upstream,
        running_gateway(_config(upstream.url, tmp_path)) as gw,
    ):
        events = _events(await _post(gw))
        rows = await ledger_counts(gw)
    assert events[-1]["response"]["output"][0]["content"][0]["text"] == "Hello"
    assert [completion for _, completion in rows] == [tokens.estimate("Hello")]


@pytest.mark.parametrize("how", ["whole", "items", "summary deltas"])
async def test_without_usage_a_reasoning_items_text_is_billed_too(tmp_path: Path, how: str) -> None:
    """An upstream that shows its reasoning (a summary in parts, and content) and
    reports no usage: the estimate counts that text beside the answer's, whole or
    streamed (the summary once, whether it came as deltas before its item or only in
    it); a part without text and an item of another kind add nothing."""
    summary = [
        {"type": "summary_text", "text": "Thinking about a greeting"},
        {"type": "summary_text"},
        {"type": "summary_text", "text": " at length."},
    ]
    content = [{"type": "reasoning_text", "text": " Say hello."}]
    reasoning = {
        "id": "rs_1",
        "type": "reasoning",
        "encrypted_content": "opaque",
        "summary": summary,
        "content": content,
    }
    search = {"id": "ws_1", "type": "web_search_call", "status": "completed",
              "action": {"type": "search", "query": "greetings"}}  # fmt: skip
    events = _stream(_deltas("Hel", "lo"), usage=None)
    events[-1]["response"]["output"][:0] = [reasoning, search]
    events[1:1] = [
        {"type": "response.output_item.added", "output_index": 0,
         "item": {**reasoning, "summary": [], "content": []}},
        {"type": "response.output_item.done", "output_index": 0, "item": reasoning},
        {"type": "response.output_item.added", "output_index": 1, "item": search},
        {"type": "response.output_item.done", "output_index": 1, "item": search},
    ]  # fmt: skip
    if how == "summary deltas":
        events[2:2] = [
            {"type": "response.reasoning_summary_text.delta", "item_id": "rs_1",
             "output_index": 0, "summary_index": i, "delta": part.get("text", "")}
            for i, part in enumerate(summary)
        ]  # fmt: skip
    stream = how != "whole"
    upstream = _upstream(events, []) if stream else _whole(events[-1]["response"])
    async with (
        raw_upstream(upstream) as served,
        running_gateway(_config(served.url, tmp_path, stream)) as gw,
    ):
        reply = await _post(gw, stream=stream)
        assert reply.status_code == 200, reply.text
        rows = await ledger_counts(gw)
    shown = "Thinking about a greeting at length. Say hello."
    assert [completion for _, completion in rows] == [
        tokens.estimate("Hello") + tokens.estimate(shown)
    ]


@pytest.mark.parametrize("failure", [b'data: {"type": "error", "message": "boom"}', b"data: {"])
async def test_fragments_before_a_failure_in_the_same_read_go_out_before_it(
    tmp_path: Path, failure: bytes
) -> None:
    """An upstream's error event, or a line that is not JSON, after two fragments in
    the same read: the fragments go out, then `response.failed`."""
    frames = [
        f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode()
        for e in _stream(_deltas("Hel", "lo"))[:5]
    ]

    async def handler(request: RawRequest, writer: asyncio.StreamWriter) -> None:
        writer.write(SSE_HEAD + b"".join(frames) + failure + b"\n\n")
        await writer.drain()

    async with (
        raw_upstream(handler) as upstream,
        running_gateway(_config(upstream.url, tmp_path)) as gw,
    ):
        events = _events(await _post(gw))
    written = [e["delta"] for e in events if e["type"] == "response.output_text.delta"]
    assert written == ["Hel", "lo"]
    assert events[-1]["type"] == "response.failed"
    assert events[-1]["response"]["output"][0]["content"][0]["text"] == "Hello"


async def test_a_function_calls_events_are_the_gateways(tmp_path: Path) -> None:
    """Only the answer's text is relayed: a call's argument fragments (a `delta` too)
    are decoded and written as the gateway's, and the call ends the response."""
    call = {"id": "fc_upstream", "type": "function_call", "status": "completed",
            "call_id": "call_1", "name": "weather", "arguments": '{"city":"Rome"}'}  # fmt: skip
    at = {"item_id": "fc_upstream", "output_index": 0}
    response = {"id": "resp_upstream", "object": "response", "status": "completed",
                "model": "upstream-model", "output": [call], "usage": USAGE}  # fmt: skip
    events = [
        {"type": "response.output_item.added", "output_index": 0,
         "item": {**call, "status": "in_progress", "arguments": ""}},
        {"type": "response.function_call_arguments.delta", **at, "delta": '{"city":',
         "obfuscation": "x"},
        {"type": "response.function_call_arguments.delta", **at, "delta": '"Rome"}'},
        {"type": "response.function_call_arguments.done", **at, "arguments": '{"city":"Rome"}'},
        {"type": "response.output_item.done", "output_index": 0, "item": call},
        {"type": "response.completed", "response": response},
    ]  # fmt: skip
    async with (
        raw_upstream(_upstream(events, [])) as upstream,
        running_gateway(_config(upstream.url, tmp_path)) as gw,
    ):
        written = _events(await _post(gw))
    kinds = [e["type"] for e in written]
    assert "response.output_text.delta" not in kinds
    arguments = [e for e in written if e["type"] == "response.function_call_arguments.delta"]
    assert [a["delta"] for a in arguments] == ['{"city":', '"Rome"}']
    assert not [a for a in arguments if "obfuscation" in a]
    (item,) = written[-1]["response"]["output"]
    assert (item["type"], item["name"], item["arguments"]) == (
        "function_call", "weather", '{"city":"Rome"}')  # fmt: skip
