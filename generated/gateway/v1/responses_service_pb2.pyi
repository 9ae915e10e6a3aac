from gateway.v1 import json_mapping_pb2 as _json_mapping_pb2
from gateway.v1 import responses_pb2 as _responses_pb2
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

class CreateResponseRequest(_message.Message):
    __slots__ = ("model", "input", "input_items", "instructions", "tools", "tool_choice", "tool_choice_object", "parallel_tool_calls", "text", "reasoning", "max_output_tokens", "temperature", "top_p", "store", "previous_response_id", "include", "metadata", "user", "safety_identifier", "prompt_cache_key", "truncation", "service_tier", "stream", "background", "top_logprobs", "stream_options", "client_metadata", "prompt_cache_retention", "conversation", "conversation_object", "realtime_audio")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class ClientMetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    MODEL_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    INPUT_ITEMS_FIELD_NUMBER: _ClassVar[int]
    INSTRUCTIONS_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CHOICE_FIELD_NUMBER: _ClassVar[int]
    TOOL_CHOICE_OBJECT_FIELD_NUMBER: _ClassVar[int]
    PARALLEL_TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    REASONING_FIELD_NUMBER: _ClassVar[int]
    MAX_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    TOP_P_FIELD_NUMBER: _ClassVar[int]
    STORE_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_RESPONSE_ID_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    SAFETY_IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
    PROMPT_CACHE_KEY_FIELD_NUMBER: _ClassVar[int]
    TRUNCATION_FIELD_NUMBER: _ClassVar[int]
    SERVICE_TIER_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    BACKGROUND_FIELD_NUMBER: _ClassVar[int]
    TOP_LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    STREAM_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    CLIENT_METADATA_FIELD_NUMBER: _ClassVar[int]
    PROMPT_CACHE_RETENTION_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_OBJECT_FIELD_NUMBER: _ClassVar[int]
    REALTIME_AUDIO_FIELD_NUMBER: _ClassVar[int]
    model: str
    input: str
    input_items: _containers.RepeatedCompositeFieldContainer[_responses_pb2.InputItem]
    instructions: str
    tools: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Struct]
    tool_choice: str
    tool_choice_object: _struct_pb2.Struct
    parallel_tool_calls: bool
    text: _responses_pb2.TextConfig
    reasoning: _responses_pb2.ReasoningConfig
    max_output_tokens: int
    temperature: float
    top_p: float
    store: bool
    previous_response_id: str
    include: _containers.RepeatedScalarFieldContainer[str]
    metadata: _containers.ScalarMap[str, str]
    user: str
    safety_identifier: str
    prompt_cache_key: str
    truncation: str
    service_tier: str
    stream: bool
    background: bool
    top_logprobs: int
    stream_options: ResponseStreamOptions
    client_metadata: _containers.ScalarMap[str, str]
    prompt_cache_retention: str
    conversation: str
    conversation_object: ConversationReference
    realtime_audio: RealtimeAudio
    def __init__(self, model: _Optional[str] = ..., input: _Optional[str] = ..., input_items: _Optional[_Iterable[_Union[_responses_pb2.InputItem, _Mapping]]] = ..., instructions: _Optional[str] = ..., tools: _Optional[_Iterable[_Union[_struct_pb2.Struct, _Mapping]]] = ..., tool_choice: _Optional[str] = ..., tool_choice_object: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., parallel_tool_calls: _Optional[bool] = ..., text: _Optional[_Union[_responses_pb2.TextConfig, _Mapping]] = ..., reasoning: _Optional[_Union[_responses_pb2.ReasoningConfig, _Mapping]] = ..., max_output_tokens: _Optional[int] = ..., temperature: _Optional[float] = ..., top_p: _Optional[float] = ..., store: _Optional[bool] = ..., previous_response_id: _Optional[str] = ..., include: _Optional[_Iterable[str]] = ..., metadata: _Optional[_Mapping[str, str]] = ..., user: _Optional[str] = ..., safety_identifier: _Optional[str] = ..., prompt_cache_key: _Optional[str] = ..., truncation: _Optional[str] = ..., service_tier: _Optional[str] = ..., stream: _Optional[bool] = ..., background: _Optional[bool] = ..., top_logprobs: _Optional[int] = ..., stream_options: _Optional[_Union[ResponseStreamOptions, _Mapping]] = ..., client_metadata: _Optional[_Mapping[str, str]] = ..., prompt_cache_retention: _Optional[str] = ..., conversation: _Optional[str] = ..., conversation_object: _Optional[_Union[ConversationReference, _Mapping]] = ..., realtime_audio: _Optional[_Union[RealtimeAudio, _Mapping]] = ...) -> None: ...

