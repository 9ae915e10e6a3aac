"""OpenAI-compatible adapter: /chat/completions and /completions, streamed or not.

Serves OpenAI and every server speaking its wire format (vLLM, Ollama, llama.cpp
server, TGI's OpenAI route, Groq, Together...), /embeddings for embedding models, and
/moderations for moderation models, /audio/transcriptions,
/audio/translations and /audio/speech for audio models (audio_wire.py), /images/generations
and /images/edits for image models (images_wire.py), /rerank for rerank models (vLLM's and Infinity's; Cohere's and Jina's APIs with their
`base_url`, Voyage's with `rerank_format: voyage`: rerank_wire.py). `base_url` includes the version prefix
(`https://api.openai.com/v1`, `http://localhost:11434/v1`). Streams ask for usage with
`stream_options.include_usage`; usage carries `prompt_tokens_details.cached_tokens`
and `completion_tokens_details.reasoning_tokens`, both kept. A stream that ends
without `data: [DONE]`, or without a finish_reason, is a failure, never a "stop".

Everything else of the request goes as it came (content parts, tool definitions and
calls, tool_choice, response_format, n, seed, penalties, logit_bias, logprobs,
reasoning_effort, metadata, and suffix/best_of on text completions; `echo` the gateway
applies itself, for every provider alike); replies give
back every choice's text, tool calls (streamed fragments keep OpenAI's framing) and
logprobs. The adapter has every capability; a server that lacks one (tools on an old
vLLM, logprobs on Ollama) says so with the provider's `capabilities` in the config.

A chat stream the caller asked in this same format (the request's `relay`) is relayed
as the upstream writes it (`Relayed`): each event parsed once for its finish reason,
usage and text, never decoded into the core's events and encoded again.

A server that also serves OpenAI's Responses API says so with `responses_api: true`:
requests that came in as that API then go to its /responses as they came
(openai_responses.py), built-in tools and reasoning state included.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from typing import Any, Literal
from urllib.parse import quote, urlsplit, urlunsplit

import orjson
from pydantic import Field

from server.base import urls
from server.base.audio import Speech, SpeechRequest, Transcript, TranscriptionRequest
from server.base.embedding import EmbeddingRequest, Embeddings
from server.base.errors import UpstreamError
from server.base.generation import (
    ALL_CAPABILITIES,
    Capability,
    DocumentPart,
    Event,
    Finished,
    GenerationRequest,
    ImagePart,
    Message,
    Native,
    Part,
    Relayed,
    TextDelta,
    Thinking,
    TokenCounts,
    TokenLogprob,
    ToolCallDelta,
    TopLogprob,
    serves,
)
from server.base.images import ImageRequest, Images
from server.base.moderation import ModerationRequest, Moderations, Verdict
from server.base.rerank import Ranking, RerankRequest
from server.providers import audio_wire, images_wire, rerank_wire
from server.providers import openai_responses as responses_wire
from server.providers.http import (
    HttpParams,
    ProtocolViolation,
    Response,
    bearer,
    check_status,
    count,
    loads,
    make_client,
    plausible,
    read_api_key,
    read_json,
    redact,
    sse_events,
    sse_reads,
    streamed_counts,
    upstream_errors,
)

# The caller's format a chat stream is relayed in (GenerationRequest.relay).
CHAT = "chat"


class OpenAIParams(HttpParams):
    # Stream from the upstream (true) or make one unary request per generation.
    stream: bool = True
    # Ask for usage in streams; turn off for old servers that refuse stream_options.
    stream_usage: bool = True
    # OpenAI's reasoning models take max_completion_tokens instead of max_tokens.
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    # Extra JSON fields merged into every request body (e.g. {"seed": 1}).
    extra_body: dict[str, Any] = Field(default_factory=dict)
    # The upstream serves OpenAI's Responses API (POST /responses): requests that came
    # in as that API go there as they came (the `responses_api` capability).
    responses_api: bool = False
    # The upstream serves OpenAI's Realtime API over WebSocket (`/realtime?model=`): a
    # Realtime session on this provider's model is relayed there. Absent: served by
    # api.openai.com (and every Azure OpenAI resource), not by other hosts.
    realtime_api: bool | None = None
    # How the upstream's /rerank speaks: Cohere's shape (Cohere, Jina, vLLM, Infinity)
    # or Voyage's (`top_k`, `data`).
    rerank_format: rerank_wire.RerankFormat = "cohere"
    # An image answered as a link to the upstream's signed storage: fetched and answered
    # as its bytes (`fetch`), or the link passed to the caller (`pass`).
    image_urls: Literal["fetch", "pass"] = "fetch"


class OpenAIFormat:
    """OpenAI's wire format as every host of it serves it: chat, text completions,
    embeddings, audio and images. OpenAIProvider adds what only some hosts serve."""

    def __init__(self, provider_id: str, params: OpenAIParams, where: str) -> None:
        self.id = provider_id
        self.params = params
        self.retry_policy = params.retry_policy
        # Chat Completions' audio is not a Realtime session's spoken turn.
        self.capabilities = (ALL_CAPABILITIES - {Capability.SPOKEN_AUDIO}) | (
            {serves(responses_wire.DIALECT)} if params.responses_api else set()
        )
        self._sign_in = self.credentials(params, where)
        self._client = make_client(params, self._sign_in)

    # Where the wire format is served and how it is signed in to: OpenAI's own way
    # here; an adapter for another host of the same format (azure_openai) says its own.

    def credentials(self, params: OpenAIParams, where: str) -> dict[str, str]:
        """The headers that sign every request in, read once at start-up."""
        return bearer(read_api_key(params, where))

    def path(self, endpoint: str) -> str:
        """The path of an endpoint (`/chat/completions`) under base_url."""
        return endpoint

    def request_headers(self) -> tuple[tuple[str, str], ...]:
        """Headers read again for each request (a token that is refreshed outside)."""
        return ()

    def realtime_socket(self) -> tuple[str, dict[str, str]] | None:
        """Where the upstream serves the Realtime API over WebSocket, and the headers
        that open it; None where it does not."""
        p = self.params
        if not self.serves_realtime():
            return None
        url = f"{_socket_url(p.base_url)}{self.realtime_path()}"
        return url, {**p.headers, **self._sign_in, **dict(self.request_headers())}

    def serves_realtime(self) -> bool:
        p = self.params
        return p.realtime_api if p.realtime_api is not None else _openai_host(p.base_url)

    def realtime_path(self) -> str:
        return f"/realtime?model={quote(self.params.model, safe='')}"

    def body(self, request: GenerationRequest, stream: bool) -> dict[str, Any]:
        p = self.params
        body: dict[str, Any] = {**p.extra_body, "model": p.model}
        if request.is_chat:
            body["messages"] = [message_json(m) for m in request.messages]
            _chat_fields(request, body)
        else:
            body["prompt"] = _prompt_json(request)
            _completion_fields(request, body)
        _shared_fields(request, body)
        if request.max_tokens is not None:
            body[p.max_tokens_field if request.is_chat else "max_tokens"] = request.max_tokens
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.top_p is not None:
            body["top_p"] = request.top_p
        if request.stop:
            body["stop"] = list(request.stop)
        if stream:
            body["stream"] = True
            if p.stream_usage:
                body["stream_options"] = {"include_usage": True}
        return body

    async def generate(self, request: GenerationRequest) -> AsyncIterator[Event]:
        native = request.native
        if (
            native is not None
            and native.dialect == responses_wire.DIALECT
            and self.params.responses_api
        ):
            async for out in self._responses(request, native):
                yield out
            return
        path = "/chat/completions" if request.is_chat else "/completions"
        stream = self.params.stream
        body = self.body(request, stream)
        with upstream_errors(self.id):
            async with self._post(path, body) as r:
                await check_status(r, self.id)
                if not stream:
                    answer = await read_json(r)
                    choices = _choices(answer)
                    reported = plausible(counts(answer.get("usage")), request)
                    for choice in choices:
                        for item in _events(choice, request.is_chat, "message"):
                            yield item
                    reasons = tuple(_finish(c) for c in choices)
                    yield Finished(reasons[0], reported, reasons if len(reasons) > 1 else ())
                    return
                if request.relay == CHAT and request.is_chat:
                    async for out in self._relayed(r):
                        yield out
                    return
                finishes: dict[int, str] = {}
                usage: TokenCounts | None = None
                async for event in sse_events(r, self.params.max_line_bytes):
                    if event.data == "[DONE]":
                        yield _finished(finishes, usage)
                        return
                    chunk = self._chunk(event.data)
                    if raw_usage := chunk.get("usage"):
                        usage = streamed_counts(lambda: counts(raw_usage), self.id)
                    for choice in chunk.get("choices") or ():
                        for item in _events(choice, request.is_chat, "delta"):
                            yield item
                        if choice.get("finish_reason"):
                            finishes[int(choice.get("index") or 0)] = choice["finish_reason"]
                raise ProtocolViolation("stream ended without data: [DONE]")

    async def _relayed(self, r: Response) -> AsyncIterator[Event]:
        """A chat stream's events as the upstream wrote them, all those of one read
        together, less their finish reasons and usage (the Finished at the end) and the
        events that carry nothing else (the role's, a usage report's)."""
        finishes: dict[int, str] = {}
        usage: TokenCounts | None = None
        async for events in sse_reads(r, self.params.max_line_bytes):
            kept: list[dict[str, Any]] = []
            text: list[str] = []
            other: list[str] = []
            try:
                for event in events:
                    if event.data == "[DONE]":
                        if kept:
                            yield _batch(kept, text, other)
                        yield _finished(finishes, usage)
                        return
                    chunk = self._chunk(event.data)
                    if raw_usage := chunk.pop("usage", None):
                        usage = streamed_counts(lambda: counts(raw_usage), self.id)
                    choices = [
                        c for c in chunk.get("choices") or () if _kept(c, finishes, text, other)
                    ]
                    if choices:
                        chunk["choices"] = choices
                        kept.append(chunk)
            except Exception:
                if kept:  # what came before a bad event goes out before its error
                    yield _batch(kept, text, other)
                raise
            if kept:
                yield _batch(kept, text, other)
        raise ProtocolViolation("stream ended without data: [DONE]")

    def _chunk(self, data: str) -> dict[str, Any]:
        """One streamed chunk, or the error it reports."""
        chunk = loads(data)
        if not isinstance(chunk, dict):
            raise ProtocolViolation("a stream event is not a JSON object")
        if chunk.get("error"):
            raise UpstreamError(
                f"{self.id}: upstream failed mid-stream: {_error_text(chunk['error'])}",
                {"provider": self.id},
                upstream_answered=True,
            )
        return chunk

    async def _responses(self, request: GenerationRequest, native: Native) -> AsyncIterator[Event]:
        """The request as it came, to the upstream's own Responses API."""
        stream = self.params.stream
        body = {**self.params.extra_body, **responses_wire.body(
            self.id, self.params.model, native, request, stream
        )}  # fmt: skip
        reader = responses_wire.Reader(self.id)
        with upstream_errors(self.id):
            async with self._post("/responses", body) as r:
                await check_status(r, self.id)
                if not stream:
                    answer = await read_json(r)
                    for out in reader.whole(answer):
                        if isinstance(out, Finished):
                            out = dataclasses.replace(out, counts=plausible(out.counts, request))
                        yield out
                    return
                if request.relay == responses_wire.DIALECT:
                    reads = sse_reads(r, self.params.max_line_bytes)
                    async for out in responses_wire.relayed(reader, reads):
                        yield out
                    return
                sse = sse_events(r, self.params.max_line_bytes)
                async for out in responses_wire.events(reader, sse):
                    yield out

    async def embed(self, request: EmbeddingRequest) -> Embeddings:
        """POST /embeddings; vectors are asked as floats, which every compatible server
        writes (base64 for the caller is the gateway's own encoding)."""
        body: dict[str, Any] = {
            "model": self.params.model,
            "input": [i if isinstance(i, str) else list(i) for i in request.inputs],
            "encoding_format": "float",
        }
        if request.dimensions is not None:
            body["dimensions"] = request.dimensions
        if request.user is not None:
            body["user"] = request.user
        with upstream_errors(self.id):
            async with self._post("/embeddings", body) as r:
                await check_status(r, self.id)
                answer = await read_json(r)
            return _embeddings(answer, len(request.inputs))

    async def transcribe(self, request: TranscriptionRequest) -> Transcript:
        """POST /audio/transcriptions (or /translations) as a multipart form."""
        endpoint = "/audio/translations" if request.translate else "/audio/transcriptions"
        body, content_type = audio_wire.transcription_form(self.params.model, request)
        with upstream_errors(self.id):
            async with self._post_bytes(endpoint, body, content_type) as r:
                await check_status(r, self.id)
                answer = await read_json(r)
            return audio_wire.transcript(answer)

    async def make_images(self, request: ImageRequest) -> Images:
        """POST /images/generations as JSON, or /images/edits as a multipart form; the
        upstream's links fetched as the images unless `image_urls` is `pass`."""
        links = self.params.image_urls == "pass"
        if request.edit:
            body, content_type = images_wire.edit_form(self.params.model, request, links)
            endpoint = "/images/edits"
        else:
            body = orjson.dumps(images_wire.generation_body(self.params.model, request, links))
            content_type, endpoint = "application/json", "/images/generations"
        with upstream_errors(self.id):
            async with self._post_bytes(endpoint, body, content_type) as r:
                await check_status(r, self.id)
                answer = await images_wire.read_answer(r)
            made = images_wire.images(answer, request)
            if links:
                return made
            return await images_wire.fetched(made)

    async def speak(self, request: SpeechRequest) -> Speech:
        """POST /audio/speech, its audio relayed as it arrives: the first chunk read
        here (a failure before it fails over), the rest by the caller."""
        body = audio_wire.speech_body(self.params.model, request)
        held = AsyncExitStack()
        with upstream_errors(self.id):
            try:
                r = await held.enter_async_context(self._post("/audio/speech", body))
                await check_status(r, self.id)
                chunks = r.aiter_bytes()
                first = await anext(chunks, b"")  # none: malformed, failed over
            except BaseException:
                await held.aclose()
                raise
        content_type = r.headers.get("content-type", "application/octet-stream")
        return Speech(content_type, first, self._rest(chunks, held))

    async def _rest(
        self, chunks: AsyncIterator[bytes], held: AsyncExitStack
    ) -> AsyncGenerator[bytes, None]:
        try:
            with upstream_errors(self.id):
                async for chunk in chunks:
                    yield chunk
        finally:
            await held.aclose()

    def _post(self, endpoint: str, body: dict[str, Any]) -> AbstractAsyncContextManager[Response]:
        """One request to an endpoint, signed in as this upstream wants."""
        return self._client.stream(
            "POST", self.path(endpoint), json=body, extra_headers=self.request_headers()
        )

    def _post_bytes(
        self, endpoint: str, body: bytes, content_type: str
    ) -> AbstractAsyncContextManager[Response]:
        """`_post` of a body already written (a multipart form, say)."""
        headers = [*self.request_headers(), ("content-type", content_type)]
        return self._client.stream("POST", self.path(endpoint), content=body, extra_headers=headers)

    async def aclose(self) -> None:
        await self._client.aclose()


