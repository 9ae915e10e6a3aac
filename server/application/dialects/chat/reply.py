"""Generation results -> the chat and completion reply messages of the contract."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from functools import lru_cache
from typing import Any, TypeVar

from gateway.v1 import chat_pb2, completion_pb2
from gateway.v1 import chat_service_pb2 as chat
from google.protobuf.message import Message

from server.application.pipeline.answers import head
from server.application.pipeline.engine import Run
from server.base.call import Call
from server.base.generation import TextDelta, TokenLogprob, ToolCall, ToolCallDelta

M = TypeVar("M", bound=Message)


def tool_call(call: ToolCall) -> chat_pb2.ToolCall:
    reply = chat_pb2.ToolCall(
        id=call.id,
        type="function",
        function=chat_pb2.FunctionCall(name=call.name, arguments=call.arguments),
    )
    if call.signature is not None:
        reply.extra_content.google.thought_signature = call.signature
    return reply


def chat_chunk_choice(
    choice: chat.ChatChunkChoice, event: TextDelta | ToolCallDelta, logprobs: bool
) -> None:
    """Fills one stream chunk's `choice`, framed as OpenAI frames it: a tool call's first
    fragment carries index, id, type and name (and empty arguments), later fragments
    only index and a piece of the arguments."""
    choice.index = event.choice
    if isinstance(event, TextDelta):
        choice.delta.content = event.text
        if logprobs:
            choice.logprobs.CopyFrom(chat_logprobs(event.logprobs))
        return
    fragment = choice.delta.tool_calls.add(index=event.index)
    if event.id is not None:
        fragment.id = event.id
        fragment.type = "function"
    if event.name is not None:
        fragment.function.name = event.name
    if event.signature is not None:
        fragment.extra_content.google.thought_signature = event.signature
    fragment.function.arguments = event.arguments


def stamped(head: M) -> M:
    """A copy of `head`, the fields every chunk of one stream repeats: copying a built
    message costs a third of building one from keywords, once per streamed event."""
    chunk = type(head)()
    chunk.CopyFrom(head)
    return chunk


def chat_logprobs(entries: Iterable[TokenLogprob]) -> chat_pb2.ChatLogprobs:
    return chat_pb2.ChatLogprobs(
        content=[
            chat_pb2.TokenLogprob(
                token=e.token,
                logprob=e.logprob,
                bytes=list(e.token.encode()),
                top_logprobs=[
                    chat_pb2.TopLogprob(
                        token=t.token, logprob=t.logprob, bytes=list(t.token.encode())
                    )
                    for t in e.top
                ],
            )
            for e in entries
        ]
    )


def completion_logprobs(entries: Iterable[TokenLogprob]) -> completion_pb2.CompletionLogprobs:
    out = completion_pb2.CompletionLogprobs()
    offset = 0
    for e in entries:
        out.tokens.append(e.token)
        out.token_logprobs.append(e.logprob)
        top = out.top_logprobs.add()
        top.update({t.token: t.logprob for t in e.top})
        out.text_offset.append(offset)
        offset += len(e.token)
    return out


def openai_head(call: Call, run: Run, kind: str) -> dict[str, Any]:
    """The head of an OpenAI chat or text completion (or chunk): `head` with the
    backend's fingerprint and, on chat, the processing tier, which OpenAI always sends."""
    extra: dict[str, Any] = {"system_fingerprint": fingerprint(run.provider_id, run.model.id)}
    if kind.startswith("chat."):
        asked = run.request.service_tier
        extra["service_tier"] = asked if asked and asked != "auto" else "default"
    return head(call, run, kind, **extra)


@lru_cache(maxsize=1024)
def fingerprint(provider_id: str, model_id: str) -> str:
    """Names the backend (a provider and its model) in OpenAI's `fp_` form: stable for
    as long as the config serves the model from the same provider."""
    return "fp_" + hashlib.sha256(f"{provider_id}/{model_id}".encode()).hexdigest()[:10]
