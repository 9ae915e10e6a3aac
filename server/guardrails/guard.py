"""One request's guardrails: what it sends is scanned before any upstream sees it, what
comes back before the caller does.

Phases, each with its own action (`redact`, `block`, `log`, `off`) per guardrail:
`input` (the caller's and the system's text, earlier answers included), `tool_calls`
(a call's arguments, either way: JSON, redacted in its string values only),
`tool_results` (what tools answered), `output` (the model's text and reasoning).

A request that travels in its dialect's own format (`Native`) has that body redacted
too, in every string but those that carry no prose (ids, signatures, media data).

Output is held back, per choice: text is released only once it is `holdback` chars
behind the head (never inside a run of token characters reaching the head, so an
address or key is released whole, and never after an unterminated private key's first
line); a tool call is released whole; an upstream's own events (native) are released
at the end, scanned as one text. A block before anything was released finishes the
answer as `content_filter` with its text removed; after, the stream fails.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any

from google.protobuf import struct_pb2
from google.protobuf.message import Message as ProtoMessage

from server.base.caller import Principal
from server.base.config import ConfigError, GuardrailConfig, ModelConfig
from server.base.errors import Code, GatewayError, InvalidArgument
from server.base.generation import (
    Event,
    Finished,
    GenerationRequest,
    Message,
    NativeEvent,
    ReasoningDelta,
    TextDelta,
    TextPart,
    ToolCallDelta,
)
from server.guardrails.detectors import Finding, Scanner
from server.guardrails.presidio import PresidioScanner, available

PHASES = ("input", "output", "tool_calls", "tool_results")
# The response header that lists what the call's guardrails did; as a request header,
# `off` asks to skip them (honoured for keys that may).
HEADER = "x-gateway-guardrails"
# Keys of a native body or event that hold no prose: never rewritten.
OPAQUE = frozenset({"id", "type", "role", "model", "signature", "thoughtSignature",
                    "thought_signature", "encrypted_content", "data", "media_type", "mimeType",
                    "mime_type", "tool_use_id", "call_id", "file_id", "fileUri", "file_uri",
                    "url", "image_url", "thinking", "name", "status", "stop_reason"})  # fmt: skip
# Characters of addresses, keys and tokens: a run of them reaching a stream's head is
# held back whole (placeholders' brackets included, for restoring them).
TOKEN_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._%+-/=@:[]"
PLACEHOLDER = re.compile(r"\[[A-Z][A-Z0-9_]*_\d+\]")
# The most held back of one run of token characters: past it, the run is no value.
MAX_TOKEN_RUN = 65536
DEFAULT_HOLDBACK = 48
# Released text goes out at least this many characters at a time (or at the end): a
# scan per few upstream events, not per event.
RELEASE_AT = 32


class GuardrailBlocked(InvalidArgument):
    """A guardrail set to block found what it looks for (the text is never quoted)."""

    reason = "GUARDRAIL_BLOCKED"

    @classmethod
    def of(cls, guardrail: str, phase: str, entities: Sequence[str]) -> GuardrailBlocked:
        kinds = ", ".join(sorted(set(entities)))
        return cls(
            f"guardrail {guardrail!r} blocked the {phase.replace('_', ' ')}: it holds {kinds}",
            {"field": guardrail, "phase": phase, "entities": kinds},
        )


class GuardrailUnavailable(GatewayError):
    """A guardrail's engine failed and it fails closed (503)."""

    code = Code.UNAVAILABLE
    reason = "GUARDRAIL_UNAVAILABLE"


@dataclasses.dataclass(frozen=True)
class Rail:
    """One configured guardrail, compiled."""

    config: GuardrailConfig
    scanner: Scanner | PresidioScanner

    @classmethod
    def of(cls, config: GuardrailConfig) -> Rail:
        if config.kind == "presidio":
            return cls(config, PresidioScanner(config))
        return cls(config, Scanner(config.detectors, config.custom))

    @property
    def slow(self) -> bool:
        """Whether a scan may take long enough to need its own thread."""
        return self.config.kind == "presidio"

    @property
    def id(self) -> str:
        return self.config.id

    def action(self, phase: str) -> str:
        return str(getattr(self.config, f"on_{phase}"))

    @property
    def holdback(self) -> int:
        return max(self.config.stream_holdback_chars or DEFAULT_HOLDBACK, self.scanner.longest)


