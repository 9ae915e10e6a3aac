"""Retrains the routing scorer from the gateway's own traffic: every
`routing.retrain_every_s`, the ledger's feedback on the weakest model's answers refits the
learned scorer (in a thread, off the event loop) and the router serves the new one; live
calibration re-centres its thresholds as traffic arrives."""

from __future__ import annotations

import asyncio
import logging

from server.application.pipeline.state import Live
from server.routing.policies import LiveScorer
from server.routing.scored import ScoredRouter
from server.storage import Store

log = logging.getLogger("gateway.routing")


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
            used = await retrain_once(live, store, used)
        except Exception as exc:  # noqa: BLE001 - the next round tries again
            log.warning("routing: retraining from feedback failed: %s", exc)


async def retrain_once(live: Live, store: Store, used: int) -> int:
    """Refits the scorer when enough new feedback came in; returns the rows used so far."""
    state = live.current
    router = state.router
    if not isinstance(router, ScoredRouter) or not isinstance(router.scorer, LiveScorer):
        return used
    rated = await store.feedback.rated_prompts(router.weakest)
    if len(rated) - used < state.config.routing.retrain_min_feedback:
        return used
    refitted = await asyncio.to_thread(router.scorer.refitted, rated[used:])
    if refitted is None:
        return used
    router.scorer.use(refitted)
    log.info("routing: scorer refitted on %d new rated prompts", len(rated) - used)
    return len(rated)
