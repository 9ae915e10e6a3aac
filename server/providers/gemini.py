"""Gemini API adapter: generateContent, streamGenerateContent (`alt=sse`),
countTokens, embedContent and batchEmbedContents, the key in `x-goog-api-key`; speech
generation and Imagen's `:predict` for models declaring `speech` or `image_generation`
(google_media.py).

Translation, both ways:
- system and developer messages join into `systemInstruction`; the others become
  `contents` of role `user` or `model`, consecutive turns of one role merged (the API
  wants a call's function responses in one turn); a text completion is one user turn.
- Parts: text; images as `inlineData` (a data URL) or `fileData` (an https URL);
  PDF documents as `inlineData`; assistant tool calls as `functionCall` parts and
  tool messages as `functionResponse` parts (named after the call they answer; a JSON
  object answer is the response itself, any other text `{"result": text}`).
- Tools become `functionDeclarations` with `parametersJsonSchema` (JSON Schema as the
  caller wrote it); tool_choice auto/required/none and a named tool become
  `toolConfig.functionCallingConfig` AUTO/ANY/NONE (ANY with `allowedFunctionNames`).
  Gemini has no switch for parallel calls: parallel_tool_calls is not sent.
- `generationConfig`: temperature, topP, topK, maxOutputTokens, stopSequences,
  candidateCount (n), seed, presencePenalty, frequencyPenalty; structured output as
  `responseMimeType` application/json with `responseJsonSchema`; thinking as
  `thinkingConfig` (a budget, or -1 for the model's own choice, with
  `includeThoughts`; an effort alone as `thinkingLevel`). `safetySettings` and
  `cachedContent` come from the provider's params, passed through. logit_bias,
  logprobs and metadata have no Gemini equivalent (not declared: refused naming them);
  `user` is for the gateway's records and is not sent.

Thought signatures: Gemini signs the reasoning behind a function call
(`thoughtSignature` on its part) and wants it back with the call on the next turn.
It reaches the caller sealed with this provider's id (`generation.seal`) as the call's
signature (each ingress has a documented field for it) and comes back unchanged. Only
this provider is given it; a call without a signature of this provider's (made by
another provider, or by the caller) is sent, as Gemini's docs allow for histories from
other models, with `thought_signature_fallback` on a turn's first call. Signatures on
text parts are not kept: Gemini does not require them.

Replies: text parts (`thought` parts are reasoning, shown only when asked), function
calls whole (an id made up when the upstream gives none; made-up ids are not sent
back). Finish reasons:

    STOP                                    -> stop (tool_calls when it made calls)
    MAX_TOKENS                              -> length
    SAFETY, RECITATION, LANGUAGE, BLOCKLIST,
      PROHIBITED_CONTENT, SPII, IMAGE_*     -> content_filter; with nothing generated,
                                               a 400 naming the reason
    MALFORMED_FUNCTION_CALL, UNEXPECTED_TOOL_CALL, TOO_MANY_TOOL_CALLS,
      MISSING_THOUGHT_SIGNATURE, MALFORMED_RESPONSE, NO_IMAGE, OTHER, unspecified
                                            -> stop; with nothing generated, an
                                               upstream failure naming the reason
                                               (the next provider is tried)

A prompt the upstream blocks (`promptFeedback.blockReason`) is a 400 naming the reason.
A stream ends when the body does; one that ends before a finishReason is a failure.

Usage: promptTokenCount (cached content included, as OpenAI counts) plus
toolUsePromptTokenCount is prompt_tokens, cachedContentTokenCount cached_tokens;
candidatesTokenCount plus thoughtsTokenCount (which Gemini counts apart) is
completion_tokens, thoughtsTokenCount reasoning_tokens.

A 429's wait is the header's, or the `retryDelay` of the error's RetryInfo detail.
"""

from __future__ import annotations

import copy
import json
import mimetypes
import re
import secrets
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from pydantic import Field

