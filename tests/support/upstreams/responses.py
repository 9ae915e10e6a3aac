"""OpenAI's Responses API as an upstream (/v1/responses), JSON or SSE: a reasoning item
(a summary and, when `include` asks, encrypted content), a `web_search_call` item when
that built-in tool is offered, then the reply's text; usage with reasoning tokens; the
response's id when it is stored. A function tool is called when `tool_choice` asks for
one by name (`required`: every function tool offered, in parallel) instead of the
message; `fail` ends the answer with a `response.failed` or an `error` event (a unary
answer: a response whose status is `failed`); `incomplete_reason` is the reason of a
response cut short; `usage`, when set, is sent as the response's usage as it is.

Every request is checked as the Responses API checks it (`refusal`): the key as
`Authorization: Bearer`, the fields of the installed openai SDK's
`ResponseCreateParams` (an unknown one is the 400 "Unrecognized request argument
supplied"), and the types and ranges of the sampling and control fields.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from openai.types.responses import response_create_params

from tests.support.upstreams import shapes
from tests.support.upstreams.base import Reply, sse
from tests.support.upstreams.checks import (
    BOOL,
    KEY,
    LIST,
    OBJECT,
    STRING,
    Check,
    Refusal,
    first_problem,
    integer,
    number,
    of_type,
    one_of,
    str_map,
    strings,
)
from tests.support.upstreams.openai import bad_request, credential_refusal, unknown_path

# The reasoning summary's parts, each streamed in pieces.
SUMMARY = (("Thinking", " briefly."), ("Done",))
PATHS = frozenset({"/v1/responses"})
FIELDS = frozenset(response_create_params.ResponseCreateParamsStreaming.__annotations__)
CHECKS: dict[str, Check] = {
    "model": STRING,
    "input": of_type(str, list, word="a string or an array"),
    "instructions": STRING,
    "max_output_tokens": integer(1),
    "temperature": number(0, 2),
    "top_p": number(0, 1),
    "top_logprobs": integer(0, 20),
    "stream": BOOL,
    "store": BOOL,
    "include": strings(),
    "tools": LIST,
    "tool_choice": of_type(str, dict, word="a string or an object"),
    "parallel_tool_calls": BOOL,
    "reasoning": OBJECT,
    "text": OBJECT,
    "metadata": str_map(STRING),
    "previous_response_id": STRING,
    "truncation": one_of("auto", "disabled"),
    "user": STRING,
}


@dataclass
class ResponsesWire:
    # The key the fake expects as `Authorization: Bearer`; None: any or none.
    key: str | None = KEY
    # Encrypted reasoning this upstream handed out, in order.
    issued: list[str] = field(default_factory=list)
    fail: Literal["failed", "error"] | None = None
    failure: dict[str, Any] = field(default_factory=lambda: dict(FAILURE))
    incomplete_reason: str = "max_output_tokens"
    usage: Any = None
    # False: the upstream keeps no response (it answers `store: false` whatever was asked).
    stores: bool = True
    _ids: Any = field(default_factory=itertools.count)

    def refusal(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> Refusal | None:
        refused = credential_refusal(headers, self.key) or unknown_path(path, PATHS)
        if refused is not None:
            return refused
        if extra := sorted(set(body) - FIELDS):
            return bad_request(f"Unrecognized request argument supplied: {', '.join(extra)}")
        if "model" not in body:
            return bad_request("Missing required parameter: 'model'.", "model",
                               "missing_required_parameter")  # fmt: skip
        if (found := first_problem(body, CHECKS, nullable=True)) is not None:
            name, problem = found
            return bad_request(f"Invalid value for '{name}': {problem}.", name, "invalid_value")
        return None

    def is_stream(self, path: str, body: dict[str, Any]) -> bool:
        return bool(body.get("stream"))

    def max_tokens(self, body: dict[str, Any]) -> int | None:
        return body.get("max_output_tokens")

    def error(self, status: int) -> Any:
        return {"error": {"message": f"fake failure {status}", "type": "server_error"}}

    def _items(self, body: dict[str, Any], reply: Reply) -> tuple[str, list[dict[str, Any]]]:
        n = next(self._ids)
        reasoning: dict[str, Any] = {
            "id": f"rs_up{n}", "type": "reasoning",
            "summary": [{"type": "summary_text", "text": "".join(part)} for part in SUMMARY],
        }  # fmt: skip
        if "reasoning.encrypted_content" in (body.get("include") or ()):
            reasoning["encrypted_content"] = f"enc-{n}"
            self.issued.append(reasoning["encrypted_content"])
        items = [reasoning]
        if any(t.get("type") == "web_search" for t in body.get("tools") or ()):
            items.append(
                {"id": f"ws_up{n}", "type": "web_search_call", "status": "completed",
                 "action": {"type": "search", "query": "fake"}}
            )  # fmt: skip
        calls = _functions_to_call(body)
        for i, (namespace, name) in enumerate(calls):
            call = {"id": f"fc_up{n}_{i}", "type": "function_call", "status": "completed",
                    "call_id": f"call_up{n}_{i}", "name": name,
                    "arguments": json.dumps(shapes.ARGUMENTS)}  # fmt: skip
            if namespace is not None:
                call["namespace"] = namespace
            items.append(call)
        if not calls:
            # The text in two parts, as a reply with an annotation boundary comes.
            parts = ["".join(reply.tokens[:1]), "".join(reply.tokens[1:])]
            items.append(
                {"id": f"msg_up{n}", "type": "message", "status": "completed",
                 "role": "assistant",
                 "content": [{"type": "output_text", "text": t, "annotations": []}
                             for t in parts if t]}
            )  # fmt: skip
        return f"resp_up{n}", items

    def _response(
        self, rid: str, body: dict[str, Any], reply: Reply, items: list[dict[str, Any]]
    ) -> dict[str, Any]:
        done = reply.finish == "stop"
        u = reply.usage
        output = len(reply.tokens) + 5
        usage = self.usage if self.usage is not None else {
            "input_tokens": u.prompt_tokens, "output_tokens": output,
            "total_tokens": u.prompt_tokens + output,
            "input_tokens_details": {"cached_tokens": u.cached_tokens},
            "output_tokens_details": {"reasoning_tokens": 5},
        }  # fmt: skip
        response = {
            "id": rid, "object": "response", "status": "completed" if done else "incomplete",
            "incomplete_details": None if done else {"reason": self.incomplete_reason},
            "model": body["model"], "output": items,
            "store": body.get("store", True) and self.stores,
            "error": None, "usage": usage,
        }  # fmt: skip
        if self.fail is not None:
            response.update(status="failed", incomplete_details=None, error=self.failure)
        return response

    def unary(self, path: str, body: dict[str, Any], reply: Reply) -> tuple[dict[str, str], Any]:
        rid, items = self._items(body, reply)
        return {}, self._response(rid, body, reply, items)

    def stream(
        self, path: str, body: dict[str, Any], reply: Reply
    ) -> tuple[list[bytes], list[bytes], list[bytes]]:
        rid, items = self._items(body, reply)
        seq = itertools.count()

        def ev(kind: str, **data: Any) -> bytes:
            return sse({"type": kind, "sequence_number": next(seq), **data}, kind)

        start = {"id": rid, "object": "response", "status": "in_progress", "output": []}
        before = [ev("response.created", response=start)]
        *extra, last = items
        if last["type"] == "function_call":
            extra, last = items, None
        for index, item in enumerate(extra):
            if item["type"] == "function_call":
                before += _call_events(ev, index, item)
                continue
            before.append(ev("response.output_item.added", output_index=index, item=item))
            if item["type"] == "reasoning":
                for part, pieces in enumerate(SUMMARY):
                    before += [
                        ev("response.reasoning_summary_text.delta", item_id=item["id"],
                           output_index=index, summary_index=part, delta=piece)
                        for piece in pieces
                    ]  # fmt: skip
            before.append(ev("response.output_item.done", output_index=index, item=item))
        index = len(extra)
        per_token, after = [], []
        if last is not None:
            empty = {**last, "status": "in_progress", "content": []}
            before.append(ev("response.output_item.added", output_index=index, item=empty))
            per_token = [
                ev("response.output_text.delta", item_id=last["id"], output_index=index,
                   content_index=0, delta=token, logprobs=[])
                for token in reply.tokens
            ]  # fmt: skip
            after.append(ev("response.output_item.done", output_index=index, item=last))
        response = self._response(rid, body, reply, items)
        if self.fail == "error":
            after.append(ev("error", **self.failure, param=None))
        elif self.fail == "failed":
            after.append(ev("response.failed", response=response))
        elif reply.finish == "stop":
            after.append(ev("response.completed", response=response))
        else:
            after.append(ev("response.incomplete", response=response))
        return before, per_token, after


# A failure as the API reports it, with a secret in its text (the gateway redacts it).
FAILURE = {"code": "server_error", "message": "The model failed, key sk-proj-abcdefghijklmnopqrstu"}


def _functions_to_call(body: dict[str, Any]) -> list[tuple[str | None, str]]:
    """The functions a model calls now, each with its namespace (None outside one): the
    one `tool_choice` names, or every one offered when it says `required` (those of
    namespace tools too); none otherwise."""
    functions: list[tuple[str | None, str]] = []
    for tool in body.get("tools") or ():
        if tool.get("type") == "function":
            functions.append((None, tool["name"]))
        elif tool.get("type") == "namespace":
            functions.extend((tool["name"], t["name"]) for t in tool["tools"])
    choice = body.get("tool_choice")
    if choice == "required":
        return functions
    if isinstance(choice, dict) and choice.get("type") == "function":
        return [(None, str(choice["name"]))]
    return []


def _call_events(ev: Any, index: int, item: dict[str, Any]) -> list[bytes]:
    """A function call as the API streams it: the item without its arguments, the
    arguments in two fragments, then the whole item."""
    arguments = item["arguments"]
    half = len(arguments) // 2
    return [
        ev("response.output_item.added", output_index=index, item={**item, "arguments": "",
                                                                   "status": "in_progress"}),
        *(ev("response.function_call_arguments.delta", item_id=item["id"], output_index=index,
             delta=piece) for piece in (arguments[:half], arguments[half:])),
        ev("response.function_call_arguments.done", item_id=item["id"], output_index=index,
           arguments=arguments),
        ev("response.output_item.done", output_index=index, item=item),
    ]  # fmt: skip
