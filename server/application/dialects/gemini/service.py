"""GeminiService: Google's Gemini API over the gateway's one generation.

The request is translated (`request.py`) and run as every generation is (keys,
limits, budget reserved on the output bound, routing, failover, ledger); the answer is
written back as Gemini writes it (`reply.py`). A stream's first chunk waits for the
first event of the upstream, so failover stays possible until then.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Sequence

from gateway.v1 import gemini_pb2 as pb
from gateway.v1 import gemini_service_pb2 as service

from server.accounting.accounts import Accounts
from server.application.dialects.gemini import reply as replies
from server.application.dialects.gemini import request as translation
from server.application.dialects.gemini.reply import Reply
from server.application.pipeline.engine import Run
from server.application.pipeline.generations import Generations
from server.application.pipeline.operation_run import operate
from server.application.pipeline.state import Live
from server.base import tokens
from server.base.call import Call
from server.base.embedding import EMBEDDINGS, EmbeddingRequest
from server.base.errors import InvalidArgument, UpstreamError
from server.base.generation import Relayed, TokenCounter, serves
from server.base.pipeline import Encoded
from server.base.throttle import warn_throttled

log = logging.getLogger(__name__)

MAX_BATCH = 100
MAX_DIMENSIONS = 65_536


class GeminiService:
    def __init__(self, generations: Generations, live: Live, accounts: Accounts) -> None:
        self.generations = generations
        self.live = live
        self.accounts = accounts

    async def generate_content(
        self, request: service.GenerateContentRequest, call: Call
    ) -> service.GenerateContentResponse:
        run = await self._run(request, call)
        reply = Reply(service.GenerateContentResponse, call.request_id, _shown(request), False)
        async for fragment in run.stream():
            reply.feed(fragment, run.model.id)
        answer = reply.close(run)
        assert isinstance(answer, service.GenerateContentResponse)
        return answer

    async def stream_generate_content(
        self, request: service.StreamGenerateContentRequest, call: Call
    ) -> AsyncGenerator[service.StreamGenerateContentResponse | Encoded, None]:
        run = await self._run(request, call, relay=call.writes_json)
        kind = service.StreamGenerateContentResponse
        reply = Reply(kind, call.request_id, _shown(request), True)
        async for fragment in run.stream():
            if type(fragment) is Relayed:
                if (relayed := reply.relayed(fragment.events, run.model.id)) is not None:
                    yield relayed
                continue
            for chunk in reply.feed(fragment, run.model.id):
                assert isinstance(chunk, kind)
                yield chunk
        last = reply.close(run)
        assert isinstance(last, kind)
        yield last

    async def _run(
        self, request: translation.GenerateRequest, call: Call, relay: bool = False
    ) -> Run:
        model = translation.model_id(request.model)
        admitted = await self.generations.admit(call, "api", model)
        generation = translation.generation(request)
        if relay:  # a Gemini upstream may stream its chunks as they are
            generation = generation.relayed_as(translation.DIALECT)
        return await self.generations.run(admitted, model, generation)

    async def count_tokens(
        self, request: service.CountTokensRequest, call: Call
    ) -> service.CountTokensResponse:
        """A Gemini provider of the model counts; when none can (or it fails), the
        gateway estimates as it does for rate limits."""
        state = self.live.current
        await self.accounts.admit(call, "api", state.keys)
        whole = request.generate_content_request
        if request.contents and request.HasField("generate_content_request"):
            raise InvalidArgument.for_field(
                "generateContentRequest", "give contents or generateContentRequest, not both"
            )
        if not request.HasField("generate_content_request"):
            whole = service.GenerateContentRequest(contents=request.contents)
        generation = translation.generation(whole)
        model = state.catalog.model(translation.model_id(request.model))
        for upstream in state.catalog.upstreams[model.id]:
            provider = upstream.provider
            native = serves(translation.DIALECT) in upstream.capabilities
            if upstream.usable and native and isinstance(provider, TokenCounter):
                try:
                    counted = await provider.count_tokens(generation)
                except UpstreamError as exc:
                    warn_throttled(log, f"count:{upstream.id}",
                                   f"{exc.message}; the token count is estimated")  # fmt: skip
                    break
                return service.CountTokensResponse(total_tokens=counted)
        return service.CountTokensResponse(total_tokens=tokens.estimate_prompt(generation))

    async def embed_content(
        self, request: service.EmbedContentRequest, call: Call
    ) -> service.EmbedContentResponse:
        vectors = await self._embed(call, request.model, [request], "")
        return service.EmbedContentResponse(embedding=vectors[0])

    async def batch_embed_contents(
        self, request: service.BatchEmbedContentsRequest, call: Call
    ) -> service.BatchEmbedContentsResponse:
        vectors = await self._embed(call, request.model, request.requests, "requests")
        return service.BatchEmbedContentsResponse(embeddings=vectors)

    async def _embed(
        self,
        call: Call,
        model: str,
        requests: Sequence[service.EmbedContentRequest],
        where: str,
    ) -> list[pb.GeminiContentEmbedding]:
        state = self.live.current
        principal = await self.accounts.identify(call, "api", state.keys)
        if not 1 <= len(requests) <= MAX_BATCH:
            raise InvalidArgument.for_field(where, f"must hold 1 to {MAX_BATCH} requests")
        name = translation.model_id(model)
        texts: list[str] = []
        dimensions: set[int | None] = set()
        for i, one in enumerate(requests):
            at = f"{where}[{i}]." if where else ""
            if where and one.model and translation.model_id(one.model) != name:
                raise InvalidArgument.for_field(f"{at}model", "must be the path's model")
            texts.append(_text(one, at))
            dimensions.add(_dimensions(one, at))
        if len(dimensions) > 1:
            raise InvalidArgument.for_field(
                f"{where}[0].outputDimensionality", "must be the same in every request"
            )
        wanted = EmbeddingRequest(tuple(texts), dimensions.pop())
        run = await operate(self.accounts, state, call, principal, name, EMBEDDINGS, wanted)
        assert run.result is not None
        return [pb.GeminiContentEmbedding(values=v) for v in run.result.vectors]

    async def list_gemini_models(
        self, request: service.ListGeminiModelsRequest, call: Call
    ) -> service.ListGeminiModelsResponse:
        state = self.live.current
        await self.accounts.admit(call, "api", state.keys)
        listed = [self._model(m.id) for m in state.config.models]
        return replies.page(listed, request)

    async def get_gemini_model(
        self, request: service.GetGeminiModelRequest, call: Call
    ) -> service.GetGeminiModelResponse:
        state = self.live.current
        await self.accounts.admit(call, "api", state.keys)
        model = state.catalog.model(translation.model_id(request.model))
        return service.GetGeminiModelResponse(model=self._model(model.id))

    def _model(self, model_id: str) -> pb.GeminiModel:
        catalog = self.live.current.catalog
        model = catalog.model(model_id)
        embeds = EMBEDDINGS.name in model.serves and any(
            EMBEDDINGS.serves(u.provider) for u in catalog.upstreams[model_id]
        )
        return replies.model(model, embeds)


def _shown(request: translation.GenerateRequest) -> bool:
    return request.generation_config.thinking_config.include_thoughts


def _text(request: service.EmbedContentRequest, at: str) -> str:
    if not request.HasField("content") or not request.content.parts:
        raise InvalidArgument.for_field(f"{at}content", "is required, with text parts")
    texts = []
    for j, part in enumerate(request.content.parts):
        if not part.HasField("text"):
            raise InvalidArgument.for_field(f"{at}content.parts[{j}].text", "only text embeds")
        texts.append(part.text)
    text = "\n".join(texts)
    if not text:
        raise InvalidArgument.for_field(f"{at}content", "must not be empty")
    return text


def _dimensions(request: service.EmbedContentRequest, at: str) -> int | None:
    if not request.HasField("output_dimensionality"):
        return None
    value = request.output_dimensionality
    if not 1 <= value <= MAX_DIMENSIONS:
        raise InvalidArgument.for_field(
            f"{at}outputDimensionality", f"must be between 1 and {MAX_DIMENSIONS}"
        )
    return value
