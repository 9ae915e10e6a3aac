"""A run's fragments -> Anthropic's content blocks, stream events and usage; the model
list in Anthropic's shape (`ModelInfo`, cursor pages) for `GET /v1/models` with
`anthropic-version`.

From a generic provider: text becomes `text` blocks, tool-call fragments `tool_use`
blocks (arguments as `input_json_delta`), reasoning `thinking` blocks (the signature
last, as a `signature_delta`); a block closes when the next kind starts. From an
Anthropic upstream (native events): blocks and deltas pass through as they came
(thinking and signatures, citations, server tool blocks), indexes included, and the
upstream's own stop reason (`pause_turn`, `refusal`...) and stop sequence are kept.

Usage is written as Anthropic counts it: input_tokens exclude the cache reads and
writes, which have their own counts; the gateway's cost and timing fields follow.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from gateway.v1 import messages_pb2 as pb
from gateway.v1 import messages_service_pb2 as service
from gateway.v1 import usage_pb2

from server.application.dialects.messages.request import DIALECT, TOOL_SIGNATURE
from server.application.pipeline.chain import (
    CHAIN_EVENTS,
    MAX_ROUNDS,
    CallArguments,
    CallEnded,
    CallOpened,
    ChainEvent,
)
from server.application.pipeline.engine import Fragment, Run
from server.base import tokens
from server.base.config import ModelConfig
from server.base.errors import InvalidArgument
from server.base.generation import NativeEvent, ReasoningDelta, TextDelta, ToolCallDelta

Event = service.StreamMessageResponse

_TEXT = ("text", 0)
STOP_REASONS = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "content_filter": "refusal",
    # The gateway's rounds of MCP calls cut by mcp.max_rounds: the caller may go on.
    MAX_ROUNDS: "pause_turn",
}
_STRINGS = frozenset(
    {"type", "text", "id", "name", "tool_use_id", "thinking", "signature", "data", "title",
     "context"}
)  # fmt: skip
_DELTA_STRINGS = frozenset({"type", "text", "partial_json", "thinking", "signature"})


@dataclass
class _Block:
    """A block being gathered (for a whole reply): the block, and its text pieces."""

    block: pb.ContentBlock
    pieces: list[str] = field(default_factory=list)
    signature: str | None = None


class Reply:
    """Gathers one run's reply as content blocks and, with `emit`, the stream events
    that build it."""

    def __init__(self, emit: bool) -> None:
        self.emit = emit
        self.blocks: list[_Block] = []
        # The open generic block: its kind and key (a tool call's index).
        self._open: tuple[str, int] | None = None
        # From native events: the upstream's usage, stop reason and stop sequence, and
        # the keys it adds to its message (at the start) and to its final delta.
        self.native_usage: dict[str, Any] = {}
        self.native_stop: tuple[str, str | None] | None = None
        self.start_extra: dict[str, Any] = {}
        self.delta_extra: dict[str, Any] = {}
        # MCP calls the gateway ran, counted to key their blocks.
        self._calls = 0

    def feed(self, fragment: Fragment) -> list[Event]:
        if isinstance(fragment, TextDelta):
            if self._open == _TEXT and self.emit:  # the common case, kept short: per token
                event = Event(type="content_block_delta", index=len(self.blocks) - 1)
                event.delta.type = "text_delta"
                event.delta.text = fragment.text
                return [event]
            out = self._start(_TEXT, lambda: pb.ContentBlock(type="text", text=""))
            return out + self._delta(pb.ContentBlockDelta(type="text_delta", text=fragment.text))
        if isinstance(fragment, NativeEvent):
            # Only an upstream serving this dialect answers a request of it natively.
            return self._native(fragment.data) if fragment.dialect == DIALECT else []
        if isinstance(fragment, ReasoningDelta):
            out = self._start(
                ("thinking", 0),
                lambda: pb.ContentBlock(type="thinking", thinking="", signature=""),
            )
            if fragment.text:
                delta = pb.ContentBlockDelta(type="thinking_delta", thinking=fragment.text)
                out += self._delta(delta)
            if fragment.signature is not None:
                self.blocks[-1].signature = fragment.signature
                delta = pb.ContentBlockDelta(type="signature_delta", signature=fragment.signature)
                out += self._delta(delta, gather=False)
            return out
        assert isinstance(fragment, ToolCallDelta)  # never Relayed: not asked of this dialect
        return self._tool(fragment)

    def _tool(self, fragment: ToolCallDelta) -> list[Event]:
        def start() -> pb.ContentBlock:
            block = pb.ContentBlock(type="tool_use", id=fragment.id or "", name=fragment.name or "")
            block.input.SetInParent()
            return block

        out = []
        if fragment.signature is not None:
            out = self.feed(ReasoningDelta(signature=TOOL_SIGNATURE + fragment.signature))
        out += self._start(("tool", fragment.index), start)
        if fragment.arguments:
            delta = pb.ContentBlockDelta(type="input_json_delta", partial_json=fragment.arguments)
            out += self._delta(delta)
        return out

    def _start(self, key: tuple[str, int], make: Any) -> list[Event]:
        if self._open == key:
            return []
        out = self.close()
        self._open = key
        block = make()
        self.blocks.append(_Block(block))
        if self.emit:
            index = len(self.blocks) - 1
            out.append(Event(type="content_block_start", index=index, content_block=block))
        return out

    def _delta(self, delta: pb.ContentBlockDelta, gather: bool = True) -> list[Event]:
        if not self.emit:
            if gather:  # a whole reply's; a stream's text is the caller's to gather
                self.blocks[-1].pieces.append(
                    delta.text or delta.partial_json or delta.thinking or ""
                )
            return []
        return [Event(type="content_block_delta", index=len(self.blocks) - 1, delta=delta)]

    def take(self, fragment: Fragment | ChainEvent) -> list[Event]:
        """A run's fragment or a chain's event."""
        if isinstance(fragment, CHAIN_EVENTS):
            return self.chained(fragment)
        return self.feed(fragment)

    def chained(self, event: ChainEvent) -> list[Event]:
        """The blocks of an MCP call the gateway runs: `mcp_tool_use` as the model writes
        it, then `mcp_tool_result` once it ran (a listing has no block)."""
        if isinstance(event, CallOpened):
            self._calls += 1

            def start() -> pb.ContentBlock:
                block = pb.ContentBlock(type="mcp_tool_use", id=_tool_use_id(event.call_id),
                                        name=event.tool.name)  # fmt: skip
                block.input.SetInParent()
                block.other.update({"server_name": event.tool.label})
                return block

            return self._start(("mcp", self._calls), start)
        if isinstance(event, CallArguments):
            delta = pb.ContentBlockDelta(type="input_json_delta", partial_json=event.delta)
            return self._delta(delta)
        if not isinstance(event, CallEnded):
            return []
        out = self.close()
        if event.status not in ("completed", "failed"):
            return out
        error = event.error
        text = event.output or "" if error is None else error.message
        content = list(error.content) if error is not None and error.content else [
            {"type": "text", "text": text}
        ]  # fmt: skip
        block = pb.ContentBlock(
            type="mcp_tool_result", tool_use_id=_tool_use_id(event.call_id),
            is_error=error is not None,
            content_blocks=[block_from_json(part) for part in content],
        )  # fmt: skip
        self.blocks.append(_Block(block))
        if self.emit:
            index = len(self.blocks) - 1
            out.append(Event(type="content_block_start", index=index, content_block=block))
            out.append(Event(type="content_block_stop", index=index))
        return out

    def close(self) -> list[Event]:
        """Closes the open generic block."""
        if self._open is None:
            return []
        self._open = None
        if not self.emit:
            return []
        return [Event(type="content_block_stop", index=len(self.blocks) - 1)]

    def _native(self, data: Mapping[str, Any]) -> list[Event]:
        kind = data.get("type")
        if kind == "message_start":
            message = data.get("message") or {}
            self.native_usage.update(message.get("usage") or {})
            self.start_extra = {k: v for k, v in message.items() if k not in _MESSAGE_KEYS}
        elif kind == "message_delta":
            delta = data.get("delta") or {}
            self.native_stop = (str(delta.get("stop_reason") or ""), delta.get("stop_sequence"))
            self.delta_extra = {k: v for k, v in delta.items() if k not in _MESSAGE_KEYS}
            self.native_usage.update(data.get("usage") or {})
        elif kind == "content_block_start":
            block = block_from_json(data.get("content_block") or {})
            self.blocks.append(_Block(block))
            if self.emit:
                return [Event(type=kind, index=_index(data), content_block=block)]
        elif kind == "content_block_delta":
            delta = delta_from_json(data.get("delta") or {})
            if self.blocks:
                self._apply(self.blocks[-1], delta)
            if self.emit:
                return [Event(type=kind, index=_index(data), delta=delta)]
        elif kind == "content_block_stop" and self.emit:
            return [Event(type=kind, index=_index(data))]
        return []

    @staticmethod
    def _apply(gathered: _Block, delta: pb.ContentBlockDelta) -> None:
        if delta.type == "signature_delta":
            gathered.signature = delta.signature
        elif delta.type == "citations_delta":
            gathered.block.citations.add().CopyFrom(delta.citation)
        else:
            gathered.pieces.append(delta.text or delta.partial_json or delta.thinking or "")

    def content(self) -> list[pb.ContentBlock]:
        """The gathered blocks, each whole."""
        out = []
        for gathered in self.blocks:
            block, joined = gathered.block, "".join(gathered.pieces)
            if block.type == "text":
                block.text += joined
            elif block.type == "thinking":
                block.thinking += joined
                if gathered.signature is not None:
                    block.signature = gathered.signature
            elif block.type in ("tool_use", "server_tool_use") and joined:
                block.input.Clear()
                block.input.SetInParent()
                try:
                    arguments = json.loads(joined)
                except ValueError:
                    arguments = None  # cut short (max_tokens): no valid input
                if isinstance(arguments, dict):
                    block.input.update(arguments)
            out.append(block)
        return out

    def stop(self, run: Run, finish_reason: str | None = None) -> tuple[str, str]:
        """The stop reason and stop sequence (empty for none); `finish_reason`, a
        chain's, over the run's."""
        if self.native_stop is not None and self.native_stop[0]:
            reason, sequence = self.native_stop
            return reason, sequence or ""
        reason = finish_reason or run.finish_reason
        if reason == "stop" and run.stop_sequence:
            return "stop_sequence", run.stop_sequence
        return STOP_REASONS.get(reason, "end_turn"), ""

    def start_usage(self, run: Run) -> pb.MessageUsage:
        """The usage `message_start` reports: the upstream's own when it gave one,
        else the gateway's estimate of the input."""
        if self.native_usage:
            given = self.native_usage
            out = pb.MessageUsage()
            for name in _COUNTS:
                if isinstance(given.get(name), int):
                    setattr(out, name, given[name])
            tiers = given.get("cache_creation")
            for name in ("ephemeral_5m_input_tokens", "ephemeral_1h_input_tokens"):
                if isinstance(tiers, dict) and isinstance(tiers.get(name), int):
                    setattr(out.cache_creation, name, tiers[name])
            _extra(out.other, given, _USAGE)
            return out
        return pb.MessageUsage(input_tokens=tokens.estimate_prompt(run.request))

    def usage(self, run: Run) -> pb.MessageUsage:
        """The whole call's usage, with the rest of an Anthropic upstream's."""
        out = usage(run)
        _extra(out.other, self.native_usage, _USAGE)
        return out

    def extra(self) -> dict[str, Any]:
        """The keys an Anthropic upstream added to its message (`container`,
        `stop_details`...), for a whole reply."""
        return {**self.start_extra, **self.delta_extra}


