"""A chat or text completion request (OpenAI's formats) -> the gateway's one
GenerationRequest: the spec's fields, and those beyond them checked against OpenAI's
ranges (content parts and roles, tool definitions and calls, tool_choice, response
formats, choices, penalties, logit_bias, metadata). Every failure is InvalidArgument
naming the field.
"""

from __future__ import annotations

from typing import Any

from gateway.v1 import chat_pb2
from gateway.v1 import chat_service_pb2 as chat_pb
from gateway.v1 import completion_service_pb2 as completion_pb

from server.application.pipeline import cache_marks, schemas
from server.application.pipeline.fields import (
    CACHE_RETENTIONS,
    MAX_TOOLS,
    MAX_TOP_LOGPROBS,
    NAME,
    RESPONSE_FORMATS,
    TOOL_CHOICES,
    between,
    image_url,
    metadata,
    non_empty,
    one_of,
    present,
    read_sampling,
    required,
    stop_sequences,
    token_ids,
)
from server.base.errors import InvalidArgument
from server.base.generation import (
    GenerationRequest,
    ImagePart,
    Message,
    Part,
    Prompt,
    ResponseFormat,
    TextPart,
    ToolCall,
    ToolSpec,
)

ChatRequest = chat_pb.CreateChatCompletionRequest | chat_pb.StreamChatCompletionRequest
CompletionRequest = completion_pb.CreateCompletionRequest | completion_pb.StreamCompletionRequest

# The dialect's name: a stream an upstream of OpenAI's chat format writes is relayed
# as it comes (GenerationRequest.relay).
DIALECT = "chat"
ROLES = ("system", "developer", "user", "assistant", "tool")
# OpenAI's ranges.
MAX_CHOICES = 128
MAX_COMPLETION_LOGPROBS = 5
MAX_BEST_OF = 20
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high")
IMAGE_DETAILS = ("auto", "low", "high", "original")


def common(request: ChatRequest | CompletionRequest) -> dict[str, Any]:
    """The request fields chat and text completions share, ranges checked."""
    out: dict[str, Any] = {}
    n = between(request, "n", 1, MAX_CHOICES)
    if n is not None:
        out["n"] = n
    if present(request, "seed"):
        out["seed"] = request.seed
    if present(request, "user"):
        out["user"] = request.user
    out["presence_penalty"] = between(request, "presence_penalty", -2, 2)
    out["frequency_penalty"] = between(request, "frequency_penalty", -2, 2)
    bias = []
    for token, value in sorted(request.logit_bias.items()):
        if not token.isdigit():
            raise InvalidArgument.for_field(f"logit_bias.{token}", "keys must be token ids")
        if not -100 <= value <= 100:
            raise InvalidArgument.for_field(f"logit_bias.{token}", "must be between -100 and 100")
        bias.append((token, value))
    out["logit_bias"] = tuple(bias)
    return out


def _part(part: chat_pb2.ContentPart, where: str, role: str) -> Part:
    if part.type == "text":
        if not present(part, "text"):
            raise InvalidArgument.for_field(f"{where}.text", "is required for a text part")
        return TextPart(part.text)
    if part.type == "image_url":
        if role != "user":
            raise InvalidArgument.for_field(f"{where}.type", "images are allowed in user messages")
        url = image_url(part.image_url.url, f"{where}.image_url.url")
        detail = part.image_url.detail if present(part.image_url, "detail") else None
        if detail is not None and detail not in IMAGE_DETAILS:
            raise InvalidArgument.for_field(
                f"{where}.image_url.detail", f"must be one of {', '.join(IMAGE_DETAILS)}"
            )
        return ImagePart(url, detail)
    raise InvalidArgument.for_field(f"{where}.type", "must be one of text, image_url")


# Roles a message of only role and text may have (a tool message needs its call id).
PLAIN_ROLES = frozenset({"system", "developer", "user", "assistant"})
# ChatMessage fields up to this number are role (1) and content (2).
PLAIN_FIELD = 2
# Request fields beyond the spec's; a request with none of them takes the plain path.
CHAT_EXTRAS = frozenset(
    {
        "max_completion_tokens", "n", "seed", "user", "presence_penalty",
        "frequency_penalty", "logit_bias", "logprobs", "top_logprobs", "tools",
        "tool_choice", "tool_choice_function", "parallel_tool_calls", "response_format",
        "reasoning_effort", "metadata", "store", "service_tier", "prompt_cache_key",
        "safety_identifier", "prompt_cache_retention",
    }
)  # fmt: skip
SERVICE_TIERS = ("auto", "default", "flex", "priority", "scale")


def upstream_hints(request: ChatRequest) -> dict[str, Any]:
    """Fields that change nothing in the answer, for upstreams that take them."""
    out: dict[str, Any] = {}
    if present(request, "store"):
        out["store"] = request.store
    out["service_tier"] = one_of(request, "service_tier", SERVICE_TIERS)
    out["prompt_cache_retention"] = one_of(request, "prompt_cache_retention", CACHE_RETENTIONS)
    for name in ("prompt_cache_key", "safety_identifier"):
        if present(request, name):
            value = getattr(request, name)
            if len(value) > 512:
                raise InvalidArgument.for_field(name, "must be at most 512 characters")
            out[name] = value
    return out


