"""Builds a provider from its config entry; one place knows every adapter kind."""

from __future__ import annotations

from pydantic import ValidationError

from server.config import ConfigError, ProviderConfig
from server.generation import Provider
from server.providers.simulated import SimulatedParams, SimulatedProvider


def build(config: ProviderConfig, where: str) -> Provider:
    """Builds the provider; a bad params entry raises ConfigError naming `where`."""
    try:
        if config.adapter == "simulated":
            return SimulatedProvider(config.id, SimulatedParams.model_validate(config.params))
    except ValidationError as exc:
        err = exc.errors()[0]
        path = ".".join(str(p) for p in err["loc"])
        raise ConfigError(f"{where}.params.{path}: {err['msg']}") from None
    raise ConfigError(f"{where}.adapter: {config.adapter!r} is not available yet")
