"""Clients of the providers' own batch APIs, for a batch handed over (a model's
`batch: provider`, docs/batches.md): submit the lines, poll, and once the provider's
batch ended read each line's answer and usage.

    OpenAI's format   upload the JSONL to /files, create /batches, poll it; final once
                      it ended and its output (or error) file is there, then read them
    Anthropic's       create /v1/messages/batches, poll processing_status until
                      `ended`, then read results_url
"""

from __future__ import annotations

from typing import Any

import httpx
import orjson

from server.base.config import ProviderConfig
from server.base.generation import TokenCounts
from server.base.provider_batches import Polled, ProviderBatches, Result
from server.providers import anthropic as anthropic_wire
from server.providers import openai as openai_wire
from server.providers.http import read_api_key

# Seconds one request to a provider's batch API may take.
TIMEOUT_S = 60.0


def open_api(provider: ProviderConfig, where: str) -> ProviderBatches:
    """A client of the provider's batch API, signed in as its adapter is."""
    if provider.adapter == "anthropic":
        anthropic = anthropic_wire.AnthropicParams.model_validate(provider.params)
        key = read_api_key(anthropic, where)
        headers = {"anthropic-version": anthropic.version, **({"x-api-key": key} if key else {})}
        return AnthropicBatches(
            anthropic.base_url, {**anthropic.headers, **headers}, anthropic.model
        )
    openai = openai_wire.OpenAIParams.model_validate(provider.params)
    key = read_api_key(openai, where)
    headers = {"authorization": f"Bearer {key}"} if key else {}
    return OpenAIBatches(openai.base_url, {**openai.headers, **headers}, openai.model)


class ProviderRefused(Exception):
    """The provider answered a batch request with an error (its status and text)."""


def _checked(response: httpx.Response) -> httpx.Response:
    if response.status_code >= 400:
        raise ProviderRefused(f"{response.request.url.path}: {response.status_code} "
                              f"{response.text[:300]}")  # fmt: skip
    return response


class OpenAIBatches:
    """OpenAI's Files and Batch APIs (and every upstream that speaks them)."""

    def __init__(self, base_url: str, headers: dict[str, str], model: str) -> None:
        self.model = model
        self.http = httpx.AsyncClient(
            base_url=base_url, headers=headers, timeout=TIMEOUT_S, follow_redirects=False
        )

    async def submit(self, batch_id: str, endpoint: str, lines: list[tuple[str, Any]]) -> str:
        data = b"".join(
            orjson.dumps({"custom_id": custom_id, "method": "POST", "url": endpoint,
                          "body": {**body, "model": self.model}}) + b"\n"
            for custom_id, body in lines
        )  # fmt: skip
        uploaded = _checked(await self.http.post(
            "/files", data={"purpose": "batch"},
            files={"file": (f"{batch_id}.jsonl", data, "application/jsonl")},
        )).json()  # fmt: skip
        created = _checked(await self.http.post("/batches", json={
            "input_file_id": uploaded["id"], "endpoint": endpoint, "completion_window": "24h",
            "metadata": {"gateway_batch_id": batch_id},
        })).json()  # fmt: skip
        return str(created["id"])

    async def poll(self, upstream_id: str) -> Polled:
        batch = _checked(await self.http.get(f"/batches/{upstream_id}")).json()
        status = batch.get("status")
        if status == "failed":
            return Polled("failed", [])
        if status not in ("completed", "expired", "cancelled"):
            return Polled("running", [])
        output, errors = batch.get("output_file_id"), batch.get("error_file_id")
        counts = batch.get("request_counts") or {}
        ran = int(counts.get("completed") or 0) + int(counts.get("failed") or 0)
        # Ended, but final only once its files are there: a batch may say `completed`
        # (with or without its counts) a moment before it names its output file.
        promised = ran or (status == "completed" and int(counts.get("total") or 0))
        if promised and not output and not errors:
            return Polled("running", [])
        if (counts.get("completed") and not output) or (counts.get("failed") and not errors):
            return Polled("running", [])
        results: list[Result] = []
        for file_id in (output, errors):
            if file_id:
                content = _checked(await self.http.get(f"/files/{file_id}/content")).content
                results.extend(
                    _openai_result(line) for line in content.splitlines() if line.strip()
                )
        return Polled(status, results)

    async def cancel(self, upstream_id: str) -> None:
        _checked(await self.http.post(f"/batches/{upstream_id}/cancel"))

    async def aclose(self) -> None:
        await self.http.aclose()


