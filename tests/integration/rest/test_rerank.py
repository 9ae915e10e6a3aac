"""POST /v1/rerank and /v2/rerank: Cohere's SDK (v2 and v1 clients) against the
gateway's URL, raw HTTP for every refusal, gRPC, the ledger's search units, and the
OpenAI-compatible adapter against strict fakes of Cohere's shape and Voyage's, with
failover and billing by the upstream's tokens when the model has no search-unit price."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import cohere
import grpc
import httpx
import pytest
from gateway.v1 import rerank_service_pb2 as pb
from gateway.v1 import rerank_service_pb2_grpc
from google.protobuf import struct_pb2

from tests.integration.rest.test_operation_run import last_row
from tests.support.facade import both_modes, client, facade
from tests.support.gateways import API_KEY, default_config_dict, running_gateway
from tests.support.grpc_stubs import API, details
from tests.support.upstreams.base import Fault, serving
from tests.support.upstreams.config import PRICE, model, provider, with_models
from tests.support.upstreams.rerank import RerankWire

AUTH = {"x-api-key": API_KEY}
DOCUMENTS = [
    "Carson City is the capital city of the American state of Nevada.",
    "The capital of the United States is Washington, D.C.",
    "Capital punishment has existed in the United States since before it was a country.",
    "The Commonwealth of the Northern Mariana Islands has its capital on Saipan.",
]
QUERY = "What is the capital of the United States?"


@pytest.fixture
async def gateway_url() -> AsyncIterator[str]:
    async with facade("in_process") as url:
        yield url


def overlap(query: str, document: str) -> float:
    """The simulated reranker's score, computed here from its definition."""
    import re

    def words(text: str) -> set[str]:
        return set(re.findall(r"[a-z0-9]+", text.lower()))

    return len(words(query) & words(document)) / len(words(query))


async def test_cohere_v2_client_ranks_by_word_overlap(gateway_url: str) -> None:
    co = cohere.AsyncClientV2(api_key=API_KEY, base_url=gateway_url)
    got = await co.rerank(model="sim-rerank", query=QUERY, documents=DOCUMENTS, top_n=3)
    expected = sorted(range(4), key=lambda i: -overlap(QUERY, DOCUMENTS[i]))[:3]
    assert [r.index for r in got.results] == expected
    assert [r.relevance_score for r in got.results] == pytest.approx(
        [overlap(QUERY, DOCUMENTS[i]) for i in expected]
    )
    assert got.results[0].index == 1  # the one that answers the question
    # One search unit (up to 100 documents) at sim-rerank's $0.002.
    assert got.meta is not None and got.meta.billed_units is not None
    assert got.meta.billed_units.search_units == 1
    usage = (got.model_extra or {})["usage"]
    assert usage["total_cost_usd"] == pytest.approx(0.002)
    again = await co.rerank(model="sim-rerank", query=QUERY, documents=DOCUMENTS, top_n=3)
    assert [(r.index, r.relevance_score) for r in again.results] == [
        (r.index, r.relevance_score) for r in got.results
    ]


async def test_cohere_v1_client_gets_the_documents_back(gateway_url: str) -> None:
    co = cohere.AsyncClient(api_key=API_KEY, base_url=gateway_url)
    got = await co.rerank(
        model="sim-rerank",
        query=QUERY,
        documents=[{"text": d} for d in DOCUMENTS],
        return_documents=True,
    )
    assert len(got.results) == 4
    for result in got.results:
        assert result.document is not None
        assert result.document.text == DOCUMENTS[result.index]
    scores = [r.relevance_score for r in got.results]
    assert scores == sorted(scores, reverse=True)


async def test_a_model_that_does_not_rerank_is_refused_by_the_sdk(gateway_url: str) -> None:
    co = cohere.AsyncClientV2(api_key=API_KEY, base_url=gateway_url)
    with pytest.raises(cohere.BadRequestError) as caught:
        await co.rerank(model="sim-mini", query=QUERY, documents=DOCUMENTS)
    error = caught.value.body["error"]
    assert error["param"] == "model" and "rerank" in error["message"]