class OpenAIProvider(OpenAIFormat):
    """The `openai` adapter: OpenAI's API and the servers speaking its format, with
    rerank (vLLM, Infinity, Cohere, Jina, Voyage) and moderations (OpenAI's), which
    Azure OpenAI, the format's other host, does not serve."""

    async def rerank(self, request: RerankRequest) -> Ranking:
        """POST /rerank in the upstream's format (rerank_wire.py)."""
        wire = self.params.rerank_format
        body = rerank_wire.body(self.params.model, request, wire)
        with upstream_errors(self.id):
            async with self._post("/rerank", body) as r:
                await check_status(r, self.id)
                answer = await read_json(r)
            return rerank_wire.ranking(answer, wire)

    async def moderate(self, request: ModerationRequest) -> Moderations:
        """POST /moderations: strings as they came, or one list of text and image parts."""
        given: list[Any] = list(request.inputs) or [
            {"type": "text", "text": p.text}
            if p.text is not None
            else {"type": "image_url", "image_url": {"url": p.image_url}}
            for p in request.parts
        ]
        body = {"model": self.params.model, "input": given}
        with upstream_errors(self.id):
            async with self._post("/moderations", body) as r:
                await check_status(r, self.id)
                answer = await read_json(r)
            return _moderations(answer)


