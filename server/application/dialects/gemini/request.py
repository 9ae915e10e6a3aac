"""A Gemini API request (Google's format) -> the gateway's one GenerationRequest.

Every field is honoured, carried, or refused with a 400 naming it:

- `systemInstruction`'s text parts become a system message; `contents` turns of role
  `user` and `model` (no role: `user`) become user and assistant messages: text,
  `inlineData` (images as data URLs, PDFs as documents, text as text), `fileData` by
  https URL for images, `functionCall` parts as the assistant's tool calls (their
  `thoughtSignature` as the call's signature), `functionResponse` parts as `tool`
  messages answering the calls of the turn just before, by id or, without one, by
  name in order (a response that answers no call is a 400 naming it);
- `thought` parts of earlier turns are the reasoning of the provider that made them:
  they stay out of the generic request and reach only a Gemini upstream;
- `tools.functionDeclarations` with `parametersJsonSchema`, or `parameters` in
  Gemini's Schema (turned into JSON Schema); `toolConfig.functionCallingConfig` AUTO,
  ANY (one allowed name: that function is forced; several: the tools are those),
  NONE; `generationConfig`'s sampling, candidates, stop sequences, structured output
  (`responseMimeType` application/json with `responseJsonSchema` or `responseSchema`)
  and `thinkingConfig` (a budget, -1 for the model's choice, 0 for none, or a level);
  its values a text model answers anyway (`responseModalities: ["TEXT"]`, a feature
  switched off: see no_ops.py) are accepted on any model;
- what only Gemini's own API carries (its tools, a cached prefix, audio and video,
  files by Files API URI, a stricter safety threshold, the keys the contract has no
  field for...) sets the native request's `required_by`, so only a Gemini provider of
  the model may take the request, and any other answers a 400 naming the field.

The request rides along as a `Native` request of this dialect, its JSON as Google's
API writes it, which a Gemini upstream is sent as it came.

Thought signatures travel to the caller base64-encoded (Google's SDKs read them as
bytes) around the gateway's sealed form, which names the provider that made them.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterator, Sequence
from typing import Any

from gateway.v1 import gemini_pb2 as pb
from gateway.v1 import gemini_service_pb2 as service
from google.protobuf import json_format
from google.protobuf.message import Message as ProtoMessage

from server.application.dialects.gemini import no_ops
from server.application.pipeline import schemas
from server.application.pipeline.fields import MAX_TOKENS_CEILING
from server.base import structs, urls
from server.base.errors import InvalidArgument
from server.base.generation import (
    DocumentPart,
    GenerationRequest,
    ImagePart,
    Message,
    Native,
    Part,
    ResponseFormat,
    TextPart,
    Thinking,
    ToolCall,
    ToolSpec,
)

# The dialect's name where a request travels as it came (see generation.serves).
DIALECT = "gemini"
GenerateRequest = service.GenerateContentRequest | service.StreamGenerateContentRequest
MODEL_PREFIX = "models/"
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:-]{0,127}$")
MAX_CANDIDATES = 8
MAX_STOP_SEQUENCES = 5
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
MODES = ("AUTO", "ANY", "NONE", "VALIDATED")
LEVELS = ("MINIMAL", "LOW", "MEDIUM", "HIGH")
# Thresholds that block nothing beyond what any provider's own policy does.
LENIENT = ("BLOCK_NONE", "OFF", "HARM_BLOCK_THRESHOLD_UNSPECIFIED")
# Declaration keys that describe, for the model, what a function returns: hints.
DESCRIPTIVE = ("response", "responseJsonSchema")
# Ids made up for calls that came without one: never given back to a caller's turn.
MADE_UP = "call_gw"


def model_id(name: str, where: str = "model") -> str:
    """The catalog's name in `models/<id>` or `<id>`."""
    model = name.removeprefix(MODEL_PREFIX)
    if not model:
        raise InvalidArgument.for_field(where, "is required")
    return model


def encode_signature(sealed: str) -> str:
    return base64.b64encode(sealed.encode()).decode()


