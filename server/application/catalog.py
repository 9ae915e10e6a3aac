"""The live catalog: models with their provider instances, deployments and routing."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from server.application.breaker import Breaker, State
from server.base.config import Config, DeploymentConfig, ModelConfig, Price, ProviderConfig
from server.base.errors import ModelNotFound, NotFound
from server.base.generation import Capability, Provider, RetryPolicy
from server.providers import registry

log = logging.getLogger(__name__)


@dataclass
class MovingAverage:
    """An exponentially weighted moving average; recent samples weigh `alpha`."""

    alpha: float = 0.2
    value: float | None = None

    def observe(self, sample: float) -> None:
        self.value = (
            sample if self.value is None else self.value + self.alpha * (sample - self.value)
        )


@dataclass
class Upstream:
    """One provider serving one model, with its circuit breaker."""

    config: ProviderConfig
    provider: Provider
    model: ModelConfig
    breaker: Breaker = field(default_factory=Breaker)
    # Time to first token of its successful attempts, for routing's tie-break.
    ttft_ms: MovingAverage = field(default_factory=lambda: MovingAverage())

    @property
    def id(self) -> str:
        return self.config.id

    @property
    def price(self) -> Price | None:
        return self.model.price

    @property
    def retry_policy(self) -> RetryPolicy:
        """Attempts on this provider before failing over."""
        return self.provider.retry_policy

    @property
    def capabilities(self) -> frozenset[Capability]:
        """What the provider can do: its config's list when given, else its adapter's."""
        if self.config.capabilities is not None:
            return frozenset(self.config.capabilities)
        return self.provider.capabilities

    @property
    def usable(self) -> bool:
        """Enabled, and its circuit not open (a half-open one may take a probe)."""
        return self.config.enabled and self.breaker.state is not State.OPEN

    @property
    def health(self) -> str:
        """`healthy`, `open`, `half_open` (the circuit breaker's state) or `disabled`."""
        return self.breaker.state.value if self.config.enabled else "disabled"


class Catalog:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.upstreams: dict[str, list[Upstream]] = {}
        for i, model in enumerate(config.models):
            self.upstreams[model.id] = [
                Upstream(
                    p,
                    registry.build(p, f"models[{i}].providers[{j}]"),
                    model,
                    Breaker(p.breaker.failure_threshold, p.breaker.cooldown_s),
                )
                for j, p in enumerate(model.providers)
            ]
            if model.price is None:
                log.warning("model %s has no price: its costs will be reported absent", model.id)
        self.deployments = {d.id: d for d in config.deployments}

    def model(self, model_id: str) -> ModelConfig:
        model = self.config.model(model_id)
        if model is None:
            raise ModelNotFound(f"model {model_id!r} does not exist", {"model": model_id})
        return model

    def deployment(self, deployment_id: str) -> DeploymentConfig:
        deployment = self.deployments.get(deployment_id)
        if deployment is None:
            raise NotFound(
                f"deployment {deployment_id!r} does not exist", {"deployment": deployment_id}
            )
        return deployment

    async def aclose(self) -> None:
        await asyncio.gather(*(u.provider.aclose() for ups in self.upstreams.values() for u in ups))
