from google.api import annotations_pb2 as _annotations_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class SubmitFeedbackRequest(_message.Message):
    __slots__ = ("request_id", "score", "label", "comment")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    COMMENT_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    score: float
    label: str
    comment: str
    def __init__(self, request_id: _Optional[str] = ..., score: _Optional[float] = ..., label: _Optional[str] = ..., comment: _Optional[str] = ...) -> None: ...

class SubmitFeedbackResponse(_message.Message):
    __slots__ = ("request_id", "score")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    score: float
    def __init__(self, request_id: _Optional[str] = ..., score: _Optional[float] = ...) -> None: ...