def extras(request: ChatRequest) -> bool:
    """Whether the request sets any field beyond the spec's (one C call)."""
    return any(f.name in CHAT_EXTRAS for f, _ in request.ListFields())


def message(m: chat_pb.ChatMessage, i: int) -> Message:
    if m.role in PLAIN_ROLES and all(f.number <= PLAIN_FIELD for f, _ in m.ListFields()):
        return Message(m.role, m.content)  # role and text only: the common case
    where = f"messages[{i}]"
    if m.role not in ROLES:
        raise InvalidArgument.for_field(f"{where}.role", f"must be one of {', '.join(ROLES)}")
    if m.content and m.content_parts:
        raise InvalidArgument.for_field(f"{where}.content", "send a text or parts, not both")
    parts = tuple(_part(p, f"{where}.content[{j}]", m.role) for j, p in enumerate(m.content_parts))
    text = "".join(p.text for p in parts if isinstance(p, TextPart)) if parts else m.content
    calls = []
    for j, call in enumerate(m.tool_calls):
        at = f"{where}.tool_calls[{j}]"
        if m.role != "assistant":
            raise InvalidArgument.for_field(at, "only assistant messages carry tool calls")
        if call.type != "function":
            raise InvalidArgument.for_field(f"{at}.type", "must be function")
        required(call.id, f"{at}.id")
        required(call.function.name, f"{at}.function.name")
        signature = call.extra_content.google.thought_signature or None
        calls.append(ToolCall(call.id, call.function.name, call.function.arguments, signature))
    call_id = m.tool_call_id if present(m, "tool_call_id") else None
    if m.role == "tool" and not call_id:
        raise InvalidArgument.for_field(f"{where}.tool_call_id", "is required on tool messages")
    if m.role != "tool" and call_id is not None:
        raise InvalidArgument.for_field(f"{where}.tool_call_id", "goes only on tool messages")
    name = m.name if present(m, "name") else None
    cache = cache_marks.marks(m.content_parts, f"{where}.content")
    return Message(m.role, text, parts, name, tuple(calls), call_id, cache)


def tools(request: ChatRequest) -> dict[str, Any]:
    if len(request.tools) > MAX_TOOLS:
        raise InvalidArgument.for_field("tools", f"at most {MAX_TOOLS} tools")
    tools = []
    for i, tool in enumerate(request.tools):
        if tool.type != "function":
            raise InvalidArgument.for_field(f"tools[{i}].type", "must be function")
        f = tool.function
        if not NAME.match(f.name):
            raise InvalidArgument.for_field(
                f"tools[{i}].function.name", "must be 1 to 64 letters, digits, _ or -"
            )
        where = f"tools[{i}].function.parameters"
        parameters = schemas.read(f.parameters, where) if f.HasField("parameters") else None
        if parameters is not None and parameters.get("type", "object") != "object":
            raise InvalidArgument.for_field(
                f"tools[{i}].function.parameters", "must be a JSON Schema of type object"
            )
        tools.append(
            ToolSpec(
                f.name,
                f.description if f.HasField("description") else None,
                parameters,
                f.strict if f.HasField("strict") else None,
                cache_marks.mark(tool, f"tools[{i}]"),
            )
        )
    choice = one_of(request, "tool_choice", TOOL_CHOICES)
    forced = None
    if request.HasField("tool_choice_function"):
        if choice is not None:
            raise InvalidArgument.for_field("tool_choice", "a mode or a function, not both")
        named = request.tool_choice_function
        if named.type != "function":
            raise InvalidArgument.for_field("tool_choice.type", "must be function")
        forced = named.function.name
        if forced not in {t.name for t in tools}:
            raise InvalidArgument.for_field(
                "tool_choice.function.name", f"names no tool of the request ({forced!r})"
            )
    if (choice is not None or forced is not None) and not tools:
        raise InvalidArgument.for_field("tool_choice", "is allowed only with tools")
    parallel = request.parallel_tool_calls if present(request, "parallel_tool_calls") else None
    return dict(
        tools=tuple(tools), tool_choice=choice, forced_tool=forced, parallel_tool_calls=parallel
    )


