from gateway.v1 import json_mapping_pb2 as _json_mapping_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Response(_message.Message):
    __slots__ = ("id", "object", "created_at", "status", "error", "incomplete_details", "instructions", "max_output_tokens", "model", "output", "parallel_tool_calls", "previous_response_id", "reasoning", "store", "temperature", "text", "tool_choice", "tool_choice_object", "tools", "top_p", "truncation", "usage", "user", "metadata", "safety_identifier", "prompt_cache_key", "service_tier", "background", "completed_at", "prompt_cache_retention")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    INCOMPLETE_DETAILS_FIELD_NUMBER: _ClassVar[int]
    INSTRUCTIONS_FIELD_NUMBER: _ClassVar[int]
    MAX_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    PARALLEL_TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_RESPONSE_ID_FIELD_NUMBER: _ClassVar[int]
    REASONING_FIELD_NUMBER: _ClassVar[int]
    STORE_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TOOL_CHOICE_FIELD_NUMBER: _ClassVar[int]
    TOOL_CHOICE_OBJECT_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    TOP_P_FIELD_NUMBER: _ClassVar[int]
    TRUNCATION_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    SAFETY_IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
    PROMPT_CACHE_KEY_FIELD_NUMBER: _ClassVar[int]
    SERVICE_TIER_FIELD_NUMBER: _ClassVar[int]
    BACKGROUND_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_AT_FIELD_NUMBER: _ClassVar[int]
    PROMPT_CACHE_RETENTION_FIELD_NUMBER: _ClassVar[int]
    id: str
    object: str
    created_at: int
    status: str
    error: ResponseError
    incomplete_details: IncompleteDetails
    instructions: str
    max_output_tokens: int
    model: str
    output: _containers.RepeatedCompositeFieldContainer[OutputItem]
    parallel_tool_calls: bool
    previous_response_id: str
    reasoning: ReasoningConfig
    store: bool
    temperature: float
    text: TextConfig
    tool_choice: str
    tool_choice_object: _struct_pb2.Struct
    tools: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Struct]
    top_p: float
    truncation: str
    usage: ResponseUsage
    user: str
    metadata: _containers.ScalarMap[str, str]
    safety_identifier: str
    prompt_cache_key: str
    service_tier: str
    background: bool
    completed_at: int
    prompt_cache_retention: str
    def __init__(self, id: _Optional[str] = ..., object: _Optional[str] = ..., created_at: _Optional[int] = ..., status: _Optional[str] = ..., error: _Optional[_Union[ResponseError, _Mapping]] = ..., incomplete_details: _Optional[_Union[IncompleteDetails, _Mapping]] = ..., instructions: _Optional[str] = ..., max_output_tokens: _Optional[int] = ..., model: _Optional[str] = ..., output: _Optional[_Iterable[_Union[OutputItem, _Mapping]]] = ..., parallel_tool_calls: _Optional[bool] = ..., previous_response_id: _Optional[str] = ..., reasoning: _Optional[_Union[ReasoningConfig, _Mapping]] = ..., store: _Optional[bool] = ..., temperature: _Optional[float] = ..., text: _Optional[_Union[TextConfig, _Mapping]] = ..., tool_choice: _Optional[str] = ..., tool_choice_object: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., tools: _Optional[_Iterable[_Union[_struct_pb2.Struct, _Mapping]]] = ..., top_p: _Optional[float] = ..., truncation: _Optional[str] = ..., usage: _Optional[_Union[ResponseUsage, _Mapping]] = ..., user: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ..., safety_identifier: _Optional[str] = ..., prompt_cache_key: _Optional[str] = ..., service_tier: _Optional[str] = ..., background: _Optional[bool] = ..., completed_at: _Optional[int] = ..., prompt_cache_retention: _Optional[str] = ...) -> None: ...

