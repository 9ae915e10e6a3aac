"""CompletionService: text completions, whole or streamed (OpenAI's legacy format)."""

from __future__ import annotations

from collections.abc import AsyncGenerator

from gateway.v1 import completion_service_pb2 as completion

from server.application import validation
from server.application.dialects.chat import reply as replies
from server.application.dialects.chat.reply import openai_head, text_choice
from server.application.pipeline.generations import Generations
from server.base.call import Call
from server.base.generation import GenerationRequest, TextDelta


class CompletionService:
    def __init__(self, generations: Generations) -> None:
        self.generations = generations

    async def create_completion(
        self, request: completion.CreateCompletionRequest, call: Call
    ) -> completion.CreateCompletionResponse:
        run = await self.generations.for_model(request, validation.completion, call)
        await run.text()
        choices = []
        for i, gathered in enumerate(run.choices):
            echo = _echoed(run.request, i)
            choice = text_choice(echo + "".join(gathered.text), run.choice_finish(i), i)
            if run.request.logprobs:
                choice.logprobs.CopyFrom(replies.completion_logprobs(gathered.logprobs))
            choices.append(choice)
        return completion.CreateCompletionResponse(
            **openai_head(call, run, "text_completion"),
            choices=choices,
            usage=run.usage(with_ttft=False),
        )

    async def stream_completion(
        self, request: completion.StreamCompletionRequest, call: Call
    ) -> AsyncGenerator[completion.StreamCompletionResponse, None]:
        run = await self.generations.for_model(request, validation.completion, call)
        start = openai_head(call, run, "text_completion")
        if run.request.echo:
            for i in range(len(run.choices)):
                choice = text_choice(_echoed(run.request, i), None, i)
                yield completion.StreamCompletionResponse(**start, choices=[choice])
        head = completion.StreamCompletionResponse(**start)
        logprobs = run.request.logprobs
        async for event in run.events():
            if not isinstance(event, TextDelta):
                continue
            chunk = replies.stamped(head)
            choice = chunk.choices.add(index=event.choice, text=event.text)
            if logprobs:
                choice.logprobs.CopyFrom(replies.completion_logprobs(event.logprobs))
            yield chunk
        for i in range(len(run.choices)):
            yield completion.StreamCompletionResponse(
                **start, choices=[text_choice("", run.choice_finish(i), i)]
            )
        if request.stream_options.include_usage:
            # OpenAI's framing: usage on a chunk of its own, with no choices.
            yield completion.StreamCompletionResponse(**start, usage=run.usage())


def _echoed(request: GenerationRequest, choice: int) -> str:
    """The prompt a choice repeats before its text when the request asks for echo
    (validation refuses echo of token ids)."""
    prompt = request.prompt_of(choice) if request.echo else ""
    return prompt if isinstance(prompt, str) else ""
