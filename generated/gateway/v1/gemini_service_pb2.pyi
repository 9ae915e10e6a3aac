from gateway.v1 import gemini_pb2 as _gemini_pb2
from gateway.v1 import json_mapping_pb2 as _json_mapping_pb2
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

class GenerateContentRequest(_message.Message):
    __slots__ = ("model", "contents", "system_instruction", "tools", "tool_config", "safety_settings", "generation_config", "cached_content", "other")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    CONTENTS_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_INSTRUCTION_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CONFIG_FIELD_NUMBER: _ClassVar[int]
    SAFETY_SETTINGS_FIELD_NUMBER: _ClassVar[int]
    GENERATION_CONFIG_FIELD_NUMBER: _ClassVar[int]
    CACHED_CONTENT_FIELD_NUMBER: _ClassVar[int]
    OTHER_FIELD_NUMBER: _ClassVar[int]
    model: str
    contents: _containers.RepeatedCompositeFieldContainer[_gemini_pb2.GeminiContent]
    system_instruction: _gemini_pb2.GeminiContent
    tools: _containers.RepeatedCompositeFieldContainer[_gemini_pb2.GeminiTool]
    tool_config: _gemini_pb2.GeminiToolConfig
    safety_settings: _containers.RepeatedCompositeFieldContainer[_gemini_pb2.GeminiSafetySetting]
    generation_config: _gemini_pb2.GeminiGenerationConfig
    cached_content: str
    other: _struct_pb2.Struct
    def __init__(self, model: _Optional[str] = ..., contents: _Optional[_Iterable[_Union[_gemini_pb2.GeminiContent, _Mapping]]] = ..., system_instruction: _Optional[_Union[_gemini_pb2.GeminiContent, _Mapping]] = ..., tools: _Optional[_Iterable[_Union[_gemini_pb2.GeminiTool, _Mapping]]] = ..., tool_config: _Optional[_Union[_gemini_pb2.GeminiToolConfig, _Mapping]] = ..., safety_settings: _Optional[_Iterable[_Union[_gemini_pb2.GeminiSafetySetting, _Mapping]]] = ..., generation_config: _Optional[_Union[_gemini_pb2.GeminiGenerationConfig, _Mapping]] = ..., cached_content: _Optional[str] = ..., other: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class StreamGenerateContentRequest(_message.Message):
    __slots__ = ("model", "contents", "system_instruction", "tools", "tool_config", "safety_settings", "generation_config", "cached_content", "other")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    CONTENTS_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_INSTRUCTION_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CONFIG_FIELD_NUMBER: _ClassVar[int]
    SAFETY_SETTINGS_FIELD_NUMBER: _ClassVar[int]
    GENERATION_CONFIG_FIELD_NUMBER: _ClassVar[int]
    CACHED_CONTENT_FIELD_NUMBER: _ClassVar[int]
    OTHER_FIELD_NUMBER: _ClassVar[int]
    model: str
    contents: _containers.RepeatedCompositeFieldContainer[_gemini_pb2.GeminiContent]
    system_instruction: _gemini_pb2.GeminiContent
    tools: _containers.RepeatedCompositeFieldContainer[_gemini_pb2.GeminiTool]
    tool_config: _gemini_pb2.GeminiToolConfig
    safety_settings: _containers.RepeatedCompositeFieldContainer[_gemini_pb2.GeminiSafetySetting]
    generation_config: _gemini_pb2.GeminiGenerationConfig
    cached_content: str
    other: _struct_pb2.Struct
    def __init__(self, model: _Optional[str] = ..., contents: _Optional[_Iterable[_Union[_gemini_pb2.GeminiContent, _Mapping]]] = ..., system_instruction: _Optional[_Union[_gemini_pb2.GeminiContent, _Mapping]] = ..., tools: _Optional[_Iterable[_Union[_gemini_pb2.GeminiTool, _Mapping]]] = ..., tool_config: _Optional[_Union[_gemini_pb2.GeminiToolConfig, _Mapping]] = ..., safety_settings: _Optional[_Iterable[_Union[_gemini_pb2.GeminiSafetySetting, _Mapping]]] = ..., generation_config: _Optional[_Union[_gemini_pb2.GeminiGenerationConfig, _Mapping]] = ..., cached_content: _Optional[str] = ..., other: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class GenerateContentResponse(_message.Message):
    __slots__ = ("candidates", "prompt_feedback", "usage_metadata", "model_version", "response_id", "other")
    CANDIDATES_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FEEDBACK_FIELD_NUMBER: _ClassVar[int]
    USAGE_METADATA_FIELD_NUMBER: _ClassVar[int]
    MODEL_VERSION_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_ID_FIELD_NUMBER: _ClassVar[int]
    OTHER_FIELD_NUMBER: _ClassVar[int]
    candidates: _containers.RepeatedCompositeFieldContainer[_gemini_pb2.GeminiCandidate]
    prompt_feedback: _struct_pb2.Struct
    usage_metadata: _gemini_pb2.GeminiUsageMetadata
    model_version: str
    response_id: str
    other: _struct_pb2.Struct
    def __init__(self, candidates: _Optional[_Iterable[_Union[_gemini_pb2.GeminiCandidate, _Mapping]]] = ..., prompt_feedback: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., usage_metadata: _Optional[_Union[_gemini_pb2.GeminiUsageMetadata, _Mapping]] = ..., model_version: _Optional[str] = ..., response_id: _Optional[str] = ..., other: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class StreamGenerateContentResponse(_message.Message):
    __slots__ = ("candidates", "prompt_feedback", "usage_metadata", "model_version", "response_id", "other")
    CANDIDATES_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FEEDBACK_FIELD_NUMBER: _ClassVar[int]
    USAGE_METADATA_FIELD_NUMBER: _ClassVar[int]
    MODEL_VERSION_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_ID_FIELD_NUMBER: _ClassVar[int]
    OTHER_FIELD_NUMBER: _ClassVar[int]
    candidates: _containers.RepeatedCompositeFieldContainer[_gemini_pb2.GeminiCandidate]
    prompt_feedback: _struct_pb2.Struct
    usage_metadata: _gemini_pb2.GeminiUsageMetadata
    model_version: str
    response_id: str
    other: _struct_pb2.Struct
    def __init__(self, candidates: _Optional[_Iterable[_Union[_gemini_pb2.GeminiCandidate, _Mapping]]] = ..., prompt_feedback: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., usage_metadata: _Optional[_Union[_gemini_pb2.GeminiUsageMetadata, _Mapping]] = ..., model_version: _Optional[str] = ..., response_id: _Optional[str] = ..., other: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class CountTokensRequest(_message.Message):
    __slots__ = ("model", "contents", "generate_content_request")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    CONTENTS_FIELD_NUMBER: _ClassVar[int]
    GENERATE_CONTENT_REQUEST_FIELD_NUMBER: _ClassVar[int]
    model: str
    contents: _containers.RepeatedCompositeFieldContainer[_gemini_pb2.GeminiContent]
    generate_content_request: GenerateContentRequest
    def __init__(self, model: _Optional[str] = ..., contents: _Optional[_Iterable[_Union[_gemini_pb2.GeminiContent, _Mapping]]] = ..., generate_content_request: _Optional[_Union[GenerateContentRequest, _Mapping]] = ...) -> None: ...

class CountTokensResponse(_message.Message):
    __slots__ = ("total_tokens", "cached_content_token_count", "other")
    TOTAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHED_CONTENT_TOKEN_COUNT_FIELD_NUMBER: _ClassVar[int]
    OTHER_FIELD_NUMBER: _ClassVar[int]
    total_tokens: int
    cached_content_token_count: int
    other: _struct_pb2.Struct
    def __init__(self, total_tokens: _Optional[int] = ..., cached_content_token_count: _Optional[int] = ..., other: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class EmbedContentRequest(_message.Message):
    __slots__ = ("model", "content", "task_type", "title", "output_dimensionality")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    TASK_TYPE_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_DIMENSIONALITY_FIELD_NUMBER: _ClassVar[int]
    model: str
    content: _gemini_pb2.GeminiContent
    task_type: str
    title: str
    output_dimensionality: int
    def __init__(self, model: _Optional[str] = ..., content: _Optional[_Union[_gemini_pb2.GeminiContent, _Mapping]] = ..., task_type: _Optional[str] = ..., title: _Optional[str] = ..., output_dimensionality: _Optional[int] = ...) -> None: ...

class EmbedContentResponse(_message.Message):
    __slots__ = ("embedding",)
    EMBEDDING_FIELD_NUMBER: _ClassVar[int]
    embedding: _gemini_pb2.GeminiContentEmbedding
    def __init__(self, embedding: _Optional[_Union[_gemini_pb2.GeminiContentEmbedding, _Mapping]] = ...) -> None: ...

class BatchEmbedContentsRequest(_message.Message):
    __slots__ = ("model", "requests")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    model: str
    requests: _containers.RepeatedCompositeFieldContainer[EmbedContentRequest]
    def __init__(self, model: _Optional[str] = ..., requests: _Optional[_Iterable[_Union[EmbedContentRequest, _Mapping]]] = ...) -> None: ...

class BatchEmbedContentsResponse(_message.Message):
    __slots__ = ("embeddings",)
    EMBEDDINGS_FIELD_NUMBER: _ClassVar[int]
    embeddings: _containers.RepeatedCompositeFieldContainer[_gemini_pb2.GeminiContentEmbedding]
    def __init__(self, embeddings: _Optional[_Iterable[_Union[_gemini_pb2.GeminiContentEmbedding, _Mapping]]] = ...) -> None: ...

class ListGeminiModelsRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListGeminiModelsResponse(_message.Message):
    __slots__ = ("models", "next_page_token")
    MODELS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    models: _containers.RepeatedCompositeFieldContainer[_gemini_pb2.GeminiModel]
    next_page_token: str
    def __init__(self, models: _Optional[_Iterable[_Union[_gemini_pb2.GeminiModel, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class GetGeminiModelRequest(_message.Message):
    __slots__ = ("model",)
    MODEL_FIELD_NUMBER: _ClassVar[int]
    model: str
    def __init__(self, model: _Optional[str] = ...) -> None: ...

class GetGeminiModelResponse(_message.Message):
    __slots__ = ("model",)
    MODEL_FIELD_NUMBER: _ClassVar[int]
    model: _gemini_pb2.GeminiModel
    def __init__(self, model: _Optional[_Union[_gemini_pb2.GeminiModel, _Mapping]] = ...) -> None: ...