class ResponseError(_message.Message):
    __slots__ = ("code", "message")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    code: str
    message: str
    def __init__(self, code: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class IncompleteDetails(_message.Message):
    __slots__ = ("reason",)
    REASON_FIELD_NUMBER: _ClassVar[int]
    reason: str
    def __init__(self, reason: _Optional[str] = ...) -> None: ...

class ReasoningConfig(_message.Message):
    __slots__ = ("effort", "summary")
    EFFORT_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    effort: str
    summary: str
    def __init__(self, effort: _Optional[str] = ..., summary: _Optional[str] = ...) -> None: ...

class TextConfig(_message.Message):
    __slots__ = ("format", "verbosity")
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    VERBOSITY_FIELD_NUMBER: _ClassVar[int]
    format: TextFormat
    verbosity: str
    def __init__(self, format: _Optional[_Union[TextFormat, _Mapping]] = ..., verbosity: _Optional[str] = ...) -> None: ...

class TextFormat(_message.Message):
    __slots__ = ("type", "name", "schema", "description", "strict")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    STRICT_FIELD_NUMBER: _ClassVar[int]
    type: str
    name: str
    schema: _struct_pb2.Struct
    description: str
    strict: bool
    def __init__(self, type: _Optional[str] = ..., name: _Optional[str] = ..., schema: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., description: _Optional[str] = ..., strict: _Optional[bool] = ...) -> None: ...

class ResponseUsage(_message.Message):
    __slots__ = ("input_tokens", "input_tokens_details", "output_tokens", "output_tokens_details", "total_tokens", "input_cost_usd", "output_cost_usd", "cache_input_cost_usd", "total_cost_usd", "latency_ms", "ttft_ms", "cache_write_cost_usd", "response_cached")
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKENS_DETAILS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_DETAILS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    INPUT_COST_USD_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_COST_USD_FIELD_NUMBER: _ClassVar[int]
    CACHE_INPUT_COST_USD_FIELD_NUMBER: _ClassVar[int]
    TOTAL_COST_USD_FIELD_NUMBER: _ClassVar[int]
    LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    TTFT_MS_FIELD_NUMBER: _ClassVar[int]
    CACHE_WRITE_COST_USD_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_CACHED_FIELD_NUMBER: _ClassVar[int]
    input_tokens: int
    input_tokens_details: InputTokensDetails
    output_tokens: int
    output_tokens_details: OutputTokensDetails
    total_tokens: int
    input_cost_usd: float
    output_cost_usd: float
    cache_input_cost_usd: float
    total_cost_usd: float
    latency_ms: float
    ttft_ms: float
    cache_write_cost_usd: float
    response_cached: bool
    def __init__(self, input_tokens: _Optional[int] = ..., input_tokens_details: _Optional[_Union[InputTokensDetails, _Mapping]] = ..., output_tokens: _Optional[int] = ..., output_tokens_details: _Optional[_Union[OutputTokensDetails, _Mapping]] = ..., total_tokens: _Optional[int] = ..., input_cost_usd: _Optional[float] = ..., output_cost_usd: _Optional[float] = ..., cache_input_cost_usd: _Optional[float] = ..., total_cost_usd: _Optional[float] = ..., latency_ms: _Optional[float] = ..., ttft_ms: _Optional[float] = ..., cache_write_cost_usd: _Optional[float] = ..., response_cached: _Optional[bool] = ...) -> None: ...

class InputTokensDetails(_message.Message):
    __slots__ = ("cached_tokens", "cache_write_tokens", "audio_tokens")
    CACHED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHE_WRITE_TOKENS_FIELD_NUMBER: _ClassVar[int]
    AUDIO_TOKENS_FIELD_NUMBER: _ClassVar[int]
    cached_tokens: int
    cache_write_tokens: int
    audio_tokens: int
    def __init__(self, cached_tokens: _Optional[int] = ..., cache_write_tokens: _Optional[int] = ..., audio_tokens: _Optional[int] = ...) -> None: ...

class OutputTokensDetails(_message.Message):
    __slots__ = ("reasoning_tokens", "audio_tokens")
    REASONING_TOKENS_FIELD_NUMBER: _ClassVar[int]
    AUDIO_TOKENS_FIELD_NUMBER: _ClassVar[int]
    reasoning_tokens: int
    audio_tokens: int
    def __init__(self, reasoning_tokens: _Optional[int] = ..., audio_tokens: _Optional[int] = ...) -> None: ...

class OutputItem(_message.Message):
    __slots__ = ("message", "function_call", "reasoning", "other")
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    FUNCTION_CALL_FIELD_NUMBER: _ClassVar[int]
    REASONING_FIELD_NUMBER: _ClassVar[int]
    OTHER_FIELD_NUMBER: _ClassVar[int]
    message: OutputMessage
    function_call: FunctionCallItem
    reasoning: ReasoningItem
    other: _struct_pb2.Struct
    def __init__(self, message: _Optional[_Union[OutputMessage, _Mapping]] = ..., function_call: _Optional[_Union[FunctionCallItem, _Mapping]] = ..., reasoning: _Optional[_Union[ReasoningItem, _Mapping]] = ..., other: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class OutputMessage(_message.Message):
    __slots__ = ("id", "type", "status", "content", "role")
    ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    id: str
    type: str
    status: str
    content: _containers.RepeatedCompositeFieldContainer[OutputText]
    role: str
    def __init__(self, id: _Optional[str] = ..., type: _Optional[str] = ..., status: _Optional[str] = ..., content: _Optional[_Iterable[_Union[OutputText, _Mapping]]] = ..., role: _Optional[str] = ...) -> None: ...

class OutputText(_message.Message):
    __slots__ = ("type", "annotations", "logprobs", "text")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    ANNOTATIONS_FIELD_NUMBER: _ClassVar[int]
    LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    type: str
    annotations: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Struct]
    logprobs: _containers.RepeatedCompositeFieldContainer[TextLogprob]
    text: str
    def __init__(self, type: _Optional[str] = ..., annotations: _Optional[_Iterable[_Union[_struct_pb2.Struct, _Mapping]]] = ..., logprobs: _Optional[_Iterable[_Union[TextLogprob, _Mapping]]] = ..., text: _Optional[str] = ...) -> None: ...

class TextLogprob(_message.Message):
    __slots__ = ("token", "bytes", "logprob", "top_logprobs")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    LOGPROB_FIELD_NUMBER: _ClassVar[int]
    TOP_LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    token: str
    bytes: _containers.RepeatedScalarFieldContainer[int]
    logprob: float
    top_logprobs: _containers.RepeatedCompositeFieldContainer[TopTextLogprob]
    def __init__(self, token: _Optional[str] = ..., bytes: _Optional[_Iterable[int]] = ..., logprob: _Optional[float] = ..., top_logprobs: _Optional[_Iterable[_Union[TopTextLogprob, _Mapping]]] = ...) -> None: ...

class TopTextLogprob(_message.Message):
    __slots__ = ("token", "bytes", "logprob")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    LOGPROB_FIELD_NUMBER: _ClassVar[int]
    token: str
    bytes: _containers.RepeatedScalarFieldContainer[int]
    logprob: float
    def __init__(self, token: _Optional[str] = ..., bytes: _Optional[_Iterable[int]] = ..., logprob: _Optional[float] = ...) -> None: ...

class FunctionCallItem(_message.Message):
    __slots__ = ("id", "type", "status", "arguments", "call_id", "name", "namespace")
    ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    id: str
    type: str
    status: str
    arguments: str
    call_id: str
    name: str
    namespace: str
    def __init__(self, id: _Optional[str] = ..., type: _Optional[str] = ..., status: _Optional[str] = ..., arguments: _Optional[str] = ..., call_id: _Optional[str] = ..., name: _Optional[str] = ..., namespace: _Optional[str] = ...) -> None: ...

class ReasoningItem(_message.Message):
    __slots__ = ("id", "type", "summary", "encrypted_content")
    ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    ENCRYPTED_CONTENT_FIELD_NUMBER: _ClassVar[int]
    id: str
    type: str
    summary: _containers.RepeatedCompositeFieldContainer[SummaryText]
    encrypted_content: str
    def __init__(self, id: _Optional[str] = ..., type: _Optional[str] = ..., summary: _Optional[_Iterable[_Union[SummaryText, _Mapping]]] = ..., encrypted_content: _Optional[str] = ...) -> None: ...

class SummaryText(_message.Message):
    __slots__ = ("type", "text")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    type: str
    text: str
    def __init__(self, type: _Optional[str] = ..., text: _Optional[str] = ...) -> None: ...

class InputItem(_message.Message):
    __slots__ = ("type", "role", "content", "content_parts", "id", "status", "call_id", "name", "arguments", "output", "output_parts", "summary", "encrypted_content", "phase", "namespace", "server_label", "approval_request_id", "approve", "reason", "tools", "error", "caller")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    CONTENT_PARTS_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_PARTS_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    ENCRYPTED_CONTENT_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    SERVER_LABEL_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    APPROVE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    CALLER_FIELD_NUMBER: _ClassVar[int]
    type: str
    role: str
    content: str
    content_parts: _containers.RepeatedCompositeFieldContainer[InputContent]
    id: str
    status: str
    call_id: str
    name: str
    arguments: str
    output: str
    output_parts: _containers.RepeatedCompositeFieldContainer[InputContent]
    summary: _containers.RepeatedCompositeFieldContainer[SummaryText]
    encrypted_content: str
    phase: str
    namespace: str
    server_label: str
    approval_request_id: str
    approve: bool
    reason: str
    tools: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Struct]
    error: _struct_pb2.Value
    caller: _struct_pb2.Struct
    def __init__(self, type: _Optional[str] = ..., role: _Optional[str] = ..., content: _Optional[str] = ..., content_parts: _Optional[_Iterable[_Union[InputContent, _Mapping]]] = ..., id: _Optional[str] = ..., status: _Optional[str] = ..., call_id: _Optional[str] = ..., name: _Optional[str] = ..., arguments: _Optional[str] = ..., output: _Optional[str] = ..., output_parts: _Optional[_Iterable[_Union[InputContent, _Mapping]]] = ..., summary: _Optional[_Iterable[_Union[SummaryText, _Mapping]]] = ..., encrypted_content: _Optional[str] = ..., phase: _Optional[str] = ..., namespace: _Optional[str] = ..., server_label: _Optional[str] = ..., approval_request_id: _Optional[str] = ..., approve: _Optional[bool] = ..., reason: _Optional[str] = ..., tools: _Optional[_Iterable[_Union[_struct_pb2.Struct, _Mapping]]] = ..., error: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., caller: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class InputContent(_message.Message):
    __slots__ = ("type", "text", "image_url", "detail", "file_id", "file_data", "file_url", "filename", "annotations", "logprobs", "refusal")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    IMAGE_URL_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    FILE_ID_FIELD_NUMBER: _ClassVar[int]
    FILE_DATA_FIELD_NUMBER: _ClassVar[int]
    FILE_URL_FIELD_NUMBER: _ClassVar[int]
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    ANNOTATIONS_FIELD_NUMBER: _ClassVar[int]
    LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    REFUSAL_FIELD_NUMBER: _ClassVar[int]
    type: str
    text: str
    image_url: str
    detail: str
    file_id: str
    file_data: str
    file_url: str
    filename: str
    annotations: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Struct]
    logprobs: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Struct]
    refusal: str
    def __init__(self, type: _Optional[str] = ..., text: _Optional[str] = ..., image_url: _Optional[str] = ..., detail: _Optional[str] = ..., file_id: _Optional[str] = ..., file_data: _Optional[str] = ..., file_url: _Optional[str] = ..., filename: _Optional[str] = ..., annotations: _Optional[_Iterable[_Union[_struct_pb2.Struct, _Mapping]]] = ..., logprobs: _Optional[_Iterable[_Union[_struct_pb2.Struct, _Mapping]]] = ..., refusal: _Optional[str] = ...) -> None: ...
