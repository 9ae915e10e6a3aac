"""Amazon Bedrock adapter: Converse and ConverseStream (POST /model/{modelId}/converse
and /converse-stream), InvokeModel for Titan embeddings, every request signed.

Sign-in: AWS SigV4 by botocore's signer (service `bedrock`; the optional `bedrock` extra,
which images leave out by default), from the access key,
secret and session token in the environment variables the params name (by default
AWS's own: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN), read again
for each request so rotated credentials are followed; or a Bedrock API key
(`api_key_env`) as `Authorization: Bearer`. The exact bytes sent are the bytes signed.

Translation: system and developer messages become `system` text blocks; the others
`messages` of `user` and `assistant` turns (consecutive ones merged; tool results are
user turns of `toolResult` blocks). Content: text, images and PDFs as bytes (Bedrock
takes no image URLs: an https image is refused naming the field), `toolUse` blocks.
Tools become `toolConfig.tools[].toolSpec` with `inputSchema.json`; tool_choice
auto/required/named become `auto`/`any`/`tool` (Bedrock has no `none`: tools are left
out unless the conversation already used them). Structured output is a forced tool
whose input is the reply's text, as on Anthropic's API. `inferenceConfig` takes
maxTokens, temperature, topP and stopSequences; top_k and extended thinking go in
`additionalModelRequestFields` (Anthropic models' names), merged with the params' own;
`guardrailConfig`, `performanceConfig` and `requestMetadata` (the caller's metadata)
pass through. Prompt caching: a cachePoint (with `ttl: 1h` for an hour-long one) after
each message, system text or tool the caller marked with cache_control, and with the
`cache_points` param after the system prompt and the tools of every request.

Replies: text, `toolUse` (streamed as contentBlockStart + input deltas) and
`reasoningContent` (reasoning, shown when thinking was asked; its signature is sealed
as the gateway's own, so no other provider is ever given it). Given back (a Messages
thinking block), that reasoning starts its turn again, as Anthropic's models on Bedrock
want it with thinking on; a tool loop whose calling turn holds none of this provider's
reasoning (made with thinking off, or elsewhere before a failover) is sent without
thinking, which Bedrock would otherwise refuse. Stop reasons: end_turn
and stop_sequence -> stop, max_tokens and model_context_window_exceeded -> length,
tool_use -> tool_calls, guardrail_intervened and content_filtered -> content_filter.
Usage: Bedrock's inputTokens exclude cache reads and writes (as Anthropic's do), so
prompt_tokens = inputTokens + cacheReadInputTokens + cacheWriteInputTokens, with
cached_tokens and cache_write_tokens the two (the hour-long writes from
`cacheDetails`). A stream ends with its metadata event;
one without messageStop is a failure.

Errors, at the one boundary (the type from `x-amzn-ErrorType` or the body's
`__type`): throttling, quota, model-not-ready and unavailable kinds are retryable
(429s keep Retry-After); access denied, bad credentials and unknown models are a
misconfigured provider; validation errors the caller's 400 with Bedrock's message;
model timeouts and model errors retryable on another provider. An exception event
mid-stream is an upstream failure named by its type.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

from pydantic import Field, model_validator

from server.base.config import ConfigError
from server.base.embedding import EmbeddingRequest, Embeddings
from server.base.errors import UpstreamError, UpstreamRejected
from server.base.generation import (
    GATEWAY_SIGNATURE,
    Capability,
    DocumentPart,
    Event,
    Finished,
    GenerationRequest,
    ImagePart,
    Message,
    ReasoningDelta,
    TextDelta,
    TokenCounts,
    ToolCallDelta,
    seal,
    unseal,
)
from server.providers import eventstream
from server.providers.http import (
    MESSAGE_CHARS,
    MISCONFIGURED,
    HttpParams,
    ProtocolViolation,
    Response,
    count,
    loads,
    make_client,
    plausible,
    read_api_key,
    read_json,
    redact,
    remember_secret,
    retry_after,
    streamed_counts,
    upstream_errors,
)

STOP_REASONS = {
    "end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length",
    "model_context_window_exceeded": "length", "tool_use": "tool_calls",
    "guardrail_intervened": "content_filter", "content_filtered": "content_filter",
}  # fmt: skip
CAPABILITIES: frozenset[str] = frozenset(
    {Capability.TOOLS, Capability.IMAGES, Capability.STRUCTURED_OUTPUT, Capability.THINKING,
     Capability.DOCUMENTS, Capability.TOP_K, Capability.METADATA}
)  # fmt: skip
RETRYABLE = frozenset({"ThrottlingException", "ServiceQuotaExceededException",
                       "ModelNotReadyException", "ServiceUnavailableException",
                       "InternalServerException", "ModelTimeoutException",
                       "ModelErrorException", "ModelStreamErrorException"})  # fmt: skip
MISCONFIGURED_KINDS = frozenset({"AccessDeniedException", "UnrecognizedClientException",
                                 "InvalidSignatureException", "ResourceNotFoundException",
                                 "ExpiredTokenException"})  # fmt: skip
DATA_URL = re.compile(r"^data:image/([a-z]+);base64,(.*)$", re.DOTALL)
MAX_MESSAGE_BYTES = 16 * 1024 * 1024


class BedrockParams(HttpParams):
    region: str = Field(default="us-east-1", min_length=1)
    # Environment variable names of the credentials (never the values).
    access_key_id_env: str = Field(default="AWS_ACCESS_KEY_ID", min_length=1)
    secret_access_key_env: str = Field(default="AWS_SECRET_ACCESS_KEY", min_length=1)
    session_token_env: str = Field(default="AWS_SESSION_TOKEN", min_length=1)
    stream: bool = True
    # max_tokens when the caller gives none (Anthropic models on Bedrock need one).
    default_max_tokens: int | None = Field(default=None, ge=1)
    # Passed through: model-specific fields, a guardrail, latency-optimised inference.
    additional_model_request_fields: dict[str, Any] | None = None
    guardrail_config: dict[str, Any] | None = None
    performance_config: dict[str, Any] | None = None
    # Put cache points after the system prompt and the tools (prompt caching).
    cache_points: bool = False
    # The Titan text-embeddings model that embeds for this provider.
    embedding_model: str | None = Field(default=None, min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _endpoint(cls, data: Any) -> Any:
        if isinstance(data, dict) and "base_url" not in data:
            region = data.get("region") or "us-east-1"
            data = {**data, "base_url": f"https://bedrock-runtime.{region}.amazonaws.com"}
        return data


class BedrockProvider:
    def __init__(self, provider_id: str, params: BedrockParams, where: str) -> None:
        self.id = provider_id
        self.params = params
        self.retry_policy = params.retry_policy
        self.capabilities = CAPABILITIES
        self._bearer = read_api_key(params, where)
        if self._bearer is None:  # a deployment without credentials fails at start-up
            for name in ("access_key_id_env", "secret_access_key_env"):
                if not os.environ.get(getattr(params, name)):
                    raise ConfigError(
                        f"{where}.params.{name}: environment variable "
                        f"{getattr(params, name)} is not set"
                    )
            if importlib.util.find_spec("botocore") is None:
                raise ConfigError(
                    f"{where}.params: signing with AWS keys needs botocore, the `bedrock` extra "
                    "(pip install 'model-gateway[bedrock]'), or an API key in api_key_env"
                )
        self._client = make_client(params, {})

    def _credentials(self) -> Any:
        from botocore.credentials import Credentials  # the optional `bedrock` extra

        p = self.params
        key = os.environ.get(p.access_key_id_env, "")
        secret = os.environ.get(p.secret_access_key_env, "")
        token = os.environ.get(p.session_token_env) or None
        for value in (secret, token):
            if value:
                remember_secret(value)
        return Credentials(key, secret, token)

    def _signed(self, path: str, body: bytes) -> tuple[tuple[str, str], ...]:
        """The headers that sign a POST of `body` to `path`."""
        if self._bearer is not None:
            return (("Authorization", f"Bearer {self._bearer}"),)
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        headers = {"content-type": "application/json"}
        request = AWSRequest("POST", self.params.base_url + path, headers, body)
        SigV4Auth(self._credentials(), "bedrock", self.params.region).add_auth(request)
        return tuple((k, v) for k, v in request.headers.items() if k.lower() != "content-type")

    def body(self, request: GenerationRequest) -> dict[str, Any]:
        p = self.params
        body: dict[str, Any] = {}
        thinking = request.thinking
        if thinking is not None and (
            thinking.type != "enabled" or not _may_think(request.messages, self.id)
        ):
            thinking = None
        if request.is_chat:
            body["messages"] = _turns(request.messages, self.id if thinking else None)
            system = []
            for m in request.messages:
                if m.role in ("system", "developer") and m.content:
                    system += [{"text": m.content}, *_cache_point(m.cache)]
        else:
            body["messages"] = [{"role": "user", "content": [{"text": request.prompt or ""}]}]
            system = []
        if system:
            automatic = p.cache_points and "cachePoint" not in system[-1]
            body["system"] = [*system, *_cache_point("5m" if automatic else None)]
        inference: dict[str, Any] = {}
        max_tokens = request.max_tokens or p.default_max_tokens
        if max_tokens is not None:
            inference["maxTokens"] = max_tokens
        if request.temperature is not None:
            inference["temperature"] = request.temperature
        if request.top_p is not None:
            inference["topP"] = request.top_p
        if request.stop:
            inference["stopSequences"] = list(request.stop)
        if inference:
            body["inferenceConfig"] = inference
        _tools(request, body, p.cache_points)
        extra = dict(p.additional_model_request_fields or {})
        if request.top_k is not None:
            extra["top_k"] = request.top_k
        if thinking is not None:
            extra["thinking"] = {"type": "enabled", "budget_tokens": thinking.budget_tokens}
        if extra:
            body["additionalModelRequestFields"] = extra
        if p.guardrail_config is not None:
            body["guardrailConfig"] = p.guardrail_config
        if p.performance_config is not None:
            body["performanceConfig"] = p.performance_config
        if request.metadata:
            body["requestMetadata"] = dict(request.metadata)
        return body

    def _model_path(self, model: str, method: str) -> str:
        return f"/model/{quote(model, safe='')}/{method}"

    async def generate(self, request: GenerationRequest) -> AsyncIterator[Event]:
        stream = self.params.stream
        path = self._model_path(self.params.model, "converse-stream" if stream else "converse")
        content = json.dumps(self.body(request)).encode()
        reading = _Reading(self.id, request)
        with upstream_errors(self.id):
            async with self._client.stream(
                "POST", path, content=content, extra_headers=self._signed(path, content)
            ) as r:
                await check(r, self.id)
                if not stream:
                    answer = await read_json(r)
                    events = reading.whole(answer)
                    final = reading.finished(plausible(reading.counts(), request))
                    for event in events:
                        yield event
                    yield final
                    return
                async for message in eventstream.messages(r, MAX_MESSAGE_BYTES):
                    for event in reading.message(message):
                        yield event
                yield reading.finished(streamed_counts(reading.counts, self.id))

    async def embed(self, request: EmbeddingRequest) -> Embeddings:
        """Titan text embeddings by InvokeModel, one input per call."""
        if any(not isinstance(i, str) for i in request.inputs):
            raise UpstreamRejected(
                f"input: {self.id} (Bedrock) embeds text, not token ids",
                {"provider": self.id, "field": "input"},
            )
        path = self._model_path(self.params.embedding_model or self.params.model, "invoke")
        vectors: list[tuple[float, ...]] = []
        used = 0
        with upstream_errors(self.id):
            for text in request.inputs:
                ask: dict[str, Any] = {"inputText": text}
                if request.dimensions is not None:
                    ask["dimensions"] = request.dimensions
                content = json.dumps(ask).encode()
                async with self._client.stream(
                    "POST", path, content=content, extra_headers=self._signed(path, content)
                ) as r:
                    await check(r, self.id)
                    answer = await read_json(r)
                vectors.append(tuple(float(v) for v in answer["embedding"]))
                used += count(answer.get("inputTextTokenCount", 0), "inputTextTokenCount")
        return Embeddings(tuple(vectors), used)

    async def aclose(self) -> None:
        await self._client.aclose()


class _Reading:
    """One Converse answer (whole, or as stream messages) -> events."""

    def __init__(self, provider: str, request: GenerationRequest) -> None:
        self.provider = provider
        self.formatted = request.response_format is not None
        self.shown = request.thinking is not None and request.thinking.shown
        self.usage: dict[str, Any] = {}
        self.stop: str | None = None
        self.calls: dict[int, int] = {}  # content block index -> tool call number

    def whole(self, answer: Any) -> list[Event]:
        events: list[Event] = []
        for block in answer["output"]["message"]["content"]:
            if "text" in block and block["text"] and not self.formatted:
                events.append(TextDelta(block["text"]))
            elif "toolUse" in block:
                use = block["toolUse"]
                arguments = json.dumps(use.get("input") or {})
                if self.formatted:
                    events.append(TextDelta(arguments))
                else:
                    number = len(self.calls)
                    self.calls[number] = number
                    events.append(ToolCallDelta(number, use["toolUseId"], use["name"], arguments))
            elif "reasoningContent" in block:
                text = block["reasoningContent"].get("reasoningText") or {}
                events.extend(self._reasoning(text.get("text"), text.get("signature")))
        self.stop = answer.get("stopReason")
        self.usage = answer.get("usage") or {}
        return events

    def message(self, message: eventstream.EventMessage) -> list[Event]:
        headers = message.headers
        kind = headers.get(":message-type")
        if kind in ("exception", "error"):
            name = headers.get(":exception-type") or headers.get(":error-code") or "error"
            said = _said(message.payload) or str(headers.get(":error-message", ""))
            raise UpstreamError(
                f"{self.provider}: upstream failed mid-stream: {name}: {said}",
                {"provider": self.provider},
                upstream_answered=True,
            )
        data = loads(message.payload) if message.payload else {}
        event = headers.get(":event-type")
        if event == "contentBlockStart":
            use = (data.get("start") or {}).get("toolUse")
            if use is not None and not self.formatted:
                number = self.calls[data.get("contentBlockIndex", 0)] = len(self.calls)
                return [ToolCallDelta(number, use["toolUseId"], use["name"], "")]
        elif event == "contentBlockDelta":
            delta = data.get("delta") or {}
            if delta.get("text"):
                return [] if self.formatted else [TextDelta(delta["text"])]
            if "toolUse" in delta:
                piece = delta["toolUse"].get("input") or ""
                if self.formatted:
                    return [TextDelta(piece)] if piece else []
                call = self.calls.get(data.get("contentBlockIndex", 0))
                return [ToolCallDelta(call, arguments=piece)] if call is not None else []
            if "reasoningContent" in delta:
                said = delta["reasoningContent"]
                return self._reasoning(said.get("text"), said.get("signature"))
        elif event == "messageStop":
            self.stop = data.get("stopReason")
        elif event == "metadata":
            self.usage = data.get("usage") or {}
        return []

    def _reasoning(self, text: str | None, signature: str | None) -> list[Event]:
        if not self.shown:
            return []
        events: list[Event] = [ReasoningDelta(text)] if text else []
        if signature:
            # Sealed as the gateway's own: only Bedrock made it, only Bedrock may see it.
            events.append(
                ReasoningDelta(signature=GATEWAY_SIGNATURE + seal(self.provider, signature))
            )
        return events

    def counts(self) -> TokenCounts | None:
        usage = self.usage
        if usage.get("inputTokens") is None:
            return None
        read = count(usage.get("cacheReadInputTokens") or 0, "cacheReadInputTokens")
        write = count(usage.get("cacheWriteInputTokens") or 0, "cacheWriteInputTokens")
        # The writes by lifetime: cacheDetails, [{ttl, inputTokens}], 1h before 5m.
        details = usage.get("cacheDetails")
        hour = sum(
            count(d.get("inputTokens") or 0, "cacheDetails.inputTokens")
            for d in (details if isinstance(details, list) else ())
            if isinstance(d, dict) and d.get("ttl") == "1h"
        )
        return TokenCounts(
            prompt_tokens=count(usage["inputTokens"], "inputTokens") + read + write,
            completion_tokens=count(usage.get("outputTokens") or 0, "outputTokens"),
            cached_tokens=read,
            cache_write_tokens=write,
            cache_write_1h_tokens=min(hour, write),
        )

    def finished(self, counts: TokenCounts | None) -> Finished:
        if not self.stop:
            raise ProtocolViolation("answer without a stopReason")
        if self.formatted and self.stop == "tool_use":
            return Finished("stop", counts)  # the forced format tool is the answer itself
        return Finished(STOP_REASONS.get(self.stop, "stop"), counts)


async def check(response: Response, provider: str) -> None:
    """Raises the gateway error for a Bedrock error answer (see the module doc)."""
    status = response.status_code
    if status < 300:
        return
    try:
        answer = await read_json(response)
    except ValueError:
        answer = {}
    answer = answer if isinstance(answer, dict) else {}  # a proxy's page, say
    header = response.headers.get("x-amzn-ErrorType", "")
    kind = header.split(":", 1)[0] or str(answer.get("__type", "")).rsplit("#", 1)[-1]
    meta = {"provider": provider, "upstream_status": str(status), "upstream_error": kind}
    if status in MISCONFIGURED or kind in MISCONFIGURED_KINDS:
        raise UpstreamError(
            f"{provider}: upstream refused the gateway's configuration (HTTP {status} {kind}); "
            "check its credentials, region and model",
            meta,
            upstream_answered=True,
        )
    said = _said(answer)
    text = f"{provider}: upstream answered HTTP {status} {kind}".rstrip() + (
        f": {said}" if said else ""
    )
    if status == 429 or kind in RETRYABLE or status >= 500 or status in (408, 424):
        raise UpstreamError(
            text, meta, retry_after_s=retry_after(response.headers), upstream_answered=status != 429
        )
    raise UpstreamRejected(text, meta)


def _said(payload: Any) -> str:
    """Bedrock's error message (`message` or `Message`), redacted and shortened."""
    if isinstance(payload, bytes | bytearray):
        try:
            payload = loads(bytes(payload))
        except ValueError:
            return ""
    if not isinstance(payload, dict):
        return ""
    message = payload.get("message") or payload.get("Message") or ""
    return redact(str(message)[:MESSAGE_CHARS])


