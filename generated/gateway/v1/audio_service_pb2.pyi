from google.api import annotations_pb2 as _annotations_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CreateTranscriptionRequest(_message.Message):
    __slots__ = ("file", "filename", "model", "language", "prompt", "response_format", "temperature", "timestamp_granularities", "extra")
    class ExtraEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    FILE_FIELD_NUMBER: _ClassVar[int]
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    LANGUAGE_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FORMAT_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_GRANULARITIES_FIELD_NUMBER: _ClassVar[int]
    EXTRA_FIELD_NUMBER: _ClassVar[int]
    file: bytes
    filename: str
    model: str
    language: str
    prompt: str
    response_format: str
    temperature: float
    timestamp_granularities: _containers.RepeatedScalarFieldContainer[str]
    extra: _containers.ScalarMap[str, str]
    def __init__(self, file: _Optional[bytes] = ..., filename: _Optional[str] = ..., model: _Optional[str] = ..., language: _Optional[str] = ..., prompt: _Optional[str] = ..., response_format: _Optional[str] = ..., temperature: _Optional[float] = ..., timestamp_granularities: _Optional[_Iterable[str]] = ..., extra: _Optional[_Mapping[str, str]] = ...) -> None: ...

class StreamTranscriptionRequest(_message.Message):
    __slots__ = ("file", "filename", "model", "language", "prompt", "response_format", "temperature", "timestamp_granularities", "extra")
    class ExtraEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    FILE_FIELD_NUMBER: _ClassVar[int]
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    LANGUAGE_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FORMAT_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_GRANULARITIES_FIELD_NUMBER: _ClassVar[int]
    EXTRA_FIELD_NUMBER: _ClassVar[int]
    file: bytes
    filename: str
    model: str
    language: str
    prompt: str
    response_format: str
    temperature: float
    timestamp_granularities: _containers.RepeatedScalarFieldContainer[str]
    extra: _containers.ScalarMap[str, str]
    def __init__(self, file: _Optional[bytes] = ..., filename: _Optional[str] = ..., model: _Optional[str] = ..., language: _Optional[str] = ..., prompt: _Optional[str] = ..., response_format: _Optional[str] = ..., temperature: _Optional[float] = ..., timestamp_granularities: _Optional[_Iterable[str]] = ..., extra: _Optional[_Mapping[str, str]] = ...) -> None: ...

class CreateTranslationRequest(_message.Message):
    __slots__ = ("file", "filename", "model", "language", "prompt", "response_format", "temperature", "timestamp_granularities", "extra")
    class ExtraEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    FILE_FIELD_NUMBER: _ClassVar[int]
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    LANGUAGE_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FORMAT_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_GRANULARITIES_FIELD_NUMBER: _ClassVar[int]
    EXTRA_FIELD_NUMBER: _ClassVar[int]
    file: bytes
    filename: str
    model: str
    language: str
    prompt: str
    response_format: str
    temperature: float
    timestamp_granularities: _containers.RepeatedScalarFieldContainer[str]
    extra: _containers.ScalarMap[str, str]
    def __init__(self, file: _Optional[bytes] = ..., filename: _Optional[str] = ..., model: _Optional[str] = ..., language: _Optional[str] = ..., prompt: _Optional[str] = ..., response_format: _Optional[str] = ..., temperature: _Optional[float] = ..., timestamp_granularities: _Optional[_Iterable[str]] = ..., extra: _Optional[_Mapping[str, str]] = ...) -> None: ...

class TranscriptionSegment(_message.Message):
    __slots__ = ("id", "start", "end", "text")
    ID_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    id: int
    start: float
    end: float
    text: str
    def __init__(self, id: _Optional[int] = ..., start: _Optional[float] = ..., end: _Optional[float] = ..., text: _Optional[str] = ...) -> None: ...

class TranscriptionWord(_message.Message):
    __slots__ = ("word", "start", "end")
    WORD_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    word: str
    start: float
    end: float
    def __init__(self, word: _Optional[str] = ..., start: _Optional[float] = ..., end: _Optional[float] = ...) -> None: ...

class TranscriptionInputDetails(_message.Message):
    __slots__ = ("text_tokens", "audio_tokens")
    TEXT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    AUDIO_TOKENS_FIELD_NUMBER: _ClassVar[int]
    text_tokens: int
    audio_tokens: int
    def __init__(self, text_tokens: _Optional[int] = ..., audio_tokens: _Optional[int] = ...) -> None: ...

