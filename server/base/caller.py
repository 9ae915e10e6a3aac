"""Who is calling: the key a call was admitted with, its limits and its budget, and what a
call holds against that budget while it runs."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from server.base.config import KeyConfig, KeyKind


@dataclass(frozen=True, slots=True)
class BudgetSpec:
    key_id: str
    key_name: str
    limit_usd: float
    period: str


@dataclass(slots=True)
class Reservation:
    """A call's worst-case cost, held against its key's budget until the call settles."""

    spec: BudgetSpec
    period_start: float
    amount: float
    ticket: str = field(default_factory=lambda: uuid.uuid4().hex)


@dataclass(frozen=True, slots=True)
class Principal:
    key_id: str
    name: str
    kind: KeyKind
    owner: str = ""
    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None
    budget_usd: float | None = None
    budget_period: str = "monthly"
    # The key's own guardrails (ids), and whether it may ask to skip them.
    guardrails: tuple[str, ...] = ()
    may_skip_guardrails: bool = False
    # Globs over the MCP tools the key may list and call; none: no tools.
    mcp_tools: tuple[str, ...] = ()

    @property
    def limited(self) -> bool:
        return bool(self.requests_per_minute or self.tokens_per_minute)

    @property
    def budget(self) -> BudgetSpec | None:
        """The key's budget; None when it has none."""
        if self.budget_usd is None:
            return None
        return BudgetSpec(self.key_id, self.name, self.budget_usd, self.budget_period)

    @classmethod
    def of_config(cls, key: KeyConfig) -> Principal:
        return cls(
            "cfg-" + key.name, key.name, key.kind, key.owner, key.requests_per_minute,
            key.tokens_per_minute, key.budget_usd, key.budget_period, tuple(key.guardrails),
            key.may_skip_guardrails,
            mcp_tools=tuple(key.mcp_tools),
        )  # fmt: skip
