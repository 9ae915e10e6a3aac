"""Request validation: each interface's ranges, then one GenerationRequest.

Every failure is InvalidArgument naming the offending field.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gateway.v1 import deployment_service_pb2 as deployment_pb
from gateway.v1 import embedding_service_pb2 as embedding_pb
from gateway.v1 import feedback_service_pb2 as feedback_pb
from gateway.v1 import router_service_pb2 as router_pb
from google.protobuf import struct_pb2
from google.protobuf.message import Message

from server.application.dialects.chat import request as fields
from server.application.dialects.chat.request import ChatRequest, CompletionRequest
from server.base.config import PROFILES
from server.base.embedding import EmbeddingRequest, Input
from server.base.errors import InvalidArgument
from server.base.generation import GenerationRequest, Prompt

InferRequest = router_pb.InferRequest | router_pb.StreamInferRequest
InvokeRequest = deployment_pb.InvokeDeploymentRequest | deployment_pb.StreamInvokeDeploymentRequest

MAX_STOP_SEQUENCES = 4
MAX_TOKENS_CEILING = 1_000_000
# Temperature ranges per interface (SPEC 8): 0..2 on interface A, 0..1 on interface B.
CHAT_TEMPERATURE = 2.0
ROUTER_TEMPERATURE = 1.0


def _present(message: Message, field: str) -> bool:
    return message.HasField(field)


def _sampling(
    message: Message, max_temperature: float, prefix: str = "", max_tokens_field: str = "max_tokens"
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


def _stop(stop: Sequence[str], field: str = "stop") -> tuple[str, ...]:
    if len(stop) > MAX_STOP_SEQUENCES:
        raise InvalidArgument.for_field(field, f"at most {MAX_STOP_SEQUENCES} sequences")
    if any(not s for s in stop):
        raise InvalidArgument.for_field(field, "sequences must not be empty")
    return tuple(stop)


def _required(value: str, field: str) -> str:
    if not value:
        raise InvalidArgument.for_field(field, "is required")
    return value


def chat(request: ChatRequest) -> GenerationRequest:
    """Validates a Create/StreamChatCompletionRequest."""
    _required(request.model, "model")
    if not request.messages:
        raise InvalidArgument.for_field("messages", "at least one message is required")
    messages = tuple(fields.message(m, i) for i, m in enumerate(request.messages))
    sampling = _sampling(request, CHAT_TEMPERATURE)
    if not fields.extras(request):
        return GenerationRequest(messages=messages, stop=_stop(request.stop), **sampling)
    if _present(request, "max_completion_tokens"):
        sampling.update(
            _sampling(request, CHAT_TEMPERATURE, max_tokens_field="max_completion_tokens")
        )
    logprobs = request.logprobs if _present(request, "logprobs") else False
    top = fields.between(request, "top_logprobs", 0, fields.MAX_TOP_LOGPROBS)
    if top is not None and not logprobs:
        raise InvalidArgument.for_field("top_logprobs", "needs logprobs set to true")
    return GenerationRequest(
        messages=messages,
        stop=_stop(request.stop),
        **sampling,
        **fields.common(request),
        logprobs=logprobs,
        top_logprobs=top,
        **fields.tools(request),
        response_format=fields.response_format(request),
        reasoning_effort=fields.one_of(request, "reasoning_effort", fields.REASONING_EFFORTS),
        metadata=fields.metadata(request),
        **fields.upstream_hints(request),
    )


def completion(request: CompletionRequest) -> GenerationRequest:
    """Validates a Create/StreamCompletionRequest."""
    _required(request.model, "model")
    prompt, prompts = _completion_prompts(request)
    shared = fields.common(request)
    if len(prompts) * shared.get("n", 1) > MAX_COMPLETION_CHOICES:
        raise InvalidArgument.for_field(
            "prompt", f"prompts times n must be at most {MAX_COMPLETION_CHOICES}"
        )
    echo = request.echo if _present(request, "echo") else False
    if echo and any(isinstance(p, tuple) for p in prompts):
        raise InvalidArgument.for_field("echo", "cannot repeat a prompt given as token ids")
    top = fields.between(request, "logprobs", 0, fields.MAX_COMPLETION_LOGPROBS)
    best_of = fields.between(request, "best_of", 1, fields.MAX_BEST_OF)
    if best_of is not None:
        if best_of < shared.get("n", 1):
            raise InvalidArgument.for_field("best_of", "must be at least n")
        if request.DESCRIPTOR.name.startswith("Stream") or request.stream:
            raise InvalidArgument.for_field("best_of", "cannot be used with streaming")
    return GenerationRequest(
        prompt=prompt,
        prompts=prompts,
        stop=_stop(request.stop),
        **_sampling(request, CHAT_TEMPERATURE),
        **shared,
        logprobs=top is not None,
        top_logprobs=top,
        echo=echo,
        suffix=request.suffix if _present(request, "suffix") else None,
        best_of=best_of,
    )


# The most choices one text completion may ask for: prompts times n.
MAX_COMPLETION_CHOICES = 128


def _completion_prompts(request: CompletionRequest) -> tuple[str, tuple[Prompt, ...]]:
    """The prompt's text and, for OpenAI's array forms, every prompt: strings, one
    token-id array, or token-id arrays. One string in an array is a plain prompt."""
    if not request.prompts:
        return _required(request.prompt, "prompt"), ()
    if request.prompt:
        raise InvalidArgument.for_field("prompt", "send a string or an array, not both")
    items = request.prompts
    kinds = {item.WhichOneof("kind") for item in items}
    prompts: tuple[Prompt, ...]
    if kinds == {"string_value"}:
        texts = tuple(_text(item.string_value, f"prompt[{i}]") for i, item in enumerate(items))
        if len(texts) == 1:
            return texts[0], ()
        prompts = texts
    elif kinds == {"number_value"}:
        prompts = (_token_ids(items, "prompt"),)
    elif kinds == {"list_value"}:
        prompts = tuple(
            _token_ids(item.list_value.values, f"prompt[{i}]") for i, item in enumerate(items)
        )
    else:
        raise InvalidArgument.for_field(
            "prompt",
            "must be a string, an array of strings, an array of token ids, "
            "or an array of token-id arrays",
        )
    return "\n".join(p for p in prompts if isinstance(p, str)), prompts


def infer(request: InferRequest) -> tuple[GenerationRequest, str | None]:
    """Validates an (Stream)InferRequest; returns it and the profile asked for, if any."""
    prompt = _required(request.prompt, "prompt")
    profile = request.profile if _present(request, "profile") else None
    if profile is not None and profile not in PROFILES:
        raise InvalidArgument.for_field("profile", f"must be one of {', '.join(PROFILES)}")
    return GenerationRequest(prompt=prompt, **_sampling(request, ROUTER_TEMPERATURE)), profile


def invocation(request: InvokeRequest) -> tuple[GenerationRequest, bool]:
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


def feedback(request: feedback_pb.SubmitFeedbackRequest) -> tuple[str, float, str]:
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


ENCODINGS = ("float", "base64")
# OpenAI's limit on inputs per request.
MAX_INPUTS = 2048
MAX_DIMENSIONS = 65_536


def embeddings(
    request: embedding_pb.CreateEmbeddingsRequest,
) -> tuple[EmbeddingRequest, str]:
    """Validates a CreateEmbeddingsRequest; returns it and the encoding format asked."""
    if not request.model:
        raise InvalidArgument.for_field("model", "is required")
    encoding = request.encoding_format if request.HasField("encoding_format") else "float"
    if encoding not in ENCODINGS:
        raise InvalidArgument.for_field("encoding_format", "must be float or base64")
    dimensions = request.dimensions if request.HasField("dimensions") else None
    if dimensions is not None and not 1 <= dimensions <= MAX_DIMENSIONS:
        raise InvalidArgument.for_field("dimensions", f"must be between 1 and {MAX_DIMENSIONS}")
    user = request.user if request.HasField("user") else None
    inputs = _inputs(request.input if request.HasField("input") else None)
    return EmbeddingRequest(inputs, dimensions, user), encoding


def _inputs(value: struct_pb2.Value | None) -> tuple[Input, ...]:
    """A Value holding a string, strings, token ids, or token-id lists."""
    kind = value.WhichOneof("kind") if value is not None else None
    if value is None or kind is None or kind == "null_value":
        raise InvalidArgument.for_field("input", "is required")
    if kind == "string_value":
        return (_text(value.string_value, "input"),)
    if kind != "list_value":
        raise InvalidArgument.for_field(
            "input", "must be a string, an array of strings, or an array of token ids"
        )
    items = value.list_value.values
    if not items:
        raise InvalidArgument.for_field("input", "must not be empty")
    kinds = {item.WhichOneof("kind") for item in items}
    if kinds == {"number_value"}:
        return (_token_ids(items, "input"),)
    if len(items) > MAX_INPUTS:
        raise InvalidArgument.for_field("input", f"at most {MAX_INPUTS} inputs")
    if kinds == {"string_value"}:
        return tuple(_text(item.string_value, f"input[{i}]") for i, item in enumerate(items))
    if kinds == {"list_value"}:
        return tuple(
            _token_ids(item.list_value.values, f"input[{i}]") for i, item in enumerate(items)
        )
    raise InvalidArgument.for_field(
        "input", "must be all strings or all token-id arrays, not a mix"
    )


def _text(text: str, field: str) -> str:
    if not text:
        raise InvalidArgument.for_field(field, "must not be empty")
    return text


def _token_ids(values: Sequence[struct_pb2.Value], field: str) -> tuple[int, ...]:
    if not values:
        raise InvalidArgument.for_field(field, "must not be empty")
    ids = []
    for value in values:
        number = value.number_value if value.WhichOneof("kind") == "number_value" else -1.0
        if number < 0 or not number.is_integer() or number >= 2**31:
            raise InvalidArgument.for_field(field, "token ids must be non-negative integers")
        ids.append(int(number))
    return tuple(ids)