class TranscriptionUsage(_message.Message):
    __slots__ = ("type", "input_tokens", "input_token_details", "output_tokens", "total_tokens", "seconds", "total_cost_usd")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKEN_DETAILS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_COST_USD_FIELD_NUMBER: _ClassVar[int]
    type: str
    input_tokens: int
    input_token_details: TranscriptionInputDetails
    output_tokens: int
    total_tokens: int
    seconds: float
    total_cost_usd: float
    def __init__(self, type: _Optional[str] = ..., input_tokens: _Optional[int] = ..., input_token_details: _Optional[_Union[TranscriptionInputDetails, _Mapping]] = ..., output_tokens: _Optional[int] = ..., total_tokens: _Optional[int] = ..., seconds: _Optional[float] = ..., total_cost_usd: _Optional[float] = ...) -> None: ...

class CreateTranscriptionResponse(_message.Message):
    __slots__ = ("text", "language", "duration", "segments", "words", "usage", "model", "task")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    LANGUAGE_FIELD_NUMBER: _ClassVar[int]
    DURATION_FIELD_NUMBER: _ClassVar[int]
    SEGMENTS_FIELD_NUMBER: _ClassVar[int]
    WORDS_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    text: str
    language: str
    duration: float
    segments: _containers.RepeatedCompositeFieldContainer[TranscriptionSegment]
    words: _containers.RepeatedCompositeFieldContainer[TranscriptionWord]
    usage: TranscriptionUsage
    model: str
    task: str
    def __init__(self, text: _Optional[str] = ..., language: _Optional[str] = ..., duration: _Optional[float] = ..., segments: _Optional[_Iterable[_Union[TranscriptionSegment, _Mapping]]] = ..., words: _Optional[_Iterable[_Union[TranscriptionWord, _Mapping]]] = ..., usage: _Optional[_Union[TranscriptionUsage, _Mapping]] = ..., model: _Optional[str] = ..., task: _Optional[str] = ...) -> None: ...

class CreateTranslationResponse(_message.Message):
    __slots__ = ("text", "language", "duration", "segments", "words", "usage", "model", "task")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    LANGUAGE_FIELD_NUMBER: _ClassVar[int]
    DURATION_FIELD_NUMBER: _ClassVar[int]
    SEGMENTS_FIELD_NUMBER: _ClassVar[int]
    WORDS_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    text: str
    language: str
    duration: float
    segments: _containers.RepeatedCompositeFieldContainer[TranscriptionSegment]
    words: _containers.RepeatedCompositeFieldContainer[TranscriptionWord]
    usage: TranscriptionUsage
    model: str
    task: str
    def __init__(self, text: _Optional[str] = ..., language: _Optional[str] = ..., duration: _Optional[float] = ..., segments: _Optional[_Iterable[_Union[TranscriptionSegment, _Mapping]]] = ..., words: _Optional[_Iterable[_Union[TranscriptionWord, _Mapping]]] = ..., usage: _Optional[_Union[TranscriptionUsage, _Mapping]] = ..., model: _Optional[str] = ..., task: _Optional[str] = ...) -> None: ...

class StreamTranscriptionResponse(_message.Message):
    __slots__ = ("type", "delta", "text", "usage")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    type: str
    delta: str
    text: str
    usage: TranscriptionUsage
    def __init__(self, type: _Optional[str] = ..., delta: _Optional[str] = ..., text: _Optional[str] = ..., usage: _Optional[_Union[TranscriptionUsage, _Mapping]] = ...) -> None: ...

class CreateSpeechRequest(_message.Message):
    __slots__ = ("model", "input", "voice", "instructions", "response_format", "speed", "extra")
    class ExtraEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    MODEL_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    VOICE_FIELD_NUMBER: _ClassVar[int]
    INSTRUCTIONS_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FORMAT_FIELD_NUMBER: _ClassVar[int]
    SPEED_FIELD_NUMBER: _ClassVar[int]
    EXTRA_FIELD_NUMBER: _ClassVar[int]
    model: str
    input: str
    voice: str
    instructions: str
    response_format: str
    speed: float
    extra: _containers.ScalarMap[str, str]
    def __init__(self, model: _Optional[str] = ..., input: _Optional[str] = ..., voice: _Optional[str] = ..., instructions: _Optional[str] = ..., response_format: _Optional[str] = ..., speed: _Optional[float] = ..., extra: _Optional[_Mapping[str, str]] = ...) -> None: ...

class CreateSpeechResponse(_message.Message):
    __slots__ = ("audio", "content_type")
    AUDIO_FIELD_NUMBER: _ClassVar[int]
    CONTENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    audio: bytes
    content_type: str
    def __init__(self, audio: _Optional[bytes] = ..., content_type: _Optional[str] = ...) -> None: ...