from server.base import urls
from server.base.audio import Speech, SpeechRequest
from server.base.embedding import EmbeddingRequest, Embeddings
from server.base.errors import UpstreamError, UpstreamRejected
from server.base.generation import (
    Capability,
    DocumentPart,
    Event,
    Finished,
    GenerationRequest,
    ImagePart,
    Message,
    Native,
    NativeEvent,
    ReasoningDelta,
    Relayed,
    TextDelta,
    TokenCounts,
    ToolCallDelta,
    seal,
    serves,
    unseal,
)
from server.base.images import ImageRequest, Images
from server.providers import google_media, images_wire
from server.providers.http import (
    MESSAGE_CHARS,
    Client,
    HttpParams,
    ProtocolViolation,
    Response,
    check_status,
    count,
    loads,
    make_client,
    plausible,
    read_api_key,
    read_json,
    redact,
    retry_after,
    sse_events,
    sse_reads,
    streamed_counts,
    upstream_errors,
)

BLOCKED = frozenset(
    {"SAFETY", "RECITATION", "LANGUAGE", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII",
     "IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION", "IMAGE_OTHER"}
)  # fmt: skip
# The ingress dialect this wire format serves natively (a value: see generation.serves).
DIALECT = "gemini"
CAPABILITIES: frozenset[str] = frozenset(
    {Capability.TOOLS, Capability.IMAGES, Capability.STRUCTURED_OUTPUT, Capability.N,
     Capability.SAMPLING_CONTROLS, Capability.REASONING_EFFORT, Capability.THINKING,
     Capability.DOCUMENTS, Capability.TOP_K, serves(DIALECT)}
)  # fmt: skip
DATA_URL = re.compile(r"^data:([\w.+-]+/[\w.+-]+);base64,(.*)$", re.DOTALL)
# Ids the gateway made up for calls the upstream gave none: never sent back.
MADE_UP = "call_gw"
EFFORT_LEVELS = {"none": "minimal", "minimal": "minimal", "low": "low", "medium": "medium",
                 "high": "high", "xhigh": "high", "max": "high"}  # fmt: skip
# Gemini's own value for a call whose signature is missing (docs: thought signatures).
SKIP_VALIDATOR = "skip_thought_signature_validator"
MAX_BATCH = 100  # batchEmbedContents' limit


class GeminiParams(HttpParams):
    base_url: str = "https://generativelanguage.googleapis.com/v1beta"
    stream: bool = True
    # Passed through as they are: Gemini's safetySettings, and a cachedContents/...
    # name whose cached prefix every request uses.
    safety_settings: list[dict[str, Any]] | None = None
    cached_content: str | None = Field(default=None, min_length=1)
    # The model that embeds, when it is not `model`.
    embedding_model: str | None = Field(default=None, min_length=1)
    # Sent with a turn's first call that carries no signature of this provider's.
    thought_signature_fallback: str = Field(default=SKIP_VALIDATOR, min_length=1)


