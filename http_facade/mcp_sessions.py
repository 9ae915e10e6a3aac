"""Hand-shake sessions of `/mcp` that any worker or replica accepts: the session id is
the session itself, signed, so nothing is stored and nothing has to be shared but the
secret.

    id = base64url(payload) "." base64url(HMAC-SHA256(secret, payload)[:16])
    payload = {"v": protocol version, "k": hash of the key id, "e": expiry (Unix s),
               "n": a nonce}

A session belongs to the key that opened it: another key presenting it is told the
session does not exist, as is one presenting a session past its expiry or with a
signature that does not match.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
import time

import orjson

# Where a gateway without a configured secret finds the one its workers share (the
# supervisor of `--workers N` sets it before starting them).
SECRET_VARIABLE = "GATEWAY_MCP_SESSION_SECRET"
SIGNATURE_BYTES = 16


def shared_secret(configured_env: str | None) -> bytes:
    """The signing secret: the configured variable's value (checked at start-up: never
    empty or short), else the workers' shared one, else one made now (sessions then
    last as long as this process)."""
    if configured_env:
        return os.environ[configured_env].encode()
    value = os.environ.get(SECRET_VARIABLE, "")
    if value:
        return value.encode()
    return secrets.token_bytes(32)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _owner(key_id: str) -> str:
    return hashlib.sha256(key_id.encode()).hexdigest()[:16]


class Sessions:
    def __init__(self, secret: bytes, ttl_s: float) -> None:
        self._secret = secret
        self.ttl_s = ttl_s

    def _sign(self, payload: bytes) -> bytes:
        return hmac.new(self._secret, payload, hashlib.sha256).digest()[:SIGNATURE_BYTES]

    def open(self, key_id: str, version: str, now: float | None = None) -> str:
        """A new session of `key_id` at protocol `version`."""
        expiry = int((time.time() if now is None else now) + self.ttl_s)
        payload = orjson.dumps(
            {"v": version, "k": _owner(key_id), "e": expiry, "n": secrets.token_hex(8)}
        )
        return f"{_b64(payload)}.{_b64(self._sign(payload))}"

    def version(self, session_id: str, key_id: str, now: float | None = None) -> str | None:
        """The protocol version of a live session of `key_id`; None when the id is not
        one this gateway signed, has expired, or belongs to another key."""
        body, dot, signature = session_id.partition(".")
        if not dot or len(session_id) > 512:
            return None
        try:
            payload, given = _unb64(body), _unb64(signature)
        except ValueError:
            return None
        if _b64(given) != signature:  # one spelling only: its last character's spare bits
            return None
        if not hmac.compare_digest(given, self._sign(payload)):
            return None
        try:
            fields = orjson.loads(payload)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(fields, dict) or fields.get("k") != _owner(key_id):
            return None
        expiry, version = fields.get("e"), fields.get("v")
        if not isinstance(expiry, int) or expiry <= (time.time() if now is None else now):
            return None
        return version if isinstance(version, str) else None
