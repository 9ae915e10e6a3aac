"""The scored routing policy: each prompt goes to the cheapest model of its profile
that is expected to answer it well enough.

    hard filters      enabled, a provider whose circuit is not open and that has the
                      capabilities the request needs, the context window fits prompt +
                      max_tokens, the worst-case cost fits the key's budget
    difficulty d      the scorer's estimate (0 to 1) that the cheapest model falls short
    quality ladder    r = 0 for the weakest model of the pool, 1 for the strongest, from
                      each model's `quality` in the config (else its output price)
    bar               a model meets the profile's bar t when d * (1 - r) <= t: the
                      strongest always does, the weakest when d <= t
    choice            the cheapest candidate meeting the bar; equal costs go to the
                      lower observed time to first token; none meeting it: the strongest
    exploration       `routing.explore_share` of the calls go to another candidate at
                      random (reason EXPLORE), so that feedback rates every rung
    fallback          the other candidates, in the profile's order
    predicted success with a quality prior q per model (the config's `quality`, else the
                      scorer file's prior for that model), each candidate's chance of
                      answering this prompt well enough: q moved in log-odds by how much
                      harder than average the prompt is

Any number of models of any vendors make the ladder. Each profile is one operating point on
the same quality-versus-cost curve: a lower threshold sends more prompts up the ladder.
Thresholds come from the config or, by default, from the scorer's live calibration: trained
thresholds re-centred on recent traffic toward each profile's target share.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Sequence
from typing import Protocol

from server.base import tokens
from server.base.config import PROFILES, ConfigError, ModelConfig, RoutingConfig
from server.base.costs import max_cost
from server.base.generation import GenerationRequest
from server.routing.features import sigmoid
from server.routing.router import Candidate, Route, Skipped
from server.routing.view import CatalogView


class Scorer(Protocol):
    """Estimates how likely the cheapest model falls short on a prompt."""

    name: str
    # Model name -> share of prompts it answers well enough, from the scorer's training.
    quality_priors: dict[str, float]
    # The mean difficulty of the training prompts: where a prompt counts as average.
    mean_difficulty: float

    @property
    def drifting(self) -> bool:
        """True while recent traffic's scores stray from the training distribution."""
        ...

    def difficulty(
        self,
        prompt: str,
        max_tokens: int | None,
        request_id: str = "",
        tags: Sequence[str] = (),
    ) -> float:
        """A probability, 0 to 1; `request_id` lets feedback on the answer label it;
        `tags` are features of the estimate."""
        ...

    def threshold(self, profile: str) -> float:
        """The profile's current bar on difficulty."""
        ...

    def decided(self, profile: str, upward: bool) -> None:
        """Records whether a decision went past the cheapest model."""
        ...

    def shares(self) -> dict[str, tuple[float, float | None]]:
        """Per profile: the target share of calls past the cheapest model, and the
        realised share of recent decisions (None before any)."""
        ...

    def feedback(self, request_id: str, score: float) -> bool:
        """Feedback on a recent request's answer (1: good enough); False if forgotten."""
        ...


