"""Moderation guardrails (`kind: moderation`): what a caller sends is classified by one
of this gateway's moderation models, called as every moderation is (the model's
providers in order, failover, the call's deadline), and blocked or logged by the
categories the model flags. The texts it reads are those the other guardrails have
already redacted, so personal data they remove never reaches the moderation model.

A category catches a text when the model flags it, or (with the guardrail's `min_score`)
when its score reaches that; only the guardrail's `categories` count, all of OpenAI's
when it lists none. What it finds is counted as the other detectors' finds are, under
the category's name in upper case (`VIOLENCE`, `SELF_HARM_INTENT`).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence

from server.base.errors import UpstreamError
from server.base.generation import GenerationRequest
from server.base.moderation import CATEGORIES, ModerationRequest, Moderations, Verdict
from server.guardrails.guard import Guard, GuardrailBlocked, GuardrailUnavailable, Rail

# The most inputs one moderation request holds (the moderations endpoint's bound);
# more go in several.
MAX_INPUTS = 32
# Asks a moderation model (by id) about a request.
Ask = Callable[[str, ModerationRequest], Awaitable[Moderations]]


def entity(category: str) -> str:
    """A category as a guardrail's entity: `self-harm/intent` -> SELF_HARM_INTENT."""
    return category.upper().replace("/", "_").replace("-", "_")


def caught(rail: Rail, verdict: Verdict) -> list[str]:
    """The guardrail's categories the verdict catches."""
    config = rail.config
    threshold = config.min_score if "min_score" in config.model_fields_set else None
    return [
        c
        for c in config.categories or CATEGORIES
        if verdict.categories.get(c)
        or (threshold is not None and verdict.scores.get(c, 0.0) >= threshold)
    ]


def request_texts(request: GenerationRequest) -> tuple[str, ...]:
    """What the caller says in a generation request: its user turns and its prompt(s)."""
    texts = [m.content for m in request.messages if m.role == "user"]
    texts += [request.prompt or ""]
    texts += [p for p in request.prompts if isinstance(p, str)]
    return tuple(t for t in texts if t.strip())


async def moderate(guard: Guard, texts: Sequence[str], ask: Ask) -> None:
    """Asks each of the guard's moderation guardrails about `texts` (the call's input);
    GuardrailBlocked when one set to block catches a category, GuardrailUnavailable
    when its model fails and it fails closed."""
    given = tuple(t for t in texts if t.strip())
    if not given:
        return
    for rail in guard.moderators:
        assert rail.config.model is not None
        action = rail.action("input")
        started = time.perf_counter()
        verdicts: list[Verdict] = []
        try:
            for start in range(0, len(given), MAX_INPUTS):
                batch = ModerationRequest(inputs=given[start : start + MAX_INPUTS])
                verdicts += (await ask(rail.config.model, batch)).verdicts
        except UpstreamError:
            if rail.config.fail == "closed":
                raise GuardrailUnavailable(
                    f"guardrail {rail.id!r} is unavailable", {"guardrail": rail.id}
                ) from None
            guard.failures[rail.id] += 1
            continue
        finally:
            guard.seconds["input"] += time.perf_counter() - started
        found = sorted({entity(c) for v in verdicts for c in caught(rail, v)})
        for name in found:
            guard.counts[(rail.id, name, "input", action)] += 1
        if found and action == "block":
            raise GuardrailBlocked.of(rail.id, "input", found)