def _embeddings(answer: Any, expected: int) -> Embeddings:
    """OpenAI's embedding list -> vectors in input order (by `index`)."""
    items = sorted(answer["data"], key=lambda item: int(item["index"]))
    if [int(item["index"]) for item in items] != list(range(expected)):
        raise ProtocolViolation(f"expected {expected} embeddings indexed from 0")
    vectors = []
    for item in items:
        vector = item["embedding"]
        if not isinstance(vector, list) or not all(
            isinstance(x, int | float) and not isinstance(x, bool) for x in vector
        ):
            raise ProtocolViolation("an embedding is not a list of numbers")
        vectors.append(tuple(float(x) for x in vector))
    usage = answer.get("usage") or {}
    prompt = usage.get("prompt_tokens")
    return Embeddings(
        tuple(vectors), count(prompt, "usage.prompt_tokens") if prompt is not None else None
    )


def _moderations(answer: Any) -> Moderations:
    """OpenAI's moderation results -> verdicts, in input order."""
    results = answer.get("results") if isinstance(answer, dict) else None
    if not isinstance(results, list):
        raise ProtocolViolation("a moderation answer without its results")
    verdicts = []
    for result in results:
        categories = result.get("categories") if isinstance(result, dict) else None
        scores = result.get("category_scores") if isinstance(result, dict) else None
        if not isinstance(categories, dict) or not isinstance(scores, dict):
            raise ProtocolViolation("a moderation result without categories and scores")
        if not all(isinstance(v, bool) for v in categories.values()) or not all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in scores.values()
        ):
            raise ProtocolViolation("a moderation result with a verdict or score of a wrong type")
        applied = result.get("category_applied_input_types") or {}
        verdicts.append(
            Verdict(
                flagged=bool(result.get("flagged")),
                categories=categories,
                scores={k: float(v) for k, v in scores.items()},
                applied={k: tuple(v) for k, v in applied.items() if isinstance(v, list)},
            )
        )
    usage = answer.get("usage") or {}
    used = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    return Moderations(tuple(verdicts), count(used, "usage.prompt_tokens") if used else None)


