"""The key store. A key's secret is shown once, at creation; only its SHA-256 digest
and a short readable prefix (for telling keys apart in listings and logs) are kept."""

from __future__ import annotations

import hashlib
import secrets
import time
import uuid
from dataclasses import dataclass, field, replace
from typing import Any

from server.base.errors import NotFound
from server.storage.db import Database, Executor
from server.storage.governance import GovernanceStore, Scope

# Characters of the secret kept readable: `gw-api-` plus four random characters.
PREFIX_RANDOM_CHARS = 4
COLUMNS = (
    "id, prefix, digest, kind, name, owner, requests_per_minute, tokens_per_minute, "
    "budget_usd, budget_period, created_at, expires_at, revoked_at, mcp_tools, team_id, models"
)


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def new_secret(kind: str) -> str:
    return f"gw-{kind}-{secrets.token_urlsafe(32)}"


def prefix_of(secret: str, kind: str) -> str:
    head = f"gw-{kind}-"
    return secret[: len(head) + PREFIX_RANDOM_CHARS] if secret.startswith(head) else secret[:6]


@dataclass(frozen=True, slots=True)
class KeyRecord:
    id: str
    prefix: str
    digest: str
    kind: str
    name: str
    owner: str
    requests_per_minute: int | None
    tokens_per_minute: int | None
    budget_usd: float | None
    budget_period: str
    created_at: float
    expires_at: float | None
    revoked_at: float | None
    # Globs over the MCP tools the key may use (stored one per line).
    mcp_tools: tuple[str, ...] = ()
    # The team the key belongs to (empty: none) and the models it may use (empty: any).
    team_id: str = ""
    models: tuple[str, ...] = ()
    # The levels above the key, read with it (not a column).
    scope: Scope = field(default_factory=Scope)

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None

    def expired(self, now: float | None = None) -> bool:
        return self.expires_at is not None and (now or time.time()) >= self.expires_at

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> KeyRecord:
        values = {k: row[k] for k in COLUMNS.split(", ")}
        for name in ("mcp_tools", "models"):
            values[name] = tuple(filter(None, (values[name] or "").split("\n")))
        return cls(**values)

    def values(self) -> list[Any]:
        """The record as a row, in COLUMNS order."""
        out = [getattr(self, c) for c in COLUMNS.split(", ")]
        out[COLUMNS.split(", ").index("mcp_tools")] = "\n".join(self.mcp_tools)
        out[COLUMNS.split(", ").index("models")] = "\n".join(self.models)
        return out


