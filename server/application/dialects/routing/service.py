"""RouterService and DeploymentService: interface B, the model chosen by profile
(`/v1/infer`) or named by a deployment, in the common format or Hugging Face TGI's
(`inputs`, and TGI's own generate routes)."""

from __future__ import annotations

from collections.abc import AsyncGenerator

from gateway.v1 import deployment_service_pb2 as deployment
from gateway.v1 import router_service_pb2 as router

from server.accounting.accounts import Accounts
from server.application.dialects.routing import reply as tgi
from server.application.dialects.routing import request as translation
from server.application.dialects.routing.request import InferRequest, InvokeRequest
from server.application.pipeline.answers import head, text_choice
from server.application.pipeline.engine import Run
from server.application.pipeline.generations import Generations
from server.application.pipeline.state import Live
from server.base.call import Call


class RouterService:
    def __init__(self, generations: Generations) -> None:
        self.generations = generations

    async def infer(self, request: router.InferRequest, call: Call) -> router.InferResponse:
        run, route = await self._run(request, call)
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
        run, route = await self._run(request, call)
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

    async def _run(self, request: InferRequest, call: Call) -> tuple[Run, router.RouteDecision]:
        admitted = await self.generations.admit(call, "router")
        generation, profile, tags = translation.infer(request)
        return await self.generations.route(admitted, profile, generation, tags)


class DeploymentService:
    def __init__(self, live: Live, accounts: Accounts, generations: Generations) -> None:
        self.live = live
        self.accounts = accounts
        self.generations = generations

    async def list_deployments(
        self, request: deployment.ListDeploymentsRequest, call: Call
    ) -> deployment.ListDeploymentsResponse:
        state = self.live.current
        await self.accounts.admit(call, "router", state.keys)
        return deployment.ListDeploymentsResponse(
            object="list",
            data=[
                deployment.Deployment(
                    id=d.id, object="deployment", model=d.model, description=d.description
                )
                for d in state.config.deployments
            ],
        )

    async def invoke_deployment(
        self, request: deployment.InvokeDeploymentRequest, call: Call
    ) -> deployment.InvokeDeploymentResponse:
        run, hf_format = await self._run(request, call)
        text = await run.text()
        response = deployment.InvokeDeploymentResponse(
            **head(call, run, "text_completion"),
            deployment_id=request.deployment_id,
            choices=[text_choice(text, run.finish_reason)],
            usage=run.usage(),
        )
        if hf_format:
            response.generated_text = text
            response.details.CopyFrom(tgi.generation_details(run))
        return response

    async def stream_invoke_deployment(
        self, request: deployment.StreamInvokeDeploymentRequest, call: Call
    ) -> AsyncGenerator[deployment.StreamInvokeDeploymentResponse, None]:
        run, hf_format = await self._run(request, call)
        start = head(call, run, "text_completion", deployment_id=request.deployment_id)
        if hf_format:
            async for chunk in tgi.tgi_chunks(run, start, request.stream_options.include_usage):
                yield chunk
            return
        async for text in run.deltas():
            yield deployment.StreamInvokeDeploymentResponse(**start, choices=[text_choice(text)])
        yield deployment.StreamInvokeDeploymentResponse(
            **start, choices=[text_choice("", run.finish_reason)]
        )
        if request.stream_options.include_usage:
            yield deployment.StreamInvokeDeploymentResponse(**start, usage=run.usage())

    async def generate_text(
        self, request: deployment.GenerateTextRequest, call: Call
    ) -> deployment.GenerateTextResponse:
        run, _ = await self._run(translation.as_invocation(request), call)
        fragments = [text async for text in run.deltas()]
        return deployment.GenerateTextResponse(
            generations=[
                deployment.GeneratedText(
                    generated_text=run.generated_text, details=tgi.text_details(run, fragments)
                )
            ]
        )

    async def stream_generate_text(
        self, request: deployment.StreamGenerateTextRequest, call: Call
    ) -> AsyncGenerator[deployment.StreamGenerateTextResponse, None]:
        run, _ = await self._run(translation.as_invocation(request), call)
        async for token, last in tgi.tokens(run):
            # TGI numbers its events from 1.
            event = deployment.StreamGenerateTextResponse(index=token.id + 1, token=token)
            if last:
                event.generated_text = run.generated_text
                event.details.CopyFrom(tgi.generation_details(run))
            yield event

    async def _run(self, request: InvokeRequest, call: Call) -> tuple[Run, bool]:
        """A run of the deployment; and whether the request came in TGI's `inputs` form."""
        admitted = await self.generations.admit(call, "router")
        generation, hf_format = translation.invocation(request)
        return await self.generations.deploy(admitted, request.deployment_id, generation), hf_format
