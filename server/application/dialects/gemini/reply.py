"""A generation's output -> Gemini's answer: candidates of parts, a finish reason,
usage metadata with the gateway's cost and timing; and the model list in Gemini's shape.

A stream is whole GenerateContentResponse objects, each adding parts to the one
before: text and reasoning as they come, a function call whole (Gemini never splits
one), and last the finish reasons with the whole call's usage. A Gemini upstream's
chunks (native events) pass as it wrote them, thought signatures sealed; only their
last one waits for the gateway's usage.

    stop, tool_calls -> STOP      length -> MAX_TOKENS     content_filter -> SAFETY
    anything else    -> OTHER
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gateway.v1 import gemini_pb2 as pb
from gateway.v1 import gemini_service_pb2 as service
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message as ProtoMessage

from server.application.dialects.gemini.request import DIALECT, encode_signature
from server.application.pipeline.engine import Fragment, Run
from server.base.config import ModelConfig
from server.base.errors import InvalidArgument
from server.base.generation import NativeEvent, ReasoningDelta, TextDelta, ToolCallDelta
from server.base.pipeline import Encoded, encoded_json

Chunk = service.GenerateContentResponse | service.StreamGenerateContentResponse
FINISH_REASONS = {"stop": "STOP", "tool_calls": "STOP", "length": "MAX_TOKENS",
                  "content_filter": "SAFETY"}  # fmt: skip
ROLE = "model"
# Usage fields the gateway adds to the upstream's counts.
MEASURED = ("input_cost_usd", "output_cost_usd", "cache_input_cost_usd", "total_cost_usd",
            "ttft_ms", "response_cached")  # fmt: skip


@dataclass
class _Call:
    id: str
    name: str
    arguments: list[str] = field(default_factory=list)
    signature: str | None = None

    def part(self) -> pb.GeminiPart:
        part = pb.GeminiPart()
        call = part.function_call
        call.name = self.name
        if not self.id.startswith("call_gw"):
            call.id = self.id
        try:
            arguments = json.loads("".join(self.arguments) or "{}")
        except ValueError:
            arguments = None  # cut short (max tokens): no valid arguments
        call.args.SetInParent()
        if isinstance(arguments, dict):
            call.args.update(arguments)
        if self.signature:
            part.thought_signature = encode_signature(self.signature)
        return part


@dataclass
class _Candidate:
    """One candidate's parts: gathered whole, or those not yet sent."""

    parts: list[pb.GeminiPart] = field(default_factory=list)
    call: _Call | None = None

    def close_call(self) -> None:
        if self.call is not None:
            self.parts.append(self.call.part())
            self.call = None

    def text(self, text: str, thought: bool) -> None:
        self.close_call()
        last = self.parts[-1] if self.parts else None
        if (
            last is not None and last.HasField("text") and last.thought == thought
            and not last.HasField("thought_signature")
        ):  # fmt: skip
            last.text += text
            return
        part = pb.GeminiPart(text=text)
        if thought:
            part.thought = True
        self.parts.append(part)

    def take(self) -> list[pb.GeminiPart]:
        taken, self.parts = self.parts, []
        return taken


