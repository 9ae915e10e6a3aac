"""A generation in flight: dispatch, timing, token counting and cost."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence

from gateway.v1 import usage_pb2

from server.accounting import costs, tokens
from server.core import dispatch
from server.core.catalog import Upstream
from server.core.config import ModelConfig
from server.core.errors import Internal
from server.core.generation import Finished, GenerationRequest, TextDelta, TokenCounts


class Run:
    """Runs one request on the first upstream that answers, measuring as it goes.

    `open()` fails over between upstreams; `deltas()` then yields the text; after it
    ends, `finish_reason` and `usage()` describe the whole generation."""

    def __init__(
        self, upstreams: Sequence[Upstream], request: GenerationRequest, deadline: float | None
    ) -> None:
        self.request = request
        self._upstreams = upstreams
        self._deadline = deadline
        self._clock = costs.Stopwatch()
        self._text: list[str] = []
        self._finished: Finished | None = None
        self.upstream: Upstream | None = None
        # Upstreams given up on before one answered (the failovers), in order.
        self.causes: dispatch.Causes = []
        # Seconds spent waiting on upstreams (attempts, pauses, every event): the rest
        # of a call's time is the gateway's own overhead.
        self.upstream_s = 0.0

    @property
    def model(self) -> ModelConfig:
        assert self.upstream is not None, "open() first"
        return self.upstream.model

    async def open(self, subject: str) -> None:
        started = time.perf_counter()
        try:
            self.upstream, self._events = await dispatch.open_stream(
                self._upstreams, self.request, self._deadline, subject, causes=self.causes
            )
        finally:
            self.upstream_s += time.perf_counter() - started
        self._clock.mark_first_token()

    async def deltas(self) -> AsyncIterator[str]:
        waited = time.perf_counter()
        async for event in self._events:
            self.upstream_s += time.perf_counter() - waited
            if isinstance(event, TextDelta):
                if event.text:
                    self._text.append(event.text)
                    yield event.text
            else:
                self._finished = event
            waited = time.perf_counter()

    async def text(self) -> str:
        """Gathers the whole generation."""
        async for _ in self.deltas():
            pass
        return self.generated_text

    @property
    def generated_text(self) -> str:
        return "".join(self._text)

    @property
    def finish_reason(self) -> str:
        if self._finished is None:
            raise Internal("generation ended without a finish reason")
        return self._finished.finish_reason

    def counts(self) -> TokenCounts:
        """Upstream-reported counts when there are any, else estimates."""
        if self._finished is not None and self._finished.counts is not None:
            return self._finished.counts
        return TokenCounts(
            tokens.estimate_prompt(self.request), tokens.estimate("".join(self._text))
        )

    @property
    def started(self) -> bool:
        """Whether an upstream answered (so there are counts and a cost to account)."""
        return self.upstream is not None

    def cost(self) -> costs.Cost | None:
        return costs.cost(self.counts(), self.model.price)

    def ttft_ms(self) -> float | None:
        return self._clock.ttft_ms()

    def usage(self, with_ttft: bool = True) -> usage_pb2.Usage:
        return costs.usage(
            self.counts(),
            self.model.price,
            self._clock.elapsed_ms(),
            self._clock.ttft_ms() if with_ttft else None,
        )