def _cache_point(lifetime: str | None) -> list[dict[str, Any]]:
    """A cache point with this lifetime, or none (None); 5 minutes is the default."""
    if lifetime is None:
        return []
    return [{"cachePoint": {"type": "default", **({"ttl": "1h"} if lifetime == "1h" else {})}}]


def _turns(messages: tuple[Message, ...], replaying: str | None) -> list[dict[str, Any]]:
    """Bedrock's turns; each assistant turn starts with the reasoning the provider
    `replaying` made in it (with thinking on, Bedrock wants it back)."""
    turns: list[dict[str, Any]] = []
    for m in messages:
        if m.role in ("system", "developer"):
            continue
        role = "assistant" if m.role == "assistant" else "user"
        blocks = _blocks(m)
        if replaying is not None:
            blocks = [*_reasoning_of(m, replaying), *blocks]
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    return turns


def _reasoning_of(m: Message, provider: str) -> list[dict[str, Any]]:
    """The reasoning blocks `provider` made in this turn, as Bedrock gave them."""
    blocks = []
    for thought in m.thoughts:
        unsealed = unseal(thought.signature)
        if unsealed is not None and unsealed[0] == provider:
            said = {"text": thought.text, "signature": unsealed[1]}
            blocks.append({"reasoningContent": {"reasoningText": said}})
    return blocks


