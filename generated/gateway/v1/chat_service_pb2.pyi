from gateway.v1 import chat_pb2 as _chat_pb2
from gateway.v1 import json_mapping_pb2 as _json_mapping_pb2
from gateway.v1 import rest_pb2 as _rest_pb2
from gateway.v1 import streaming_pb2 as _streaming_pb2
from gateway.v1 import usage_pb2 as _usage_pb2
from google.api import annotations_pb2 as _annotations_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ChatMessage(_message.Message):
    __slots__ = ("role", "content", "content_parts", "name", "tool_calls", "tool_call_id", "refusal", "annotations")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    CONTENT_PARTS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    REFUSAL_FIELD_NUMBER: _ClassVar[int]
    ANNOTATIONS_FIELD_NUMBER: _ClassVar[int]
    role: str
    content: str
    content_parts: _containers.RepeatedCompositeFieldContainer[_chat_pb2.ContentPart]
    name: str
    tool_calls: _containers.RepeatedCompositeFieldContainer[_chat_pb2.ToolCall]
    tool_call_id: str
    refusal: str
    annotations: _containers.RepeatedCompositeFieldContainer[Annotation]
    def __init__(self, role: _Optional[str] = ..., content: _Optional[str] = ..., content_parts: _Optional[_Iterable[_Union[_chat_pb2.ContentPart, _Mapping]]] = ..., name: _Optional[str] = ..., tool_calls: _Optional[_Iterable[_Union[_chat_pb2.ToolCall, _Mapping]]] = ..., tool_call_id: _Optional[str] = ..., refusal: _Optional[str] = ..., annotations: _Optional[_Iterable[_Union[Annotation, _Mapping]]] = ...) -> None: ...

class Annotation(_message.Message):
    __slots__ = ("type", "url_citation")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    URL_CITATION_FIELD_NUMBER: _ClassVar[int]
    type: str
    url_citation: UrlCitation
    def __init__(self, type: _Optional[str] = ..., url_citation: _Optional[_Union[UrlCitation, _Mapping]] = ...) -> None: ...

class UrlCitation(_message.Message):
    __slots__ = ("start_index", "end_index", "url", "title")
    START_INDEX_FIELD_NUMBER: _ClassVar[int]
    END_INDEX_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    start_index: int
    end_index: int
    url: str
    title: str
    def __init__(self, start_index: _Optional[int] = ..., end_index: _Optional[int] = ..., url: _Optional[str] = ..., title: _Optional[str] = ...) -> None: ...

class ChatChoice(_message.Message):
    __slots__ = ("index", "message", "finish_reason", "logprobs")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    index: int
    message: ChatMessage
    finish_reason: str
    logprobs: _chat_pb2.ChatLogprobs
    def __init__(self, index: _Optional[int] = ..., message: _Optional[_Union[ChatMessage, _Mapping]] = ..., finish_reason: _Optional[str] = ..., logprobs: _Optional[_Union[_chat_pb2.ChatLogprobs, _Mapping]] = ...) -> None: ...

class ChatDelta(_message.Message):
    __slots__ = ("role", "content", "tool_calls")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    role: str
    content: str
    tool_calls: _containers.RepeatedCompositeFieldContainer[_chat_pb2.ToolCallDelta]
    def __init__(self, role: _Optional[str] = ..., content: _Optional[str] = ..., tool_calls: _Optional[_Iterable[_Union[_chat_pb2.ToolCallDelta, _Mapping]]] = ...) -> None: ...

class ChatChunkChoice(_message.Message):
    __slots__ = ("index", "delta", "finish_reason", "logprobs")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    index: int
    delta: ChatDelta
    finish_reason: str
    logprobs: _chat_pb2.ChatLogprobs
    def __init__(self, index: _Optional[int] = ..., delta: _Optional[_Union[ChatDelta, _Mapping]] = ..., finish_reason: _Optional[str] = ..., logprobs: _Optional[_Union[_chat_pb2.ChatLogprobs, _Mapping]] = ...) -> None: ...

