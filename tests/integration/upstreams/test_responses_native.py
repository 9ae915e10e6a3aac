"""Upstreams that serve the Responses API themselves (`responses_api: true`): requests
go there as they came, built-in tools included; encrypted reasoning goes back only to
the provider that made it; a continuation is forwarded by id only to the provider
that stored it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.support.facade import A
from tests.support.gateways import running_gateway
from tests.support.upstreams.base import FakeUpstream, Fault, Usage, serving
from tests.support.upstreams.config import model, provider, with_models
from tests.support.upstreams.responses import ResponsesWire

# What Codex sends: no storage, encrypted reasoning asked for, function tools,
# instructions, a prompt cache key, a stream.
CODEX = {
    "instructions": "You are a coding agent.",
    "input": [{"type": "message", "role": "user",
               "content": [{"type": "input_text", "text": "List the files."}]}],
    "tools": [{"type": "function", "name": "shell", "description": "Runs a command.",
               "strict": False, "parameters": {"type": "object",
                                               "properties": {"command": {"type": "string"}}}}],
    "tool_choice": "auto", "parallel_tool_calls": False,
    "reasoning": {"effort": "medium", "summary": "auto"},
    "store": False, "stream": True, "include": ["reasoning.encrypted_content"],
    "prompt_cache_key": "session-1", "prompt_cache_retention": "24h",
}  # fmt: skip


def events(raw: str) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for block in raw.strip().split("\n\n"):
        name, data = block.split("\n", 1)
        out.append((name.removeprefix("event: "), json.loads(data.removeprefix("data: "))))
    return out


@pytest.fixture
async def setup() -> AsyncIterator[tuple[httpx.AsyncClient, FakeUpstream, FakeUpstream]]:
    async with serving(ResponsesWire()) as one, serving(ResponsesWire()) as two:
        data = with_models(
            model("native", provider("native-primary", "openai", one.url, responses_api=True)),
            model("native2", provider("native2-primary", "openai", two.url, responses_api=True)),
            model("native-unary", provider("native-unary-primary", "openai", one.url,
                                           responses_api=True, stream=False)),
        )  # fmt: skip
        async with (
            running_gateway(data) as gw,
            httpx.AsyncClient(
                base_url=f"http://127.0.0.1:{gw.http_port}", headers=A, timeout=10
            ) as client,
        ):
            yield client, one, two


async def test_codex_shaped_stream_and_encrypted_reasoning(setup: Any) -> None:
    client, one, two = setup
    r = await client.post("/v1/responses", json={**CODEX, "model": "native"})
    assert r.status_code == 200, r.text
    seen = events(r.text)
    kinds = [k for k, _ in seen]
    assert kinds[:3] == ["response.created", "response.in_progress", "response.output_item.added"]
    assert "response.reasoning_summary_part.added" in kinds
    assert "response.reasoning_summary_text.delta" in kinds
    assert kinds[-1] == "response.completed"
    assert [d["sequence_number"] for _, d in seen] == list(range(len(seen)))
    final = seen[-1][1]["response"]
    reasoning, message = final["output"]
    assert reasoning["summary"] == [
        {"type": "summary_text", "text": "Thinking briefly."},
        {"type": "summary_text", "text": "Done"},
    ]
    sealed = reasoning["encrypted_content"]
    assert sealed != "enc-0" and sealed.endswith("enc-0")
    assert message["content"][0]["text"] == "Hello, world! This is a fake reply."
    assert final["usage"]["output_tokens_details"]["reasoning_tokens"] == 5
    sent = one.seen[-1].body
    assert sent["model"] == "gpt-fake" and sent["store"] is False and sent["stream"] is True
    assert sent["instructions"] == CODEX["instructions"]
    assert sent["include"] == ["reasoning.encrypted_content"]
    assert sent["prompt_cache_key"] == "session-1" and sent["prompt_cache_retention"] == "24h"
    assert final["prompt_cache_retention"] == "24h"
    assert sent["tools"] == CODEX["tools"]
    assert "previous_response_id" not in sent

    # Codex's next turn sends the reasoning back: only the provider that made it gets it.
    turn = [*CODEX["input"], reasoning, message,
            {"type": "message", "role": "user", "content": "Thanks."}]  # fmt: skip
    again = await client.post("/v1/responses", json={**CODEX, "model": "native", "input": turn})
    assert again.status_code == 200, again.text
    back = [i for i in one.seen[-1].body["input"] if i.get("type") == "reasoning"]
    assert [i["encrypted_content"] for i in back] == ["enc-0"]
    other = await client.post("/v1/responses", json={**CODEX, "model": "native2", "input": turn})
    assert other.status_code == 200, other.text
    assert [i.get("type") for i in two.seen[-1].body["input"]] == [
        "message", "message", "message"
    ]  # fmt: skip
    simulated = await client.post(
        "/v1/responses", json={**CODEX, "model": "sim-mini", "input": turn}
    )
    assert simulated.status_code == 200, simulated.text


async def test_built_in_tools_only_where_served(setup: Any) -> None:
    client, one, _ = setup
    body = {"input": "News?", "tools": [{"type": "web_search"}], "store": False}
    r = await client.post("/v1/responses", json={**body, "model": "native"})
    assert r.status_code == 200, r.text
    kinds = [item["type"] for item in r.json()["output"]]
    assert kinds == ["reasoning", "web_search_call", "message"]
    assert one.seen[-1].body["tools"] == [{"type": "web_search"}]
    refused = await client.post("/v1/responses", json={**body, "model": "sim-mini"})
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["param"] == "tools[0].type" and error["code"] == "unsupported_capability"


async def test_continuation_by_id_only_where_stored(setup: Any) -> None:
    client, one, two = setup
    first = (await client.post("/v1/responses", json={"model": "native", "input": "Hi"})).json()
    second = await client.post(
        "/v1/responses",
        json={"model": "native", "input": "Again", "previous_response_id": first["id"]},
    )
    assert second.status_code == 200, second.text
    sent = one.seen[-1].body
    assert sent["previous_response_id"] == "resp_up0"
    assert [i["content"][0]["text"] for i in sent["input"]] == ["Again"]
    third = await client.post(
        "/v1/responses",
        json={
            "model": "native2",
            "input": "Once more",
            "previous_response_id": second.json()["id"],
        },
    )
    assert third.status_code == 200, third.text
    sent = two.seen[-1].body
    assert "previous_response_id" not in sent
    # The whole conversation, but none of the other provider's reasoning.
    assert [i.get("role") or i["type"] for i in sent["input"]] == [
        "user", "assistant", "user", "assistant", "user"
    ]  # fmt: skip


async def test_a_whole_answer_from_the_upstream_and_its_usage(setup: Any) -> None:
    client, one, _ = setup
    one.usage = Usage(prompt_tokens=30, cached_tokens=10)
    r = await client.post("/v1/responses", json={"model": "native-unary", "input": "Hi",
                                                 "store": False})  # fmt: skip
    assert r.status_code == 200, r.text
    reply = r.json()
    assert reply["output"][-1]["content"][0]["text"] == "Hello, world! This is a fake reply."
    # The upstream's own counts, as it reported them (reasoning included).
    assert reply["usage"]["input_tokens"] == 30
    assert reply["usage"]["input_tokens_details"]["cached_tokens"] == 10
    assert reply["usage"]["output_tokens"] == 15
    assert reply["usage"]["output_tokens_details"]["reasoning_tokens"] == 5
    seen = one.seen[-1]
    assert seen.path == "/v1/responses" and not seen.body.get("stream")
    assert one.problems == []


TOOLS = [{"type": "function", "name": name, "parameters": {"type": "object"}}
         for name in ("get_weather", "get_time", "get_news")]  # fmt: skip


def calls(output: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return [(i["call_id"], i["name"], i["arguments"]) for i in output
            if i["type"] == "function_call"]  # fmt: skip


@pytest.mark.parametrize("model_name", ["native", "native-unary"])
async def test_function_calls_in_parallel_each_with_its_own_arguments(
    setup: Any, model_name: str
) -> None:
    client, one, _ = setup
    body = {"model": model_name, "input": "Weather and time?", "tools": TOOLS,
            "tool_choice": "required", "stream": model_name == "native"}  # fmt: skip
    r = await client.post("/v1/responses", json=body)
    assert r.status_code == 200, r.text
    final = events(r.text)[-1][1]["response"] if body["stream"] else r.json()
    n = len(one.seen) - 1  # the fake numbers its answers
    arguments = '{"city": "Paris"}'
    assert calls(final["output"]) == [
        (f"call_up{n}_{i}", name, arguments)
        for i, name in enumerate(("get_weather", "get_time", "get_news"))
    ]
    assert final["status"] == "completed"
    if body["stream"]:
        # Each call's fragments reach the caller under that call's own item.
        seen = events(r.text)
        ids = {
            d["item"]["call_id"]: d["item"]["id"]
            for k, d in seen
            if k == "response.output_item.added" and d["item"]["type"] == "function_call"
        }
        pieces: dict[str, str] = {}
        for kind, data in seen:
            if kind == "response.function_call_arguments.delta":
                pieces[data["item_id"]] = pieces.get(data["item_id"], "") + data["delta"]
        assert pieces == {ids[f"call_up{n}_{i}"]: arguments for i in range(3)}
    named = await client.post("/v1/responses", json={
        **body, "tool_choice": {"type": "function", "name": "get_time"}})  # fmt: skip
    final = events(named.text)[-1][1]["response"] if body["stream"] else named.json()
    assert [name for _, name, _ in calls(final["output"])] == ["get_time"]


@pytest.mark.parametrize("how", ["failed", "error"])
async def test_a_failure_the_upstream_reports_fails_the_response(setup: Any, how: str) -> None:
    client, one, _ = setup
    one.wire.fail = how
    r = await client.post("/v1/responses", json={"model": "native", "input": "Hi",
                                                 "stream": True})  # fmt: skip
    assert r.status_code == 200, r.text
    kind, data = events(r.text)[-1]
    assert kind == "response.failed"
    error = data["response"]["error"]
    assert error["message"] == (
        "native-primary: upstream failed: The model failed, key [redacted]"
    ), error
    # The text that came before the failure is kept, marked incomplete.
    message = data["response"]["output"][-1]
    assert message["status"] == "incomplete"
    assert message["content"][0]["text"] == "Hello, world! This is a fake reply."
    unary = await client.post("/v1/responses", json={"model": "native-unary", "input": "Hi"})
    assert unary.status_code == 502, unary.text
    assert unary.json()["error"]["message"] == (
        "all providers of model native-unary failed "
        "(native-unary-primary: upstream failed: The model failed, key [redacted])"
    )
    # A failure that gives no message still says the upstream failed.
    one.wire.failure = {"code": "server_error"}
    unsaid = await client.post("/v1/responses", json={"model": "native-unary", "input": "Hi"})
    assert unsaid.json()["error"]["message"] == (
        "all providers of model native-unary failed (native-unary-primary: upstream failed: failed)"
    )


async def test_a_stream_that_ends_without_its_terminal_event_fails(setup: Any) -> None:
    client, one, _ = setup
    one.faults = [Fault("cut", after_tokens=2)]
    r = await client.post("/v1/responses", json={"model": "native", "input": "Hi",
                                                 "stream": True})  # fmt: skip
    kind, data = events(r.text)[-1]
    assert kind == "response.failed"
    assert data["response"]["error"]["message"] == (
        "native-primary: malformed answer (stream ended without response.completed)"
    )


@pytest.mark.parametrize("model_name", ["native", "native-unary"])
@pytest.mark.parametrize(
    ("upstream_reason", "reason"),
    [("max_output_tokens", "max_output_tokens"), ("content_filter", "content_filter"),
     ("some_new_reason", "max_output_tokens")],
)  # fmt: skip
async def test_a_response_cut_short_says_why(
    setup: Any, model_name: str, upstream_reason: str, reason: str
) -> None:
    client, one, _ = setup
    one.wire.incomplete_reason = upstream_reason
    one.text = ("word ",) * 20
    body = {"model": model_name, "input": "Hi", "max_output_tokens": 16,
            "stream": model_name == "native"}  # fmt: skip
    r = await client.post("/v1/responses", json=body)
    assert r.status_code == 200, r.text
    assert one.seen[-1].body["max_output_tokens"] == 16
    final = events(r.text)[-1][1]["response"] if body["stream"] else r.json()
    assert final["status"] == "incomplete"
    assert final["incomplete_details"] == {"reason": reason}


@pytest.mark.parametrize("model_name", ["native", "native-unary"])
async def test_usage_as_the_upstream_reports_it(
    setup: Any, model_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    client, one, _ = setup
    stream = model_name == "native"

    async def usage(sent: Any) -> tuple[int, dict[str, Any]]:
        one.wire.usage = sent
        r = await client.post("/v1/responses", json={"model": model_name, "input": "Hi",
                                                     "stream": stream})  # fmt: skip
        if r.status_code != 200:
            return r.status_code, r.json()
        if not stream:
            return 200, r.json()["usage"]
        final = events(r.text)[-1][1]["response"]
        assert final["status"] == "completed", final
        return 200, final["usage"]

    # Counts left out are zero.
    status, got = await usage({"input_tokens": 11})
    assert status == 200
    assert (got["input_tokens"], got["output_tokens"]) == (11, 0)
    assert got["input_tokens_details"]["cached_tokens"] == 0
    assert got["output_tokens_details"]["reasoning_tokens"] == 0
    # No usage at all: the gateway counts the tokens itself.
    status, got = await usage({})
    assert status == 200 and got["input_tokens"] > 0 and got["output_tokens"] > 0
    # A count that is not one is the upstream's fault, named: a whole answer fails
    # over; a stream's text went out already, so the gateway counts instead.
    for field, sent in [
        ("usage.input_tokens", {"input_tokens": "11"}),
        ("usage.output_tokens", {"input_tokens": 11, "output_tokens": -1}),
        ("cached_tokens", {"input_tokens": 11, "input_tokens_details": {"cached_tokens": 1.5}}),
        ("reasoning_tokens",
         {"input_tokens": 11, "output_tokens_details": {"reasoning_tokens": True}}),
    ]:  # fmt: skip
        status, got = await usage(sent)
        if stream:
            assert status == 200 and got["input_tokens"] == 8, (field, got)
        else:
            assert status == 502, got
            assert f"{field} is not a token count" in got["error"]["message"], got
    if stream:  # the first unusable report is logged, naming its provider
        said = [r.getMessage() for r in caplog.records if "unusable usage" in r.getMessage()]
        assert said[:1] == [
            "native-primary: unusable usage report (usage.input_tokens is not a token count: "
            "11); counting tokens instead"
        ]


async def test_an_upstream_that_keeps_nothing_gets_the_whole_conversation(setup: Any) -> None:
    client, one, _ = setup
    one.wire.stores = False
    first = await client.post("/v1/responses", json={"model": "native", "input": "Hi"})
    assert first.status_code == 200, first.text
    again = await client.post(
        "/v1/responses",
        json={"model": "native", "input": "Again", "previous_response_id": first.json()["id"]},
    )
    assert again.status_code == 200, again.text
    sent = one.seen[-1].body
    assert "previous_response_id" not in sent
    assert [i.get("role") for i in sent["input"] if i.get("type") == "message"] == [
        "user", "assistant", "user"
    ]  # fmt: skip


async def test_a_budgeted_key_bounds_what_the_upstream_may_generate() -> None:
    """A request without max_output_tokens on a key with a budget is bounded to what its
    reservation covers, and the bound reaches an upstream serving the API itself; without
    a budget nothing is added (no null either)."""
    budgeted = "budgeted-key-000000000000"
    async with serving(ResponsesWire()) as one:
        data = with_models(
            model("native", provider("native-primary", "openai", one.url, responses_api=True))
        )
        data["limits"] = {**data.get("limits", {}), "default_max_tokens": 123}
        data["keys"].append({"name": "budgeted", "kind": "api", "secret": budgeted,
                             "budget_usd": 5})  # fmt: skip
        async with (
            running_gateway(data) as gw,
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}", timeout=10) as client,
        ):
            asked = {"model": "native", "input": "hi", "store": False}
            r = await client.post("/v1/responses", json=asked, headers={"x-api-key": budgeted})
            assert r.status_code == 200, r.text
            assert one.seen[-1].body["max_output_tokens"] == 123
            r = await client.post("/v1/responses", json=asked, headers=A)
            assert r.status_code == 200, r.text
            assert "max_output_tokens" not in one.seen[-1].body
