"""A guard's walk over tools' JSON and MCP results, and the folding of look-alike
characters before detection, on the guard itself (the integration tests drive the same
through gateways; these run in milliseconds, for each mutant too)."""

from __future__ import annotations

import json

import pytest

from server.base.config import GuardrailConfig
from server.base.generation import GenerationRequest, Message, ToolSpec
from server.guardrails.answer import _leaves
from server.guardrails.detectors import folded
from server.guardrails.guard import Guard, Rail, tool_payload

CARD = "4111 1111 1111 1111"
SSN = "123-45-6789"


def guard(**actions: str) -> Guard:
    config = GuardrailConfig(id="pii", detectors=["credit_card", "us_ssn"], **actions)
    return Guard([Rail.of(config)], unary=True)


def redacted(text: str) -> bool:
    return "1111" not in text and "6789" not in text and "[" in text


@pytest.mark.parametrize(
    "text",
    [
        "\uff14\uff11\uff11\uff11 \uff11\uff11\uff11\uff11 \uff11\uff11\uff11\uff11 \uff11\uff11\uff11\uff11",
        "4111\u00a01111\u00a01111\u00a01111",
        "4111\u20131111\u20141111\u22121111",
        "4\u200b111 1111 1111 1111",
        "\u0664\u0661\u0661\u0661 \u0661\u0661\u0661\u0661 \u0661\u0661\u0661\u0661 \u0661\u0661\u0661\u0661",
    ],
    ids=["full-width", "no-break-spaces", "dashes", "zero-width", "arabic-indic"],
)
def test_a_card_in_look_alike_characters_is_found_and_its_own_characters_replaced(text):
    out = guard().text(f"pay with {text} today", "input")
    assert out.startswith("pay with [") and out.endswith("] today"), out
    assert not any(c.isdigit() for c in out.replace("_1]", "]")), out


def test_folding_maps_each_character_back_to_where_it_was():
    assert folded("plain ascii 123") == ("plain ascii 123", None)
    assert folded("\uff11\u00a0\u2013") == ("1 -", None)  # one for one: no map needed
    # Full-width ASCII from its first character to its last, not only its digits.
    assert folded("\uff01\uff21\uff5a\uff5e\uff5f") == ("!Az~\uff5f", None)
    text = "a\u200bb\u200c\uff12"
    out, where = folded(text)
    assert (out, where) == ("ab2", [0, 2, 4])
    assert [text[i] for i in where] == ["a", "b", "\uff12"]


def test_an_ssn_with_spaces_is_found_and_an_impossible_one_is_not():
    g = guard()
    assert g.text("ssn 123 45 6789", "input") != "ssn 123 45 6789"
    assert redacted(g.text(f"ssn {SSN}", "input"))
    for impossible in ("000 45 6789", "666-45-6789", "123 00 6789", "123-45-0000", "900 45 6789"):
        assert g.text(f"ssn {impossible}", "input") == f"ssn {impossible}", impossible


def test_tool_arguments_are_scanned_under_every_key_and_stay_json():
    arguments = json.dumps(
        {"data": CARD, "url": f"https://x/?c={CARD}", "name": SSN, "id": CARD,
         "list": [CARD, {"type": "image", "data": SSN}], "n": 3, "ok": True}
    )  # fmt: skip
    out = json.loads(guard().arguments(arguments))
    assert all(redacted(out[k]) for k in ("data", "url", "name", "id"))
    assert redacted(out["list"][0]) and redacted(out["list"][1]["data"])
    assert (out["n"], out["ok"]) == (3, True)
    assert redacted(guard().arguments(f'{{"cut": "{CARD}'))  # not JSON: scanned as text
    off = guard(on_tool_calls="off")
    assert off.arguments(arguments) == arguments