@both_modes
@pytest.mark.parametrize(
    ("body", "param", "words"),
    [
        ({"query": "q", "documents": ["a"]}, "model", "required"),
        ({"model": "sim-rerank", "documents": ["a"]}, "query", "required"),
        ({"model": "sim-rerank", "query": " ", "documents": ["a"]}, "query", "empty"),
        ({"model": "sim-rerank", "query": "q"}, "documents", "required"),
        ({"model": "sim-rerank", "query": "q", "documents": []}, "documents", "empty"),
        ({"model": "sim-rerank", "query": "q", "documents": ["a", ""]}, "documents[1]", "empty"),
        ({"model": "sim-rerank", "query": "q", "documents": [3]}, "documents[0]", "string"),
        ({"model": "sim-rerank", "query": "q", "documents": [{"text": 3}]}, "documents[0].text",
         "string"),
        ({"model": "sim-rerank", "query": "q", "documents": ["a"] * 1001}, "documents", "1000"),
        ({"model": "sim-rerank", "query": "q", "documents": ["a"], "top_n": 0}, "top_n", "least"),
        ({"model": "sim-rerank", "query": "q", "documents": ["a"], "max_tokens_per_doc": 0},
         "max_tokens_per_doc", "least"),
        ({"model": "sim-rerank", "query": "q", "documents": ["a"], "rank_fields": ["x"]},
         "rank_fields", ""),
        ({"model": "sim-rerank", "query": "q", "documents": ["a"], "rank_by": 1}, "rank_by", ""),
        ({"model": "sim-embed", "query": "q", "documents": ["a"]}, "model", "rerank"),
    ],
)  # fmt: skip
async def test_bad_requests_name_the_field(
    mode: str, body: dict[str, Any], param: str, words: str
) -> None:
    async with client(mode) as c:
        got = await c.post("/v2/rerank", json=body, headers=AUTH)
    assert got.status_code == 400, got.text
    error = got.json()["error"]
    assert error["param"] == param and words in error["message"]
    assert "Traceback" not in got.text


@both_modes
async def test_unknown_model_and_missing_key(mode: str) -> None:
    async with client(mode) as c:
        body = {"model": "nope", "query": "q", "documents": ["a"]}
        assert (await c.post("/v1/rerank", json=body, headers=AUTH)).status_code == 404
        body["model"] = "sim-rerank"
        assert (await c.post("/v1/rerank", json=body)).status_code == 401


async def test_rerank_over_grpc(gateway) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{gateway.grpc_port}") as channel:
        stub = rerank_service_pb2_grpc.RerankServiceStub(channel)
        documents = [struct_pb2.Value(string_value=d) for d in DOCUMENTS]
        got = await stub.RerankDocuments(
            pb.RerankDocumentsRequest(
                model="sim-rerank", query=QUERY, documents=documents, top_n=1,
                return_documents=True,
            ),
            metadata=API,
        )  # fmt: skip
        assert [r.index for r in got.results] == [1]
        assert got.results[0].document.text == DOCUMENTS[1]
        assert got.meta.billed_units.search_units == 1
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.RerankDocuments(
                pb.RerankDocumentsRequest(model="sim-rerank", query="", documents=documents),
                metadata=API,
            )
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        violations = details(caught.value)["BadRequest"].field_violations  # type: ignore[attr-defined]
        assert [v.field for v in violations] == ["query"]


async def test_search_units_are_in_the_ledger_row() -> None:
    async with (
        running_gateway(default_config_dict()) as gw,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}") as c,
    ):
        # 150 documents: two search units of 100.
        body = {"model": "sim-rerank", "query": "red apple", "documents": ["an apple"] * 150}
        got = await c.post("/v1/rerank", json=body, headers=AUTH)
        assert got.status_code == 200, got.text
        assert got.json()["meta"]["billed_units"]["search_units"] == 2
        row = await last_row(gw)
        scraped = (await c.get("/metrics")).text
    assert (
        'gateway_billed_units_total{gen_ai_operation_name="rerank",model="sim-rerank",'
        'unit="search_units"} 2.0'
    ) in scraped
    assert row["method"] == "RerankDocuments"
    assert (row["unit"], row["units"]) == ("search_units", 2)
    assert row["total_cost_usd"] == pytest.approx(0.004)
    assert row["prompt_tokens"] > 0 and row["status"] == "OK"


