"""A Gemini-dialect stream to a Gemini upstream is relayed as the upstream wrote it (a
real loopback upstream writing raw SSE, raw HTTP in both of Google's framings,
Google's own SDK, a gRPC stub): its fields pass, fields the contract does not model
included, under the gateway's response id; the usage it reports goes only on the last
chunk, with the gateway's cost; thought signatures reach the caller sealed and go back
to their maker opened; the ledger bills the upstream's usage, or the relayed text's
estimate when there is none; a stream past max_tokens is cut there."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import httpx
from gateway.v1 import gemini_service_pb2, gemini_service_pb2_grpc
from google import genai
from google.genai import types

from server.base import tokens
from tests.support.faults import RawRequest, raw_upstream, sse_upstream
from tests.support.gateways import API_KEY, ledger_counts, running_gateway
from tests.support.grpc_stubs import API
from tests.support.upstreams.config import model, provider, with_models

HEADERS = {"x-goog-api-key": API_KEY}
SIGNATURE = "upstream-signature-1"
USAGE = {"promptTokenCount": 6, "candidatesTokenCount": 4, "totalTokenCount": 10,
         "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 6}]}  # fmt: skip


def _answer(parts: list[dict[str, Any]], finish: str | None = None, **extra: Any) -> dict:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    return {"candidates": [candidate], "modelVersion": "gemini-upstream-001",
            "responseId": "upstream-response", **extra}  # fmt: skip


# Gemini's own shape: text, a chunk carrying a field the contract does not model, a
# function call with its thought signature, and the finish with usage.
STREAM = [
    _answer([{"text": "Hel"}], usageMetadata={"promptTokenCount": 6, "totalTokenCount": 6}),
    _answer([{"text": "lo"}], citationMetadata={"citations": [{"startIndex": 0, "uri": "u"}]}),
    _answer(
        [
            {
                "functionCall": {"name": "weather", "args": {"city": "Rome"}},
                "thoughtSignature": SIGNATURE,
            }
        ]
    ),  # fmt: skip
    _answer([{"text": ""}], "STOP", usageMetadata=USAGE),
]


def _gemini(chunks: list[dict[str, Any]], seen: list[Any], pause_s: float = 0) -> Callable:
    """A Gemini upstream writing `chunks` in one go, or a read each `pause_s` apart."""
    frames = [b"data: " + json.dumps(c).encode() + b"\r\n\r\n" for c in chunks]
    return sse_upstream(frames, seen, pause_s)


def _config(url: str, tmp_path: Path) -> dict[str, Any]:
    # The SDK's first use imports its types in this loop, which the gateway's reads of
    # the upstream share: a longer read timeout than the fakes' usual half second.
    data = with_models(model("gem", provider("gem-p", "gemini", url, read_timeout_s=5)))
    data["storage"] |= {"sqlite_path": str(tmp_path / "gw.db")}
    return data


def _body(text: str = "Weather in Rome?", **extra: Any) -> dict[str, Any]:
    return {"contents": [{"role": "user", "parts": [{"text": text}]}], **extra}


async def _stream(gw: Any, body: dict[str, Any], alt: str = "?alt=sse") -> httpx.Response:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}", timeout=30) as c:
        return await c.post(
            f"/v1beta/models/gem:streamGenerateContent{alt}", headers=HEADERS, json=body
        )


def _events(reply: httpx.Response) -> list[dict[str, Any]]:
    assert reply.status_code == 200, reply.text
    frames = reply.content.split(b"\n\n")
    assert frames[-1] == b"" and all(f.startswith(b"data: {") for f in frames[:-1]), frames
    return [json.loads(f[6:]) for f in frames[:-1]]


async def test_a_gemini_stream_is_relayed_as_written_under_the_gateways_id(
    tmp_path: Path,
) -> None:
    seen: list[RawRequest] = []
    async with (
        raw_upstream(_gemini(STREAM, seen)) as upstream,
        running_gateway(_config(upstream.url, tmp_path)) as gw,
    ):
        reply = await _stream(gw, _body())
        events = _events(reply)
        # The next turn gives the call back: its maker gets its own signature.
        call = events[2]["candidates"][0]["content"]
        answered = {"role": "user", "parts": [{"functionResponse": {
            "name": "weather", "response": {"output": "Rain."}}}]}  # fmt: skip
        await _stream(gw, {"contents": [*_body()["contents"], call, answered]})
        rows = await ledger_counts(gw)
    request_id = reply.headers["x-request-id"]
    assert [e["responseId"] for e in events] == [request_id] * 4
    assert {e["modelVersion"] for e in events} == {"gemini-upstream-001"}
    assert events[1]["citationMetadata"] == {"citations": [{"startIndex": 0, "uri": "u"}]}
    texts = [p.get("text") for e in events for p in e["candidates"][0]["content"]["parts"]]
    assert texts == ["Hel", "lo", None, ""]
    # Usage only on the last chunk: the upstream's own, with the gateway's cost.
    assert [i for i, e in enumerate(events) if "usageMetadata" in e] == [3]
    usage = events[3]["usageMetadata"]
    assert (usage["promptTokenCount"], usage["candidatesTokenCount"]) == (6, 4)
    assert usage["promptTokensDetails"] == USAGE["promptTokensDetails"]
    assert "totalCostUsd" in usage
    assert events[3]["candidates"][0]["finishReason"] == "STOP"
    written = call["parts"][0]["thoughtSignature"]
    assert SIGNATURE not in written
    given_back = seen[1].json()["contents"][1]["parts"][0]
    assert given_back["thoughtSignature"] == SIGNATURE
    assert seen[0].path.endswith(":streamGenerateContent?alt=sse")
    assert rows[0] == (6, 4)


async def test_a_relayed_stream_as_one_json_array(tmp_path: Path) -> None:
    """Without `alt=sse` the relayed chunks are the elements of one JSON array, the
    first of them opening it."""
    async with (
        raw_upstream(_gemini(STREAM, [])) as upstream,
        running_gateway(_config(upstream.url, tmp_path)) as gw,
    ):
        reply = await _stream(gw, _body(), alt="")
    assert reply.status_code == 200
    assert reply.headers["content-type"].startswith("application/json")
    answers = json.loads(reply.content)
    assert [a["candidates"][0]["content"]["parts"][0].get("text") for a in answers] == [
        "Hel", "lo", None, ""]  # fmt: skip
    assert answers[3]["usageMetadata"]["candidatesTokenCount"] == 4


async def test_a_chunk_of_prompt_feedback_alone_is_relayed_one_of_usage_alone_not(
    tmp_path: Path,
) -> None:
    """In one read: a chunk of prompt feedback alone (relayed, the gateway's model
    version on it as it has none), one of usage alone (left out), then the answer."""
    feedback = {"promptFeedback": {"safetyRatings": [
        {"category": "HARM_CATEGORY_HARASSMENT", "probability": "NEGLIGIBLE"}]}}  # fmt: skip
    usage_alone = {"usageMetadata": {"promptTokenCount": 6, "totalTokenCount": 6}}
    async with (
        raw_upstream(_gemini([feedback, usage_alone, *STREAM], [])) as upstream,
        running_gateway(_config(upstream.url, tmp_path)) as gw,
    ):
        events = _events(await _stream(gw, _body()))
    assert events[0]["promptFeedback"] == feedback["promptFeedback"]
    assert events[0]["modelVersion"] == "gem"
    assert len(events) == 5 and "usageMetadata" not in events[1]


async def test_googles_sdk_reads_a_relayed_stream_read_by_read(tmp_path: Path) -> None:
    async with (
        raw_upstream(_gemini(STREAM, [], pause_s=0.01)) as upstream,
        running_gateway(_config(upstream.url, tmp_path)) as gw,
    ):
        options = types.HttpOptions(base_url=f"http://127.0.0.1:{gw.http_port}")
        sdk = genai.Client(api_key=API_KEY, http_options=options).aio
        chunks = [c async for c in await sdk.models.generate_content_stream(
            model="gem", contents="Weather in Rome?")]  # fmt: skip
    assert "".join(c.text or "" for c in chunks) == "Hello"
    calls = [c.function_calls for c in chunks if c.function_calls]
    assert [[(f.name, f.args) for f in group] for group in calls] == [
        [("weather", {"city": "Rome"})]
    ]
    last = chunks[-1]
    assert last.candidates and last.candidates[0].finish_reason == types.FinishReason.STOP
    assert last.usage_metadata is not None and last.usage_metadata.candidates_token_count == 4
    assert all(c.usage_metadata is None for c in chunks[:-1])


async def _grpc_stream(gw: Any) -> list[gemini_service_pb2.StreamGenerateContentResponse]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel:
        request = gemini_service_pb2.StreamGenerateContentRequest(
            model="models/gem", contents=[{"role": "user", "parts": [{"text": "Hi"}]}]
        )
        stub = gemini_service_pb2_grpc.GeminiServiceStub(channel)
        return [c async for c in stub.StreamGenerateContent(request, metadata=API)]


async def test_grpc_callers_get_the_decoded_stream(tmp_path: Path) -> None:
    async with (
        raw_upstream(_gemini(STREAM, [])) as upstream,
        running_gateway(_config(upstream.url, tmp_path)) as gw,
    ):
        chunks = await _grpc_stream(gw)
    text = "".join(p.text for c in chunks for cand in c.candidates for p in cand.content.parts)
    assert text == "Hello"
    assert chunks[-1].usage_metadata.candidates_token_count == 4


async def test_a_relayed_stream_past_max_tokens_is_cut_there_and_billed_within_it(
    tmp_path: Path,
) -> None:
    """An upstream that writes past maxOutputTokens, a read a chunk: every read counts
    against the bound, and the stream ends at it with MAX_TOKENS."""
    # The first reports the prompt's usage so far, as Gemini's first chunk does.
    flood = [_answer([{"text": "word " * 8}]) for _ in range(100)]
    flood[0]["usageMetadata"] = {"promptTokenCount": 6, "totalTokenCount": 6}
    async with (
        raw_upstream(_gemini([*flood, _answer([], "STOP")], [], pause_s=0.002)) as upstream,
        running_gateway(_config(upstream.url, tmp_path)) as gw,
    ):
        reply = await _stream(gw, _body(generationConfig={"maxOutputTokens": 50}))
        rows = await ledger_counts(gw)
    events = _events(reply)
    text = "".join(
        p.get("text", "") for e in events for c in e.get("candidates", ())
        for p in c["content"].get("parts", ())
    )  # fmt: skip
    assert 0 < len(text) <= (50 + tokens.COMPLETION_SLACK_TOKENS) * tokens.BYTES_PER_TOKEN
    assert events[-1]["candidates"][0]["finishReason"] == "MAX_TOKENS"
    assert events[-1]["usageMetadata"]["candidatesTokenCount"] == 50  # what is billed
    assert [completion for _, completion in rows] == [50]


async def test_without_usage_the_relayed_text_is_billed_by_estimate(tmp_path: Path) -> None:
    """The answer's text, the shown thoughts and the call's arguments, all relayed, are
    what the estimate counts."""
    thought = _answer([{"text": "Thinking about Rome.", "thought": True}])
    stream = [thought, *({k: v for k, v in a.items() if k != "usageMetadata"} for a in STREAM)]
    shown = {"generationConfig": {"thinkingConfig": {"includeThoughts": True}}}
    async with (
        raw_upstream(_gemini(stream, [])) as upstream,
        running_gateway(_config(upstream.url, tmp_path)) as gw,
    ):
        events = _events(await _stream(gw, _body(**shown)))
        rows = await ledger_counts(gw)
    assert events[0]["candidates"][0]["content"]["parts"][0]["thought"] is True
    arguments = json.dumps({"city": "Rome"})
    expected = tokens.estimate("Hello") + tokens.estimate("Thinking about Rome." + arguments)
    assert [completion for _, completion in rows] == [expected]
    assert events[-1]["usageMetadata"]["candidatesTokenCount"] == rows[0][1]


async def test_a_decoded_answer_without_usage_is_billed_by_estimate(tmp_path: Path) -> None:
    """A gRPC stream and a whole answer take the decoding path (the upstream's chunks
    as the contract's messages): their text is counted all the same, a chunk's parts
    together."""
    stream = [{k: v for k, v in a.items() if k != "usageMetadata"} for a in STREAM]
    stream[:2] = [_answer([{"text": "Hel"}, {"text": "lo"}])]
    async with (
        raw_upstream(_gemini(stream, [])) as upstream,
        running_gateway(_config(upstream.url, tmp_path)) as gw,
    ):
        chunks = await _grpc_stream(gw)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}") as c:
            whole = await c.post(
                "/v1beta/models/gem:generateContent", headers=HEADERS, json=_body()
            )
        rows = await ledger_counts(gw)
    expected = tokens.estimate("Hello") + tokens.estimate(json.dumps({"city": "Rome"}))
    assert [completion for _, completion in rows] == [expected, expected]
    assert chunks[-1].usage_metadata.candidates_token_count == expected
    assert whole.json()["usageMetadata"]["candidatesTokenCount"] == expected


async def test_chunks_before_a_failure_in_the_same_read_go_out_before_its_error(
    tmp_path: Path,
) -> None:
    failing = [*STREAM[:2], {"error": {"code": 500, "message": "boom", "status": "INTERNAL"}}]
    async with (
        raw_upstream(_gemini(failing, [])) as upstream,
        running_gateway(_config(upstream.url, tmp_path)) as gw,
    ):
        events = _events(await _stream(gw, _body()))
    texts = [e["candidates"][0]["content"]["parts"][0]["text"] for e in events[:-1]]
    assert texts == ["Hel", "lo"]
    assert events[-1]["error"]["status"] and "boom" in events[-1]["error"]["message"]


async def test_a_read_cut_short_keeps_its_calls_signature(tmp_path: Path) -> None:
    """A read that crosses maxOutputTokens is decoded: its call reaches the caller with
    the signature sealed once, which its maker gets back as it wrote it."""
    long = [_answer([{"text": "word " * 400}]), _answer([], "STOP")]
    seen: list[RawRequest] = []
    async with (
        raw_upstream(_gemini([STREAM[2], *long], seen)) as upstream,
        running_gateway(_config(upstream.url, tmp_path)) as gw,
    ):
        events = _events(await _stream(gw, _body(generationConfig={"maxOutputTokens": 50})))
        parts = [p for e in events for c in e.get("candidates", ())
                 for p in c["content"].get("parts", ())]  # fmt: skip
        (call,) = [p for p in parts if "functionCall" in p]
        answered = {"role": "user", "parts": [{"functionResponse": {
            "name": "weather", "response": {"output": "Rain."}}}]}  # fmt: skip
        turn = {"role": "model", "parts": [call]}
        await _stream(gw, {"contents": [*_body()["contents"], turn, answered]})
    assert events[-1]["candidates"][0]["finishReason"] == "MAX_TOKENS"
    assert seen[1].json()["contents"][1]["parts"][0]["thoughtSignature"] == SIGNATURE