class GeminiProvider:
    def __init__(self, provider_id: str, params: GeminiParams, where: str) -> None:
        self.id = provider_id
        self.params = params
        self.retry_policy = params.retry_policy
        self.capabilities = CAPABILITIES
        self._client = self.make_client(params, where)

    def make_client(self, params: GeminiParams, where: str) -> Client:
        key = read_api_key(params, where)
        self._key_header = {"x-goog-api-key": key} if key else {}
        return make_client(params, self._key_header)

    def live_socket(self) -> tuple[str, dict[str, str]] | None:
        """Where the upstream serves the Live API (BidiGenerateContent over WebSocket)
        and the headers that open it: below base_url's host, at its version's path."""
        parts = urlsplit(self.params.base_url.rstrip("/"))
        version = parts.path.rsplit("/", 1)[-1] or "v1beta"
        scheme = {"https": "wss", "http": "ws"}.get(parts.scheme, parts.scheme)
        path = f"/ws/google.ai.generativelanguage.{version}.GenerativeService.BidiGenerateContent"
        return urlunsplit((scheme, parts.netloc, path, "", "")), {
            **self.params.headers, **self._key_header}  # fmt: skip

    def model_path(self, model: str) -> str:
        """The path of a model's methods, below base_url."""
        return f"/models/{quote(model.removeprefix('models/'), safe='')}"

    async def request_headers(self) -> tuple[tuple[str, str], ...]:
        """Headers of one request besides the client's own (a fresh token)."""
        return ()

    def body(self, request: GenerationRequest) -> dict[str, Any]:
        p = self.params
        body: dict[str, Any] = {"contents": self._contents(request)}
        system = "\n\n".join(
            m.content for m in request.messages if m.role in ("system", "developer")
        )
        if system:
            body["systemInstruction"] = {"parts": [{"text": system}]}
        _tools(request, body)
        config = _generation_config(request)
        if config:
            body["generationConfig"] = config
        if p.safety_settings is not None:
            body["safetySettings"] = p.safety_settings
        if p.cached_content is not None:
            body["cachedContent"] = p.cached_content
        return body

    def _contents(self, request: GenerationRequest) -> list[dict[str, Any]]:
        if not request.is_chat:
            return [{"role": "user", "parts": [{"text": request.prompt or ""}]}]
        names = {c.id: c.name for m in request.messages for c in m.tool_calls}
        contents: list[dict[str, Any]] = []
        for m in request.messages:
            if m.role in ("system", "developer"):
                continue
            role = "model" if m.role == "assistant" else "user"
            parts = self._parts(m, names)
            if not parts:
                continue
            if contents and contents[-1]["role"] == role:
                contents[-1]["parts"].extend(parts)
            else:
                contents.append({"role": role, "parts": parts})
        return contents

    def _parts(self, m: Message, names: dict[str, str]) -> list[dict[str, Any]]:
        if m.role == "tool":
            call_id = m.tool_call_id or ""
            answer = {"name": names.get(call_id, call_id), "response": _response(m.content)}
            if not call_id.startswith(MADE_UP):
                answer["id"] = call_id
            return [{"functionResponse": answer}]
        parts: list[dict[str, Any]] = []
        for part in m.parts:
            if isinstance(part, ImagePart):
                parts.append(_image(part.url))
            elif isinstance(part, DocumentPart):
                parts.append({"inlineData": {"mimeType": part.media_type, "data": part.data}})
            elif part.text:
                parts.append({"text": part.text})
        if not m.parts and m.content:
            parts.append({"text": m.content})
        for number, call in enumerate(m.tool_calls):
            try:
                arguments = json.loads(call.arguments or "{}")
            except ValueError:
                arguments = {}
            function: dict[str, Any] = {"name": call.name, "args": arguments}
            if not call.id.startswith(MADE_UP):
                function["id"] = call.id
            signature = self._signature(call.signature)
            if signature is None and number == 0:
                signature = self.params.thought_signature_fallback
            signed = {"thoughtSignature": signature} if signature is not None else {}
            parts.append({"functionCall": function, **signed})
        return parts

    def _signature(self, sealed: str | None) -> str | None:
        """The upstream's signature in `sealed`, when this provider sealed it."""
        opened = unseal(sealed) if sealed else None
        return opened[1] if opened is not None and opened[0] == self.id else None

    async def generate(self, request: GenerationRequest) -> AsyncIterator[Event]:
        method = ":streamGenerateContent?alt=sse" if self.params.stream else ":generateContent"
        path = self.model_path(self.params.model) + method
        reading = _Reading(self.id, request)
        native = request.native
        if native is not None and native.dialect == DIALECT:
            async for event in self._native(path, self.native_body(request, native), reading):
                yield event
            return
        with upstream_errors(self.id):
            async with self._client.stream(
                "POST", path, json=self.body(request), extra_headers=await self.request_headers()
            ) as r:
                await check(r, self.id)
                if not self.params.stream:
                    # Checked whole (usage, finish) before any of it is passed on.
                    events = list(reading.chunk(await read_json(r)))
                    final = reading.finished(plausible(reading.counts(), request))
                    for event in events:
                        yield event
                    yield final
                    return
                async for sse in sse_events(r, self.params.max_line_bytes):
                    for out in reading.chunk(json.loads(sse.data)):
                        yield out
                yield reading.finished(streamed_counts(reading.counts, self.id))

    async def _native(
        self, path: str, body: dict[str, Any], reading: _Reading
    ) -> AsyncIterator[Event]:
        """The request as the caller wrote it; the upstream's answers untouched (read as
        a generic answer is, for the checks and the usage), thought signatures sealed."""
        with upstream_errors(self.id):
            async with self._client.stream(
                "POST", path, json=body, extra_headers=await self.request_headers()
            ) as r:
                await check(r, self.id)
                if reading.request.relay == DIALECT and self.params.stream:
                    async for relayed in self._relayed(r, reading):
                        yield relayed
                else:
                    async for answer in self._answers(r):
                        text: list[str] = []
                        other: list[str] = []
                        _generated(reading.chunk(answer), text, other)  # checked and counted
                        sealed = self._sealed(answer)
                        yield NativeEvent(DIALECT, sealed, "".join(text), "".join(other))
                yield reading.finished(streamed_counts(reading.counts, self.id))

    async def _relayed(self, r: Response, reading: _Reading) -> AsyncIterator[Relayed]:
        """The upstream's chunks of each read together, parsed once: checked and counted
        as a generic answer's are (`_Reading`), thought signatures sealed, their usage
        left in for the dialect to take."""
        decode = reading.decoder()
        async for events in sse_reads(r, self.params.max_line_bytes):
            answers: list[Any] = []
            text: list[str] = []
            other: list[str] = []
            try:
                for event in events:
                    answer = loads(event.data)
                    _generated(reading.chunk(answer), text, other)
                    answers.append(self._sealed(answer))
            except Exception:
                if answers:  # what came before a bad chunk goes out before its error
                    yield Relayed.gathered(answers, text, other, decode)
                raise
            if answers:
                yield Relayed.gathered(answers, text, other, decode)

    async def _answers(self, r: Response) -> AsyncIterator[Any]:
        if not self.params.stream:
            yield await read_json(r)
            return
        async for sse in sse_events(r, self.params.max_line_bytes):
            yield json.loads(sse.data)

    def native_body(self, request: GenerationRequest, native: Native) -> dict[str, Any]:
        """A Gemini request as its caller wrote it, for this provider: the thought
        signatures it made given back opened, any other left out (a turn's first call
        then carries the fallback), the gateway's bound on the output, the provider's
        safety settings and cached content where the caller gave none."""
        body = copy.deepcopy(dict(native.request))
        for content in body.get("contents") or ():
            first = True
            for part in content.get("parts") or ():
                signature = self._signature(part.pop("thoughtSignature", None))
                if "functionCall" in part and signature is None and first:
                    signature = self.params.thought_signature_fallback
                if signature is not None:
                    part["thoughtSignature"] = signature
                first = first and "functionCall" not in part
        if request.max_tokens is not None:
            config = body.setdefault("generationConfig", {})
            config["maxOutputTokens"] = request.max_tokens
        if self.params.safety_settings is not None:
            body.setdefault("safetySettings", self.params.safety_settings)
        if self.params.cached_content is not None:
            body.setdefault("cachedContent", self.params.cached_content)
        return body

    def _sealed(self, answer: Any) -> Any:
        """The answer with each part's thought signature sealed with this provider's id."""
        for candidate in (answer.get("candidates") or ()) if isinstance(answer, dict) else ():
            for part in (candidate.get("content") or {}).get("parts") or ():
                if isinstance(part.get("thoughtSignature"), str):
                    part["thoughtSignature"] = seal(self.id, part["thoughtSignature"])
        return answer

    async def count_tokens(self, request: GenerationRequest) -> int:
        """The upstream's own count of the request's input (countTokens)."""
        model = self.model_path(self.params.model)
        native = request.native
        if native is not None and native.dialect == DIALECT:
            whole = self.native_body(request, native)
        else:
            whole = self.body(request)
        whole.pop("generationConfig", None)
        with upstream_errors(self.id):
            async with self._client.stream(
                "POST", f"{model}:countTokens", json=self.count_body(whole),
                extra_headers=await self.request_headers(),
            ) as r:  # fmt: skip
                await check(r, self.id)
                answer = await read_json(r)
            return count(answer.get("totalTokens"), "totalTokens")

    def count_body(self, body: dict[str, Any]) -> dict[str, Any]:
        """countTokens' body for a request's (the Gemini API wants it whole)."""
        model = self.params.model.removeprefix("models/")
        return {"generateContentRequest": {"model": f"models/{model}", **body}}

    async def embed(self, request: EmbeddingRequest) -> Embeddings:
        """embedContent for one input, batchEmbedContents for several; Gemini embeds
        text only and reports no usage (the core estimates it)."""
        if any(not isinstance(i, str) for i in request.inputs):
            raise UpstreamRejected(
                f"input: {self.id} (Gemini) embeds text, not token ids",
                {"provider": self.id, "field": "input"},
            )
        model = self.model_path(self.params.embedding_model or self.params.model)
        vectors: list[tuple[float, ...]] = []
        with upstream_errors(self.id):
            for start in range(0, len(request.inputs), MAX_BATCH):
                batch = request.inputs[start : start + MAX_BATCH]
                asks = [_embed_request(model, str(text), request.dimensions) for text in batch]
                async with self._client.stream(
                    "POST", f"{model}:batchEmbedContents", json={"requests": asks},
                    extra_headers=await self.request_headers(),
                ) as r:  # fmt: skip
                    await check(r, self.id)
                    answer = await read_json(r)
                embeddings = answer.get("embeddings")
                if not isinstance(embeddings, list) or len(embeddings) != len(batch):
                    raise ProtocolViolation("embeddings do not match the inputs")
                vectors.extend(tuple(float(v) for v in e["values"]) for e in embeddings)
        return Embeddings(tuple(vectors))

    async def speak(self, request: SpeechRequest) -> Speech:
        """`:generateContent` on a TTS model, its inline PCM answered as asked
        (google_media.py); the whole audio comes in one answer, sent as one chunk."""
        body = google_media.speech_body(request, self.id)
        with upstream_errors(self.id):
            answer = await self._post_json(":generateContent", body)
            kind, audio, counts = google_media.speech_audio(answer, request.response_format)
        return Speech(kind, audio, _nothing_more(), counts)

    async def make_images(self, request: ImageRequest) -> Images:
        """Imagen's `:predict` (google_media.py)."""
        body = google_media.imagen_body(request, self.id)
        with upstream_errors(self.id):
            answer = await self._post_json(":predict", body, images_wire.read_answer)
            return google_media.imagen_images(answer, request)

    async def _post_json(
        self, method: str, body: dict[str, Any], read: Callable[[Any], Any] = read_json
    ) -> Any:
        """One call of a method of the provider's model, its answer read whole."""
        path = self.model_path(self.params.model) + method
        async with self._client.stream(
            "POST", path, json=body, extra_headers=await self.request_headers()
        ) as r:
            await check(r, self.id)
            return await read(r)

    async def aclose(self) -> None:
        await self._client.aclose()