def test_an_mcp_result_is_scanned_but_its_content_blocks_media_and_addresses():
    result = {
        "content": [
            {"type": "text", "text": f"card {CARD}"},
            {"type": "image", "mimeType": "image/png", "data": "QUJD" + "1111" * 4},
            {"type": "resource_link", "uri": f"file:///{CARD}", "name": f"the {SSN} file"},
        ],
        "structuredContent": {"name": SSN, "id": CARD, "data": {"url": CARD}},
        "isError": False,
    }
    g = guard()
    out = g.value(result, "tool_results")
    assert sum(g.counts.values()) == 5  # each value found once: the blocks scanned once
    text, image, link = out["content"]
    assert redacted(text["text"]) and image == result["content"][1]
    assert link["uri"] == f"file:///{CARD}" and redacted(link["name"])
    structured = out["structuredContent"]
    assert redacted(structured["name"]) and redacted(structured["id"])
    assert redacted(structured["data"]["url"]) and out["isError"] is False
    assert redacted(guard().value({"args": {"id": CARD}}, "tool_calls")["args"]["id"])
    top = guard().value({"id": CARD, "url": SSN}, "tool_calls")  # keys of a tool's own JSON
    assert redacted(top["id"]) and redacted(top["url"])
    assert redacted(guard().value([CARD], "tool_calls")[0])
    assert guard(on_tool_results="off").value(result, "tool_results") is result


def test_a_native_bodys_tool_payloads_are_scanned_and_its_media_is_not():
    g = guard()
    body = {
        "content": [
            {"type": "tool_use", "name": "pay", "input": {"id": CARD, "url": CARD}},
            {"type": "mcp_tool_use", "input": {"data": SSN}},
            {"type": "image", "source": {"type": "base64", "data": "4111111111111111"}},
            {"type": "document", "source": {"type": "text", "data": f"my card {CARD}"}},
            {"type": "other", "input": {"id": CARD}},
        ],
        "parts": [
            {"functionCall": {"args": {"id": CARD}}},
            {"functionResponse": {"response": {"name": SSN}}},
        ],  # fmt: skip
    }
    out = g._json(body, "input")
    use, mcp, image, document, other = out["content"]
    assert redacted(use["input"]["id"]) and redacted(use["input"]["url"])
    assert use["name"] == "pay" and redacted(mcp["input"]["data"])
    assert image == body["content"][2] and redacted(document["source"]["data"])
    assert other["input"] == {"id": CARD}  # not a tool's input: its id is an id
    assert g._json({"type": "x", "url": [CARD]}, "input") == {"type": "x", "url": [CARD]}
    assert redacted(out["parts"][0]["functionCall"]["args"]["id"])
    assert redacted(out["parts"][1]["functionResponse"]["response"]["name"])


def test_what_counts_as_a_tools_own_json():
    for kind in ("tool_use", "server_tool_use", "mcp_tool_use"):
        assert tool_payload({"type": kind}, "input")
    assert not tool_payload({"type": "message"}, "input")
    assert not tool_payload({}, "input")
    assert tool_payload({}, "args") and tool_payload({}, "response")
    assert not tool_payload({"type": "response.completed"}, "response")
    assert not tool_payload({}, "data")


def test_a_requests_tools_are_read_as_the_model_reads_them():
    tool = ToolSpec(
        name="pay_4111",
        description=f"Pays with the card {CARD}",
        parameters={
            "type": "object",
            "properties": {"id": {"default": CARD, "enum": [SSN]}},
            "examples": [{"id": CARD, "url": SSN}],
        },  # fmt: skip
    )
    request = GenerationRequest(messages=(Message("user", "hi"),), tools=(tool,))
    (seen,) = guard().request(request).tools
    assert seen.name == "pay_4111" and redacted(seen.description or "")
    properties = seen.parameters["properties"]["id"]  # type: ignore[index]
    assert redacted(properties["default"]) and redacted(properties["enum"][0])
    example = seen.parameters["examples"][0]  # type: ignore[index]
    assert redacted(example["id"]) and redacted(example["url"])
    assert guard(on_input="off").request(request).tools == (tool,)
    bare = ToolSpec(name="t", description=None, parameters=None)
    assert guard().request(GenerationRequest(messages=(), tools=(bare,))).tools == (bare,)


def test_an_answers_prose_leaves_include_a_tools_strings_under_any_key():
    tool = {"type": "tool_use", "input": {"id": "a", "list": ["b", {"url": "c"}]}}
    media = {"type": "image", "source": {"data": "d"}, "list": ["e"]}
    found: list[tuple[object, object]] = []
    _leaves({"content": [tool, media]}, found)
    leaves = [container[key] for container, key in found]  # type: ignore[index]
    assert leaves == ["a", "b", "c"]  # a type, media and a list outside a tool: none
