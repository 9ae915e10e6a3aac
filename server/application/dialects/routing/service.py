"""RouterService: interface B's routed inference, the model chosen by profile."""

from __future__ import annotations

from collections.abc import AsyncGenerator

from gateway.v1 import router_service_pb2 as router

from server.application.dialects.chat.reply import head, text_choice
from server.application.pipeline.generations import Generations
from server.base.call import Call


class RouterService:
    def __init__(self, generations: Generations) -> None:
        self.generations = generations

    async def infer(self, request: router.InferRequest, call: Call) -> router.InferResponse:
        run, route = await self.generations.for_profile(request, call)
        text = await run.text()
        return router.InferResponse(
            **head(call, run, "text_completion"),
            choices=[text_choice(text, run.finish_reason)],
            usage=run.usage(),
            route=route,
        )

    async def stream_infer(
        self, request: router.StreamInferRequest, call: Call
    ) -> AsyncGenerator[router.StreamInferResponse, None]:
        run, route = await self.generations.for_profile(request, call)
        start = head(call, run, "text_completion")
        first = True
        async for text in run.deltas():
            chunk = router.StreamInferResponse(**start, choices=[text_choice(text)])
            if first:
                chunk.route.CopyFrom(route)
                first = False
            yield chunk
        last = router.StreamInferResponse(**start, choices=[text_choice("", run.finish_reason)])
        if first:
            last.route.CopyFrom(route)
        yield last
        if request.stream_options.include_usage:
            yield router.StreamInferResponse(**start, usage=run.usage())
