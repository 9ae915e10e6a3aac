from gateway.v1 import completion_pb2 as _completion_pb2
from gateway.v1 import streaming_pb2 as _streaming_pb2
from gateway.v1 import usage_pb2 as _usage_pb2
from google.api import annotations_pb2 as _annotations_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RouteDecision(_message.Message):
    __slots__ = ("profile", "model", "reason", "provider", "difficulty", "candidates", "skipped", "reason_codes", "decision_ms", "scorer", "threshold", "target_share", "recent_share")
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    DIFFICULTY_FIELD_NUMBER: _ClassVar[int]
    CANDIDATES_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    REASON_CODES_FIELD_NUMBER: _ClassVar[int]
    DECISION_MS_FIELD_NUMBER: _ClassVar[int]
    SCORER_FIELD_NUMBER: _ClassVar[int]
    THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    TARGET_SHARE_FIELD_NUMBER: _ClassVar[int]
    RECENT_SHARE_FIELD_NUMBER: _ClassVar[int]
    profile: str
    model: str
    reason: str
    provider: str
    difficulty: float
    candidates: _containers.RepeatedCompositeFieldContainer[RouteCandidate]
    skipped: _containers.RepeatedCompositeFieldContainer[SkippedModel]
    reason_codes: _containers.RepeatedScalarFieldContainer[str]
    decision_ms: float
    scorer: str
    threshold: float
    target_share: float
    recent_share: float
    def __init__(self, profile: _Optional[str] = ..., model: _Optional[str] = ..., reason: _Optional[str] = ..., provider: _Optional[str] = ..., difficulty: _Optional[float] = ..., candidates: _Optional[_Iterable[_Union[RouteCandidate, _Mapping]]] = ..., skipped: _Optional[_Iterable[_Union[SkippedModel, _Mapping]]] = ..., reason_codes: _Optional[_Iterable[str]] = ..., decision_ms: _Optional[float] = ..., scorer: _Optional[str] = ..., threshold: _Optional[float] = ..., target_share: _Optional[float] = ..., recent_share: _Optional[float] = ...) -> None: ...

class RouteCandidate(_message.Message):
    __slots__ = ("model", "estimated_quality", "estimated_cost_usd", "meets_bar", "predicted_success")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    ESTIMATED_QUALITY_FIELD_NUMBER: _ClassVar[int]
    ESTIMATED_COST_USD_FIELD_NUMBER: _ClassVar[int]
    MEETS_BAR_FIELD_NUMBER: _ClassVar[int]
    PREDICTED_SUCCESS_FIELD_NUMBER: _ClassVar[int]
    model: str
    estimated_quality: float
    estimated_cost_usd: float
    meets_bar: bool
    predicted_success: float
    def __init__(self, model: _Optional[str] = ..., estimated_quality: _Optional[float] = ..., estimated_cost_usd: _Optional[float] = ..., meets_bar: _Optional[bool] = ..., predicted_success: _Optional[float] = ...) -> None: ...

class SkippedModel(_message.Message):
    __slots__ = ("model", "reason", "detail")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    model: str
    reason: str
    detail: str
    def __init__(self, model: _Optional[str] = ..., reason: _Optional[str] = ..., detail: _Optional[str] = ...) -> None: ...

class InferRequest(_message.Message):
    __slots__ = ("prompt", "max_tokens", "temperature", "top_p", "stream", "profile", "stream_options", "tags")
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    TOP_P_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    STREAM_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    prompt: str
    max_tokens: int
    temperature: float
    top_p: float
    stream: bool
    profile: str
    stream_options: _streaming_pb2.StreamOptions
    tags: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, prompt: _Optional[str] = ..., max_tokens: _Optional[int] = ..., temperature: _Optional[float] = ..., top_p: _Optional[float] = ..., stream: _Optional[bool] = ..., profile: _Optional[str] = ..., stream_options: _Optional[_Union[_streaming_pb2.StreamOptions, _Mapping]] = ..., tags: _Optional[_Iterable[str]] = ...) -> None: ...

class InferResponse(_message.Message):
    __slots__ = ("id", "object", "created", "model", "choices", "usage", "route")
    ID_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    CHOICES_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    ROUTE_FIELD_NUMBER: _ClassVar[int]
    id: str
    object: str
    created: int
    model: str
    choices: _containers.RepeatedCompositeFieldContainer[_completion_pb2.CompletionChoice]
    usage: _usage_pb2.Usage
    route: RouteDecision
    def __init__(self, id: _Optional[str] = ..., object: _Optional[str] = ..., created: _Optional[int] = ..., model: _Optional[str] = ..., choices: _Optional[_Iterable[_Union[_completion_pb2.CompletionChoice, _Mapping]]] = ..., usage: _Optional[_Union[_usage_pb2.Usage, _Mapping]] = ..., route: _Optional[_Union[RouteDecision, _Mapping]] = ...) -> None: ...

class StreamInferRequest(_message.Message):
    __slots__ = ("prompt", "max_tokens", "temperature", "top_p", "stream", "profile", "stream_options", "tags")
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    TOP_P_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    STREAM_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    prompt: str
    max_tokens: int
    temperature: float
    top_p: float
    stream: bool
    profile: str
    stream_options: _streaming_pb2.StreamOptions
    tags: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, prompt: _Optional[str] = ..., max_tokens: _Optional[int] = ..., temperature: _Optional[float] = ..., top_p: _Optional[float] = ..., stream: _Optional[bool] = ..., profile: _Optional[str] = ..., stream_options: _Optional[_Union[_streaming_pb2.StreamOptions, _Mapping]] = ..., tags: _Optional[_Iterable[str]] = ...) -> None: ...

class StreamInferResponse(_message.Message):
    __slots__ = ("id", "object", "created", "model", "choices", "usage", "route")
    ID_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    CHOICES_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    ROUTE_FIELD_NUMBER: _ClassVar[int]
    id: str
    object: str
    created: int
    model: str
    choices: _containers.RepeatedCompositeFieldContainer[_completion_pb2.CompletionChoice]
    usage: _usage_pb2.Usage
    route: RouteDecision
    def __init__(self, id: _Optional[str] = ..., object: _Optional[str] = ..., created: _Optional[int] = ..., model: _Optional[str] = ..., choices: _Optional[_Iterable[_Union[_completion_pb2.CompletionChoice, _Mapping]]] = ..., usage: _Optional[_Union[_usage_pb2.Usage, _Mapping]] = ..., route: _Optional[_Union[RouteDecision, _Mapping]] = ...) -> None: ...
