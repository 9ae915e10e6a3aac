"""Organisations, teams, users and memberships: the levels above keys.

An organisation holds teams; a key may belong to one team; a user is a member of a
team (or of an organisation, as its `org_admin` or `viewer`) with a role. Each
organisation, team and membership may carry a budget, rate limits and a model
allowlist, enforced above the key's own (server/accounting). Every row carries a
`version` that grows with each change: the ETag an `If-Match` names.

Reads go through the database; writes take the executor of the transaction they run
in, so a change and its audit event are written together or not at all.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field, fields, replace
from typing import Any

from server.base.caller import Level
from server.base.config import ORG_ROLES, TEAM_ROLES
from server.storage.db import Database, Executor

__all__ = [
    "ORG_ROLES",
    "TEAM_ROLES",
    "GovernanceStore",
    "Limits",
    "Membership",
    "Org",
    "Scope",
    "Team",
    "User",
]

LIMIT_COLUMNS = (
    "budget_usd", "budget_period", "requests_per_minute", "tokens_per_minute", "models",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Limits:
    """A level's budget (USD per period), rate limits and model allowlist (empty: any)."""

    budget_usd: float | None = None
    budget_period: str = "monthly"
    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None
    models: tuple[str, ...] = ()

    def values(self) -> list[Any]:
        return [
            self.budget_usd, self.budget_period, self.requests_per_minute,
            self.tokens_per_minute, "\n".join(self.models),
        ]  # fmt: skip

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Limits:
        return cls(
            row["budget_usd"], row["budget_period"], row["requests_per_minute"],
            row["tokens_per_minute"], tuple(filter(None, (row["models"] or "").split("\n"))),
        )  # fmt: skip

    def as_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["models"] = list(self.models)
        return out


@dataclass(frozen=True, slots=True)
class Org:
    id: str
    name: str
    limits: Limits
    version: int
    created_at: float


@dataclass(frozen=True, slots=True)
class Team:
    id: str
    org_id: str
    name: str
    limits: Limits
    version: int
    created_at: float


@dataclass(frozen=True, slots=True)
class User:
    id: str
    subject: str
    email: str
    created_at: float


@dataclass(frozen=True, slots=True)
class Membership:
    org_id: str
    team_id: str
    user_id: str
    role: str
    source: str
    limits: Limits
    version: int
    created_at: float


@dataclass(frozen=True, slots=True)
class Scope:
    """Where a key sits: its organisation, its owner as a user, and the levels above
    it, widest first."""

    org_id: str = ""
    user_id: str = ""
    levels: tuple[Level, ...] = field(default_factory=tuple)


def _limits_cols() -> str:
    return ", ".join(LIMIT_COLUMNS)


def _marks(n: int) -> str:
    return ", ".join("?" for _ in range(n))


def _org(row: dict[str, Any]) -> Org:
    return Org(row["id"], row["name"], Limits.from_row(row), int(row["version"]), row["created_at"])


def _team(row: dict[str, Any]) -> Team:
    return Team(
        row["id"], row["org_id"], row["name"], Limits.from_row(row), int(row["version"]),
        row["created_at"],
    )  # fmt: skip


def _user(row: dict[str, Any]) -> User:
    return User(row["id"], row["subject"], row["email"], row["created_at"])


def _membership(row: dict[str, Any]) -> Membership:
    return Membership(
        row["org_id"], row["team_id"], row["user_id"], row["role"], row["source"],
        Limits.from_row(row), int(row["version"]), row["created_at"],
    )  # fmt: skip


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:16]}"


class GovernanceStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    # -- organisations -----------------------------------------------------------------

    async def create_org(self, ex: Executor, name: str, limits: Limits) -> Org:
        org = Org(new_id("org"), name, limits, 1, time.time())
        await ex.execute(
            f"INSERT INTO orgs (id, name, {_limits_cols()}, version, created_at) "
            f"VALUES ({_marks(2 + len(LIMIT_COLUMNS) + 2)})",
            org.id, org.name, *limits.values(), org.version, org.created_at,
        )  # fmt: skip
        return org

    async def get_org(self, org_id: str, ex: Executor | None = None) -> Org | None:
        rows = await (ex or self.db).fetch(
            "SELECT * FROM orgs WHERE id = ? OR name = ?", org_id, org_id
        )
        return _org(rows[0]) if rows else None

    async def list_orgs(self) -> list[Org]:
        return [_org(r) for r in await self.db.fetch("SELECT * FROM orgs ORDER BY created_at")]

    async def update_org(self, ex: Executor, org: Org, limits: Limits) -> Org:
        changed = replace(org, limits=limits, version=org.version + 1)
        await ex.execute(
            f"UPDATE orgs SET {', '.join(c + ' = ?' for c in LIMIT_COLUMNS)}, version = ? "
            "WHERE id = ? AND version = ?",
            *limits.values(), changed.version, org.id, org.version,
        )  # fmt: skip
        return changed

    # -- teams -------------------------------------------------------------------------

    async def create_team(self, ex: Executor, org_id: str, name: str, limits: Limits) -> Team:
        team = Team(new_id("team"), org_id, name, limits, 1, time.time())
        await ex.execute(
            f"INSERT INTO teams (id, org_id, name, {_limits_cols()}, version, created_at) "
            f"VALUES ({_marks(3 + len(LIMIT_COLUMNS) + 2)})",
            team.id, org_id, name, *limits.values(), team.version, team.created_at,
        )  # fmt: skip
        return team

    async def get_team(self, team_id: str, ex: Executor | None = None) -> Team | None:
        rows = await (ex or self.db).fetch("SELECT * FROM teams WHERE id = ?", team_id)
        return _team(rows[0]) if rows else None

    async def list_teams(self, org_id: str = "", ex: Executor | None = None) -> list[Team]:
        db = ex or self.db
        if org_id:
            rows = await db.fetch(
                "SELECT * FROM teams WHERE org_id = ? ORDER BY created_at", org_id
            )
        else:
            rows = await db.fetch("SELECT * FROM teams ORDER BY created_at")
        return [_team(r) for r in rows]

    async def update_team(self, ex: Executor, team: Team, name: str, limits: Limits) -> Team:
        changed = replace(team, name=name, limits=limits, version=team.version + 1)
        await ex.execute(
            f"UPDATE teams SET name = ?, {', '.join(c + ' = ?' for c in LIMIT_COLUMNS)}, "
            "version = ? WHERE id = ? AND version = ?",
            name, *limits.values(), changed.version, team.id, team.version,
        )  # fmt: skip
        return changed

    async def delete_team(self, ex: Executor, team_id: str) -> None:
        await ex.execute("DELETE FROM memberships WHERE team_id = ?", team_id)
        await ex.execute("DELETE FROM teams WHERE id = ?", team_id)

    # -- users -------------------------------------------------------------------------

    async def create_user(self, ex: Executor, subject: str, email: str) -> User:
        user = User(new_id("user"), subject, email, time.time())
        await ex.execute(
            "INSERT INTO users (id, subject, email, created_at) VALUES (?, ?, ?, ?)",
            user.id, subject, email, user.created_at,
        )  # fmt: skip
        return user

    async def get_user(self, id_or_email: str, ex: Executor | None = None) -> User | None:
        """A user by id, else by email (the oldest of that email)."""
        if not id_or_email:
            return None
        rows = await (ex or self.db).fetch(
            "SELECT * FROM users WHERE id = ? OR email = ? ORDER BY created_at",
            id_or_email, id_or_email,
        )  # fmt: skip
        exact = [r for r in rows if r["id"] == id_or_email]
        return _user((exact or rows)[0]) if rows else None

    async def user_by_subject(self, subject: str, ex: Executor | None = None) -> User | None:
        rows = await (ex or self.db).fetch("SELECT * FROM users WHERE subject = ?", subject)
        return _user(rows[0]) if rows else None

    async def set_subject(self, ex: Executor, user_id: str, subject: str, email: str) -> None:
        await ex.execute(
            "UPDATE users SET subject = ?, email = ? WHERE id = ?", subject, email, user_id
        )

    async def list_users(self) -> list[User]:
        return [_user(r) for r in await self.db.fetch("SELECT * FROM users ORDER BY created_at")]

    # -- memberships -------------------------------------------------------------------

    async def membership(
        self, org_id: str, team_id: str, user_id: str, ex: Executor | None = None
    ) -> Membership | None:
        rows = await (ex or self.db).fetch(
            "SELECT * FROM memberships WHERE org_id = ? AND team_id = ? AND user_id = ?",
            org_id, team_id, user_id,
        )  # fmt: skip
        return _membership(rows[0]) if rows else None

    async def put_membership(self, ex: Executor, member: Membership) -> None:
        """Creates the membership, or replaces the one of the same org, team and user."""
        await ex.execute(
            "DELETE FROM memberships WHERE org_id = ? AND team_id = ? AND user_id = ?",
            member.org_id, member.team_id, member.user_id,
        )  # fmt: skip
        await ex.execute(
            f"INSERT INTO memberships (org_id, team_id, user_id, role, source, {_limits_cols()}, "
            f"version, created_at) VALUES ({_marks(5 + len(LIMIT_COLUMNS) + 2)})",
            member.org_id, member.team_id, member.user_id, member.role, member.source,
            *member.limits.values(), member.version, member.created_at,
        )  # fmt: skip

    async def remove_membership(self, ex: Executor, member: Membership) -> None:
        await ex.execute(
            "DELETE FROM memberships WHERE org_id = ? AND team_id = ? AND user_id = ?",
            member.org_id, member.team_id, member.user_id,
        )  # fmt: skip

    async def memberships(
        self, *, org_id: str = "", team_id: str = "", user_id: str = "",
        ex: Executor | None = None,
    ) -> list[Membership]:  # fmt: skip
        where, args = [], []
        for column, value in (("org_id", org_id), ("team_id", team_id), ("user_id", user_id)):
            if value:
                where.append(f"{column} = ?")
                args.append(value)
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        rows = await (ex or self.db).fetch(
            f"SELECT * FROM memberships{clause} ORDER BY created_at", *args
        )
        return [_membership(r) for r in rows]

    # -- a key's place -----------------------------------------------------------------

    async def scope(self, team_id: str, owner: str) -> Scope:
        """The levels above a key of `team_id` owned by `owner` (a user's id or email):
        its organisation, its team and, when the owner is a member of the team, that
        membership."""
        team = await self.get_team(team_id)
        if team is None:
            return Scope()
        org = await self.get_org(team.org_id)
        levels = []
        if org is not None:
            levels.append(_level("org", org.id, org.name, org.limits))
        levels.append(_level("team", team.id, team.name, team.limits))
        user = await self.get_user(owner) if owner else None
        if user is not None:
            member = await self.membership(team.org_id, team.id, user.id)
            if member is not None:
                name = user.email or user.id
                levels.append(_level("member", f"{team.id}/{user.id}", name, member.limits))
        return Scope(team.org_id, user.id if user is not None else "", tuple(levels))


def _level(level: str, level_id: str, name: str, limits: Limits) -> Level:
    return Level(
        level, level_id, name, limits.budget_usd, limits.budget_period,
        limits.requests_per_minute, limits.tokens_per_minute, limits.models,
    )  # fmt: skip
