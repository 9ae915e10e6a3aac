"""EmbeddingService: embeddings, on the first of a model's providers that can embed."""

from __future__ import annotations

import base64
import struct
from collections.abc import Sequence

from gateway.v1 import embedding_service_pb2 as embeddings
from google.protobuf import struct_pb2

from server.accounting.accounts import Accounts
from server.application import validation
from server.application.pipeline.operation_run import operate
from server.application.pipeline.state import Live
from server.base.call import Call
from server.base.embedding import EMBEDDINGS


class EmbeddingService:
    def __init__(self, live: Live, accounts: Accounts) -> None:
        self.live = live
        self.accounts = accounts

    async def create_embeddings(
        self, request: embeddings.CreateEmbeddingsRequest, call: Call
    ) -> embeddings.CreateEmbeddingsResponse:
        state = self.live.current
        principal = await self.accounts.identify(call, "api", state.keys)
        wanted, encoding = validation.embeddings(request)
        run = await operate(
            self.accounts, state, call, principal, request.model, EMBEDDINGS, wanted
        )
        assert run.result is not None
        return embeddings.CreateEmbeddingsResponse(
            object="list",
            data=[
                embeddings.Embedding(index=i, object="embedding", embedding=encode(v, encoding))
                for i, v in enumerate(run.result.vectors)
            ],
            model=run.model.id,
            usage=run.usage(),
        )


def encode(vector: Sequence[float], encoding: str) -> struct_pb2.Value:
    """A vector as OpenAI writes it: numbers, or base64 of little-endian float32."""
    if encoding == "base64":
        packed = struct.pack(f"<{len(vector)}f", *vector)
        return struct_pb2.Value(string_value=base64.b64encode(packed).decode())
    numbers = struct_pb2.Value()
    numbers.list_value.extend(vector)
    return numbers