async def _nothing_more() -> AsyncGenerator[bytes, None]:
    """The rest of an audio answer that came whole."""
    return
    yield b""  # pragma: no cover - makes this a generator


@dataclass
class _Candidate:
    calls: int = 0
    produced: bool = False
    finish: str | None = None


@dataclass
class _Reading:
    """One answer's chunks (a unary answer is one chunk) -> events."""

    provider: str
    request: GenerationRequest
    candidates: dict[int, _Candidate] = field(default_factory=dict)
    usage: dict[str, Any] = field(default_factory=dict)
    # Whether a thought signature is sealed here (a relayed chunk's already is).
    seals: bool = True

    def decoder(self) -> Callable[[list[Any]], list[Event]]:
        """Relayed chunks (checked, sealed) as the core's events, for a run that must
        cut them short."""

        def decoded(answers: list[Any]) -> list[Event]:
            again = _Reading(self.provider, self.request, seals=False)
            return [event for answer in answers for event in again.chunk(answer)]

        return decoded

    def chunk(self, data: Any) -> Iterator[Event]:
        if not isinstance(data, dict):
            raise ProtocolViolation("an answer that is not a JSON object")
        if isinstance(data.get("error"), dict):
            error = data["error"]
            raise UpstreamError(
                f"{self.provider}: upstream failed mid-stream: {error.get('status', 'error')}: "
                f"{redact(str(error.get('message'))[:MESSAGE_CHARS])}",
                {"provider": self.provider},
                upstream_answered=True,
            )
        blocked = (data.get("promptFeedback") or {}).get("blockReason")
        if blocked:
            raise UpstreamRejected(
                f"{self.provider}: the upstream blocked the prompt ({blocked})",
                {"provider": self.provider, "code": "prompt_blocked", "reason": str(blocked)},
            )
        if isinstance(data.get("usageMetadata"), dict):
            self.usage = data["usageMetadata"]
        for candidate in data.get("candidates") or ():
            number = int(candidate.get("index") or 0)
            state = self.candidates.setdefault(number, _Candidate())
            yield from self._parts(candidate, number, state)
            if candidate.get("finishReason"):
                state.finish = str(candidate["finishReason"])

    def _parts(self, candidate: dict[str, Any], number: int, state: _Candidate) -> Iterator[Event]:
        shown = self.request.thinking is not None and self.request.thinking.shown
        for part in (candidate.get("content") or {}).get("parts") or ():
            if "functionCall" in part:
                call = part["functionCall"]
                signature = part.get("thoughtSignature")
                yield ToolCallDelta(
                    state.calls,
                    str(call.get("id") or f"{MADE_UP}_{secrets.token_hex(8)}"),
                    str(call["name"]),
                    json.dumps(call.get("args") or {}),
                    number,
                    (seal(self.provider, signature) if self.seals else signature)
                    if signature
                    else None,
                )
                state.calls += 1
                state.produced = True
            elif isinstance(part.get("text"), str) and part["text"]:
                if part.get("thought"):
                    if shown and number == 0:
                        yield ReasoningDelta(part["text"])
                else:
                    yield TextDelta(part["text"], number)
                    state.produced = True

    def counts(self) -> TokenCounts | None:
        usage = self.usage
        if not usage or usage.get("promptTokenCount") is None:
            return None
        thoughts = count(usage.get("thoughtsTokenCount") or 0, "thoughtsTokenCount")
        prompt = count(usage["promptTokenCount"], "promptTokenCount") + count(
            usage.get("toolUsePromptTokenCount") or 0, "toolUsePromptTokenCount"
        )
        return TokenCounts(
            prompt_tokens=prompt,
            completion_tokens=count(usage.get("candidatesTokenCount") or 0, "candidatesTokenCount")
            + thoughts,
            cached_tokens=count(
                usage.get("cachedContentTokenCount") or 0, "cachedContentTokenCount"
            ),
            reasoning_tokens=thoughts,
        )

    def finished(self, counts: TokenCounts | None) -> Finished:
        if not self.candidates or any(c.finish is None for c in self.candidates.values()):
            raise ProtocolViolation("answer without a finishReason")
        reasons = tuple(self._finish(self.candidates[i]) for i in sorted(self.candidates))
        return Finished(reasons[0], counts, reasons if len(reasons) > 1 else ())

    def _finish(self, state: _Candidate) -> str:
        reason = state.finish or ""
        if reason == "STOP":
            return "tool_calls" if state.calls and self.request.response_format is None else "stop"
        if reason == "MAX_TOKENS":
            return "length"
        meta = {"provider": self.provider, "reason": reason}
        if reason in BLOCKED:
            if not state.produced and len(self.candidates) == 1:
                raise UpstreamRejected(
                    f"{self.provider}: the upstream blocked the reply ({reason})",
                    {**meta, "code": "content_filter"},
                )
            return "content_filter"
        if not state.produced and len(self.candidates) == 1:
            raise UpstreamError(
                f"{self.provider}: the upstream ended without a reply ({reason})",
                meta,
                upstream_answered=True,
            )
        return "stop"