class Reply:
    """Gathers (emit=False) or streams (emit=True) one answer as `kind` objects."""

    def __init__(self, kind: type[Chunk], request_id: str, show_thoughts: bool, emit: bool) -> None:
        self.kind = kind
        self.response_id = request_id
        self.show_thoughts = show_thoughts
        self.emit = emit
        self.candidates: dict[int, _Candidate] = {}
        # A Gemini upstream's own chunks: gathered, or the last one held for usage.
        self.native: Chunk | None = None
        self.native_seen = False
        self.native_usage: dict[str, Any] = {}
        # A relayed stream's last chunk (its finish reasons), held for usage.
        self.held: dict[str, Any] | None = None

    def _candidate(self, index: int) -> _Candidate:
        found = self.candidates.get(index)
        if found is None:
            found = self.candidates[index] = _Candidate()
        return found

    def feed(self, fragment: Fragment, model: str) -> list[Chunk]:
        if isinstance(fragment, NativeEvent):
            return self._native(fragment)
        if isinstance(fragment, TextDelta):
            self._candidate(fragment.choice).text(fragment.text, False)
            return self._flush(model, fragment.choice)
        if isinstance(fragment, ToolCallDelta):
            candidate = self._candidate(fragment.choice)
            if fragment.id is not None or candidate.call is None:
                candidate.close_call()
                candidate.call = _Call(fragment.id or "", fragment.name or "",
                                       signature=fragment.signature)  # fmt: skip
            candidate.call.arguments.append(fragment.arguments)
            return self._flush(model, fragment.choice, keep_call=True)
        if isinstance(fragment, ReasoningDelta) and fragment.text and self.show_thoughts:
            self._candidate(0).text(fragment.text, True)
            return self._flush(model, 0)
        return []

    def _flush(self, model: str, index: int, keep_call: bool = False) -> list[Chunk]:
        """The parts of a candidate ready to go, as one chunk (streaming only)."""
        candidate = self.candidates[index]
        if not self.emit or not candidate.parts:
            return []
        parts = candidate.take()
        chunk = self._chunk(model)
        chunk.candidates.add(content=pb.GeminiContent(role=ROLE, parts=parts), index=index)
        return [chunk]

    def _chunk(self, model: str) -> Chunk:
        return self.kind(model_version=model, response_id=self.response_id)

    def _native(self, event: NativeEvent) -> list[Chunk]:
        if event.dialect != DIALECT:
            return []
        self.native_seen = True
        chunk = self.kind()
        fill(chunk, event.data)
        _encode_signatures(chunk)
        if chunk.HasField("usage_metadata"):
            self.native_usage = dict(event.data.get("usageMetadata") or {})
        if not self.emit:
            self.native = _merged(self.native, chunk, self.kind)
            return []
        held, self.native = self.native, None
        out = [held] if held is not None else []
        if any(c.HasField("finish_reason") for c in chunk.candidates):
            self.native = chunk  # the last: it waits for the gateway's usage
        else:
            out.append(chunk)
        return out

    def relayed(self, answers: list[dict[str, Any]], model: str) -> Encoded | None:
        """A Gemini upstream's chunks as it wrote them (`Relayed`), under this answer's
        id: their usage taken (the last chunk carries the gateway's), thought signatures
        written as the dialect's, the chunk with the finish reasons held for `close`,
        and chunks that carried nothing but usage left out."""
        out: list[bytes] = []
        for answer in answers:
            given = answer.pop("usageMetadata", None)
            if isinstance(given, dict):
                self.native_usage = given
            candidates = answer.get("candidates") or ()
            if not candidates and "promptFeedback" not in answer:
                continue
            answer["responseId"] = self.response_id
            answer.setdefault("modelVersion", model)
            finished = False
            for candidate in candidates:
                finished = finished or bool(candidate.get("finishReason"))
                for part in (candidate.get("content") or {}).get("parts") or ():
                    if "thoughtSignature" in part:
                        part["thoughtSignature"] = encode_signature(part["thoughtSignature"])
            if self.held is not None:
                out.append(encoded_json(self.held))
            self.held = answer if finished else None
            if not finished:
                out.append(encoded_json(answer))
        return Encoded(out) if out else None

    def close(self, run: Run) -> Chunk:
        """The whole answer (emit=False), or a stream's last chunk: what is still
        unsent, the finish reasons and the whole call's usage (after a Gemini
        upstream's own chunks, its last one, or usage alone)."""
        model = run.model.id
        chunk = self.native if self.native is not None else self._chunk(model)
        if self.held is not None:
            fill(chunk, self.held)
        chunk.response_id = self.response_id
        if not chunk.HasField("model_version"):
            chunk.model_version = model
        if not self.native_seen and not chunk.candidates:
            for index in range(len(run.choices)):
                candidate = self._candidate(index)
                candidate.close_call()
                chunk.candidates.add(
                    content=pb.GeminiContent(role=ROLE, parts=candidate.take()),
                    finish_reason=FINISH_REASONS.get(run.choice_finish(index), "OTHER"),
                    index=index,
                )
        chunk.usage_metadata.CopyFrom(usage(run, self.native_usage))
        return chunk


def usage(run: Run, given: Mapping[str, Any]) -> pb.GeminiUsageMetadata:
    """A Gemini upstream's own usage when it gave one (and the gateway did not cut its
    stream short), else the call's counts, plus the gateway's cost and timing."""
    out = pb.GeminiUsageMetadata()
    if isinstance(given.get("promptTokenCount"), int) and not run.cut_short:
        fill(out, given)
    else:
        counts = run.counts()
        out.prompt_token_count = counts.prompt_tokens
        out.candidates_token_count = counts.completion_tokens - counts.reasoning_tokens
        out.total_token_count = counts.total_tokens
        if counts.cached_tokens:
            out.cached_content_token_count = counts.cached_tokens
        if counts.reasoning_tokens:
            out.thoughts_token_count = counts.reasoning_tokens
    measured = run.usage()
    out.latency_ms = measured.latency_ms
    for name in MEASURED:
        if measured.HasField(name):
            setattr(out, name, getattr(measured, name))
    return out


def _encode_signatures(chunk: Chunk) -> None:
    for candidate in chunk.candidates:
        for part in candidate.content.parts:
            if part.HasField("thought_signature"):
                part.thought_signature = encode_signature(part.thought_signature)