class CreateChatCompletionRequest(_message.Message):
    __slots__ = ("model", "messages", "max_tokens", "temperature", "top_p", "stream", "stop", "stream_options", "max_completion_tokens", "n", "seed", "user", "presence_penalty", "frequency_penalty", "logit_bias", "logprobs", "top_logprobs", "tools", "tool_choice", "tool_choice_function", "parallel_tool_calls", "response_format", "reasoning_effort", "metadata", "store", "service_tier", "prompt_cache_key", "safety_identifier", "prompt_cache_retention")
    class LogitBiasEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    MODEL_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    TOP_P_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    STOP_FIELD_NUMBER: _ClassVar[int]
    STREAM_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    MAX_COMPLETION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    N_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    PRESENCE_PENALTY_FIELD_NUMBER: _ClassVar[int]
    FREQUENCY_PENALTY_FIELD_NUMBER: _ClassVar[int]
    LOGIT_BIAS_FIELD_NUMBER: _ClassVar[int]
    LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    TOP_LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CHOICE_FIELD_NUMBER: _ClassVar[int]
    TOOL_CHOICE_FUNCTION_FIELD_NUMBER: _ClassVar[int]
    PARALLEL_TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FORMAT_FIELD_NUMBER: _ClassVar[int]
    REASONING_EFFORT_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    STORE_FIELD_NUMBER: _ClassVar[int]
    SERVICE_TIER_FIELD_NUMBER: _ClassVar[int]
    PROMPT_CACHE_KEY_FIELD_NUMBER: _ClassVar[int]
    SAFETY_IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
    PROMPT_CACHE_RETENTION_FIELD_NUMBER: _ClassVar[int]
    model: str
    messages: _containers.RepeatedCompositeFieldContainer[ChatMessage]
    max_tokens: int
    temperature: float
    top_p: float
    stream: bool
    stop: _containers.RepeatedScalarFieldContainer[str]
    stream_options: _streaming_pb2.StreamOptions
    max_completion_tokens: int
    n: int
    seed: int
    user: str
    presence_penalty: float
    frequency_penalty: float
    logit_bias: _containers.ScalarMap[str, int]
    logprobs: bool
    top_logprobs: int
    tools: _containers.RepeatedCompositeFieldContainer[_chat_pb2.Tool]
    tool_choice: str
    tool_choice_function: _chat_pb2.NamedToolChoice
    parallel_tool_calls: bool
    response_format: _chat_pb2.ResponseFormat
    reasoning_effort: str
    metadata: _containers.ScalarMap[str, str]
    store: bool
    service_tier: str
    prompt_cache_key: str
    safety_identifier: str
    prompt_cache_retention: str
    def __init__(self, model: _Optional[str] = ..., messages: _Optional[_Iterable[_Union[ChatMessage, _Mapping]]] = ..., max_tokens: _Optional[int] = ..., temperature: _Optional[float] = ..., top_p: _Optional[float] = ..., stream: _Optional[bool] = ..., stop: _Optional[_Iterable[str]] = ..., stream_options: _Optional[_Union[_streaming_pb2.StreamOptions, _Mapping]] = ..., max_completion_tokens: _Optional[int] = ..., n: _Optional[int] = ..., seed: _Optional[int] = ..., user: _Optional[str] = ..., presence_penalty: _Optional[float] = ..., frequency_penalty: _Optional[float] = ..., logit_bias: _Optional[_Mapping[str, int]] = ..., logprobs: _Optional[bool] = ..., top_logprobs: _Optional[int] = ..., tools: _Optional[_Iterable[_Union[_chat_pb2.Tool, _Mapping]]] = ..., tool_choice: _Optional[str] = ..., tool_choice_function: _Optional[_Union[_chat_pb2.NamedToolChoice, _Mapping]] = ..., parallel_tool_calls: _Optional[bool] = ..., response_format: _Optional[_Union[_chat_pb2.ResponseFormat, _Mapping]] = ..., reasoning_effort: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ..., store: _Optional[bool] = ..., service_tier: _Optional[str] = ..., prompt_cache_key: _Optional[str] = ..., safety_identifier: _Optional[str] = ..., prompt_cache_retention: _Optional[str] = ...) -> None: ...

class CreateChatCompletionResponse(_message.Message):
    __slots__ = ("id", "object", "created", "model", "choices", "usage", "system_fingerprint", "service_tier")
    ID_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    CHOICES_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    SERVICE_TIER_FIELD_NUMBER: _ClassVar[int]
    id: str
    object: str
    created: int
    model: str
    choices: _containers.RepeatedCompositeFieldContainer[ChatChoice]
    usage: _usage_pb2.Usage
    system_fingerprint: str
    service_tier: str
    def __init__(self, id: _Optional[str] = ..., object: _Optional[str] = ..., created: _Optional[int] = ..., model: _Optional[str] = ..., choices: _Optional[_Iterable[_Union[ChatChoice, _Mapping]]] = ..., usage: _Optional[_Union[_usage_pb2.Usage, _Mapping]] = ..., system_fingerprint: _Optional[str] = ..., service_tier: _Optional[str] = ...) -> None: ...

