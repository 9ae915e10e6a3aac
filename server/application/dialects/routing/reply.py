"""Hugging Face Text Generation Inference's format on interface B: a deployment's
answer as TGI gives it, so `huggingface_hub` and `text-generation` clients read it.

TGI streams one event per token, the last one also carrying `generated_text` and
`details`; it says why a generation ended as `length`, `eos_token` or `stop_sequence`.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from gateway.v1 import deployment_service_pb2 as deployment

from server.application.pipeline.answers import text_choice
from server.application.pipeline.engine import Run

# The gateway's finish reasons (OpenAI's) in TGI's words. `stop` is `eos_token` unless
# the upstream said which stop sequence ended the text (`stop_sequence`).
FINISH_REASONS = {"length": "length", "stop": "eos_token"}


def finish_reason(run: Run) -> str:
    if run.finish_reason == "stop" and run.stop_sequence is not None:
        return "stop_sequence"  # the upstream said a stop sequence ended it
    return FINISH_REASONS.get(run.finish_reason, run.finish_reason)


async def tokens(run: Run) -> AsyncIterator[tuple[deployment.GeneratedToken, bool]]:
    """(token, is_last) for every fragment of the generation, holding one back so
    the last is known. A generation without text still ends with one (empty, special)
    token, as a model's end-of-sequence token is."""
    held: str | None = None
    index = 0
    async for text in run.deltas():
        if held is not None:
            yield deployment.GeneratedToken(id=index, text=held), False
            index += 1
        held = text
    if held is None:
        yield deployment.GeneratedToken(id=index, text="", special=True), True
    else:
        yield deployment.GeneratedToken(id=index, text=held), True


def text_details(run: Run, fragments: list[str]) -> deployment.TextGenerationDetails:
    """TGI's `details` of a finished (unary) generation of these text fragments."""
    return deployment.TextGenerationDetails(
        finish_reason=finish_reason(run),
        generated_tokens=run.counts().completion_tokens,
        tokens=[deployment.GeneratedToken(id=i, text=text) for i, text in enumerate(fragments)],
    )


def generation_details(run: Run) -> deployment.GenerationDetails:
    """TGI's `details` of a finished generation, without its tokens."""
    return deployment.GenerationDetails(
        finish_reason=finish_reason(run),
        generated_tokens=run.counts().completion_tokens,
    )


async def tgi_chunks(
    run: Run, start: dict[str, Any], include_usage: bool
) -> AsyncGenerator[deployment.StreamInvokeDeploymentResponse, None]:
    """An `inputs` stream as TGI sends it: a token in every chunk, the last one also
    carrying the finish reason, generated_text and details."""
    async for token, last in tokens(run):
        choice = text_choice(token.text, run.finish_reason if last else None)
        chunk = deployment.StreamInvokeDeploymentResponse(**start, choices=[choice], token=token)
        if last:
            chunk.generated_text = run.generated_text
            chunk.details.CopyFrom(generation_details(run))
            if include_usage:
                chunk.usage.CopyFrom(run.usage())
        yield chunk
