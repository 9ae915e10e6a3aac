"""Hugging Face's InferenceClient given the gateway's URL (its way to talk to a TGI or
OpenAI-compatible endpoint): it names the model `dummy`, which the configured
`default_model` answers; and on the TGI routes a stop sequence ends the text as
`stop_sequence`, not `eos_token`."""

from __future__ import annotations

import asyncio

from huggingface_hub import InferenceClient

from tests.support.facade import facade
from tests.support.gateways import API_KEY, ROUTER_KEY


async def test_an_endpoint_url_client_is_served_by_the_default_model() -> None:
    async with facade("in_process") as base:
        hf = InferenceClient(model=f"{base}/v1", token=API_KEY)
        reply = await asyncio.to_thread(
            hf.chat_completion, messages=[{"role": "user", "content": "Hello"}], max_tokens=8
        )
    assert reply.model == "sim-mini"  # the embedded default's default_model
    assert reply.choices[0].message.content


async def test_a_stop_sequence_ends_as_stop_sequence_on_the_tgi_routes() -> None:
    async with facade("in_process") as base:
        hf = InferenceClient(model=f"{base}/v1/deployments/summarizer/generate", token=ROUTER_KEY)
        full = await asyncio.to_thread(hf.text_generation, "Tell me", max_new_tokens=12)
        word = full.split()[3]
        cut = await asyncio.to_thread(
            hf.text_generation, "Tell me", max_new_tokens=12, stop=[word], details=True
        )
    assert cut.details is not None
    assert cut.details.finish_reason == "stop_sequence"
    assert len(cut.generated_text) < len(full)
