"""Rerank's wire formats, for the adapters that rerank over HTTP.

`cohere`: Cohere's `/v2/rerank` (and `/v1/rerank`), which Jina's API and the
OpenAI-compatible servers that rerank (vLLM, Infinity) share: `query`, `documents`,
`top_n`, `max_tokens_per_doc` in; `results[{index, relevance_score}]` out, with Cohere's
`meta.billed_units.search_units` or the others' `usage.total_tokens`. `voyage`:
Voyage's `/rerank`: `top_k` and `truncation` in; `data[{index, relevance_score}]` and
`usage.total_tokens` out.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from server.base.rerank import Ranking, RerankRequest
from server.providers.http import ProtocolViolation, count

RerankFormat = Literal["cohere", "voyage"]


def body(model: str, request: RerankRequest, wire: RerankFormat) -> dict[str, Any]:
    """The upstream's request body."""
    out: dict[str, Any] = {
        "model": model,
        "query": request.query,
        "documents": list(request.documents),
    }
    if wire == "voyage":
        if request.top_n is not None:
            out["top_k"] = request.top_n
        out["truncation"] = True
        return out
    if request.top_n is not None:
        out["top_n"] = request.top_n
    if request.max_tokens_per_doc is not None:
        out["max_tokens_per_doc"] = request.max_tokens_per_doc
    return out


def ranking(answer: Any, wire: RerankFormat) -> Ranking:
    """The upstream's answer as a Ranking, most relevant first; ProtocolViolation when
    it is not one."""
    if not isinstance(answer, dict):
        raise ProtocolViolation("a rerank answer is not an object")
    items = answer.get("data" if wire == "voyage" else "results")
    if not isinstance(items, list):
        raise ProtocolViolation("a rerank answer without its results")
    pairs = []
    for item in items:
        if not isinstance(item, dict):
            raise ProtocolViolation("a rerank result is not an object")
        index, score = item.get("index"), item.get("relevance_score")
        if not isinstance(index, int) or isinstance(index, bool):
            raise ProtocolViolation("a rerank result without an integer index")
        if not isinstance(score, int | float) or isinstance(score, bool):
            raise ProtocolViolation("a rerank result without a numeric relevance_score")
        if not math.isfinite(score):
            raise ProtocolViolation("a rerank score that is not a number")
        pairs.append((index, float(score)))
    pairs.sort(key=lambda pair: -pair[1])
    usage = answer.get("usage") or {}
    used = usage.get("total_tokens") if isinstance(usage, dict) else None
    billed = (answer.get("meta") or {}).get("billed_units") or {}
    units = billed.get("search_units") if isinstance(billed, dict) else None
    if units is not None and (not isinstance(units, int | float) or units < 0):
        raise ProtocolViolation("meta.billed_units.search_units is not a count")
    return Ranking(
        tuple(pairs),
        count(used, "usage.total_tokens") if used is not None else None,
        float(units) if units is not None else None,
    )