def response_format(request: ChatRequest) -> ResponseFormat | None:
    if not request.HasField("response_format"):
        return None
    fmt = request.response_format
    if fmt.type not in RESPONSE_FORMATS:
        raise InvalidArgument.for_field(
            "response_format.type", f"must be one of {', '.join(RESPONSE_FORMATS)}"
        )
    if fmt.type != "json_schema":
        if fmt.HasField("json_schema"):
            raise InvalidArgument.for_field(
                "response_format.json_schema", "goes only with type json_schema"
            )
        return None if fmt.type == "text" else ResponseFormat(fmt.type)
    if not fmt.HasField("json_schema"):
        raise InvalidArgument.for_field(
            "response_format.json_schema", "is required with type json_schema"
        )
    spec = fmt.json_schema
    if not NAME.match(spec.name):
        raise InvalidArgument.for_field(
            "response_format.json_schema.name", "must be 1 to 64 letters, digits, _ or -"
        )
    where = "response_format.json_schema.schema"
    schema = schemas.read(spec.schema, where) if spec.HasField("schema") else None
    return ResponseFormat(
        "json_schema",
        spec.name,
        schema,
        spec.description if spec.HasField("description") else None,
        spec.strict if spec.HasField("strict") else None,
    )


# Temperature ranges per interface (SPEC 8): 0..2 on interface A, 0..1 on interface B.
CHAT_TEMPERATURE = 2.0


def chat(request: ChatRequest) -> GenerationRequest:
    """Validates a Create/StreamChatCompletionRequest."""
    required(request.model, "model")
    if not request.messages:
        raise InvalidArgument.for_field("messages", "at least one message is required")
    messages = tuple(message(m, i) for i, m in enumerate(request.messages))
    sampling = read_sampling(request, CHAT_TEMPERATURE)
    if not extras(request):
        return GenerationRequest(messages=messages, stop=stop_sequences(request.stop), **sampling)
    if present(request, "max_completion_tokens"):
        sampling.update(
            read_sampling(request, CHAT_TEMPERATURE, max_tokens_field="max_completion_tokens")
        )
    logprobs = request.logprobs if present(request, "logprobs") else False
    top = between(request, "top_logprobs", 0, MAX_TOP_LOGPROBS)
    if top is not None and not logprobs:
        raise InvalidArgument.for_field("top_logprobs", "needs logprobs set to true")
    return GenerationRequest(
        messages=messages,
        stop=stop_sequences(request.stop),
        **sampling,
        **common(request),
        logprobs=logprobs,
        top_logprobs=top,
        **tools(request),
        response_format=response_format(request),
        reasoning_effort=one_of(request, "reasoning_effort", REASONING_EFFORTS),
        metadata=metadata(request),
        **upstream_hints(request),
    )


def completion(request: CompletionRequest) -> GenerationRequest:
    """Validates a Create/StreamCompletionRequest."""
    required(request.model, "model")
    prompt, prompts = _completion_prompts(request)
    shared = common(request)
    if len(prompts) * shared.get("n", 1) > MAX_COMPLETION_CHOICES:
        raise InvalidArgument.for_field(
            "prompt", f"prompts times n must be at most {MAX_COMPLETION_CHOICES}"
        )
    echo = request.echo if present(request, "echo") else False
    if echo and any(isinstance(p, tuple) for p in prompts):
        raise InvalidArgument.for_field("echo", "cannot repeat a prompt given as token ids")
    top = between(request, "logprobs", 0, MAX_COMPLETION_LOGPROBS)
    best_of = between(request, "best_of", 1, MAX_BEST_OF)
    if best_of is not None:
        if best_of < shared.get("n", 1):
            raise InvalidArgument.for_field("best_of", "must be at least n")
        if request.DESCRIPTOR.name.startswith("Stream") or request.stream:
            raise InvalidArgument.for_field("best_of", "cannot be used with streaming")
    return GenerationRequest(
        prompt=prompt,
        prompts=prompts,
        stop=stop_sequences(request.stop),
        **read_sampling(request, CHAT_TEMPERATURE),
        **shared,
        logprobs=top is not None,
        top_logprobs=top,
        echo=echo,
        suffix=request.suffix if present(request, "suffix") else None,
        best_of=best_of,
    )


# The most choices one text completion may ask for: prompts times n.
MAX_COMPLETION_CHOICES = 128


def _completion_prompts(request: CompletionRequest) -> tuple[str, tuple[Prompt, ...]]:
    """The prompt's text and, for OpenAI's array forms, every prompt: strings, one
    token-id array, or token-id arrays. One string in an array is a plain prompt."""
    if not request.prompts:
        return required(request.prompt, "prompt"), ()
    if request.prompt:
        raise InvalidArgument.for_field("prompt", "send a string or an array, not both")
    items = request.prompts
    kinds = {item.WhichOneof("kind") for item in items}
    prompts: tuple[Prompt, ...]
    if kinds == {"string_value"}:
        texts = tuple(non_empty(item.string_value, f"prompt[{i}]") for i, item in enumerate(items))
        if len(texts) == 1:
            return texts[0], ()
        prompts = texts
    elif kinds == {"number_value"}:
        prompts = (token_ids(items, "prompt"),)
    elif kinds == {"list_value"}:
        prompts = tuple(
            token_ids(item.list_value.values, f"prompt[{i}]") for i, item in enumerate(items)
        )
    else:
        raise InvalidArgument.for_field(
            "prompt",
            "must be a string, an array of strings, an array of token ids, "
            "or an array of token-id arrays",
        )
    return "\n".join(p for p in prompts if isinstance(p, str)), prompts
