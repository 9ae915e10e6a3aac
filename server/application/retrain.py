"""Retrains the routing scorer from the gateway's own traffic: on `POST
/v1/admin/router:retrain`, and every `routing.retrain_every_s` once
`retrain_min_feedback` new ratings are in. The ledger's rated answers of routed prompts,
every rung's, refit the scorer from the configured model (in a thread, off the event
loop); the router serves the new one in place, its live window carried over.

Before the refit that serves, one fitted on four fifths of the ratings is measured on
the held-back fifth: how often a prompt whose cheapest answer fell short scores above
one whose answer was good enough, and how well its scores route both rungs' ratings
(`training.gain`), beside the same figures for the scorer it replaces.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from server.application.pipeline.state import Live
from server.routing.live import auc
from server.routing.policies import LiveScorer
from server.routing.scored import ScoredRouter
from server.routing.scorer import LearnedScorer
from server.routing.tags import Rated
from server.routing.training import gain
from server.storage import Store

log = logging.getLogger("gateway.routing")

# Every HELD_OUT-th rating is held back to measure the refit.
HELD_OUT = 5
# Fewer held-back answers of the cheapest rung than this give no figure.
MIN_MEASURED = 10


@dataclass(frozen=True, slots=True)
class Retrained:
    """What a retrain did: whether a refitted scorer serves now, the ratings of each
    kind it used, and its figures on the held-back fifth beside the old scorer's."""

    retrained: bool
    detail: str
    cheapest: int = 0
    above: int = 0
    held_out_auc: float | None = None
    previous_auc: float | None = None
    held_out_gain: float | None = None
    previous_gain: float | None = None


async def retrain_every(live: Live, store: Store) -> None:
    """Runs until cancelled; a failed round is logged and the next one tried."""
    used = 0
    while True:
        routing = live.current.config.routing
        if not routing.retrain_every_s:
            await asyncio.sleep(5)  # a reload may turn it on
            continue
        await asyncio.sleep(routing.retrain_every_s)
        try:
            router = _learning(live, store)
            if isinstance(router, str):
                continue
            rated = await rated_answers(router, store)
            if len(rated) - used >= routing.retrain_min_feedback:
                log.info("routing: %s", (await retrain(router, rated)).detail)
                used = len(rated)
        except Exception as exc:  # noqa: BLE001 - the next round tries again
            log.warning("routing: retraining from feedback failed: %s", exc)


async def retrain_from_ledger(live: Live, store: Store | None) -> Retrained:
    """Refits the served scorer on every rated answer in the ledger, now."""
    router = _learning(live, store)
    if isinstance(router, str):
        return Retrained(False, f"{router}: the scorer is kept")
    assert store is not None
    return await retrain(router, await rated_answers(router, store))


async def rated_answers(router: ScoredRouter, store: Store) -> list[Rated]:
    """The ledger's rated answers of routed prompts; the cheapest rung's marked so."""
    weakest = router.weakest
    return [
        Rated(prompt, tuple(t for t in tags.split(",") if t), model == weakest, score)
        for prompt, tags, model, score in await store.feedback.rated_answers()
    ]


async def retrain(router: ScoredRouter, rated: Sequence[Rated]) -> Retrained:
    """Refits the router's scorer on `rated` and swaps it in; keeps it when there is
    nothing to fit."""
    scorer = router.scorer
    assert isinstance(scorer, LiveScorer)
    if not rated:
        return Retrained(False, "no rated answers of routed prompts: the scorer is kept")
    held = [r for i, r in enumerate(rated) if i % HELD_OUT == HELD_OUT - 1]
    kept = [r for i, r in enumerate(rated) if i % HELD_OUT != HELD_OUT - 1]
    previous = scorer.current()
    measured = await asyncio.to_thread(scorer.refitted, kept) if kept else None
    scorer.use(await asyncio.to_thread(scorer.refitted, rated))
    cheapest = sum(r.cheapest for r in rated)
    replaced = previous if isinstance(previous, LearnedScorer) else None
    return Retrained(
        True,
        f"scorer refitted on {cheapest} rated answers of the cheapest rung and "
        f"{len(rated) - cheapest} of the rungs above",
        cheapest,
        len(rated) - cheapest,
        held_out_auc=None if measured is None else _figure(measured, held),
        previous_auc=None if replaced is None else _figure(replaced, held),
        held_out_gain=None if measured is None else _gain(measured, held),
        previous_gain=None if replaced is None else _gain(replaced, held),
    )


def _figure(scorer: LearnedScorer, held: Sequence[Rated]) -> float | None:
    """How often a held-back prompt whose cheapest answer fell short scores above one
    whose answer was good enough; None when too few, or only one kind, were held."""
    cheapest = [r for r in held if r.cheapest]
    kinds = {r.score >= 0.5 for r in cheapest}
    if len(cheapest) < MIN_MEASURED or len(kinds) < 2:
        return None
    scored = [(scorer.logit(r.prompt, None, r.tags), 1.0 - r.score) for r in cheapest]
    return round(auc(scored), 4)


def _gain(scorer: LearnedScorer, held: Sequence[Rated]) -> float | None:
    """How well the scorer routes the held-back ratings of every rung (`training.gain`);
    None when fewer than MIN_MEASURED were held."""
    if len(held) < MIN_MEASURED:
        return None
    return round(gain([(scorer.logit(r.prompt, None, r.tags), r) for r in held]), 4)


def _learning(live: Live, store: Store | None) -> ScoredRouter | str:
    """The router, when its scorer can learn from the ledger's ratings; else why not."""
    router = live.current.router
    if store is None:
        return "this gateway keeps no ledger to learn from"
    if not isinstance(router, ScoredRouter) or not isinstance(router.scorer, LiveScorer):
        return "routing by a fixed order learns nothing from ratings"
    if not router.scorer.learns:
        return "the feature scorer is not refitted"
    return router
