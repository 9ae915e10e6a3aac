"""The gateway's generation events -> a Responses API response and its stream events.

`Builder` follows one generation: it opens an output item when its first fragment
comes (a `message` for text, a `function_call` per call, a `reasoning` item for a
summary), closes it when the next one opens or the generation ends, and numbers every
event. The stream is OpenAI's:

    response.created, response.in_progress
    per item: response.output_item.added
      message:       content_part.added, output_text.delta..., output_text.done,
                     content_part.done
      function_call: function_call_arguments.delta..., function_call_arguments.done
      reasoning:     reasoning_summary_part.added, reasoning_summary_text.delta...,
                     reasoning_summary_text.done, reasoning_summary_part.done
      response.output_item.done
    one of response.completed, response.incomplete, response.failed

A whole (unary) response runs the same builder without making the events.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, cast

from gateway.v1 import responses_pb2 as rpb
from gateway.v1 import responses_service_pb2 as rs
from gateway.v1 import usage_pb2
from google.protobuf import struct_pb2

from server.application.dialects.responses.request import DIALECT, Item, new_id
from server.application.pipeline.chain import (
    CHAIN_EVENTS,
    MAX_ROUNDS,
    CallArguments,
    CallEnded,
    CallOpened,
    ChainEvent,
    Listed,
    ToolError,
)
from server.application.pipeline.engine import Choice, Fragment
from server.base.errors import Code, GatewayError
from server.base.generation import (
    NativeEvent,
    ReasoningDelta,
    TextDelta,
    TokenLogprob,
    ToolCallDelta,
    token_logprobs,
    unseal,
)
from server.base.pipeline import Encoded, encoded_json

Event = rs.StreamResponseResponse
TEXT_DELTA = "response.output_text.delta"
# Finish reasons that make a response `incomplete`, with OpenAI's reason.
INCOMPLETE = {
    "length": "max_output_tokens", "content_filter": "content_filter",
    MAX_ROUNDS: "max_tool_calls",
}  # fmt: skip
# OpenAI's `error.code` of a failed response, per gRPC code.
FAILURE_CODE = {
    Code.RESOURCE_EXHAUSTED: "rate_limit_exceeded",
    Code.INVALID_ARGUMENT: "invalid_prompt",
}


class _Open:
    """The item being generated: its kind, index and what it holds so far."""

    __slots__ = (
        "arguments", "call_id", "id", "index", "kind", "logprobs", "name", "namespace", "parts",
    )  # fmt: skip

    def __init__(self, kind: str, index: int, item_id: str) -> None:
        self.kind = kind
        self.index = index
        self.id = item_id
        self.parts: list[str] = []  # text, or reasoning summary parts' text
        self.logprobs: list[rpb.TextLogprob] = []
        self.arguments: list[str] = []
        self.call_id = ""
        self.name = ""
        self.namespace: str | None = None


class Builder:
    """One response's output items and, when `emit`, its stream events."""

    def __init__(
        self,
        head: rpb.Response,
        provider: str,
        include_encrypted: bool,
        emit: bool,
        keep: bool = True,
        namespaces: Mapping[str, tuple[str, str]] | None = None,
    ) -> None:
        self.response = head
        # The request's namespaced functions by tool name: their calls are written with
        # the function's own name and its namespace.
        self.namespaces = namespaces or {}
        # Whether the output is also wanted as conversation items (to be stored).
        self.keep = keep
        self.provider = provider
        self.include_encrypted = include_encrypted
        self.emit = emit
        self.sequence = 0
        self.output: list[rpb.OutputItem] = []
        # The output as conversation items, for the stored context.
        self.items: list[Item] = []
        self._open: _Open | None = None
        self._calls: dict[int, _Open] = {}  # tool calls by the upstream's index
        # MCP calls the gateway runs, open until they end (the model may open the next
        # before one has run), each holding its place in the output.
        self._mcp: dict[str, _Open] = {}

    # -- events ---------------------------------------------------------------------

    def _event(self, kind: str, **event: Any) -> Event:
        out = Event(type=kind, sequence_number=self.sequence, **event)
        self.sequence += 1
        return out

    def _snapshot(self, kind: str) -> Event:
        return self._event(kind, response_event=rs.ResponseEvent(response=self.response))

    def start(self) -> list[Event]:
        if not self.emit:
            return []
        return [self._snapshot("response.created"), self._snapshot("response.in_progress")]

    def add(self, fragment: Fragment) -> list[Event]:
        if type(fragment) is TextDelta:
            return self._text(fragment.text, fragment.logprobs)
        if isinstance(fragment, ToolCallDelta):
            return self._call(fragment)
        if isinstance(fragment, ReasoningDelta):
            return self._reasoning(fragment)
        native = cast(NativeEvent, fragment)
        # Only an upstream serving this dialect answers a request of it natively.
        return self._native(native.data) if native.dialect == DIALECT else []

    def gathered(self, choice: Choice) -> None:
        """Adds a whole generation's text and calls at once (a unary response)."""
        if choice.text:
            self._text("".join(choice.text), tuple(choice.logprobs))
        calls = choice.tool_calls
        for index, call in enumerate(calls):
            self._call(ToolCallDelta(index, call.id, call.name, call.arguments, 0, call.signature))

    def text_delta(self, text: str) -> Event | None:
        """The event of one more fragment of the message being written (a stream's
        common case); None when no message is open, for `add` to open one."""
        current = self._open
        if current is None or current.kind != "message":
            return None
        current.parts.append(text)
        seq = self.sequence
        self.sequence = seq + 1
        delta = rs.TextDeltaEvent(
            content_index=0, delta=text, item_id=current.id, output_index=current.index
        )
        return Event(type="response.output_text.delta", sequence_number=seq, text_delta=delta)

    def relayed(self, events: list[dict[str, Any]]) -> list[Event | Encoded]:
        """An upstream's own text fragments (`Relayed`, this API's events) as the
        message being written takes them: numbered in this stream, under its item's id
        and place, their other fields as the upstream wrote them. The first opens a
        message, as `add` does, when none is being written."""
        out: list[Event | Encoded] = []
        current = self._open
        if current is None or current.kind != "message":
            out.extend(self._new_message())
            current = self._open
            assert current is not None
        encoded = []
        for event in events:
            current.parts.append(event["delta"])
            if probs := event.get("logprobs"):  # the upstream's, kept for the response too
                current.logprobs.extend(_logprob(e) for e in token_logprobs(probs))
            event["sequence_number"] = self.sequence
            self.sequence += 1
            event["item_id"] = current.id
            event["output_index"] = current.index
            event["content_index"] = 0
            encoded.append(encoded_json(event))
        out.append(Encoded(encoded, [TEXT_DELTA] * len(encoded)))
        return out

    def _text(self, text: str, logprobs: tuple[TokenLogprob, ...]) -> list[Event]:
        current = self._open
        out: list[Event] = []
        if current is None or current.kind != "message":
            out = self._new_message()
            current = self._open
            assert current is not None
        current.parts.append(text)
        probs = [_logprob(e) for e in logprobs]
        current.logprobs.extend(probs)
        if self.emit:
            delta = rs.TextDeltaEvent(
                content_index=0, delta=text, item_id=current.id, logprobs=probs,
                output_index=current.index,
            )  # fmt: skip
            out.append(self._event("response.output_text.delta", text_delta=delta))
        return out

    def _new_message(self) -> list[Event]:
        """Closes the open item and opens a message (its events, when emitting)."""
        out = self._close()
        current = self._begin("message", new_id("msg"))
        if self.emit:
            item = rpb.OutputItem(message=self._message(current, "in_progress", False))
            out.append(self._item_event("response.output_item.added", current, item))
            part = rpb.OutputText(type="output_text", text="")
            out.append(self._part_event("response.content_part.added", current, part))
        return out

    def _call(self, fragment: ToolCallDelta) -> list[Event]:
        out: list[Event] = []
        current = self._calls.get(fragment.index)
        if current is None:
            if fragment.signature is not None:
                # The call's reasoning state (sealed) goes where Responses keeps reasoning
                # state: a reasoning item's encrypted content, given back before the call.
                reasoning = {"type": "reasoning", "encrypted_content": fragment.signature}
                out = self._native(reasoning)
            out += self._close()
            current = self._begin("function_call", new_id("fc"))
            current.call_id = fragment.id or new_id("call")
            self._name(current, fragment.name or "")
            self._calls[fragment.index] = current
            if self.emit:
                item = rpb.OutputItem(function_call=self._function_call(current, "in_progress"))
                out.append(self._item_event("response.output_item.added", current, item))
        elif fragment.name:
            self._name(current, fragment.name)
        if fragment.arguments:
            current.arguments.append(fragment.arguments)
            if self.emit and current is self._open:
                delta = rs.DeltaEvent(
                    delta=fragment.arguments, item_id=current.id, output_index=current.index
                )
                out.append(self._event("response.function_call_arguments.delta", delta=delta))
        return out

    def _name(self, current: _Open, name: str) -> None:
        current.namespace, current.name = self.namespaces.get(name, (None, name))

    def _reasoning(self, fragment: ReasoningDelta) -> list[Event]:
        out: list[Event] = []
        current = self._open
        if current is None or current.kind != "reasoning":
            out = self._close()
            current = self._begin("reasoning", new_id("rs"))
            if self.emit:
                item = rpb.OutputItem(reasoning=rpb.ReasoningItem(id=current.id, type="reasoning"))
                out.append(self._item_event("response.output_item.added", current, item))
        index = fragment.summary_index
        while len(current.parts) <= index:
            if self.emit and current.parts:
                out.extend(self._summary_done(current, len(current.parts) - 1))
            current.parts.append("")
            if self.emit:
                part = rs.SummaryPartEvent(
                    item_id=current.id, output_index=current.index,
                    part=rpb.SummaryText(type="summary_text", text=""),
                    summary_index=len(current.parts) - 1,
                )  # fmt: skip
                out.append(self._event("response.reasoning_summary_part.added", summary_part=part))
        current.parts[index] += fragment.text
        if self.emit:
            delta = rs.DeltaEvent(
                delta=fragment.text, item_id=current.id, output_index=current.index,
                summary_index=index,
            )  # fmt: skip
            out.append(self._event("response.reasoning_summary_text.delta", delta=delta))
        return out

    def _native(self, item: Mapping[str, Any]) -> list[Event]:
        """A whole item from an upstream serving the Responses API: a reasoning item
        completes the one being summarised (or stands alone); others pass as they are."""
        raw = dict(item)
        out: list[Event] = []
        if raw.get("type") == "reasoning":
            current = self._open
            if current is None or current.kind != "reasoning":
                out = self._close()
                current = self._begin("reasoning", str(raw.get("id") or new_id("rs")))
                if self.emit:
                    empty = rpb.ReasoningItem(id=current.id, type="reasoning")
                    item = rpb.OutputItem(reasoning=empty)
                    out.append(self._item_event("response.output_item.added", current, item))
            if not current.parts:
                current.parts = [str(s.get("text", "")) for s in raw.get("summary") or ()]
            out.extend(self._close(encrypted=raw.get("encrypted_content")))
            return out
        out = self._close()
        current = self._begin("other", str(raw.get("id") or new_id("item")))
        struct = struct_pb2.Struct()
        struct.update(raw)
        item = rpb.OutputItem(other=struct)
        if self.emit:
            out.append(self._item_event("response.output_item.added", current, item))
        self._open = None
        self._append(item)
        self.items.append(raw)
        if self.emit:
            out.append(self._item_event("response.output_item.done", current, item))
        return out

    # -- MCP tools the gateway runs (server/application/pipeline/chain.py) ---------------

    def take(self, fragment: Fragment | ChainEvent) -> list[Event]:
        """A run's fragment or a chain's event."""
        if isinstance(fragment, CHAIN_EVENTS):
            return self.chained(fragment)
        return self.add(fragment)

    def chained(self, event: ChainEvent) -> list[Event]:
        """The items and events of a chain's own event."""
        if isinstance(event, CallArguments):
            current = self._mcp.get(event.call_id)
            if current is None or current.kind != "mcp_call":
                return []
            current.arguments.append(event.delta)
            if not self.emit:
                return []
            delta = rs.DeltaEvent(delta=event.delta, item_id=current.id, output_index=current.index)
            return [self._event("response.mcp_call_arguments.delta", delta=delta)]
        if isinstance(event, CallOpened):
            kind = "mcp_approval_request" if event.tool.approval else "mcp_call"
            return self._mcp_open(event.call_id, kind, event.tool.label, event.tool.name)
        if isinstance(event, Listed):
            return self._listed(event)
        return self._mcp_ended(event)

    def _listed(self, listed: Listed) -> list[Event]:
        out = self._close()
        current = self._begin("mcp_list_tools", new_id("mcpl"))
        self._open = None
        item: Item = {"id": current.id, "type": "mcp_list_tools",
                      "server_label": listed.label, "tools": []}  # fmt: skip
        if self.emit:
            out.append(self._item_event("response.output_item.added", current, _other(item)))
            out.append(self._progress("response.mcp_list_tools.in_progress", current))
        item["tools"] = [_listed_tool(t) for t in listed.tools]
        if listed.error is not None:
            item["error"] = listed.error
        whole = _other(item)
        self._append(whole)
        self.items.append(item)
        if self.emit:
            ended = "failed" if listed.error is not None else "completed"
            out.append(self._progress(f"response.mcp_list_tools.{ended}", current))
            out.append(self._item_event("response.output_item.done", current, whole))
        return out

    def _mcp_open(self, call_id: str, kind: str, label: str, name: str) -> list[Event]:
        out = self._close()
        current = self._begin(kind, call_id)
        self._open = None
        current.name, current.call_id = name, label  # call_id holds the server's label
        self._mcp[call_id] = current
        self._append(rpb.OutputItem())  # its place, filled when it ends
        if self.emit and kind == "mcp_call":
            item = self._mcp_item(current, "in_progress")
            out.append(self._item_event("response.output_item.added", current, _other(item)))
            out.append(self._progress("response.mcp_call.in_progress", current))
        return out

    def _mcp_ended(self, end: CallEnded) -> list[Event]:
        out: list[Event] = []
        pending = end.status == "pending"
        if end.call_id not in self._mcp:  # run on an approval, before any round
            kind = "mcp_approval_request" if pending else "mcp_call"
            out = self._mcp_open(end.call_id, kind, end.tool.label, end.tool.name)
        current = self._mcp.pop(end.call_id)
        current.arguments = [end.arguments]
        if pending:
            item = self._mcp_item(current, "")
            if self.emit:
                out.append(self._item_event("response.output_item.added", current, _other(item)))
        else:
            item = self._mcp_item(current, end.status, end)
            if self.emit:
                done = {"item_id": current.id, "output_index": current.index,
                        "arguments": end.arguments}  # fmt: skip
                out.append(self._other_event("response.mcp_call_arguments.done", done))
                if end.status != "incomplete":
                    ended = "completed" if end.status == "completed" else "failed"
                    out.append(self._progress(f"response.mcp_call.{ended}", current))
        whole = _other(item)
        self._place(current.index, whole)
        self.items.append(item)
        if self.emit:
            out.append(self._item_event("response.output_item.done", current, whole))
        return out

    def _mcp_item(self, current: _Open, status: str, end: CallEnded | None = None) -> Item:
        item: Item = {
            "id": current.id, "type": current.kind, "server_label": current.call_id,
            "name": current.name, "arguments": "".join(current.arguments),
        }  # fmt: skip
        if current.kind == "mcp_call":
            item["status"] = status
            if end is not None:
                item["output"] = end.output
                item["error"] = _error(end.error) if end.error is not None else None
                if end.approval_request_id is not None:
                    item["approval_request_id"] = end.approval_request_id
        return item

    def _abandoned(self) -> list[Event]:
        """Ends the MCP calls the model opened that never ran (the chain stopped)."""
        out: list[Event] = []
        for current in list(self._mcp.values()):
            self._mcp.pop(current.id)
            item = self._mcp_item(current, "incomplete")
            whole = _other(item)
            self._place(current.index, whole)
            self.items.append(item)
            if self.emit:
                out.append(self._item_event("response.output_item.done", current, whole))
        return out

    def _progress(self, kind: str, current: _Open) -> Event:
        return self._other_event(kind, {"item_id": current.id, "output_index": current.index})

    def _other_event(self, kind: str, fields: dict[str, Any]) -> Event:
        struct = struct_pb2.Struct()
        struct.update(fields)
        return self._event(kind, other=struct)

    def _place(self, index: int, item: rpb.OutputItem) -> None:
        (self.output if self.emit else self.response.output)[index].CopyFrom(item)

    # -- items ----------------------------------------------------------------------

    def _begin(self, kind: str, item_id: str) -> _Open:
        count = len(self.output) if self.emit else len(self.response.output)
        current = _Open(kind, count, item_id)
        self._open = current
        return current

    def _item_event(self, kind: str, current: _Open, item: rpb.OutputItem) -> Event:
        event = rs.OutputItemEvent(output_index=current.index, item=item)
        return self._event(kind, output_item=event)

    def _part_event(self, kind: str, current: _Open, part: rpb.OutputText) -> Event:
        event = rs.ContentPartEvent(
            content_index=0, item_id=current.id, output_index=current.index, part=part
        )
        return self._event(kind, content_part=event)

    def _message(self, current: _Open, status: str, whole: bool = True) -> rpb.OutputMessage:
        content = [self._text_part(current)] if whole else []
        return rpb.OutputMessage(
            id=current.id, type="message", status=status, content=content, role="assistant"
        )

    def _text_part(self, current: _Open) -> rpb.OutputText:
        return rpb.OutputText(
            type="output_text", text="".join(current.parts), logprobs=current.logprobs
        )

    def _function_call(self, current: _Open, status: str) -> rpb.FunctionCallItem:
        return rpb.FunctionCallItem(
            id=current.id, type="function_call", status=status,
            arguments="".join(current.arguments), call_id=current.call_id, name=current.name,
            namespace=current.namespace,
        )  # fmt: skip

    def _summary_done(self, current: _Open, index: int) -> list[Event]:
        text = current.parts[index]
        done = rs.SummaryTextDoneEvent(
            item_id=current.id, output_index=current.index, summary_index=index, text=text
        )
        part = rs.SummaryPartEvent(
            item_id=current.id, output_index=current.index,
            part=rpb.SummaryText(type="summary_text", text=text), summary_index=index,
        )  # fmt: skip
        return [
            self._event("response.reasoning_summary_text.done", summary_text_done=done),
            self._event("response.reasoning_summary_part.done", summary_part=part),
        ]

    def _close(self, status: str = "completed", encrypted: Any = None) -> list[Event]:
        """Finishes the open item: its closing events, and it joins the output."""
        current = self._open
        if current is None:
            return []
        self._open = None
        out: list[Event] = []
        if current.kind == "message":
            part = self._text_part(current)
            if not self.emit:
                # A whole response: written in place, nothing else needs the item.
                message = self.response.output.add().message
                message.id, message.type, message.status = current.id, "message", status
                message.role = "assistant"
                message.content.append(part)
                self._kept_message(current, part.text, status)
                return []
            item = rpb.OutputItem(message=self._message(current, status))
            if self.emit:
                done = rs.TextDoneEvent(
                    content_index=0, item_id=current.id, logprobs=current.logprobs,
                    output_index=current.index, text=part.text,
                )  # fmt: skip
                out.append(self._event("response.output_text.done", text_done=done))
                out.append(self._part_event("response.content_part.done", current, part))
            self._kept_message(current, part.text, status)
        elif current.kind == "function_call":
            call = self._function_call(current, status)
            item = rpb.OutputItem(function_call=call)
            if self.emit:
                done = rs.ArgumentsDoneEvent(
                    arguments=call.arguments, item_id=current.id, name=call.name,
                    output_index=current.index,
                )  # fmt: skip
                out.append(
                    self._event("response.function_call_arguments.done", arguments_done=done)
                )
            kept: Item = {
                "id": current.id, "type": "function_call", "status": status,
                "call_id": call.call_id, "name": call.name, "arguments": call.arguments,
            }  # fmt: skip
            if current.namespace is not None:
                kept["namespace"] = current.namespace
            self.items.append(kept)
        else:
            if self.emit and current.parts:
                out.extend(self._summary_done(current, len(current.parts) - 1))
            summary = [rpb.SummaryText(type="summary_text", text=t) for t in current.parts]
            reasoning = rpb.ReasoningItem(id=current.id, type="reasoning", summary=summary)
            stored: Item = {
                "id": current.id, "type": "reasoning",
                "summary": [{"type": "summary_text", "text": t} for t in current.parts],
            }  # fmt: skip
            if isinstance(encrypted, str) and encrypted:
                # Sealed with its provider, so it is never replayed to another one.
                stored["encrypted_content"] = encrypted
                if self.include_encrypted:
                    reasoning.encrypted_content = encrypted
            item = rpb.OutputItem(reasoning=reasoning)
            self.items.append(stored)
        self._append(item)
        if self.emit:
            out.append(self._item_event("response.output_item.done", current, item))
        return out

    def _append(self, item: rpb.OutputItem) -> None:
        """An item joins the output: kept aside for the events, or written in place."""
        if self.emit:
            self.output.append(item)
        else:
            self.response.output.append(item)

    def _kept_message(self, current: _Open, text: str, status: str) -> None:
        if self.keep:
            self.items.append(
                {"id": current.id, "type": "message", "role": "assistant", "status": status,
                 "content": [{"type": "output_text", "text": text, "annotations": []}]}
            )  # fmt: skip

    # -- the end --------------------------------------------------------------------

    def finish(self, finish_reason: str, usage: usage_pb2.Usage) -> list[Event]:
        """Closes the response: `completed`, or `incomplete` when it was cut short."""
        reason = INCOMPLETE.get(finish_reason)
        out = self._close("incomplete" if reason else "completed")
        out += self._abandoned()
        response = self.response
        if self.emit:
            response.output.extend(self.output)
        fill_usage(response.usage, usage)
        if reason is None:
            response.status = "completed"
            response.completed_at = int(time.time())
        else:
            response.status = "incomplete"
            response.incomplete_details.reason = reason
        if self.emit:
            out.append(self._snapshot(f"response.{response.status}"))
        return out

    def fail(self, error: GatewayError, usage: usage_pb2.Usage | None) -> list[Event]:
        """Closes the response as `failed`, with the error and the output so far."""
        self._close("incomplete")
        self._abandoned()
        response = self.response
        for name in ("output", "incomplete_details", "completed_at"):
            response.ClearField(name)
        response.output.extend(self.output)
        response.status = "failed"
        response.error.code = FAILURE_CODE.get(error.code, "server_error")
        response.error.message = error.message
        if usage is not None:
            fill_usage(response.usage, usage)
        return [self._snapshot("response.failed")] if self.emit else []