_COUNTS = frozenset(
    {"input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens"}
)
_USAGE = _COUNTS | {"cache_creation"}
# The keys of a message (and of its final delta) that the contract has fields for.
_MESSAGE_KEYS = frozenset(
    {"id", "type", "role", "content", "model", "stop_reason", "stop_sequence", "usage"}
)


def _extra(target: Any, data: dict[str, Any], known: frozenset[str]) -> None:
    rest = {k: v for k, v in data.items() if k not in known}
    if rest:
        target.update(rest)


def _tool_use_id(call_id: str) -> str:
    return "mcptoolu_" + call_id.removeprefix("mcp_")


def summed_usage(measured: usage_pb2.Usage) -> pb.MessageUsage:
    """Several rounds' usage, summed (a chain's), in Anthropic's counts."""
    details = measured.prompt_tokens_details
    cached, written = details.cached_tokens, details.cache_write_tokens
    out = pb.MessageUsage(
        input_tokens=measured.prompt_tokens - cached - written,
        cache_creation_input_tokens=written,
        cache_read_input_tokens=cached,
        output_tokens=measured.completion_tokens,
        latency_ms=measured.latency_ms,
    )
    for name in _MEASURED:
        if measured.HasField(name):
            setattr(out, name, getattr(measured, name))
    return out


