"""What a reload replaces, held as one immutable snapshot behind one reference.

A call reads `Live.current` once, when it starts, and uses that snapshot to its end; a
reload builds a whole new snapshot and swaps the reference. So a call never sees half of
one config and half of another, by construction rather than by care.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from server.accounting.admission import KeyRing
from server.application.pipeline.catalog import Catalog, ProviderBuilder
from server.base.config import Config, ConfigError
from server.guardrails.guard import Guardrails
from server.routing.router import Router
from server.routing.view import CatalogView

RouterBuilder = Callable[[Config, CatalogView], Router]


@dataclass(frozen=True, slots=True)
class Snapshot:
    config: Config
    catalog: Catalog
    router: Router
    keys: KeyRing
    guardrails: Guardrails


def snapshot_of(config: Config, providers: ProviderBuilder, routers: RouterBuilder) -> Snapshot:
    """A snapshot of `config`; ConfigError when it cannot serve (a routing error closes
    the providers already built)."""
    catalog = Catalog(config, providers)
    try:
        router = routers(config, catalog)
    except (OSError, ValueError) as exc:
        catalog.close_soon()
        raise ConfigError(f"routing: {exc}") from None
    except BaseException:
        catalog.close_soon()
        raise
    guardrails = Guardrails(config.guardrails, config.default_guardrails)
    return Snapshot(config, catalog, router, KeyRing(config.keys), guardrails)


class Live:
    """The one reference to the current snapshot."""

    __slots__ = ("current",)

    def __init__(self, snapshot: Snapshot) -> None:
        self.current = snapshot