class ConversationReference(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class ResponseStreamOptions(_message.Message):
    __slots__ = ("include_obfuscation",)
    INCLUDE_OBFUSCATION_FIELD_NUMBER: _ClassVar[int]
    include_obfuscation: bool
    def __init__(self, include_obfuscation: _Optional[bool] = ...) -> None: ...

class CreateResponseResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _responses_pb2.Response
    def __init__(self, response: _Optional[_Union[_responses_pb2.Response, _Mapping]] = ...) -> None: ...

class StreamResponseRequest(_message.Message):
    __slots__ = ("model", "input", "input_items", "instructions", "tools", "tool_choice", "tool_choice_object", "parallel_tool_calls", "text", "reasoning", "max_output_tokens", "temperature", "top_p", "store", "previous_response_id", "include", "metadata", "user", "safety_identifier", "prompt_cache_key", "truncation", "service_tier", "stream", "background", "top_logprobs", "stream_options", "client_metadata", "prompt_cache_retention", "conversation", "conversation_object", "realtime_audio")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class ClientMetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    MODEL_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    INPUT_ITEMS_FIELD_NUMBER: _ClassVar[int]
    INSTRUCTIONS_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CHOICE_FIELD_NUMBER: _ClassVar[int]
    TOOL_CHOICE_OBJECT_FIELD_NUMBER: _ClassVar[int]
    PARALLEL_TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    REASONING_FIELD_NUMBER: _ClassVar[int]
    MAX_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    TOP_P_FIELD_NUMBER: _ClassVar[int]
    STORE_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_RESPONSE_ID_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    SAFETY_IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
    PROMPT_CACHE_KEY_FIELD_NUMBER: _ClassVar[int]
    TRUNCATION_FIELD_NUMBER: _ClassVar[int]
    SERVICE_TIER_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    BACKGROUND_FIELD_NUMBER: _ClassVar[int]
    TOP_LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    STREAM_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    CLIENT_METADATA_FIELD_NUMBER: _ClassVar[int]
    PROMPT_CACHE_RETENTION_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_OBJECT_FIELD_NUMBER: _ClassVar[int]
    REALTIME_AUDIO_FIELD_NUMBER: _ClassVar[int]
    model: str
    input: str
    input_items: _containers.RepeatedCompositeFieldContainer[_responses_pb2.InputItem]
    instructions: str
    tools: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Struct]
    tool_choice: str
    tool_choice_object: _struct_pb2.Struct
    parallel_tool_calls: bool
    text: _responses_pb2.TextConfig
    reasoning: _responses_pb2.ReasoningConfig
    max_output_tokens: int
    temperature: float
    top_p: float
    store: bool
    previous_response_id: str
    include: _containers.RepeatedScalarFieldContainer[str]
    metadata: _containers.ScalarMap[str, str]
    user: str
    safety_identifier: str
    prompt_cache_key: str
    truncation: str
    service_tier: str
    stream: bool
    background: bool
    top_logprobs: int
    stream_options: ResponseStreamOptions
    client_metadata: _containers.ScalarMap[str, str]
    prompt_cache_retention: str
    conversation: str
    conversation_object: ConversationReference
    realtime_audio: RealtimeAudio
    def __init__(self, model: _Optional[str] = ..., input: _Optional[str] = ..., input_items: _Optional[_Iterable[_Union[_responses_pb2.InputItem, _Mapping]]] = ..., instructions: _Optional[str] = ..., tools: _Optional[_Iterable[_Union[_struct_pb2.Struct, _Mapping]]] = ..., tool_choice: _Optional[str] = ..., tool_choice_object: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., parallel_tool_calls: _Optional[bool] = ..., text: _Optional[_Union[_responses_pb2.TextConfig, _Mapping]] = ..., reasoning: _Optional[_Union[_responses_pb2.ReasoningConfig, _Mapping]] = ..., max_output_tokens: _Optional[int] = ..., temperature: _Optional[float] = ..., top_p: _Optional[float] = ..., store: _Optional[bool] = ..., previous_response_id: _Optional[str] = ..., include: _Optional[_Iterable[str]] = ..., metadata: _Optional[_Mapping[str, str]] = ..., user: _Optional[str] = ..., safety_identifier: _Optional[str] = ..., prompt_cache_key: _Optional[str] = ..., truncation: _Optional[str] = ..., service_tier: _Optional[str] = ..., stream: _Optional[bool] = ..., background: _Optional[bool] = ..., top_logprobs: _Optional[int] = ..., stream_options: _Optional[_Union[ResponseStreamOptions, _Mapping]] = ..., client_metadata: _Optional[_Mapping[str, str]] = ..., prompt_cache_retention: _Optional[str] = ..., conversation: _Optional[str] = ..., conversation_object: _Optional[_Union[ConversationReference, _Mapping]] = ..., realtime_audio: _Optional[_Union[RealtimeAudio, _Mapping]] = ...) -> None: ...

