from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Usage(_message.Message):
    __slots__ = ("prompt_tokens", "completion_tokens", "total_tokens", "input_cost_usd", "output_cost_usd", "cache_input_cost_usd", "total_cost_usd", "latency_ms", "ttft_ms", "prompt_tokens_details", "completion_tokens_details", "cache_write_cost_usd", "response_cached")
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    INPUT_COST_USD_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_COST_USD_FIELD_NUMBER: _ClassVar[int]
    CACHE_INPUT_COST_USD_FIELD_NUMBER: _ClassVar[int]
    TOTAL_COST_USD_FIELD_NUMBER: _ClassVar[int]
    LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    TTFT_MS_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKENS_DETAILS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TOKENS_DETAILS_FIELD_NUMBER: _ClassVar[int]
    CACHE_WRITE_COST_USD_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_CACHED_FIELD_NUMBER: _ClassVar[int]
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    input_cost_usd: float
    output_cost_usd: float
    cache_input_cost_usd: float
    total_cost_usd: float
    latency_ms: float
    ttft_ms: float
    prompt_tokens_details: PromptTokensDetails
    completion_tokens_details: CompletionTokensDetails
    cache_write_cost_usd: float
    response_cached: bool
    def __init__(self, prompt_tokens: _Optional[int] = ..., completion_tokens: _Optional[int] = ..., total_tokens: _Optional[int] = ..., input_cost_usd: _Optional[float] = ..., output_cost_usd: _Optional[float] = ..., cache_input_cost_usd: _Optional[float] = ..., total_cost_usd: _Optional[float] = ..., latency_ms: _Optional[float] = ..., ttft_ms: _Optional[float] = ..., prompt_tokens_details: _Optional[_Union[PromptTokensDetails, _Mapping]] = ..., completion_tokens_details: _Optional[_Union[CompletionTokensDetails, _Mapping]] = ..., cache_write_cost_usd: _Optional[float] = ..., response_cached: _Optional[bool] = ...) -> None: ...

class PromptTokensDetails(_message.Message):
    __slots__ = ("cached_tokens", "audio_tokens", "cache_write_tokens", "cache_write_1h_tokens")
    CACHED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    AUDIO_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHE_WRITE_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHE_WRITE_1H_TOKENS_FIELD_NUMBER: _ClassVar[int]
    cached_tokens: int
    audio_tokens: int
    cache_write_tokens: int
    cache_write_1h_tokens: int
    def __init__(self, cached_tokens: _Optional[int] = ..., audio_tokens: _Optional[int] = ..., cache_write_tokens: _Optional[int] = ..., cache_write_1h_tokens: _Optional[int] = ...) -> None: ...

class CompletionTokensDetails(_message.Message):
    __slots__ = ("reasoning_tokens", "audio_tokens", "accepted_prediction_tokens", "rejected_prediction_tokens")
    REASONING_TOKENS_FIELD_NUMBER: _ClassVar[int]
    AUDIO_TOKENS_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_PREDICTION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    REJECTED_PREDICTION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    reasoning_tokens: int
    audio_tokens: int
    accepted_prediction_tokens: int
    rejected_prediction_tokens: int
    def __init__(self, reasoning_tokens: _Optional[int] = ..., audio_tokens: _Optional[int] = ..., accepted_prediction_tokens: _Optional[int] = ..., rejected_prediction_tokens: _Optional[int] = ...) -> None: ...
