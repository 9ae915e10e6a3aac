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
    __slots__ = ("profile", "model", "reason")
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    profile: str
    model: str
    reason: str
    def __init__(self, profile: _Optional[str] = ..., model: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class InferRequest(_message.Message):
    __slots__ = ("prompt", "max_tokens", "temperature", "top_p", "stream", "profile", "stream_options")
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    TOP_P_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    STREAM_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    prompt: str
    max_tokens: int
    temperature: float
    top_p: float
    stream: bool
    profile: str
    stream_options: _streaming_pb2.StreamOptions
    def __init__(self, prompt: _Optional[str] = ..., max_tokens: _Optional[int] = ..., temperature: _Optional[float] = ..., top_p: _Optional[float] = ..., stream: _Optional[bool] = ..., profile: _Optional[str] = ..., stream_options: _Optional[_Union[_streaming_pb2.StreamOptions, _Mapping]] = ...) -> None: ...

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
    __slots__ = ("prompt", "max_tokens", "temperature", "top_p", "stream", "profile", "stream_options")
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    TOP_P_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    STREAM_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    prompt: str
    max_tokens: int
    temperature: float
    top_p: float
    stream: bool
    profile: str
    stream_options: _streaming_pb2.StreamOptions
    def __init__(self, prompt: _Optional[str] = ..., max_tokens: _Optional[int] = ..., temperature: _Optional[float] = ..., top_p: _Optional[float] = ..., stream: _Optional[bool] = ..., profile: _Optional[str] = ..., stream_options: _Optional[_Union[_streaming_pb2.StreamOptions, _Mapping]] = ...) -> None: ...

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
