"""The audit log's store over a real SQLite database: each event chained to the one
before by the SHA-256 of its canonical JSON (computed here independently), the filters
(an action as a prefix, LIKE's wildcards taken literally, a time window closed at its
start and open at its end), pages after a seq, a hash's seq, and verify walking the
chain in batches and naming the first event that does not fit, and why."""

from __future__ import annotations

import hashlib
import json

import pytest

from server.storage import Store
from server.storage.audit import GENESIS, AuditFilter, canonical

ACTIONS = ["org.create", "team.create", "team.update", "te%m.odd", "key.create", "org.update"]


async def fill(store: Store) -> list:
    written = []
    for i, action in enumerate(ACTIONS):
        async with store.audit.change() as tx:
            written.append(await store.audit.append(
                tx, ts=100.0 + i, actor=f"key:{'a' if i % 2 else 'b'}",
                actor_address=f"ipv4:10.0.0.{i}:1", action=action, target=f"t{i % 3}",
                before=None if i == 0 else {"n": i - 1, "é": "ü"},
                after=None if i == 3 else {"n": i, "list": [1, 2]}, request_id=f"r{i}",
            ))  # fmt: skip
    return written


def sha(fields: dict) -> str:
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_canonical_json() -> None:
    assert (
        canonical({"b": [1, {"d": 2, "c": "é"}], "a": None}) == '{"a":null,"b":[1,{"c":"é","d":2}]}'
    )
    assert GENESIS == "0" * 64


async def test_events_are_chained_by_the_hash_of_their_canonical_json(store: Store) -> None:
    written = await fill(store)
    assert [e.seq for e in written] == [1, 2, 3, 4, 5, 6]
    first, second = written[0], written[1]
    assert first.prev_hash == GENESIS
    assert (first.before, first.after) == (None, '{"list":[1,2],"n":0}')
    assert second.before == '{"n":0,"é":"ü"}' and written[3].after is None
    fields = {
        "seq": 2, "ts": 101.0, "actor": "key:a", "actor_address": "ipv4:10.0.0.1:1",
        "action": "team.create", "target": "t1", "before": second.before,
        "after": second.after, "request_id": "r1", "prev_hash": first.hash,
    }  # fmt: skip
    assert second.hash == sha(fields) == second.chained()
    for before, after in zip(written, written[1:], strict=False):
        assert after.prev_hash == before.hash and after.chained() == after.hash
    read = await store.audit.page(AuditFilter(), 0, 100)
    assert read == written
    assert await store.audit.seq_of(written[4].hash) == 5
    assert await store.audit.seq_of("f" * 64) is None
    assert await store.audit.verify() == (6, None, "")
    assert await store.audit.verify(batch=4) == (6, None, "")
    assert await store.audit.verify(batch=1) == (6, None, "")


async def test_filters_and_pages(store: Store) -> None:
    written = await fill(store)

    async def seqs(match: AuditFilter, after: int = 0, limit: int = 100) -> list[int]:
        return [e.seq for e in await store.audit.page(match, after, limit)]

    assert await seqs(AuditFilter(action="team.")) == [2, 3]
    assert await seqs(AuditFilter(action="te%m")) == [4]  # no wildcard: the text itself
    assert await seqs(AuditFilter(action="org.create")) == [1]
    assert await seqs(AuditFilter(actor="key:a")) == [2, 4, 6]
    assert await seqs(AuditFilter(target="t0")) == [1, 4]
    assert await seqs(AuditFilter(actor="key:b", target="t2")) == [3]
    assert await seqs(AuditFilter(start=101.0, end=103.0)) == [2, 3]
    assert await seqs(AuditFilter(start=104.0)) == [5, 6]
    assert await seqs(AuditFilter(end=100.5)) == [1]
    assert await seqs(AuditFilter(), after=2, limit=3) == [3, 4, 5]
    assert await seqs(AuditFilter(action="team.", actor="key:b"), after=0) == [3]
    assert await seqs(AuditFilter(), after=6) == []
    where, args = AuditFilter(actor="x", action="ab", target="t", start=1.0, end=2.0).where()
    assert where == ["actor = ?", "target = ?", "substr(action, 1, ?) = ?", "ts >= ?", "ts < ?"]
    assert args == ["x", "t", 2, "ab", 1.0, 2.0]
    assert AuditFilter().where() == ([], [])
    assert written[0].actor_address == "ipv4:10.0.0.0:1"


@pytest.mark.parametrize(
    ("sql", "checked", "seq", "why"),
    [
        ("UPDATE audit_events SET after = '{}' WHERE seq = 3", 2, 3,
         "its content does not match its hash"),
        ("UPDATE audit_events SET prev_hash = hash WHERE seq = 4", 3, 4,
         "its prev_hash is not the previous event's hash"),
        ("DELETE FROM audit_events WHERE seq = 2", 1, 3, "event 2 is missing"),
        ("DELETE FROM audit_events WHERE seq = 1", 0, 2, "event 1 is missing"),
    ],
)  # fmt: skip
async def test_verify_names_the_first_event_that_does_not_fit(
    store: Store, sql, checked, seq, why
) -> None:
    await fill(store)
    await store.db.execute(sql)
    for batch in (1000, 2, 1):
        checked, event, reason = await store.audit.verify(batch=batch)
        assert (checked, event.seq if event else None, reason) == (checked, seq, why)
