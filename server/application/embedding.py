"""EmbeddingService: embeddings, on the first of a model's providers that can embed."""

from __future__ import annotations

from gateway.v1 import embedding_service_pb2 as embeddings

from server.accounting.accounts import Accounts
from server.application import validation
from server.application.pipeline.embedding_run import EmbeddingRun, embedders, encode
from server.application.pipeline.state import Live
from server.base.call import Call
from server.base.costs import input_cost
from server.base.embedding import estimate_tokens


class EmbeddingService:
    def __init__(self, live: Live, accounts: Accounts) -> None:
        self.live = live
        self.accounts = accounts

    async def create_embeddings(
        self, request: embeddings.CreateEmbeddingsRequest, call: Call
    ) -> embeddings.CreateEmbeddingsResponse:
        state = self.live.current
        await self.accounts.identify(call, "api", state.keys)
        call.record.asked_for(request.model)
        wanted, encoding = validation.embeddings(request)
        model = state.catalog.model(request.model)
        upstreams = embedders(model, state.catalog.upstreams[model.id])
        # Input tokens only: an embedding generates none.
        prompt = estimate_tokens(wanted)
        await self.accounts.reserve(call, prompt, lambda: input_cost(model.price, prompt))
        run = EmbeddingRun(upstreams, wanted, call.deadline)
        call.record.ran(run)
        result = await run.open(f"model {model.id}")
        return embeddings.CreateEmbeddingsResponse(
            object="list",
            data=[
                embeddings.Embedding(index=i, object="embedding", embedding=encode(v, encoding))
                for i, v in enumerate(result.vectors)
            ],
            model=model.id,
            usage=run.usage(),
        )
