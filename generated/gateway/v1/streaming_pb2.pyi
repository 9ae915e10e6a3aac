from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class StreamOptions(_message.Message):
    __slots__ = ("include_usage",)
    INCLUDE_USAGE_FIELD_NUMBER: _ClassVar[int]
    include_usage: bool
    def __init__(self, include_usage: _Optional[bool] = ...) -> None: ...