def _generated(events: Iterator[Event], text: list[str], other: list[str]) -> None:
    """Adds the text a chunk's events generated to `text` (the answer's) and `other`
    (a call's arguments, shown thoughts)."""
    for out in events:
        if type(out) is TextDelta:
            text.append(out.text)
        elif type(out) is ToolCallDelta:
            other.append(out.arguments)
        elif type(out) is ReasoningDelta:
            other.append(out.text)


async def check(response: Response, provider: str) -> None:
    """check_status, but with Gemini's own ways read: a wrong key is a 400
    API_KEY_INVALID (the provider's configuration, not the request, is wrong), and a
    429's wait is the RetryInfo detail's `retryDelay` when no header gives one."""
    status = response.status_code
    if status not in (400, 429):
        await check_status(response, provider)
        return
    try:
        answer = await read_json(response)
    except ValueError:
        answer = {}
    error = answer.get("error") if isinstance(answer, dict) else None
    error = error if isinstance(error, dict) else {}
    meta = {"provider": provider, "upstream_status": str(status)}
    if "API_KEY_INVALID" in json.dumps(error.get("details") or []):
        raise UpstreamError(
            f"{provider}: upstream refused the gateway's configuration (HTTP 400 "
            "API_KEY_INVALID); check its api_key_env",
            meta,
            upstream_answered=True,
        )
    said = redact(str(error.get("message") or "")[:MESSAGE_CHARS])
    text = f"{provider}: upstream answered HTTP {status}" + (f": {said}" if said else "")
    if status == 429:
        wait = retry_after(response.headers)
        raise UpstreamError(text, meta, retry_after_s=_retry_delay(error) if wait is None else wait)
    raise UpstreamRejected(text, meta)


