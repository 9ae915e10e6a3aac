"""Request validation: each interface's ranges, then one GenerationRequest.

Every failure is InvalidArgument naming the offending field.
"""

from __future__ import annotations

import re
from typing import Any

from google.protobuf import json_format

from server.core.config import PROFILES
from server.core.errors import InvalidArgument
from server.core.generation import (
    GenerationRequest,
    ImagePart,
    Message,
    Part,
    ResponseFormat,
    TextPart,
    ToolCall,
    ToolSpec,
)

ROLES = ("system", "developer", "user", "assistant", "tool")
MAX_STOP_SEQUENCES = 4
MAX_TOKENS_CEILING = 1_000_000
# OpenAI's ranges.
MAX_CHOICES = 128
MAX_TOOLS = 128
MAX_TOP_LOGPROBS = 20
MAX_COMPLETION_LOGPROBS = 5
MAX_BEST_OF = 20
MAX_METADATA_PAIRS = 16
TOOL_CHOICES = ("none", "auto", "required")
RESPONSE_FORMATS = ("text", "json_object", "json_schema")
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high")
NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
DATA_URL = re.compile(r"^data:image/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/=\s]+$")

# Temperature ranges per interface (SPEC 8): 0..2 on interface A, 0..1 on interface B.
CHAT_TEMPERATURE = 2.0
ROUTER_TEMPERATURE = 1.0


def _present(message: Any, field: str) -> bool:
    return message.HasField(field)


def _sampling(
    message: Any, max_temperature: float, prefix: str = "", max_tokens_field: str = "max_tokens"
) -> dict[str, Any]:
    """Reads max_tokens, temperature and top_p, checking each one's range."""
    out: dict[str, Any] = {}
    if _present(message, max_tokens_field):
        value = getattr(message, max_tokens_field)
        if not 1 <= value <= MAX_TOKENS_CEILING:
            raise InvalidArgument.for_field(
                prefix + max_tokens_field, f"must be between 1 and {MAX_TOKENS_CEILING}"
            )
        out["max_tokens"] = value
    if _present(message, "temperature"):
        if not 0 <= message.temperature <= max_temperature:
            raise InvalidArgument.for_field(
                prefix + "temperature", f"must be between 0 and {max_temperature:g}"
            )
        out["temperature"] = message.temperature
    if _present(message, "top_p"):
        if not 0 <= message.top_p <= 1:
            raise InvalidArgument.for_field(prefix + "top_p", "must be between 0 and 1")
        out["top_p"] = message.top_p
    return out


def _stop(stop: Any, field: str = "stop") -> tuple[str, ...]:
    if len(stop) > MAX_STOP_SEQUENCES:
        raise InvalidArgument.for_field(field, f"at most {MAX_STOP_SEQUENCES} sequences")
    if any(not s for s in stop):
        raise InvalidArgument.for_field(field, "sequences must not be empty")
    return tuple(stop)


def _required(value: str, field: str) -> str:
    if not value:
        raise InvalidArgument.for_field(field, "is required")
    return value


def _between(message: Any, field: str, low: float, high: float) -> Any:
    """The field's value when set (None otherwise), checked against [low, high]."""
    if not _present(message, field):
        return None
    value = getattr(message, field)
    if not low <= value <= high:
        raise InvalidArgument.for_field(field, f"must be between {low:g} and {high:g}")
    return value


def _one_of(message: Any, field: str, allowed: tuple[str, ...]) -> str | None:
    if not _present(message, field):
        return None
    value: str = getattr(message, field)
    if value not in allowed:
        raise InvalidArgument.for_field(field, f"must be one of {', '.join(allowed)}")
    return value


def _struct(value: Any) -> dict[str, Any]:
    out: dict[str, Any] = json_format.MessageToDict(value)
    return out


def _common(request: Any) -> dict[str, Any]:
    """The request fields chat and text completions share, ranges checked."""
    out: dict[str, Any] = {}
    n = _between(request, "n", 1, MAX_CHOICES)
    if n is not None:
        out["n"] = n
    if _present(request, "seed"):
        out["seed"] = request.seed
    if _present(request, "user"):
        out["user"] = request.user
    out["presence_penalty"] = _between(request, "presence_penalty", -2, 2)
    out["frequency_penalty"] = _between(request, "frequency_penalty", -2, 2)
    bias = []
    for token, value in sorted(request.logit_bias.items()):
        if not token.isdigit():
            raise InvalidArgument.for_field(f"logit_bias.{token}", "keys must be token ids")
        if not -100 <= value <= 100:
            raise InvalidArgument.for_field(f"logit_bias.{token}", "must be between -100 and 100")
        bias.append((token, value))
    out["logit_bias"] = tuple(bias)
    return out


