from google.protobuf import descriptor_pb2 as _descriptor_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class SseOptions(_message.Message):
    __slots__ = ("omit_done", "event_name_field", "keepalive_event", "json_array_unless_alt_sse", "json_lines_field")
    SSE_FIELD_NUMBER: _ClassVar[int]
    sse: _descriptor.FieldDescriptor
    OMIT_DONE_FIELD_NUMBER: _ClassVar[int]
    EVENT_NAME_FIELD_FIELD_NUMBER: _ClassVar[int]
    KEEPALIVE_EVENT_FIELD_NUMBER: _ClassVar[int]
    JSON_ARRAY_UNLESS_ALT_SSE_FIELD_NUMBER: _ClassVar[int]
    JSON_LINES_FIELD_FIELD_NUMBER: _ClassVar[int]
    omit_done: bool
    event_name_field: str
    keepalive_event: str
    json_array_unless_alt_sse: bool
    json_lines_field: str
    def __init__(self, omit_done: _Optional[bool] = ..., event_name_field: _Optional[str] = ..., keepalive_event: _Optional[str] = ..., json_array_unless_alt_sse: _Optional[bool] = ..., json_lines_field: _Optional[str] = ...) -> None: ...
