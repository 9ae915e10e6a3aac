"""The live catalog: models with their provider instances, deployments and routing."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from server.application.pipeline.breaker import Breaker, State
from server.base.config import Config, DeploymentConfig, ModelConfig, ProviderConfig
from server.base.errors import ModelNotFound, NotFound
from server.base.generation import Provider, RetryPolicy

log = logging.getLogger(__name__)

# Model names of clients that talk to one endpoint and name no model (Hugging Face's
# InferenceClient given a URL sends `dummy`): served by `default_model` when set.
PLACEHOLDERS = ("dummy", "tgi")

# Builds the adapter of one provider's config; the second argument names the config's
# place for errors (models[0].providers[1]).
ProviderBuilder = Callable[[ProviderConfig, str], Provider]


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
    def enabled(self) -> bool:
        return self.config.enabled

    @property
    def observed_ttft_ms(self) -> float | None:
        return self.ttft_ms.value

    @property
    def retry_policy(self) -> RetryPolicy:
        """Attempts on this provider before failing over."""
        return self.provider.retry_policy

    @property
    def capabilities(self) -> frozenset[str]:
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


def spread(upstreams: Sequence[Upstream], rng: random.Random | None = None) -> list[Upstream]:
    """The upstreams of each model (the models kept in their order) with its weighted
    providers first, in a random order where each comes first in proportion to its
    weight (sort keys u**(1/w): Efraimidis and Spirakis' weighted sampling)."""
    if all(u.config.weight is None for u in upstreams):
        return list(upstreams)
    draw = (rng or random).random
    ordered: list[Upstream] = []
    start = 0
    for end in range(1, len(upstreams) + 1):
        if end < len(upstreams) and upstreams[end].model.id == upstreams[start].model.id:
            continue
        group = upstreams[start:end]
        weighted = {u.id: draw() ** (1 / u.config.weight) for u in group if u.config.weight}
        ordered += sorted((u for u in group if u.id in weighted), key=lambda u: -weighted[u.id])
        ordered += [u for u in group if u.id not in weighted]
        start = end
    return ordered


class Catalog:
    """The models of one config with their providers' adapters and breakers."""

    def __init__(self, config: Config, build: ProviderBuilder) -> None:
        self.config = config
        self.upstreams: dict[str, list[Upstream]] = {}
        for i, model in enumerate(config.models):
            self.upstreams[model.id] = [
                Upstream(
                    p,
                    build(p, f"models[{i}].providers[{j}]"),
                    model,
                    Breaker(p.breaker.failure_threshold, p.breaker.cooldown_s),
                )
                for j, p in enumerate(model.providers)
            ]
            if model.price is None:
                log.warning("model %s has no price: its costs will be reported absent", model.id)
        self.deployments = {d.id: d for d in config.deployments}
        self._named = {name: m for m in config.models for name in (m.id, *m.aliases)}
        if config.default_model is not None:
            default = self._named[config.default_model]
            for name in PLACEHOLDERS:
                self._named.setdefault(name, default)

    @property
    def models(self) -> list[ModelConfig]:
        return self.config.models

    def providers(self, model_id: str) -> list[Upstream]:
        return self.upstreams[model_id]

    def find(self, provider_id: str) -> Upstream | None:
        """The upstream of a provider id (ids are unique across models)."""
        for upstreams in self.upstreams.values():
            for upstream in upstreams:
                if upstream.id == provider_id:
                    return upstream
        return None

    def model(self, name: str) -> ModelConfig:
        """The model of an id or alias; ModelNotFound when there is none."""
        model = self._named.get(name)
        if model is None:
            raise ModelNotFound(f"model {name!r} does not exist", {"model": name})
        return model

    def is_profile(self, name: str) -> bool:
        """Whether `name`, asked for as a model, names a routing profile instead."""
        return name in self.config.routing.profiles and name not in self._named

    def deployment(self, deployment_id: str) -> DeploymentConfig:
        deployment = self.deployments.get(deployment_id)
        if deployment is None:
            raise NotFound(
                f"deployment {deployment_id!r} does not exist", {"deployment": deployment_id}
            )
        return deployment

    async def aclose(self) -> None:
        await asyncio.gather(*(u.provider.aclose() for ups in self.upstreams.values() for u in ups))

    def close_soon(self) -> None:
        """Closes the providers in the background (a catalog that will not be used)."""
        try:
            task = asyncio.get_running_loop().create_task(self.aclose())
        except RuntimeError:  # no loop runs: nothing was opened yet either
            return
        _closing.add(task)
        task.add_done_callback(_closing.discard)


_closing: set[asyncio.Task[None]] = set()
