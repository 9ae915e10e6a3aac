"""The simulated provider: a built-in stand-in model for demos, tests and benchmarks.

It calls no network. Its reply is deterministic placeholder text derived from a hash
of the prompt, always starting with "(simulated)", paced by a configurable time to
first token and tokens per second. max_tokens and stop sequences are honoured as a real
model would. Faults can be injected: a share of requests failing before the first
token, or every stream cut after N tokens.

It also creates embeddings: deterministic unit vectors seeded by each input, of
`embedding_dimensions` values, shortened to a request's `dimensions` as OpenAI's
models do (the leading values, normalised again). They carry no meaning. And it
reranks: each document scored by the share of the query's words it holds (ties in
document order), one search unit per 100 documents. And it moderates: an input is flagged in a category when it holds one of
that category's listed words (`MODERATION_WORDS`), scored 0.97 there and 0.0001
elsewhere; images are never flagged. And it transcribes and speaks (simulated_audio):
a transcript of placeholder words picked by the file's bytes, billed by its seconds,
and a short tone as WAV or PCM (silent frames as MP3), sent in chunks of 4 kB. And it
draws: a valid PNG of the asked size in colours picked by the prompt (simulated_images).

It has every capability, so the embedded default shows the whole request surface:
- tools, as a cooperative model calls them, so agent frameworks finish: with arguments
  valid against each schema, it calls the forced tool, else the tools the user's last
  message names (words of a tool's name, `get_weather` for "weather"), all in one turn
  unless parallel_tool_calls is false, else the first tool; once this turn's calls have
  results (tool messages, or observations after calls kept as text, as smolagents
  writes them) it answers in text, or, when a tool is required, calls one not called
  yet, an output tool first (`final_answer`, `submit_answer`...), as agent frameworks
  hand in their answers;
- response_format: JSON valid against the schema (`json_object`: an object with the
  keys the prompt names, quoted or after "keys"/"fields", else one holding the
  simulated text), strings inside labelled "(simulated)";
- JSON asked for in the prompt alone (a schema or example in it, BAML's format, a
  fenced block when asked), a classifier's label (or index) among those it lists: see
  prompt_json; with `json_object`, the prompt's schema is honoured too;
- a reply format prescribed by field markers (dspy's `[[ ## answer ## ]]`): each asked
  field under its marker, valued as the prompt's note on it says (field_markers);
- n: distinct deterministic choices; logprobs: deterministic made-up values;
- thinking: a few words of labelled reasoning before the reply, signed with a
  signature of its own (GATEWAY_SIGNATURE), never one an Anthropic upstream would
  take; a reply cut by a stop sequence says which one.
Seeds, penalties, logit_bias, suffix, reasoning_effort and metadata change nothing in
a reply that is already deterministic.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import random
import re
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from server.base import realtime_audio, tokens
from server.base.audio import Speech, SpeechRequest, Transcript, TranscriptionRequest
from server.base.embedding import EmbeddingRequest, Embeddings, Input, estimate_tokens
from server.base.errors import UpstreamError, UpstreamRejected
from server.base.generation import (
    ALL_CAPABILITIES,
    GATEWAY_SIGNATURE,
    NO_RETRY,
    Event,
    Finished,
    GenerationRequest,
    Message,
    ReasoningDelta,
    TextDelta,
    TokenCounts,
    TokenLogprob,
    ToolCallDelta,
    TopLogprob,
)
from server.base.images import ImageRequest, Images
from server.base.moderation import CATEGORIES as MODERATION_CATEGORIES
from server.base.moderation import ModerationRequest, Moderations, Verdict
from server.base.moderation import estimate_tokens as moderation_tokens
from server.base.rerank import DOCUMENTS_PER_SEARCH_UNIT, Ranking, RerankRequest
from server.base.rerank import estimate_tokens as rerank_tokens
from server.providers import field_markers, prompt_json, simulated_audio, simulated_images
from server.providers.schema_instance import instance

PHRASE = (
    "the gateway routes each request to a model that fits its budget and answers with "
    "text usage cost and timing so every caller knows what a call was worth while "
    "providers fail over quietly behind one stable interface for many teams"
)
WORDS = tuple(PHRASE.split())
LABEL = "(simulated)"
# Characters of tool-call arguments per streamed fragment.
ARGUMENT_FRAGMENT = 12


@dataclass(frozen=True)
class Planned:
    """One choice's reply: text pieces, or tool calls, each streamed as argument pieces."""

    pieces: list[str]
    finish: str
    calls: tuple[PlannedCall, ...] = ()
    stop_sequence: str | None = None


