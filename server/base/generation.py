"""What the core asks of a provider, and what a provider streams back.

Transport-neutral: adapters turn these into their wire format, and the core turns the
events into proto responses.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

from google.protobuf.message import Message as ProtoMessage

from server.base.errors import UpstreamError


class Capability(StrEnum):
    """What a request may need of a provider beyond plain text generation. Each
    provider declares the ones it has (its adapter's default, or its config's list);
    dispatch only tries providers that have every one a request needs."""

    TOOLS = "tools"
    IMAGES = "images"
    STRUCTURED_OUTPUT = "structured_output"
    # More than one choice per request (n > 1, best_of > 1).
    N = "n"
    LOGPROBS = "logprobs"
    # seed, presence_penalty and frequency_penalty.
    SAMPLING_CONTROLS = "sampling_controls"
    # Biasing given token ids (logit_bias): token ids of the upstream's own tokenizer.
    LOGIT_BIAS = "logit_bias"
    # A text completion's suffix (fill in the middle).
    SUFFIX = "suffix"
    REASONING_EFFORT = "reasoning_effort"
    # Request metadata (key-value tags) passed to the upstream.
    METADATA = "metadata"
    # Extended thinking: reasoning before the reply (Messages' `thinking`).
    THINKING = "thinking"
    # Documents (PDF) as input.
    DOCUMENTS = "documents"
    # Sampling from the K likeliest tokens only.
    TOP_K = "top_k"
    # A text completion of several prompts in one request, or of a prompt given as
    # token ids (OpenAI's array forms of `prompt`).
    PROMPT_ARRAYS = "prompt_arrays"
    # A Realtime session's spoken turn (audio heard, audio spoken): the simulated
    # provider's alone; upstreams that speak are relayed, not run through here.
    SPOKEN_AUDIO = "spoken_audio"


# Everything a generation request can ask of an adapter that does it all.
ALL_CAPABILITIES: frozenset[str] = frozenset(Capability)
# The capability of serving an ingress dialect's own API, named after the dialect.
_SERVES = "_api"


def serves(dialect: str) -> str:
    """The capability of an upstream that serves the ingress dialect `dialect` itself
    (`<dialect>_api`): a request that came in that dialect goes there as it came
    (`Native`), with what only that format carries."""
    return dialect + _SERVES


def served_dialect(capability: str) -> str | None:
    """The dialect a capability serves (see `serves`); None for the generic ones."""
    if capability in ALL_CAPABILITIES or not capability.endswith(_SERVES):
        return None
    return capability[: -len(_SERVES)] or None


@dataclass(frozen=True, slots=True)
class TextPart:
    text: str


@dataclass(frozen=True, slots=True)
class ImagePart:
    """An image by `https://` URL or `data:` URL."""

    url: str
    detail: str | None = None

    @property
    def is_data(self) -> bool:
        return self.url.startswith("data:")


@dataclass(frozen=True, slots=True)
class DocumentPart:
    """A PDF document, as base64 `data`."""

    media_type: str
    data: str
    title: str | None = None


Part = TextPart | ImagePart | DocumentPart

# One prompt of a text completion: its text, or its token ids.
Prompt = str | tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A call the model made; `arguments` is JSON text. `signature` is the reasoning
    state the upstream that made the call wants back with it (Gemini's thought
    signature), sealed with that provider's id (`seal`): only it is ever given it."""

    id: str
    name: str
    arguments: str
    signature: str | None = None


@dataclass(frozen=True, slots=True)
class Thought:
    """A thinking block of an earlier assistant turn, given back: its text and the
    signature of the provider that made it, sealed with that provider's id (`seal`).
    Providers that want reasoning back in a tool loop (Bedrock) replay their own."""

    text: str
    signature: str


