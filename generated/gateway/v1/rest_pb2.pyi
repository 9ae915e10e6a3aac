from google.protobuf import descriptor_pb2 as _descriptor_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class RestOptions(_message.Message):
    __slots__ = ("strict", "refused_fields")
    REST_FIELD_NUMBER: _ClassVar[int]
    rest: _descriptor.FieldDescriptor
    STRICT_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELDS_FIELD_NUMBER: _ClassVar[int]
    strict: bool
    refused_fields: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, strict: _Optional[bool] = ..., refused_fields: _Optional[_Iterable[str]] = ...) -> None: ...
