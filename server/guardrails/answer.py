"""An answer through its call's guardrails, before the caller sees any of it.

Text is held back per choice and released only once it is the guard's `holdback`
behind the head (never inside a run of token characters reaching the head, so an
address or key goes out whole, and never after an unterminated private key's first
line), at least RELEASE_AT characters at a time: a scan per few upstream events. A tool
call is released whole; an upstream's own events (native) at the end, scanned as one
text, a replacement landing in the string where its value starts. A block before
anything went out ends the answer as `content_filter`, billed for what the upstream
generated; after, the stream fails.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

from server.base.generation import (
    Event,
    Finished,
    NativeEvent,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
)
from server.guardrails.guard import (
    NO_KEY_OPAQUE,
    OPAQUE,
    PLACEHOLDER,
    Guard,
    GuardrailBlocked,
    apply,
    tool_payload,
)

# Characters of addresses, keys and tokens: a run of them reaching a stream's head is
# held back whole (placeholders' brackets included, for restoring them).
TOKEN_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._%+-/=@:[]"
# The most held back of one run of token characters: past it, the run is no value.
MAX_TOKEN_RUN = 65536
# Released text goes out at least this many characters at a time (or at the end).
RELEASE_AT = 32


def guarded(guard: Guard, events: AsyncIterator[Event]) -> AsyncIterator[Event]:
    """`events` as the caller may see them."""
    return _Answer(guard).run(events)


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
        leaves: list[tuple[Any, Any]] = []
        copies = [dataclasses.replace(e, data=_leaves(json.loads(json.dumps(e.data)), leaves))
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


def _leaves(data: Any, found: list[tuple[Any, Any]], opaque: frozenset[str] = OPAQUE) -> Any:
    """Notes every prose string of `data` (its container and key or index), in order."""
    if isinstance(data, dict):
        for key, value in data.items():
            if isinstance(value, str):
                if key not in opaque:
                    found.append((data, key))
            else:
                _leaves(value, found, NO_KEY_OPAQUE if tool_payload(data, key) else opaque)
    elif isinstance(data, list):
        for index, item in enumerate(data):
            if isinstance(item, str):
                if not opaque:  # a list of strings in a tool's own JSON
                    found.append((data, index))
            else:
                _leaves(item, found, opaque)
    return data