class Guard:
    """The guardrails of one call, with what they found (`counts`) and, for reversible
    ones, the call's own placeholders and the values they stand for."""

    def __init__(
        self, rails: Sequence[Rail], unary: bool, headers: dict[str, str] | None = None
    ) -> None:
        self.rails = tuple(rails)
        # A whole answer is gathered before anything reaches its caller: hold it all.
        self.unary = unary
        # The call's response headers, where `summary()` is written (HEADER).
        self.headers = headers if headers is not None else {}
        self.counts: Counter[tuple[str, str, str, str]] = Counter()
        self.seconds: dict[str, float] = dict.fromkeys(PHASES, 0.0)
        self.failures: Counter[str] = Counter()
        self._numbers: dict[tuple[str, str, str], str] = {}
        self._next: Counter[tuple[str, str]] = Counter()
        self._taken: set[str] = set()  # placeholders the caller's own text holds
        self.restore: dict[str, str] = {}
        # Set once the answer is read: placeholders made then restore nothing.
        self.answering = False
        self.reversible = any(r.config.reversible for r in self.rails)
        self.holdback = max(r.holdback for r in self.rails)
        # Scans that must run off the event loop (a model's, not patterns').
        self.slow = any(r.slow for r in self.rails)
        self.private_keys = any(r.scanner.private_keys for r in self.rails)

    def active(self, phase: str) -> bool:
        return any(r.action(phase) != "off" for r in self.rails)

    # -- text ---------------------------------------------------------------------

    def text(self, text: str, phase: str, counted: bool = True) -> str:
        """`text` after every guardrail's action for `phase`; GuardrailBlocked when one
        blocks. `counted=False` for a second copy of a text already counted."""
        edits = self.edits(text, phase, counted)
        return apply(text, 0, len(text), edits) if edits else text

    def edits(self, text: str, phase: str, counted: bool = True) -> list[tuple[int, int, str]]:
        """What every guardrail replaces in `text` for `phase` (start, end, placeholder),
        in order and without overlaps; counts what each found."""
        return self.settle(text, phase, self.scan(text, phase), counted)

    def scan(self, text: str, phase: str) -> list[tuple[Rail, Finding]]:
        """What every guardrail acting on `phase` finds in `text`, by position; nothing
        counted or decided yet."""
        if not text:
            return []
        started = time.perf_counter()
        try:
            found = [
                (rail, finding)
                for rail in self.rails
                if rail.action(phase) != "off"
                for finding in self._find(rail, text)
            ]
        finally:
            self.seconds[phase] += time.perf_counter() - started
        if len(self.rails) > 1:
            found.sort(key=lambda pair: pair[1].start)
        return found

    def settle(
        self, text: str, phase: str, found: Sequence[tuple[Rail, Finding]], counted: bool = True
    ) -> list[tuple[int, int, str]]:
        """Counts `found`, blocks (GuardrailBlocked) or makes the replacements."""
        edits: list[tuple[int, int, str]] = []
        for rail, finding in found:
            action = rail.action(phase)
            if counted:
                self.counts[(rail.id, finding.entity, phase, action)] += 1
            if action == "block":
                entities = [f.entity for r, f in found if r is rail]
                raise GuardrailBlocked.of(rail.id, phase, entities)
            if action == "redact" and (not edits or finding.start >= edits[-1][1]):
                # Another guardrail's overlapping find: the first one stands.
                edits.append((finding.start, finding.end, self._placeholder(rail, finding, text)))
        return edits

    def _find(self, rail: Rail, text: str) -> list[Finding]:
        try:
            return rail.scanner.find(text)
        except Exception:  # an engine failure, per the guardrail's `fail`
            if rail.config.fail == "closed":
                raise GuardrailUnavailable(
                    f"guardrail {rail.id!r} is unavailable", {"guardrail": rail.id}
                ) from None
            self.failures[rail.id] += 1
            return []

    def _placeholder(self, rail: Rail, finding: Finding, text: str) -> str:
        entity, value = finding.entity, text[finding.start : finding.end]
        if rail.config.placeholder == "type":
            return f"[{entity}]"
        known = self._numbers.get((rail.id, entity, value))
        if known is not None:
            return known
        while True:
            self._next[(rail.id, entity)] += 1
            placeholder = f"[{entity}_{self._next[(rail.id, entity)]}]"
            if placeholder not in self._taken:
                break
        self._numbers[(rail.id, entity, value)] = placeholder
        if rail.config.reversible and not self.answering:  # only what the caller sent
            self.restore[placeholder] = value
        return placeholder

    def arguments(self, arguments: str, phase: str = "tool_calls") -> str:
        """JSON arguments redacted in their string values only (still valid JSON); text
        that is not JSON (cut short) as text."""
        if not self.active(phase):
            return arguments
        try:
            value = json.loads(arguments)
        except ValueError:
            return self.text(arguments, phase)
        return json.dumps(self._json(value, phase))

    def _json(self, value: Any, phase: str, key: str = "") -> Any:
        if isinstance(value, str):
            return value if key in OPAQUE else self.text(value, phase)
        if isinstance(value, list):
            return [self._json(v, phase, key) for v in value]
        if isinstance(value, dict):
            prose = _prose_data(value.get("type"))
            return {
                k: self.text(v, phase) if k == "data" and prose and isinstance(v, str)
                else self._json(v, phase, k)
                for k, v in value.items()
            }  # fmt: skip
        return value

    # -- a request ----------------------------------------------------------------

    def request(self, request: GenerationRequest) -> GenerationRequest:
        """The request as its upstream may see it."""
        if self.reversible:
            self._taken |= set(PLACEHOLDER.findall(_all_text(request)))
        messages = tuple(self._message(m) for m in request.messages)
        prompt = self.text(request.prompt, "input") if request.prompt else request.prompt
        prompts = tuple(self.text(p, "input") if isinstance(p, str) else p for p in request.prompts)
        native = request.native
        if native is not None and self.active("input"):
            native = dataclasses.replace(
                native,
                request=self._native(native.request),
                history=tuple(self._json(dict(item), "input") for item in native.history),
            )
        self.report()
        return dataclasses.replace(
            request, messages=messages, prompt=prompt, prompts=prompts, native=native
        )

    def _message(self, message: Message) -> Message:
        phase = "tool_results" if message.role == "tool" else "input"
        parts = tuple(
            TextPart(self.text(p.text, phase)) if isinstance(p, TextPart) else p
            for p in message.parts
        )
        calls = tuple(
            dataclasses.replace(c, arguments=self.arguments(c.arguments))
            for c in message.tool_calls
        )
        # A message given as parts holds their text joined in `content` too.
        content = self.text(message.content, phase, counted=not parts)
        return dataclasses.replace(message, content=content, parts=parts, tool_calls=calls)

    def _native(self, body: ProtoMessage | Mapping[str, Any]) -> Any:
        if isinstance(body, ProtoMessage):
            copy = type(body)()
            copy.CopyFrom(body)
            self._proto(copy)
            return copy
        return self._json(dict(body), "input")

    def _proto(self, message: ProtoMessage) -> None:
        if isinstance(message, struct_pb2.Struct):
            for key in list(message.fields):
                self._value(message.fields[key], key)
            return
        prose = _prose_data(getattr(message, "type", None))
        for field, value in message.ListFields():
            if field.name in OPAQUE and not (field.name == "data" and prose):
                continue
            if field.message_type is not None:
                if field.message_type.GetOptions().map_entry:
                    continue
                for item in value if field.is_repeated else [value]:
                    self._proto(item)
            elif field.type == field.TYPE_STRING:
                if field.is_repeated:
                    value[:] = [self.text(v, "input") for v in value]
                else:
                    setattr(message, field.name, self.text(value, "input"))

    def _value(self, value: struct_pb2.Value, key: str) -> None:
        kind = value.WhichOneof("kind")
        if kind == "string_value" and key not in OPAQUE:
            value.string_value = self.text(value.string_value, "input")
        elif kind == "struct_value":
            self._proto(value.struct_value)
        elif kind == "list_value":
            for item in value.list_value.values:
                self._value(item, key)

    def texts(self, texts: Sequence[Any]) -> tuple[Any, ...]:
        """Embedding inputs: strings scanned, token ids as they are."""
        return tuple(self.text(t, "input") if isinstance(t, str) else t for t in texts)

    # -- an answer ----------------------------------------------------------------

    def answer(self, events: AsyncIterator[Event]) -> AsyncIterator[Event]:
        return _Answer(self).run(events)

    def report(self) -> None:
        """Writes what was done so far into the response header."""
        if self.counts:
            self.headers[HEADER] = self.summary()

    def restored(self, text: str) -> str:
        """This call's own placeholders back to their values (reversible guardrails)."""
        if not self.restore or "[" not in text:
            return text
        return PLACEHOLDER.sub(lambda m: self.restore.get(m.group(), m.group()), text)

    def summary(self) -> str:
        """The actions taken, for the response header: `input:redact:EMAIL=2; ...`."""
        merged: Counter[tuple[str, str, str]] = Counter()
        for (_, entity, phase, action), n in self.counts.items():
            merged[(phase, action, entity)] += n
        return "; ".join(f"{p}:{a}:{e}={n}" for (p, a, e), n in sorted(merged.items()))