def _part(part: Any, where: str, role: str) -> Part:
    if part.type == "text":
        if not _present(part, "text"):
            raise InvalidArgument.for_field(f"{where}.text", "is required for a text part")
        return TextPart(part.text)
    if part.type == "image_url":
        if role != "user":
            raise InvalidArgument.for_field(f"{where}.type", "images are allowed in user messages")
        url = part.image_url.url
        if not (url.startswith("https://") or DATA_URL.match(url)):
            raise InvalidArgument.for_field(
                f"{where}.image_url.url",
                "must be an https URL or a base64 data URL of a png, jpeg, gif or webp image",
            )
        detail = part.image_url.detail if _present(part.image_url, "detail") else None
        if detail is not None and detail not in ("auto", "low", "high"):
            raise InvalidArgument.for_field(
                f"{where}.image_url.detail", "must be one of auto, low, high"
            )
        return ImagePart(url, detail)
    raise InvalidArgument.for_field(f"{where}.type", "must be one of text, image_url")


def _message(m: Any, i: int) -> Message:
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
        _required(call.id, f"{at}.id")
        _required(call.function.name, f"{at}.function.name")
        calls.append(ToolCall(call.id, call.function.name, call.function.arguments))
    call_id = m.tool_call_id if _present(m, "tool_call_id") else None
    if m.role == "tool" and not call_id:
        raise InvalidArgument.for_field(f"{where}.tool_call_id", "is required on tool messages")
    if m.role != "tool" and call_id is not None:
        raise InvalidArgument.for_field(f"{where}.tool_call_id", "goes only on tool messages")
    name = m.name if _present(m, "name") else None
    return Message(m.role, text, parts, name, tuple(calls), call_id)


def _tools(request: Any) -> dict[str, Any]:
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
        parameters = _struct(f.parameters) if f.HasField("parameters") else None
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
            )
        )
    choice = _one_of(request, "tool_choice", TOOL_CHOICES)
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
    parallel = request.parallel_tool_calls if _present(request, "parallel_tool_calls") else None
    return dict(
        tools=tuple(tools), tool_choice=choice, forced_tool=forced, parallel_tool_calls=parallel
    )


def _response_format(request: Any) -> ResponseFormat | None:
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
    return ResponseFormat(
        "json_schema",
        spec.name,
        _struct(spec.schema) if spec.HasField("schema") else None,
        spec.description if spec.HasField("description") else None,
        spec.strict if spec.HasField("strict") else None,
    )


def _metadata(request: Any) -> tuple[tuple[str, str], ...]:
    if len(request.metadata) > MAX_METADATA_PAIRS:
        raise InvalidArgument.for_field("metadata", f"at most {MAX_METADATA_PAIRS} pairs")
    for key, value in request.metadata.items():
        if len(key) > 64:
            raise InvalidArgument.for_field(f"metadata.{key}", "keys are at most 64 characters")
        if len(value) > 512:
            raise InvalidArgument.for_field(f"metadata.{key}", "values are at most 512 characters")
    return tuple(sorted(request.metadata.items()))


def chat(request: Any) -> GenerationRequest:
    """Validates a Create/StreamChatCompletionRequest."""
    _required(request.model, "model")
    if not request.messages:
        raise InvalidArgument.for_field("messages", "at least one message is required")
    messages = tuple(_message(m, i) for i, m in enumerate(request.messages))
    sampling = _sampling(request, CHAT_TEMPERATURE)
    if _present(request, "max_completion_tokens"):
        sampling.update(
            _sampling(request, CHAT_TEMPERATURE, max_tokens_field="max_completion_tokens")
        )
    logprobs = request.logprobs if _present(request, "logprobs") else False
    top = _between(request, "top_logprobs", 0, MAX_TOP_LOGPROBS)
    if top is not None and not logprobs:
        raise InvalidArgument.for_field("top_logprobs", "needs logprobs set to true")
    return GenerationRequest(
        messages=messages,
        stop=_stop(request.stop),
        **sampling,
        **_common(request),
        logprobs=logprobs,
        top_logprobs=top,
        **_tools(request),
        response_format=_response_format(request),
        reasoning_effort=_one_of(request, "reasoning_effort", REASONING_EFFORTS),
        metadata=_metadata(request),
    )


