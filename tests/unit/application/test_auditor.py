"""The Auditor over a real SQLite store: an event that changes nothing (a sign-in, a
reload) is recorded whole, and one the log cannot write (here, a value JSON cannot
hold) is refused with the action it was, logged by action and kind of error, and leaves
no event behind; the same for a change and its event."""

from __future__ import annotations

import logging

import pytest

from server.application.governance.audit import Actor, Auditor
from server.base.call import PEER, Call
from server.base.errors import AuditUnavailable
from server.storage import Store
from server.storage.audit import AuditFilter

UNWRITABLE = {"not json": object()}


def call() -> Call:
    return Call({PEER: "ipv4:10.0.0.9:5000"}, request_id="req-7")


async def logged(store: Store) -> list:
    return await store.audit.page(AuditFilter(), 0, 100)


async def test_an_event_is_recorded_whole(store: Store) -> None:
    await Auditor(store).event(call(), "user:ann", "config.reload", "gateway", {"v": 1}, {"v": 2})
    [event] = await logged(store)
    assert (event.actor, event.actor_address, event.action, event.target, event.request_id) == (
        "user:ann", "ipv4:10.0.0.9:5000", "config.reload", "gateway", "req-7",
    )  # fmt: skip
    assert (event.before, event.after) == ('{"v":1}', '{"v":2}')


async def test_an_event_the_log_cannot_write_is_refused_and_logged(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR), pytest.raises(AuditUnavailable) as refused:
        await Auditor(store).event(call(), "user:ann", "signin", "user:ann", None, UNWRITABLE)
    assert refused.value.message == "the audit log could not record the change, so it was not made"
    assert dict(refused.value.metadata) == {"action": "signin"}
    assert [r.getMessage() for r in caplog.records] == ["audit: cannot record signin: TypeError"]
    assert await logged(store) == []


async def test_a_change_whose_event_cannot_be_written_is_refused_whole(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR), pytest.raises(AuditUnavailable) as refused:
        async with Auditor(store).change(call(), Actor("key:root")) as change:
            change.record("team.update", "team:t1", {"name": "a"}, UNWRITABLE)
    assert dict(refused.value.metadata) == {"action": "team.update"}
    assert [r.getMessage() for r in caplog.records] == [
        "audit: cannot record team.update: TypeError"
    ]
    assert await logged(store) == []
