"""Routing by prompt through the real interfaces: the decision, its report, its
invariants, a degraded pool, budgets and context windows, fallback, and feedback."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import grpc
import httpx
from gateway.v1 import router_service_pb2 as router
from gateway.v1 import router_service_pb2_grpc

from tests.support.facade import both_modes, client, sse
from tests.support.gateways import (
    COMMAND_TIMEOUT_S,
    ROOT,
    ROUTER_KEY,
    default_config_dict,
    running_gateway,
    write_config,
)

HEADERS = {"x-router-key": ROUTER_KEY}
EASY = "hi"
HARD = (
    "The following are multiple choice questions about abstract algebra. Find the degree "
    "for the given field extension Q(sqrt(2), sqrt(3), sqrt(18)) over Q. "
    "A. 0 B. 4 C. 2 D. 6"
)
# A spread of prompts, from chit-chat to multi-step maths and code.
PROMPTS = [
    EASY, "Summarize this", "What is the capital of France?", "Translate 'good morning' to German",
    "Write a haiku about autumn", HARD,
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips "
    "in May. How many clips did Natalia sell altogether in April and May?",
    "Prove that there are infinitely many primes, step by step.",
    "def f(x):\n    return [i*i for i in range(x) if i % 3]\nWhat does f(10) return and why?",
    "Solve for x: 3x^2 - 12x + 9 = 0. Show your work.",
    "Compare the causes of the first and second world wars in three paragraphs.",
]  # fmt: skip
PRICE_RANK = {"sim-mini": 0, "sim-standard": 1, "sim-pro": 2}


def models_by(data: dict[str, Any], model: str) -> dict[str, Any]:
    return next(m for m in data["models"] if m["id"] == model)


async def infer(c: httpx.AsyncClient, prompt: str, **body: Any) -> dict[str, Any]:
    response = await c.post("/v1/infer", json={"prompt": prompt, **body}, headers=HEADERS)
    assert response.status_code == 200, response.text
    return response.json()


@both_modes
async def test_hard_and_easy_prompts_of_one_profile_land_on_different_models(mode: str) -> None:
    async with client(mode) as c:
        easy = await infer(c, EASY)
        hard = await infer(c, HARD)
    assert easy["route"]["profile"] == hard["route"]["profile"] == "balanced"
    assert PRICE_RANK[easy["model"]] < PRICE_RANK[hard["model"]]
    assert easy["route"]["difficulty"] < hard["route"]["difficulty"]


@both_modes
async def test_every_response_reports_the_decision(mode: str) -> None:
    async with client(mode) as c:
        body = await infer(c, HARD, profile="economy", max_tokens=8)
    route = body["route"]
    assert route["profile"] == "economy"
    assert route["model"] == body["model"]
    assert route["provider"] == f"{body['model']}-primary"
    assert 0 <= route["difficulty"] <= 1
    assert 0 <= route["threshold"] <= 1
    assert route["scorer"] == "learned"
    assert route["decision_ms"] >= 0
    assert route["reason"] and route["reason_codes"]
    candidates = route["candidates"]
    assert [c["model"] for c in candidates] == ["sim-mini", "sim-standard"]  # cheapest first
    for candidate in candidates:
        assert 0 <= candidate["estimated_quality"] <= 1
        assert candidate["estimated_cost_usd"] > 0
    assert route["skipped"] == []
    # The final usage carries the real cost, below the worst-case estimate.
    chosen = next(c for c in candidates if c["model"] == body["model"])
    assert 0 < body["usage"]["total_cost_usd"] <= chosen["estimated_cost_usd"]


@both_modes
async def test_the_first_stream_event_reports_the_decision(mode: str) -> None:
    async with client(mode) as c:
        unary = await infer(c, HARD)
        body = {"prompt": HARD, "stream": True, "stream_options": {"include_usage": True}}
        async with c.stream("POST", "/v1/infer", headers=HEADERS, json=body) as response:
            _, events = await sse(response)
    chunks = [json.loads(e.removeprefix(b"data: ")) for e in events if e != b"data: [DONE]"]
    first = chunks[0]["route"]
    assert {k: first[k] for k in ("model", "difficulty", "candidates")} == {
        k: unary["route"][k] for k in ("model", "difficulty", "candidates")
    }
    assert all("route" not in c for c in chunks[1:])
    assert chunks[-1]["usage"]["total_cost_usd"] > 0


async def test_grpc_reports_the_same_decision() -> None:
    async with (
        running_gateway() as gw,
        grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as ch,
    ):
        stub = router_service_pb2_grpc.RouterServiceStub(ch)
        metadata = tuple(HEADERS.items())
        first = await stub.Infer(router.InferRequest(prompt=HARD), metadata=metadata)
        again = await stub.Infer(router.InferRequest(prompt=HARD), metadata=metadata)
        chunks = [c async for c in stub.StreamInfer(
            router.StreamInferRequest(prompt=HARD), metadata=metadata)]  # fmt: skip
    assert first.route.HasField("difficulty") and first.route.candidates
    # Deterministic: the same prompt, profile and pool give the same decision.
    for decision in (again.route, chunks[0].route):
        assert decision.model == first.route.model
        assert decision.difficulty == first.route.difficulty
        assert list(decision.candidates) == list(first.route.candidates)


async def test_quality_never_picks_a_cheaper_tier_than_balanced_nor_balanced_than_economy() -> None:
    async with client("in_process") as c:
        for prompt in PROMPTS:
            for max_tokens in (16, 2000):
                tiers = [
                    PRICE_RANK[(await infer(c, prompt, profile=p, max_tokens=max_tokens))["model"]]
                    for p in ("economy", "balanced", "quality")
                ]
                assert tiers == sorted(tiers), (prompt, tiers)


async def test_a_degraded_pool_serves_from_a_healthy_candidate() -> None:
    data = default_config_dict()
    for provider in models_by(data, "sim-mini")["providers"]:
        provider["params"]["error_rate"] = 1.0
        provider["breaker"] = {"failure_threshold": 1, "cooldown_s": 60}
    models_by(data, "sim-standard")["providers"][0]["enabled"] = False
    async with client("in_process", data) as c:
        first = await infer(c, EASY)  # mini fails, opening its circuits; the next serves
        assert first["model"] != "sim-mini"
        assert "FALLBACK" in first["route"]["reason_codes"]
        for prompt in PROMPTS:
            body = await infer(c, prompt)
            assert body["model"] in ("sim-standard", "sim-pro")
            skipped = {s["model"]: s["reason"] for s in body["route"]["skipped"]}
            assert skipped == {"sim-mini": "CIRCUIT_OPEN"}
            assert body["route"]["provider"] != "sim-standard-primary"  # disabled


async def test_disabled_models_and_context_windows_are_filtered() -> None:
    data = default_config_dict()
    for provider in models_by(data, "sim-pro")["providers"]:
        provider["enabled"] = False
    models_by(data, "sim-mini")["context_window"] = 64
    async with client("in_process", data) as c:
        body = await infer(c, EASY, max_tokens=100)
    skipped = {s["model"]: (s["reason"], s["detail"]) for s in body["route"]["skipped"]}
    assert skipped["sim-pro"][0] == "DISABLED"
    assert skipped["sim-mini"][0] == "CONTEXT_WINDOW" and "64" in skipped["sim-mini"][1]
    assert body["model"] == "sim-standard"


async def test_a_key_near_its_budget_is_routed_to_what_it_can_afford() -> None:
    data = default_config_dict()
    data["keys"] = [{"name": "tight", "kind": "router", "secret": ROUTER_KEY, "budget_usd": 0.01}]
    async with client("in_process", data) as c:
        body = await infer(c, HARD, profile="quality", max_tokens=1000)
    # sim-pro may cost up to 1000 x $20 per million: more than the key has left.
    assert [s["reason"] for s in body["route"]["skipped"]] == ["OVER_BUDGET"]
    assert body["model"] == "sim-standard"


async def test_thresholds_in_the_config_override_the_calibration() -> None:
    data = default_config_dict()
    data["routing"]["thresholds"] = {"economy": 1.0, "balanced": 1.0, "quality": 0.0}
    async with client("in_process", data) as c:
        assert (await infer(c, HARD))["model"] == "sim-mini"
        quality = await infer(c, EASY, profile="quality")
    assert quality["model"] == "sim-pro" and quality["route"]["threshold"] == 0


async def test_features_scorer_and_ordered_policy_are_configurable() -> None:
    data = default_config_dict()
    data["routing"]["scorer"] = "features"
    async with client("in_process", data) as c:
        body = await infer(c, HARD)
    assert body["route"]["scorer"] == "features"
    data["routing"]["policy"] = "ordered"
    async with client("in_process", data) as c:
        body = await infer(c, EASY)
    assert body["model"] == "sim-standard"  # the first of the balanced list
    assert body["route"]["reason_codes"] == ["ORDERED_PROFILE"]
    assert "difficulty" not in body["route"]


def test_a_bad_scorer_file_or_thresholds_stop_start_up(tmp_path: Path) -> None:
    data = default_config_dict()
    data["routing"]["scorer_path"] = str(tmp_path / "missing.json")
    path = write_config(tmp_path, data)
    done = subprocess.run(
        [sys.executable, "-m", "server.cli.main", "--config", str(path)],
        capture_output=True, text=True, cwd=ROOT, timeout=COMMAND_TIMEOUT_S,
    )  # fmt: skip
    assert done.returncode != 0
    assert "routing.scorer_path: cannot read" in done.stderr and "Traceback" not in done.stderr
    data = default_config_dict()
    data["routing"]["thresholds"] = {"economy": 0.1, "quality": 0.5}
    path = write_config(tmp_path, data)
    done = subprocess.run(
        [sys.executable, "-m", "server.cli.main", "--config", str(path)],
        capture_output=True, text=True, cwd=ROOT, timeout=COMMAND_TIMEOUT_S,
    )  # fmt: skip
    assert "routing.thresholds: must not increase" in done.stderr


async def test_a_deployment_bypasses_the_router() -> None:
    async with running_gateway() as gw:
        assert gw.gateway is not None

        class Refuses:
            def route(self, *args: Any) -> Any:
                raise AssertionError("a deployment must not be routed")

        live = gw.gateway.live
        live.current = dataclasses.replace(live.current, router=Refuses())
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}") as c:
            response = await c.post(
                "/v1/deployments/analyst/invoke", json={"prompt": EASY}, headers=HEADERS
            )
    assert response.status_code == 200 and response.json()["model"] == "sim-pro"
    assert "route" not in response.json()


async def test_feedback_is_stored_and_trains_the_scorer(tmp_path: Path) -> None:
    data = default_config_dict()
    data["storage"] |= {"sqlite_path": str(tmp_path / "gateway.db")}
    data["routing"]["record_prompts"] = True
    other = {"name": "other", "kind": "router", "secret": "gw-other-router-key-0000000"}
    data["keys"].append(other)
    async with client("in_process", copy.deepcopy(data)) as c:
        ids, by_mini = [], 0
        for prompt in PROMPTS:
            body = await infer(c, prompt, profile="economy")
            ids.append(body["id"])
            by_mini += body["model"] == "sim-mini"
        rated = await c.post(
            "/v1/feedback",
            headers=HEADERS,
            json={"request_id": ids[0], "label": "correct", "comment": "fine"},
        )
        assert rated.status_code == 200, rated.text
        assert rated.json() == {"request_id": ids[0].removeprefix("cmpl-"), "score": 1.0}
        for request_id in ids[1:]:
            answer = await c.post(
                "/v1/feedback", headers=HEADERS, json={"request_id": request_id, "score": 0.25}
            )
            assert answer.status_code == 200
        stranger = await c.post(
            "/v1/feedback",
            headers={"x-router-key": other["secret"]},
            json={"request_id": ids[0], "score": 1},
        )
        assert stranger.status_code == 404
        for bad, field in (
            ({"request_id": ids[0]}, "score"),
            ({"request_id": ids[0], "score": 2}, "score"),
            ({"request_id": ids[0], "label": "meh"}, "label"),
            ({"score": 1}, "request_id"),
        ):
            refused = await c.post("/v1/feedback", headers=HEADERS, json=bad)
            assert refused.status_code == 400 and refused.json()["error"]["param"] == field
    # The ledger kept the prompts beside their rows; training reads them back.
    out = tmp_path / "scorer.json"
    config = write_config(tmp_path, data)
    train = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "server.cli.main", "router", "train", "--config", str(config),
        "--from-ledger", "sim-mini", "--out", str(out), "--epochs", "2",
        cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    stdout, stderr = await asyncio.wait_for(train.communicate(), 120)
    assert train.returncode == 0, stderr.decode()
    assert f"gateway: {by_mini} rated prompts of sim-mini in the ledger" in stdout.decode()
    assert by_mini > 0
    model = json.loads(out.read_text())
    assert set(model["calibration"]["profiles"]) == {"economy", "balanced", "quality"}
