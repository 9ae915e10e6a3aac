"""OpenAI's Responses API as an upstream wire format (POST {base_url}/responses), for
OpenAI-compatible providers that declare it (`responses_api: true`).

A request that came in as the Responses API goes as it came (a `Native` request of
the `responses` dialect, its JSON fields): its fields, the conversation it continues and its input. The provider that stored the
previous response itself gets only the new input and its own id of that response.
Reasoning items go back only to the provider that made them: their encrypted content
is sealed with that provider's id on the way out and unsealed on the way in; any
other reasoning item is left out.

The upstream's events become the gateway's: text and argument fragments, reasoning
summary fragments, whole reasoning items (sealed) and built-in tools' items, then
Finished with the usage (OpenAI's convention already), the finish reason in chat
terms (a function call: `tool_calls`; `incomplete` for max_output_tokens: `length`)
and the upstream's response id when it stored the response. `response.failed` and
`error` events are upstream failures; a stream without a terminal event is one too.
Malformed counts fail a whole answer over to the next provider; at the end of a
stream, whose text went out, they are dropped and the gateway counts the tokens.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

from server.base.errors import UpstreamError
from server.base.generation import (
    Event,
    Finished,
    GenerationRequest,
    Native,
    NativeEvent,
    ReasoningDelta,
    Relayed,
    TextDelta,
    TokenCounts,
    ToolCallDelta,
    namespaced,
    seal,
    token_logprobs,
    unseal,
)
from server.providers.http import (
    ProtocolViolation,
    SseEvent,
    count,
    loads,
    redact,
    streamed_counts,
)

# The ingress dialect this wire format serves natively (a value: see generation.serves).
DIALECT = "responses"
TEXT_DELTA = "response.output_text.delta"
ENDED = "stream ended without response.completed"
INCOMPLETE = {"max_output_tokens": "length", "content_filter": "content_filter"}


def body(
    provider_id: str, model: str, native: Native, request: GenerationRequest, stream: bool
) -> dict[str, Any]:
    fields = native.request
    assert isinstance(fields, Mapping)  # a Responses request travels as its JSON fields
    out: dict[str, Any] = {**fields, "model": model, "stream": stream}
    own: tuple[Mapping[str, Any], ...] = fields["input"]
    continues = native.previous is not None and native.previous[0] == provider_id
    if continues:
        assert native.previous is not None
        out["previous_response_id"] = native.previous[1]
        items = own
    else:
        items = (*native.history, *own)
    out["input"] = [kept for item in items if (kept := _for(provider_id, item)) is not None]
    if request.max_tokens is not None:
        out["max_output_tokens"] = request.max_tokens
    return out


def _for(provider_id: str, item: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The item as this provider may see it: reasoning only when it made it."""
    if item.get("type") != "reasoning":
        return item
    sealed = item.get("encrypted_content")
    opened = unseal(sealed) if isinstance(sealed, str) else None
    if opened is None or opened[0] != provider_id:
        return None
    return {**item, "encrypted_content": opened[1]}


class Reader:
    """Turns one upstream answer (its events, or a whole response) into events."""

    def __init__(self, provider_id: str) -> None:
        self.provider_id = provider_id
        self.calls: dict[str, int] = {}  # function call item id -> tool call index
        self.called = False
        # Reasoning items whose summary came as deltas (counted then, not again whole).
        self.summarized: set[str] = set()

    def event(self, data: str) -> list[Event]:
        return self.parsed(loads(data))

    def parsed(self, event: dict[str, Any]) -> list[Event]:
        kind = event.get("type")
        if kind == TEXT_DELTA:
            return [_text_delta(event)]
        if kind == "response.output_item.added":
            item = event["item"]
            if item.get("type") == "function_call":
                index = self.calls.setdefault(str(item.get("id")), len(self.calls))
                self.called = True
                return [ToolCallDelta(index, str(item["call_id"]), _tool_name(item))]
            return []
        if kind == "response.function_call_arguments.delta":
            index = self.calls.get(str(event.get("item_id")), 0)
            return [ToolCallDelta(index, arguments=str(event["delta"]))]
        if kind == "response.reasoning_summary_text.delta":
            self.summarized.add(str(event.get("item_id")))
            return [ReasoningDelta(str(event["delta"]), int(event.get("summary_index") or 0))]
        if kind == "response.output_item.done":
            return self._native(event["item"])
        if kind in ("response.completed", "response.incomplete"):
            response = event["response"]
            # The text went out already: malformed counts are dropped, not a failure.
            usage = streamed_counts(lambda: counts(response.get("usage")), self.provider_id)
            return [self._finished(response, usage)]
        if kind == "response.failed":
            error = (event.get("response") or {}).get("error") or {}
            raise self._failure(error)
        if kind == "error":
            raise self._failure(event)
        return []

    def whole(self, response: Mapping[str, Any]) -> list[Event]:
        """A unary answer: its output items in order, then Finished."""
        if response.get("status") == "failed":
            raise self._failure(response.get("error") or {})
        out: list[Event] = []
        for item in response.get("output") or ():
            kind = item.get("type")
            if kind == "message":
                parts = [p for p in item.get("content") or () if p.get("type") == "output_text"]
                text = "".join(str(p.get("text", "")) for p in parts)
                probs = tuple(e for p in parts for e in token_logprobs(p.get("logprobs")))
                out.append(TextDelta(text, logprobs=probs))
            elif kind == "function_call":
                index = len(self.calls)
                self.calls[str(item.get("id"))] = index
                self.called = True
                out.append(
                    ToolCallDelta(
                        index,
                        str(item["call_id"]),
                        _tool_name(item),
                        str(item.get("arguments") or ""),
                    )  # fmt: skip
                )
            else:
                out.extend(self._native(item))
        out.append(self._finished(response, counts(response.get("usage"))))
        return out

    def _native(self, item: Mapping[str, Any]) -> list[Event]:
        kind = item.get("type")
        if kind in ("message", "function_call"):
            return []
        if kind == "reasoning" and isinstance(item.get("encrypted_content"), str):
            item = {**item, "encrypted_content": seal(self.provider_id, item["encrypted_content"])}
        summary = str(item.get("id")) not in self.summarized
        return [NativeEvent(DIALECT, item, other=_reasoning_text(item, summary))]

    def _finished(self, response: Mapping[str, Any], usage: TokenCounts | None) -> Finished:
        details = response.get("incomplete_details") or {}
        if response.get("status") == "incomplete":
            reason = INCOMPLETE.get(str(details.get("reason")), "length")
        else:
            reason = "tool_calls" if self.called else "stop"
        stored = response.get("store") is not False and bool(response.get("id"))
        return Finished(reason, usage, response_id=str(response["id"]) if stored else None)

    def _failure(self, error: Mapping[str, Any]) -> UpstreamError:
        message = redact(str(error.get("message") or "failed")[:200])
        return UpstreamError(
            f"{self.provider_id}: upstream failed: {message}",
            {"provider": self.provider_id},
            upstream_answered=True,
        )


