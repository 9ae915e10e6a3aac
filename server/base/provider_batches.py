"""What a provider's own batch API reports, as the gateway's batch worker reads it
(server/application/batches/worker.py), whichever API it is (server/providers/
batch_apis.py speaks them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from server.base.generation import TokenCounts


@dataclass(frozen=True, slots=True)
class Result:
    """One line's outcome as the provider reports it."""

    custom_id: str
    status_code: int
    body: dict[str, Any]
    counts: TokenCounts | None


@dataclass(frozen=True, slots=True)
class Polled:
    """Where the provider's batch is: `running`, or ended (`completed`, `expired`,
    `cancelled`, `failed`) with every line it reports on."""

    state: str
    results: list[Result]


class ProviderBatches(Protocol):
    async def submit(self, batch_id: str, endpoint: str, lines: list[tuple[str, Any]]) -> str:
        """Hands the lines over; returns the provider's id of the batch."""
        ...

    async def poll(self, upstream_id: str) -> Polled: ...

    async def cancel(self, upstream_id: str) -> None: ...

    async def aclose(self) -> None: ...