@dataclass(frozen=True, slots=True)
class PlannedCall:
    tool: str
    call_id: str
    pieces: list[str]


class SimulatedParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    ttft_ms: float = Field(default=50, ge=0)
    # 0 streams every token at once.
    tokens_per_second: float = Field(default=100, ge=0)
    # Generated tokens when neither max_tokens nor a stop sequence ends the reply
    # earlier; the reply's natural length varies between the two by prompt.
    min_reply_tokens: int = Field(default=12, ge=1)
    max_reply_tokens: int = Field(default=48, ge=1)
    # Share of requests that fail before their first token, 0 to 1.
    error_rate: float = Field(default=0, ge=0, le=1)
    # Cuts every stream after this many tokens with an upstream error.
    fail_after_tokens: int | None = Field(default=None, ge=0)
    # Share of prompt tokens reported as read from a prompt cache, 0 to 1.
    cached_ratio: float = Field(default=0, ge=0, le=1)
    # A prompt cache of this provider's own, as providers keep one: the longest prefix
    # of a chat (at a message boundary) it served within this many seconds is read from
    # the cache (and each use keeps it another ttl). Absent: only cached_ratio.
    prompt_cache_ttl_s: float | None = Field(default=None, gt=0)
    # Values in each embedding vector (a request's `dimensions` may ask for fewer).
    embedding_dimensions: int = Field(default=256, ge=1, le=8192)