def completion(request: Any) -> GenerationRequest:
    """Validates a Create/StreamCompletionRequest."""
    _required(request.model, "model")
    prompt = _required(request.prompt, "prompt")
    common = _common(request)
    top = _between(request, "logprobs", 0, MAX_COMPLETION_LOGPROBS)
    best_of = _between(request, "best_of", 1, MAX_BEST_OF)
    if best_of is not None:
        if best_of < common.get("n", 1):
            raise InvalidArgument.for_field("best_of", "must be at least n")
        if request.DESCRIPTOR.name.startswith("Stream") or request.stream:
            raise InvalidArgument.for_field("best_of", "cannot be used with streaming")
    return GenerationRequest(
        prompt=prompt,
        stop=_stop(request.stop),
        **_sampling(request, CHAT_TEMPERATURE),
        **common,
        logprobs=top is not None,
        top_logprobs=top,
        echo=request.echo if _present(request, "echo") else False,
        suffix=request.suffix if _present(request, "suffix") else None,
        best_of=best_of,
    )


def infer(request: Any) -> tuple[GenerationRequest, str | None]:
    """Validates an (Stream)InferRequest; returns it and the profile asked for, if any."""
    prompt = _required(request.prompt, "prompt")
    profile = request.profile if _present(request, "profile") else None
    if profile is not None and profile not in PROFILES:
        raise InvalidArgument.for_field("profile", f"must be one of {', '.join(PROFILES)}")
    return GenerationRequest(prompt=prompt, **_sampling(request, ROUTER_TEMPERATURE)), profile


def invocation(request: Any) -> tuple[GenerationRequest, bool]:
    """Validates an (Stream)InvokeDeploymentRequest in either format; returns it and
    whether it used the alternative (`inputs`) format."""
    _required(request.deployment_id, "deployment_id")
    has_prompt, has_inputs = _present(request, "prompt"), _present(request, "inputs")
    if has_prompt and has_inputs:
        raise InvalidArgument.for_field("inputs", "send either prompt or inputs, not both")
    if not has_prompt and not has_inputs:
        raise InvalidArgument.for_field(
            "prompt", "is required (or inputs, in the alternative format)"
        )
    if has_prompt:
        if _present(request, "parameters"):
            raise InvalidArgument.for_field("parameters", "goes with inputs, not with prompt")
        prompt = _required(request.prompt, "prompt")
        return GenerationRequest(prompt=prompt, **_sampling(request, ROUTER_TEMPERATURE)), False
    for field in ("max_tokens", "temperature", "top_p"):
        if _present(request, field):
            raise InvalidArgument.for_field(field, "with inputs, set it inside parameters")
    inputs = _required(request.inputs, "inputs")
    params = request.parameters
    sampling = _sampling(params, ROUTER_TEMPERATURE, "parameters.", "max_new_tokens")
    stop = _stop(params.stop, "parameters.stop")
    return GenerationRequest(prompt=inputs, stop=stop, **sampling), True


COMMENT_CHARS = 2000
LABELS = {"correct": 1.0, "incorrect": 0.0}


def feedback(request: Any) -> tuple[str, float, str]:
    """Checks a SubmitFeedbackRequest; returns the bare request id, the score and the
    label. A response id (`cmpl-...`, `chatcmpl-...`) names its request too."""
    request_id = request.request_id.strip()
    for prefix in ("chatcmpl-", "cmpl-"):
        request_id = request_id.removeprefix(prefix)
    if not request_id:
        raise InvalidArgument.for_field("request_id", "is required")
    has_score, has_label = request.HasField("score"), request.HasField("label")
    if has_score == has_label:
        raise InvalidArgument.for_field("score", "give exactly one of score and label")
    if has_label:
        if request.label not in LABELS:
            raise InvalidArgument.for_field("label", "must be `correct` or `incorrect`")
        score = LABELS[request.label]
    else:
        score = request.score
        if not 0 <= score <= 1:
            raise InvalidArgument.for_field("score", "must be between 0 and 1")
    if len(request.comment) > COMMENT_CHARS:
        raise InvalidArgument.for_field("comment", f"must be at most {COMMENT_CHARS} characters")
    return request_id, score, request.label if has_label else ""
