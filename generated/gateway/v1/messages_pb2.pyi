from gateway.v1 import cache_pb2 as _cache_pb2
from gateway.v1 import json_mapping_pb2 as _json_mapping_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class MessageParam(_message.Message):
    __slots__ = ("role", "content", "content_blocks")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    CONTENT_BLOCKS_FIELD_NUMBER: _ClassVar[int]
    role: str
    content: str
    content_blocks: _containers.RepeatedCompositeFieldContainer[ContentBlock]
    def __init__(self, role: _Optional[str] = ..., content: _Optional[str] = ..., content_blocks: _Optional[_Iterable[_Union[ContentBlock, _Mapping]]] = ...) -> None: ...

class ContentBlock(_message.Message):
    __slots__ = ("type", "text", "source", "id", "name", "input", "tool_use_id", "content", "content_blocks", "content_object", "is_error", "thinking", "signature", "data", "cache_control", "title", "context", "citations", "citations_config", "other")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    CONTENT_BLOCKS_FIELD_NUMBER: _ClassVar[int]
    CONTENT_OBJECT_FIELD_NUMBER: _ClassVar[int]
    IS_ERROR_FIELD_NUMBER: _ClassVar[int]
    THINKING_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    CACHE_CONTROL_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    CITATIONS_FIELD_NUMBER: _ClassVar[int]
    CITATIONS_CONFIG_FIELD_NUMBER: _ClassVar[int]
    OTHER_FIELD_NUMBER: _ClassVar[int]
    type: str
    text: str
    source: ContentSource
    id: str
    name: str
    input: _struct_pb2.Struct
    tool_use_id: str
    content: str
    content_blocks: _containers.RepeatedCompositeFieldContainer[ContentBlock]
    content_object: _struct_pb2.Struct
    is_error: bool
    thinking: str
    signature: str
    data: str
    cache_control: _cache_pb2.CacheControl
    title: str
    context: str
    citations: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Struct]
    citations_config: CitationsConfig
    other: _struct_pb2.Struct
    def __init__(self, type: _Optional[str] = ..., text: _Optional[str] = ..., source: _Optional[_Union[ContentSource, _Mapping]] = ..., id: _Optional[str] = ..., name: _Optional[str] = ..., input: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., tool_use_id: _Optional[str] = ..., content: _Optional[str] = ..., content_blocks: _Optional[_Iterable[_Union[ContentBlock, _Mapping]]] = ..., content_object: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., is_error: _Optional[bool] = ..., thinking: _Optional[str] = ..., signature: _Optional[str] = ..., data: _Optional[str] = ..., cache_control: _Optional[_Union[_cache_pb2.CacheControl, _Mapping]] = ..., title: _Optional[str] = ..., context: _Optional[str] = ..., citations: _Optional[_Iterable[_Union[_struct_pb2.Struct, _Mapping]]] = ..., citations_config: _Optional[_Union[CitationsConfig, _Mapping]] = ..., other: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ContentSource(_message.Message):
    __slots__ = ("type", "media_type", "data", "url", "file_id", "content_blocks", "content")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    MEDIA_TYPE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    FILE_ID_FIELD_NUMBER: _ClassVar[int]
    CONTENT_BLOCKS_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    type: str
    media_type: str
    data: str
    url: str
    file_id: str
    content_blocks: _containers.RepeatedCompositeFieldContainer[ContentBlock]
    content: str
    def __init__(self, type: _Optional[str] = ..., media_type: _Optional[str] = ..., data: _Optional[str] = ..., url: _Optional[str] = ..., file_id: _Optional[str] = ..., content_blocks: _Optional[_Iterable[_Union[ContentBlock, _Mapping]]] = ..., content: _Optional[str] = ...) -> None: ...

class CitationsConfig(_message.Message):
    __slots__ = ("enabled",)
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    enabled: bool
    def __init__(self, enabled: _Optional[bool] = ...) -> None: ...

class MessageTool(_message.Message):
    __slots__ = ("type", "name", "description", "input_schema", "cache_control", "strict", "other")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    INPUT_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    CACHE_CONTROL_FIELD_NUMBER: _ClassVar[int]
    STRICT_FIELD_NUMBER: _ClassVar[int]
    OTHER_FIELD_NUMBER: _ClassVar[int]
    type: str
    name: str
    description: str
    input_schema: _struct_pb2.Struct
    cache_control: _cache_pb2.CacheControl
    strict: bool
    other: _struct_pb2.Struct
    def __init__(self, type: _Optional[str] = ..., name: _Optional[str] = ..., description: _Optional[str] = ..., input_schema: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., cache_control: _Optional[_Union[_cache_pb2.CacheControl, _Mapping]] = ..., strict: _Optional[bool] = ..., other: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class MessageToolChoice(_message.Message):
    __slots__ = ("type", "name", "disable_parallel_tool_use")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DISABLE_PARALLEL_TOOL_USE_FIELD_NUMBER: _ClassVar[int]
    type: str
    name: str
    disable_parallel_tool_use: bool
    def __init__(self, type: _Optional[str] = ..., name: _Optional[str] = ..., disable_parallel_tool_use: _Optional[bool] = ...) -> None: ...

class ThinkingConfig(_message.Message):
    __slots__ = ("type", "budget_tokens", "display")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    BUDGET_TOKENS_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_FIELD_NUMBER: _ClassVar[int]
    type: str
    budget_tokens: int
    display: str
    def __init__(self, type: _Optional[str] = ..., budget_tokens: _Optional[int] = ..., display: _Optional[str] = ...) -> None: ...

class MessageMetadata(_message.Message):
    __slots__ = ("user_id",)
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    user_id: str
    def __init__(self, user_id: _Optional[str] = ...) -> None: ...

class Message(_message.Message):
    __slots__ = ("id", "type", "role", "content", "model", "stop_reason", "stop_sequence", "usage", "other")
    ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    STOP_REASON_FIELD_NUMBER: _ClassVar[int]
    STOP_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    OTHER_FIELD_NUMBER: _ClassVar[int]
    id: str
    type: str
    role: str
    content: _containers.RepeatedCompositeFieldContainer[ContentBlock]
    model: str
    stop_reason: str
    stop_sequence: str
    usage: MessageUsage
    other: _struct_pb2.Struct
    def __init__(self, id: _Optional[str] = ..., type: _Optional[str] = ..., role: _Optional[str] = ..., content: _Optional[_Iterable[_Union[ContentBlock, _Mapping]]] = ..., model: _Optional[str] = ..., stop_reason: _Optional[str] = ..., stop_sequence: _Optional[str] = ..., usage: _Optional[_Union[MessageUsage, _Mapping]] = ..., other: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class MessageUsage(_message.Message):
    __slots__ = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens", "input_cost_usd", "output_cost_usd", "cache_input_cost_usd", "total_cost_usd", "latency_ms", "ttft_ms", "other", "cache_write_cost_usd", "cache_creation", "response_cached")
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHE_CREATION_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHE_READ_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    INPUT_COST_USD_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_COST_USD_FIELD_NUMBER: _ClassVar[int]
    CACHE_INPUT_COST_USD_FIELD_NUMBER: _ClassVar[int]
    TOTAL_COST_USD_FIELD_NUMBER: _ClassVar[int]
    LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    TTFT_MS_FIELD_NUMBER: _ClassVar[int]
    OTHER_FIELD_NUMBER: _ClassVar[int]
    CACHE_WRITE_COST_USD_FIELD_NUMBER: _ClassVar[int]
    CACHE_CREATION_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_CACHED_FIELD_NUMBER: _ClassVar[int]
    input_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int
    output_tokens: int
    input_cost_usd: float
    output_cost_usd: float
    cache_input_cost_usd: float
    total_cost_usd: float
    latency_ms: float
    ttft_ms: float
    other: _struct_pb2.Struct
    cache_write_cost_usd: float
    cache_creation: CacheCreation
    response_cached: bool
    def __init__(self, input_tokens: _Optional[int] = ..., cache_creation_input_tokens: _Optional[int] = ..., cache_read_input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., input_cost_usd: _Optional[float] = ..., output_cost_usd: _Optional[float] = ..., cache_input_cost_usd: _Optional[float] = ..., total_cost_usd: _Optional[float] = ..., latency_ms: _Optional[float] = ..., ttft_ms: _Optional[float] = ..., other: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., cache_write_cost_usd: _Optional[float] = ..., cache_creation: _Optional[_Union[CacheCreation, _Mapping]] = ..., response_cached: _Optional[bool] = ...) -> None: ...

class CacheCreation(_message.Message):
    __slots__ = ("ephemeral_5m_input_tokens", "ephemeral_1h_input_tokens")
    EPHEMERAL_5M_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    EPHEMERAL_1H_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    ephemeral_5m_input_tokens: int
    ephemeral_1h_input_tokens: int
    def __init__(self, ephemeral_5m_input_tokens: _Optional[int] = ..., ephemeral_1h_input_tokens: _Optional[int] = ...) -> None: ...

class ContentBlockDelta(_message.Message):
    __slots__ = ("type", "text", "partial_json", "thinking", "signature", "citation", "other")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    PARTIAL_JSON_FIELD_NUMBER: _ClassVar[int]
    THINKING_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    CITATION_FIELD_NUMBER: _ClassVar[int]
    OTHER_FIELD_NUMBER: _ClassVar[int]
    type: str
    text: str
    partial_json: str
    thinking: str
    signature: str
    citation: _struct_pb2.Struct
    other: _struct_pb2.Struct
    def __init__(self, type: _Optional[str] = ..., text: _Optional[str] = ..., partial_json: _Optional[str] = ..., thinking: _Optional[str] = ..., signature: _Optional[str] = ..., citation: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., other: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class MessageDelta(_message.Message):
    __slots__ = ("stop_reason", "stop_sequence", "other")
    STOP_REASON_FIELD_NUMBER: _ClassVar[int]
    STOP_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    OTHER_FIELD_NUMBER: _ClassVar[int]
    stop_reason: str
    stop_sequence: str
    other: _struct_pb2.Struct
    def __init__(self, stop_reason: _Optional[str] = ..., stop_sequence: _Optional[str] = ..., other: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ModelInfo(_message.Message):
    __slots__ = ("type", "id", "display_name", "created_at")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    type: str
    id: str
    display_name: str
    created_at: str
    def __init__(self, type: _Optional[str] = ..., id: _Optional[str] = ..., display_name: _Optional[str] = ..., created_at: _Optional[str] = ...) -> None: ...
