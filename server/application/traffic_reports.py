"""Traffic control's admin reports: GetShadowReport (a model against its shadow
candidate, from the ledger's candidate rows, `shadow_of`, joined to the rows of the
calls they shadowed) and GetTraffic (the traffic rules with their calls in flight, the
calls waiting, the last budget alerts)."""

from __future__ import annotations

import statistics
from typing import Any

from gateway.v1 import admin_service_pb2 as admin_pb

from server.accounting.accounts import Accounts
from server.base.errors import InvalidArgument
from server.storage import Store
from server.storage.alerts import AlertStore

# The most recent candidate rows a report reads.
MAX_ROWS = 10_000

QUERY = """
SELECT s.model AS candidate, s.status AS s_status, s.shadow_agrees AS agrees,
       s.shadow_score AS score, s.latency_ms AS s_latency, s.total_tokens AS s_tokens,
       s.total_cost_usd AS s_cost, o.status AS o_status, o.latency_ms AS o_latency,
       o.total_tokens AS o_tokens, o.total_cost_usd AS o_cost
FROM usage_records s JOIN usage_records o
  ON o.request_id = s.shadow_of AND o.shadow_of = ''
WHERE s.shadow_of <> '' AND o.model = ? AND s.ts >= ?
ORDER BY s.ts DESC LIMIT ?
"""


def _side(model: str, rows: list[dict[str, Any]], prefix: str) -> admin_pb.ShadowSide:
    latencies = [float(r[f"{prefix}_latency"]) for r in rows]
    return admin_pb.ShadowSide(
        model=model,
        p50_latency_ms=statistics.median(latencies) if latencies else 0.0,
        total_tokens=sum(int(r[f"{prefix}_tokens"] or 0) for r in rows),
        cost_usd=sum(float(r[f"{prefix}_cost"] or 0.0) for r in rows),
        errors=sum(1 for r in rows if r[f"{prefix}_status"] != "OK"),
    )


async def shadow_report(
    store: Store | None, request: admin_pb.GetShadowReportRequest
) -> admin_pb.GetShadowReportResponse:
    if not request.model:
        raise InvalidArgument.for_field("model", "names the model whose shadow to report")
    if store is None:
        return admin_pb.GetShadowReportResponse(original=admin_pb.ShadowSide(model=request.model))
    rows = await store.db.fetch(QUERY, request.model, float(request.start_time), MAX_ROWS)
    compared = [r for r in rows if r["agrees"] is not None]
    agreed = sum(1 for r in compared if r["agrees"])
    scores = [float(r["score"]) for r in compared if r["score"] is not None]
    return admin_pb.GetShadowReportResponse(
        calls=len(rows),
        compared=len(compared),
        agreed=agreed,
        agreement_rate=agreed / len(compared) if compared else 0.0,
        mean_similarity=statistics.fmean(scores) if scores else 0.0,
        original=_side(request.model, rows, "o"),
        candidate=_side(rows[0]["candidate"] if rows else "", rows, "s"),
    )


async def traffic_state(accounts: Accounts, store: Store | None) -> admin_pb.GetTrafficResponse:
    traffic = accounts.traffic
    answer = admin_pb.GetTrafficResponse(waiting=traffic.waiting)
    for level, name, rule, count in await traffic.levels():
        out = answer.levels.add(level=level, name=name, in_flight=count,
                                priority=rule.priority or "", weight=rule.weight)  # fmt: skip
        if rule.max_in_flight is not None:
            out.max_in_flight = rule.max_in_flight
        if rule.max_wait_s is not None:
            out.max_wait_s = rule.max_wait_s
    if store is not None:
        for alert in await AlertStore(store.db).recent(20):
            answer.budget_alerts.add(
                time=alert["ts"], level=alert["level"], account=alert["account"],
                name=alert["name"], threshold=alert["threshold"],
                spent_usd=alert["spent_usd"], budget_usd=alert["budget_usd"],
            )  # fmt: skip
    return answer
