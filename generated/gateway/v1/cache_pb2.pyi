from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class CacheControl(_message.Message):
    __slots__ = ("type", "ttl")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    type: str
    ttl: str
    def __init__(self, type: _Optional[str] = ..., ttl: _Optional[str] = ...) -> None: ...
