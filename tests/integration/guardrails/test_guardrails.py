"""Guardrails through real clients and real bytes: what upstreams receive (the fakes
record every request), what callers receive (raw SSE, the openai and anthropic SDKs,
google-genai, grpcurl), values split over chunks at every offset and inside tool-call
argument deltas, blocks in each phase, reversible placeholders, the ledger and the
request log grepped for the values, and bad configurations refused at start-up."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from server.base.config import ConfigError, parse
from tests.support.gateways import API_KEY, running_gateway
from tests.support.upstreams import shapes
from tests.support.upstreams.anthropic import AnthropicWire
from tests.support.upstreams.base import FakeUpstream, serving
from tests.support.upstreams.config import model, provider, with_models
from tests.support.upstreams.openai import OpenAIWire

CARD = "4111 1111 1111 1111"
EMAIL = "alice@example.com"
A = {"x-api-key": API_KEY}
SKIPPER = "gw-skipper-key-0000000000"
PII = {"id": "pii", "stream_holdback_chars": 48}


def config(oa: FakeUpstream, an: FakeUpstream, **guardrail: Any) -> dict[str, Any]:
    data = with_models(
        model("oa", provider("oa-p", "openai", oa.url)),
        model("claude-x", provider("claude-x-p", "anthropic", an.url)),
    )
    data["guardrails"] = [{**PII, **guardrail}]
    data["default_guardrails"] = ["pii"]
    data["keys"].append({"name": "skipper", "kind": "api", "secret": SKIPPER,
                         "may_skip_guardrails": True})  # fmt: skip
    return data


class Env:
    def __init__(self, oa: FakeUpstream, an: FakeUpstream, gw: Any) -> None:
        self.oa, self.an, self.gw = oa, an, gw
        self.url = f"http://127.0.0.1:{gw.http_port}"

    def sdk(self) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(base_url=f"{self.url}/v1", api_key=API_KEY, max_retries=0)


@pytest.fixture
async def env(request: pytest.FixtureRequest) -> AsyncIterator[Env]:
    guardrail = getattr(request, "param", {})
    async with serving(OpenAIWire()) as oa, serving(AnthropicWire()) as an:
        async with running_gateway(config(oa, an, **guardrail)) as gw:
            yield Env(oa, an, gw)
        assert not oa.problems and not an.problems


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


async def sse_bytes(url: str, body: dict[str, Any], path: str = "/v1/chat/completions") -> bytes:
    async with (
        httpx.AsyncClient(base_url=url, timeout=10) as c,
        c.stream("POST", path, json=body, headers=A) as response,
    ):
        assert response.status_code == 200, await response.aread()
        return b"".join([part async for part in response.aiter_raw()])


# -- what upstreams receive ---------------------------------------------------------------


async def test_what_the_caller_sends_reaches_no_upstream(env: Env) -> None:
    messages = [
        {"role": "system", "content": f"Support desk. Escalate to {EMAIL}."},
        {"role": "user", "content": [{"type": "text", "text": f"My card is {CARD}."}]},
        {"role": "assistant", "content": None, "tool_calls": [{
            "id": "c1", "type": "function",
            "function": {"name": "lookup", "arguments": json.dumps({"email": EMAIL, "n": 3})}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "Found bob@corp.example.org, SSN 123-45-6789"},
    ]  # fmt: skip
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    reply = await env.sdk().chat.completions.with_raw_response.create(
        model="oa",
        messages=messages,
        tools=tools,  # type: ignore[arg-type]
    )
    sent = json.dumps(env.oa.seen[-1].body)
    for value in (EMAIL, CARD, "bob@corp.example.org", "123-45-6789"):
        assert value not in sent
    body = env.oa.seen[-1].body["messages"]
    assert body[0]["content"] == "Support desk. Escalate to [EMAIL_1]."
    assert json.loads(body[2]["tool_calls"][0]["function"]["arguments"]) == {
        "email": "[EMAIL_1]", "n": 3,
    }  # fmt: skip
    assert "[US_SSN_1]" in body[3]["content"]
    header = reply.headers["x-gateway-guardrails"]
    assert "input:redact:EMAIL=1" in header and "tool_calls:redact:EMAIL=1" in header
    assert "tool_results:redact:US_SSN=1" in header and "input:redact:CREDIT_CARD=1" in header


async def test_completions_embeddings_and_native_bodies_are_redacted(env: Env) -> None:
    sdk = env.sdk()
    await sdk.completions.create(model="oa", prompt=[f"mail {EMAIL}", "plain"], max_tokens=5)
    assert EMAIL not in json.dumps(env.oa.seen[-1].body)
    await sdk.embeddings.create(model="oa", input=[f"card {CARD}"])
    assert CARD not in json.dumps(env.oa.seen[-1].body)
    messages = anthropic.AsyncAnthropic(base_url=env.url, api_key=API_KEY, max_retries=0)
    await messages.messages.create(
        model="claude-x", max_tokens=50, system=f"Owner: {EMAIL}",
        messages=[{"role": "user", "content": f"Charge {CARD}"}],
    )  # fmt: skip
    sent = json.dumps(env.an.seen[-1].body)
    assert EMAIL not in sent and CARD not in sent and "[CREDIT_CARD_1]" in sent


# -- what callers receive -------------------------------------------------------------------


def splits(value: str, pieces: int) -> list[list[str]]:
    """`value` cut into `pieces` parts at evenly spread offsets, every offset for two."""
    if pieces == 2:
        return [[value[:k], value[k:]] for k in range(1, len(value))]
    step = max(1, len(value) // pieces)
    cuts = [i * step for i in range(1, pieces)]
    return [[value[a:b] for a, b in zip([0, *cuts], [*cuts, len(value)], strict=True)]]


@pytest.mark.parametrize("value", [CARD, EMAIL])
async def test_a_value_split_over_chunks_never_reaches_the_stream(env: Env, value: str) -> None:
    for pieces in range(2, 7):
        for parts in splits(value, pieces):
            env.oa.text = ("Here it is: ", *parts, " and that is all.")
            raw = await sse_bytes(env.url, {"model": "oa", "messages": user("Hi"), "stream": True})
            assert value.encode() not in raw, parts
            assert value.replace(" ", "").encode() not in raw
            text = "".join(
                json.loads(line[6:])["choices"][0]["delta"].get("content") or ""
                for line in raw.split(b"\n\n") if line.startswith(b"data: {")
            )  # fmt: skip
            assert (
                text
                == f"Here it is: [{'CREDIT_CARD' if value == CARD else 'EMAIL'}_1] and that is all."
            )


async def test_tool_call_arguments_are_held_until_whole(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    arguments = json.dumps({"to": EMAIL})
    tools = [{"type": "function", "function": {"name": "send", "parameters": {"type": "object"}}}]
    for k in range(1, len(arguments)):
        monkeypatch.setattr(shapes, "ARGUMENT_FRAGMENTS", (arguments[:k], arguments[k:]))
        raw = await sse_bytes(
            env.url, {"model": "oa", "messages": user("Send it"), "tools": tools, "stream": True}
        )
        assert EMAIL.encode() not in raw
        deltas = [
            json.loads(line[6:])["choices"][0]["delta"].get("tool_calls")
            for line in raw.split(b"\n\n") if line.startswith(b"data: {")
        ]  # fmt: skip
        joined = "".join(d[0]["function"].get("arguments") or "" for d in deltas if d)
        assert json.loads(joined) == {"to": "[EMAIL_1]"}


async def test_the_sdks_get_redacted_answers(env: Env) -> None:
    env.oa.text = ("Write to ", EMAIL[:4], EMAIL[4:], ".")
    sdk = env.sdk()
    whole = await sdk.chat.completions.create(model="oa", messages=user("Hi"))
    assert whole.choices[0].message.content == "Write to [EMAIL_1]."
    stream = await sdk.chat.completions.create(model="oa", messages=user("Hi"), stream=True)
    text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert text == "Write to [EMAIL_1]."
    env.an.text = ("Card ", CARD[:7], CARD[7:], " noted.")
    client = anthropic.AsyncAnthropic(base_url=env.url, api_key=API_KEY, max_retries=0)
    async with client.messages.stream(
        model="claude-x", max_tokens=100, messages=[{"role": "user", "content": "Pay"}],
        tools=[{"name": "pay", "description": "Pays.", "input_schema": {"type": "object"}}],
    ) as streamed:  # fmt: skip
        final = await streamed.get_final_message()
    texts = "".join(b.text for b in final.content if b.type == "text")
    assert CARD not in texts and "[CREDIT_CARD_1]" in texts
    assert any(b.type == "tool_use" for b in final.content)


@pytest.mark.parametrize("env", [{"on_input": "block"}], indirect=True)
async def test_a_blocked_input_names_the_guardrail_and_never_the_value(env: Env) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        await env.sdk().chat.completions.create(model="oa", messages=user(f"card {CARD}"))
    error = caught.value.body
    assert isinstance(error, dict)
    assert (error["code"], error["param"]) == ("guardrail_blocked", "pii")
    assert "CREDIT_CARD" in error["message"] and CARD not in error["message"]
    assert not env.oa.seen
    client = anthropic.AsyncAnthropic(base_url=env.url, api_key=API_KEY, max_retries=0)
    with pytest.raises(anthropic.BadRequestError) as refused:
        await client.messages.create(
            model="claude-x", max_tokens=10, messages=[{"role": "user", "content": EMAIL}]
        )
    assert "EMAIL" in str(refused.value) and EMAIL not in str(refused.value)


@pytest.mark.parametrize("env", [{"on_output": "block"}], indirect=True)
async def test_a_blocked_output_is_a_content_filter_or_an_error_event(env: Env) -> None:
    env.oa.text = ("Sure: ", CARD)
    whole = await env.sdk().chat.completions.create(model="oa", messages=user("Hi"))
    assert whole.choices[0].finish_reason == "content_filter"
    assert not whole.choices[0].message.content
    # Billed for what the upstream generated (its own count), though none of it went out.
    assert whole.usage is not None and whole.usage.completion_tokens == 2
    raw = await sse_bytes(env.url, {"model": "oa", "messages": user("Hi"), "stream": True})
    assert b"content_filter" in raw and CARD.encode() not in raw and raw.endswith(b"[DONE]\n\n")
    env.oa.text = ("x" * 30 + " ",) * 4 + (CARD,)  # text released before the card comes
    raw = await sse_bytes(env.url, {"model": "oa", "messages": user("Hi"), "stream": True})
    assert CARD.encode() not in raw and b"[DONE]" not in raw
    assert b"guardrail_blocked" in raw.split(b"\n\n")[-2]


@pytest.mark.parametrize("env", [{"reversible": True}], indirect=True)
async def test_reversible_placeholders_come_back_only_in_this_answer(env: Env) -> None:
    env.oa.text = ("I will mail [EMAIL_2] and ", "[EMAIL_1] now.")
    answer = await env.sdk().chat.completions.create(
        model="oa", messages=user(f"Mail {EMAIL}; the template says [EMAIL_1].")
    )
    sent = env.oa.seen[-1].body["messages"][0]["content"]
    # The caller's own `[EMAIL_1]` is left alone: the value became [EMAIL_2].
    assert sent == "Mail [EMAIL_2]; the template says [EMAIL_1]."
    assert answer.choices[0].message.content == f"I will mail {EMAIL} and [EMAIL_1] now."


async def test_a_key_may_skip_only_when_allowed(env: Env) -> None:
    off = {"x-gateway-guardrails": "off"}
    sdk = env.sdk()
    await sdk.chat.completions.create(model="oa", messages=user(EMAIL), extra_headers=off)
    assert EMAIL not in json.dumps(env.oa.seen[-1].body)
    skipper = openai.AsyncOpenAI(base_url=f"{env.url}/v1", api_key=SKIPPER, max_retries=0)
    await skipper.chat.completions.create(model="oa", messages=user(EMAIL), extra_headers=off)
    assert EMAIL in json.dumps(env.oa.seen[-1].body)


async def test_grpcurl_sees_redacted_text_and_metrics_count(env: Env) -> None:
    env.oa.text = ("Reach ", EMAIL, ".")
    # Beside the running interpreter: found from a copy of the tree too (mutation runs).
    grpcurl = Path(sys.executable).parent / "grpcurl"
    body = json.dumps({"model": "oa", "messages": [{"role": "user", "content": f"card {CARD}"}]})
    process = await asyncio.create_subprocess_exec(
        str(grpcurl), "-plaintext", "-H", f"x-api-key: {API_KEY}", "-d", body,
        f"127.0.0.1:{env.gw.grpc_port}", "gateway.v1.ChatService/CreateChatCompletion",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await process.communicate()
    assert process.returncode == 0, err
    assert json.loads(out)["choices"][0]["message"]["content"] == "Reach [EMAIL_1]."
    async with httpx.AsyncClient(base_url=env.url) as c:
        metrics = (await c.get("/metrics")).text
    assert (
        'gateway_guardrail_detections_total{action="redact",entity="CREDIT_CARD",'
        'guardrail="pii",phase="input"} 1.0'
    ) in metrics
    assert 'gateway_guardrail_duration_seconds_count{phase="output"}' in metrics


async def test_the_ledger_and_the_log_hold_no_value(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="gateway.requests")
    async with serving(OpenAIWire()) as oa, serving(AnthropicWire()) as an:
        oa.text = ("Mail ", EMAIL, ".")
        data = config(oa, an)
        data["operations"] = {"log_text": True}
        data["storage"] |= {"sqlite_path": str(tmp_path / "gw.db")}
        data["routing"]["record_prompts"] = True
        async with running_gateway(data) as gw:
            env = Env(oa, an, gw)
            for stream in (False, True):
                reply = await env.sdk().chat.completions.create(
                    model="oa", messages=user(f"card {CARD}"), stream=stream
                )
                if stream:
                    _ = [c async for c in reply]  # type: ignore[union-attr]
            await gw.gateway.accounts.ledger.flush()
    stored = await asyncio.to_thread(_read_all, tmp_path)
    assert CARD.encode() not in stored and EMAIL.encode() not in stored
    assert CARD not in caplog.text and EMAIL not in caplog.text
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "gateway.requests"]
    assert lines[-1]["guardrails"] == {"input:redact:CREDIT_CARD": 1, "output:redact:EMAIL": 1}


def _read_all(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in folder.iterdir() if p.is_file())


@pytest.mark.parametrize(
    "guardrail,field",
    [
        ({"custom": [{"name": "ref", "regex": r"(\w+)\1"}]}, "guardrails[0].custom[0].regex"),
        ({"custom": [{"name": "ref", "regex": "x", "max_len": 0}]},
         "guardrails[0].custom[0].max_len"),
        ({"detectors": ["email", "passport"]}, "guardrails[0].detectors[1]"),
        ({"reversible": True, "placeholder": "type"}, "guardrails[0]"),
    ],
)  # fmt: skip
def test_a_bad_guardrail_is_refused_at_start_naming_its_field(
    guardrail: dict[str, Any], field: str
) -> None:
    data = with_models()
    data["guardrails"] = [{"id": "g", **guardrail}]
    with pytest.raises(ConfigError) as caught:
        parse(data, "test")
    assert field in str(caught.value)
    data = with_models()
    data["keys"][0]["guardrails"] = ["nope"]
    with pytest.raises(ConfigError, match=r"keys\[0\]\.guardrails\[0\]"):
        parse(data, "test")


async def test_the_responses_api_and_the_gemini_api_are_covered(env: Env) -> None:
    from google import genai
    from google.genai import types

    env.oa.text = ("Noted: ", CARD[:9], CARD[9:], ".")
    stream = await env.sdk().responses.create(
        model="oa", instructions=f"Owner {EMAIL}", input=f"Card {CARD}", stream=True
    )
    events = [e async for e in stream]
    done = [e for e in events if e.type == "response.completed"]
    assert done and done[0].response.output_text == "Noted: [CREDIT_CARD_1]."
    assert CARD not in json.dumps(env.oa.seen[-1].body) and EMAIL not in json.dumps(
        env.oa.seen[-1].body
    )
    google = genai.Client(api_key=API_KEY, http_options=types.HttpOptions(base_url=env.url)).aio
    answer = await google.models.generate_content(model="oa", contents=f"Mail {EMAIL}")
    assert answer.text == "Noted: [CREDIT_CARD_1]."
    assert EMAIL not in json.dumps(env.oa.seen[-1].body)


async def test_restored_answers_are_never_cached_for_another_caller() -> None:
    async with serving(OpenAIWire()) as oa, serving(AnthropicWire()) as an:
        oa.text = ("Writing to [EMAIL_1].",)
        data = config(oa, an, reversible=True)
        data["response_cache"] = {"keys": ["*"]}
        async with running_gateway(data) as gw:
            sdk = Env(oa, an, gw).sdk()
            # Temperature 0: an answer the cache would keep and replay.
            first = await sdk.chat.completions.create(
                model="oa", messages=user(EMAIL), temperature=0
            )
            other = await sdk.chat.completions.create(
                model="oa", messages=user("bob@b.example"), temperature=0
            )
    assert first.choices[0].message.content == f"Writing to {EMAIL}."
    assert other.choices[0].message.content == "Writing to bob@b.example."
    assert len(oa.seen) == 2  # each asked upstream: the same redacted request, not cached


async def test_stored_responses_and_conversations_keep_no_redacted_value(tmp_path: Path) -> None:
    """What the Responses API stores (the response, its input items, the context a
    continuation reads, the conversation's items) holds what the guardrails left, never
    the caller's values, nor those a reversible guardrail put back in the answer."""
    async with serving(OpenAIWire()) as oa, serving(AnthropicWire()) as an:
        oa.text = ("Mailing ", "[EMAIL_1] about [CREDIT_CARD_1].")
        data = config(oa, an, reversible=True)
        data["storage"] |= {"sqlite_path": str(tmp_path / "gw.db")}
        async with running_gateway(data) as gw:
            sdk = Env(oa, an, gw).sdk()
            conv = await sdk.conversations.create()
            call = {"type": "function_call_output", "call_id": "c1", "output": f"card {CARD}"}
            first = await sdk.responses.create(
                model="oa", instructions=f"Owner {EMAIL}", conversation=conv.id,
                input=[{"role": "user", "content": f"Card {CARD}, mail {EMAIL}"}, call],  # type: ignore[list-item]
            )  # fmt: skip
            # The caller gets its own values back (reversible); nothing stored does.
            assert first.output_text == f"Mailing {EMAIL} about {CARD}."
            stream = await sdk.responses.create(
                model="oa", previous_response_id=first.id, input=f"Again {EMAIL}", stream=True
            )
            second = [e async for e in stream][-1].response  # type: ignore[union-attr]
            # The earlier turn's placeholders stay: their values were never kept (this
            # turn's own value became [EMAIL_2]).
            assert second.output_text == "Mailing [EMAIL_1] about [CREDIT_CARD_1]."
            assert "[EMAIL_2]" in json.dumps(oa.seen[-1].body)
            assert EMAIL not in json.dumps(oa.seen[-1].body)
            kept = [
                (await sdk.responses.retrieve(first.id)).model_dump_json(),
                (await sdk.responses.retrieve(second.id)).model_dump_json(),
                (await sdk.responses.input_items.list(first.id)).model_dump_json(),
                (await sdk.responses.input_items.list(second.id)).model_dump_json(),
                (await sdk.conversations.items.list(conv.id)).model_dump_json(),
            ]
            for text in kept:
                assert CARD not in text and EMAIL not in text, text
            assert "[EMAIL_1]" in kept[0] and "[CREDIT_CARD_1]" in kept[4]
    stored = await asyncio.to_thread(_read_all, tmp_path)
    assert CARD.encode() not in stored and EMAIL.encode() not in stored