def _may_think(messages: tuple[Message, ...], provider: str) -> bool:
    """Whether thinking may be asked. In a tool loop (the conversation ends in tool
    results) Bedrock's Anthropic models refuse it unless the turn that made the calls
    starts with their own reasoning; when that turn has none of this provider's (made
    with thinking off, or by another provider before a failover), the request goes
    without thinking rather than fail."""
    turns = [m for m in messages if m.role not in ("system", "developer")]
    if not turns or turns[-1].role != "tool":
        return True
    last = next((m for m in reversed(turns) if m.role == "assistant"), None)
    return last is None or bool(_reasoning_of(last, provider))


def _blocks(m: Message) -> list[dict[str, Any]]:
    blocks = _content(m)
    return [*blocks, *_cache_point(m.cache)] if blocks else blocks


def _content(m: Message) -> list[dict[str, Any]]:
    if m.role == "tool":
        result = {"toolUseId": m.tool_call_id, "content": [{"text": m.content or " "}]}
        return [{"toolResult": result}]
    blocks: list[dict[str, Any]] = []
    for part in m.parts:
        if isinstance(part, ImagePart):
            match = DATA_URL.match(part.url)
            if match is None:
                raise UpstreamRejected(
                    "messages: Bedrock takes images as data: URLs (base64), not links",
                    {"field": "messages"},
                )
            # Every dialect takes png, jpeg, gif and webp only: Bedrock's own names.
            blocks.append(
                {"image": {"format": match.group(1), "source": {"bytes": match.group(2)}}}
            )
        elif isinstance(part, DocumentPart):
            document = {"format": "pdf", "name": part.title or "document",
                        "source": {"bytes": part.data}}  # fmt: skip
            blocks.append({"document": document})
        elif part.text:
            blocks.append({"text": part.text})
    if not m.parts and m.content:
        blocks.append({"text": m.content})
    for call in m.tool_calls:
        try:
            arguments = json.loads(call.arguments or "{}")
        except ValueError:
            arguments = {}
        blocks.append({"toolUse": {"toolUseId": call.id, "name": call.name, "input": arguments}})
    return blocks


