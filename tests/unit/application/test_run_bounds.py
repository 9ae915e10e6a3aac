"""A run relays at most what max_tokens asked for (plus the slack a usage report may
exceed it by), byte for byte as the token estimate counts: the fragment that crosses is
shortened (never mid-character), the upstream's stream closed, the run finished for
`length` and billed for at most max_tokens a choice. Without max_tokens nothing is cut."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence

import pytest

from server.application.pipeline.catalog import Upstream
from server.application.pipeline.engine import Run
from server.application.pipeline.response_cache import Replay
from server.base import costs, tokens
from server.base.config import ModelConfig, Price, ProviderConfig
from server.base.generation import (
    Event,
    Finished,
    GenerationRequest,
    Message,
    ReasoningDelta,
    TextDelta,
    TokenCounts,
    ToolCallDelta,
)

MODEL = ModelConfig.model_validate({"id": "m", "owned_by": "t", "created": 0, "providers": [
    {"id": "p", "type": "primary", "adapter": "simulated"}]})  # fmt: skip
ROOM = (10 + tokens.COMPLETION_SLACK_TOKENS) * tokens.BYTES_PER_TOKEN  # max_tokens 10


class Closing(Replay):
    """A replayed answer that notes whether its stream was closed before its end."""

    def __init__(self, events: Sequence[Event], request: GenerationRequest) -> None:
        super().__init__(events, frozenset(request.needs()))
        self.sent = 0

    @property
    def closed_early(self) -> bool:
        return self.sent < len(self._events)

    async def generate(self, request: GenerationRequest):  # type: ignore[no-untyped-def]
        for event in self._events:
            self.sent += 1
            yield event


async def run(
    events: Sequence[Event], max_tokens: int | None = 10, n: int = 1, provider: str = "p"
) -> tuple[Run, Closing]:
    request = GenerationRequest(messages=(Message("user", "hi"),), max_tokens=max_tokens, n=n)
    replay = Closing(events, request)
    config = ProviderConfig(id=provider, type="primary", adapter="simulated")
    done = Run([Upstream(config, replay, MODEL)], request, None)
    await done.open("model m")
    return done, replay


async def relayed(done: Run) -> list[Event]:
    return [fragment async for fragment in done.stream()]


async def test_text_up_to_the_room_is_relayed_whole_and_the_upstream_ends_it() -> None:
    done, provider = await run([TextDelta("a" * ROOM), Finished("stop", TokenCounts(3, 10))])
    assert [f.text for f in await relayed(done)] == ["a" * ROOM]  # type: ignore[union-attr]
    assert done.finish_reason == "stop" and not provider.closed_early
    assert done.counts() == TokenCounts(3, 10)


async def test_the_byte_past_the_room_cuts_the_run() -> None:
    done, provider = await run([TextDelta("a" * ROOM), TextDelta("b"), TextDelta("c"),
                                Finished("stop", TokenCounts(3, 10))])  # fmt: skip
    fragments = await relayed(done)
    assert [f.text for f in fragments] == ["a" * ROOM]  # type: ignore[union-attr]
    assert done.finish_reason == "length" and done.choice_finish(0) == "length"
    assert provider.closed_early
    assert done.counts().completion_tokens == 10  # billed for max_tokens, not the estimate


async def test_a_fragment_that_crosses_is_shortened_never_mid_character() -> None:
    # Two bytes a character: the room ends inside the character after the last that fits.
    text = "é" * (ROOM // 2 + 5)  # two bytes each
    done, _ = await run([TextDelta("x"), TextDelta(text), Finished("stop")])
    fragments = await relayed(done)
    kept = fragments[1].text  # type: ignore[union-attr]
    assert len(b"x") + len(kept.encode()) <= ROOM
    assert kept == "é" * ((ROOM - 1) // 2)
    assert done.finish_reason == "length"


async def test_tool_arguments_and_reasoning_count_too() -> None:
    args = '{"a": "' + "z" * ROOM + '"}'
    done, _ = await run([ReasoningDelta("r" * 100), ToolCallDelta(0, "c1", "f", args),
                         Finished("tool_calls")])  # fmt: skip
    fragments = await relayed(done)
    assert len(fragments[1].arguments) == ROOM - 100  # type: ignore[union-attr]
    assert done.finish_reason == "length"
    assert done.counts().completion_tokens <= 10


async def test_every_choice_has_its_room() -> None:
    done, provider = await run([TextDelta("a" * ROOM, 0), TextDelta("b" * ROOM, 1),
                                Finished("stop", finish_reasons=("stop", "stop"))], n=2)  # fmt: skip
    assert len(await relayed(done)) == 2 and not provider.closed_early
    assert done.finish_reason == "stop"


@pytest.mark.parametrize("how", ["events", "stream"])
async def test_without_max_tokens_nothing_is_cut(how: str) -> None:
    done, provider = await run([TextDelta("a" * 100_000), Finished("stop")], max_tokens=None)
    fragments = [f async for f in getattr(done, how)()]
    assert len(fragments[0].text) == 100_000 and done.finish_reason == "stop"  # type: ignore[union-attr]
    assert not provider.closed_early


async def test_events_cut_as_stream_does() -> None:
    done, provider = await run([TextDelta("a" * ROOM), TextDelta("b"), Finished("stop")])
    assert [f.text async for f in done.events()] == ["a" * ROOM]  # type: ignore[union-attr]
    assert done.finish_reason == "length" and provider.closed_early


async def test_a_cut_is_logged_once_per_provider_and_interval(caplog) -> None:  # type: ignore[no-untyped-def]
    caplog.set_level(logging.WARNING, logger="server.application.pipeline.engine")
    for provider in (f"p-{uuid.uuid4().hex[:6]}", f"q-{uuid.uuid4().hex[:6]}"):
        for _ in range(2):
            done, _ = await run(
                [TextDelta("a" * ROOM), TextDelta("b"), Finished("stop")], provider=provider
            )
            await relayed(done)
    # One line per provider (its second cut within the interval held back), naming it.
    said = [r.getMessage() for r in caplog.records]
    assert [m.split(":")[0][0] for m in said] == ["p", "q"]
    assert all(m.endswith(": generated past max_tokens 10; cut there") for m in said)


PRICED = MODEL.model_copy(update={"price": Price(input=1.0, output=2.0)})


async def test_a_runs_cost_follows_its_counts_and_its_usage_shows_the_same() -> None:
    request = GenerationRequest(messages=(Message("user", "hi"),), max_tokens=10)
    replay = Closing([TextDelta("hello"), Finished("stop", TokenCounts(1000, 9))], request)
    config = ProviderConfig(id="p", type="primary", adapter="simulated")
    done = Run([Upstream(config, replay, PRICED)], request, None)
    await done.open("model m")
    estimated = done.cost()  # before the answer: the prompt's estimate, nothing generated
    assert estimated == costs.cost(TokenCounts(tokens.estimate_prompt(request), 0), PRICED.price)
    await done.text()
    billed = done.cost()
    assert billed is not None and billed.total_usd == pytest.approx(1000e-6 + 9 * 2e-6)
    assert done.usage().total_cost_usd == billed.total_usd
    assert done.cost() is billed  # asked again (the ledger row's), not computed again
    batch = done.cost(0.5)
    assert batch == costs.cost(TokenCounts(1000, 9), PRICED.price.for_batch(0.5))  # type: ignore[union-attr]
    assert batch != billed and done.cost() == billed
