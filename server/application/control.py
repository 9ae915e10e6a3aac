"""Live configuration: reloading the config file (SIGHUP or AdminService.ReloadConfig)
and enabling or disabling providers at run time.

A reload builds a whole new catalog, router and key ring from the file and swaps them
in at once: a call reads them when it starts, so calls in flight finish on what they
started with. Providers whose settings did not change keep their client and circuit
breaker; the clients of those that went away are closed once calls in flight on them
have had their time (`server.request_timeout_s`). A file that does not validate is
refused with the reason and nothing changes.

Providers enabled or disabled through the admin API stay so across reloads (the
operator's word beats the file's) until changed again, and end with the process.

An admin change is recorded before it is made (`reloading`: read and checked, the body
records it, then swapped in), and under `--workers N` relayed to every other worker
after (`everywhere`, server/application/relay.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

from gateway.v1 import admin_service_pb2 as admin_pb

from server.application.pipeline import state
from server.application.pipeline.catalog import Catalog, ProviderBuilder, Upstream
from server.application.pipeline.state import Live, RouterBuilder, Snapshot
from server.application.relay import Alone, Change, Relay
from server.base.config import Config, ConfigError
from server.base.errors import Code, GatewayError, InvalidArgument, NotFound
from server.base.generation import Provider

log = logging.getLogger(__name__)


# Settings read once at start-up: a reload reports their changes and leaves them be.
RESTART_ONLY = ("server", "storage", "ledger", "limits.window_s", "operations.metrics_port")


def _setting(config: Config, path: str) -> object:
    value: object = config
    for part in path.split("."):
        value = getattr(value, part)
    return value


class ReloadRefused(GatewayError):
    """The config file cannot be used; the running config stays."""

    code = Code.FAILED_PRECONDITION
    reason = "CONFIG_INVALID"


@dataclass
class Prepared:
    """A reload read and checked, not yet swapped in."""

    before: Config
    config: Config
    source: str
    fresh: Snapshot
    # What the reload answers, once swapped in.
    answer: admin_pb.ReloadConfigResponse | None = None


class Control:
    """Changes a running gateway: reloads its config, turns providers on and off."""

    def __init__(
        self,
        live: Live,
        providers: ProviderBuilder,
        routers: RouterBuilder,
        source: Callable[[], tuple[Config, str]] | None = None,
        on_reload: Callable[[str], None] = lambda result: None,
    ) -> None:
        self.live = live
        self.providers = providers
        self.routers = routers
        # Reads the config file again (with the command line's overrides); None when
        # the gateway runs on a config that has no file.
        self.source = source
        # Called after each reload attempt with "ok" or "refused" (the metrics).
        self.on_reload = on_reload
        # provider id -> enabled, as the operator set it at run time.
        self.overrides: dict[str, bool] = {}
        self._retired: set[asyncio.Task[None]] = set()
        self._lock = asyncio.Lock()
        # How a change made here reaches the other workers of `--workers N`.
        self.relay: Relay = Alone()

    # -- the work --------------------------------------------------------------------

    def set_enabled(self, provider_id: str, enabled: bool) -> Upstream:
        found = self.find(provider_id)
        self.overrides[provider_id] = enabled
        _set_enabled(found, enabled)
        log.info("provider %s %s at run time", provider_id, "enabled" if enabled else "disabled")
        return found

    def find(self, provider_id: str) -> Upstream:
        """The provider an operator names; InvalidArgument or NotFound."""
        if not provider_id:
            raise InvalidArgument.for_field("provider_id", "is required")
        found = self.live.current.catalog.find(provider_id)
        if found is None:
            raise NotFound(f"provider {provider_id!r} does not exist", {"provider": provider_id})
        return found

    async def everywhere(self, change: Change) -> None:
        """After a change made here: makes it on every other worker, or
        ChangeNotEverywhere."""
        await self.relay.everywhere(change)

    async def apply(self, change: Change) -> None:
        """A change another worker made (`everywhere`), made here too."""
        if change.get("op") == "reload":
            await self.reload()
        else:
            self.set_enabled(str(change.get("provider")), change.get("enabled") is True)

    async def reload(self) -> admin_pb.ReloadConfigResponse:
        """Reads the file and swaps the new config in, or refuses it whole."""
        async with self.reloading() as prepared:
            pass
        assert prepared.answer is not None
        return prepared.answer

    @asynccontextmanager
    async def reloading(self) -> AsyncIterator[Prepared]:
        """A reload in two steps: the file read and checked (ReloadRefused), then,
        once the body returns (it records the change), swapped in; a body that raises
        leaves the running config as it was."""
        async with self._lock:
            try:
                prepared = self._prepare()
            except ReloadRefused as exc:
                log.error("config reload refused: %s", exc.message)
                self.on_reload("refused")
                raise
            try:
                yield prepared
            except BaseException:
                await prepared.fresh.catalog.aclose()
                raise
            prepared.answer = self._swap(prepared)
            self.on_reload("ok")

    def _prepare(self) -> Prepared:
        if self.source is None:
            raise ReloadRefused("this gateway runs on a config with no file to reload", {})
        try:
            config, source = self.source()
            fresh = state.snapshot_of(config, self.providers, self.routers)
        except ConfigError as exc:
            raise ReloadRefused(f"config not reloaded: {exc}", {}) from None
        return Prepared(self.live.current.config, config, source, fresh)

    def _swap(self, prepared: Prepared) -> admin_pb.ReloadConfigResponse:
        config, source, fresh = prepared.config, prepared.source, prepared.fresh
        current = self.live.current
        old, catalog = current.catalog, fresh.catalog
        warnings = [
            f"{section}: changed; takes effect after a restart"
            for section in RESTART_ONLY
            if _setting(config, section) != _setting(current.config, section)
        ]
        kept, fresh_duplicates = _carry_over(old, catalog)
        for upstreams in catalog.upstreams.values():
            for upstream in upstreams:
                if upstream.id in self.overrides:
                    _set_enabled(upstream, self.overrides[upstream.id])
        # The swap: every call that starts from here on sees the new snapshot.
        self.live.current = fresh
        retired = [
            u.provider for ups in old.upstreams.values() for u in ups if id(u.provider) not in kept
        ]
        self._retire(fresh_duplicates, 0.0)
        self._retire(retired, config.server.request_timeout_s)
        count = sum(len(u) for u in catalog.upstreams.values())
        log.info(
            "config reloaded from %s: %d models, %d providers",
            source,
            len(catalog.upstreams),
            count,
        )
        return admin_pb.ReloadConfigResponse(
            source=source, models=len(config.models), providers=count, warnings=warnings
        )

    def _retire(self, providers: list[Provider], after_s: float) -> None:
        if not providers:
            return

        async def close() -> None:
            await asyncio.sleep(after_s)
            await asyncio.gather(*(p.aclose() for p in providers), return_exceptions=True)

        task = asyncio.create_task(close())
        self._retired.add(task)
        task.add_done_callback(self._retired.discard)

    async def aclose(self) -> None:
        """Closes retired providers now (at shutdown nothing is in flight any more)."""
        for task in list(self._retired):
            task.cancel()
        if self._retired:
            await asyncio.gather(*self._retired, return_exceptions=True)


def _set_enabled(upstream: Upstream, enabled: bool) -> None:
    # The config is frozen; the upstream takes a copy with the new flag. Calls in
    # flight keep the Upstream they hold, so nothing they do changes.
    upstream.config = upstream.config.model_copy(update={"enabled": enabled})


def _carry_over(old: Catalog, new: Catalog) -> tuple[set[int], list[Provider]]:
    """Reuses the old client and breaker of each provider whose settings did not change.
    Returns the ids of the providers kept, and the new ones they make unneeded."""
    before = {u.id: u for ups in old.upstreams.values() for u in ups}
    kept: set[int] = set()
    duplicates: list[Provider] = []
    for model_id, upstreams in new.upstreams.items():
        for i, upstream in enumerate(upstreams):
            previous = before.get(upstream.id)
            if (
                previous is None
                or previous.config.model_copy(update={"enabled": upstream.config.enabled})
                != upstream.config
            ):
                continue
            duplicates.append(upstream.provider)
            kept.add(id(previous.provider))
            upstreams[i] = Upstream(
                upstream.config, previous.provider, upstream.model, previous.breaker
            )
        new.upstreams[model_id] = upstreams
    return kept, duplicates
