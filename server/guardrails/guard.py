"""One request's guardrails: what it sends is scanned before any upstream sees it, what
comes back before the caller does.

Phases, each with its own action (`redact`, `block`, `log`, `off`) per guardrail:
`input` (the caller's and the system's text, earlier answers included), `tool_calls`
(a call's arguments, either way: JSON, redacted in its string values only),
`tool_results` (what tools answered), `output` (the model's text and reasoning).

A request that travels in its dialect's own format (`Native`) has that body redacted
too, in every string but those that carry no prose (ids, signatures, media data).

What comes back passes the same guard on its way to the caller (answer.py).
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from google.protobuf import struct_pb2
from google.protobuf.message import Message as ProtoMessage

from server.base.caller import Principal
from server.base.config import ConfigError, GuardrailConfig, ModelConfig
from server.base.errors import Code, GatewayError, InvalidArgument
from server.base.generation import (
    GenerationRequest,
    Message,
    TextPart,
    ToolSpec,
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
# A tool's own JSON (its arguments, its result, its schema) is prose whatever its keys are
# named: a `name`, `id` or `data` there is the caller's, so none of its keys is opaque.
NO_KEY_OPAQUE: frozenset[str] = frozenset()
# An MCP result's content blocks hold media (`data`, `blob`) and addresses the gateway
# must not rewrite; the rest of a result (`structuredContent`, text) is the tool's own.
MCP_CONTENT_OPAQUE = frozenset({"type", "mimeType", "data", "blob", "uri"})
PLACEHOLDER = re.compile(r"\[[A-Z][A-Z0-9_]*_\d+\]")
DEFAULT_HOLDBACK = 48


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
        # A moderation guardrail finds nothing in a scan: its model is asked instead
        # (moderation.py), once per call.
        return cls(config, Scanner(config.detectors, config.custom))

    @property
    def moderates(self) -> bool:
        return self.config.kind == "moderation"

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
        # Guardrails that ask a moderation model about what the caller sends.
        self.moderators = tuple(r for r in self.rails if r.moderates and r.action("input") != "off")

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

    def at_rest(self, text: str, phase: str) -> str:
        """`text` as a store may keep it (a stored response, a conversation): what the
        guardrails redacting `phase` replace, replaced with the call's own placeholders;
        nothing counted or blocked again (the call itself was)."""
        found = [(rail, f) for rail, f in self.scan(text, phase) if rail.action(phase) == "redact"]
        edits = self.settle(text, phase, found, counted=False)
        return apply(text, 0, len(text), edits) if edits else text

    def arguments(self, arguments: str, phase: str = "tool_calls") -> str:
        """JSON arguments redacted in their string values, every one (still valid JSON);
        text that is not JSON (cut short) as text."""
        if not self.active(phase):
            return arguments
        try:
            value = json.loads(arguments)
        except ValueError:
            return self.text(arguments, phase)
        return json.dumps(self._json(value, phase, opaque=NO_KEY_OPAQUE))

    def value(self, value: Any, phase: str) -> Any:
        """An MCP tool's arguments or result redacted in its strings: every one, but the
        media and addresses of a result's content blocks."""
        if not self.active(phase):
            return value
        if isinstance(value, dict) and isinstance(value.get("content"), list):
            content = [self._json(block, phase, opaque=MCP_CONTENT_OPAQUE)
                       for block in value["content"]]  # fmt: skip
            rest = {k: v for k, v in value.items() if k != "content"}
            return {**self._json(rest, phase, opaque=NO_KEY_OPAQUE), "content": content}
        return self._json(value, phase, opaque=NO_KEY_OPAQUE)

    def _json(self, value: Any, phase: str, key: str = "", opaque: frozenset[str] = OPAQUE) -> Any:
        if isinstance(value, str):
            return value if key in opaque else self.text(value, phase)
        if isinstance(value, list):
            return [self._json(v, phase, key, opaque) for v in value]
        if isinstance(value, dict):
            prose = _prose_data(value.get("type"))
            return {
                k: self.text(v, phase) if k == "data" and prose and isinstance(v, str)
                else self._json(v, phase, k, NO_KEY_OPAQUE if tool_payload(value, k) else opaque)
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
        tools = tuple(self._tool(t) for t in request.tools) if self.active("input") else ()
        native = request.native
        if native is not None and self.active("input"):
            native = dataclasses.replace(
                native,
                request=self._native(native.request),
                history=tuple(self._json(dict(item), "input") for item in native.history),
            )
        self.report()
        return dataclasses.replace(
            request, messages=messages, prompt=prompt, prompts=prompts, native=native,
            tools=tools or request.tools,
        )  # fmt: skip

    def _tool(self, tool: ToolSpec) -> ToolSpec:
        """A tool's description and schema as the model reads them (its name is an
        identifier the model calls it by)."""
        description = self.text(tool.description, "input") if tool.description else None
        parameters = tool.parameters
        if parameters is not None:
            parameters = self._json(parameters, "input", opaque=NO_KEY_OPAQUE)
        return dataclasses.replace(tool, description=description, parameters=parameters)

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
        if isinstance(message, struct_pb2.Struct):  # a tool's arguments, result or schema
            for key in list(message.fields):
                self._value(message.fields[key])
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

    def _value(self, value: struct_pb2.Value) -> None:
        kind = value.WhichOneof("kind")
        if kind == "string_value":
            value.string_value = self.text(value.string_value, "input")
        elif kind == "struct_value":
            self._proto(value.struct_value)
        elif kind == "list_value":
            for item in value.list_value.values:
                self._value(item)

    def texts(self, texts: Sequence[Any]) -> tuple[Any, ...]:
        """Embedding inputs: strings scanned, token ids as they are."""
        return tuple(self.text(t, "input") if isinstance(t, str) else t for t in texts)

    # -- an answer ----------------------------------------------------------------

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


def tool_payload(container: Mapping[str, Any], key: str) -> bool:
    """Whether `container[key]` in a native body or event is a tool's own JSON: a
    Messages tool use's `input`, a Gemini function call's `args` or its answer's
    `response` (objects without a `type`, unlike a Responses event's `response`)."""
    if key == "input":
        return container.get("type") in TOOL_USES
    return key in ("args", "response") and "type" not in container


TOOL_USES = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})


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
