from gateway.v1 import cache_pb2 as _cache_pb2
from gateway.v1 import json_mapping_pb2 as _json_mapping_pb2
from gateway.v1 import messages_pb2 as _messages_pb2
from gateway.v1 import rest_pb2 as _rest_pb2
from gateway.v1 import sse_pb2 as _sse_pb2
from google.api import annotations_pb2 as _annotations_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CreateMessageRequest(_message.Message):
    __slots__ = ("model", "max_tokens", "messages", "system", "system_blocks", "stop_sequences", "temperature", "top_p", "top_k", "metadata", "tools", "tool_choice", "thinking", "stream", "service_tier", "cache_control", "container", "mcp_servers", "context_management", "output_config", "thread", "speed")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_BLOCKS_FIELD_NUMBER: _ClassVar[int]
    STOP_SEQUENCES_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    TOP_P_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CHOICE_FIELD_NUMBER: _ClassVar[int]
    THINKING_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    SERVICE_TIER_FIELD_NUMBER: _ClassVar[int]
    CACHE_CONTROL_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_FIELD_NUMBER: _ClassVar[int]
    MCP_SERVERS_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_MANAGEMENT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_CONFIG_FIELD_NUMBER: _ClassVar[int]
    THREAD_FIELD_NUMBER: _ClassVar[int]
    SPEED_FIELD_NUMBER: _ClassVar[int]
    model: str
    max_tokens: int
    messages: _containers.RepeatedCompositeFieldContainer[_messages_pb2.MessageParam]
    system: str
    system_blocks: _containers.RepeatedCompositeFieldContainer[_messages_pb2.ContentBlock]
    stop_sequences: _containers.RepeatedScalarFieldContainer[str]
    temperature: float
    top_p: float
    top_k: int
    metadata: _messages_pb2.MessageMetadata
    tools: _containers.RepeatedCompositeFieldContainer[_messages_pb2.MessageTool]
    tool_choice: _messages_pb2.MessageToolChoice
    thinking: _messages_pb2.ThinkingConfig
    stream: bool
    service_tier: str
    cache_control: _cache_pb2.CacheControl
    container: str
    mcp_servers: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Struct]
    context_management: _struct_pb2.Struct
    output_config: _struct_pb2.Struct
    thread: _struct_pb2.Struct
    speed: str
    def __init__(self, model: _Optional[str] = ..., max_tokens: _Optional[int] = ..., messages: _Optional[_Iterable[_Union[_messages_pb2.MessageParam, _Mapping]]] = ..., system: _Optional[str] = ..., system_blocks: _Optional[_Iterable[_Union[_messages_pb2.ContentBlock, _Mapping]]] = ..., stop_sequences: _Optional[_Iterable[str]] = ..., temperature: _Optional[float] = ..., top_p: _Optional[float] = ..., top_k: _Optional[int] = ..., metadata: _Optional[_Union[_messages_pb2.MessageMetadata, _Mapping]] = ..., tools: _Optional[_Iterable[_Union[_messages_pb2.MessageTool, _Mapping]]] = ..., tool_choice: _Optional[_Union[_messages_pb2.MessageToolChoice, _Mapping]] = ..., thinking: _Optional[_Union[_messages_pb2.ThinkingConfig, _Mapping]] = ..., stream: _Optional[bool] = ..., service_tier: _Optional[str] = ..., cache_control: _Optional[_Union[_cache_pb2.CacheControl, _Mapping]] = ..., container: _Optional[str] = ..., mcp_servers: _Optional[_Iterable[_Union[_struct_pb2.Struct, _Mapping]]] = ..., context_management: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., output_config: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., thread: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., speed: _Optional[str] = ...) -> None: ...