class _Answer:
    """One answer's events through the output phases (see the module docstring)."""

    def __init__(self, guard: Guard) -> None:
        self.guard = guard
        guard.answering = True
        self.unary = guard.unary
        self.pending: dict[tuple[str, int], str] = {}  # (text|reasoning, choice) -> held
        self.calls: dict[tuple[int, int], ToolCallDelta] = {}  # (choice, index) -> held
        self.native: list[NativeEvent] = []
        self.released = False
        self.finished: Finished | None = None
        self.output = guard.active("output")
        self.tool_calls = guard.active("tool_calls")

    async def run(self, events: AsyncIterator[Event]) -> AsyncIterator[Event]:
        if self.guard.slow:
            async for out in self._off_loop(events):
                yield out
            return
        output = self.output
        try:
            async for event in events:
                if output and type(event) is TextDelta:  # most events: no generator
                    released = self._text("text", event.choice, event.text, False)
                    if released is not None:
                        self.released = True
                        yield released
                    continue
                for out in self._event(event):
                    self.released = True
                    yield out
        except GuardrailBlocked:
            if self.released:
                raise
            yield await self._blocked(events)
        finally:
            closing = getattr(events, "aclose", None)
            if closing is not None:
                await closing()

    async def _off_loop(self, events: AsyncIterator[Event]) -> AsyncIterator[Event]:
        """As `run`, each event's scan in a thread of its own (a model's scan takes
        long): the loop serves other calls meanwhile."""
        try:
            async for event in events:
                for out in await asyncio.to_thread(self._all, event):
                    self.released = True
                    yield out
        except GuardrailBlocked:
            if self.released:
                raise
            yield await self._blocked(events)
        finally:
            closing = getattr(events, "aclose", None)
            if closing is not None:
                await closing()

    def _all(self, event: Event) -> list[Event]:
        return list(self._event(event))

    async def _blocked(self, events: AsyncIterator[Event]) -> Finished:
        """The end of an answer blocked before anything went out: its text dropped, the
        rest of it read (unseen) for the upstream's own count of what it generated, so
        the call is billed for it."""
        self.pending.clear()
        self.calls.clear()
        self.native.clear()
        counts = self.finished.counts if self.finished is not None else None
        async for event in events:
            if isinstance(event, Finished):
                counts = event.counts
        return Finished("content_filter", counts)

    def _event(self, event: Event) -> Iterator[Event]:
        if isinstance(event, TextDelta) and self.output:
            released = self._text("text", event.choice, event.text, False)
            if released is not None:
                yield released
        elif isinstance(event, ReasoningDelta) and self.output and not event.signature:
            released = self._text("reasoning", 0, event.text, False)
            if released is not None:
                yield released
        elif isinstance(event, ToolCallDelta) and (self.tool_calls or self.guard.reversible):
            yield from self._call(event)
        elif isinstance(event, NativeEvent) and self.output:
            self.native.append(event)
        elif isinstance(event, Finished):
            self.finished = event  # its counts bill a block found in the flush
            yield from self._flush()
            self.guard.report()
            yield event
        else:
            yield event

    def _text(self, kind: str, choice: int, text: str, last: bool) -> Event | None:
        """What of a choice's text (or reasoning) may go now, scanned."""
        key = (kind, choice)
        held = self.pending.get(key, "") + text
        if last:
            cut = len(held)
            found = self.guard.scan(held, "output")
        else:
            cut = self._cut(held)
            if cut < RELEASE_AT:  # a few characters more go out with the next ones
                self.pending[key] = held
                return None
            found = self.guard.scan(held, "output")
            spans = [(f.start, f.end) for _, f in found]
            if self.guard.reversible:
                spans += [m.span() for m in PLACEHOLDER.finditer(held)]
            for start, end in sorted(spans):
                if start < cut < end:  # never a value (or a placeholder) in part
                    cut = start
                    break
            if cut <= 0:
                self.pending[key] = held
                return None
            found = [(rail, f) for rail, f in found if f.end <= cut]
        released, self.pending[key] = held[:cut], held[cut:]
        edits = self.guard.settle(released, "output", found)
        out = self.guard.restored(apply(released, 0, cut, edits) if edits else released)
        if not out:
            return None
        return TextDelta(out, choice) if kind == "text" else ReasoningDelta(out)

    def _cut(self, held: str) -> int:
        """How much of `held` may go: `holdback` behind its head, before a run of
        token characters reaching it, before an unterminated private key."""
        if self.unary:
            return 0
        cut = len(held) - self.guard.holdback
        run = len(held.rstrip(TOKEN_CHARS))
        if len(held) - run <= MAX_TOKEN_RUN:
            cut = min(cut, run)
        if self.guard.private_keys:
            opened = held.rfind("-----BEGIN")
            if opened >= 0 and held.find("-----END", opened) < 0:
                cut = min(cut, opened)
        return cut

    def _call(self, event: ToolCallDelta) -> Iterator[Event]:
        key = (event.choice, event.index)
        held = self.calls.get(key)
        if held is None or event.id is not None:
            # A new call: the one before it in this choice is whole.
            yield from self._release_calls(event.choice, below=event.index)
            self.calls[key] = dataclasses.replace(event)
            return
        held.arguments += event.arguments

    def _release_calls(self, choice: int, below: int | None = None) -> Iterator[Event]:
        for key in sorted(
            k for k in self.calls if k[0] == choice and (below is None or k[1] < below)
        ):
            call = self.calls.pop(key)
            arguments = self.guard.arguments(call.arguments) if self.tool_calls else call.arguments
            call.arguments = self.guard.restored(arguments) if self.guard.reversible else arguments
            yield call

    def _flush(self) -> Iterator[Event]:
        for kind, choice in list(self.pending):
            released = self._text(kind, choice, "", True)
            if released is not None:
                yield released
        for choice in sorted({k[0] for k in self.calls}):
            yield from self._release_calls(choice)
        yield from self._natives()

    def _natives(self) -> Iterator[Event]:
        """An upstream's own events, scanned as one text: every prose string of every
        event in order, so a value split over two events is found whole; a replacement
        lands in the string where the value starts."""
        if not self.native:
            return
        leaves: list[tuple[dict[str, Any], str]] = []
        copies = [NativeEvent(e.dialect, _leaves(json.loads(json.dumps(e.data)), leaves))
                  for e in self.native]  # fmt: skip
        texts = [container[key] for container, key in leaves]
        joined = "".join(texts)
        edits = self.guard.edits(joined, "output")
        start = 0
        for (container, key), text in zip(leaves, texts, strict=True):
            end = start + len(text)
            container[key] = self.guard.restored(apply(joined, start, end, edits))
            start = end
        yield from copies