class StreamResponseResponse(_message.Message):
    __slots__ = ("type", "sequence_number", "response_event", "output_item", "content_part", "text_delta", "text_done", "delta", "arguments_done", "summary_part", "summary_text_done", "other")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_NUMBER_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_EVENT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_ITEM_FIELD_NUMBER: _ClassVar[int]
    CONTENT_PART_FIELD_NUMBER: _ClassVar[int]
    TEXT_DELTA_FIELD_NUMBER: _ClassVar[int]
    TEXT_DONE_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_DONE_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_PART_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_TEXT_DONE_FIELD_NUMBER: _ClassVar[int]
    OTHER_FIELD_NUMBER: _ClassVar[int]
    type: str
    sequence_number: int
    response_event: ResponseEvent
    output_item: OutputItemEvent
    content_part: ContentPartEvent
    text_delta: TextDeltaEvent
    text_done: TextDoneEvent
    delta: DeltaEvent
    arguments_done: ArgumentsDoneEvent
    summary_part: SummaryPartEvent
    summary_text_done: SummaryTextDoneEvent
    other: _struct_pb2.Struct
    def __init__(self, type: _Optional[str] = ..., sequence_number: _Optional[int] = ..., response_event: _Optional[_Union[ResponseEvent, _Mapping]] = ..., output_item: _Optional[_Union[OutputItemEvent, _Mapping]] = ..., content_part: _Optional[_Union[ContentPartEvent, _Mapping]] = ..., text_delta: _Optional[_Union[TextDeltaEvent, _Mapping]] = ..., text_done: _Optional[_Union[TextDoneEvent, _Mapping]] = ..., delta: _Optional[_Union[DeltaEvent, _Mapping]] = ..., arguments_done: _Optional[_Union[ArgumentsDoneEvent, _Mapping]] = ..., summary_part: _Optional[_Union[SummaryPartEvent, _Mapping]] = ..., summary_text_done: _Optional[_Union[SummaryTextDoneEvent, _Mapping]] = ..., other: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ResponseEvent(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _responses_pb2.Response
    def __init__(self, response: _Optional[_Union[_responses_pb2.Response, _Mapping]] = ...) -> None: ...

class OutputItemEvent(_message.Message):
    __slots__ = ("output_index", "item")
    OUTPUT_INDEX_FIELD_NUMBER: _ClassVar[int]
    ITEM_FIELD_NUMBER: _ClassVar[int]
    output_index: int
    item: _responses_pb2.OutputItem
    def __init__(self, output_index: _Optional[int] = ..., item: _Optional[_Union[_responses_pb2.OutputItem, _Mapping]] = ...) -> None: ...

class ContentPartEvent(_message.Message):
    __slots__ = ("content_index", "item_id", "output_index", "part")
    CONTENT_INDEX_FIELD_NUMBER: _ClassVar[int]
    ITEM_ID_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_INDEX_FIELD_NUMBER: _ClassVar[int]
    PART_FIELD_NUMBER: _ClassVar[int]
    content_index: int
    item_id: str
    output_index: int
    part: _responses_pb2.OutputText
    def __init__(self, content_index: _Optional[int] = ..., item_id: _Optional[str] = ..., output_index: _Optional[int] = ..., part: _Optional[_Union[_responses_pb2.OutputText, _Mapping]] = ...) -> None: ...

class TextDeltaEvent(_message.Message):
    __slots__ = ("content_index", "delta", "item_id", "logprobs", "output_index")
    CONTENT_INDEX_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    ITEM_ID_FIELD_NUMBER: _ClassVar[int]
    LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_INDEX_FIELD_NUMBER: _ClassVar[int]
    content_index: int
    delta: str
    item_id: str
    logprobs: _containers.RepeatedCompositeFieldContainer[_responses_pb2.TextLogprob]
    output_index: int
    def __init__(self, content_index: _Optional[int] = ..., delta: _Optional[str] = ..., item_id: _Optional[str] = ..., logprobs: _Optional[_Iterable[_Union[_responses_pb2.TextLogprob, _Mapping]]] = ..., output_index: _Optional[int] = ...) -> None: ...

class TextDoneEvent(_message.Message):
    __slots__ = ("content_index", "item_id", "logprobs", "output_index", "text")
    CONTENT_INDEX_FIELD_NUMBER: _ClassVar[int]
    ITEM_ID_FIELD_NUMBER: _ClassVar[int]
    LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_INDEX_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    content_index: int
    item_id: str
    logprobs: _containers.RepeatedCompositeFieldContainer[_responses_pb2.TextLogprob]
    output_index: int
    text: str
    def __init__(self, content_index: _Optional[int] = ..., item_id: _Optional[str] = ..., logprobs: _Optional[_Iterable[_Union[_responses_pb2.TextLogprob, _Mapping]]] = ..., output_index: _Optional[int] = ..., text: _Optional[str] = ...) -> None: ...

class DeltaEvent(_message.Message):
    __slots__ = ("delta", "item_id", "output_index", "summary_index")
    DELTA_FIELD_NUMBER: _ClassVar[int]
    ITEM_ID_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_INDEX_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_INDEX_FIELD_NUMBER: _ClassVar[int]
    delta: str
    item_id: str
    output_index: int
    summary_index: int
    def __init__(self, delta: _Optional[str] = ..., item_id: _Optional[str] = ..., output_index: _Optional[int] = ..., summary_index: _Optional[int] = ...) -> None: ...

class ArgumentsDoneEvent(_message.Message):
    __slots__ = ("arguments", "item_id", "name", "output_index")
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    ITEM_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_INDEX_FIELD_NUMBER: _ClassVar[int]
    arguments: str
    item_id: str
    name: str
    output_index: int
    def __init__(self, arguments: _Optional[str] = ..., item_id: _Optional[str] = ..., name: _Optional[str] = ..., output_index: _Optional[int] = ...) -> None: ...

class SummaryPartEvent(_message.Message):
    __slots__ = ("item_id", "output_index", "part", "summary_index")
    ITEM_ID_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_INDEX_FIELD_NUMBER: _ClassVar[int]
    PART_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_INDEX_FIELD_NUMBER: _ClassVar[int]
    item_id: str
    output_index: int
    part: _responses_pb2.SummaryText
    summary_index: int
    def __init__(self, item_id: _Optional[str] = ..., output_index: _Optional[int] = ..., part: _Optional[_Union[_responses_pb2.SummaryText, _Mapping]] = ..., summary_index: _Optional[int] = ...) -> None: ...

class SummaryTextDoneEvent(_message.Message):
    __slots__ = ("item_id", "output_index", "summary_index", "text")
    ITEM_ID_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_INDEX_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_INDEX_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    item_id: str
    output_index: int
    summary_index: int
    text: str
    def __init__(self, item_id: _Optional[str] = ..., output_index: _Optional[int] = ..., summary_index: _Optional[int] = ..., text: _Optional[str] = ...) -> None: ...

class GetResponseRequest(_message.Message):
    __slots__ = ("response_id",)
    RESPONSE_ID_FIELD_NUMBER: _ClassVar[int]
    response_id: str
    def __init__(self, response_id: _Optional[str] = ...) -> None: ...

class GetResponseResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _responses_pb2.Response
    def __init__(self, response: _Optional[_Union[_responses_pb2.Response, _Mapping]] = ...) -> None: ...

class DeleteResponseRequest(_message.Message):
    __slots__ = ("response_id",)
    RESPONSE_ID_FIELD_NUMBER: _ClassVar[int]
    response_id: str
    def __init__(self, response_id: _Optional[str] = ...) -> None: ...

class DeleteResponseResponse(_message.Message):
    __slots__ = ("id", "object", "deleted")
    ID_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    id: str
    object: str
    deleted: bool
    def __init__(self, id: _Optional[str] = ..., object: _Optional[str] = ..., deleted: _Optional[bool] = ...) -> None: ...

class ListInputItemsRequest(_message.Message):
    __slots__ = ("response_id", "after", "before", "limit", "order", "include")
    RESPONSE_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    BEFORE_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    ORDER_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_FIELD_NUMBER: _ClassVar[int]
    response_id: str
    after: str
    before: str
    limit: int
    order: str
    include: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, response_id: _Optional[str] = ..., after: _Optional[str] = ..., before: _Optional[str] = ..., limit: _Optional[int] = ..., order: _Optional[str] = ..., include: _Optional[_Iterable[str]] = ...) -> None: ...

class ListInputItemsResponse(_message.Message):
    __slots__ = ("object", "data", "first_id", "last_id", "has_more")
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    FIRST_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_ID_FIELD_NUMBER: _ClassVar[int]
    HAS_MORE_FIELD_NUMBER: _ClassVar[int]
    object: str
    data: _containers.RepeatedCompositeFieldContainer[_responses_pb2.InputItem]
    first_id: str
    last_id: str
    has_more: bool
    def __init__(self, object: _Optional[str] = ..., data: _Optional[_Iterable[_Union[_responses_pb2.InputItem, _Mapping]]] = ..., first_id: _Optional[str] = ..., last_id: _Optional[str] = ..., has_more: _Optional[bool] = ...) -> None: ...

class RealtimeAudio(_message.Message):
    __slots__ = ("input_audio_tokens", "output_audio")
    INPUT_AUDIO_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_AUDIO_FIELD_NUMBER: _ClassVar[int]
    input_audio_tokens: int
    output_audio: bool
    def __init__(self, input_audio_tokens: _Optional[int] = ..., output_audio: _Optional[bool] = ...) -> None: ...