class ScoredRouter:
    def __init__(
        self, routing: RoutingConfig, catalog: CatalogView, scorer: Scorer, default_max_tokens: int
    ) -> None:
        self._profiles = {name: tuple(models) for name, models in routing.profiles.items()}
        self._catalog = catalog
        self._scorer = scorer
        self._default_max = default_max_tokens
        self._overrides = routing.thresholds
        share = routing.explore_share
        self._explore = share if isinstance(share, dict) else dict.fromkeys(PROFILES, share)
        self._random = random.Random()
        # A cheaper profile never holds a higher bar, so it never picks a stronger model.
        economy, balanced, quality = (self._threshold(p) for p in PROFILES)
        if not economy >= balanced >= quality:
            raise ConfigError(
                "routing.thresholds: must not increase from economy to balanced to quality "
                f"(economy {economy:g}, balanced {balanced:g}, quality {quality:g})"
            )
        # The pool is the models profiles route to (not, say, an embedding model).
        routed = {m for models in self._profiles.values() for m in models}
        pool = [m for m in catalog.models if m.id in routed]
        self._priors = _priors(pool, scorer.quality_priors)
        self._ladder = _ladder(pool, self._priors)
        # The log-odds of success of the average training prompt, for predicted success.
        self._average = _logit(1 - scorer.mean_difficulty)

    @property
    def scorer(self) -> Scorer:
        return self._scorer

    @property
    def weakest(self) -> str:
        """The bottom of the ladder: the model whose failures feedback teaches."""
        return min(self._ladder, key=lambda m: self._ladder[m])

    def route(
        self,
        request: GenerationRequest,
        profile: str,
        budget_usd: float | None = None,
        request_id: str = "",
        tags: Sequence[str] = (),
    ) -> Route:
        started = time.perf_counter()
        models = self._profiles[profile]  # type: ignore[index]
        eligible, skipped = self._filter(models, request, budget_usd)
        if not eligible:
            # Nothing passes: try the profile as listed, so the caller gets the real cause.
            return Route(
                profile, models, reason="no model of the profile passed the hard filters",
                reason_codes=("NO_CANDIDATE",), skipped=tuple(skipped),
                decision_ms=_ms_since(started),
            )  # fmt: skip
        scorer = self._scorer
        difficulty = scorer.difficulty(prompt_text(request), request.max_tokens, request_id, tags)
        threshold = self._threshold(profile)
        costs = {m: self._cost(m, request) for m in eligible}
        shift = _logit(1 - difficulty) - self._average
        candidates = sorted(
            (
                Candidate(
                    m,
                    estimated_quality=round(1 - difficulty * (1 - self._ladder[m]), 4),
                    estimated_cost_usd=costs[m],
                    meets_bar=difficulty * (1 - self._ladder[m]) <= threshold,
                    predicted_success=(
                        None if m not in self._priors
                        else round(sigmoid(_logit(self._priors[m]) + shift), 4)
                    ),
                )
                for m in eligible
            ),
            key=lambda c: (_or_inf(c.estimated_cost_usd), self._ttft(c.model), -self._ladder[c.model]),
        )  # fmt: skip
        meeting = [c for c in candidates if c.meets_bar]
        if meeting:
            chosen, codes = meeting[0].model, ["CHEAPEST_MEETING_BAR"]
            reason = (
                f"cheapest model meeting the {profile} bar "
                f"(difficulty {difficulty:.2f}, threshold {threshold:.2f})"
            )
            if any(c.estimated_cost_usd == costs[chosen] for c in meeting[1:]):
                codes.append("LATENCY_TIE_BREAK")
            if self._scorer.drifting and profile not in self._overrides:
                codes.append("DRIFT_RECALIBRATED")
        else:
            chosen = max(eligible, key=lambda m: (self._ladder[m], -_or_inf(costs[m])))
            codes = ["STRONGEST_AVAILABLE"]
            reason = f"no model meets the {profile} bar; the strongest available serves"
        others = [m for m in eligible if m != chosen]
        share = self._explore.get(profile, 0.0)  # type: ignore[call-overload]
        if others and self._random.random() < share:
            # Feedback on the answer then says what another rung does on such prompts;
            # the explored call stays out of the shares live calibration keeps.
            chosen = self._random.choice(others)
            others = [m for m in eligible if m != chosen]
            codes = ["EXPLORE"]
            reason = f"exploring: another candidate of the {profile} profile, at random"
        else:
            scorer.decided(profile, chosen != candidates[0].model)
        order = (chosen, *others)
        target, realised = scorer.shares().get(profile, (None, None))
        return Route(
            profile, order, reason=reason, reason_codes=tuple(codes), difficulty=difficulty,
            threshold=threshold, scorer=scorer.name, candidates=tuple(candidates),
            skipped=tuple(skipped), decision_ms=_ms_since(started),
            target_share=None if profile in self._overrides else target,
            recent_share=realised,
        )  # fmt: skip

    def feedback(self, request_id: str, score: float) -> bool:
        """Feedback on a routed request's answer, for live calibration to learn from."""
        return self._scorer.feedback(request_id, score)

    def shares(self) -> dict[str, tuple[float, float | None]]:
        return self._scorer.shares()

    def _threshold(self, profile: str) -> float:
        override = self._overrides.get(profile)  # type: ignore[call-overload]
        return self._scorer.threshold(profile) if override is None else override

    def _filter(
        self, models: tuple[str, ...], request: GenerationRequest, budget_usd: float | None
    ) -> tuple[list[str], list[Skipped]]:
        needed = tokens.estimate_prompt(request) + (request.max_tokens or self._default_max)
        needs = request.needs()
        eligible, skipped = [], []
        for model_id in models:
            model = self._catalog.model(model_id)
            upstreams = self._catalog.providers(model_id)
            if not any(u.enabled for u in upstreams):
                skipped.append(Skipped(model_id, "DISABLED", "every provider is disabled"))
            elif not any(u.usable for u in upstreams):
                skipped.append(
                    Skipped(model_id, "CIRCUIT_OPEN", "every provider's circuit is open")
                )
            elif needs and not any(
                u.usable and all(c in u.capabilities for c in needs) for u in upstreams
            ):
                missing = ", ".join(sorted(needs))
                skipped.append(Skipped(model_id, "CAPABILITY", f"no usable provider has {missing}"))
            elif model.context_window is not None and needed > model.context_window:
                skipped.append(Skipped(
                    model_id, "CONTEXT_WINDOW",
                    f"needs about {needed} tokens; the window holds {model.context_window}",
                ))  # fmt: skip
            elif budget_usd is not None and (cost := self._worst(model, request)) > budget_usd:
                skipped.append(Skipped(
                    model_id, "OVER_BUDGET",
                    f"may cost ${cost:.6f}; ${max(budget_usd, 0):.6f} left in the budget",
                ))  # fmt: skip
            else:
                eligible.append(model_id)
        return eligible, skipped

    def _worst(self, model: ModelConfig, request: GenerationRequest) -> float:
        return max_cost([model.price], request, self._default_max)

    def _cost(self, model_id: str, request: GenerationRequest) -> float | None:
        model = self._catalog.model(model_id)
        return None if model.price is None else round(self._worst(model, request), 9)

    def _ttft(self, model_id: str) -> float:
        seen = [
            u.observed_ttft_ms
            for u in self._catalog.providers(model_id)
            if u.usable and u.observed_ttft_ms is not None
        ]
        return min(seen, default=math.inf)


