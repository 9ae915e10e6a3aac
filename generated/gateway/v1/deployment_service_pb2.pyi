from gateway.v1 import completion_pb2 as _completion_pb2
from gateway.v1 import sse_pb2 as _sse_pb2
from gateway.v1 import streaming_pb2 as _streaming_pb2
from gateway.v1 import usage_pb2 as _usage_pb2
from google.api import annotations_pb2 as _annotations_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Deployment(_message.Message):
    __slots__ = ("id", "object", "model", "description")
    ID_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    id: str
    object: str
    model: str
    description: str
    def __init__(self, id: _Optional[str] = ..., object: _Optional[str] = ..., model: _Optional[str] = ..., description: _Optional[str] = ...) -> None: ...

class GenerationParameters(_message.Message):
    __slots__ = ("max_new_tokens", "temperature", "top_p", "stop")
    MAX_NEW_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    TOP_P_FIELD_NUMBER: _ClassVar[int]
    STOP_FIELD_NUMBER: _ClassVar[int]
    max_new_tokens: int
    temperature: float
    top_p: float
    stop: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, max_new_tokens: _Optional[int] = ..., temperature: _Optional[float] = ..., top_p: _Optional[float] = ..., stop: _Optional[_Iterable[str]] = ...) -> None: ...

class GenerationDetails(_message.Message):
    __slots__ = ("finish_reason", "generated_tokens")
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    GENERATED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    finish_reason: str
    generated_tokens: int
    def __init__(self, finish_reason: _Optional[str] = ..., generated_tokens: _Optional[int] = ...) -> None: ...

class GeneratedToken(_message.Message):
    __slots__ = ("id", "text", "special")
    ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    SPECIAL_FIELD_NUMBER: _ClassVar[int]
    id: int
    text: str
    special: bool
    def __init__(self, id: _Optional[int] = ..., text: _Optional[str] = ..., special: _Optional[bool] = ...) -> None: ...

class ListDeploymentsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListDeploymentsResponse(_message.Message):
    __slots__ = ("object", "data")
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    object: str
    data: _containers.RepeatedCompositeFieldContainer[Deployment]
    def __init__(self, object: _Optional[str] = ..., data: _Optional[_Iterable[_Union[Deployment, _Mapping]]] = ...) -> None: ...

class InvokeDeploymentRequest(_message.Message):
    __slots__ = ("deployment_id", "prompt", "max_tokens", "temperature", "top_p", "stream", "inputs", "parameters", "stream_options")
    DEPLOYMENT_ID_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    TOP_P_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    STREAM_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    deployment_id: str
    prompt: str
    max_tokens: int
    temperature: float
    top_p: float
    stream: bool
    inputs: str
    parameters: GenerationParameters
    stream_options: _streaming_pb2.StreamOptions
    def __init__(self, deployment_id: _Optional[str] = ..., prompt: _Optional[str] = ..., max_tokens: _Optional[int] = ..., temperature: _Optional[float] = ..., top_p: _Optional[float] = ..., stream: _Optional[bool] = ..., inputs: _Optional[str] = ..., parameters: _Optional[_Union[GenerationParameters, _Mapping]] = ..., stream_options: _Optional[_Union[_streaming_pb2.StreamOptions, _Mapping]] = ...) -> None: ...

class InvokeDeploymentResponse(_message.Message):
    __slots__ = ("id", "object", "created", "model", "deployment_id", "choices", "usage", "generated_text", "details")
    ID_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    DEPLOYMENT_ID_FIELD_NUMBER: _ClassVar[int]
    CHOICES_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    GENERATED_TEXT_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    id: str
    object: str
    created: int
    model: str
    deployment_id: str
    choices: _containers.RepeatedCompositeFieldContainer[_completion_pb2.CompletionChoice]
    usage: _usage_pb2.Usage
    generated_text: str
    details: GenerationDetails
    def __init__(self, id: _Optional[str] = ..., object: _Optional[str] = ..., created: _Optional[int] = ..., model: _Optional[str] = ..., deployment_id: _Optional[str] = ..., choices: _Optional[_Iterable[_Union[_completion_pb2.CompletionChoice, _Mapping]]] = ..., usage: _Optional[_Union[_usage_pb2.Usage, _Mapping]] = ..., generated_text: _Optional[str] = ..., details: _Optional[_Union[GenerationDetails, _Mapping]] = ...) -> None: ...