class CreateMessageResponse(_message.Message):
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
    content: _containers.RepeatedCompositeFieldContainer[_messages_pb2.ContentBlock]
    model: str
    stop_reason: str
    stop_sequence: str
    usage: _messages_pb2.MessageUsage
    other: _struct_pb2.Struct
    def __init__(self, id: _Optional[str] = ..., type: _Optional[str] = ..., role: _Optional[str] = ..., content: _Optional[_Iterable[_Union[_messages_pb2.ContentBlock, _Mapping]]] = ..., model: _Optional[str] = ..., stop_reason: _Optional[str] = ..., stop_sequence: _Optional[str] = ..., usage: _Optional[_Union[_messages_pb2.MessageUsage, _Mapping]] = ..., other: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class StreamMessageRequest(_message.Message):
    __slots__ = ("model", "max_tokens", "messages", "system", "system_blocks", "stop_sequences", "temperature", "top_p", "top_k", "metadata", "tools", "tool_choice", "thinking", "stream", "service_tier", "cache_control", "container", "mcp_servers", "context_management", "output_config", "thread", "speed")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_BLOCKS_FIELD_NUMBER: _ClassVar[int]
    STOP_SEQUENCES_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    TOP_P_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CHOICE_FIELD_NUMBER: _ClassVar[int]
    THINKING_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    SERVICE_TIER_FIELD_NUMBER: _ClassVar[int]
    CACHE_CONTROL_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_FIELD_NUMBER: _ClassVar[int]
    MCP_SERVERS_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_MANAGEMENT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_CONFIG_FIELD_NUMBER: _ClassVar[int]
    THREAD_FIELD_NUMBER: _ClassVar[int]
    SPEED_FIELD_NUMBER: _ClassVar[int]
    model: str
    max_tokens: int
    messages: _containers.RepeatedCompositeFieldContainer[_messages_pb2.MessageParam]
    system: str
    system_blocks: _containers.RepeatedCompositeFieldContainer[_messages_pb2.ContentBlock]
    stop_sequences: _containers.RepeatedScalarFieldContainer[str]
    temperature: float
    top_p: float
    top_k: int
    metadata: _messages_pb2.MessageMetadata
    tools: _containers.RepeatedCompositeFieldContainer[_messages_pb2.MessageTool]
    tool_choice: _messages_pb2.MessageToolChoice
    thinking: _messages_pb2.ThinkingConfig
    stream: bool
    service_tier: str
    cache_control: _cache_pb2.CacheControl
    container: str
    mcp_servers: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Struct]
    context_management: _struct_pb2.Struct
    output_config: _struct_pb2.Struct
    thread: _struct_pb2.Struct
    speed: str
    def __init__(self, model: _Optional[str] = ..., max_tokens: _Optional[int] = ..., messages: _Optional[_Iterable[_Union[_messages_pb2.MessageParam, _Mapping]]] = ..., system: _Optional[str] = ..., system_blocks: _Optional[_Iterable[_Union[_messages_pb2.ContentBlock, _Mapping]]] = ..., stop_sequences: _Optional[_Iterable[str]] = ..., temperature: _Optional[float] = ..., top_p: _Optional[float] = ..., top_k: _Optional[int] = ..., metadata: _Optional[_Union[_messages_pb2.MessageMetadata, _Mapping]] = ..., tools: _Optional[_Iterable[_Union[_messages_pb2.MessageTool, _Mapping]]] = ..., tool_choice: _Optional[_Union[_messages_pb2.MessageToolChoice, _Mapping]] = ..., thinking: _Optional[_Union[_messages_pb2.ThinkingConfig, _Mapping]] = ..., stream: _Optional[bool] = ..., service_tier: _Optional[str] = ..., cache_control: _Optional[_Union[_cache_pb2.CacheControl, _Mapping]] = ..., container: _Optional[str] = ..., mcp_servers: _Optional[_Iterable[_Union[_struct_pb2.Struct, _Mapping]]] = ..., context_management: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., output_config: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., thread: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., speed: _Optional[str] = ...) -> None: ...