def _retry_delay(error: dict[str, Any]) -> float | None:
    """Seconds of a google.rpc.RetryInfo detail's `retryDelay` ("38s", "1.5s")."""
    for detail in error.get("details") or ():
        delay = detail.get("retryDelay") if isinstance(detail, dict) else None
        if isinstance(delay, str) and delay.endswith("s"):
            try:
                return max(0.0, float(delay[:-1]))
            except ValueError:
                return None
    return None


def _image(url: str) -> dict[str, Any]:
    match = DATA_URL.match(url)
    if match is not None:
        return {"inlineData": {"mimeType": match.group(1), "data": match.group(2)}}
    mime = mimetypes.guess_type(url.split("?", 1)[0])[0] or "image/jpeg"
    return {"fileData": {"mimeType": mime, "fileUri": urls.check(url, "image_url")}}


def _response(content: str) -> dict[str, Any]:
    try:
        value = json.loads(content)
    except ValueError:
        return {"result": content}
    return value if isinstance(value, dict) else {"result": value}


def _tools(request: GenerationRequest, body: dict[str, Any]) -> None:
    declarations = [
        {
            "name": t.name,
            **({"description": t.description} if t.description else {}),
            **({"parametersJsonSchema": t.parameters} if t.parameters else {}),
        }
        for t in request.tools
    ]
    if declarations:
        body["tools"] = [{"functionDeclarations": declarations}]
    config: dict[str, Any] | None = None
    if request.forced_tool is not None:
        config = {"mode": "ANY", "allowedFunctionNames": [request.forced_tool]}
    elif request.tool_choice is not None:
        config = {"mode": {"auto": "AUTO", "required": "ANY", "none": "NONE"}[request.tool_choice]}
    if config is not None and declarations:
        body["toolConfig"] = {"functionCallingConfig": config}


