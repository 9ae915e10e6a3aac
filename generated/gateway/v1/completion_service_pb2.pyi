from gateway.v1 import completion_pb2 as _completion_pb2
from gateway.v1 import json_mapping_pb2 as _json_mapping_pb2
from gateway.v1 import rest_pb2 as _rest_pb2
from gateway.v1 import streaming_pb2 as _streaming_pb2
from gateway.v1 import usage_pb2 as _usage_pb2
from google.api import annotations_pb2 as _annotations_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CreateCompletionRequest(_message.Message):
    __slots__ = ("model", "prompt", "prompts", "max_tokens", "temperature", "top_p", "stream", "stop", "stream_options", "n", "seed", "user", "presence_penalty", "frequency_penalty", "logit_bias", "logprobs", "echo", "suffix", "best_of")
    class LogitBiasEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    MODEL_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    PROMPTS_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    TOP_P_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    STOP_FIELD_NUMBER: _ClassVar[int]
    STREAM_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    N_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    PRESENCE_PENALTY_FIELD_NUMBER: _ClassVar[int]
    FREQUENCY_PENALTY_FIELD_NUMBER: _ClassVar[int]
    LOGIT_BIAS_FIELD_NUMBER: _ClassVar[int]
    LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    ECHO_FIELD_NUMBER: _ClassVar[int]
    SUFFIX_FIELD_NUMBER: _ClassVar[int]
    BEST_OF_FIELD_NUMBER: _ClassVar[int]
    model: str
    prompt: str
    prompts: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Value]
    max_tokens: int
    temperature: float
    top_p: float
    stream: bool
    stop: _containers.RepeatedScalarFieldContainer[str]
    stream_options: _streaming_pb2.StreamOptions
    n: int
    seed: int
    user: str
    presence_penalty: float
    frequency_penalty: float
    logit_bias: _containers.ScalarMap[str, int]
    logprobs: int
    echo: bool
    suffix: str
    best_of: int
    def __init__(self, model: _Optional[str] = ..., prompt: _Optional[str] = ..., prompts: _Optional[_Iterable[_Union[_struct_pb2.Value, _Mapping]]] = ..., max_tokens: _Optional[int] = ..., temperature: _Optional[float] = ..., top_p: _Optional[float] = ..., stream: _Optional[bool] = ..., stop: _Optional[_Iterable[str]] = ..., stream_options: _Optional[_Union[_streaming_pb2.StreamOptions, _Mapping]] = ..., n: _Optional[int] = ..., seed: _Optional[int] = ..., user: _Optional[str] = ..., presence_penalty: _Optional[float] = ..., frequency_penalty: _Optional[float] = ..., logit_bias: _Optional[_Mapping[str, int]] = ..., logprobs: _Optional[int] = ..., echo: _Optional[bool] = ..., suffix: _Optional[str] = ..., best_of: _Optional[int] = ...) -> None: ...

class CreateCompletionResponse(_message.Message):
    __slots__ = ("id", "object", "created", "model", "choices", "usage", "system_fingerprint")
    ID_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    CHOICES_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    id: str
    object: str
    created: int
    model: str
    choices: _containers.RepeatedCompositeFieldContainer[_completion_pb2.CompletionChoice]
    usage: _usage_pb2.Usage
    system_fingerprint: str
    def __init__(self, id: _Optional[str] = ..., object: _Optional[str] = ..., created: _Optional[int] = ..., model: _Optional[str] = ..., choices: _Optional[_Iterable[_Union[_completion_pb2.CompletionChoice, _Mapping]]] = ..., usage: _Optional[_Union[_usage_pb2.Usage, _Mapping]] = ..., system_fingerprint: _Optional[str] = ...) -> None: ...

class StreamCompletionRequest(_message.Message):
    __slots__ = ("model", "prompt", "prompts", "max_tokens", "temperature", "top_p", "stream", "stop", "stream_options", "n", "seed", "user", "presence_penalty", "frequency_penalty", "logit_bias", "logprobs", "echo", "suffix", "best_of")
    class LogitBiasEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    MODEL_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    PROMPTS_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    TOP_P_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    STOP_FIELD_NUMBER: _ClassVar[int]
    STREAM_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    N_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    PRESENCE_PENALTY_FIELD_NUMBER: _ClassVar[int]
    FREQUENCY_PENALTY_FIELD_NUMBER: _ClassVar[int]
    LOGIT_BIAS_FIELD_NUMBER: _ClassVar[int]
    LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    ECHO_FIELD_NUMBER: _ClassVar[int]
    SUFFIX_FIELD_NUMBER: _ClassVar[int]
    BEST_OF_FIELD_NUMBER: _ClassVar[int]
    model: str
    prompt: str
    prompts: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Value]
    max_tokens: int
    temperature: float
    top_p: float
    stream: bool
    stop: _containers.RepeatedScalarFieldContainer[str]
    stream_options: _streaming_pb2.StreamOptions
    n: int
    seed: int
    user: str
    presence_penalty: float
    frequency_penalty: float
    logit_bias: _containers.ScalarMap[str, int]
    logprobs: int
    echo: bool
    suffix: str
    best_of: int
    def __init__(self, model: _Optional[str] = ..., prompt: _Optional[str] = ..., prompts: _Optional[_Iterable[_Union[_struct_pb2.Value, _Mapping]]] = ..., max_tokens: _Optional[int] = ..., temperature: _Optional[float] = ..., top_p: _Optional[float] = ..., stream: _Optional[bool] = ..., stop: _Optional[_Iterable[str]] = ..., stream_options: _Optional[_Union[_streaming_pb2.StreamOptions, _Mapping]] = ..., n: _Optional[int] = ..., seed: _Optional[int] = ..., user: _Optional[str] = ..., presence_penalty: _Optional[float] = ..., frequency_penalty: _Optional[float] = ..., logit_bias: _Optional[_Mapping[str, int]] = ..., logprobs: _Optional[int] = ..., echo: _Optional[bool] = ..., suffix: _Optional[str] = ..., best_of: _Optional[int] = ...) -> None: ...

class StreamCompletionResponse(_message.Message):
    __slots__ = ("id", "object", "created", "model", "choices", "usage", "system_fingerprint")
    ID_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    CHOICES_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    id: str
    object: str
    created: int
    model: str
    choices: _containers.RepeatedCompositeFieldContainer[_completion_pb2.CompletionChoice]
    usage: _usage_pb2.Usage
    system_fingerprint: str
    def __init__(self, id: _Optional[str] = ..., object: _Optional[str] = ..., created: _Optional[int] = ..., model: _Optional[str] = ..., choices: _Optional[_Iterable[_Union[_completion_pb2.CompletionChoice, _Mapping]]] = ..., usage: _Optional[_Union[_usage_pb2.Usage, _Mapping]] = ..., system_fingerprint: _Optional[str] = ...) -> None: ...