def _reasoning_text(item: Mapping[str, Any], summary: bool) -> str:
    """The text a reasoning item shows (its content when the upstream gives it, and with
    `summary` its summary), counted as generated when no usage comes."""
    if item.get("type") != "reasoning":
        return ""
    parts = [*(item.get("content") or ()), *(item.get("summary") or () if summary else ())]
    return "".join(str(p.get("text", "")) for p in parts if isinstance(p, Mapping))


def counts(usage: Any) -> TokenCounts | None:
    if not isinstance(usage, dict) or usage.get("input_tokens") is None:
        return None
    inputs = usage.get("input_tokens_details") or {}
    outputs = usage.get("output_tokens_details") or {}
    return TokenCounts(
        prompt_tokens=count(usage["input_tokens"], "usage.input_tokens"),
        completion_tokens=count(usage.get("output_tokens") or 0, "usage.output_tokens"),
        cached_tokens=count(inputs.get("cached_tokens") or 0, "cached_tokens"),
        reasoning_tokens=count(outputs.get("reasoning_tokens") or 0, "reasoning_tokens"),
        cache_write_tokens=count(inputs.get("cache_write_tokens") or 0, "cache_write_tokens"),
    )


async def events(reader: Reader, sse: AsyncIterator[Any]) -> AsyncIterator[Event]:
    """The gateway's events of an upstream stream; it must end with a terminal event."""
    async for raw in sse:
        for event in reader.event(raw.data):
            yield event
            if isinstance(event, Finished):
                return
    raise ProtocolViolation(ENDED)


async def relayed(reader: Reader, reads: AsyncIterator[list[SseEvent]]) -> AsyncIterator[Event]:
    """`events`, but the answer's text fragments as the upstream wrote them (their
    logprobs too, which `events` drops), those of one read together (`Relayed`), for a
    caller of this format."""
    async for batch in reads:
        kept: list[dict[str, Any]] = []
        text: list[str] = []
        try:
            for raw in batch:
                event = loads(raw.data)
                if not isinstance(event, dict):
                    raise ProtocolViolation("a stream event is not a JSON object")
                delta = event.get("delta")
                if event.get("type") == TEXT_DELTA and type(delta) is str:
                    kept.append(event)
                    text.append(delta)
                    continue
                if kept:
                    yield Relayed.gathered(kept, text, [], _decoded)
                    kept, text = [], []
                for out in reader.parsed(event):
                    yield out
                    if isinstance(out, Finished):
                        return
        except Exception:
            if kept:  # what came before a bad event goes out before its error
                yield Relayed.gathered(kept, text, [], _decoded)
            raise
        if kept:
            yield Relayed.gathered(kept, text, [], _decoded)
    raise ProtocolViolation(ENDED)


def _decoded(events: list[dict[str, Any]]) -> list[Event]:
    """Relayed text fragments as the core's events."""
    return [_text_delta(event) for event in events]


def _text_delta(event: Mapping[str, Any]) -> TextDelta:
    """A `response.output_text.delta` event as the core's event, its logprobs kept."""
    return TextDelta(str(event["delta"]), logprobs=token_logprobs(event.get("logprobs")))


def _tool_name(item: Mapping[str, Any]) -> str:
    """A called function's tool name, its namespace's in front when it is in one."""
    name = str(item["name"])
    namespace = item.get("namespace")
    return namespaced(namespace, name) if isinstance(namespace, str) else name
