from gateway.v1 import rest_pb2 as _rest_pb2
from google.api import annotations_pb2 as _annotations_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class UsageBucket(_message.Message):
    __slots__ = ("day", "model", "requests", "errors", "prompt_tokens", "completion_tokens", "total_tokens", "cost_usd", "batch_requests", "batch_cost_usd")
    DAY_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COST_USD_FIELD_NUMBER: _ClassVar[int]
    BATCH_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    BATCH_COST_USD_FIELD_NUMBER: _ClassVar[int]
    day: str
    model: str
    requests: int
    errors: int
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    cost_usd: float
    batch_requests: int
    batch_cost_usd: float
    def __init__(self, day: _Optional[str] = ..., model: _Optional[str] = ..., requests: _Optional[int] = ..., errors: _Optional[int] = ..., prompt_tokens: _Optional[int] = ..., completion_tokens: _Optional[int] = ..., total_tokens: _Optional[int] = ..., cost_usd: _Optional[float] = ..., batch_requests: _Optional[int] = ..., batch_cost_usd: _Optional[float] = ...) -> None: ...

class BudgetStatus(_message.Message):
    __slots__ = ("budget_usd", "period", "period_start_time", "spent_usd", "reserved_usd", "remaining_usd")
    BUDGET_USD_FIELD_NUMBER: _ClassVar[int]
    PERIOD_FIELD_NUMBER: _ClassVar[int]
    PERIOD_START_TIME_FIELD_NUMBER: _ClassVar[int]
    SPENT_USD_FIELD_NUMBER: _ClassVar[int]
    RESERVED_USD_FIELD_NUMBER: _ClassVar[int]
    REMAINING_USD_FIELD_NUMBER: _ClassVar[int]
    budget_usd: float
    period: str
    period_start_time: int
    spent_usd: float
    reserved_usd: float
    remaining_usd: float
    def __init__(self, budget_usd: _Optional[float] = ..., period: _Optional[str] = ..., period_start_time: _Optional[int] = ..., spent_usd: _Optional[float] = ..., reserved_usd: _Optional[float] = ..., remaining_usd: _Optional[float] = ...) -> None: ...

class GetUsageRequest(_message.Message):
    __slots__ = ("start_time", "end_time", "key_id")
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    start_time: int
    end_time: int
    key_id: str
    def __init__(self, start_time: _Optional[int] = ..., end_time: _Optional[int] = ..., key_id: _Optional[str] = ...) -> None: ...

class GetUsageResponse(_message.Message):
    __slots__ = ("key_id", "key_name", "start_time", "end_time", "total", "by_model", "by_day", "by_day_and_model", "budget")
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    KEY_NAME_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    BY_MODEL_FIELD_NUMBER: _ClassVar[int]
    BY_DAY_FIELD_NUMBER: _ClassVar[int]
    BY_DAY_AND_MODEL_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    key_id: str
    key_name: str
    start_time: int
    end_time: int
    total: UsageBucket
    by_model: _containers.RepeatedCompositeFieldContainer[UsageBucket]
    by_day: _containers.RepeatedCompositeFieldContainer[UsageBucket]
    by_day_and_model: _containers.RepeatedCompositeFieldContainer[UsageBucket]
    budget: BudgetStatus
    def __init__(self, key_id: _Optional[str] = ..., key_name: _Optional[str] = ..., start_time: _Optional[int] = ..., end_time: _Optional[int] = ..., total: _Optional[_Union[UsageBucket, _Mapping]] = ..., by_model: _Optional[_Iterable[_Union[UsageBucket, _Mapping]]] = ..., by_day: _Optional[_Iterable[_Union[UsageBucket, _Mapping]]] = ..., by_day_and_model: _Optional[_Iterable[_Union[UsageBucket, _Mapping]]] = ..., budget: _Optional[_Union[BudgetStatus, _Mapping]] = ...) -> None: ...
