"""Signed hand-shake sessions: accepted by any holder of the secret, for the key that
opened them, until they expire; nothing else is accepted."""

from __future__ import annotations

import base64
import time

import orjson
import pytest

from http_facade.mcp_sessions import SECRET_VARIABLE, Sessions, shared_secret

SECRET = b"s" * 32


def test_a_session_continues_anywhere_the_secret_is() -> None:
    opened = Sessions(SECRET, 60).open("key-a", "2025-06-18")
    assert Sessions(SECRET, 60).version(opened, "key-a") == "2025-06-18"
    assert Sessions(b"t" * 32, 60).version(opened, "key-a") is None


def test_only_for_its_key_and_until_it_expires() -> None:
    sessions = Sessions(SECRET, 60)
    now = time.time()
    opened = sessions.open("key-a", "2025-11-25", now=now)
    assert sessions.version(opened, "key-b") is None
    assert sessions.version(opened, "key-a", now=now + 59) == "2025-11-25"
    assert sessions.version(opened, "key-a", now=now + 61) is None
    assert sessions.open("key-a", "2025-11-25") != sessions.open("key-a", "2025-11-25")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _forge(payload: dict, signature: bytes = b"x" * 16) -> str:
    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    return f"{b64(orjson.dumps(payload))}.{b64(signature)}"


@pytest.mark.parametrize(
    "session",
    [
        "",
        "no-dot",
        ".",
        "a.b",
        "!!!.???",
        "x" * 600 + "." + "y",
        _forge({"v": "2025-11-25", "k": "0" * 16, "e": 2**40, "n": "0"}),
    ],
)
def test_what_is_not_a_session(session) -> None:
    assert Sessions(SECRET, 60).version(session, "key-a") is None


def test_a_tampered_payload_or_signature() -> None:
    sessions = Sessions(SECRET, 60)
    opened = sessions.open("key-a", "2025-11-25")
    body, signature = opened.split(".")
    payload = orjson.loads(_unb64(body))
    payload["v"] = "2024-11-05"
    tampered = _forge(payload, _unb64(signature))
    assert sessions.version(tampered, "key-a") is None
    flipped = signature[:-1] + ("A" if signature[-1] != "A" else "B")
    assert sessions.version(f"{body}.{flipped}", "key-a") is None


def test_fields_of_the_wrong_kind_are_refused() -> None:
    import hashlib
    import hmac

    owner = hashlib.sha256(b"key-a").hexdigest()[:16]
    for payload in (
        [1, 2],
        {"v": "2025-11-25", "k": owner, "e": "later", "n": "0"},
        {"v": 7, "k": owner, "e": 2**40, "n": "0"},
        {"v": "2025-11-25", "k": owner, "e": 1, "n": "0"},
    ):
        raw = orjson.dumps(payload)
        signature = hmac.new(SECRET, raw, hashlib.sha256).digest()[:16]
        assert Sessions(SECRET, 60).version(_forge(payload, signature), "key-a") is None
    good = {"v": "2025-11-25", "k": owner, "e": 2**40, "n": "0"}
    signature = hmac.new(SECRET, orjson.dumps(good), hashlib.sha256).digest()[:16]
    assert Sessions(SECRET, 60).version(_forge(good, signature), "key-a") == "2025-11-25"


def test_the_shared_secret(monkeypatch) -> None:
    monkeypatch.setenv("GW_TEST_SIGNING", "from the config, long enough to sign")
    assert shared_secret("GW_TEST_SIGNING") == b"from the config, long enough to sign"
    monkeypatch.setenv(SECRET_VARIABLE, "from the supervisor")
    assert shared_secret(None) == b"from the supervisor"
    monkeypatch.delenv(SECRET_VARIABLE)
    made = shared_secret(None)
    assert len(made) == 32 and made != shared_secret(None)


def test_a_session_ends_exactly_at_its_expiry() -> None:
    sessions = Sessions(SECRET, 100)
    opened = sessions.open("key-a", "2025-11-25", now=1000.0)
    assert sessions.version(opened, "key-a", now=1099.0) == "2025-11-25"
    assert sessions.version(opened, "key-a", now=1100.0) is None
    # Opened long ago: over now, whatever the clock of the one that opened it said.
    assert sessions.version(opened, "key-a") is None


def test_the_longest_session_id_taken_is_512_characters() -> None:
    # (No id of 512 characters can be made: its payload's base64 would be 4k+1 long.)
    sessions = Sessions(SECRET, 100)
    by_length = {}
    for size in range(250, 450):  # the version's length sets the id's
        version = "v" * size
        by_length.setdefault(len(sessions.open("key-a", version)), version)
    for length, taken in ((511, True), (513, False), (553, False)):
        version = by_length[length]
        opened = sessions.open("key-a", version)
        assert len(opened) == length
        assert (sessions.version(opened, "key-a") == version) is taken, length


def test_every_payload_survives_the_unpadded_base64() -> None:
    from http_facade.mcp_sessions import _b64, _unb64

    # Encodings ending in "X" or needing one or two "=" of padding among them.
    for data in (b"\x00\x00\x17", b"\xff", b"\xff\xfe", b"", bytes(range(256))):
        assert _unb64(_b64(data)) == data
        assert "=" not in _b64(data)