class KeyStore:
    def __init__(self, db: Database) -> None:
        self.db = db
        self.governance = GovernanceStore(db)

    async def _placed(self, row: dict[str, Any] | None) -> KeyRecord | None:
        """The key of `row` with the levels above it (none outside a team)."""
        if row is None:
            return None
        record = KeyRecord.from_row(row)
        if record.team_id:
            record = replace(
                record, scope=await self.governance.scope(record.team_id, record.owner)
            )
        return record

    async def create(
        self,
        *,
        kind: str,
        name: str,
        owner: str = "",
        requests_per_minute: int | None = None,
        tokens_per_minute: int | None = None,
        budget_usd: float | None = None,
        budget_period: str = "monthly",
        expires_at: float | None = None,
        mcp_tools: tuple[str, ...] = (),
        team_id: str = "",
        models: tuple[str, ...] = (),
        ex: Executor | None = None,
    ) -> tuple[KeyRecord, str]:
        """Creates a key; returns it and its secret, which is not stored anywhere.
        NotFound (naming `team_id`) for a team that does not exist: such a key could
        not be managed (read, rotated or revoked through the admin API)."""
        if team_id and await self.governance.get_team(team_id, ex) is None:
            raise NotFound(f"team_id: team {team_id!r} does not exist",
                           {"team_id": team_id, "field": "team_id"})  # fmt: skip
        secret = new_secret(kind)
        record = KeyRecord(
            id="key_" + uuid.uuid4().hex[:16],
            prefix=prefix_of(secret, kind),
            digest=digest(secret),
            kind=kind,
            name=name,
            owner=owner,
            requests_per_minute=requests_per_minute,
            tokens_per_minute=tokens_per_minute,
            budget_usd=budget_usd,
            budget_period=budget_period,
            created_at=time.time(),
            expires_at=expires_at,
            revoked_at=None,
            mcp_tools=tuple(mcp_tools),
            team_id=team_id,
            models=tuple(models),
        )
        values = record.values()
        marks = ", ".join("?" for _ in values)
        await (ex or self.db).execute(f"INSERT INTO api_keys ({COLUMNS}) VALUES ({marks})", *values)
        return record, secret

    async def by_digest(self, key_digest: str) -> KeyRecord | None:
        row = await self.db.fetchrow(f"SELECT {COLUMNS} FROM api_keys WHERE digest = ?", key_digest)
        return await self._placed(row)

    async def get(self, id_or_name: str, ex: Executor | None = None) -> KeyRecord | None:
        """Finds a key by id, else by name (the newest of that name)."""
        db = ex or self.db
        rows = await db.fetch(f"SELECT {COLUMNS} FROM api_keys WHERE id = ?", id_or_name)
        if not rows:
            rows = await db.fetch(
                f"SELECT {COLUMNS} FROM api_keys WHERE name = ? ORDER BY created_at DESC",
                id_or_name,
            )
        if ex is not None:  # inside a change: the key alone (its levels are read outside)
            return KeyRecord.from_row(rows[0]) if rows else None
        return await self._placed(rows[0] if rows else None)

    async def list(
        self, *, kind: str | None = None, owner: str | None = None, include_revoked: bool = False,
        team_id: str | None = None, ex: Executor | None = None,
    ) -> list[KeyRecord]:  # fmt: skip
        where, args = [], []
        if team_id:
            where.append("team_id = ?")
            args.append(team_id)
        if kind:
            where.append("kind = ?")
            args.append(kind)
        if owner:
            where.append("owner = ?")
            args.append(owner)
        if not include_revoked:
            where.append("revoked_at IS NULL")
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        rows = await (ex or self.db).fetch(
            f"SELECT {COLUMNS} FROM api_keys{clause} ORDER BY created_at", *args
        )
        return [KeyRecord.from_row(r) for r in rows]

    async def update(self, ex: Executor, key: KeyRecord) -> None:
        """Writes a key's limits, budget, allowlists, owner and team as `key` holds them."""
        await ex.execute(
            "UPDATE api_keys SET requests_per_minute = ?, tokens_per_minute = ?, "
            "budget_usd = ?, budget_period = ?, owner = ?, team_id = ?, models = ?, "
            "mcp_tools = ? WHERE id = ?",
            key.requests_per_minute, key.tokens_per_minute, key.budget_usd, key.budget_period,
            key.owner, key.team_id, "\n".join(key.models), "\n".join(key.mcp_tools), key.id,
        )  # fmt: skip

    async def rotate(self, ex: Executor, key: KeyRecord) -> tuple[KeyRecord, str]:
        """Gives a key a new secret; returns the key and the secret (not stored)."""
        secret = new_secret(key.kind)
        rotated = replace(key, prefix=prefix_of(secret, key.kind), digest=digest(secret))
        await ex.execute(
            "UPDATE api_keys SET prefix = ?, digest = ? WHERE id = ?",
            rotated.prefix, rotated.digest, key.id,
        )  # fmt: skip
        return rotated, secret

    async def revoke(self, key_id: str, ex: Executor | None = None) -> KeyRecord | None:
        """Revokes a key (idempotent: the first revocation time is kept)."""
        await (ex or self.db).execute(
            "UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
            time.time(),
            key_id,
        )
        return await self.get(key_id, ex)
