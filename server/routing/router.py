"""The Router seam: given a validated request and a profile, which models may serve it,
in the order to try them, and the decision to report.

The handlers ask a `Router` and never look inside a profile; a routing policy is a
class with a `route` method, passed to the Gateway. `OrderedProfiles` tries each
profile's models in the listed order; `server/routing/scored.py` picks, per prompt,
the cheapest model expected to meet the profile's bar.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from gateway.v1 import router_service_pb2 as router_pb

from server.base.config import RoutingConfig
from server.base.generation import GenerationRequest


@dataclass(frozen=True, slots=True)
class Candidate:
    """A model that passed the hard filters, as the decision weighed it."""

    model: str
    estimated_quality: float | None = None
    estimated_cost_usd: float | None = None
    meets_bar: bool = False
    predicted_success: float | None = None


@dataclass(frozen=True, slots=True)
class Skipped:
    """A model of the profile left out, with a reason code and its figures."""

    model: str
    reason: str
    detail: str


@dataclass(frozen=True)
class Route:
    """A routing decision before the call: the models to try, in order, and why."""

    profile: str
    models: tuple[str, ...]
    reason: str = ""
    reason_codes: tuple[str, ...] = ()
    difficulty: float | None = None
    threshold: float | None = None
    scorer: str | None = None
    candidates: tuple[Candidate, ...] = ()
    skipped: tuple[Skipped, ...] = ()
    decision_ms: float = 0.0
    # The profile's target share of calls past the cheapest model, and the share of its
    # recent decisions that went past it (live calibration keeps the two close).
    target_share: float | None = None
    recent_share: float | None = None

    def decision(self, served_model: str, provider: str = "") -> router_pb.RouteDecision:
        """What the caller is told, once `served_model` (on `provider`) has answered."""
        reason, codes = self.reason, list(self.reason_codes)
        if served_model != self.models[0]:
            reason = f"fallback: preferred models of the {self.profile} profile failed"
            codes.append("FALLBACK")
        out = router_pb.RouteDecision(
            profile=self.profile,
            model=served_model,
            reason=reason,
            provider=provider,
            reason_codes=codes,
            decision_ms=round(self.decision_ms, 4),
            candidates=[
                router_pb.RouteCandidate(
                    model=c.model,
                    estimated_quality=c.estimated_quality,
                    estimated_cost_usd=c.estimated_cost_usd,
                    meets_bar=c.meets_bar,
                    predicted_success=c.predicted_success,
                )
                for c in self.candidates
            ],
            skipped=[router_pb.SkippedModel(model=s.model, reason=s.reason, detail=s.detail)
                     for s in self.skipped],
        )  # fmt: skip
        if self.difficulty is not None:
            out.difficulty = round(self.difficulty, 4)
        if self.threshold is not None:
            out.threshold = round(self.threshold, 4)
        if self.scorer is not None:
            out.scorer = self.scorer
        if self.target_share is not None:
            out.target_share = round(self.target_share, 4)
        if self.recent_share is not None:
            out.recent_share = round(self.recent_share, 4)
        return out


class Router(Protocol):
    def route(
        self,
        request: GenerationRequest,
        profile: str,
        budget_usd: float | None = None,
        request_id: str = "",
        tags: Sequence[str] = (),
    ) -> Route:
        """The models to try for `request` under `profile`; `budget_usd` is what the
        caller may still spend, when its key has a budget; `request_id` lets feedback on
        the answer reach the router; `tags` say what kind of traffic it is."""
        ...

    def feedback(self, request_id: str, score: float) -> bool:
        """Feedback on a routed request's answer (1: good enough); False when the router
        does not learn from it or no longer remembers the request."""
        ...

    def shares(self) -> dict[str, tuple[float, float | None]]:
        """Per profile: target and recent share of calls past the cheapest model."""
        ...


class OrderedProfiles:
    """Each profile lists its models in order of preference; the first that answers
    serves, whatever the prompt."""

    def __init__(self, routing: RoutingConfig) -> None:
        self._profiles = {name: tuple(models) for name, models in routing.profiles.items()}

    def route(
        self,
        request: GenerationRequest,
        profile: str,
        budget_usd: float | None = None,
        request_id: str = "",
        tags: Sequence[str] = (),
    ) -> Route:
        models = self._profiles[profile]  # type: ignore[index]
        return Route(
            profile,
            models,
            reason=f"first choice of the {profile} profile",
            reason_codes=("ORDERED_PROFILE",),
        )

    def feedback(self, request_id: str, score: float) -> bool:
        return False

    def shares(self) -> dict[str, tuple[float, float | None]]:
        return {}