def _priors(models: list[ModelConfig], learned: dict[str, float]) -> dict[str, float]:
    """Each model's quality prior: the config's, else the scorer's for that model id."""
    priors = {}
    for m in models:
        quality = m.quality if m.quality is not None else learned.get(m.id)
        if quality is not None:
            priors[m.id] = min(0.999, max(0.001, quality))
    return priors


def _ladder(models: list[ModelConfig], priors: dict[str, float]) -> dict[str, float]:
    """Each model's place between the weakest (0) and the strongest (1) of the pool."""
    if all(m.id in priors for m in models):
        raw = {m.id: priors[m.id] for m in models}
    else:  # one scale for all: output price stands in for quality
        raw = {m.id: m.price.output if m.price else 0.0 for m in models}
    low, high = min(raw.values()), max(raw.values())
    return {m: 1.0 if high == low else (q - low) / (high - low) for m, q in raw.items()}


def prompt_text(request: GenerationRequest) -> str:
    """The text a routed request is scored on (and, recorded, retrained on)."""
    if request.prompt is not None:
        return request.prompt
    return "\n".join(m.content for m in request.messages)


def _logit(p: float) -> float:
    p = min(1 - 1e-6, max(1e-6, p))
    return math.log(p / (1 - p))


def _or_inf(value: float | None) -> float:
    return math.inf if value is None else value


def _ms_since(started: float) -> float:
    return (time.perf_counter() - started) * 1000