class StreamChatCompletionRequest(_message.Message):
    __slots__ = ("model", "messages", "max_tokens", "temperature", "top_p", "stream", "stop", "stream_options", "max_completion_tokens", "n", "seed", "user", "presence_penalty", "frequency_penalty", "logit_bias", "logprobs", "top_logprobs", "tools", "tool_choice", "tool_choice_function", "parallel_tool_calls", "response_format", "reasoning_effort", "metadata", "store", "service_tier", "prompt_cache_key", "safety_identifier", "prompt_cache_retention")
    class LogitBiasEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    MODEL_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    TOP_P_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    STOP_FIELD_NUMBER: _ClassVar[int]
    STREAM_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    MAX_COMPLETION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    N_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    PRESENCE_PENALTY_FIELD_NUMBER: _ClassVar[int]
    FREQUENCY_PENALTY_FIELD_NUMBER: _ClassVar[int]
    LOGIT_BIAS_FIELD_NUMBER: _ClassVar[int]
    LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    TOP_LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CHOICE_FIELD_NUMBER: _ClassVar[int]
    TOOL_CHOICE_FUNCTION_FIELD_NUMBER: _ClassVar[int]
    PARALLEL_TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FORMAT_FIELD_NUMBER: _ClassVar[int]
    REASONING_EFFORT_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    STORE_FIELD_NUMBER: _ClassVar[int]
    SERVICE_TIER_FIELD_NUMBER: _ClassVar[int]
    PROMPT_CACHE_KEY_FIELD_NUMBER: _ClassVar[int]
    SAFETY_IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
    PROMPT_CACHE_RETENTION_FIELD_NUMBER: _ClassVar[int]
    model: str
    messages: _containers.RepeatedCompositeFieldContainer[ChatMessage]
    max_tokens: int
    temperature: float
    top_p: float
    stream: bool
    stop: _containers.RepeatedScalarFieldContainer[str]
    stream_options: _streaming_pb2.StreamOptions
    max_completion_tokens: int
    n: int
    seed: int
    user: str
    presence_penalty: float
    frequency_penalty: float
    logit_bias: _containers.ScalarMap[str, int]
    logprobs: bool
    top_logprobs: int
    tools: _containers.RepeatedCompositeFieldContainer[_chat_pb2.Tool]
    tool_choice: str
    tool_choice_function: _chat_pb2.NamedToolChoice
    parallel_tool_calls: bool
    response_format: _chat_pb2.ResponseFormat
    reasoning_effort: str
    metadata: _containers.ScalarMap[str, str]
    store: bool
    service_tier: str
    prompt_cache_key: str
    safety_identifier: str
    prompt_cache_retention: str
    def __init__(self, model: _Optional[str] = ..., messages: _Optional[_Iterable[_Union[ChatMessage, _Mapping]]] = ..., max_tokens: _Optional[int] = ..., temperature: _Optional[float] = ..., top_p: _Optional[float] = ..., stream: _Optional[bool] = ..., stop: _Optional[_Iterable[str]] = ..., stream_options: _Optional[_Union[_streaming_pb2.StreamOptions, _Mapping]] = ..., max_completion_tokens: _Optional[int] = ..., n: _Optional[int] = ..., seed: _Optional[int] = ..., user: _Optional[str] = ..., presence_penalty: _Optional[float] = ..., frequency_penalty: _Optional[float] = ..., logit_bias: _Optional[_Mapping[str, int]] = ..., logprobs: _Optional[bool] = ..., top_logprobs: _Optional[int] = ..., tools: _Optional[_Iterable[_Union[_chat_pb2.Tool, _Mapping]]] = ..., tool_choice: _Optional[str] = ..., tool_choice_function: _Optional[_Union[_chat_pb2.NamedToolChoice, _Mapping]] = ..., parallel_tool_calls: _Optional[bool] = ..., response_format: _Optional[_Union[_chat_pb2.ResponseFormat, _Mapping]] = ..., reasoning_effort: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ..., store: _Optional[bool] = ..., service_tier: _Optional[str] = ..., prompt_cache_key: _Optional[str] = ..., safety_identifier: _Optional[str] = ..., prompt_cache_retention: _Optional[str] = ...) -> None: ...

class StreamChatCompletionResponse(_message.Message):
    __slots__ = ("id", "object", "created", "model", "choices", "usage", "system_fingerprint", "service_tier")
    ID_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    CHOICES_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    SERVICE_TIER_FIELD_NUMBER: _ClassVar[int]
    id: str
    object: str
    created: int
    model: str
    choices: _containers.RepeatedCompositeFieldContainer[ChatChunkChoice]
    usage: _usage_pb2.Usage
    system_fingerprint: str
    service_tier: str
    def __init__(self, id: _Optional[str] = ..., object: _Optional[str] = ..., created: _Optional[int] = ..., model: _Optional[str] = ..., choices: _Optional[_Iterable[_Union[ChatChunkChoice, _Mapping]]] = ..., usage: _Optional[_Union[_usage_pb2.Usage, _Mapping]] = ..., system_fingerprint: _Optional[str] = ..., service_tier: _Optional[str] = ...) -> None: ...