def decode_signature(written: str) -> str | None:
    """The gateway's sealed signature inside a caller's `thoughtSignature`; None for
    anything else (a signature no provider of the gateway's made is never passed on)."""
    try:
        return base64.b64decode(written, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None


class Reader:
    """Reads one request, noting the first field only Gemini's own API carries."""

    def __init__(self) -> None:
        self.native_only: str | None = None

    def native(self, where: str) -> None:
        if self.native_only is None:
            self.native_only = where

    def others(self, message: ProtoMessage, where: str, hints: Sequence[str] = ()) -> None:
        for key in message.other.fields:
            if _camel(key) not in hints:
                self.native(f"{where}.{key}" if where else key)

    def system(self, request: GenerateRequest) -> tuple[Message, ...]:
        if not request.HasField("system_instruction"):
            return ()
        texts = []
        for j, part in enumerate(request.system_instruction.parts):
            at = f"systemInstruction.parts[{j}]"
            if not part.HasField("text"):
                raise InvalidArgument.for_field(f"{at}.text", "system parts must be text")
            self.others(part, at)
            texts.append(part.text)
        return (Message(role="system", content="\n\n".join(texts)),) if texts else ()

    def contents(self, contents: Sequence[pb.GeminiContent]) -> list[Message]:
        if not contents:
            raise InvalidArgument.for_field("contents", "at least one content is required")
        out: list[Message] = []
        calls: list[ToolCall] = []  # of the model turn just before
        for i, content in enumerate(contents):
            where = f"contents[{i}]"
            role = content.role if content.HasField("role") else "user"
            if role not in ("user", "model"):
                raise InvalidArgument.for_field(f"{where}.role", "must be `user` or `model`")
            if not content.parts:
                raise InvalidArgument.for_field(f"{where}.parts", "at least one part is required")
            if role == "model":
                turn = self.model_turn(content.parts, where)
                out.append(turn)
                calls = list(turn.tool_calls)
            else:
                out.extend(self.user_turn(content.parts, where, calls))
                calls = []
        return out

    def model_turn(self, parts: Sequence[pb.GeminiPart], where: str) -> Message:
        texts: list[str] = []
        calls: list[ToolCall] = []
        for j, part in enumerate(parts):
            at = f"{where}.parts[{j}]"
            self.others(part, at)
            if part.HasField("function_call"):
                calls.append(self.call(part, at, len(calls)))
            elif part.HasField("function_response"):
                raise InvalidArgument.for_field(
                    f"{at}.functionResponse", "belongs in a `user` turn"
                )
            elif part.thought:
                pass  # earlier reasoning: its provider's own, left out elsewhere
            elif part.HasField("text"):
                texts.append(part.text)
            else:
                self.media(part, at)
                self.native(at)  # media the model made: Gemini's own to replay
        return Message(role="assistant", content="".join(texts), tool_calls=tuple(calls))

    def call(self, part: pb.GeminiPart, at: str, number: int) -> ToolCall:
        call = part.function_call
        self.others(call, f"{at}.functionCall")
        if not call.name:
            raise InvalidArgument.for_field(f"{at}.functionCall.name", "is required")
        signature = (
            decode_signature(part.thought_signature) if part.HasField("thought_signature") else None
        )
        arguments = (
            structs.read(call.args, f"{at}.functionCall.args") if call.HasField("args") else {}
        )
        call_id = call.id if call.HasField("id") and call.id else f"{MADE_UP}_{number}_{call.name}"
        return ToolCall(call_id, call.name, json.dumps(arguments), signature)

    def user_turn(
        self, parts: Sequence[pb.GeminiPart], where: str, calls: list[ToolCall]
    ) -> list[Message]:
        """The turn's function responses first (each answering a call of the turn
        before), then its other parts as one user message."""
        answers: list[Message] = []
        rest: list[Part] = []
        waiting = list(calls)
        for j, part in enumerate(parts):
            at = f"{where}.parts[{j}]"
            self.others(part, at)
            if part.HasField("function_response"):
                answers.append(
                    self.answer(part.function_response, f"{at}.functionResponse", waiting)
                )
            elif part.HasField("function_call"):
                raise InvalidArgument.for_field(f"{at}.functionCall", "belongs in a `model` turn")
            elif part.thought:
                raise InvalidArgument.for_field(f"{at}.thought", "belongs in a `model` turn")
            else:
                found = self.part(part, at)
                if found is not None:
                    rest.append(found)
        if rest:
            texts = [p.text for p in rest if isinstance(p, TextPart)]
            if len(texts) == len(rest):
                answers.append(Message(role="user", content="\n\n".join(texts)))
            else:
                answers.append(Message(role="user", content="".join(texts), parts=tuple(rest)))
        return answers

    def answer(
        self, response: pb.GeminiFunctionResponse, at: str, waiting: list[ToolCall]
    ) -> Message:
        """A function's response as the tool message answering its call: the call of
        the same id, else the first unanswered one of the same name."""
        self.others(response, at)
        if not response.name:
            raise InvalidArgument.for_field(f"{at}.name", "is required")
        given = response.id if response.HasField("id") and response.id else None
        for call in waiting:
            if (call.id == given) if given else (call.name == response.name):
                waiting.remove(call)
                break
        else:
            raise InvalidArgument.for_field(
                at,
                f"answers no function call of the `model` turn just before it "
                f"(name {response.name!r}{f', id {given!r}' if given else ''})",
            )
        result = (
            structs.read(response.response, f"{at}.response")
            if response.HasField("response")
            else {}
        )
        return Message(role="tool", content=_result_text(result), tool_call_id=call.id)

    def part(self, part: pb.GeminiPart, at: str) -> Part | None:
        if part.HasField("text"):
            return TextPart(part.text)
        return self.media(part, at)

    def media(self, part: pb.GeminiPart, at: str) -> Part | None:
        if part.HasField("inline_data"):
            blob = part.inline_data
            self.others(blob, f"{at}.inlineData")
            mime = blob.mime_type
            if not mime or not blob.data:
                raise InvalidArgument.for_field(
                    f"{at}.inlineData", "mimeType and data are required"
                )
            if mime in IMAGE_TYPES:
                return ImagePart(f"data:{mime};base64,{blob.data}")
            if mime == "application/pdf":
                return DocumentPart(mime, blob.data)
            if mime.startswith("text/"):
                return TextPart(_text(blob.data, f"{at}.inlineData.data"))
            self.native(f"{at}.inlineData")  # audio, video...
            return None
        if part.HasField("file_data"):
            data = part.file_data
            self.others(data, f"{at}.fileData")
            urls.check(data.file_uri, f"{at}.fileData.fileUri")  # the upstream fetches it
            if data.mime_type in IMAGE_TYPES:
                return ImagePart(data.file_uri)
            self.native(f"{at}.fileData")  # a Files API file, or media only Gemini reads
            return None
        if part.other.fields:
            return None  # noted by others(): executableCode, videoMetadata...
        raise InvalidArgument.for_field(at, "holds no data")

    def tools(self, request: GenerateRequest) -> tuple[ToolSpec, ...]:
        specs: list[ToolSpec] = []
        for i, tool in enumerate(request.tools):
            self.others(tool, f"tools[{i}]")  # Gemini's own tools
            for j, declaration in enumerate(tool.function_declarations):
                specs.append(self.declaration(declaration, f"tools[{i}].functionDeclarations[{j}]"))
        names = [s.name for s in specs]
        if len(set(names)) != len(names):
            raise InvalidArgument.for_field("tools", "function names must be unique")
        return tuple(specs)

    def declaration(self, declaration: pb.GeminiFunctionDeclaration, at: str) -> ToolSpec:
        self.others(declaration, at, DESCRIPTIVE)
        if not NAME.match(declaration.name):
            raise InvalidArgument.for_field(
                f"{at}.name", "must start with a letter or `_` and hold at most 128 letters, "
                "digits, `_`, `.`, `:` or `-`",
            )  # fmt: skip
        both = declaration.HasField("parameters") and declaration.HasField("parameters_json_schema")
        if both:
            raise InvalidArgument.for_field(
                f"{at}.parametersJsonSchema", "give parameters or parametersJsonSchema, not both"
            )
        schema = None
        if declaration.HasField("parameters_json_schema"):
            schema = schemas.read(declaration.parameters_json_schema, f"{at}.parametersJsonSchema")
        elif declaration.HasField("parameters"):
            schema = json_schema(structs.read(declaration.parameters, f"{at}.parameters"))
            schemas.check(schema, f"{at}.parameters")
        description = declaration.description if declaration.HasField("description") else None
        return ToolSpec(declaration.name, description, schema)


def _camel(key: str) -> str:
    """A key as Google's JSON writes it: its SDKs send some in snake_case."""
    head, *rest = key.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in rest)