class StreamInvokeDeploymentRequest(_message.Message):
    __slots__ = ("deployment_id", "prompt", "max_tokens", "temperature", "top_p", "stream", "inputs", "parameters", "stream_options")
    DEPLOYMENT_ID_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    TOP_P_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    STREAM_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    deployment_id: str
    prompt: str
    max_tokens: int
    temperature: float
    top_p: float
    stream: bool
    inputs: str
    parameters: GenerationParameters
    stream_options: _streaming_pb2.StreamOptions
    def __init__(self, deployment_id: _Optional[str] = ..., prompt: _Optional[str] = ..., max_tokens: _Optional[int] = ..., temperature: _Optional[float] = ..., top_p: _Optional[float] = ..., stream: _Optional[bool] = ..., inputs: _Optional[str] = ..., parameters: _Optional[_Union[GenerationParameters, _Mapping]] = ..., stream_options: _Optional[_Union[_streaming_pb2.StreamOptions, _Mapping]] = ...) -> None: ...

class StreamInvokeDeploymentResponse(_message.Message):
    __slots__ = ("id", "object", "created", "model", "deployment_id", "choices", "usage", "token", "generated_text", "details")
    ID_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    DEPLOYMENT_ID_FIELD_NUMBER: _ClassVar[int]
    CHOICES_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    GENERATED_TEXT_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    id: str
    object: str
    created: int
    model: str
    deployment_id: str
    choices: _containers.RepeatedCompositeFieldContainer[_completion_pb2.CompletionChoice]
    usage: _usage_pb2.Usage
    token: GeneratedToken
    generated_text: str
    details: GenerationDetails
    def __init__(self, id: _Optional[str] = ..., object: _Optional[str] = ..., created: _Optional[int] = ..., model: _Optional[str] = ..., deployment_id: _Optional[str] = ..., choices: _Optional[_Iterable[_Union[_completion_pb2.CompletionChoice, _Mapping]]] = ..., usage: _Optional[_Union[_usage_pb2.Usage, _Mapping]] = ..., token: _Optional[_Union[GeneratedToken, _Mapping]] = ..., generated_text: _Optional[str] = ..., details: _Optional[_Union[GenerationDetails, _Mapping]] = ...) -> None: ...

class TextGenerationDetails(_message.Message):
    __slots__ = ("finish_reason", "generated_tokens", "prefill", "tokens")
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    GENERATED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    PREFILL_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    finish_reason: str
    generated_tokens: int
    prefill: _containers.RepeatedCompositeFieldContainer[GeneratedToken]
    tokens: _containers.RepeatedCompositeFieldContainer[GeneratedToken]
    def __init__(self, finish_reason: _Optional[str] = ..., generated_tokens: _Optional[int] = ..., prefill: _Optional[_Iterable[_Union[GeneratedToken, _Mapping]]] = ..., tokens: _Optional[_Iterable[_Union[GeneratedToken, _Mapping]]] = ...) -> None: ...

class GeneratedText(_message.Message):
    __slots__ = ("generated_text", "details")
    GENERATED_TEXT_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    generated_text: str
    details: TextGenerationDetails
    def __init__(self, generated_text: _Optional[str] = ..., details: _Optional[_Union[TextGenerationDetails, _Mapping]] = ...) -> None: ...

class GenerateTextRequest(_message.Message):
    __slots__ = ("deployment_id", "inputs", "parameters", "stream")
    DEPLOYMENT_ID_FIELD_NUMBER: _ClassVar[int]
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    deployment_id: str
    inputs: str
    parameters: GenerationParameters
    stream: bool
    def __init__(self, deployment_id: _Optional[str] = ..., inputs: _Optional[str] = ..., parameters: _Optional[_Union[GenerationParameters, _Mapping]] = ..., stream: _Optional[bool] = ...) -> None: ...

class GenerateTextResponse(_message.Message):
    __slots__ = ("generations",)
    GENERATIONS_FIELD_NUMBER: _ClassVar[int]
    generations: _containers.RepeatedCompositeFieldContainer[GeneratedText]
    def __init__(self, generations: _Optional[_Iterable[_Union[GeneratedText, _Mapping]]] = ...) -> None: ...

class StreamGenerateTextRequest(_message.Message):
    __slots__ = ("deployment_id", "inputs", "parameters", "stream")
    DEPLOYMENT_ID_FIELD_NUMBER: _ClassVar[int]
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    deployment_id: str
    inputs: str
    parameters: GenerationParameters
    stream: bool
    def __init__(self, deployment_id: _Optional[str] = ..., inputs: _Optional[str] = ..., parameters: _Optional[_Union[GenerationParameters, _Mapping]] = ..., stream: _Optional[bool] = ...) -> None: ...

class StreamGenerateTextResponse(_message.Message):
    __slots__ = ("index", "token", "generated_text", "details")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    GENERATED_TEXT_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    index: int
    token: GeneratedToken
    generated_text: str
    details: GenerationDetails
    def __init__(self, index: _Optional[int] = ..., token: _Optional[_Union[GeneratedToken, _Mapping]] = ..., generated_text: _Optional[str] = ..., details: _Optional[_Union[GenerationDetails, _Mapping]] = ...) -> None: ...
