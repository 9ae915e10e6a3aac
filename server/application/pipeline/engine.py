"""A generation in flight: dispatch, timing, token counting and cost."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import cast

from gateway.v1 import usage_pb2

from server.application.pipeline import dispatch
from server.application.pipeline.catalog import Upstream
from server.base import costs, tokens
from server.base.config import ModelConfig, Price
from server.base.errors import Internal, Unsupported
from server.base.generation import (
    Event,
    Finished,
    GenerationRequest,
    NativeEvent,
    ReasoningDelta,
    Relayed,
    TextDelta,
    TokenCounts,
    TokenLogprob,
    ToolCall,
    ToolCallDelta,
    served_dialect,
)
from server.base.throttle import warn_throttled
from server.guardrails.answer import guarded
from server.guardrails.guard import Guard

# What a run passes on: text, tool-call and reasoning fragments, native events, and
# a relayed stream's events.
Fragment = TextDelta | ToolCallDelta | ReasoningDelta | NativeEvent | Relayed
_WHOLE = frozenset({ReasoningDelta, NativeEvent})
FREE = Price(input=0, output=0)
# Takes a finished answer: the model that made it and every event of it.
Recorder = Callable[[str, list[Event]], None]


@dataclass
class Choice:
    """One choice of a generation, gathered from its events."""

    text: list[str] = field(default_factory=list)
    logprobs: list[TokenLogprob] = field(default_factory=list)
    # Tool calls by index: [id, name, arguments, sealed signature].
    calls: dict[int, list[str]] = field(default_factory=dict)
    finish_reason: str | None = None
    # Shown reasoning (thinking), counted when the upstream reports no usage; a relayed
    # stream's other generated text (tool arguments too) is counted with it.
    reasoning: list[str] = field(default_factory=list)

    def add(self, event: TextDelta | ToolCallDelta) -> None:
        if isinstance(event, TextDelta):
            self.text.append(event.text)
            self.logprobs.extend(event.logprobs)
            return
        call = self.calls.setdefault(event.index, ["", "", "", ""])
        call[0] = event.id or call[0]
        call[1] = event.name or call[1]
        call[2] += event.arguments
        call[3] = event.signature or call[3]

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [
            ToolCall(call[0], call[1], call[2], call[3] or None)
            for call in (self.calls[i] for i in sorted(self.calls))
        ]


def capable(
    upstreams: Sequence[Upstream], request: GenerationRequest, subject: str
) -> list[Upstream]:
    """The upstreams that have every capability the request needs, in order.

    Raises Unsupported, naming the capability and the field, when none has one."""
    needs = request.needs()
    if not needs:
        return list(upstreams)
    enabled = [u for u in upstreams if u.config.enabled] or list(upstreams)
    for capability, param in needs.items():
        if not any(capability in u.capabilities for u in enabled):
            what = (
                "only the request's own format carries it, and there is no provider of "
                f"that format for {subject}"
                if served_dialect(capability) is not None
                else f"{subject} has no provider that supports {capability}"
            )
            raise Unsupported(
                f"{param}: {what}", {"field": param, "capability": capability, "subject": subject}
            )
    return [u for u in upstreams if all(c in u.capabilities for c in needs)]


log = logging.getLogger(__name__)


class Run:
    """Runs one request on the first upstream that answers, measuring as it goes.

    `open()` fails over between upstreams; `events()` (or `deltas()`, text only) then
    yields the generation; after it ends, `choices`, `finish_reason` and `usage()`
    describe the whole of it."""

    def __init__(
        self,
        upstreams: Sequence[Upstream],
        request: GenerationRequest,
        deadline: float | None,
        *,
        response_cache: str | None = None,
        free: bool = False,
        recorder: Recorder | None = None,
        guard: Guard | None = None,
    ) -> None:
        if request.relay and (recorder is not None or guard is not None):
            # The cache keeps, and the guardrails read, the core's events.
            request = dataclasses.replace(request, relay=None)
        self.request = request
        self._upstreams = upstreams
        self._deadline = deadline
        self._clock = costs.Stopwatch()
        self.choices = [Choice() for _ in range(request.choice_count)]
        self._finished: Finished | None = None
        self.upstream: Upstream | None = None
        self._events: AsyncGenerator[Event, None] | None = None
        # Upstreams given up on before one answered (the failovers), in order.
        self.causes: dispatch.Causes = []
        # Seconds spent waiting on upstreams (attempts, pauses, every event): the rest
        # of a call's time is the gateway's own overhead.
        self.upstream_s = 0.0
        # Cache affinity's outcome (hit, moved, miss), when it applied (affinity.py).
        self.affinity: str | None = None
        # The response cache's part (response_cache.py): `hit` (a stored answer is
        # replayed) or `miss`; `free` when a hit costs nothing. `recorder`, when set,
        # is given every event of an answer that finishes.
        self.response_cache = response_cache
        self.free = free
        self.recorder = recorder
        self._recorded: list[Event] = []
        # The call's guardrails: the answer passes them before anything else sees it.
        self.guard = guard
        # Bytes of generated text the run may still relay (None: no max_tokens): an
        # upstream that ignores max_tokens is cut at it, with the slack a usage report
        # may exceed it by, for every choice (`_spend`).
        most = request.max_tokens
        self._left = (
            None
            if most is None
            else (most + tokens.COMPLETION_SLACK_TOKENS)
            * tokens.BYTES_PER_TOKEN
            * request.choice_count
        )
        self._cut = False
        self._costed: tuple[TokenCounts, Price | None, costs.Cost | None] | None = None

    @property
    def response_cached(self) -> bool:
        return self.response_cache == "hit"

    @property
    def model(self) -> ModelConfig:
        assert self.upstream is not None, "open() first"
        return self.upstream.model

    @property
    def provider_id(self) -> str:
        return self.upstream.id if self.upstream is not None else ""

    async def open(self, subject: str) -> None:
        upstreams = capable(self._upstreams, self.request, subject)
        started = time.perf_counter()
        try:
            self.upstream, self._events = await dispatch.open_stream(
                upstreams, self.request, self._deadline, subject, self._start, self.causes
            )
        finally:
            self.upstream_s += time.perf_counter() - started
        if self.guard is not None:
            self._events = cast(AsyncGenerator[Event, None], guarded(self.guard, self._events))
        self._clock.mark_first_token()

    def _start(self, upstream: Upstream) -> AsyncIterator[Event]:
        return upstream.provider.generate(self.request.for_provider(upstream.capabilities))

    async def events(self) -> AsyncIterator[TextDelta | ToolCallDelta | Relayed]:
        """Text and tool-call fragments as they come, each choice's in order (or a
        relayed stream's events). `stream()` but for the whole ones, in a loop of its
        own: this runs for every streamed token."""
        waited = time.perf_counter()
        assert self._events is not None, "open() first"
        async for event in self._events:
            self.upstream_s += time.perf_counter() - waited
            if type(event) is Relayed and not self._fits(event):
                for piece in self._cut_short(event):
                    if type(piece) not in _WHOLE:
                        yield cast(TextDelta | ToolCallDelta, piece)
            elif (fragment := self._take(event)) is not None and type(fragment) not in _WHOLE:
                yield cast(TextDelta | ToolCallDelta | Relayed, fragment)
            if self._cut:
                await self._cut_off()
                return
            waited = time.perf_counter()

    async def stream(self) -> AsyncIterator[Fragment]:
        """Every fragment as it comes, reasoning and native output items and events
        included (upstreams serving the Responses or Messages API natively send those,
        and thinking models reasoning)."""
        waited = time.perf_counter()
        assert self._events is not None, "open() first"
        async for event in self._events:
            self.upstream_s += time.perf_counter() - waited
            if type(event) is Relayed and not self._fits(event):
                for piece in self._cut_short(event):
                    yield piece
            elif (fragment := self._take(event)) is not None:
                yield fragment
            if self._cut:
                await self._cut_off()
                return
            waited = time.perf_counter()

    def _cut_short(self, event: Relayed) -> list[Fragment]:
        """Relayed events that cross max_tokens, decoded and cut as any."""
        out = []
        for piece in event.decode(event.events):
            if (fragment := self._take(piece)) is not None:
                out.append(fragment)
            if self._cut:
                break
        return out

    def _take(self, event: Event) -> Fragment | None:
        """Records an event; returns it when it is a fragment to pass on."""
        if isinstance(event, Finished):
            self._finished = event = self._checked(event)
            if self.recorder is not None:
                self.recorder(self.model.id, [*self._recorded, event])
            reasons = event.finish_reasons or (event.finish_reason,)
            for choice, reason in zip(self.choices, reasons, strict=False):
                choice.finish_reason = reason
            return None
        if self.recorder is not None:
            self._recorded.append(event)
        if isinstance(event, NativeEvent):
            if event.text or event.other:  # counted when usage is missing
                self.choices[0].text.append(event.text)
                self.choices[0].reasoning.append(event.other)
            return event  # passed on, nothing else to gather
        if isinstance(event, Relayed):
            if self._left is not None:
                self._left -= event.size  # it fits (`_fits`)
            choice = self.choices[0]
            choice.text.append(event.text)
            if event.other:
                choice.reasoning.append(event.other)
            return event
        if self._left is not None:
            self._spend(event)
        if isinstance(event, ReasoningDelta):
            self.choices[0].reasoning.append(event.text)  # counted when usage is missing
            return event
        if event.choice >= len(self.choices):
            return None  # a choice nobody asked for
        if isinstance(event, TextDelta) and not event.text:
            return None
        self.choices[event.choice].add(event)
        return event

    def _fits(self, event: Relayed) -> bool:
        return self._left is None or event.size <= self._left

    def _spend(self, event: TextDelta | ToolCallDelta | ReasoningDelta) -> None:
        """Counts a fragment's text against what the run may relay; the fragment that
        crosses it is shortened to fit, and the run ends after it (`_cut_off`)."""
        assert self._left is not None
        text = event.arguments if isinstance(event, ToolCallDelta) else event.text
        size = len(text) if text.isascii() else len(text.encode())
        if size <= self._left:
            self._left -= size
            return
        kept = text.encode()[: self._left].decode(errors="ignore")
        if isinstance(event, ToolCallDelta):
            event.arguments = kept
        else:
            event.text = kept
        self._left = 0
        self._cut = True

    async def _cut_off(self) -> None:
        """Ends a run whose upstream generated past max_tokens: its stream closed, the
        run finished for `length`, billed for at most max_tokens a choice."""
        assert self._events is not None and self.request.max_tokens is not None
        await self._events.aclose()
        provider = self.provider_id
        warn_throttled(
            log, provider,
            f"{provider}: generated past max_tokens {self.request.max_tokens}; cut there",
        )  # fmt: skip
        counts = self.counts()
        most = self.request.max_tokens * self.request.choice_count
        billed = dataclasses.replace(counts, completion_tokens=min(counts.completion_tokens, most))
        self._finished = Finished("length", billed)  # every choice's (see choice_finish)

    async def aclose(self) -> None:
        """Stops the generation: closes the upstream's stream (and its request) now,
        rather than whenever the garbage collector finds it."""
        if self._events is not None:
            await self._events.aclose()

    async def deltas(self) -> AsyncIterator[str]:
        """Choice 0's text fragments (the routing interface's single choice)."""
        async for event in self.events():
            if isinstance(event, TextDelta) and event.choice == 0:
                yield event.text

    def _checked(self, finished: Finished) -> Finished:
        """After text has gone out, an impossible usage report cannot fail over: the
        gateway counts the tokens itself instead (never a negative or absurd cost)."""
        if finished.counts is None:
            return finished
        why = tokens.implausible(finished.counts, self.request)
        if why is None:
            return finished
        provider = self.upstream.id if self.upstream is not None else "?"
        warn_throttled(
            log, provider, f"{provider}: implausible usage ({why}); counting tokens instead"
        )
        return dataclasses.replace(finished, counts=None)

    async def text(self) -> str:
        """Gathers the whole generation."""
        async for _ in self.events():
            pass
        return self.generated_text

    @property
    def generated_text(self) -> str:
        return "".join(self.choices[0].text)

    @property
    def finish_reason(self) -> str:
        if self._finished is None:
            raise Internal("generation ended without a finish reason")
        return self._finished.finish_reason

    @property
    def stop_sequence(self) -> str | None:
        """The stop sequence that ended choice 0, when the upstream said which."""
        return self._finished.stop_sequence if self._finished is not None else None

    @property
    def upstream_response_id(self) -> str | None:
        """The upstream's own id of the response, when it stored one (Responses API)."""
        return self._finished.response_id if self._finished is not None else None

    def choice_finish(self, index: int) -> str:
        """Choice `index`'s finish reason (choice 0's when the upstream gave one only)."""
        return self.choices[index].finish_reason or self.finish_reason

    def counts(self) -> TokenCounts:
        """Upstream-reported counts when there are any, else estimates."""
        if self._finished is not None and self._finished.counts is not None:
            return self._finished.counts
        generated = sum(
            tokens.estimate("".join(c.text))
            + tokens.estimate("".join(c.reasoning))
            + sum(tokens.estimate(a[2]) for a in c.calls.values())
            for c in self.choices
        )
        return TokenCounts(tokens.estimate_prompt(self.request), generated)

    @property
    def cut_short(self) -> bool:
        """Whether the run ended the upstream's stream at max_tokens (its counts are
        then the gateway's, whatever the upstream reported so far)."""
        return self._cut

    @property
    def started(self) -> bool:
        """Whether an upstream answered (so there are counts and a cost to account)."""
        return self.upstream is not None

    @property
    def price(self) -> Price | None:
        """What the run is billed at: the model's price, or nothing for a free hit of
        the response cache (an unpriced model stays unpriced)."""
        price = self.model.price
        return FREE if self.free and price is not None else price

    def cost(self, batch_factor: float | None = None) -> costs.Cost | None:
        counts, price = self.counts(), self.price
        if batch_factor is not None:
            return costs.cost(counts, costs.batch_price(price, batch_factor))
        # The answer's usage and the ledger row ask the same: computed once for both.
        costed = self._costed
        if costed is None or costed[0] is not counts or costed[1] is not price:
            costed = self._costed = (counts, price, costs.cost(counts, price))
        return costed[2]

    def billed(self) -> tuple[str, float]:
        """A generation is billed by its tokens."""
        return "tokens", self.counts().total_tokens

    def ttft_ms(self) -> float | None:
        return self._clock.ttft_ms()

    def usage(self, with_ttft: bool = True) -> usage_pb2.Usage:
        usage = costs.usage(
            self.counts(),
            self.cost(),
            self._clock.elapsed_ms(),
            self._clock.ttft_ms() if with_ttft else None,
        )
        if self.response_cached:
            usage.response_cached = True
        return usage