def reranker(model_id: str, *providers: dict[str, Any], price: Any) -> dict[str, Any]:
    entry = model(model_id, *providers, price=price)
    entry["capabilities"] = ["rerank"]
    return entry


async def test_cohere_shape_upstream_fails_over_and_bills_its_search_units() -> None:
    primary_wire, backup_wire = RerankWire(search_units=1), RerankWire(search_units=1)
    async with serving(primary_wire) as primary, serving(backup_wire) as backup:
        data = with_models(
            reranker(
                "rerank-fake",
                provider("rr-primary", "openai", primary.url),
                provider("rr-backup", "openai", backup.url, "backup"),
                price={"per_search_unit": 0.002},
            )
        )
        async with client("in_process", data) as c:
            body = {"model": "rerank-fake", "query": "q", "documents": ["a", "b", "c"],
                    "top_n": 2, "max_tokens_per_doc": 64}  # fmt: skip
            got = await c.post("/v2/rerank", json=body, headers=AUTH)
            assert got.status_code == 200, got.text
            answer = got.json()
            # The fake ranks the later document higher: the gateway keeps its order.
            assert [r["index"] for r in answer["results"]] == [2, 1]
            assert answer["meta"]["billed_units"]["search_units"] == 1
            (seen,) = primary.seen
            assert seen.path == "/v1/rerank"
            assert seen.body == {"model": "gpt-fake", "query": "q", "documents": ["a", "b", "c"],
                                 "top_n": 2, "max_tokens_per_doc": 64}  # fmt: skip
            primary.faults = [Fault("status", 503)]
            moved = await c.post("/v2/rerank", json=body, headers=AUTH)
            assert moved.status_code == 200 and len(backup.seen) == 1
            primary.faults = [Fault("status", 400)]
            refused = await c.post("/v2/rerank", json=body, headers=AUTH)
            assert refused.status_code == 400 and len(backup.seen) == 1
    assert primary_wire.refused == [] and backup_wire.refused == []


async def test_voyage_shape_upstream_is_billed_by_its_tokens() -> None:
    wire = RerankWire(shape="voyage", tokens=37)
    async with serving(wire) as upstream:
        data = with_models(
            reranker(
                "voyage-fake",
                provider("voyage", "openai", upstream.url, rerank_format="voyage"),
                price=PRICE,
            )
        )
        async with (
            running_gateway(data) as gw,
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}") as c,
        ):
            body = {"model": "voyage-fake", "query": "q", "documents": ["a", "b"], "top_n": 1}
            got = await c.post("/v1/rerank", json=body, headers=AUTH)
            assert got.status_code == 200, got.text
            assert [r["index"] for r in got.json()["results"]] == [1]
            assert upstream.seen[0].body["top_k"] == 1 and "top_n" not in upstream.seen[0].body
            usage = got.json()["usage"]
            # No search-unit price: the upstream's 37 tokens at the input price.
            assert usage["prompt_tokens"] == 37
            assert usage["total_cost_usd"] == pytest.approx(37 * PRICE["input"] / 1e6)
            assert "search_units" not in got.json()["meta"]["billed_units"]
            row = await last_row(gw)
    assert (row["unit"], row["units"]) == ("tokens", 37)
    assert wire.refused == []


async def test_the_fake_refuses_what_the_rerank_apis_refuse() -> None:
    """The fake's checks can fail: bodies Cohere or Voyage would refuse get their 400."""
    from tests.support.upstreams.checks import KEY

    for wire, bodies in (
        (RerankWire(), [{"model": "m", "query": "", "documents": ["a"]},
                        {"model": "m", "query": "q", "documents": []},
                        {"model": "m", "query": "q", "documents": ["a"], "top_k": 1},
                        {"model": "m", "query": "q", "documents": [{"text": "a"}]}]),
        (RerankWire(shape="voyage"), [{"model": "m", "query": "q", "documents": ["a"],
                                       "top_n": 1}]),
    ):  # fmt: skip
        async with (
            serving(wire) as fake,
            httpx.AsyncClient(base_url=fake.url, headers={"authorization": f"Bearer {KEY}"}) as h,
        ):
            for body in bodies:
                assert (await h.post("/v1/rerank", json=body)).status_code == 400, body
            ok = await h.post("/v1/rerank", json={"model": "m", "query": "q", "documents": ["a"]})
            assert ok.status_code == 200
        assert len(wire.refused) == len(bodies)