@dataclass(frozen=True, slots=True)
class Message:
    role: str
    # The text; for content given as parts, its text parts joined.
    content: str
    # The content as parts, when it was given that way.
    parts: tuple[Part, ...] = ()
    name: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    # A prompt-cache breakpoint after this message, with its lifetime (`5m` or `1h`):
    # the caller's cache_control, for providers that cache on request.
    cache: str | None = None
    # The turn's reasoning, before its text and calls (assistant turns).
    thoughts: tuple[Thought, ...] = ()

    @property
    def images(self) -> tuple[ImagePart, ...]:
        return tuple(p for p in self.parts if isinstance(p, ImagePart))

    @property
    def documents(self) -> tuple[DocumentPart, ...]:
        return tuple(p for p in self.parts if isinstance(p, DocumentPart))


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A function the model may call; `parameters` is its JSON Schema."""

    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None
    # A prompt-cache breakpoint after this tool, with its lifetime (see Message.cache).
    cache: str | None = None


@dataclass(frozen=True, slots=True)
class ResponseFormat:
    """`json_object`, or `json_schema` with a named schema (`text` is no format)."""

    type: str
    name: str | None = None
    schema: dict[str, Any] | None = None
    description: str | None = None
    strict: bool | None = None


@dataclass(frozen=True, slots=True)
class Thinking:
    """How much the model reasons: extended thinking `enabled` with a token budget,
    `adaptive`, or `disabled` with only an `effort` (`low` ... `max`)."""

    type: str
    budget_tokens: int | None = None
    effort: str | None = None

    @property
    def shown(self) -> bool:
        """Whether the reply shows its reasoning (thinking blocks)."""
        return self.type != "disabled"

    @property
    def required(self) -> bool:
        """Whether a provider must think: `enabled` asks for it; `adaptive` (the model
        decides how much, none included) and an effort alone are hints."""
        return self.type == "enabled"


@dataclass(frozen=True, slots=True)
class Native:
    """A request as it came in an ingress dialect, for upstreams that serve that
    dialect's API themselves (capability `serves(dialect)`): sent there as the caller
    wrote it, so nothing the format carries is lost; every other adapter uses the
    generic fields of the GenerationRequest.

    `request` is the caller's request in the form the dialect's adapters read (the
    contract's message, or its JSON fields) and `headers` the dialect's own headers to
    pass on. `required_by` names the first field only such an upstream can honour. A
    request that continues a conversation the gateway stored carries its earlier items
    in `history`; `previous` names the provider that stored it itself and that
    provider's id of it: that provider is sent only the new input with the id."""

    dialect: str
    request: ProtoMessage | Mapping[str, Any]
    headers: tuple[tuple[str, str], ...] = ()
    required_by: str | None = None
    history: tuple[Mapping[str, Any], ...] = ()
    previous: tuple[str, str] | None = None


# Encrypted reasoning as the gateway hands it out: the producing provider, then the
# upstream's opaque content, so it is only ever replayed to that provider.
_SEAL = "gwr1:"


def seal(provider_id: str, content: str) -> str:
    return f"{_SEAL}{len(provider_id)}:{provider_id}{content}"


def unseal(sealed: str) -> tuple[str, str] | None:
    """(provider id, content) of sealed content; None when it is not the gateway's."""
    if not sealed.startswith(_SEAL):
        return None
    size, _, rest = sealed[len(_SEAL) :].partition(":")
    if not size.isdigit() or int(size) > len(rest):
        return None
    return rest[: int(size)], rest[int(size) :]


@dataclass(frozen=True, slots=True)
class GenerationRequest:
    """One generation: a chat (`messages`) or a plain-text `prompt`, never both."""

    messages: tuple[Message, ...] = ()
    prompt: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop: tuple[str, ...] = ()
    # Choices asked for.
    n: int = 1
    seed: int | None = None
    user: str | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    logit_bias: tuple[tuple[str, int], ...] = ()
    logprobs: bool = False
    # Most likely alternatives per position (chat top_logprobs; completions logprobs).
    top_logprobs: int | None = None
    tools: tuple[ToolSpec, ...] = ()
    # `none`, `auto` or `required`; None when not given.
    tool_choice: str | None = None
    # A function the model must call.
    forced_tool: str | None = None
    parallel_tool_calls: bool | None = None
    response_format: ResponseFormat | None = None
    reasoning_effort: str | None = None
    metadata: tuple[tuple[str, str], ...] = ()
    # Text completions only. Several prompts, or one given as token ids (OpenAI's array
    # `prompt`): every prompt in order, each continued `n` times (choice i continues
    # prompt i // n); `prompt` then holds their text, for estimates and logs.
    prompts: tuple[Prompt, ...] = ()
    echo: bool = False
    suffix: str | None = None
    best_of: int | None = None
    # Groups requests sharing a prompt prefix for the upstream's prompt cache: a hint,
    # forwarded where the upstream has such a cache and meaningless elsewhere.
    prompt_cache_key: str | None = None
    # How long the upstream keeps cached prefixes (OpenAI's `in_memory` or `24h`).
    prompt_cache_retention: str | None = None
    # Hints for upstreams that take them (OpenAI's), changing nothing in the answer:
    # keep the completion upstream, the processing tier, the end user's hashed id.
    store: bool | None = None
    service_tier: str | None = None
    safety_identifier: str | None = None
    # The request as it came in its dialect, for upstreams that serve it natively.
    native: Native | None = None
    # The caller's wire format when its stream may be relayed as an upstream of that
    # format writes it (`Relayed`), not decoded event by event into the core's.
    relay: str | None = None
    top_k: int | None = None
    # Whether `top_k` is a sampling hint (Gemini's topK, which Gemini CLI sends with
    # every turn): sent where the provider samples so, left out elsewhere.
    top_k_hint: bool = False
    thinking: Thinking | None = None
    # A Realtime session's spoken turn (server/base/realtime_audio.py): the audio tokens of the
    # input heard (its transcript is in the messages), and whether the answer is also
    # spoken. Only a provider that speaks (`speaks_audio`) takes such a request.
    input_audio_tokens: int = 0
    output_audio: bool = False
    # Its input tokens as server/base/tokens.py estimates them, once asked.
    prompt_estimate: int | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def is_chat(self) -> bool:
        return self.prompt is None

    @property
    def choice_count(self) -> int:
        """The choices the answer holds: `n` for each prompt."""
        return max(1, self.n) * max(1, len(self.prompts))

    def relayed_as(self, dialect: str) -> GenerationRequest:
        """This request, its stream to be relayed in `dialect` by an upstream that writes
        that format (`relay`); with several choices it is decoded (a relayed stream's
        text is choice 0's)."""
        if self.choice_count != 1:
            return self
        # Copied slot by slot: `dataclasses.replace` runs the whole constructor again
        # (14 us for this class, against 6) on every relayed stream. The prompt, and so
        # its estimate, stays as it was.
        relayed = object.__new__(GenerationRequest)
        for slot in _SLOTS:
            slot.__set__(relayed, slot.__get__(self))
        object.__setattr__(relayed, "relay", dialect)
        return relayed

    def prompt_of(self, choice: int) -> Prompt:
        """The prompt a choice continues."""
        if not self.prompts:
            return self.prompt or ""
        return self.prompts[choice // max(1, self.n)]

    def for_provider(self, capabilities: frozenset[str]) -> GenerationRequest:
        """The request as a provider with `capabilities` gets it: hints it cannot take
        (adaptive thinking, an effort, a top-K its dialect calls a hint) left out, as
        they allow."""
        out = self
        if self.top_k is not None and self.top_k_hint and Capability.TOP_K not in capabilities:
            out = dataclasses.replace(out, top_k=None)
        if self.thinking is None or self.thinking.required or Capability.THINKING in capabilities:
            return out
        return dataclasses.replace(out, thinking=None)

    def needs(self) -> dict[str, str]:
        """The capabilities this request needs, each with the field that needs it."""
        out: dict[str, str] = {}
        if self.tools or any(m.tool_calls or m.role == "tool" for m in self.messages):
            out[Capability.TOOLS] = "tools"
        if any(m.images for m in self.messages):
            out[Capability.IMAGES] = "messages"
        if self.response_format is not None:
            out[Capability.STRUCTURED_OUTPUT] = "response_format"
        if self.n > 1:
            out[Capability.N] = "n"
        if (self.best_of or 1) > 1:
            out[Capability.N] = "best_of"
        if self.logprobs:
            out[Capability.LOGPROBS] = "logprobs"
        for name in ("seed", "presence_penalty", "frequency_penalty"):
            if getattr(self, name) is not None:
                out[Capability.SAMPLING_CONTROLS] = name
        if self.logit_bias:
            out[Capability.LOGIT_BIAS] = "logit_bias"
        if self.suffix is not None:
            out[Capability.SUFFIX] = "suffix"
        if self.prompts:
            out[Capability.PROMPT_ARRAYS] = "prompt"
        if self.output_audio or self.input_audio_tokens:
            out[Capability.SPOKEN_AUDIO] = "realtime_audio"
        if self.reasoning_effort is not None:
            out[Capability.REASONING_EFFORT] = "reasoning_effort"
        if self.metadata:
            out[Capability.METADATA] = "metadata"
        if self.thinking is not None and self.thinking.required:
            out[Capability.THINKING] = "thinking"
        if any(m.documents for m in self.messages):
            out[Capability.DOCUMENTS] = "messages"
        if self.top_k is not None and not self.top_k_hint:
            out[Capability.TOP_K] = "top_k"
        if self.native is not None and self.native.required_by is not None:
            out[serves(self.native.dialect)] = self.native.required_by
        return out


@dataclass(frozen=True, slots=True)
class TokenCounts:
    """Tokens of one generation. prompt_tokens includes cached_tokens and
    cache_write_tokens, and completion_tokens includes reasoning_tokens (OpenAI's
    convention; adapters of other wire formats convert)."""

    prompt_tokens: int
    completion_tokens: int
    # Input tokens read from a prompt cache.
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    # Input tokens written to a prompt cache (priced at Price.cache_write).
    cache_write_tokens: int = 0
    # Of those, the ones written for an hour (Anthropic's 1h TTL, priced at
    # Price.cache_write_1h); the rest live the default 5 minutes.
    cache_write_1h_tokens: int = 0
    # Input tokens heard as audio and output tokens spoken as audio (a Realtime
    # session's), each priced at its own rate.
    audio_input_tokens: int = 0
    audio_output_tokens: int = 0
    # Of the audio input tokens, those read from a prompt cache (among cached_tokens
    # too), priced at Price.cached_audio_input.
    cached_audio_tokens: int = 0
    # Input tokens of images (an image edit's), priced at Price.image_input.
    image_input_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True, slots=True)
class TopLogprob:
    token: str
    logprob: float


@dataclass(frozen=True, slots=True)
class TokenLogprob:
    """A generated token's log probability, with the likeliest alternatives."""

    token: str
    logprob: float
    top: tuple[TopLogprob, ...] = ()


def token_logprobs(entries: Any) -> tuple[TokenLogprob, ...]:
    """Log probabilities as OpenAI's APIs write them (`[{token, logprob, top_logprobs:
    [{token, logprob}]}]`); an entry of another shape is left out."""
    if not isinstance(entries, list):
        return ()
    return tuple(
        TokenLogprob(e["token"], float(e["logprob"]), tuple(
            TopLogprob(t["token"], float(t["logprob"]))
            for t in e.get("top_logprobs") or () if _is_logprob(t)
        ))
        for e in entries if _is_logprob(e)
    )  # fmt: skip


def _is_logprob(entry: Any) -> bool:
    return (
        isinstance(entry, dict)
        and isinstance(entry.get("token"), str)
        and type(entry.get("logprob")) in (int, float)
    )


# Events made for every streamed token are treated as immutable but not frozen: a
# frozen dataclass's __init__ costs three times a plain one's.
@dataclass(slots=True)
class TextDelta:
    """A fragment of generated text, of choice `choice`."""

    text: str
    choice: int = 0
    # The log probabilities of the fragment's tokens, when asked for.
    logprobs: tuple[TokenLogprob, ...] = ()


@dataclass(slots=True)  # not frozen: see TextDelta
class ToolCallDelta:
    """A fragment of tool call number `index` of choice `choice`: the first fragment of
    a call carries its id and name (and its sealed `signature`, see ToolCall), the next
    ones pieces of its JSON arguments."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""
    choice: int = 0
    signature: str | None = None


def namespaced(namespace: str, name: str) -> str:
    """A function inside a namespace tool (the Responses API's) as the one tool name
    upstreams without namespaces get and answer with."""
    return f"{namespace}__{name}"


@dataclass(slots=True)  # not frozen: see TextDelta
class ReasoningDelta:
    """A fragment of the model's reasoning: a summary's part `summary_index`
    (upstreams that serve the Responses API natively) or a thinking block's text, and
    last its `signature`, which only the kind of provider that made it may be given
    back (Messages)."""

    text: str = ""
    summary_index: int = 0
    signature: str | None = None


@dataclass(frozen=True, slots=True)
class NativeEvent:
    """Output as an upstream serving an ingress dialect's API itself wrote it, for a
    `Native` request of that dialect: one of its events, or a whole output item (its
    encrypted reasoning sealed, see `seal`), passed on to the dialect untouched.

    `text` and `other` are what it generated, as a `Relayed`'s (where the adapter
    reads them): counted for the estimate when no usage comes."""

    dialect: str
    data: Mapping[str, Any]
    text: str = ""
    other: str = ""


@dataclass(frozen=True, slots=True)
class Finished:
    """The end of a generation. `counts` is None when the upstream reported no usage;
    the core then counts the tokens itself. `finish_reason` is choice 0's;
    `finish_reasons` holds every choice's when there are several. `response_id` is
    the upstream's own id of a response it stored (Responses API upstreams);
    `stop_sequence` the stop sequence that ended choice 0, when the upstream says which."""

    finish_reason: str
    counts: TokenCounts | None = None
    finish_reasons: tuple[str, ...] = ()
    response_id: str | None = None
    stop_sequence: str | None = None


@dataclass(slots=True)  # not frozen: see TextDelta
class Relayed:
    """Stream events an upstream wrote in the caller's own wire format (the request's
    `relay`), as many as one read brought, each a parsed JSON object passed on as the
    upstream wrote it but for what the core takes from them: finish reasons and usage
    (a `Finished` follows), and events that carry nothing else, left out. The dialect
    stamps its own head on each and encodes it; no core event is made per token.

    `text` is the answer's text in them, `other` the rest that was generated (tool
    arguments, reasoning), both counted when no usage comes; `size` the bytes of both,
    counted against max_tokens. `decode(events)` gives the same as core events, for a
    run that must cut one short."""

    # The events, in the form the adapter and its dialect share (parsed chunks; a
    # named event's SseEvent).
    events: list[Any]
    text: str
    other: str
    size: int
    decode: Callable[[list[Any]], list[Event]]

    @classmethod
    def gathered(
        cls,
        events: list[Any],
        text: list[str],
        other: list[str],
        decode: Callable[[list[Any]], list[Event]],
    ) -> Relayed:
        answer, rest = "".join(text), "".join(other)
        return cls(events, answer, rest, _utf8_size(answer) + _utf8_size(rest), decode)


def _utf8_size(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode())


Event = TextDelta | ToolCallDelta | ReasoningDelta | NativeEvent | Relayed | Finished
# Signatures of thinking blocks the gateway's own providers make start with this; any
# other signature is an Anthropic upstream's.
GATEWAY_SIGNATURE = "gateway-signature:"


@dataclass(frozen=True)
class RetryPolicy:
    """Attempts on one provider; dispatch applies it within the request deadline."""

    max_retries: int = 0
    backoff_s: float = 0.25
    max_retry_after_s: float = 5

    def pause(self, attempt: int, error: UpstreamError) -> float | None:
        """Seconds to wait before retry number `attempt` (1-based), None for no retry."""
        if attempt > self.max_retries:
            return None
        if error.retry_after_s is not None:
            return error.retry_after_s if error.retry_after_s <= self.max_retry_after_s else None
        # "Equal jitter": half the doubled backoff, plus a random part of the other half,
        # so callers failing together do not retry together.
        step = self.backoff_s * 2 ** (attempt - 1)
        return step / 2 + random.uniform(0, step / 2)


NO_RETRY = RetryPolicy(max_retries=0)


class Provider(Protocol):
    """An upstream that generates text. Failures are raised as `errors.UpstreamError`
    (retryable when another provider may succeed); any other exception is a bug."""

    # How often dispatch may retry this provider before failing over.
    retry_policy: RetryPolicy
    # What it can do beyond plain text (its adapter's default; config may narrow it):
    # Capability values, and `serves(dialect)` for the dialects it serves natively.
    capabilities: frozenset[str]

    def generate(self, request: GenerationRequest) -> AsyncIterator[Event]:
        """Streams TextDelta and ToolCallDelta events, then exactly one Finished event."""
        ...

    async def aclose(self) -> None:
        """Releases pooled connections."""
        ...


@runtime_checkable
class TokenCounter(Protocol):
    """A provider that counts a request's input tokens itself (Anthropic's
    count_tokens); failures are raised as `errors.UpstreamError`."""

    async def count_tokens(self, request: GenerationRequest) -> int: ...


# The request's slots, for `relayed_as`.
_SLOTS = tuple(GenerationRequest.__dict__[name] for name in GenerationRequest.__slots__)