def _tools(request: GenerationRequest, body: dict[str, Any], cache_points: bool) -> None:
    used = any(m.tool_calls or m.role == "tool" for m in request.messages)
    tools = []
    for t in request.tools:
        tools.append({"toolSpec": {
            "name": t.name, **({"description": t.description} if t.description else {}),
            "inputSchema": {"json": t.parameters or {"type": "object", "properties": {}}},
        }})  # fmt: skip
        tools += _cache_point(t.cache)
    choice: dict[str, Any] | None = None
    if request.forced_tool is not None:
        choice = {"tool": {"name": request.forced_tool}}
    elif request.tool_choice == "required":
        choice = {"any": {}}
    elif request.tool_choice == "auto":
        choice = {"auto": {}}
    elif request.tool_choice == "none" and not used:
        tools = []
    fmt = request.response_format
    if fmt is not None:
        name = fmt.name or "json_object"
        schema = fmt.schema if fmt.type == "json_schema" else None
        description = fmt.description or "Answers in this JSON shape."
        spec = {"name": name, "description": description,
                "inputSchema": {"json": schema or {"type": "object"}}}  # fmt: skip
        tools.append({"toolSpec": spec})
        choice = {"tool": {"name": name}}
    if not tools:
        return
    automatic = _cache_point("5m" if cache_points and "cachePoint" not in tools[-1] else None)
    config: dict[str, Any] = {"tools": [*tools, *automatic]}
    if choice is not None:
        config["toolChoice"] = choice
    body["toolConfig"] = config
