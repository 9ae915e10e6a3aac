"""ChatService and CompletionService: chat and text completions, whole or streamed
(OpenAI's chat format and its legacy text format)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterable
from typing import Any

from gateway.v1 import chat_service_pb2 as chat
from gateway.v1 import completion_service_pb2 as completion

from server.application.dialects.chat import reply as replies
from server.application.dialects.chat import request as translation
from server.application.dialects.chat.reply import openai_head
from server.application.dialects.chat.request import DIALECT, ChatRequest, CompletionRequest
from server.application.pipeline.answers import text_choice
from server.application.pipeline.engine import Run
from server.application.pipeline.generations import Generations
from server.base.call import Call
from server.base.generation import (
    Event,
    GenerationRequest,
    Relayed,
    TextDelta,
    ToolCallDelta,
)
from server.base.pipeline import Encoded, encoded_json


class ChatService:
    def __init__(self, generations: Generations) -> None:
        self.generations = generations

    async def create_chat_completion(
        self, request: chat.CreateChatCompletionRequest, call: Call
    ) -> chat.CreateChatCompletionResponse:
        run = await self._run(request, call)
        await run.text()
        choices = []
        for i, gathered in enumerate(run.choices):
            message = chat.ChatMessage(
                role="assistant",
                content="".join(gathered.text),
                tool_calls=[replies.tool_call(c) for c in gathered.tool_calls],
            )
            choice = chat.ChatChoice(index=i, message=message, finish_reason=run.choice_finish(i))
            if run.request.logprobs:
                choice.logprobs.CopyFrom(replies.chat_logprobs(gathered.logprobs))
            choices.append(choice)
        return chat.CreateChatCompletionResponse(
            **openai_head(call, run, "chat.completion"), choices=choices, usage=run.usage()
        )

    async def stream_chat_completion(
        self, request: chat.StreamChatCompletionRequest, call: Call
    ) -> AsyncGenerator[chat.StreamChatCompletionResponse | Encoded, None]:
        run = await self._run(request, call, relay=True)
        start = openai_head(call, run, "chat.completion.chunk")
        for i in range(len(run.choices)):
            yield chat.StreamChatCompletionResponse(
                **start,
                choices=[chat.ChatChunkChoice(index=i, delta=chat.ChatDelta(role="assistant"))],
            )
        head = chat.StreamChatCompletionResponse(**start)
        logprobs = run.request.logprobs
        async for event in run.events():
            fragments: Iterable[TextDelta | ToolCallDelta]
            if isinstance(event, Relayed):
                if call.writes_json:
                    yield _relayed_chunks(event.events, start)
                    continue
                fragments = _merged(event.decode(event.events))
            else:
                fragments = (event,)
            for fragment in fragments:
                chunk = replies.stamped(head)
                replies.chat_chunk_choice(chunk.choices.add(), fragment, logprobs)
                yield chunk
        for i in range(len(run.choices)):
            yield chat.StreamChatCompletionResponse(
                **start,
                choices=[
                    chat.ChatChunkChoice(
                        index=i, delta=chat.ChatDelta(), finish_reason=run.choice_finish(i)
                    )
                ],
            )
        if request.stream_options.include_usage:
            # OpenAI's framing: usage on a chunk of its own, with no choices.
            yield chat.StreamChatCompletionResponse(**start, usage=run.usage())

    async def _run(self, request: ChatRequest, call: Call, relay: bool = False) -> Run:
        admitted = await self.generations.admit(call, "api", request.model)
        generation = translation.chat(request)
        if relay:  # an upstream of this format may stream its events as they are
            generation = generation.relayed_as(DIALECT)
        return await self.generations.run(admitted, request.model, generation)


class CompletionService:
    def __init__(self, generations: Generations) -> None:
        self.generations = generations

    async def create_completion(
        self, request: completion.CreateCompletionRequest, call: Call
    ) -> completion.CreateCompletionResponse:
        run = await self._run(request, call)
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
        run = await self._run(request, call)
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

    async def _run(self, request: CompletionRequest, call: Call) -> Run:
        admitted = await self.generations.admit(call, "api", request.model)
        return await self.generations.run(admitted, request.model, translation.completion(request))


def _relayed_chunks(events: list[dict[str, Any]], head: dict[str, Any]) -> Encoded:
    """Relayed chunks with the head of the gateway's own (id, model, created, the
    backend's fingerprint and tier) in place of the upstream's."""
    for event in events:
        event.update(head)
    return Encoded([encoded_json(event) for event in events])


def _merged(pieces: list[Event]) -> list[TextDelta | ToolCallDelta]:
    """A relayed read's fragments for the gRPC API, each run of plain text as one (a
    relayed stream's text is choice 0's): its sender would merge their chunks anyway
    (`grpc_api/coalesce.py`), and one chunk built costs a twentieth of twenty."""
    out: list[TextDelta | ToolCallDelta] = []
    run: list[str] = []
    for piece in pieces:
        if type(piece) is TextDelta and not piece.logprobs:
            run.append(piece.text)
            continue
        if run:
            out.append(TextDelta("".join(run)))
            run = []
        if isinstance(piece, TextDelta | ToolCallDelta):  # what a chat chunk carries
            out.append(piece)
    if run:
        out.append(TextDelta("".join(run)))
    return out


def _echoed(request: GenerationRequest, choice: int) -> str:
    """The prompt a choice repeats before its text when the request asks for echo
    (validation refuses echo of token ids)."""
    prompt = request.prompt_of(choice) if request.echo else ""
    return prompt if isinstance(prompt, str) else ""