class PrefixCache:
    """Chat prefixes at message boundaries, each kept `ttl_s` after its last use; a
    request reads the tokens of its longest kept prefix. Bounded: the expired go first,
    then the oldest."""

    MAX_ENTRIES = 100_000

    def __init__(self, ttl_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s = ttl_s
        self._clock = clock
        self._expiry: dict[bytes, float] = {}

    def read(self, request: GenerationRequest) -> int:
        now = self._clock()
        digest = hashlib.blake2b(digest_size=16)
        hit = size = 0
        for message in request.messages:
            digest.update(f"{message.role}\0{message.content}\0".encode())
            size += tokens.estimate(message.content) + 4
            key = digest.digest()
            if self._expiry.get(key, 0) > now:
                hit = size
            self._expiry[key] = now + self.ttl_s
        if len(self._expiry) > self.MAX_ENTRIES:
            live = {k: t for k, t in self._expiry.items() if t > now}
            self._expiry = dict(list(live.items())[-self.MAX_ENTRIES // 2 :])
        return hit


class SimulatedProvider:
    def __init__(self, provider_id: str, params: SimulatedParams) -> None:
        self.id = provider_id
        self.params = params
        # A simulated failure is injected on purpose: fail over at once, never retry.
        self.retry_policy = NO_RETRY
        self.capabilities = ALL_CAPABILITIES  # Capability.SPOKEN_AUDIO among them
        self._random = random.Random()
        # Generations running now; a cancelled caller must bring this back down.
        self.in_flight = 0
        self._cache = PrefixCache(params.prompt_cache_ttl_s) if params.prompt_cache_ttl_s else None

    def reply_tokens(self, request: GenerationRequest, choice: int = 0) -> tuple[list[str], str]:
        """Returns the reply's tokens and finish reason, limits and stops applied."""
        pieces, finish, _ = self._reply(request, choice)
        return pieces, finish

    def _reply(self, request: GenerationRequest, choice: int) -> tuple[list[str], str, str | None]:
        """The reply's tokens, finish reason and the stop sequence that cut it."""
        rng = random.Random(_seed(request, choice))
        p = self.params
        natural = rng.randint(p.min_reply_tokens, max(p.min_reply_tokens, p.max_reply_tokens))
        words = [LABEL] + [rng.choice(WORDS) for _ in range(natural - 1)]
        pieces = [words[0]] + [" " + w for w in words[1:]]
        finish = "stop"
        if request.max_tokens is not None and request.max_tokens < len(pieces):
            pieces, finish = pieces[: request.max_tokens], "length"
        return _apply_stop(pieces, request.stop, finish)

    def plan(self, request: GenerationRequest, choice: int = 0) -> Planned:
        """What choice number `choice` answers."""
        tools = _tools_to_call(request)
        if tools:
            calls, cut = [], False
            for k, tool in enumerate(tools):
                spec = next(t for t in request.tools if t.name == tool)
                # The first call keeps the choice's own seed: its id and arguments are
                # what they were before a reply could make several calls.
                salt = _seed(request, choice) + (bytes([k]) if k else b"")
                arguments = json.dumps(
                    instance(spec.parameters, int.from_bytes(salt, "big"), WORDS)
                )
                call_id = "call_" + hashlib.blake2b(salt, digest_size=12).hexdigest()
                pieces = [
                    arguments[i : i + ARGUMENT_FRAGMENT]
                    for i in range(0, len(arguments), ARGUMENT_FRAGMENT)
                ]
                if request.max_tokens is not None and request.max_tokens < len(pieces):
                    # Cut short, as a real model's arguments would be: not valid JSON.
                    calls.append(PlannedCall(tool, call_id, pieces[: request.max_tokens]))
                    cut = True
                    break
                calls.append(PlannedCall(tool, call_id, pieces))
            return Planned([], "length" if cut else "tool_calls", tuple(calls))
        fmt = request.response_format
        # A request that offers tools is an agent's turn, whose long instructions list
        # and ask for many things: only a plain request's prompt is read for JSON or a
        # classifier's labels.
        asked = prompt_json.Asked() if request.tools else prompt_json.read(_prompt(request))
        seed = int.from_bytes(_seed(request, choice), "big")
        if fmt is not None:
            schema = fmt.schema if fmt.type == "json_schema" else asked.schema
            value = self._json(request, choice, schema, asked)
            return _written(json.dumps(value), request)
        user = _last_user(request)
        if field_markers.OPENING in user:
            system = "\n".join(m.content for m in request.messages if m.role == "system")
            marked = field_markers.reply(system, user, seed, WORDS)
            if marked is not None:
                return _written(marked, request)
        if asked.json:
            text = json.dumps(self._json(request, choice, asked.schema, asked), indent=2)
            return _written(prompt_json.fence(text) if asked.fenced else text, request)
        if asked.labels:  # a classifier's answer: one of its labels, or its index
            k = seed % len(asked.labels)
            return _written(str(asked.indices[k]) if asked.indices else asked.labels[k], request)
        pieces, finish, stopped_by = self._reply(request, choice)
        return Planned(pieces, finish, stop_sequence=stopped_by)

    def _json(
        self,
        request: GenerationRequest,
        choice: int,
        schema: dict[str, Any] | None,
        asked: prompt_json.Asked,
    ) -> Any:
        """A JSON answer: valid against `schema` (integers kept to a classifier's
        indices), else an object of the keys the prompt names, else the text."""
        seed = int.from_bytes(_seed(request, choice), "big")
        if schema is not None:
            return instance(prompt_json.bounded(schema, asked.indices), seed, WORDS)
        if keys := _keys_asked_for(request):
            return {key: f"{LABEL} {WORDS[(seed + i) % len(WORDS)]}" for i, key in enumerate(keys)}
        words, _ = self.reply_tokens(request, choice)
        return {"text": "".join(words)}

    async def generate(self, request: GenerationRequest) -> AsyncIterator[Event]:
        p = self.params
        plans = [self.plan(request, c) for c in range(request.choice_count)]
        if p.error_rate and self._random.random() < p.error_rate:
            raise UpstreamError(
                f"{self.id}: simulated failure before the first token",
                {"provider": self.id},
                upstream_answered=True,
            )
        self.in_flight += 1
        try:
            await asyncio.sleep(p.ttft_ms / 1000)
            interval = 1 / p.tokens_per_second if p.tokens_per_second else 0
            # Token n is due at first + n * interval: a busy loop that wakes late catches
            # up instead of stretching every later interval.
            loop = asyncio.get_running_loop()
            first = loop.time()
            sent = 0
            if request.thinking is not None and request.thinking.shown:
                for piece in _reasoning(request):
                    sent += 1
                    yield ReasoningDelta(piece)
                digest = hashlib.blake2b(_seed(request, 0), digest_size=12).hexdigest()
                yield ReasoningDelta(signature=f"{GATEWAY_SIGNATURE}simulated:{digest}")
            thought = sent
            for choice, plan in enumerate(plans):
                streams: list[tuple[int | None, list[str]]] = [
                    (k, c.pieces) for k, c in enumerate(plan.calls)
                ] or [(None, plan.pieces)]
                for index, pieces in streams:
                    if index is not None:
                        call = plan.calls[index]
                        yield ToolCallDelta(index, call.call_id, call.tool, "", choice)
                    for piece in pieces:
                        if p.fail_after_tokens is not None and sent >= p.fail_after_tokens:
                            raise UpstreamError(
                                f"{self.id}: simulated stream cut after {sent} tokens",
                                {"provider": self.id},
                                upstream_answered=True,
                            )
                        if sent and interval:
                            wait = first + sent * interval - loop.time()
                            if wait > 0:
                                await asyncio.sleep(wait)
                        sent += 1
                        if index is not None:
                            yield ToolCallDelta(index, arguments=piece, choice=choice)
                            continue
                        yield TextDelta(
                            piece,
                            choice,
                            _logprobs(piece, request.top_logprobs) if request.logprobs else (),
                        )
        finally:
            self.in_flight -= 1
        prompt_tokens = tokens.estimate_prompt(request)
        cached = int(prompt_tokens * p.cached_ratio)
        if self._cache is not None:
            cached = max(cached, min(prompt_tokens, self._cache.read(request)))
        reasons = tuple(plan.finish for plan in plans)
        # A spoken answer: its transcript's text tokens, and the voice's audio tokens
        # (the tone the Realtime session sends, server/base/realtime_audio.py).
        spoken = (
            realtime_audio.output_tokens(realtime_audio.spoken_ms("".join(plans[0].pieces)))
            if request.output_audio and not plans[0].calls
            else 0
        )
        yield Finished(
            reasons[0],
            TokenCounts(
                prompt_tokens + request.input_audio_tokens,
                sent + spoken,
                cached_tokens=cached,
                reasoning_tokens=thought,
                audio_input_tokens=request.input_audio_tokens,
                audio_output_tokens=spoken,
            ),
            reasons if len(reasons) > 1 else (),
            stop_sequence=plans[0].stop_sequence,
        )

    async def embed(self, request: EmbeddingRequest) -> Embeddings:
        p = self.params
        size = request.dimensions or p.embedding_dimensions
        if size > p.embedding_dimensions:
            raise UpstreamRejected(
                f"{self.id}: dimensions must be at most {p.embedding_dimensions}",
                {"provider": self.id},
            )
        if p.error_rate and self._random.random() < p.error_rate:
            raise UpstreamError(
                f"{self.id}: simulated failure", {"provider": self.id}, upstream_answered=True
            )
        await asyncio.sleep(p.ttft_ms / 1000)
        vectors = tuple(unit_vector(i, p.embedding_dimensions, size) for i in request.inputs)
        return Embeddings(vectors, estimate_tokens(request))

    async def rerank(self, request: RerankRequest) -> Ranking:
        p = self.params
        if p.error_rate and self._random.random() < p.error_rate:
            raise UpstreamError(
                f"{self.id}: simulated failure", {"provider": self.id}, upstream_answered=True
            )
        await asyncio.sleep(p.ttft_ms / 1000)
        query = _terms(request.query)
        scored = [
            (i, round(len(query & _terms(d)) / len(query), 6) if query else 0.0)
            for i, d in enumerate(request.documents)
        ]
        scored.sort(key=lambda pair: -pair[1])  # stable: ties in document order
        units = math.ceil(len(request.documents) / DOCUMENTS_PER_SEARCH_UNIT)
        return Ranking(tuple(scored[: request.top_n]), rerank_tokens(request), units)

    async def moderate(self, request: ModerationRequest) -> Moderations:
        p = self.params
        if p.error_rate and self._random.random() < p.error_rate:
            raise UpstreamError(
                f"{self.id}: simulated failure", {"provider": self.id}, upstream_answered=True
            )
        await asyncio.sleep(p.ttft_ms / 1000)
        if request.inputs:
            verdicts = tuple(_verdict(_terms(text), False) for text in request.inputs)
        else:
            text = " ".join(part.text for part in request.parts if part.text is not None)
            images = any(part.image_url is not None for part in request.parts)
            verdicts = (_verdict(_terms(text), images),)
        return Moderations(verdicts, moderation_tokens(request))

    async def transcribe(self, request: TranscriptionRequest) -> Transcript:
        await self._pause()
        return simulated_audio.transcript(request, WORDS)

    async def speak(self, request: SpeechRequest) -> Speech:
        await self._pause()
        content_type, audio = simulated_audio.speech(request)
        return Speech(content_type, audio[:SPEECH_CHUNK], _chunks(audio[SPEECH_CHUNK:]))

    async def make_images(self, request: ImageRequest) -> Images:
        await self._pause()
        return simulated_images.images(request)

    async def _pause(self) -> None:
        """The injected failure, else the time to the answer."""
        p = self.params
        if p.error_rate and self._random.random() < p.error_rate:
            raise UpstreamError(
                f"{self.id}: simulated failure", {"provider": self.id}, upstream_answered=True
            )
        await asyncio.sleep(p.ttft_ms / 1000)

    async def aclose(self) -> None:
        return None


SPEECH_CHUNK = 4096


async def _chunks(audio: bytes) -> AsyncGenerator[bytes, None]:
    for start in range(0, len(audio), SPEECH_CHUNK):
        yield audio[start : start + SPEECH_CHUNK]


# The words that flag each category of the simulated moderation.
MODERATION_WORDS = {
    "harassment": {"idiot", "stupid", "loser"},
    "hate": {"vermin"},
    "illicit": {"steal", "counterfeit"},
    "self-harm": {"suicide"},
    "sexual": {"explicit"},
    "violence": {"kill", "attack", "shoot"},
}
# The categories OpenAI scores images in.
IMAGE_CATEGORIES = ("self-harm", "self-harm/intent", "self-harm/instructions", "sexual",
                    "violence", "violence/graphic")  # fmt: skip


def _verdict(words: set[str], images: bool) -> Verdict:
    flagged = {c: bool(words & MODERATION_WORDS.get(c, set())) for c in MODERATION_CATEGORIES}
    return Verdict(
        flagged=any(flagged.values()),
        categories=flagged,
        scores={c: 0.97 if hit else 0.0001 for c, hit in flagged.items()},
        applied={
            c: ("text", "image") if images and c in IMAGE_CATEGORIES else ("text",)
            for c in MODERATION_CATEGORIES
        },
    )


_TERM = re.compile(r"[a-z0-9]+")


def _terms(text: str) -> set[str]:
    """A text's lower-case words, for reranking (one pass: documents are many)."""
    return set(_TERM.findall(text.lower()))


def unit_vector(value: Input, full: int, size: int) -> tuple[float, ...]:
    """The first `size` of `full` pseudo-random values seeded by `value`, scaled to
    length 1."""
    seed = value.encode() if isinstance(value, str) else b"\0" + bytes(str(list(value)), "ascii")
    rng = random.Random(hashlib.blake2b(seed, digest_size=8).digest())
    raw = [rng.gauss(0.0, 1.0) for _ in range(full)][:size]
    norm = math.sqrt(sum(x * x for x in raw)) or 1.0
    return tuple(x / norm for x in raw)


def _prompt_text(request: GenerationRequest, choice: int = 0) -> str:
    if request.prompt is not None:
        prompt = request.prompt_of(choice)
        return prompt if isinstance(prompt, str) else " ".join(map(str, prompt))
    return "\n".join(f"{m.role}: {m.content}" for m in request.messages)


def _seed(request: GenerationRequest, choice: int) -> bytes:
    """The first choice of a prompt hashes the prompt alone; later ones add their number."""
    n = max(1, request.n)
    text = _prompt_text(request, choice) + (f"\n#{choice % n}" if choice % n else "")
    return hashlib.blake2b(text.encode(), digest_size=8).digest()


# Words of a tool's name that say what it does, not what it is about.
GENERIC_WORDS = frozenset({
    "get", "set", "fetch", "find", "search", "lookup", "look", "up", "list", "call", "run",
    "tool", "do", "make", "use", "the", "a", "of", "for",
})  # fmt: skip
# Names of the tools agent frameworks give the model to hand in its final answer.
OUTPUT_TOOL = re.compile(r"^(final|output|submit|respond|answer)|_(result|output|answer)$")


def _tools_to_call(request: GenerationRequest) -> tuple[str, ...]:
    """The tools this request's reply calls, as a cooperative model would (see the
    module docstring): none once the tools it called have answered, unless a tool is
    required; then a tool not called yet, an output tool first."""
    if not request.tools or request.tool_choice == "none":
        return ()
    if request.forced_tool is not None:
        return (request.forced_tool,)
    names = [t.name for t in request.tools]
    turn = _this_turn(request.messages, names)
    called = {c.name for m in turn for c in m.tool_calls} | {
        n for m in turn if m.role == "assistant" for n in _quoted_calls(m.content, names)
    }
    # A result: a tool message, or a user message after calls kept as text.
    answered = bool(turn) and turn[-1].role in ("tool", "user")
    if answered and request.tool_choice != "required":
        return ()
    outputs = [n for n in names if OUTPUT_TOOL.search(n)]
    fresh = [n for n in names if n not in called]
    work = [n for n in fresh if n not in outputs]
    if answered or not work:
        # Required after results (or nothing else to do): hand in the answer.
        pick = [n for n in fresh if n in outputs] or outputs or fresh or names
        return (pick[0],)
    asked = _asked(request)
    relevant = [n for n in work if _words(n) - GENERIC_WORDS & asked] or work[:1]
    return tuple(relevant[:1] if request.parallel_tool_calls is False else relevant)


def _this_turn(messages: tuple[Message, ...], tools: list[str]) -> tuple[Message, ...]:
    """The messages after the last user message that asks something: this turn's calls
    and results. Frameworks that keep tool calls as text (smolagents: an assistant
    message quoting the call, then a user message with its observation) make a user
    message after a quoted call its result, part of the turn."""
    start = len(messages)
    while start > 0:
        message = messages[start - 1]
        if message.role == "user":
            before = messages[start - 2] if start >= 2 else None
            if before is None or before.role != "assistant":
                break
            if not _quoted_calls(before.content, tools):
                break
        start -= 1
    return messages[start:]


def _quoted_calls(text: str, tools: list[str]) -> set[str]:
    """The tools a text quotes a call of, by a quoted `name` key and the tool's name
    (`'name': 'get_weather'`, `"name": "get_weather"`)."""
    if "name" not in text:
        return set()
    quoted = set(re.findall(r"""["']name["']\s*:\s*["']([^"']{1,128})["']""", text))
    return quoted & set(tools)


def _words(text: str) -> set[str]:
    """Lower-case words of a name or a text (`getWeather`, `get_weather`: get, weather)."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", text)
    return {w for w in re.split(r"[^a-z0-9]+", spaced.lower()) if w}


def _written(text: str, request: GenerationRequest) -> Planned:
    """A reply of a text written whole (JSON, fields under markers), in pieces of four
    characters, cut at max_tokens."""
    pieces = [text[i : i + 4] for i in range(0, len(text), 4)]
    if request.max_tokens is not None and request.max_tokens < len(pieces):
        return Planned(pieces[: request.max_tokens], "length")
    return Planned(pieces, "stop")


def _prompt(request: GenerationRequest) -> str:
    """The system and user text a prompt's asks are read from."""
    said = [m.content for m in request.messages if m.role in ("system", "user")]
    return "\n".join(said) or request.prompt or ""


def _last_user(request: GenerationRequest) -> str:
    return next((m.content for m in reversed(request.messages) if m.role == "user"), "")


def _asked(request: GenerationRequest) -> set[str]:
    """The words of the last user message, singular and plural alike."""
    words = _words(_last_user(request) or request.prompt or "")
    return words | {w[:-1] for w in words if w.endswith("s")} | {w + "s" for w in words}


def _keys_asked_for(request: GenerationRequest) -> list[str]:
    """The keys a prompt names for a JSON object: quoted names (`"name"`, 'age',
    `city`), else the names after "keys" or "fields" ("with keys name and age")."""
    text = "\n".join(m.content for m in request.messages if m.role in ("system", "user"))
    text = text or request.prompt or ""
    quoted = re.findall(r"[\"'`]([A-Za-z_][A-Za-z0-9_]{0,40})[\"'`]", text)
    if quoted:
        return list(dict.fromkeys(quoted))
    listed = re.search(r"\b(?:keys|fields|properties)\b[:\s]+([A-Za-z0-9_ ,]+)", text)
    if listed is None:
        return []
    names = re.split(r"\s*,\s*|\s+and\s+|\s+", listed.group(1).strip())
    return list(dict.fromkeys(n for n in names if n and n not in ("and", "or")))


def _logprobs(piece: str, top: int | None) -> tuple[TokenLogprob, ...]:
    """A made-up but stable log probability for a piece, with `top` alternatives."""
    digest = hashlib.blake2b(piece.encode(), digest_size=2).digest()
    logprob = -round(int.from_bytes(digest, "big") / 65535 * 2, 4)
    alternatives = [TopLogprob(piece, logprob)]
    for i in range(1, top or 0):
        alternatives.append(TopLogprob(WORDS[(len(piece) + i) % len(WORDS)], logprob - i))
    return (TokenLogprob(piece, logprob, tuple(alternatives)),)


def _reasoning(request: GenerationRequest) -> list[str]:
    """A few words of labelled, deterministic reasoning."""
    rng = random.Random(_seed(request, 0))
    return ["(simulated thinking)"] + [" " + rng.choice(WORDS) for _ in range(7)]


def _apply_stop(
    pieces: list[str], stops: tuple[str, ...], finish: str
) -> tuple[list[str], str, str | None]:
    """Cuts the reply before the earliest stop sequence, which is not part of it;
    returns the pieces, the finish reason and the stop sequence that cut, if any."""
    text = "".join(pieces)
    found = [(i, s) for s in stops if s and (i := text.find(s)) >= 0]
    if not found:
        return pieces, finish, None
    cut, stop = min(found)
    kept: list[str] = []
    used = 0
    for piece in pieces:
        if used + len(piece) > cut:
            if cut > used:
                kept.append(piece[: cut - used])
            break
        kept.append(piece)
        used += len(piece)
    return kept, "stop", stop
