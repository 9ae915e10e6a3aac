"""Routing over many models, live calibration's shares and retraining from feedback,
through the live /v1/infer API."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from tests.integration.routing.test_routing import EASY, HARD, HEADERS, PROMPTS, infer
from tests.support.facade import client
from tests.support.gateways import default_config_dict, eventually

# (id, vendor, $ per million output tokens, quality prior): eight models of four vendors.
POOL = [
    ("alpha-nano", "alpha", 0.4, 0.52), ("alpha-max", "alpha", 15.0, 0.9),
    ("beta-lite", "beta", 0.6, 0.58), ("beta-pro", "beta", 10.0, 0.86),
    ("gamma-small", "gamma", 1.2, 0.66), ("gamma-large", "gamma", 6.0, 0.8),
    ("delta-flash", "delta", 2.5, 0.72), ("delta-ultra", "delta", 30.0, 0.92),
]  # fmt: skip


def many_models() -> dict[str, Any]:
    data = default_config_dict()
    template = next(m for m in data["models"] if m["id"] == "sim-mini")
    models = []
    for model_id, vendor, output, quality in POOL:
        model = copy.deepcopy(template)
        model.update(id=model_id, owned_by=vendor, quality=quality)
        model["price"] = {"input": output / 4, "output": output}
        for provider in model["providers"]:
            provider["id"] = provider["id"].replace("sim-mini", model_id)
        models.append(model)
    data["models"] = models
    everyone = [m[0] for m in POOL]
    data["routing"]["profiles"] = {p: everyone for p in ("economy", "balanced", "quality")}
    data["deployments"] = []
    data["default_model"] = "alpha-nano"
    return data


async def test_eight_models_of_four_vendors_each_with_its_predicted_success() -> None:
    async with client("in_process", many_models()) as c:
        easy = (await infer(c, EASY, max_tokens=50))["route"]
        hard = (await infer(c, HARD, max_tokens=50))["route"]
        tiers = []
        for profile in ("economy", "balanced", "quality"):
            body = await infer(c, HARD, profile=profile, max_tokens=50)
            tiers.append(dict((m, q) for m, _, _, q in POOL)[body["model"]])
    assert tiers == sorted(tiers)  # a dearer profile never picks a weaker model
    for route in (easy, hard):
        candidates = route["candidates"]
        assert len(candidates) == 8
        assert {c["model"] for c in candidates} == {m[0] for m in POOL}
        costs = [c["estimated_cost_usd"] for c in candidates]
        assert costs == sorted(costs)
        # The cheapest candidate meeting the bar serves.
        assert route["model"] == next(c["model"] for c in candidates if c["meets_bar"])
        success = {c["model"]: c["predicted_success"] for c in candidates}
        by_quality = sorted(POOL, key=lambda m: m[3])
        assert [success[m[0]] for m in by_quality] == sorted(success.values())
        assert all(0 < v < 1 for v in success.values())
    easy_success = {c["model"]: c["predicted_success"] for c in easy["candidates"]}
    hard_success = {c["model"]: c["predicted_success"] for c in hard["candidates"]}
    assert all(hard_success[m] < easy_success[m] for m in easy_success)


async def test_decisions_and_metrics_report_each_profiles_target_and_recent_share() -> None:
    async with client("in_process") as c:
        routes = [(await infer(c, p, profile="balanced"))["route"] for p in PROMPTS]
        scraped = (await c.get("/metrics")).text
    upward = [r["model"] != r["candidates"][0]["model"] for r in routes]
    assert routes[-1]["target_share"] == 0.45
    assert routes[-1]["recent_share"] == round(sum(upward) / len(upward), 4)
    assert 'gateway_router_share{kind="target",profile="balanced"} 0.45' in scraped
    assert 'gateway_router_share{kind="recent",profile="balanced"}' in scraped


async def test_feedback_retrains_the_served_scorer_on_a_schedule(tmp_path: Path) -> None:
    data = default_config_dict()
    data["storage"] |= {"sqlite_path": str(tmp_path / "gateway.db")}
    data["routing"].update(record_prompts=True, retrain_every_s=0.2, retrain_min_feedback=5)
    # Everything to the weakest model, whose answers the feedback rates.
    data["routing"]["thresholds"] = {"economy": 1.0, "balanced": 1.0, "quality": 1.0}
    prompts = [f"{EASY} number {i}, tell me about the weather" for i in range(12)]
    async with client("in_process", data) as c:
        # Every prompt scored before any feedback is sent: the schedule may refit as soon
        # as the fifth rating is in.
        answers = {p: await infer(c, p, profile="economy") for p in prompts}
        assert {body["model"] for body in answers.values()} == {"sim-mini"}
        before = {p: body["route"]["difficulty"] for p, body in answers.items()}
        for body in answers.values():
            rated = await c.post(
                "/v1/feedback", headers=HEADERS, json={"request_id": body["id"], "score": 0}
            )
            assert rated.status_code == 200, rated.text
        # Every answer fell short: once refitted, the same prompts score harder.
        probe = prompts[0]

        async def refitted() -> None:
            difficulty = (await infer(c, probe, profile="economy"))["route"]["difficulty"]
            assert difficulty > before[probe]

        await eventually(refitted, 60)  # the schedule runs in its own time
        after = {p: (await infer(c, p, profile="economy"))["route"]["difficulty"] for p in prompts}
    assert all(after[p] > before[p] for p in prompts), (before, after)
