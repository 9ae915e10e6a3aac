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

class RerankResult(_message.Message):
    __slots__ = ("index", "relevance_score", "document")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    RELEVANCE_SCORE_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_FIELD_NUMBER: _ClassVar[int]
    index: int
    relevance_score: float
    document: RerankDocument
    def __init__(self, index: _Optional[int] = ..., relevance_score: _Optional[float] = ..., document: _Optional[_Union[RerankDocument, _Mapping]] = ...) -> None: ...

class RerankDocument(_message.Message):
    __slots__ = ("text",)
    TEXT_FIELD_NUMBER: _ClassVar[int]
    text: str
    def __init__(self, text: _Optional[str] = ...) -> None: ...

class RerankBilledUnits(_message.Message):
    __slots__ = ("search_units",)
    SEARCH_UNITS_FIELD_NUMBER: _ClassVar[int]
    search_units: float
    def __init__(self, search_units: _Optional[float] = ...) -> None: ...

class RerankMeta(_message.Message):
    __slots__ = ("billed_units",)
    BILLED_UNITS_FIELD_NUMBER: _ClassVar[int]
    billed_units: RerankBilledUnits
    def __init__(self, billed_units: _Optional[_Union[RerankBilledUnits, _Mapping]] = ...) -> None: ...

class RerankDocumentsRequest(_message.Message):
    __slots__ = ("model", "query", "documents", "top_n", "return_documents", "max_tokens_per_doc")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    TOP_N_FIELD_NUMBER: _ClassVar[int]
    RETURN_DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_PER_DOC_FIELD_NUMBER: _ClassVar[int]
    model: str
    query: str
    documents: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Value]
    top_n: int
    return_documents: bool
    max_tokens_per_doc: int
    def __init__(self, model: _Optional[str] = ..., query: _Optional[str] = ..., documents: _Optional[_Iterable[_Union[_struct_pb2.Value, _Mapping]]] = ..., top_n: _Optional[int] = ..., return_documents: _Optional[bool] = ..., max_tokens_per_doc: _Optional[int] = ...) -> None: ...

class RerankDocumentsResponse(_message.Message):
    __slots__ = ("id", "results", "meta", "model", "usage")
    ID_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    META_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    id: str
    results: _containers.RepeatedCompositeFieldContainer[RerankResult]
    meta: RerankMeta
    model: str
    usage: _usage_pb2.Usage
    def __init__(self, id: _Optional[str] = ..., results: _Optional[_Iterable[_Union[RerankResult, _Mapping]]] = ..., meta: _Optional[_Union[RerankMeta, _Mapping]] = ..., model: _Optional[str] = ..., usage: _Optional[_Union[_usage_pb2.Usage, _Mapping]] = ...) -> None: ...