def _generation_config(request: GenerationRequest) -> dict[str, Any]:
    config: dict[str, Any] = {}
    for name, key in (
        ("temperature", "temperature"), ("top_p", "topP"), ("top_k", "topK"),
        ("max_tokens", "maxOutputTokens"), ("seed", "seed"),
        ("presence_penalty", "presencePenalty"), ("frequency_penalty", "frequencyPenalty"),
    ):  # fmt: skip
        value = getattr(request, name)
        if value is not None:
            config[key] = value
    if request.stop:
        config["stopSequences"] = list(request.stop)
    if request.n > 1:
        config["candidateCount"] = request.n
    fmt = request.response_format
    if fmt is not None:
        config["responseMimeType"] = "application/json"
        if fmt.type == "json_schema" and fmt.schema is not None:
            config["responseJsonSchema"] = fmt.schema
    thinking = _thinking(request)
    if thinking:
        config["thinkingConfig"] = thinking
    return config


def _thinking(request: GenerationRequest) -> dict[str, Any]:
    thinking = request.thinking
    effort = request.reasoning_effort or (thinking.effort if thinking else None)
    out: dict[str, Any] = {}
    if thinking is not None and thinking.type == "enabled":
        out = {"thinkingBudget": thinking.budget_tokens or -1, "includeThoughts": True}
    elif thinking is not None and thinking.type == "adaptive":
        out = {"thinkingBudget": -1, "includeThoughts": True}
    elif effort is not None:
        out = {"thinkingLevel": EFFORT_LEVELS.get(effort, "high")}
    return out


def _embed_request(model: str, text: str, dimensions: int | None) -> dict[str, Any]:
    ask: dict[str, Any] = {"model": model.lstrip("/"), "content": {"parts": [{"text": text}]}}
    if dimensions is not None:
        ask["outputDimensionality"] = dimensions
    return ask