def counts(usage: Any) -> TokenCounts | None:
    """OpenAI usage -> TokenCounts (same convention: prompt includes cached and cache
    writes, priced at the model's cache-write price where it has one)."""
    if not isinstance(usage, dict) or usage.get("prompt_tokens") is None:
        return None
    prompt_details = usage.get("prompt_tokens_details") or {}
    completion_details = usage.get("completion_tokens_details") or {}
    return TokenCounts(
        prompt_tokens=count(usage["prompt_tokens"], "usage.prompt_tokens"),
        completion_tokens=count(usage.get("completion_tokens") or 0, "usage.completion_tokens"),
        cached_tokens=count(prompt_details.get("cached_tokens") or 0, "cached_tokens"),
        reasoning_tokens=count(completion_details.get("reasoning_tokens") or 0, "reasoning_tokens"),
        cache_write_tokens=count(
            prompt_details.get("cache_write_tokens") or 0, "cache_write_tokens"
        ),
    )


def message_json(m: Message) -> dict[str, Any]:
    """A message in OpenAI's shape, as the caller sent it."""
    out: dict[str, Any] = {"role": m.role}
    if m.parts:
        out["content"] = [_part(p) for p in m.parts]
    elif m.content or not m.tool_calls:
        out["content"] = m.content
    if m.name is not None:
        out["name"] = m.name
    if m.tool_calls:
        out["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in m.tool_calls
        ]
    if m.tool_call_id is not None:
        out["tool_call_id"] = m.tool_call_id
    return out