def fill_usage(out: rpb.ResponseUsage, usage: usage_pb2.Usage) -> None:
    """The gateway's usage in the Responses API's words (its cost and timing kept)."""
    out.input_tokens = usage.prompt_tokens
    out.output_tokens = usage.completion_tokens
    out.total_tokens = usage.total_tokens
    out.latency_ms = usage.latency_ms
    out.input_tokens_details.cached_tokens = usage.prompt_tokens_details.cached_tokens
    if usage.prompt_tokens_details.HasField("cache_write_tokens"):
        out.input_tokens_details.cache_write_tokens = usage.prompt_tokens_details.cache_write_tokens
    out.output_tokens_details.reasoning_tokens = usage.completion_tokens_details.reasoning_tokens
    # A Realtime session's audio (absent from every other response).
    if usage.prompt_tokens_details.audio_tokens:
        out.input_tokens_details.audio_tokens = usage.prompt_tokens_details.audio_tokens
    if usage.completion_tokens_details.audio_tokens:
        out.output_tokens_details.audio_tokens = usage.completion_tokens_details.audio_tokens
    for field, value in usage.ListFields():
        if field.name in _USAGE_EXTRAS:
            setattr(out, field.name, value)


_USAGE_EXTRAS = frozenset(
    {"input_cost_usd", "output_cost_usd", "cache_input_cost_usd", "cache_write_cost_usd",
     "total_cost_usd", "ttft_ms", "response_cached"}
)  # fmt: skip


