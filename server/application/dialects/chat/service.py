"""ChatService: chat completions, whole or streamed (OpenAI's chat format)."""

from __future__ import annotations

from collections.abc import AsyncGenerator

from gateway.v1 import chat_service_pb2 as chat

from server.application import validation
from server.application.dialects.chat import reply as replies
from server.application.dialects.chat.reply import openai_head
from server.application.pipeline.generations import Generations
from server.base.call import Call


class ChatService:
    def __init__(self, generations: Generations) -> None:
        self.generations = generations

    async def create_chat_completion(
        self, request: chat.CreateChatCompletionRequest, call: Call
    ) -> chat.CreateChatCompletionResponse:
        run = await self.generations.for_model(request, validation.chat, call)
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
    ) -> AsyncGenerator[chat.StreamChatCompletionResponse, None]:
        run = await self.generations.for_model(request, validation.chat, call)
        start = openai_head(call, run, "chat.completion.chunk")
        for i in range(len(run.choices)):
            yield chat.StreamChatCompletionResponse(
                **start,
                choices=[chat.ChatChunkChoice(index=i, delta=chat.ChatDelta(role="assistant"))],
            )
        head = chat.StreamChatCompletionResponse(**start)
        logprobs = run.request.logprobs
        async for event in run.events():
            chunk = replies.stamped(head)
            replies.chat_chunk_choice(chunk.choices.add(), event, logprobs)
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