def _part(part: Part) -> dict[str, Any]:
    if isinstance(part, ImagePart):
        return {"type": "image_url", "image_url": _image(part)}
    if isinstance(part, DocumentPart):
        # OpenAI's file part: the PDF as a data URL.
        data = f"data:{part.media_type};base64,{part.data}"
        return {
            "type": "file",
            "file": {"filename": part.title or "document.pdf", "file_data": data},
        }
    return {"type": "text", "text": part.text}


def _image(part: ImagePart) -> dict[str, Any]:
    url = part.url if part.url.startswith("data:") else urls.check(part.url, "image_url")
    return {"url": url, **({"detail": part.detail} if part.detail else {})}


def _chat_fields(request: GenerationRequest, body: dict[str, Any]) -> None:
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    **({"description": t.description} if t.description is not None else {}),
                    **({"parameters": t.parameters} if t.parameters is not None else {}),
                    **({"strict": t.strict} if t.strict is not None else {}),
                },
            }
            for t in request.tools
        ]
    if request.forced_tool is not None:
        body["tool_choice"] = {"type": "function", "function": {"name": request.forced_tool}}
    elif request.tool_choice is not None:
        body["tool_choice"] = request.tool_choice
    if request.parallel_tool_calls is not None:
        body["parallel_tool_calls"] = request.parallel_tool_calls
    fmt = request.response_format
    if fmt is not None:
        body["response_format"] = {"type": fmt.type}
        if fmt.type == "json_schema":
            spec: dict[str, Any] = {"name": fmt.name}
            for key in ("description", "schema", "strict"):
                if getattr(fmt, key) is not None:
                    spec[key] = getattr(fmt, key)
            body["response_format"]["json_schema"] = spec
    if request.logprobs:
        body["logprobs"] = True
        if request.top_logprobs is not None:
            body["top_logprobs"] = request.top_logprobs
    if request.reasoning_effort is not None:
        body["reasoning_effort"] = request.reasoning_effort
    elif request.thinking is not None:
        body["reasoning_effort"] = reasoning_effort(request.thinking)
    if request.metadata:
        body["metadata"] = dict(request.metadata)
    for key in ("prompt_cache_key", "prompt_cache_retention", "store", "service_tier",
                "safety_identifier"):  # fmt: skip
        if (value := getattr(request, key)) is not None:
            body[key] = value


