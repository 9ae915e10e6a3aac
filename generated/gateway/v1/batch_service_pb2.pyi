from google.api import annotations_pb2 as _annotations_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CreateBatchRequest(_message.Message):
    __slots__ = ("input_jsonl", "input_file_id", "endpoint", "completion_window", "metadata")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    INPUT_JSONL_FIELD_NUMBER: _ClassVar[int]
    INPUT_FILE_ID_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_WINDOW_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    input_jsonl: bytes
    input_file_id: str
    endpoint: str
    completion_window: str
    metadata: _containers.ScalarMap[str, str]
    def __init__(self, input_jsonl: _Optional[bytes] = ..., input_file_id: _Optional[str] = ..., endpoint: _Optional[str] = ..., completion_window: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ...) -> None: ...

class CreateBatchResponse(_message.Message):
    __slots__ = ("batch",)
    BATCH_FIELD_NUMBER: _ClassVar[int]
    batch: BatchJob
    def __init__(self, batch: _Optional[_Union[BatchJob, _Mapping]] = ...) -> None: ...

class GetBatchRequest(_message.Message):
    __slots__ = ("batch_id", "include_results")
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_RESULTS_FIELD_NUMBER: _ClassVar[int]
    batch_id: str
    include_results: bool
    def __init__(self, batch_id: _Optional[str] = ..., include_results: _Optional[bool] = ...) -> None: ...

class GetBatchResponse(_message.Message):
    __slots__ = ("batch", "output_jsonl", "error_jsonl")
    BATCH_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_JSONL_FIELD_NUMBER: _ClassVar[int]
    ERROR_JSONL_FIELD_NUMBER: _ClassVar[int]
    batch: BatchJob
    output_jsonl: bytes
    error_jsonl: bytes
    def __init__(self, batch: _Optional[_Union[BatchJob, _Mapping]] = ..., output_jsonl: _Optional[bytes] = ..., error_jsonl: _Optional[bytes] = ...) -> None: ...

class ListBatchesRequest(_message.Message):
    __slots__ = ("limit", "after")
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    limit: int
    after: str
    def __init__(self, limit: _Optional[int] = ..., after: _Optional[str] = ...) -> None: ...

class ListBatchesResponse(_message.Message):
    __slots__ = ("batches", "has_more")
    BATCHES_FIELD_NUMBER: _ClassVar[int]
    HAS_MORE_FIELD_NUMBER: _ClassVar[int]
    batches: _containers.RepeatedCompositeFieldContainer[BatchJob]
    has_more: bool
    def __init__(self, batches: _Optional[_Iterable[_Union[BatchJob, _Mapping]]] = ..., has_more: _Optional[bool] = ...) -> None: ...

class CancelBatchRequest(_message.Message):
    __slots__ = ("batch_id",)
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    batch_id: str
    def __init__(self, batch_id: _Optional[str] = ...) -> None: ...

class CancelBatchResponse(_message.Message):
    __slots__ = ("batch",)
    BATCH_FIELD_NUMBER: _ClassVar[int]
    batch: BatchJob
    def __init__(self, batch: _Optional[_Union[BatchJob, _Mapping]] = ...) -> None: ...

class BatchJob(_message.Message):
    __slots__ = ("id", "status", "endpoint", "model", "input_file_id", "output_file_id", "error_file_id", "created_at", "expires_at", "request_counts", "usage", "metadata")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    INPUT_FILE_ID_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FILE_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FILE_ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    REQUEST_COUNTS_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    id: str
    status: str
    endpoint: str
    model: str
    input_file_id: str
    output_file_id: str
    error_file_id: str
    created_at: int
    expires_at: int
    request_counts: BatchRequestCounts
    usage: BatchUsage
    metadata: _containers.ScalarMap[str, str]
    def __init__(self, id: _Optional[str] = ..., status: _Optional[str] = ..., endpoint: _Optional[str] = ..., model: _Optional[str] = ..., input_file_id: _Optional[str] = ..., output_file_id: _Optional[str] = ..., error_file_id: _Optional[str] = ..., created_at: _Optional[int] = ..., expires_at: _Optional[int] = ..., request_counts: _Optional[_Union[BatchRequestCounts, _Mapping]] = ..., usage: _Optional[_Union[BatchUsage, _Mapping]] = ..., metadata: _Optional[_Mapping[str, str]] = ...) -> None: ...

class BatchRequestCounts(_message.Message):
    __slots__ = ("total", "completed", "failed")
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    total: int
    completed: int
    failed: int
    def __init__(self, total: _Optional[int] = ..., completed: _Optional[int] = ..., failed: _Optional[int] = ...) -> None: ...

class BatchUsage(_message.Message):
    __slots__ = ("input_tokens", "output_tokens", "total_tokens", "cost_usd")
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COST_USD_FIELD_NUMBER: _ClassVar[int]
    input_tokens: int
    output_tokens: int
    total_tokens: int
    cost_usd: float
    def __init__(self, input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., total_tokens: _Optional[int] = ..., cost_usd: _Optional[float] = ...) -> None: ...