_MEASURED = ("input_cost_usd", "output_cost_usd", "cache_input_cost_usd",
             "cache_write_cost_usd", "total_cost_usd", "ttft_ms", "response_cached")  # fmt: skip


def usage(run: Run) -> pb.MessageUsage:
    """The whole call's usage, Anthropic's counts plus the gateway's cost and timing."""
    counts = run.counts()
    measured = run.usage()
    out = pb.MessageUsage(
        input_tokens=counts.prompt_tokens - counts.cached_tokens - counts.cache_write_tokens,
        cache_creation_input_tokens=counts.cache_write_tokens,
        cache_read_input_tokens=counts.cached_tokens,
        output_tokens=counts.completion_tokens,
        latency_ms=measured.latency_ms,
        cache_creation=pb.CacheCreation(
            ephemeral_5m_input_tokens=counts.cache_write_tokens - counts.cache_write_1h_tokens,
            ephemeral_1h_input_tokens=counts.cache_write_1h_tokens,
        ),
    )
    for name in _MEASURED:
        if measured.HasField(name):
            setattr(out, name, getattr(measured, name))
    return out


def _index(data: Mapping[str, Any]) -> int:
    index = data.get("index")
    return index if isinstance(index, int) else 0


def block_from_json(data: dict[str, Any]) -> pb.ContentBlock:
    """A content block from an upstream's JSON; keys the contract has no field for (or
    of another shape) go to `other`, so nothing is lost."""
    block = pb.ContentBlock()
    for key, value in data.items():
        if value is None:
            block.other.update({key: None})  # `"citations": null` comes back as it was
        elif key in _STRINGS and isinstance(value, str):
            setattr(block, key, value)
        elif key == "is_error" and isinstance(value, bool):
            block.is_error = value
        elif key == "input" and isinstance(value, dict):
            block.input.SetInParent()
            block.input.update(value)
        elif key == "content" and isinstance(value, str):
            block.content = value
        elif key == "content" and isinstance(value, list) and _objects(value):
            block.content_blocks.extend(block_from_json(item) for item in value)
        elif key == "content" and isinstance(value, dict):
            block.content_object.SetInParent()
            block.content_object.update(value)
        elif key == "citations" and isinstance(value, list) and _objects(value):
            for citation in value:
                block.citations.add().update(citation)
        elif key == "cache_control" and isinstance(value, dict) and _all_strings(value):
            block.cache_control.type = value.get("type", "")
            if "ttl" in value:
                block.cache_control.ttl = value["ttl"]
        else:
            block.other.update({key: value})
    return block