def reasoning_effort(thinking: Thinking) -> str:
    """Extended thinking in OpenAI's terms: its effort, else its token budget as one."""
    if thinking.effort is not None:
        return {"xhigh": "high", "max": "high"}.get(thinking.effort, thinking.effort)
    budget = thinking.budget_tokens
    if budget is None:
        return "medium"
    return "low" if budget < 4096 else "medium" if budget < 16384 else "high"


def _completion_fields(request: GenerationRequest, body: dict[str, Any]) -> None:
    if request.logprobs:
        body["logprobs"] = request.top_logprobs or 0
    if request.suffix is not None:
        body["suffix"] = request.suffix
    if request.best_of is not None:
        body["best_of"] = request.best_of


def _shared_fields(request: GenerationRequest, body: dict[str, Any]) -> None:
    if request.n != 1:
        body["n"] = request.n
    for key in ("seed", "user", "presence_penalty", "frequency_penalty"):
        if getattr(request, key) is not None:
            body[key] = getattr(request, key)
    if request.logit_bias:
        body["logit_bias"] = dict(request.logit_bias)
    if request.top_k is not None:
        body["top_k"] = request.top_k  # vLLM, llama.cpp and Ollama read it


def _choices(answer: Any) -> list[dict[str, Any]]:
    choices = answer["choices"]
    if not choices:
        raise ProtocolViolation("no choices")
    return sorted(choices, key=lambda c: int(c.get("index") or 0))


def _events(choice: dict[str, Any], chat: bool, key: str) -> list[Event]:
    """The text, tool-call fragments and logprobs of one choice (or chunk choice)."""
    index = int(choice.get("index") or 0)
    if not chat:
        text = str(choice.get("text") or "")
        logprobs = _completion_logprobs(choice.get("logprobs"))
        return [TextDelta(text, index, logprobs)] if text or logprobs else []
    body = choice.get(key) or {}
    events: list[Event] = []
    content = body.get("content")
    logprobs = _chat_logprobs(choice.get("logprobs"))
    if isinstance(content, str) and content or logprobs:
        events.append(TextDelta(content if isinstance(content, str) else "", index, logprobs))
    for n, call in enumerate(body.get("tool_calls") or ()):
        function = call.get("function") or {}
        arguments = function.get("arguments")
        events.append(
            ToolCallDelta(
                int(call.get("index", n)),
                call.get("id"),
                function.get("name"),
                arguments if isinstance(arguments, str) else "",
                index,
            )
        )
    return events