async def test_the_model_list_shows_what_a_model_serves(gateway_url: str) -> None:
    async with httpx.AsyncClient(base_url=gateway_url, headers=AUTH) as c:
        listed = {m["id"]: m for m in (await c.get("/v1/models")).json()["data"]}
        one = (await c.get("/v1/models/sim-rerank")).json()
    assert listed["sim-rerank"]["capabilities"] == ["rerank"] == one["capabilities"]
    # A model that declares nothing shows nothing (text, and embeddings when it can).
    assert "capabilities" not in listed["sim-mini"]


CARD = "4111 1111 1111 1111"


async def test_guardrails_redact_the_query_and_documents_before_the_upstream() -> None:
    wire = RerankWire(search_units=1)
    async with serving(wire) as upstream:
        data = with_models(
            reranker(
                "rerank-fake",
                provider("rr", "openai", upstream.url),
                price={"per_search_unit": 0.002},
            )
        )
        data["guardrails"] = [{"id": "pii"}]
        data["default_guardrails"] = ["pii"]
        async with client("in_process", data) as c:
            body = {"model": "rerank-fake", "query": f"card {CARD}",
                    "documents": ["plain", f"my card is {CARD}"]}  # fmt: skip
            got = await c.post("/v1/rerank", json=body, headers=AUTH)
    assert got.status_code == 200, got.text
    (seen,) = upstream.seen
    assert CARD not in str(seen.body)
    assert seen.body["documents"][0] == "plain"
    assert "CREDIT_CARD" in got.headers["x-gateway-guardrails"]


BUDGETED = "gw-rerank-budget-key-00000"


async def test_search_units_are_reserved_against_the_budget() -> None:
    data = default_config_dict()
    # $0.003: one search unit ($0.002) fits, a second does not.
    data["keys"].append({"name": "reranker", "kind": "api", "secret": BUDGETED,
                         "budget_usd": 0.003, "budget_period": "monthly"})  # fmt: skip
    async with (
        running_gateway(data) as gw,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}") as c,
    ):
        mine = {"authorization": f"Bearer {BUDGETED}"}
        body = {"model": "sim-rerank", "query": "q", "documents": ["a", "b"]}
        assert (await c.post("/v1/rerank", json=body, headers=mine)).status_code == 200
        await gw.gateway.accounts.settled()
        refused = await c.post("/v1/rerank", json=body, headers=mine)
        assert refused.status_code == 429, refused.text
        assert refused.json()["error"]["code"] == "budget_exhausted"
        usage = (await c.get("/v1/usage", headers=mine)).json()
    assert usage["budget"]["spent_usd"] == pytest.approx(0.002)


async def test_llamaindex_jina_reranker_against_the_gateway(gateway_url: str) -> None:
    """LlamaIndex's JinaRerank takes a base URL and posts Jina's body (Cohere's shape)
    with the key as a Bearer token; it is synchronous, so it runs in a thread."""
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
    from llama_index.postprocessor.jinaai_rerank import JinaRerank

    reranker = JinaRerank(top_n=2, model="sim-rerank", base_url=f"{gateway_url}/v1",
                          api_key=API_KEY)  # fmt: skip
    nodes = [NodeWithScore(node=TextNode(text=d)) for d in DOCUMENTS]
    ranked = await asyncio.to_thread(
        reranker.postprocess_nodes, nodes, query_bundle=QueryBundle(QUERY)
    )
    scores = sorted(((overlap(QUERY, d), d) for d in DOCUMENTS), reverse=True)[:2]
    assert [(n.score, n.node.get_content()) for n in ranked] == [
        (pytest.approx(s), d) for s, d in scores
    ]
