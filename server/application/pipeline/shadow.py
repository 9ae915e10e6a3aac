"""Shadow traffic: a model's `shadow: {model, share}` sends that share of its calls to
a candidate model as well, to qualify it on live prompts before switching.

The candidate is asked only once the caller's answer has started (the original run is
open), in a task of its own: its answer is discarded, its row is billed to an operator
account (`shadow.account`), never to the caller's limits or budgets, and it is recorded
in the ledger beside the original (`shadow_of`: the original's request id) with whether
the two answers agree. Any failure of the candidate stays in its own row and log line:
the caller never sees it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import difflib
import json
import logging
import random
import time
from collections.abc import Callable
from typing import Any

from server.accounting.ledger import Ledger
from server.application.pipeline.catalog import Upstream
from server.application.pipeline.engine import Run
from server.base.call import Call
from server.base.config import ShadowConfig
from server.base.errors import status_of
from server.base.generation import GenerationRequest, ToolCall
from server.base.record import UsageRecord

log = logging.getLogger(__name__)
# The most a candidate call may take, from when it starts.
SHADOW_TIMEOUT_S = 120.0


@dataclasses.dataclass(frozen=True, slots=True)
class Answer:
    text: str
    tool_calls: tuple[tuple[str, Any], ...]


def answer_of(run: Run) -> Answer:
    """Choice 0's text and tool calls (name and parsed arguments)."""
    return Answer(run.generated_text, _calls(run.choices[0].tool_calls))


def _calls(calls: list[ToolCall]) -> tuple[tuple[str, Any], ...]:
    out = []
    for call in calls:
        try:
            arguments = json.loads(call.arguments or "{}")
        except ValueError:
            arguments = call.arguments
        out.append((call.name, json.dumps(arguments, sort_keys=True)))
    return tuple(out)


def compare(config: ShadowConfig, original: Answer, candidate: Answer) -> tuple[bool, float]:
    """Whether the two answers agree by the configured comparison, and how similar their
    texts are (0 to 1)."""
    score = difflib.SequenceMatcher(None, original.text, candidate.text).ratio()
    if config.compare == "exact":
        agrees = original == candidate
    elif config.compare == "tool_calls":
        agrees = original.tool_calls == candidate.tool_calls
    else:
        agrees = score >= config.threshold
    return agrees, round(score, 6)


class Shadows:
    """Starts candidate calls and records them."""

    def __init__(self, ledger: Ledger, chance: Callable[[], float] = random.random) -> None:
        self.ledger = ledger
        self._chance = chance
        self._tasks: set[asyncio.Task[None]] = set()

    def maybe(
        self,
        config: ShadowConfig | None,
        call: Call,
        original: Run,
        upstreams: list[Upstream],
        generation: GenerationRequest,
    ) -> None:
        """Shadows this call on the candidate when its share says so (the original run
        is open: the caller's answer has started)."""
        if config is None or not upstreams or self._chance() >= config.share:
            return
        if len(self._tasks) >= config.max_in_flight or original.response_cached:
            return
        closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def on_close() -> None:
            if not closed.done():
                closed.set_result(None)

        call.record.after_close.append(on_close)
        task = asyncio.create_task(
            self._shadow(config, call, original, closed, upstreams, generation)
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _shadow(
        self,
        config: ShadowConfig,
        call: Call,
        original: Run,
        closed: asyncio.Future[None],
        upstreams: list[Upstream],
        generation: GenerationRequest,
    ) -> None:
        started = time.time()
        # The candidate's own request: no relay of the caller's wire format, its own
        # deadline.
        request = dataclasses.replace(generation, relay=None)
        deadline = asyncio.get_running_loop().time() + SHADOW_TIMEOUT_S
        run = Run(upstreams, request, deadline)
        error: BaseException | None = None
        try:
            await run.open(f"shadow of model {original.model.id}")
            await run.text()
        except Exception as exc:  # the candidate's failure is its row's, never the caller's
            error = exc
            log.info("shadow call on %s failed: %s", config.model, type(exc).__name__)
        finally:
            await run.aclose()
        took_ms = round((time.time() - started) * 1000, 3)
        agrees: bool | None = None
        score: float | None = None
        try:
            await asyncio.wait_for(closed, SHADOW_TIMEOUT_S)
            usage = call.record.usage
            if error is None and usage is not None and usage.status == "OK":
                agrees, score = compare(config, answer_of(original), answer_of(run))
        except TimeoutError:
            pass
        row = self._row(config, call, run, started, took_ms, error, agrees, score)
        self.ledger.record(row)

    def _row(
        self,
        config: ShadowConfig,
        call: Call,
        run: Run,
        started: float,
        took_ms: float,
        error: BaseException | None,
        agrees: bool | None,
        score: float | None,
    ) -> UsageRecord:
        answered = run.upstream is not None
        counts = run.counts() if answered else None
        cost = run.cost() if answered else None
        ttft = run.ttft_ms() if answered else None
        status, reason = status_of(error)
        return UsageRecord(
            ts=started,
            request_id=f"{call.request_id}.shadow",
            key_id=config.account,
            key_name="shadow",
            method=call.record.method,
            model=config.model,
            provider=run.provider_id,
            prompt_tokens=counts.prompt_tokens if counts else 0,
            completion_tokens=counts.completion_tokens if counts else 0,
            total_tokens=counts.total_tokens if counts else 0,
            input_cost_usd=cost.input_usd if cost else None,
            output_cost_usd=cost.output_usd if cost else None,
            cache_input_cost_usd=cost.cache_input_usd if cost else None,
            total_cost_usd=cost.total_usd if cost else None,
            latency_ms=took_ms,
            ttft_ms=None if ttft is None else round(ttft, 3),
            status=status,
            error_reason=reason,
            tags="shadow",
            shadow_of=call.request_id,
            shadow_agrees=agrees,
            shadow_score=score,
        )

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