def _result_text(result: dict[str, Any]) -> str:
    """A function's response as the text of its tool message: a lone `output` or
    `result` string as it is, an `error` prefixed so, any other object as JSON."""
    if len(result) == 1:
        ((key, value),) = result.items()
        if key in ("output", "result") and isinstance(value, str):
            return value
        if key == "error":
            return f"Error: {value if isinstance(value, str) else json.dumps(value)}"
    return json.dumps(result)


def _text(data: str, where: str) -> str:
    try:
        return base64.b64decode(data, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        raise InvalidArgument.for_field(where, "must be base64 of UTF-8 text") from None


# Gemini's Schema (an OpenAPI 3.0 subset) keys that JSON Schema names alike.
_SAME = ("description", "enum", "format", "required", "minItems", "maxItems", "minimum",
         "maximum", "minLength", "maxLength", "pattern", "title", "default", "example",
         "minProperties", "maxProperties")  # fmt: skip


def json_schema(schema: Any) -> Any:
    """Gemini's Schema as JSON Schema: types in lower case, `nullable` as a null type,
    `propertyOrdering` dropped, nested schemas likewise."""
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {k: v for k, v in schema.items() if k in _SAME}
    kind = schema.get("type")
    if isinstance(kind, str):
        lowered = kind.lower()
        out["type"] = [lowered, "null"] if schema.get("nullable") else lowered
    if isinstance(schema.get("properties"), dict):
        out["properties"] = {k: json_schema(v) for k, v in schema["properties"].items()}
    if "items" in schema:
        out["items"] = json_schema(schema["items"])
    if isinstance(schema.get("anyOf"), list):
        out["anyOf"] = [json_schema(s) for s in schema["anyOf"]]
    return out


def _choice(request: GenerateRequest, tools: tuple[ToolSpec, ...]) -> dict[str, Any]:
    config = request.tool_config
    if not request.HasField("tool_config"):
        return {"tools": tools}
    calling = config.function_calling_config
    at = "toolConfig.functionCallingConfig"
    mode = calling.mode if calling.HasField("mode") else "AUTO"
    if mode not in MODES:
        raise InvalidArgument.for_field(f"{at}.mode", f"must be one of {', '.join(MODES)}")
    allowed = list(calling.allowed_function_names)
    names = {t.name for t in tools}
    for k, name in enumerate(allowed):
        if name not in names:
            raise InvalidArgument.for_field(
                f"{at}.allowedFunctionNames[{k}]", f"names no function: {name!r}"
            )
    if allowed:
        tools = tuple(t for t in tools if t.name in allowed)
    if mode == "NONE":
        return {"tools": tools, "tool_choice": "none"}
    if mode == "ANY":
        if len(tools) == 1:
            return {"tools": tools, "forced_tool": tools[0].name}
        return {"tools": tools, "tool_choice": "required"}
    return {"tools": tools, "tool_choice": "auto"} if tools else {"tools": tools}


def _format(config: pb.GeminiGenerationConfig, reader: Reader) -> ResponseFormat | None:
    at = "generationConfig"
    mime = config.response_mime_type if config.HasField("response_mime_type") else "text/plain"
    has_schema = config.HasField("response_schema") or config.HasField("response_json_schema")
    if mime == "text/plain":
        if has_schema:
            raise InvalidArgument.for_field(
                f"{at}.responseMimeType", "a response schema needs application/json"
            )
        return None
    if mime == "text/x.enum":
        reader.native(f"{at}.responseMimeType")
        return None
    if mime != "application/json":
        raise InvalidArgument.for_field(
            f"{at}.responseMimeType", "must be text/plain, application/json or text/x.enum"
        )
    if config.HasField("response_schema") and config.HasField("response_json_schema"):
        raise InvalidArgument.for_field(
            f"{at}.responseJsonSchema", "give responseSchema or responseJsonSchema, not both"
        )
    if config.HasField("response_json_schema"):
        schema = schemas.read(config.response_json_schema, f"{at}.responseJsonSchema")
    elif config.HasField("response_schema"):
        schema = json_schema(structs.read(config.response_schema, f"{at}.responseSchema"))
        schemas.check(schema, f"{at}.responseSchema")
    else:
        return ResponseFormat("json_object")
    return ResponseFormat("json_schema", name="response", schema=schema)


def _thinking(config: pb.GeminiGenerationConfig) -> Thinking | None:
    if not config.HasField("thinking_config"):
        return None
    thinking = config.thinking_config
    at = "generationConfig.thinkingConfig"
    effort = None
    if thinking.HasField("thinking_level"):
        if thinking.thinking_level not in LEVELS:
            raise InvalidArgument.for_field(
                f"{at}.thinkingLevel", f"must be one of {', '.join(LEVELS)}"
            )
        effort = thinking.thinking_level.lower()
    if not thinking.HasField("thinking_budget"):
        return Thinking("adaptive", effort=effort) if effort or thinking.include_thoughts else None
    budget = thinking.thinking_budget
    if budget == 0:
        return Thinking("disabled", effort=effort) if effort else None
    if budget == -1:
        return Thinking("adaptive", effort=effort)
    if budget < 0:
        raise InvalidArgument.for_field(f"{at}.thinkingBudget", "must be -1, 0 or positive")
    return Thinking("enabled", budget, effort)


def _sampling(request: GenerateRequest, reader: Reader) -> dict[str, Any]:
    if not request.HasField("generation_config"):
        return {}
    config = request.generation_config
    at = "generationConfig"
    for key, value in structs.read(config.other, at).items():
        if not no_ops.answered_anyway(_camel(key), value):
            reader.native(f"{at}.{key}")
    out: dict[str, Any] = {}
    ranges = {"temperature": (0, 2), "top_p": (0, 1), "presence_penalty": (-2, 2),
              "frequency_penalty": (-2, 2)}  # fmt: skip
    for name, (low, high) in ranges.items():
        if config.HasField(name):
            value = getattr(config, name)
            if not low <= value <= high:
                camel = config.DESCRIPTOR.fields_by_name[name].json_name
                raise InvalidArgument.for_field(
                    f"{at}.{camel}", f"must be between {low} and {high}"
                )
            out[name] = value
    if config.HasField("top_k"):
        if config.top_k < 1:
            raise InvalidArgument.for_field(f"{at}.topK", "must be at least 1")
        # A sampling hint: Gemini CLI sends it with every turn, whatever the model.
        out["top_k"], out["top_k_hint"] = config.top_k, True
    if config.HasField("candidate_count"):
        if not 1 <= config.candidate_count <= MAX_CANDIDATES:
            raise InvalidArgument.for_field(
                f"{at}.candidateCount", f"must be between 1 and {MAX_CANDIDATES}"
            )
        out["n"] = config.candidate_count
    if config.HasField("max_output_tokens"):
        if not 1 <= config.max_output_tokens <= MAX_TOKENS_CEILING:
            raise InvalidArgument.for_field(
                f"{at}.maxOutputTokens", f"must be between 1 and {MAX_TOKENS_CEILING}"
            )
        out["max_tokens"] = config.max_output_tokens
    if config.HasField("seed"):
        out["seed"] = config.seed
    stops = list(config.stop_sequences)
    if len(stops) > MAX_STOP_SEQUENCES or any(not s for s in stops):
        raise InvalidArgument.for_field(
            f"{at}.stopSequences", f"at most {MAX_STOP_SEQUENCES} sequences, none empty"
        )
    out["stop"] = tuple(stops)
    out["response_format"] = _format(config, reader)
    out["thinking"] = _thinking(config)
    return out


def _safety(request: GenerateRequest, reader: Reader) -> None:
    for i, setting in enumerate(request.safety_settings):
        at = f"safetySettings[{i}]"
        if not setting.category or not setting.threshold:
            raise InvalidArgument.for_field(at, "category and threshold are required")
        reader.others(setting, at)
        if setting.threshold not in LENIENT:
            reader.native(f"{at}.threshold")


def generation(request: GenerateRequest) -> GenerationRequest:
    """Validates a Gemini request and translates it; every failure names its field."""
    reader = Reader()
    messages = [*reader.system(request), *reader.contents(request.contents)]
    tools = reader.tools(request)
    _safety(request, reader)
    if request.HasField("cached_content"):
        reader.native("cachedContent")
    if request.HasField("tool_config"):
        reader.others(request.tool_config, "toolConfig")
    reader.others(request, "")
    sampling = _sampling(request, reader)
    choice = _choice(request, tools)
    return GenerationRequest(
        messages=tuple(messages),
        **choice,
        **sampling,
        native=Native(DIALECT, native_body(request), required_by=reader.native_only),
    )


def native_body(request: ProtoMessage) -> dict[str, Any]:
    """The request as Google's API writes it (camelCase, other keys in place), its
    thought signatures in the gateway's sealed form, without `model`."""
    body = _json(request)
    body.pop("model", None)
    for content in body.get("contents") or ():
        for part in content.get("parts") or ():
            written = part.get("thoughtSignature")
            if isinstance(written, str):
                sealed = decode_signature(written)
                if sealed is None:
                    del part["thoughtSignature"]
                else:
                    part["thoughtSignature"] = sealed
    return body


def _json(message: ProtoMessage) -> dict[str, Any]:
    """Whole numbers as integers, as the caller wrote them (a Struct holds doubles)."""
    return dict(_flatten(structs.tidy(json_format.MessageToDict(message))))


def _flatten(data: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """MessageToDict's `other` objects' keys put back beside the fields they stood by."""
    for key, value in data.items():
        if key == "other" and isinstance(value, dict):
            yield from value.items()
        elif isinstance(value, dict):
            yield key, dict(_flatten(value)) if _typed(key) else value
        elif isinstance(value, list):
            yield key, [dict(_flatten(v)) if isinstance(v, dict) else v for v in value]
        else:
            yield key, value


# Keys whose objects are free-form (Structs): their `other` keys are the caller's own.
_FREE = frozenset({"args", "response", "parameters", "parametersJsonSchema", "responseSchema",
                   "responseJsonSchema"})  # fmt: skip


def _typed(key: str) -> bool:
    return key not in _FREE