def apply(text: str, start: int, end: int, edits: Sequence[tuple[int, int, str]]) -> str:
    """`text[start:end]` with the edits: each one's replacement where it starts, the
    characters it covers removed (also those past `start` of one that started before)."""
    out: list[str] = []
    position = start
    for edit_start, edit_end, replacement in edits:
        if edit_end <= start or edit_start >= end:
            continue
        if edit_start >= start:
            out += [text[position:edit_start], replacement]
        position = max(position, min(edit_end, end))
    out.append(text[position:end])
    return "".join(out)


def _leaves(data: Any, found: list[tuple[dict[str, Any], str]]) -> Any:
    """Notes every prose string of `data` (its container and key), in order."""
    if isinstance(data, dict):
        for key, value in data.items():
            if isinstance(value, str) and key not in OPAQUE:
                found.append((data, key))
            else:
                _leaves(value, found)
    elif isinstance(data, list):
        for item in data:
            _leaves(item, found)
    return data


def _prose_data(kind: Any) -> bool:
    """Whether an object's `data` is text (a document's `text` source), not media."""
    return kind == "text"


def _all_text(request: GenerationRequest) -> str:
    texts = [m.content for m in request.messages] + [request.prompt or ""]
    texts += [c.arguments for m in request.messages for c in m.tool_calls]
    return "\n".join(texts)


class Guardrails:
    """A config's guardrails, compiled once per snapshot."""

    def __init__(self, configs: Sequence[GuardrailConfig], default: Sequence[str]) -> None:
        for i, config in enumerate(configs):
            if config.kind == "presidio" and not available():
                raise ConfigError(
                    f"guardrails[{i}].kind: presidio is not installed "
                    "(pip install 'gateway[presidio]')"
                )
        self.rails = {c.id: Rail.of(c) for c in configs}
        self.default = tuple(default)

    def guard(
        self,
        principal: Principal,
        models: Sequence[ModelConfig],
        metadata: Mapping[str, str],
        unary: bool,
        headers: dict[str, str],
    ) -> Guard | None:
        """The guard of one call: the default guardrails, the key's and every model's
        it may run on; None when none apply (or the key may skip them and asks to)."""
        if not self.rails:
            return None
        if principal.may_skip_guardrails and metadata.get(HEADER, "").lower() == "off":
            return None
        ids = [*self.default, *principal.guardrails, *(g for m in models for g in m.guardrails)]
        chosen = [self.rails[i] for i in dict.fromkeys(ids)]
        return Guard(chosen, unary, headers) if chosen else None
