"""The router learning from its own traffic, through the live APIs: tags on every path
that routes, exploration's share, and a retrain that moves the decisions."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from gateway.v1 import admin_service_pb2 as admin
from gateway.v1 import admin_service_pb2_grpc

from server.application.retrain import retrain
from server.routing.live import auc
from server.routing.scorer import LearnedScorer
from server.routing.tags import Rated
from server.routing.training import gain, refit
from tests.integration.routing.test_routing import HEADERS
from tests.support.gateways import API_KEY, running_gateway
from tests.support.shared_state import ADMIN_KEY, config_with

API = {"x-api-key": API_KEY}
ADMIN = {"x-admin-key": ADMIN_KEY}
# A kind of prompt that looks easy to the shipped scorer and that the cheapest model,
# by this traffic's ratings, fails.
CLAUSE = "Tidy clause {} of the lease, please: the tenant pays the rent each month."


def learning(tmp_path: Path, **routing: Any) -> dict[str, Any]:
    data = config_with(sqlite_path=str(tmp_path / "gateway.db"))
    data["routing"].update(record_prompts=True, **routing)
    return data


async def routed(c: httpx.AsyncClient, prompt: str, **body: Any) -> dict[str, Any]:
    response = await c.post(
        "/v1/infer", headers=HEADERS, json={"prompt": prompt, "profile": "economy", **body}
    )
    assert response.status_code == 200, response.text
    return response.json()


async def rate(c: httpx.AsyncClient, answer: dict[str, Any], score: float) -> None:
    response = await c.post(
        "/v1/feedback", headers=HEADERS, json={"request_id": answer["id"], "score": score}
    )
    assert response.status_code == 200, response.text


async def test_tags_of_every_routing_path_reach_the_ledger(tmp_path: Path) -> None:
    async with running_gateway(learning(tmp_path)) as gw:
        url = f"http://127.0.0.1:{gw.http_port}"
        async with httpx.AsyncClient(base_url=url) as c:
            await routed(c, "one", tags=["team-a", "maths", "team-a"])
            chat = {"model": "economy", "messages": [{"role": "user", "content": "two"}]}
            listed = await c.post(
                "/v1/chat/completions", headers=API,
                json={**chat, "metadata": {"tags": "support, billing"}},
            )  # fmt: skip
            headed = await c.post(
                "/v1/messages", headers={**API, "x-gateway-tags": "claude,agent"},
                json={"model": "economy", "max_tokens": 20,
                      "messages": [{"role": "user", "content": "three"}]},
            )  # fmt: skip
            gemini = await c.post(
                "/v1beta/models/economy:generateContent",
                headers={"x-goog-api-key": API_KEY, "x-gateway-tags": "gemini-cli"},
                json={"contents": [{"role": "user", "parts": [{"text": "four"}]}]},
            )
            untagged = await c.post("/v1/chat/completions", headers=API, json=chat)
        for response in (listed, headed, gemini, untagged):
            assert response.status_code == 200, response.text
        await gw.gateway.accounts.ledger.flush()
        rows = await gw.gateway.store.db.fetch("SELECT prompt, tags FROM usage_records ORDER BY id")
    assert [(r["prompt"], r["tags"]) for r in rows] == [
        ("one", "team-a,maths"),
        ("two", "support,billing"),
        ("three", "claude,agent"),
        ("four", "gemini-cli"),
        ("two", ""),
    ]


@pytest.mark.parametrize(
    ("where", "field"),
    [
        ({"json": {"tags": [f"t{i}" for i in range(17)]}}, "tags"),
        ({"json": {"tags": ["ok", "x" * 65]}}, "tags[1]"),
        ({"json": {"tags": [""]}}, "tags[0]"),
        ({"headers": {"x-gateway-tags": "a,,b"}, "chat": {}}, "x-gateway-tags[1]"),
        ({"chat": {"metadata": {"tags": "a," + "y" * 65}}}, "metadata.tags[1]"),
    ],
)
async def test_a_bad_tag_is_refused_with_the_field_named(where: dict[str, Any], field: str) -> None:
    async with running_gateway(config_with()) as gw:
        url = f"http://127.0.0.1:{gw.http_port}"
        async with httpx.AsyncClient(base_url=url) as c:
            if "chat" in where:
                body = {"model": "economy", "messages": [{"role": "user", "content": "x"}]}
                response = await c.post(
                    "/v1/chat/completions",
                    headers={**API, **where.get("headers", {})},
                    json={**body, **where["chat"]},
                )
            else:
                response = await c.post(
                    "/v1/infer", headers=HEADERS, json={"prompt": "x", **where["json"]}
                )
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == field


@pytest.mark.slow
async def test_exploration_takes_its_share_and_stays_out_of_the_recent_share() -> None:
    data = config_with()
    data["routing"]["explore_share"] = {"economy": 0.2, "balanced": 0.0, "quality": 0.0}
    for key in data["keys"]:
        key.pop("requests_per_minute", None)  # 2,000 calls in a few seconds
    async with running_gateway(data) as gw:
        url = f"http://127.0.0.1:{gw.http_port}"
        async with httpx.AsyncClient(base_url=url) as c:
            routes = [(await routed(c, f"question {i}"))["route"] for i in range(2000)]
            balanced = [(await routed(c, "q", profile="balanced"))["route"] for _ in range(50)]
    explored = [r for r in routes if "EXPLORE" in r["reason_codes"]]
    assert abs(len(explored) / len(routes) - 0.2) <= 0.03
    assert {r["model"] for r in explored} <= {c["model"] for c in routes[0]["candidates"]}
    assert not any("EXPLORE" in r["reason_codes"] for r in balanced)
    # The recent share counts the router's own decisions only (the last 500 of them).
    own = [r for r in routes if "EXPLORE" not in r["reason_codes"]][-500:]
    upward = sum(r["model"] != r["candidates"][0]["model"] for r in own)
    assert routes[-1]["recent_share"] == pytest.approx(upward / len(own), abs=2e-3)


async def test_a_retrain_moves_decisions_on_tagged_prompts_the_shipped_scorer_misjudges(
    tmp_path: Path,
) -> None:
    # A fixed bar, so that only the difficulty moves the decisions.
    data = learning(tmp_path, thresholds={"economy": 0.5, "balanced": 0.5, "quality": 0.5})
    async with running_gateway(data) as gw:
        url = f"http://127.0.0.1:{gw.http_port}"
        async with httpx.AsyncClient(base_url=url, timeout=30) as c:
            for i in range(40):
                tagged = await routed(c, CLAUSE.format(i), tags=["leases"])
                assert tagged["model"] == "sim-mini"  # the shipped scorer thinks it easy
                await rate(c, tagged, 0.0)
                await rate(c, await routed(c, f"hello there, friend number {i}"), 1.0)
            probe = CLAUSE.format(1000)
            before = (await routed(c, probe, tags=["leases"]))["route"]
            response = await c.post("/v1/admin/router:retrain", headers=ADMIN, json={})
            assert response.status_code == 200, response.text
            after = (await routed(c, probe, tags=["leases"]))["route"]
            unseen = (await routed(c, probe, tags=["never-rated"]))["route"]
            bare = (await routed(c, probe))["route"]
    answer = response.json()
    assert answer["retrained"] is True
    assert (answer["cheapest_rows"], answer["above_rows"]) == (80, 0)
    # The held-back fifth: 8 ratings of each kind, told apart by both scorers.
    assert answer["held_out_auc"] == answer["previous_auc"] == 1.0
    assert answer["held_out_gain"] == answer["previous_gain"] == 0.5  # no upper rung rated
    assert before["model"] == "sim-mini" and after["model"] == "sim-standard"
    assert after["difficulty"] > 0.5 > before["difficulty"]
    # An unseen tag weighs nothing.
    assert unseen["difficulty"] == bare["difficulty"] < after["difficulty"]


async def test_a_retrain_without_ratings_says_so_and_keeps_the_scorer(tmp_path: Path) -> None:
    async with running_gateway(learning(tmp_path)) as gw:
        url = f"http://127.0.0.1:{gw.http_port}"
        async with httpx.AsyncClient(base_url=url) as c:
            before = (await routed(c, CLAUSE.format(0)))["route"]["difficulty"]
            scorer = gw.gateway.live.current.router.scorer.current()  # type: ignore[attr-defined]
            async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel:
                stub = admin_service_pb2_grpc.AdminServiceStub(channel)
                answer = await stub.RetrainRouter(
                    admin.RetrainRouterRequest(), metadata=(("x-admin-key", ADMIN_KEY),)
                )
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await stub.RetrainRouter(admin.RetrainRouterRequest(), metadata=())
            after = (await routed(c, CLAUSE.format(0)))["route"]["difficulty"]
            kept = gw.gateway.live.current.router.scorer.current()  # type: ignore[attr-defined]
    assert not answer.retrained and "no rated answers" in answer.detail
    assert (answer.cheapest_rows, answer.above_rows) == (0, 0)
    assert not answer.HasField("held_out_auc") and not answer.HasField("held_out_gain")
    assert kept is scorer and after == before
    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED


async def test_exploration_never_goes_past_the_keys_budget_nor_to_deployments() -> None:
    data = config_with()
    data["routing"]["explore_share"] = 1.0
    data["keys"] = [
        {"name": "tight", "kind": "router", "secret": HEADERS["x-router-key"], "budget_usd": 0.01}
    ]
    async with running_gateway(data) as gw:
        url = f"http://127.0.0.1:{gw.http_port}"
        async with httpx.AsyncClient(base_url=url) as c:
            # sim-pro may cost up to 1000 x $20 per million: more than the key has left.
            quality = [
                (await routed(c, f"prove lemma {i}", profile="quality", max_tokens=1000))
                for i in range(30)
            ]
            balanced = [(await routed(c, f"q {i}", profile="balanced")) for i in range(30)]
            deployed = await c.post(
                "/v1/deployments/summarizer/invoke", headers=HEADERS, json={"prompt": "x"}
            )
    assert {a["model"] for a in quality} == {"sim-standard"}  # the only affordable one
    assert all(a["route"]["skipped"][0]["reason"] == "OVER_BUDGET" for a in quality)
    # Every call with another affordable candidate explores; none reaches sim-pro.
    for answer in balanced:
        route = answer["route"]
        assert "EXPLORE" in route["reason_codes"] or len(route["candidates"]) == 1
        assert "sim-pro" in {s["model"] for s in route["skipped"]}
        assert answer["model"] in {c["model"] for c in route["candidates"]} - {"sim-pro"}
    assert any("EXPLORE" in a["route"]["reason_codes"] for a in balanced)
    assert deployed.status_code == 200 and "route" not in deployed.json()


@pytest.mark.parametrize(
    ("routing", "detail"),
    [
        ({"policy": "ordered"}, "routing by a fixed order learns nothing from ratings"),
        ({"scorer": "features"}, "the feature scorer is not refitted"),
    ],
)
async def test_a_router_that_does_not_learn_keeps_its_scorer(
    tmp_path: Path, routing: dict[str, str], detail: str
) -> None:
    async with running_gateway(learning(tmp_path, **routing)) as gw:
        url = f"http://127.0.0.1:{gw.http_port}"
        async with httpx.AsyncClient(base_url=url) as c:
            response = await c.post("/v1/admin/router:retrain", headers=ADMIN, json={})
    assert response.status_code == 200, response.text
    assert response.json() == {
        "retrained": False, "detail": f"{detail}: the scorer is kept",
        "cheapest_rows": 0, "above_rows": 0,
    }  # fmt: skip


async def test_the_refit_is_measured_on_every_fifth_rating_fitted_on_the_rest(
    tmp_path: Path,
) -> None:
    ratings = [Rated(CLAUSE.format(i), ("leases", "q3"), True, 0.0) for i in range(30)]
    ratings += [Rated(f"hello, friend number {i}", (), True, 1.0) for i in range(30)]
    ratings += [Rated(f"prove lemma {i}", ("maths",), False, 1.0) for i in range(10)]
    random.Random(4).shuffle(ratings)
    async with running_gateway(learning(tmp_path)) as gw:
        router = gw.gateway.live.current.router
        base = router.scorer.current()  # type: ignore[attr-defined]
        outcome = await retrain(router, ratings)  # type: ignore[arg-type]
        served = router.scorer.current()  # type: ignore[attr-defined]
    every = [r for i, r in enumerate(ratings) if i % 5 == 4]
    held = [r for r in every if r.cheapest]
    kept = [r for i, r in enumerate(ratings) if i % 5 != 4]
    measured = LearnedScorer(refit(base.document, kept))

    def figure(scorer: LearnedScorer) -> float:
        return round(auc([(scorer.logit(r.prompt, None, r.tags), 1 - r.score) for r in held]), 4)

    def routes(scorer: LearnedScorer) -> float:
        return round(gain([(scorer.logit(r.prompt, None, r.tags), r) for r in every]), 4)

    assert (outcome.retrained, outcome.cheapest, outcome.above) == (True, 60, 10)
    assert outcome.detail == (
        "scorer refitted on 60 rated answers of the cheapest rung and 10 of the rungs above"
    )
    assert outcome.held_out_auc == figure(measured)
    assert outcome.previous_auc == figure(base)
    # Both rungs' held-back ratings: the upper rungs' are all successes, so only the
    # cheapest rung's order counts.
    assert {r.cheapest for r in every} == {True, False}
    assert outcome.held_out_gain == routes(measured) == round(figure(measured) - 0.5, 4)
    assert outcome.previous_gain == routes(base)
    assert served.document["refit"] == {"cheapest": 60, "above": 10}
    assert served.tag_offsets.keys() == {"leases", "q3", "maths"}