def _finished(finishes: dict[int, str], usage: TokenCounts | None) -> Finished:
    """A stream's end, at its `data: [DONE]`."""
    if 0 not in finishes:
        raise ProtocolViolation("stream ended without a finish_reason")
    reasons = tuple(finishes[i] for i in sorted(finishes))
    return Finished(reasons[0], usage, reasons if len(reasons) > 1 else ())


def _kept(choice: Any, finishes: dict[int, str], text: list[str], other: list[str]) -> bool:
    """Whether a relayed chunk's choice carries anything once its finish reason is
    taken (into `finishes`); its generated text goes to `text` (the answer's) and
    `other` (tool arguments, reasoning, a refusal)."""
    if not isinstance(choice, dict):
        raise ProtocolViolation("a chunk's choice is not a JSON object")
    if reason := choice.get("finish_reason"):
        finishes[int(choice.get("index") or 0)] = reason
        choice["finish_reason"] = None
    carries = bool(choice.get("logprobs"))
    delta = choice.get("delta")
    if not isinstance(delta, dict):
        return carries
    for key, value in delta.items():
        if not value or key == "role":
            continue
        carries = True
        if type(value) is str:
            (text if key == "content" else other).append(value)
        elif key == "tool_calls" and isinstance(value, list):
            for call in value:
                function = call.get("function") if isinstance(call, dict) else None
                arguments = function.get("arguments") if isinstance(function, dict) else None
                if isinstance(arguments, str):
                    other.append(arguments)
    return carries


def _batch(events: list[dict[str, Any]], text: list[str], other: list[str]) -> Relayed:
    return Relayed.gathered(events, text, other, _decoded)


def _decoded(events: list[dict[str, Any]]) -> list[Event]:
    """Relayed chunks as the core's events."""
    return [
        item for c in events for choice in c["choices"] for item in _events(choice, True, "delta")
    ]


def _chat_logprobs(logprobs: Any) -> tuple[TokenLogprob, ...]:
    if not isinstance(logprobs, dict):
        return ()
    return tuple(
        TokenLogprob(
            str(e["token"]),
            float(e["logprob"]),
            tuple(
                TopLogprob(str(t["token"]), float(t["logprob"]))
                for t in e.get("top_logprobs") or ()
            ),
        )
        for e in logprobs.get("content") or ()
    )


def _completion_logprobs(logprobs: Any) -> tuple[TokenLogprob, ...]:
    if not isinstance(logprobs, dict):
        return ()
    tops = logprobs.get("top_logprobs") or []
    out = []
    for i, (token, value) in enumerate(
        zip(logprobs.get("tokens") or (), logprobs.get("token_logprobs") or (), strict=False)
    ):
        top = tops[i] if i < len(tops) and isinstance(tops[i], dict) else {}
        out.append(
            TokenLogprob(
                str(token),
                float(value or 0),
                tuple(TopLogprob(str(k), float(v)) for k, v in top.items()),
            )
        )
    return tuple(out)


def _finish(choice: dict[str, Any]) -> str:
    finish = choice.get("finish_reason")
    if not finish:
        raise ProtocolViolation("answer without a finish_reason")
    return str(finish)


def _error_text(error: Any) -> str:
    message = error.get("message") if isinstance(error, dict) else error
    return redact(str(message)[:200])


def _prompt_json(request: GenerationRequest) -> Any:
    """`prompt` as OpenAI takes it: a string, a token-id array, or an array of them."""
    if not request.prompts:
        return request.prompt
    items = [list(p) if isinstance(p, tuple) else p for p in request.prompts]
    return items[0] if len(items) == 1 else items


def _openai_host(base_url: str) -> bool:
    return urlsplit(base_url).hostname == "api.openai.com"


def _socket_url(base_url: str) -> str:
    """`base_url` with its scheme for a WebSocket (https -> wss, http -> ws)."""
    parts = urlsplit(base_url.rstrip("/"))
    scheme = {"https": "wss", "http": "ws"}.get(parts.scheme, parts.scheme)
    return urlunsplit((scheme, parts.netloc, parts.path, "", ""))
