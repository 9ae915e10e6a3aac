"""What a stored response keeps when guardrails redact: every prose string of its
items as the guardrails of its phase left it (a tool's output as tool results, a
call's JSON arguments as tool calls, in their string values only), opaque fields (ids,
types, signatures) as they are, nothing counted or blocked again."""

from __future__ import annotations

import json

from gateway.v1 import responses_pb2 as rpb
from google.protobuf import json_format

from server.application.dialects.responses import at_rest
from server.base.config import GuardrailConfig
from server.guardrails.guard import Guard, Rail

CARD = "4111 1111 1111 1111"
EMAIL = "alice@example.com"


def guard(**actions: str) -> Guard:
    config = GuardrailConfig(id="pii", detectors=["email", "credit_card"], **actions)
    return Guard([Rail.of(config)], unary=True)


def test_each_phase_is_redacted_by_its_own_action() -> None:
    # Only tool results redact: only a tool's output changes.
    only = guard(on_input="log", on_output="block", on_tool_calls="off")
    items = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": EMAIL}]},
        {"type": "function_call", "call_id": "c1", "name": "mail", "arguments": json.dumps({"to": EMAIL})},
        {"type": "function_call_output", "call_id": "c1", "output": f"sent to {EMAIL}"},
        {"type": "mcp_call", "output": [{"type": "text", "text": f"card {CARD}"}]},
    ]  # fmt: skip
    kept = at_rest.items(only, items, "input")
    assert kept[:2] == tuple(items[:2])
    assert kept[2]["output"] == "sent to [EMAIL_1]"
    assert kept[3]["output"] == [{"type": "text", "text": "card [CREDIT_CARD_1]"}]
    assert not only.counts  # nothing counted again


def test_opaque_fields_stay_and_arguments_stay_json() -> None:
    both = guard()
    item = {
        "id": EMAIL, "type": "function_call", "call_id": EMAIL, "name": EMAIL, "status": EMAIL,
        "arguments": json.dumps({"to": EMAIL, "id": [EMAIL], "n": 3, "list": [CARD, None]}),
        "summary": [{"type": "summary_text", "text": f"{EMAIL} {CARD}"}],
    }  # fmt: skip
    (kept,) = at_rest.items(both, [item], "output")
    assert {k: kept[k] for k in ("id", "call_id", "name", "status")} == dict.fromkeys(
        ("id", "call_id", "name", "status"), EMAIL
    )
    assert json.loads(kept["arguments"]) == {
        "to": "[EMAIL_1]", "id": [EMAIL], "n": 3, "list": ["[CREDIT_CARD_1]", None],
    }  # fmt: skip
    assert kept["summary"] == [{"type": "summary_text", "text": "[EMAIL_1] [CREDIT_CARD_1]"}]
    assert item["arguments"] != kept["arguments"]  # a copy: the answer's own stays
    cut = {"type": "function_call", "arguments": f'{{"to": "{EMAIL}'}  # not JSON: as text
    assert at_rest.items(both, [cut], "output")[0]["arguments"] == '{"to": "[EMAIL_1]'


def test_the_response_keeps_its_instructions_and_output_redacted() -> None:
    both = guard()
    answer = rpb.Response(id="resp_1", instructions=f"Owner {EMAIL}", model="m")
    json_format.ParseDict(
        {"message": {"id": "msg_1", "type": "message", "role": "assistant",
                     "content": [{"type": "output_text", "text": f"To {EMAIL}"}]}},
        answer.output.add(),
    )  # fmt: skip
    json_format.ParseDict(
        {"function_call": {"call_id": f"c_{EMAIL}", "name": "mail",
                           "arguments": json.dumps({"to": EMAIL})}},
        answer.output.add(),
    )  # fmt: skip
    kept = at_rest.response(both, answer)
    assert kept.instructions == "Owner [EMAIL_1]" and kept.id == "resp_1"
    assert kept.output[0].message.content[0].text == "To [EMAIL_1]"
    assert kept.output[0].message.id == "msg_1"
    assert json.loads(kept.output[1].function_call.arguments) == {"to": "[EMAIL_1]"}
    assert kept.output[1].function_call.call_id == f"c_{EMAIL}"  # an id, as it is
    assert answer.instructions == f"Owner {EMAIL}"  # the answer itself is untouched
    bare = at_rest.response(both, rpb.Response(id="r"))
    assert not bare.HasField("instructions")


def test_a_guard_keeps_what_it_redacts_and_no_more() -> None:
    one = guard(on_input="redact", on_output="block")
    assert one.at_rest(f"{EMAIL} and {EMAIL}", "input") == "[EMAIL_1] and [EMAIL_1]"
    assert one.at_rest(f"{EMAIL}", "output") == EMAIL  # a block stopped the call, if any
    assert one.at_rest("nothing here", "input") == "nothing here"
    assert not one.counts
