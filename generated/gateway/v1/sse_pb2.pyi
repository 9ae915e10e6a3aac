from google.protobuf import descriptor_pb2 as _descriptor_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class SseOptions(_message.Message):
    __slots__ = ("omit_done",)
    SSE_FIELD_NUMBER: _ClassVar[int]
    sse: _descriptor.FieldDescriptor
    OMIT_DONE_FIELD_NUMBER: _ClassVar[int]
    omit_done: bool
    def __init__(self, omit_done: _Optional[bool] = ...) -> None: ...
