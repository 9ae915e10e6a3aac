"""EmbeddingService: embeddings, on the first of a model's providers that can embed."""

from __future__ import annotations

from gateway.v1 import embedding_service_pb2 as embeddings

from server.accounting.accounts import Accounts
from server.application import validation
from server.application.pipeline.embedding_run import embed, encode
from server.application.pipeline.state import Live
from server.base.call import Call


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
        run = await embed(self.accounts, state, call, principal, request.model, wanted)
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
