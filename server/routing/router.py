"""The Router seam: given a validated request and a profile, which models may serve it,
in the order to try them, and the decision to report.

The handlers ask a `Router` and never look inside a profile; a new routing policy is a
new class with a `route` method, passed to the Gateway. `OrderedProfiles` is the first
policy: each profile is a fixed list of models in the config.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from gateway.v1 import router_service_pb2 as router_pb

from server.core.config import RoutingConfig
from server.core.generation import GenerationRequest


@dataclass(frozen=True)
class Route:
    """A routing decision before the call: the profile and the models to try, in order."""

    profile: str
    models: tuple[str, ...]

    def decision(self, served_model: str) -> router_pb.RouteDecision:
        """What the caller is told, once `served_model` has answered."""
        if served_model == self.models[0]:
            reason = f"first choice of the {self.profile} profile"
        else:
            reason = f"fallback: preferred models of the {self.profile} profile failed"
        return router_pb.RouteDecision(profile=self.profile, model=served_model, reason=reason)


class Router(Protocol):
    def route(self, request: GenerationRequest, profile: str) -> Route: ...


class OrderedProfiles:
    """Each profile lists its models in order of preference; the first that answers
    serves, whatever the prompt."""

    def __init__(self, routing: RoutingConfig) -> None:
        self._profiles = {name: tuple(models) for name, models in routing.profiles.items()}

    def route(self, request: GenerationRequest, profile: str) -> Route:
        return Route(profile, self._profiles[profile])  # type: ignore[index]
