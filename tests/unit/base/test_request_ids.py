"""Request ids: a caller's when well-formed, else the gateway's own, 32 hex digits that
sort by when they were made (the ledger's index on them grows at its end)."""

from __future__ import annotations

import re
import time

from server.base.call import new_request_id, request_id_or_new


def test_a_well_formed_id_of_the_caller_is_kept_and_any_other_replaced():
    assert request_id_or_new("trace-42:a.b") == "trace-42:a.b"
    for asked in (None, "", "has space", "x" * 129, "new\nline"):
        made = request_id_or_new(asked)
        assert re.fullmatch(r"[0-9a-f]{32}", made), made


def test_ids_made_later_sort_later_and_a_burst_never_repeats():
    before = new_request_id()
    while new_request_id()[:12] == before[:12]:
        pass  # into the next millisecond: ids of one millisecond have no order
    burst = [new_request_id() for _ in range(10_000)]
    assert len(set(burst)) == len(burst)
    assert all(before < made for made in burst)
    assert int(burst[0][:12], 16) // 1000 in range(int(time.time()) - 5, int(time.time()) + 1)