def _merged(whole: Chunk | None, chunk: Chunk, kind: type[Chunk]) -> Chunk:
    """A streamed upstream's chunks as one answer: each candidate's parts in order
    (adjacent text of one kind joined), the latest of every other field."""
    if whole is None:
        return chunk
    by_index = {c.index: c for c in whole.candidates}
    for candidate in chunk.candidates:
        into = by_index.get(candidate.index)
        if into is None:
            whole.candidates.add().CopyFrom(candidate)
            by_index[candidate.index] = whole.candidates[-1]
            continue
        for part in candidate.content.parts:
            last = into.content.parts[-1] if into.content.parts else None
            if _joinable(last, part):
                assert last is not None
                last.text += part.text
                if part.HasField("thought_signature"):
                    last.thought_signature = part.thought_signature
            else:
                into.content.parts.add().CopyFrom(part)
        parts = list(into.content.parts)
        into.MergeFrom(candidate)
        del into.content.parts[:]
        into.content.parts.extend(parts)
    for name in ("prompt_feedback", "usage_metadata", "other"):
        if chunk.HasField(name):
            getattr(whole, name).CopyFrom(getattr(chunk, name))
    if chunk.HasField("model_version"):
        whole.model_version = chunk.model_version
    return whole


def _joinable(last: pb.GeminiPart | None, part: pb.GeminiPart) -> bool:
    plain = {"text", "thought", "thought_signature"}
    return (
        last is not None and last.HasField("text") and part.HasField("text")
        and last.thought == part.thought and not last.HasField("thought_signature")
        and {f.name for f, _ in last.ListFields()} <= plain
        and {f.name for f, _ in part.ListFields()} <= plain
    )  # fmt: skip


def fill(message: ProtoMessage, data: Mapping[str, Any]) -> None:
    """A message from Google's JSON (camelCase or snake_case keys); keys it has no
    field for, or of another shape, go to its `other`, so nothing is lost."""
    fields = message.DESCRIPTOR.fields_by_name
    by_key = {f.json_name: f for f in message.DESCRIPTOR.fields} | dict(fields)
    rest: dict[str, Any] = {}
    for key, value in data.items():
        found = by_key.get(key)
        if found is None or found.name == "other" or not _set(message, found, value):
            rest[key] = value
    if rest and "other" in fields:
        message.other.update(rest)


def _set(message: ProtoMessage, found: FieldDescriptor, value: Any) -> bool:
    """Sets one field from JSON; False when the value is not of the field's shape."""
    kind = found.message_type
    if kind is not None and kind.full_name == "google.protobuf.Struct":
        if not isinstance(value, dict):
            return False
        if found.is_repeated:
            return False
        getattr(message, found.name).update(value)
        return True
    if found.is_repeated:
        if not isinstance(value, list):
            return False
        target = getattr(message, found.name)
        if kind is None:
            target.extend(value)
            return True
        for item in value:
            if isinstance(item, dict):
                fill(target.add(), item)
        return True
    if kind is not None:
        if not isinstance(value, dict):
            return False
        sub = getattr(message, found.name)
        sub.SetInParent()
        fill(sub, value)
        return True
    expected = {FieldDescriptor.TYPE_STRING: str, FieldDescriptor.TYPE_BOOL: bool,
                FieldDescriptor.TYPE_INT32: int, FieldDescriptor.TYPE_DOUBLE: float}  # fmt: skip
    wanted = expected.get(found.type)
    if wanted is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if (
        wanted is None
        or not isinstance(value, wanted)
        or (wanted is int and isinstance(value, bool))
    ):
        return False
    setattr(message, found.name, value)
    return True


# -- the model list ------------------------------------------------------------

DEFAULT_PAGE = 50
MAX_PAGE = 1000
GENERATES = ("generateContent", "streamGenerateContent", "countTokens")
EMBEDS = ("embedContent", "batchEmbedContents")


def model(config: ModelConfig, embeds: bool) -> pb.GeminiModel:
    """A model in Gemini's shape; every model generates, those with an embedding
    provider embed too."""
    methods = [*GENERATES, *(EMBEDS if embeds else ())]
    return pb.GeminiModel(
        name=f"models/{config.id}",
        base_model_id=config.id,
        version="001",
        display_name=config.id,
        description=f"{config.id}, served by {config.owned_by} through the gateway",
        input_token_limit=config.context_window or 0,
        output_token_limit=config.context_window or 0,
        supported_generation_methods=methods,
    )


def page(
    models: Sequence[pb.GeminiModel], request: service.ListGeminiModelsRequest
) -> service.ListGeminiModelsResponse:
    """The page after `page_token` (the last model of the page before), at most
    `page_size` models."""
    size = request.page_size if request.HasField("page_size") else DEFAULT_PAGE
    if not 1 <= size <= MAX_PAGE:
        raise InvalidArgument.for_field("pageSize", f"must be between 1 and {MAX_PAGE}")
    start = 0
    if request.HasField("page_token") and request.page_token:
        names = [m.name for m in models]
        if request.page_token not in names:
            raise InvalidArgument.for_field("pageToken", "is not a page token of this list")
        start = names.index(request.page_token) + 1
    shown = models[start : start + size]
    out = service.ListGeminiModelsResponse(models=shown)
    if start + size < len(models):
        out.next_page_token = shown[-1].name
    return out
