"""Builds a provider from its config entry; one place knows every adapter kind."""

from __future__ import annotations

from pydantic import ValidationError

from server.base.config import ConfigError, ProviderConfig
from server.base.generation import Provider
from server.providers.anthropic import AnthropicParams, AnthropicProvider
from server.providers.azure_openai import AzureOpenAIParams, AzureOpenAIProvider
from server.providers.bedrock import BedrockParams, BedrockProvider
from server.providers.gemini import GeminiParams, GeminiProvider
from server.providers.openai import OpenAIParams, OpenAIProvider
from server.providers.simulated import SimulatedParams, SimulatedProvider
from server.providers.tgi import TgiParams, TgiProvider
from server.providers.vertex import (
    VertexAnthropicParams,
    VertexAnthropicProvider,
    VertexGeminiParams,
    VertexGeminiProvider,
    publisher,
)


def build(config: ProviderConfig, where: str) -> Provider:
    """Builds the provider; a bad params entry raises ConfigError naming `where`."""
    try:
        if config.adapter == "simulated":
            return SimulatedProvider(config.id, SimulatedParams.model_validate(config.params))
        if config.adapter == "openai":
            return OpenAIProvider(config.id, OpenAIParams.model_validate(config.params), where)
        if config.adapter == "anthropic":
            return AnthropicProvider(
                config.id, AnthropicParams.model_validate(config.params), where
            )
        if config.adapter == "tgi":
            return TgiProvider(config.id, TgiParams.model_validate(config.params), where)
        if config.adapter == "azure_openai":
            params = AzureOpenAIParams.model_validate(config.params)
            return AzureOpenAIProvider(config.id, params, where)
        if config.adapter == "gemini":
            return GeminiProvider(config.id, GeminiParams.model_validate(config.params), where)
        if config.adapter == "bedrock":
            return BedrockProvider(config.id, BedrockParams.model_validate(config.params), where)
        if config.adapter == "vertex" and publisher(config.params) == "anthropic":
            anthropic = VertexAnthropicParams.model_validate(config.params)
            return VertexAnthropicProvider(config.id, anthropic, where)
        if config.adapter == "vertex":
            google = VertexGeminiParams.model_validate(config.params)
            return VertexGeminiProvider(config.id, google, where)
    except ValidationError as exc:
        err = exc.errors()[0]
        path = ".".join(str(p) for p in err["loc"])
        message = err["msg"].removeprefix("Value error, ")
        raise ConfigError(f"{where}.params.{path}: {message}") from None
    raise ConfigError(f"{where}.adapter: {config.adapter!r} is not available yet")