def _other(item: Item) -> rpb.OutputItem:
    struct = struct_pb2.Struct()
    struct.update(item)
    return rpb.OutputItem(other=struct)


def _listed_tool(tool: Mapping[str, Any]) -> dict[str, Any]:
    """A listed tool as an `mcp_list_tools` item holds it."""
    out = {"name": tool.get("name"), "input_schema": tool.get("inputSchema") or {}}
    for key in ("description", "annotations"):
        if tool.get(key) is not None:
            out[key] = tool[key]
    return out


def _error(error: ToolError) -> dict[str, Any]:
    """A call's error in OpenAI's words: the tool's own, the server's, its transport's."""
    if error.kind == "tool":
        return {"type": "mcp_tool_execution_error", "content": list(error.content)}
    kind = "http_error" if error.kind == "http" else "mcp_protocol_error"
    return {"type": kind, "code": error.code, "message": error.message}


def _logprob(entry: TokenLogprob) -> rpb.TextLogprob:
    return rpb.TextLogprob(
        token=entry.token, bytes=list(entry.token.encode()), logprob=entry.logprob,
        top_logprobs=[
            rpb.TopTextLogprob(token=t.token, bytes=list(t.token.encode()), logprob=t.logprob)
            for t in entry.top
        ],
    )  # fmt: skip


def sealed_by(item: Item) -> str | None:
    """The provider that made a reasoning item's encrypted content, if the gateway
    sealed it."""
    content = item.get("encrypted_content")
    found = unseal(content) if isinstance(content, str) else None
    return found[0] if found is not None else None