class StreamMessageResponse(_message.Message):
    __slots__ = ("type", "message", "index", "content_block", "delta", "message_delta", "usage")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    CONTENT_BLOCK_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_DELTA_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    type: str
    message: _messages_pb2.Message
    index: int
    content_block: _messages_pb2.ContentBlock
    delta: _messages_pb2.ContentBlockDelta
    message_delta: _messages_pb2.MessageDelta
    usage: _messages_pb2.MessageUsage
    def __init__(self, type: _Optional[str] = ..., message: _Optional[_Union[_messages_pb2.Message, _Mapping]] = ..., index: _Optional[int] = ..., content_block: _Optional[_Union[_messages_pb2.ContentBlock, _Mapping]] = ..., delta: _Optional[_Union[_messages_pb2.ContentBlockDelta, _Mapping]] = ..., message_delta: _Optional[_Union[_messages_pb2.MessageDelta, _Mapping]] = ..., usage: _Optional[_Union[_messages_pb2.MessageUsage, _Mapping]] = ...) -> None: ...

class CountMessageTokensRequest(_message.Message):
    __slots__ = ("model", "messages", "system", "system_blocks", "tools", "tool_choice", "thinking", "context_management", "output_config", "mcp_servers")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_BLOCKS_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CHOICE_FIELD_NUMBER: _ClassVar[int]
    THINKING_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_MANAGEMENT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_CONFIG_FIELD_NUMBER: _ClassVar[int]
    MCP_SERVERS_FIELD_NUMBER: _ClassVar[int]
    model: str
    messages: _containers.RepeatedCompositeFieldContainer[_messages_pb2.MessageParam]
    system: str
    system_blocks: _containers.RepeatedCompositeFieldContainer[_messages_pb2.ContentBlock]
    tools: _containers.RepeatedCompositeFieldContainer[_messages_pb2.MessageTool]
    tool_choice: _messages_pb2.MessageToolChoice
    thinking: _messages_pb2.ThinkingConfig
    context_management: _struct_pb2.Struct
    output_config: _struct_pb2.Struct
    mcp_servers: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Struct]
    def __init__(self, model: _Optional[str] = ..., messages: _Optional[_Iterable[_Union[_messages_pb2.MessageParam, _Mapping]]] = ..., system: _Optional[str] = ..., system_blocks: _Optional[_Iterable[_Union[_messages_pb2.ContentBlock, _Mapping]]] = ..., tools: _Optional[_Iterable[_Union[_messages_pb2.MessageTool, _Mapping]]] = ..., tool_choice: _Optional[_Union[_messages_pb2.MessageToolChoice, _Mapping]] = ..., thinking: _Optional[_Union[_messages_pb2.ThinkingConfig, _Mapping]] = ..., context_management: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., output_config: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., mcp_servers: _Optional[_Iterable[_Union[_struct_pb2.Struct, _Mapping]]] = ...) -> None: ...

class CountMessageTokensResponse(_message.Message):
    __slots__ = ("input_tokens", "method")
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    input_tokens: int
    method: str
    def __init__(self, input_tokens: _Optional[int] = ..., method: _Optional[str] = ...) -> None: ...

class ListModelInfosRequest(_message.Message):
    __slots__ = ("after_id", "before_id", "limit")
    AFTER_ID_FIELD_NUMBER: _ClassVar[int]
    BEFORE_ID_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    after_id: str
    before_id: str
    limit: int
    def __init__(self, after_id: _Optional[str] = ..., before_id: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class ListModelInfosResponse(_message.Message):
    __slots__ = ("data", "has_more", "first_id", "last_id")
    DATA_FIELD_NUMBER: _ClassVar[int]
    HAS_MORE_FIELD_NUMBER: _ClassVar[int]
    FIRST_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_ID_FIELD_NUMBER: _ClassVar[int]
    data: _containers.RepeatedCompositeFieldContainer[_messages_pb2.ModelInfo]
    has_more: bool
    first_id: str
    last_id: str
    def __init__(self, data: _Optional[_Iterable[_Union[_messages_pb2.ModelInfo, _Mapping]]] = ..., has_more: _Optional[bool] = ..., first_id: _Optional[str] = ..., last_id: _Optional[str] = ...) -> None: ...

class GetModelInfoRequest(_message.Message):
    __slots__ = ("model",)
    MODEL_FIELD_NUMBER: _ClassVar[int]
    model: str
    def __init__(self, model: _Optional[str] = ...) -> None: ...

class GetModelInfoResponse(_message.Message):
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
