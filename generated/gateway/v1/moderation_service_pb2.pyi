from gateway.v1 import rest_pb2 as _rest_pb2
from gateway.v1 import usage_pb2 as _usage_pb2
from google.api import annotations_pb2 as _annotations_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ModerationResult(_message.Message):
    __slots__ = ("flagged", "categories", "category_scores", "category_applied_input_types")
    class CategoriesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: bool
        def __init__(self, key: _Optional[str] = ..., value: _Optional[bool] = ...) -> None: ...
    class CategoryScoresEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    FLAGGED_FIELD_NUMBER: _ClassVar[int]
    CATEGORIES_FIELD_NUMBER: _ClassVar[int]
    CATEGORY_SCORES_FIELD_NUMBER: _ClassVar[int]
    CATEGORY_APPLIED_INPUT_TYPES_FIELD_NUMBER: _ClassVar[int]
    flagged: bool
    categories: _containers.ScalarMap[str, bool]
    category_scores: _containers.ScalarMap[str, float]
    category_applied_input_types: _struct_pb2.Struct
    def __init__(self, flagged: _Optional[bool] = ..., categories: _Optional[_Mapping[str, bool]] = ..., category_scores: _Optional[_Mapping[str, float]] = ..., category_applied_input_types: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class CreateModerationRequest(_message.Message):
    __slots__ = ("model", "input")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    model: str
    input: _struct_pb2.Value
    def __init__(self, model: _Optional[str] = ..., input: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class CreateModerationResponse(_message.Message):
    __slots__ = ("id", "model", "results", "usage")
    ID_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    id: str
    model: str
    results: _containers.RepeatedCompositeFieldContainer[ModerationResult]
    usage: _usage_pb2.Usage
    def __init__(self, id: _Optional[str] = ..., model: _Optional[str] = ..., results: _Optional[_Iterable[_Union[ModerationResult, _Mapping]]] = ..., usage: _Optional[_Union[_usage_pb2.Usage, _Mapping]] = ...) -> None: ...
