"""RerankService: documents ranked against a query, on the first of a model's providers
that reranks, in Cohere's shape (Jina's is the same)."""

from __future__ import annotations

import uuid

from gateway.v1 import rerank_service_pb2 as pb
from google.protobuf import struct_pb2

from server.accounting.accounts import Accounts
from server.application.pipeline.operation_run import operate
from server.application.pipeline.state import Live
from server.base.call import Call
from server.base.errors import InvalidArgument
from server.base.rerank import RERANK, RerankRequest

# Cohere's limit on documents per request.
MAX_DOCUMENTS = 1000


class RerankService:
    def __init__(self, live: Live, accounts: Accounts) -> None:
        self.live = live
        self.accounts = accounts

    async def rerank_documents(
        self, request: pb.RerankDocumentsRequest, call: Call
    ) -> pb.RerankDocumentsResponse:
        state = self.live.current
        principal = await self.accounts.identify(call, "api", state.keys)
        wanted = validated(request)
        run = await operate(self.accounts, state, call, principal, request.model, RERANK, wanted)
        assert run.result is not None
        returned = request.return_documents
        # The upstream ranks; the answer keeps top_n even when an upstream sent more.
        ranked = run.result.results[: wanted.top_n]
        unit, quantity = run.billed()
        meta = pb.RerankMeta()
        meta.billed_units.SetInParent()
        if unit == "search_units":
            meta.billed_units.search_units = quantity
        return pb.RerankDocumentsResponse(
            id=str(uuid.uuid4()),
            results=[
                pb.RerankResult(
                    index=index,
                    relevance_score=score,
                    document=pb.RerankDocument(text=wanted.documents[index]) if returned else None,
                )
                for index, score in ranked
            ],
            meta=meta,
            model=run.model.id,
            usage=run.usage(),
        )


def validated(request: pb.RerankDocumentsRequest) -> RerankRequest:
    """Checks a RerankDocumentsRequest; InvalidArgument names the field at fault."""
    if not request.model:
        raise InvalidArgument.for_field("model", "is required")
    if not request.query.strip():
        raise InvalidArgument.for_field("query", "is required and must not be empty")
    if not request.documents:
        raise InvalidArgument.for_field("documents", "is required and must not be empty")
    if len(request.documents) > MAX_DOCUMENTS:
        raise InvalidArgument.for_field("documents", f"must hold at most {MAX_DOCUMENTS}")
    documents = tuple(_text(d, f"documents[{i}]") for i, d in enumerate(request.documents))
    top_n = request.top_n if request.HasField("top_n") else None
    if top_n is not None and top_n < 1:
        raise InvalidArgument.for_field("top_n", "must be at least 1")
    most = request.max_tokens_per_doc if request.HasField("max_tokens_per_doc") else None
    if most is not None and most < 1:
        raise InvalidArgument.for_field("max_tokens_per_doc", "must be at least 1")
    if top_n is not None:
        top_n = min(top_n, len(documents))
    return RerankRequest(request.query, documents, top_n, most)


def _text(value: struct_pb2.Value, at: str) -> str:
    """A document: a string, or an object with a `text` string."""
    kind = value.WhichOneof("kind")
    if kind == "string_value":
        text = value.string_value
    elif kind == "struct_value" and "text" in value.struct_value.fields:
        inner = value.struct_value.fields["text"]
        if inner.WhichOneof("kind") != "string_value":
            raise InvalidArgument.for_field(f"{at}.text", "must be a string")
        text = inner.string_value
    else:
        raise InvalidArgument.for_field(at, "must be a string or an object with a `text` string")
    if not text.strip():
        raise InvalidArgument.for_field(at, "must not be empty")
    return text
