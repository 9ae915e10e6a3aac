"""Who is calling: the key a call was admitted with, its limits and its budget, and what a
call holds against that budget while it runs."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from server.base.config import KeyConfig, KeyKind

# The levels a call is accounted at, from the widest; a key's own level is `key`.
LEVELS = ("org", "team", "member", "key")


def account_of(level: str, level_id: str) -> str:
    """The account a level's budget and limits are counted under: a key's own id (as
    before levels existed), else `<level>:<id>` (a member's id is `<team>/<user>`)."""
    return level_id if level == "key" else f"{level}:{level_id}"


def account_fields(account: str) -> dict[str, str]:
    """The ledger columns whose rows make up an account's spend."""
    level, _, rest = account.partition(":")
    if level == "org" and rest:
        return {"org_id": rest}
    if level == "team" and rest:
        return {"team_id": rest}
    if level == "member" and "/" in rest:
        team, _, user = rest.partition("/")
        return {"team_id": team, "user_id": user}
    return {"key_id": account}


@dataclass(frozen=True, slots=True)
class BudgetSpec:
    # The account (`account_of`): for a key's own budget, the key's id.
    key_id: str
    # The level's name as callers know it (the key's, the team's...).
    key_name: str
    limit_usd: float
    period: str
    level: str = "key"
    # The level's own id (a team's, an organisation's...), for refusals.
    level_id: str = ""
    # The hash tag keeping every account of one call on one Redis Cluster slot.
    slot: str = ""


@dataclass(frozen=True, slots=True)
class Level:
    """One level above a key (its organisation, its team, its owner as a member of the
    team) with that level's budget, rate limits and model allowlist (empty: any)."""

    level: str
    id: str
    name: str
    budget_usd: float | None = None
    budget_period: str = "monthly"
    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None
    models: tuple[str, ...] = ()

    @property
    def account(self) -> str:
        return account_of(self.level, self.id)


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
    # Where the key sits: its team, the team's organisation, its owner as a user (all
    # empty for a key outside any team), the levels above it, widest first, and the
    # models the key itself may use (empty: any).
    team_id: str = ""
    org_id: str = ""
    user_id: str = ""
    levels: tuple[Level, ...] = ()
    models: tuple[str, ...] = ()

    @property
    def limited(self) -> bool:
        return bool(self.requests_per_minute or self.tokens_per_minute)

    @property
    def slot(self) -> str:
        """The Redis hash tag of every account of the key's calls: its organisation's
        when it has one (the accounts of every key of it are reserved together)."""
        return account_of("org", self.org_id) if self.org_id else self.key_id

    @property
    def budget(self) -> BudgetSpec | None:
        """The key's own budget; None when it has none."""
        if self.budget_usd is None:
            return None
        return BudgetSpec(
            self.key_id, self.name, self.budget_usd, self.budget_period, "key", self.key_id,
            self.slot,
        )  # fmt: skip

    @property
    def budgets(self) -> tuple[BudgetSpec, ...]:
        """Every budget a call of this key is reserved against, widest level first."""
        slot = self.slot
        specs = [
            BudgetSpec(lv.account, lv.name, lv.budget_usd, lv.budget_period, lv.level, lv.id, slot)
            for lv in self.levels
            if lv.budget_usd is not None
        ]
        own = self.budget
        return (*specs, own) if own is not None else tuple(specs)

    @property
    def rate_limits(self) -> tuple[tuple[str, str, str, int | None, int | None], ...]:
        """(level, account, name, rpm, tpm) of every level with a rate limit, the key's
        own first (its refusals come with the rate-limit headers callers know)."""
        own = ("key", self.key_id, self.name, self.requests_per_minute, self.tokens_per_minute)
        above = [
            (lv.level, lv.account, lv.name, lv.requests_per_minute, lv.tokens_per_minute)
            for lv in reversed(self.levels)
        ]
        return tuple(r for r in (own, *above) if r[3] or r[4])

    def model_refused_by(self, model_id: str) -> tuple[str, str] | None:
        """The first level (level, name) whose allowlist leaves `model_id` out, the key's
        own last; None when every level allows it. The effective allowlist is the
        intersection of the levels' lists."""
        for lv in self.levels:
            if lv.models and model_id not in lv.models:
                return lv.level, lv.name
        if self.models and model_id not in self.models:
            return "key", self.name
        return None

    @classmethod
    def of_config(cls, key: KeyConfig) -> Principal:
        return cls(
            "cfg-" + key.name, key.name, key.kind, key.owner, key.requests_per_minute,
            key.tokens_per_minute, key.budget_usd, key.budget_period, tuple(key.guardrails),
            key.may_skip_guardrails,
            mcp_tools=tuple(key.mcp_tools),
        )  # fmt: skip
