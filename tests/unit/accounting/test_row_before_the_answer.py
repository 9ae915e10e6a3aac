"""When a call's ledger row is written, against a real ledger and spool: with a spool
it is on disk before the handler's answer goes back (a worker that dies after
answering loses no row); without one it is written in the loop's next turn, after the
answer, and never lost."""

from __future__ import annotations

import asyncio

import pytest
from gateway.v1 import chat_service_pb2 as chat

from server.accounting.accounts import Accounting, Accounts
from server.accounting.admission import Admission
from server.accounting.ledger import Ledger
from server.accounting.spool import Spool
from server.base.call import Call
from server.base.caller import Principal
from server.storage.db import connect
from server.storage.migrations import migrate
from server.storage.usage import UsageStore

METHOD = chat.DESCRIPTOR.services_by_name["ChatService"].methods_by_name["CreateChatCompletion"]


async def answered(request: object, call: Call) -> str:
    call.record.principal = Principal("k1", "one", "api")
    return "answer"


@pytest.mark.parametrize("spooled", [True, False])
async def test_the_row_is_on_disk_before_the_answer_only_when_spooled(tmp_path, spooled):
    db = await connect(None, str(tmp_path / "ledger.db"))
    await migrate(db)
    spool = Spool(tmp_path / "spool", "w1") if spooled else None
    ledger = Ledger(UsageStore(db), flush_interval_s=3600, spool=spool)
    unary = Accounting(Accounts(Admission(None, None), ledger, None)).wrap_unary(METHOD, answered)  # type: ignore[arg-type]
    try:
        call = Call({})
        assert await unary(object(), call) == "answer"
        # The answer is back and the loop has not turned since.
        assert ledger.holds("k1", call.request_id) is spooled
        on_disk = list((tmp_path / "spool").glob("*.jsonl")) if spooled else []
        assert [p.read_text().count(call.request_id) for p in on_disk] == ([1] if spooled else [])
        await asyncio.sleep(0)  # the next turn
        assert ledger.holds("k1", call.request_id)
        await ledger.flush()
        rows = await db.fetch("SELECT request_id FROM usage_records")
        assert [r["request_id"] for r in rows] == [call.request_id]
    finally:
        await ledger.aclose(1)
        await db.close()
