from google.protobuf import descriptor_pb2 as _descriptor_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ErrorFormat(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ERROR_FORMAT_UNSPECIFIED: _ClassVar[ErrorFormat]
    ERROR_FORMAT_ANTHROPIC: _ClassVar[ErrorFormat]
    ERROR_FORMAT_OPENAI_RESPONSES: _ClassVar[ErrorFormat]
    ERROR_FORMAT_GOOGLE: _ClassVar[ErrorFormat]
ERROR_FORMAT_UNSPECIFIED: ErrorFormat
ERROR_FORMAT_ANTHROPIC: ErrorFormat
ERROR_FORMAT_OPENAI_RESPONSES: ErrorFormat
ERROR_FORMAT_GOOGLE: ErrorFormat

class RestOptions(_message.Message):
    __slots__ = ("strict", "refused_fields", "error_format", "forwarded_headers", "key_query_parameter", "refuse_unknown")
    REST_FIELD_NUMBER: _ClassVar[int]
    rest: _descriptor.FieldDescriptor
    STRICT_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELDS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FORMAT_FIELD_NUMBER: _ClassVar[int]
    FORWARDED_HEADERS_FIELD_NUMBER: _ClassVar[int]
    KEY_QUERY_PARAMETER_FIELD_NUMBER: _ClassVar[int]
    REFUSE_UNKNOWN_FIELD_NUMBER: _ClassVar[int]
    strict: bool
    refused_fields: _containers.RepeatedScalarFieldContainer[str]
    error_format: ErrorFormat
    forwarded_headers: _containers.RepeatedScalarFieldContainer[str]
    key_query_parameter: str
    refuse_unknown: bool
    def __init__(self, strict: _Optional[bool] = ..., refused_fields: _Optional[_Iterable[str]] = ..., error_format: _Optional[_Union[ErrorFormat, str]] = ..., forwarded_headers: _Optional[_Iterable[str]] = ..., key_query_parameter: _Optional[str] = ..., refuse_unknown: _Optional[bool] = ...) -> None: ...

class RestMethodOptions(_message.Message):
    __slots__ = ("when_header", "when_query")
    REST_METHOD_FIELD_NUMBER: _ClassVar[int]
    rest_method: _descriptor.FieldDescriptor
    WHEN_HEADER_FIELD_NUMBER: _ClassVar[int]
    WHEN_QUERY_FIELD_NUMBER: _ClassVar[int]
    when_header: str
    when_query: str
    def __init__(self, when_header: _Optional[str] = ..., when_query: _Optional[str] = ...) -> None: ...
