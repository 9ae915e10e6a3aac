"""The calls' metrics are tallied and moved into prometheus-client's metrics by
`sample()`: the exposition after it is what prometheus-client's own counting of the
same calls gives, bucket by bucket (this also pins the histogram's inner values the
move adds to)."""

from __future__ import annotations

from prometheus_client import generate_latest

from server.ops.metrics import DURATION_BUCKETS, TOKEN_BUCKETS, Metrics
from server.ops.observe import Outcome


def outcome(**changes: object) -> Outcome:
    fields: dict = {
        "rpc": "CreateChatCompletion", "request_id": "r", "key_id": "k1", "model": "m",
        "provider": "p", "status": "OK", "reason": "", "generated": True,
        "prompt_tokens": 9, "completion_tokens": 6, "cost_usd": 0.25, "latency_s": 0.5,
        "ttft_s": 0.1, "upstream_s": 0.4,
    }  # fmt: skip
    return Outcome(**{**fields, **changes})


def sampled(metrics: Metrics) -> dict[str, float]:
    """The exposition's samples after a sample(), by line name and labels."""
    metrics._flush()
    lines = generate_latest(metrics.registry).decode().splitlines()
    return {
        name: float(value)
        for name, _, value in (line.rpartition(" ") for line in lines if line[:1] != "#")
        if "_created" not in name.partition("{")[0]
    }


def test_histogram_buckets_match_prometheus_clients_own_counting():
    tallied, counted = Metrics(), Metrics()
    # Below the first bound, exactly on bounds, between them, past the last (+Inf).
    values = [0.0, DURATION_BUCKETS[0], 0.015, DURATION_BUCKETS[3], 81.92, 1000.0, 0.33]
    tokens = [0, 1, 2, 4, 5, TOKEN_BUCKETS[-1], TOKEN_BUCKETS[-1] + 1]
    labels = ("chat", "p", "m", "")
    for value, count in zip(values, tokens, strict=True):
        tallied._observe(tallied.duration, labels, value)
        tallied._observe(tallied.tokens, ("chat", "p", "m", "input"), count)
        counted.duration.labels(*labels).observe(value)
        counted.tokens.labels("chat", "p", "m", "input").observe(count)
    assert sampled(tallied) == sampled(counted)
    assert sampled(tallied)['gen_ai_client_operation_duration_seconds_bucket{error_type="",' \
        'gen_ai_operation_name="chat",gen_ai_provider_name="p",gen_ai_response_model="m",' \
        'le="0.01"}'] == 2  # fmt: skip


def test_calls_are_counted_once_each_across_samples():
    metrics = Metrics()
    metrics.observe(outcome())
    metrics.observe(outcome(key_id="k2"))
    first = sampled(metrics)
    metrics.observe(outcome())
    metrics.observe(outcome(status="RESOURCE_EXHAUSTED", reason="RATE_LIMITED",
                            generated=False, cost_usd=None))  # fmt: skip
    second = sampled(metrics)
    requests = 'gateway_requests_total{key_id="k1",model="m",provider="p",' \
        'rpc="CreateChatCompletion",status="OK"}'  # fmt: skip
    assert (first[requests], second[requests]) == (1, 2)
    cost = 'gateway_cost_usd_total{key_id="k1",model="m",provider="p"}'
    assert (first[cost], second[cost]) == (0.25, 0.5)
    assert second['gateway_rate_limit_rejections_total{key_id="k1"}'] == 1
    count = 'gen_ai_client_token_usage_count{gen_ai_operation_name="chat",' \
        'gen_ai_provider_name="p",gen_ai_response_model="m",gen_ai_token_type="output"}'  # fmt: skip
    assert (first[count], second[count]) == (2, 3)
    # A sample with nothing new changes nothing.
    assert sampled(metrics) == second


def test_what_is_tallied_is_not_in_the_exposition_before_a_sample():
    metrics = Metrics()
    metrics.observe(outcome())
    text = generate_latest(metrics.registry).decode()
    assert "gateway_requests_total{" not in text
    metrics.sample(_Catalog(), _Ledger(), in_flight=0)
    assert "gateway_requests_total{" in generate_latest(metrics.registry).decode()


class _Catalog:
    upstreams: dict = {}


class _Ledger:
    pending = written = dropped = 0
