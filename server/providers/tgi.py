"""Hugging Face Text Generation Inference, native API: /generate and /generate_stream.

Requests send `inputs` + `parameters` (max_new_tokens, temperature, top_p, stop,
details: true). TGI refuses temperature 0, so 0 is sent as greedy decoding
(do_sample false, no temperature). A chat is rendered as plain text turns ending with
"Assistant:"; for a model's own chat template use TGI's OpenAI route (/v1) with the
`openai` adapter instead.

Streams are SSE events each holding a `token`; the last also holds `generated_text`
and `details` (finish_reason length|eos_token|stop_sequence, generated_tokens, and
input_length on recent TGI). A stream without that final event is a failure.

Token counts: completion tokens from details.generated_tokens; prompt tokens from the
`x-prompt-tokens` response header or details.input_length when TGI sends them, else
estimated (server/tokens.py: about four bytes per token).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from server.base import tokens
from server.base.errors import UpstreamError
from server.base.generation import (
    Event,
    Finished,
    GenerationRequest,
    TextDelta,
    TokenCounts,
)
from server.providers.http import (
    HttpParams,
    ProtocolViolation,
    bearer,
    check_status,
    count,
    make_client,
    plausible,
    read_api_key,
    read_json,
    redact,
    sse_events,
    streamed_counts,
    upstream_errors,
)

FINISH_REASONS = {"length": "length", "eos_token": "stop", "stop_sequence": "stop"}
ROLE_NAMES = {"system": "System", "developer": "System", "user": "User", "assistant": "Assistant"}
DEFAULT_MAX_NEW_TOKENS = 256


class TgiParams(HttpParams):
    # TGI serves one model; the name is only reported (and sent nowhere).
    model: str = "tgi"
    stream: bool = True
    # max_new_tokens when the caller gives none (TGI's own default is very short).
    default_max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS


class TgiProvider:
    def __init__(self, provider_id: str, params: TgiParams, where: str) -> None:
        self.id = provider_id
        self.params = params
        self.retry_policy = params.retry_policy
        # The native API generates plain text only.
        self.capabilities: frozenset[str] = frozenset()
        self._client = make_client(params, bearer(read_api_key(params, where)))

    def body(self, request: GenerationRequest) -> dict[str, Any]:
        parameters: dict[str, Any] = {
            "max_new_tokens": request.max_tokens or self.params.default_max_new_tokens,
            "details": True,
        }
        if request.temperature:
            parameters["temperature"] = request.temperature
            parameters["do_sample"] = True
        elif request.temperature == 0:
            parameters["do_sample"] = False
        if request.top_p is not None and 0 < request.top_p < 1:
            parameters["top_p"] = request.top_p
        if request.stop:
            parameters["stop"] = list(request.stop)
        return {"inputs": render(request), "parameters": parameters}

    async def generate(self, request: GenerationRequest) -> AsyncIterator[Event]:
        stream = self.params.stream
        path = "/generate_stream" if stream else "/generate"
        with upstream_errors(self.id):
            async with self._client.stream("POST", path, json=self.body(request)) as r:
                await check_status(r, self.id)
                header_prompt = _int_header(r.headers.get("x-prompt-tokens"))
                if not stream:
                    answer = await read_json(r)
                    if isinstance(answer, list):  # the Inference API wraps it in a list
                        answer = answer[0]
                    text = answer["generated_text"]
                    finished = self._finished(request, answer.get("details"), header_prompt)
                    plausible(finished.counts, request)
                    if text:
                        yield TextDelta(text)
                    yield finished
                    return
                async for event in sse_events(r, self.params.max_line_bytes):
                    data = json.loads(event.data)
                    if data.get("error"):
                        raise UpstreamError(
                            f"{self.id}: upstream failed mid-stream: {redact(str(data['error'])[:200])}",
                            {"provider": self.id},
                            upstream_answered=True,
                        )
                    token = data.get("token") or {}
                    if token.get("text") and not token.get("special"):
                        yield TextDelta(token["text"])
                    if data.get("details") is not None or data.get("generated_text") is not None:
                        yield self._finished(
                            request, data.get("details"), header_prompt, streamed=True
                        )
                        return
                raise ProtocolViolation("stream ended without its final details")

    def _finished(
        self,
        request: GenerationRequest,
        details: Any,
        prompt_tokens: int | None,
        streamed: bool = False,
    ) -> Finished:
        if not isinstance(details, dict) or not details.get("finish_reason"):
            raise ProtocolViolation("answer without details.finish_reason")
        reason = str(details["finish_reason"])
        if prompt_tokens is None:
            prompt_tokens = _int_header(details.get("input_length"))
        generated = details.get("generated_tokens")
        counts = None
        if generated is not None:
            prompt = prompt_tokens if prompt_tokens is not None else tokens.estimate_prompt(request)

            def parse() -> TokenCounts:
                return TokenCounts(prompt, count(generated, "details.generated_tokens"))

            counts = streamed_counts(parse, self.id) if streamed else parse()
        return Finished(FINISH_REASONS.get(reason, reason), counts)

    async def aclose(self) -> None:
        await self._client.aclose()


def render(request: GenerationRequest) -> str:
    """The prompt TGI receives: the text itself, or a chat as plain text turns."""
    if request.prompt is not None:
        return request.prompt
    turns = [f"{ROLE_NAMES.get(m.role, m.role)}: {m.content}" for m in request.messages]
    return "\n\n".join([*turns, "Assistant:"])


def _int_header(value: Any) -> int | None:
    try:
        number = None if value is None else int(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if number is not None and 0 <= number < 2**31 else None
