"""Validation of the requests that generate nothing: embeddings and feedback.

Every failure is InvalidArgument naming the offending field.
"""

from __future__ import annotations

from gateway.v1 import embedding_service_pb2 as embedding_pb
from gateway.v1 import feedback_service_pb2 as feedback_pb
from google.protobuf import struct_pb2

from server.application.pipeline.fields import non_empty, token_ids
from server.base.embedding import EmbeddingRequest, Input
from server.base.errors import InvalidArgument

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
        return (non_empty(value.string_value, "input"),)
    if kind != "list_value":
        raise InvalidArgument.for_field(
            "input", "must be a string, an array of strings, or an array of token ids"
        )
    items = value.list_value.values
    if not items:
        raise InvalidArgument.for_field("input", "must not be empty")
    kinds = {item.WhichOneof("kind") for item in items}
    if kinds == {"number_value"}:
        return (token_ids(items, "input"),)
    if len(items) > MAX_INPUTS:
        raise InvalidArgument.for_field("input", f"at most {MAX_INPUTS} inputs")
    if kinds == {"string_value"}:
        return tuple(non_empty(item.string_value, f"input[{i}]") for i, item in enumerate(items))
    if kinds == {"list_value"}:
        return tuple(
            token_ids(item.list_value.values, f"input[{i}]") for i, item in enumerate(items)
        )
    raise InvalidArgument.for_field(
        "input", "must be all strings or all token-id arrays, not a mix"
    )