def delta_from_json(data: dict[str, Any]) -> pb.ContentBlockDelta:
    delta = pb.ContentBlockDelta()
    for key, value in data.items():
        if key in _DELTA_STRINGS and isinstance(value, str):
            setattr(delta, key, value)
        elif key == "citation" and isinstance(value, dict):
            delta.citation.update(value)
        elif value is not None:
            delta.other.update({key: value})
    return delta


def _objects(items: list[Any]) -> bool:
    return all(isinstance(item, dict) for item in items)


def _all_strings(value: dict[str, Any]) -> bool:
    return set(value) <= {"type", "ttl"} and all(isinstance(v, str) for v in value.values())


# -- the model list ------------------------------------------------------------

DEFAULT_LIMIT = 20
MAX_LIMIT = 1000


def info(model: ModelConfig) -> pb.ModelInfo:
    created = datetime.fromtimestamp(model.created, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return pb.ModelInfo(type="model", id=model.id, display_name=model.id, created_at=created)


def page(
    models: Sequence[ModelConfig], request: service.ListModelInfosRequest
) -> service.ListModelInfosResponse:
    """The models after `after_id` (or before `before_id`), at most `limit`."""
    limit = request.limit if request.HasField("limit") else DEFAULT_LIMIT
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidArgument.for_field("limit", f"must be between 1 and {MAX_LIMIT}")
    ids = [m.id for m in models]
    start, end = 0, len(models)
    for name in ("after_id", "before_id"):
        if request.HasField(name):
            cursor = getattr(request, name)
            if cursor not in ids:
                raise InvalidArgument.for_field(name, f"names no model: {cursor!r}")
            if name == "after_id":
                start = ids.index(cursor) + 1
            else:
                end = ids.index(cursor)
    chosen = models[start:end]
    # With before_id the page is the one just before the cursor.
    shown = chosen[-limit:] if request.HasField("before_id") else chosen[:limit]
    data = [info(m) for m in shown]
    return service.ListModelInfosResponse(
        data=data,
        has_more=len(shown) < len(chosen),
        first_id=data[0].id if data else "",
        last_id=data[-1].id if data else "",
    )
