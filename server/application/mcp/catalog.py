"""The resources, resource templates and prompts of the gateway's MCP servers, for a key.

Each is aggregated as tools are: a prompt is listed as `{server}__{prompt}`, a resource
or template under the name `{server}__{name}` with its URI behind `gateway://{server}/`
(`gateway://docs/file:///a.md`), so the name or URI says which server it comes from.
The key's MCP grant (`mcp_tools`, globs over those names) covers them as it covers
tools; deny by default. A `resources/read` or `prompts/get` is routed to the owning
server under its own URI or name, after the same refusal for what does not exist and
what is not granted; it counts against the key's rate limit (no price: servers price
tool calls) and writes one ledger row (`ReadResource`, `GetPrompt`).
"""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any, NoReturn

from server.application.mcp.grants import granted
from server.application.mcp.toolbox import Upstream
from server.application.mcp.tools import LedgerRow, Tools
from server.base.caller import Principal
from server.base.errors import DeadlineExceeded, GatewayError, ToolNotFound, UpstreamError
from server.base.record import new_ticket
from server.base.tools import ToolAnswer, ToolServerError, ToolTimeout

SCHEME = "gateway://"
# What each kind is listed by: its method, the result's list and each entry's key.
KINDS = {
    "resources": ("resources/list", "resources", "uri"),
    "resourceTemplates": ("resources/templates/list", "resourceTemplates", "uriTemplate"),
    "prompts": ("prompts/list", "prompts", "name"),
}


def _missing(what: str) -> ToolNotFound:
    return ToolNotFound(f"{what[:200]!r} not found", {"name": what[:200]})


def exposed_uri(server: str, uri: str) -> str:
    return f"{SCHEME}{server}/{uri}"


def owner_of(uri: str) -> tuple[str, str] | None:
    """(server, its own URI) of an exposed URI; None for any other."""
    if not uri.startswith(SCHEME):
        return None
    server, _, own = uri[len(SCHEME) :].partition("/")
    return (server, own) if server and own else None


def template_matches(template: str, uri: str) -> bool:
    """Whether `uri` is one of RFC 6570 `template`'s (simple and `{+reserved}` forms)."""
    pattern, at = "", 0
    for found in re.finditer(r"\{([+#]?)[^}]*\}", template):
        pattern += re.escape(template[at : found.start()])
        pattern += ".+" if found.group(1) else "[^/]+"
        at = found.end()
    return re.fullmatch(pattern + re.escape(template[at:]), uri) is not None


class Catalog:
    """Lists and serves resources and prompts through `tools` (its servers, its
    accounts and its ledger)."""

    def __init__(self, tools: Tools) -> None:
        self.tools = tools

    async def listed(self, principal: Principal, kind: str, server: str | None) -> list[Any]:
        """The entries of `kind` (a key of KINDS) `principal` is granted, each server's
        under its exposed name and URI; a server that cannot list is left out."""
        if not principal.mcp_tools:
            return []
        upstreams = self.tools.servers(server)
        lists = await asyncio.gather(*(self._of(u, kind) for u in upstreams))
        out: list[Any] = []
        for upstream, entries in zip(upstreams, lists, strict=True):
            out.extend(
                e for e in (_exposed(upstream.config.id, kind, e) for e in entries)
                if granted(principal.mcp_tools, e["name"])
            )  # fmt: skip
        return out

    async def _of(self, upstream: Upstream, kind: str) -> list[dict[str, Any]]:
        try:
            return await upstream.client.list_all(*KINDS[kind])
        except ToolServerError:
            return []

    async def read_resource(
        self, principal: Principal, uri: str, *, request_id: str,
        response_metadata: dict[str, str], server: str | None = None,
    ) -> ToolAnswer:  # fmt: skip
        """Reads the exposed `uri` on its server; ToolNotFound alike for what does not
        exist and what the key is not granted."""
        owned = owner_of(uri)
        upstream = self.tools.upstream(owned[0]) if owned else None
        row = LedgerRow(principal, request_id, time.time(), time.perf_counter(),
                   owned[0] if upstream and owned else "", uri[:64], "", "ReadResource")  # fmt: skip
        if owned is None or upstream is None or server not in (None, owned[0]):
            return self._refuse(row, uri)
        own = owned[1]
        resources = await self.listed(principal, "resources", owned[0])
        templates = await self.listed(principal, "resourceTemplates", owned[0])
        if not any(r["uri"] == uri for r in resources) and not any(
            template_matches(t["uriTemplate"], uri) for t in templates
        ):
            return self._refuse(row, uri)
        return await self._run(row, upstream, "resources/read", {"uri": own}, response_metadata)

    async def get_prompt(
        self, principal: Principal, name: str, arguments: dict[str, Any], *,
        request_id: str, response_metadata: dict[str, str], server: str | None = None,
    ) -> ToolAnswer:  # fmt: skip
        """Gets the exposed prompt `name` from its server; ToolNotFound alike for one
        that does not exist and one the key is not granted."""
        server_id, _, own = name.partition("__")
        upstream = self.tools.upstream(server_id)
        row = LedgerRow(principal, request_id, time.time(), time.perf_counter(),
                   server_id if upstream else "", own[:64], "", "GetPrompt")  # fmt: skip
        if upstream is None or server not in (None, server_id):
            return self._refuse(row, name)
        prompts = await self.listed(principal, "prompts", server_id)
        if not any(p["name"] == name for p in prompts):
            return self._refuse(row, name)
        params = {"name": own, "arguments": arguments}
        return await self._run(row, upstream, "prompts/get", params, response_metadata)

    def _refuse(self, row: LedgerRow, what: str) -> NoReturn:
        refused = _missing(what)
        self.tools.write(row.ended("denied", 0.0, 0, refused))
        raise refused

    async def _run(
        self, row: LedgerRow, upstream: Upstream, method: str, params: dict[str, Any],
        response_metadata: dict[str, str],
    ) -> ToolAnswer:  # fmt: skip
        accounts = self.tools.accounts
        try:
            held = await accounts.hold(row.principal, new_ticket(), response_metadata, 0.0)
        except GatewayError as refused:
            self.tools.write(row.ended("denied", 0.0, 0, refused))
            raise
        meta = {"server": upstream.config.id}
        outcome, size = "upstream_error", 0
        error: BaseException | None = None
        try:
            answer = await upstream.client.ask(method, params)
            outcome, size = "ok", answer.size
            return answer
        except ToolTimeout as exc:
            outcome = exc.outcome
            error = DeadlineExceeded(str(exc), {**meta, "outcome": exc.outcome})
            raise error from None
        except ToolServerError as exc:
            outcome = exc.outcome
            error = UpstreamError(str(exc), {**meta, "outcome": exc.outcome})
            raise error from None
        except BaseException as exc:  # the caller went away (or a bug)
            error = exc
            if isinstance(exc, asyncio.CancelledError):
                outcome = "cancelled"
            raise
        finally:
            accounts.release(held, 0.0)
            self.tools.write(row.ended(outcome, 0.0, size, error))


def _exposed(server: str, kind: str, entry: dict[str, Any]) -> dict[str, Any]:
    """An entry under its exposed name (and URI)."""
    out = {**entry, "name": f"{server}__{entry.get('name') or ''}"}
    if kind == "resources":
        out["uri"] = exposed_uri(server, entry["uri"])
    elif kind == "resourceTemplates":
        out["uriTemplate"] = exposed_uri(server, entry["uriTemplate"])
    return out
