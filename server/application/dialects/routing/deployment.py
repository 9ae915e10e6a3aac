"""DeploymentService: named deployments on interface B, in the common format or Hugging
Face TGI's (`inputs`, and TGI's own generate routes)."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from gateway.v1 import deployment_service_pb2 as deployment

from server.accounting.accounts import Accounts
from server.application.dialects.chat.reply import head, text_choice
from server.application.dialects.routing import reply as textgen
from server.application.pipeline.engine import Run
from server.application.pipeline.generations import Generations
from server.application.pipeline.state import Live
from server.base.call import Call


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
        run, hf_format = await self.generations.for_deployment(request, call)
        text = await run.text()
        response = deployment.InvokeDeploymentResponse(
            **head(call, run, "text_completion"),
            deployment_id=request.deployment_id,
            choices=[text_choice(text, run.finish_reason)],
            usage=run.usage(),
        )
        if hf_format:
            response.generated_text = text
            response.details.CopyFrom(_details(run))
        return response

    async def stream_invoke_deployment(
        self, request: deployment.StreamInvokeDeploymentRequest, call: Call
    ) -> AsyncGenerator[deployment.StreamInvokeDeploymentResponse, None]:
        run, hf_format = await self.generations.for_deployment(request, call)
        start = head(call, run, "text_completion", deployment_id=request.deployment_id)
        if hf_format:
            async for chunk in _tgi_chunks(run, start, request.stream_options.include_usage):
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
        run, _ = await self.generations.for_deployment(textgen.as_invocation(request), call)
        fragments = [text async for text in run.deltas()]
        return deployment.GenerateTextResponse(
            generations=[
                deployment.GeneratedText(
                    generated_text=run.generated_text, details=textgen.details(run, fragments)
                )
            ]
        )

    async def stream_generate_text(
        self, request: deployment.StreamGenerateTextRequest, call: Call
    ) -> AsyncGenerator[deployment.StreamGenerateTextResponse, None]:
        run, _ = await self.generations.for_deployment(textgen.as_invocation(request), call)
        async for token, last in textgen.tokens(run):
            # TGI numbers its events from 1.
            event = deployment.StreamGenerateTextResponse(index=token.id + 1, token=token)
            if last:
                event.generated_text = run.generated_text
                event.details.CopyFrom(_details(run))
            yield event


def _details(run: Run) -> deployment.GenerationDetails:
    return deployment.GenerationDetails(
        finish_reason=textgen.finish_reason(run),
        generated_tokens=run.counts().completion_tokens,
    )


async def _tgi_chunks(
    run: Run, start: dict[str, Any], include_usage: bool
) -> AsyncGenerator[deployment.StreamInvokeDeploymentResponse, None]:
    """An `inputs` stream as TGI sends it: a token in every chunk, the last one also
    carrying the finish reason, generated_text and details."""
    async for token, last in textgen.tokens(run):
        choice = text_choice(token.text, run.finish_reason if last else None)
        chunk = deployment.StreamInvokeDeploymentResponse(**start, choices=[choice], token=token)
        if last:
            chunk.generated_text = run.generated_text
            chunk.details.CopyFrom(_details(run))
            if include_usage:
                chunk.usage.CopyFrom(run.usage())
        yield chunk
