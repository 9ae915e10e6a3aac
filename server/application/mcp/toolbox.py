"""The upstream MCP servers of the current config, one client each, and what each last
listed.

A reload (`reconcile`) keeps the client of every server whose settings did not change
and retires the others: a retired client is closed in the background (a stdio child
stopped and reaped), and the client replacing it starts its child only once the old
one is gone. A server's tool list is kept for LIST_TTL_S; a server that fails to list
is left out until it answers again, and reported down.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Protocol

from server.base.config import McpConfig, McpServerConfig
from server.base.throttle import warn_throttled
from server.base.tools import Tool, ToolServer, ToolServerError

log = logging.getLogger(__name__)

# Seconds a server's tool list is used before it is asked again.
LIST_TTL_S = 10.0


class ToolServerBuilder(Protocol):
    """Builds the client of one server: its config, mcp.max_result_bytes, the close of
    the client it replaces (None when it replaces none), and headers of its own for
    one request (an HTTP server's)."""

    def __call__(
        self,
        config: McpServerConfig,
        max_result_bytes: int,
        after: asyncio.Task[None] | None = None,
        headers: dict[str, str] | None = None,
    ) -> ToolServer: ...


@dataclass(slots=True)
class Upstream:
    """One configured server: its client and its last tool list."""

    config: McpServerConfig
    client: ToolServer
    tools: list[Tool] = field(default_factory=list)
    listed_at: float = -1.0
    listing: asyncio.Task[list[Tool]] | None = None

    @property
    def up(self) -> bool:
        return self.client.up

    async def list_tools(self, fresh: bool = False) -> list[Tool]:
        """The server's tools, asked again when the list is older than LIST_TTL_S (or
        `fresh`); one listing at a time, shared by the calls that wait on it.
        ToolServerError when the server cannot list them."""
        if not fresh and time.monotonic() - self.listed_at < LIST_TTL_S:
            return self.tools
        if self.listing is None or self.listing.done():
            self.listing = asyncio.ensure_future(self._list())
        return await asyncio.shield(self.listing)

    async def _list(self) -> list[Tool]:
        try:
            tools = await self.client.list_tools()
        except ToolServerError:
            self.listed_at = -1.0
            raise
        self.tools, self.listed_at = tools, time.monotonic()
        return tools


class Toolbox:
    """The servers of one config at a time, swapped whole by `reconcile`."""

    def __init__(self, build: ToolServerBuilder, config: McpConfig) -> None:
        self._build = build
        self._config: McpConfig | None = None
        self._upstreams: dict[str, Upstream] = {}
        self._retiring: set[asyncio.Task[None]] = set()
        self.reconcile(config)

    def reconcile(self, config: McpConfig) -> None:
        """Serves the servers of `config` from now on, keeping unchanged ones."""
        if config is self._config:
            return
        before = self._upstreams
        same_limit = self._config is not None and (
            self._config.max_result_bytes == config.max_result_bytes
        )
        upstreams: dict[str, Upstream] = {}
        for server in config.servers:
            kept = before.get(server.id)
            if kept is not None and same_limit and kept.config == server:
                upstreams[server.id] = kept
                continue
            stopping = self._retire(kept) if kept is not None else None
            client = self._build(server, config.max_result_bytes, stopping)
            upstreams[server.id] = Upstream(server, client)
        for server_id, old in before.items():
            if server_id not in upstreams:
                self._retire(old)
        self._upstreams, self._config = upstreams, config

    def _retire(self, upstream: Upstream) -> asyncio.Task[None]:
        task = asyncio.ensure_future(upstream.client.aclose())
        self._retiring.add(task)
        task.add_done_callback(self._retiring.discard)
        return task

    def transient(self, config: McpServerConfig, headers: dict[str, str]) -> Upstream:
        """A client of an HTTP server for one request, sending that request's own
        `headers`; close it with `retire`."""
        limit = self._config.max_result_bytes if self._config is not None else 4 * 1024 * 1024
        return Upstream(config, self._build(config, limit, None, headers))

    def retire(self, upstream: Upstream) -> None:
        """Closes a client `transient` made, in the background."""
        self._retire(upstream)

    def upstream(self, server_id: str) -> Upstream | None:
        return self._upstreams.get(server_id)

    def upstreams(self) -> list[Upstream]:
        """Every server, in configuration order."""
        return list(self._upstreams.values())

    async def listed(self, upstream: Upstream) -> list[Tool]:
        """A server's tools; none, logged, when it cannot list them."""
        try:
            return await upstream.list_tools()
        except ToolServerError as exc:
            warn_throttled(log, f"mcp-list-{upstream.config.id}", f"MCP server down: {exc}")
            return []

    def health(self) -> dict[str, bool]:
        """Each server's id and whether its last exchange succeeded."""
        return {server_id: u.up for server_id, u in self._upstreams.items()}

    async def aclose(self) -> None:
        """Closes every client (stopping and reaping stdio children)."""
        for upstream in self._upstreams.values():
            self._retire(upstream)
        self._upstreams = {}
        if self._retiring:
            await asyncio.gather(*list(self._retiring), return_exceptions=True)
