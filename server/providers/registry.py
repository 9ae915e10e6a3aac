"""Builds a provider from its config entry: the one table of adapter kinds.

An adapter kind is one line of `ADAPTERS`: its name in the config's `adapter`, and how
to build its provider from the entry's id, validated params and the place in the config
it came from (named in errors).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ValidationError

from server.base.config import ConfigError, McpServerConfig, ProviderConfig
from server.base.generation import Provider
from server.base.tools import ToolServer
from server.providers.anthropic import AnthropicParams, AnthropicProvider
from server.providers.azure_openai import AzureOpenAIParams, AzureOpenAIProvider
from server.providers.bedrock import BedrockParams, BedrockProvider
from server.providers.gemini import GeminiParams, GeminiProvider
from server.providers.mcp_http import HttpMcpClient
from server.providers.mcp_stdio import StdioMcpClient
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

Builder = Callable[[str, dict[str, Any], str], Provider]


def _adapter(params: type[BaseModel], make: Callable[..., Provider], where: bool = True) -> Builder:
    """A builder of `make(id, params[, where])`, the params validated by their model."""
    if where:
        return lambda id_, given, at: make(id_, params.model_validate(given), at)
    return lambda id_, given, _: make(id_, params.model_validate(given))


_VERTEX_ANTHROPIC = _adapter(VertexAnthropicParams, VertexAnthropicProvider)
_VERTEX_GEMINI = _adapter(VertexGeminiParams, VertexGeminiProvider)


def _vertex(provider_id: str, given: dict[str, Any], where: str) -> Provider:
    """Vertex AI serves two wire formats, told apart by the model's publisher."""
    build = _VERTEX_ANTHROPIC if publisher(given) == "anthropic" else _VERTEX_GEMINI
    return build(provider_id, given, where)


# Adapter kind -> its builder.
ADAPTERS: dict[str, Builder] = {
    "simulated": _adapter(SimulatedParams, SimulatedProvider, where=False),
    "openai": _adapter(OpenAIParams, OpenAIProvider),
    "anthropic": _adapter(AnthropicParams, AnthropicProvider),
    "tgi": _adapter(TgiParams, TgiProvider),
    "azure_openai": _adapter(AzureOpenAIParams, AzureOpenAIProvider),
    "gemini": _adapter(GeminiParams, GeminiProvider),
    "bedrock": _adapter(BedrockParams, BedrockProvider),
    "vertex": _vertex,
}


def build(config: ProviderConfig, where: str) -> Provider:
    """Builds the provider; a bad adapter or params entry raises ConfigError naming
    `where`."""
    builder = ADAPTERS.get(config.adapter)
    if builder is None:
        known = ", ".join(ADAPTERS)
        raise ConfigError(f"{where}.adapter: {config.adapter!r} is none of {known}")
    try:
        return builder(config.id, config.params, where)
    except ValidationError as exc:
        err = exc.errors()[0]
        path = ".".join(str(p) for p in err["loc"])
        message = err["msg"].removeprefix("Value error, ")
        raise ConfigError(f"{where}.params.{path}: {message}") from None


def build_tool_server(
    config: McpServerConfig,
    max_result_bytes: int,
    after: asyncio.Task[None] | None = None,
    headers: dict[str, str] | None = None,
) -> ToolServer:
    """A client of one MCP server, by its transport. A stdio client replacing another
    starts its child once `after` (the old client's stop) is done; `headers`, an HTTP
    server's own for one request, go to that server only."""
    if config.transport == "stdio":
        return StdioMcpClient(config, max_result_bytes, after)
    return HttpMcpClient(config, max_result_bytes, headers)
