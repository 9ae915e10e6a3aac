"""OpenAI's Responses API as an upstream (/v1/responses), JSON or SSE: a reasoning item
(a summary and, when `include` asks, encrypted content), a `web_search_call` item when
that built-in tool is offered, then the reply's text; usage with reasoning tokens; the
response's id when it is stored.

Every request is checked as the Responses API checks it (`refusal`): the key as
`Authorization: Bearer`, the fields of the installed openai SDK's
`ResponseCreateParams` (an unknown one is the 400 "Unrecognized request argument
supplied"), and the types and ranges of the sampling and control fields.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from openai.types.responses import response_create_params

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

SUMMARY = ("Thinking", " briefly.")
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
            "summary": [{"type": "summary_text", "text": "".join(SUMMARY)}],
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
        text = "".join(reply.tokens)
        items.append(
            {"id": f"msg_up{n}", "type": "message", "status": "completed", "role": "assistant",
             "content": [{"type": "output_text", "text": text, "annotations": []}]}
        )  # fmt: skip
        return f"resp_up{n}", items

    def _response(
        self, rid: str, body: dict[str, Any], reply: Reply, items: list[dict[str, Any]]
    ) -> dict[str, Any]:
        done = reply.finish == "stop"
        u = reply.usage
        output = len(reply.tokens) + 5
        return {
            "id": rid, "object": "response", "status": "completed" if done else "incomplete",
            "incomplete_details": None if done else {"reason": "max_output_tokens"},
            "model": body["model"], "output": items, "store": body.get("store", True),
            "usage": {
                "input_tokens": u.prompt_tokens, "output_tokens": output,
                "total_tokens": u.prompt_tokens + output,
                "input_tokens_details": {"cached_tokens": u.cached_tokens},
                "output_tokens_details": {"reasoning_tokens": 5},
            },
        }  # fmt: skip

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
        *extra, message = items
        for index, item in enumerate(extra):
            before.append(ev("response.output_item.added", output_index=index, item=item))
            if item["type"] == "reasoning":
                for piece in SUMMARY:
                    before.append(
                        ev("response.reasoning_summary_text.delta", item_id=item["id"],
                           output_index=index, summary_index=0, delta=piece)
                    )  # fmt: skip
            before.append(ev("response.output_item.done", output_index=index, item=item))
        index = len(extra)
        empty = {**message, "status": "in_progress", "content": []}
        before.append(ev("response.output_item.added", output_index=index, item=empty))
        per_token = [
            ev("response.output_text.delta", item_id=message["id"], output_index=index,
               content_index=0, delta=token, logprobs=[])
            for token in reply.tokens
        ]  # fmt: skip
        after = [
            ev("response.output_item.done", output_index=index, item=message),
            ev(
                "response.completed" if reply.finish == "stop" else "response.incomplete",
                response=self._response(rid, body, reply, items),
            ),
        ]
        return before, per_token, after
