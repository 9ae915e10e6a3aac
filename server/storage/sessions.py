"""Admin sign-in state: the sessions of signed-in users (by the SHA-256 of the secret
their cookie holds; revocable) and the sign-ins under way (state, nonce and PKCE
verifier, taken once)."""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass

from server.storage.db import Database, Executor

# Seconds a sign-in may take between the redirect to the provider and its callback.
LOGIN_TTL_S = 600.0


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Session:
    digest: str
    user_id: str
    role: str
    created_at: float
    expires_at: float


@dataclass(frozen=True, slots=True)
class Login:
    nonce: str
    verifier: str


class SessionStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def open(
        self, ex: Executor, user_id: str, role: str, ttl_s: float
    ) -> tuple[str, Session]:
        """A new session; returns the secret for the cookie (kept only as a digest)."""
        secret = secrets.token_urlsafe(32)
        now = time.time()
        session = Session(_digest(secret), user_id, role, now, now + ttl_s)
        await ex.execute(
            "INSERT INTO admin_sessions (digest, user_id, role, created_at, expires_at) "
            "VALUES (?, ?, ?, ?, ?)",
            session.digest, user_id, role, session.created_at, session.expires_at,
        )  # fmt: skip
        return secret, session

    async def live(self, secret: str) -> Session | None:
        """The session of a cookie's secret while it is neither revoked nor expired."""
        if not secret:
            return None
        row = await self.db.fetchrow(
            "SELECT digest, user_id, role, created_at, expires_at FROM admin_sessions "
            "WHERE digest = ? AND revoked_at IS NULL AND expires_at > ?",
            _digest(secret), time.time(),
        )  # fmt: skip
        return None if row is None else Session(**row)

    async def revoke(self, ex: Executor, digest: str) -> None:
        await ex.execute(
            "UPDATE admin_sessions SET revoked_at = ? WHERE digest = ? AND revoked_at IS NULL",
            time.time(), digest,
        )  # fmt: skip

    async def revoke_user(self, ex: Executor, user_id: str) -> int:
        """Revokes every live session of a user; returns how many there were."""
        rows = await ex.fetch(
            "SELECT digest FROM admin_sessions WHERE user_id = ? AND revoked_at IS NULL "
            "AND expires_at > ?",
            user_id, time.time(),
        )  # fmt: skip
        await ex.execute(
            "UPDATE admin_sessions SET revoked_at = ? WHERE user_id = ? AND revoked_at IS NULL",
            time.time(), user_id,
        )  # fmt: skip
        return len(rows)

    async def begin(self, nonce: str, verifier: str) -> str:
        """Records a sign-in under way; returns its state (kept only as a digest)."""
        state = secrets.token_urlsafe(24)
        now = time.time()
        await self.db.execute("DELETE FROM oidc_logins WHERE created_at < ?", now - LOGIN_TTL_S)
        await self.db.execute(
            "INSERT INTO oidc_logins (state, nonce, verifier, created_at) VALUES (?, ?, ?, ?)",
            _digest(state), nonce, verifier, now,
        )  # fmt: skip
        return state

    async def take(self, state: str) -> Login | None:
        """The sign-in of `state`, once: a replayed or stale state finds nothing."""
        async with self.db.transaction() as tx:
            rows = await tx.fetch(
                "SELECT nonce, verifier, created_at FROM oidc_logins WHERE state = ?",
                _digest(state),
            )
            await tx.execute("DELETE FROM oidc_logins WHERE state = ?", _digest(state))
        if not rows or rows[0]["created_at"] < time.time() - LOGIN_TTL_S:
            return None
        return Login(rows[0]["nonce"], rows[0]["verifier"])