def _openai_result(raw: bytes) -> Result:
    line = orjson.loads(raw)
    response = line.get("response") or {}
    body = response.get("body") or {}
    if response:
        code = int(response.get("status_code") or 500)
    else:
        error = line.get("error") or {}
        code, body = 500, {"error": {"message": error.get("message", "the line failed"),
                                     "code": error.get("code")}}  # fmt: skip
    usage = body.get("usage") if code == 200 else None
    return Result(str(line["custom_id"]), code, body, _openai_counts(usage))


def _openai_counts(usage: Any) -> TokenCounts | None:
    """Chat's and embeddings' usage (`prompt_tokens`), or the Responses API's
    (`input_tokens`)."""
    if not isinstance(usage, dict):
        return None
    if "input_tokens" in usage and "prompt_tokens" not in usage:
        usage = {"prompt_tokens": usage.get("input_tokens", 0),
                 "completion_tokens": usage.get("output_tokens", 0),
                 "total_tokens": usage.get("total_tokens", 0)}  # fmt: skip
    usage = {"completion_tokens": 0, **usage}
    return openai_wire.counts(usage)


class AnthropicBatches:
    """Anthropic's Message Batches."""

    def __init__(self, base_url: str, headers: dict[str, str], model: str) -> None:
        self.model = model
        self.http = httpx.AsyncClient(
            base_url=base_url, headers=headers, timeout=TIMEOUT_S, follow_redirects=False
        )

    async def submit(self, batch_id: str, endpoint: str, lines: list[tuple[str, Any]]) -> str:
        requests = [{"custom_id": custom_id, "params": {**body, "model": self.model}}
                    for custom_id, body in lines]  # fmt: skip
        created = _checked(
            await self.http.post("/v1/messages/batches", json={"requests": requests})
        )
        return str(created.json()["id"])

    async def poll(self, upstream_id: str) -> Polled:
        batch = _checked(await self.http.get(f"/v1/messages/batches/{upstream_id}")).json()
        if batch.get("processing_status") != "ended" or not batch.get("results_url"):
            return Polled("running", [])
        results: list[Result] = []
        content = _checked(await self.http.get(batch["results_url"])).content
        for raw in content.splitlines():
            if raw.strip() and (one := _anthropic_result(raw)) is not None:
                results.append(one)
        state = "cancelled" if batch.get("cancel_initiated_at") else "completed"
        return Polled(state, results)

    async def cancel(self, upstream_id: str) -> None:
        _checked(await self.http.post(f"/v1/messages/batches/{upstream_id}/cancel"))

    async def aclose(self) -> None:
        await self.http.aclose()


def _anthropic_result(raw: bytes) -> Result | None:
    """A succeeded or errored request; None for one cancelled or expired (not run)."""
    line = orjson.loads(raw)
    result = line.get("result") or {}
    if result.get("type") == "succeeded":
        message = result.get("message") or {}
        return Result(str(line["custom_id"]), 200, message,
                      anthropic_wire.counts(message.get("usage")))  # fmt: skip
    if result.get("type") == "errored":
        error = (result.get("error") or {}).get("error") or {}
        status = 400 if error.get("type") == "invalid_request_error" else 500
        return Result(str(line["custom_id"]), status, {"error": error}, None)
    return None
