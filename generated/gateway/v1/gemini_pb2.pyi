from gateway.v1 import json_mapping_pb2 as _json_mapping_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GeminiContent(_message.Message):
    __slots__ = ("role", "parts")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    PARTS_FIELD_NUMBER: _ClassVar[int]
    role: str
    parts: _containers.RepeatedCompositeFieldContainer[GeminiPart]
    def __init__(self, role: _Optional[str] = ..., parts: _Optional[_Iterable[_Union[GeminiPart, _Mapping]]] = ...) -> None: ...

class GeminiPart(_message.Message):
    __slots__ = ("text", "thought", "thought_signature", "inline_data", "file_data", "function_call", "function_response", "other")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    THOUGHT_FIELD_NUMBER: _ClassVar[int]
    THOUGHT_SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    INLINE_DATA_FIELD_NUMBER: _ClassVar[int]
    FILE_DATA_FIELD_NUMBER: _ClassVar[int]
    FUNCTION_CALL_FIELD_NUMBER: _ClassVar[int]
    FUNCTION_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    OTHER_FIELD_NUMBER: _ClassVar[int]
    text: str
    thought: bool
    thought_signature: str
    inline_data: GeminiBlob
    file_data: GeminiFileData
    function_call: GeminiFunctionCall
    function_response: GeminiFunctionResponse
    other: _struct_pb2.Struct
    def __init__(self, text: _Optional[str] = ..., thought: _Optional[bool] = ..., thought_signature: _Optional[str] = ..., inline_data: _Optional[_Union[GeminiBlob, _Mapping]] = ..., file_data: _Optional[_Union[GeminiFileData, _Mapping]] = ..., function_call: _Optional[_Union[GeminiFunctionCall, _Mapping]] = ..., function_response: _Optional[_Union[GeminiFunctionResponse, _Mapping]] = ..., other: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class GeminiBlob(_message.Message):
    __slots__ = ("mime_type", "data", "other")
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    OTHER_FIELD_NUMBER: _ClassVar[int]
    mime_type: str
    data: str
    other: _struct_pb2.Struct
    def __init__(self, mime_type: _Optional[str] = ..., data: _Optional[str] = ..., other: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class GeminiFileData(_message.Message):
    __slots__ = ("mime_type", "file_uri", "other")
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    FILE_URI_FIELD_NUMBER: _ClassVar[int]
    OTHER_FIELD_NUMBER: _ClassVar[int]
    mime_type: str
    file_uri: str
    other: _struct_pb2.Struct
    def __init__(self, mime_type: _Optional[str] = ..., file_uri: _Optional[str] = ..., other: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class GeminiFunctionCall(_message.Message):
    __slots__ = ("id", "name", "args", "other")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    OTHER_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    args: _struct_pb2.Struct
    other: _struct_pb2.Struct
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., args: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., other: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class GeminiFunctionResponse(_message.Message):
    __slots__ = ("id", "name", "response", "other")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    OTHER_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    response: _struct_pb2.Struct
    other: _struct_pb2.Struct
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., response: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., other: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class GeminiTool(_message.Message):
    __slots__ = ("function_declarations", "other")
    FUNCTION_DECLARATIONS_FIELD_NUMBER: _ClassVar[int]
    OTHER_FIELD_NUMBER: _ClassVar[int]
    function_declarations: _containers.RepeatedCompositeFieldContainer[GeminiFunctionDeclaration]
    other: _struct_pb2.Struct
    def __init__(self, function_declarations: _Optional[_Iterable[_Union[GeminiFunctionDeclaration, _Mapping]]] = ..., other: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class GeminiFunctionDeclaration(_message.Message):
    __slots__ = ("name", "description", "parameters", "parameters_json_schema", "other")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_JSON_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    OTHER_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    parameters: _struct_pb2.Struct
    parameters_json_schema: _struct_pb2.Struct
    other: _struct_pb2.Struct
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., parameters: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., parameters_json_schema: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., other: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class GeminiToolConfig(_message.Message):
    __slots__ = ("function_calling_config", "other")
    FUNCTION_CALLING_CONFIG_FIELD_NUMBER: _ClassVar[int]
    OTHER_FIELD_NUMBER: _ClassVar[int]
    function_calling_config: GeminiFunctionCallingConfig
    other: _struct_pb2.Struct
    def __init__(self, function_calling_config: _Optional[_Union[GeminiFunctionCallingConfig, _Mapping]] = ..., other: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class GeminiFunctionCallingConfig(_message.Message):
    __slots__ = ("mode", "allowed_function_names")
    MODE_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_FUNCTION_NAMES_FIELD_NUMBER: _ClassVar[int]
    mode: str
    allowed_function_names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, mode: _Optional[str] = ..., allowed_function_names: _Optional[_Iterable[str]] = ...) -> None: ...

class GeminiSafetySetting(_message.Message):
    __slots__ = ("category", "threshold", "other")
    CATEGORY_FIELD_NUMBER: _ClassVar[int]
    THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    OTHER_FIELD_NUMBER: _ClassVar[int]
    category: str
    threshold: str
    other: _struct_pb2.Struct
    def __init__(self, category: _Optional[str] = ..., threshold: _Optional[str] = ..., other: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class GeminiGenerationConfig(_message.Message):
    __slots__ = ("temperature", "top_p", "top_k", "candidate_count", "max_output_tokens", "stop_sequences", "response_mime_type", "response_schema", "response_json_schema", "thinking_config", "seed", "presence_penalty", "frequency_penalty", "other")
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    TOP_P_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_COUNT_FIELD_NUMBER: _ClassVar[int]
    MAX_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    STOP_SEQUENCES_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_JSON_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    THINKING_CONFIG_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    PRESENCE_PENALTY_FIELD_NUMBER: _ClassVar[int]
    FREQUENCY_PENALTY_FIELD_NUMBER: _ClassVar[int]
    OTHER_FIELD_NUMBER: _ClassVar[int]
    temperature: float
    top_p: float
    top_k: int
    candidate_count: int
    max_output_tokens: int
    stop_sequences: _containers.RepeatedScalarFieldContainer[str]
    response_mime_type: str
    response_schema: _struct_pb2.Struct
    response_json_schema: _struct_pb2.Struct
    thinking_config: GeminiThinkingConfig
    seed: int
    presence_penalty: float
    frequency_penalty: float
    other: _struct_pb2.Struct
    def __init__(self, temperature: _Optional[float] = ..., top_p: _Optional[float] = ..., top_k: _Optional[int] = ..., candidate_count: _Optional[int] = ..., max_output_tokens: _Optional[int] = ..., stop_sequences: _Optional[_Iterable[str]] = ..., response_mime_type: _Optional[str] = ..., response_schema: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., response_json_schema: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., thinking_config: _Optional[_Union[GeminiThinkingConfig, _Mapping]] = ..., seed: _Optional[int] = ..., presence_penalty: _Optional[float] = ..., frequency_penalty: _Optional[float] = ..., other: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class GeminiThinkingConfig(_message.Message):
    __slots__ = ("include_thoughts", "thinking_budget", "thinking_level")
    INCLUDE_THOUGHTS_FIELD_NUMBER: _ClassVar[int]
    THINKING_BUDGET_FIELD_NUMBER: _ClassVar[int]
    THINKING_LEVEL_FIELD_NUMBER: _ClassVar[int]
    include_thoughts: bool
    thinking_budget: int
    thinking_level: str
    def __init__(self, include_thoughts: _Optional[bool] = ..., thinking_budget: _Optional[int] = ..., thinking_level: _Optional[str] = ...) -> None: ...

class GeminiCandidate(_message.Message):
    __slots__ = ("content", "finish_reason", "index", "finish_message", "other")
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    FINISH_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    OTHER_FIELD_NUMBER: _ClassVar[int]
    content: GeminiContent
    finish_reason: str
    index: int
    finish_message: str
    other: _struct_pb2.Struct
    def __init__(self, content: _Optional[_Union[GeminiContent, _Mapping]] = ..., finish_reason: _Optional[str] = ..., index: _Optional[int] = ..., finish_message: _Optional[str] = ..., other: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class GeminiUsageMetadata(_message.Message):
    __slots__ = ("prompt_token_count", "candidates_token_count", "total_token_count", "cached_content_token_count", "thoughts_token_count", "input_cost_usd", "output_cost_usd", "cache_input_cost_usd", "total_cost_usd", "latency_ms", "ttft_ms", "response_cached", "other")
    PROMPT_TOKEN_COUNT_FIELD_NUMBER: _ClassVar[int]
    CANDIDATES_TOKEN_COUNT_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TOKEN_COUNT_FIELD_NUMBER: _ClassVar[int]
    CACHED_CONTENT_TOKEN_COUNT_FIELD_NUMBER: _ClassVar[int]
    THOUGHTS_TOKEN_COUNT_FIELD_NUMBER: _ClassVar[int]
    INPUT_COST_USD_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_COST_USD_FIELD_NUMBER: _ClassVar[int]
    CACHE_INPUT_COST_USD_FIELD_NUMBER: _ClassVar[int]
    TOTAL_COST_USD_FIELD_NUMBER: _ClassVar[int]
    LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    TTFT_MS_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_CACHED_FIELD_NUMBER: _ClassVar[int]
    OTHER_FIELD_NUMBER: _ClassVar[int]
    prompt_token_count: int
    candidates_token_count: int
    total_token_count: int
    cached_content_token_count: int
    thoughts_token_count: int
    input_cost_usd: float
    output_cost_usd: float
    cache_input_cost_usd: float
    total_cost_usd: float
    latency_ms: float
    ttft_ms: float
    response_cached: bool
    other: _struct_pb2.Struct
    def __init__(self, prompt_token_count: _Optional[int] = ..., candidates_token_count: _Optional[int] = ..., total_token_count: _Optional[int] = ..., cached_content_token_count: _Optional[int] = ..., thoughts_token_count: _Optional[int] = ..., input_cost_usd: _Optional[float] = ..., output_cost_usd: _Optional[float] = ..., cache_input_cost_usd: _Optional[float] = ..., total_cost_usd: _Optional[float] = ..., latency_ms: _Optional[float] = ..., ttft_ms: _Optional[float] = ..., response_cached: _Optional[bool] = ..., other: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class GeminiContentEmbedding(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, values: _Optional[_Iterable[float]] = ...) -> None: ...

class GeminiModel(_message.Message):
    __slots__ = ("name", "base_model_id", "version", "display_name", "description", "input_token_limit", "output_token_limit", "supported_generation_methods")
    NAME_FIELD_NUMBER: _ClassVar[int]
    BASE_MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKEN_LIMIT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKEN_LIMIT_FIELD_NUMBER: _ClassVar[int]
    SUPPORTED_GENERATION_METHODS_FIELD_NUMBER: _ClassVar[int]
    name: str
    base_model_id: str
    version: str
    display_name: str
    description: str
    input_token_limit: int
    output_token_limit: int
    supported_generation_methods: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., base_model_id: _Optional[str] = ..., version: _Optional[str] = ..., display_name: _Optional[str] = ..., description: _Optional[str] = ..., input_token_limit: _Optional[int] = ..., output_token_limit: _Optional[int] = ..., supported_generation_methods: _Optional[_Iterable[str]] = ...) -> None: ...
