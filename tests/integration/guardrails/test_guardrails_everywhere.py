"""Guardrails find a value wherever a caller, a model or a tool puts it: under any key of
a tool's arguments or result (`name`, `id`, `data`, `url` are the tool's own words, not a
wire format's), in a tool's description and schema, and written in look-alike characters
(full-width digits, no-break spaces, dashes, zero-width spaces)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import openai
import pytest

from tests.support.gateways import API_KEY, running_gateway
from tests.support.mcp.upstreams import ALICE, http_upstream, mcp_config, sdk_client
from tests.support.upstreams import shapes
from tests.support.upstreams.anthropic import AnthropicWire
from tests.support.upstreams.base import FakeUpstream, serving
from tests.support.upstreams.config import model, provider, with_models
from tests.support.upstreams.openai import OpenAIWire

EMAIL = "alice@example.com"
CARD = "4111111111111111"
SSN = "123-45-6789"
# The same values as other characters write them.
LOOK_ALIKES = {
    "full-width card": "４１１１ １１１１ １１１１ １１１１",
    "no-break-space card": "4111\u00a01111\u00a01111\u00a01111",
    "en-dash card": "4111\u20131111\u20131111\u20131111",
    "zero-width card": "4111\u200b1111\u200b1111\u200b1111",
    "arabic-indic card": "٤١١١١١١١١١١١١١١١",
    "full-width ssn": "１２３－４５－６７８９",
    "zero-width ssn": "123\u200b-45-6789",
    "thin-space ssn": "123\u200945\u20096789",
    "full-width email": "ａｌｉｃｅ＠ｅｘａｍｐｌｅ．ｃｏｍ",
}
VALUES = (EMAIL, CARD, SSN, *LOOK_ALIKES.values())
OPAQUE_LOOKING = {"name": EMAIL, "id": CARD, "data": SSN, "url": EMAIL,
                  "nested": {"id": [CARD, {"name": SSN}]}}  # fmt: skip


class Env:
    def __init__(self, oa: FakeUpstream, an: FakeUpstream, url: str) -> None:
        self.oa, self.an, self.url = oa, an, url

    def sdk(self) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(base_url=f"{self.url}/v1", api_key=API_KEY, max_retries=0)

    def messages(self) -> anthropic.AsyncAnthropic:
        return anthropic.AsyncAnthropic(base_url=self.url, api_key=API_KEY, max_retries=0)


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    async with serving(OpenAIWire()) as oa, serving(AnthropicWire()) as an:
        data = with_models(
            model("oa", provider("oa-p", "openai", oa.url)),
            model("claude-x", provider("claude-x-p", "anthropic", an.url)),
        )
        data["guardrails"] = [{"id": "pii"}]
        data["default_guardrails"] = ["pii"]
        async with running_gateway(data) as gw:
            yield Env(oa, an, f"http://127.0.0.1:{gw.http_port}")
        assert not oa.problems and not an.problems


def _leaked(body: Any) -> list[str]:
    sent = json.dumps(body, ensure_ascii=False)
    return [value for value in VALUES if value in sent]


@pytest.mark.parametrize("name", sorted(LOOK_ALIKES))
async def test_a_value_in_look_alike_characters_is_found(env: Env, name: str) -> None:
    value = LOOK_ALIKES[name]
    reply = await env.sdk().chat.completions.with_raw_response.create(
        model="oa", messages=[{"role": "user", "content": f"mine: {value}, thanks"}]
    )
    sent = env.oa.seen[-1].body["messages"][0]["content"]
    assert value not in sent and sent.startswith("mine: [") and sent.endswith("_1], thanks")
    assert ":redact:" in reply.headers["x-gateway-guardrails"]


async def test_tool_arguments_descriptions_and_schemas_reach_no_upstream_raw(env: Env) -> None:
    arguments = json.dumps(OPAQUE_LOOKING)
    tools = [{"type": "function", "function": {
        "name": "lookup", "description": f"Finds a person; ask {EMAIL} for access.",
        "parameters": {"type": "object", "properties": {"id": {
            "type": "string", "description": f"a card such as {LOOK_ALIKES['full-width card']}",
            "enum": [SSN, "other"]}}}}}]  # fmt: skip
    messages = [
        {"role": "user", "content": "Find them"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": arguments}}]},
        {"role": "tool", "tool_call_id": "c1", "content": json.dumps({"id": SSN, "data": CARD})},
    ]  # fmt: skip
    await env.sdk().chat.completions.create(model="oa", messages=messages, tools=tools)  # type: ignore[arg-type]
    body = env.oa.seen[-1].body
    assert _leaked(body) == []
    sent = json.loads(body["messages"][1]["tool_calls"][0]["function"]["arguments"])
    assert sent["name"] == "[EMAIL_1]" and sent["nested"]["id"][1]["name"].startswith("[US_SSN_")
    assert body["tools"][0]["function"]["name"] == "lookup"  # a name the model calls stays

    await env.messages().messages.create(
        model="claude-x", max_tokens=50,
        tools=[{"name": "lookup", "description": f"Ask {EMAIL}.",
                "input_schema": {"type": "object", "description": f"e.g. {SSN}"}}],
        messages=[
            {"role": "user", "content": "Find them"},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": OPAQUE_LOOKING}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                          "content": json.dumps({"name": EMAIL})}]},
        ],
    )  # fmt: skip
    body = env.an.seen[-1].body
    assert _leaked(body) == []
    use = body["messages"][1]["content"][0]
    assert (use["id"], use["name"]) == ("toolu_1", "lookup")  # the wire format's own ids stay


async def test_a_models_tool_call_reaches_its_caller_redacted_under_any_key(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    arguments = {"name": EMAIL, "id": LOOK_ALIKES["full-width ssn"], "data": [CARD]}
    whole = json.dumps(arguments, ensure_ascii=False)
    monkeypatch.setattr(shapes, "ARGUMENTS", arguments)
    monkeypatch.setattr(shapes, "ARGUMENT_FRAGMENTS", (whole[:9], whole[9:20], whole[20:]))
    tools = [{"type": "function", "function": {"name": "send", "parameters": {"type": "object"}}}]
    sdk = env.sdk()
    reply = await sdk.chat.completions.create(
        model="oa",
        messages=[{"role": "user", "content": "Send"}],
        tools=tools,  # type: ignore[arg-type]
    )
    call = reply.choices[0].message.tool_calls[0]  # type: ignore[index]
    assert json.loads(call.function.arguments) == {  # type: ignore[union-attr]
        "name": "[EMAIL_1]", "id": "[US_SSN_1]", "data": ["[CREDIT_CARD_1]"]}  # fmt: skip

    claude_tools = [{"name": "send", "description": "Sends.", "input_schema": {"type": "object"}}]
    for stream in (False, True):
        if stream:
            async with env.messages().messages.stream(
                model="claude-x", max_tokens=50, tools=claude_tools,  # type: ignore[arg-type]
                messages=[{"role": "user", "content": "Send"}],
            ) as streamed:  # fmt: skip
                final = await streamed.get_final_message()
        else:
            final = await env.messages().messages.create(
                model="claude-x", max_tokens=50, tools=claude_tools,  # type: ignore[arg-type]
                messages=[{"role": "user", "content": "Send"}],
            )  # fmt: skip
        use = next(b for b in final.content if b.type == "tool_use")
        assert _leaked(use.input) == [], stream
        assert use.input["name"] == "[EMAIL_1]", stream  # type: ignore[index]


@pytest.mark.parametrize(
    "guardrail,reached",
    [
        ({"on_tool_results": "off"}, "[EMAIL_1]"),  # the server got the placeholder
        ({"on_tool_calls": "off"}, EMAIL),  # it got the address; its answer is redacted
    ],
)
async def test_mcp_arguments_and_results_under_any_key(
    guardrail: dict[str, Any], reached: str
) -> None:
    async with http_upstream() as url:
        data = mcp_config(url)
        data["guardrails"] = [{"id": "pii", **guardrail}]
        data["default_guardrails"] = ["pii"]
        async with (
            running_gateway(data) as gw,
            sdk_client(f"http://127.0.0.1:{gw.http_port}/mcp", ALICE) as client,
        ):
            card = LOOK_ALIKES["no-break-space card"]
            result = await client.call_tool("web__record", {"name": EMAIL, "data": card})
    structured = result.structured_content
    assert structured is not None
    text = "".join(getattr(c, "text", "") for c in result.content)
    assert _leaked(structured) == [] and _leaked(text) == []
    if reached == EMAIL:  # the server saw the raw values; the caller sees placeholders
        assert structured["name"] == structured["id"] == "[EMAIL_1]"
        assert structured["data"] == structured["url"] == "[CREDIT_CARD_1]"
    else:  # the server saw placeholders and said them back
        assert structured == {"name": "[EMAIL_1]", "data": "[CREDIT_CARD_1]",
                              "id": "[EMAIL_1]", "url": "[CREDIT_CARD_1]"}  # fmt: skip
