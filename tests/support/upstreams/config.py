"""Gateway configs whose models are served by fake upstreams."""

from __future__ import annotations

from typing import Any

from tests.support.gateways import default_config_dict
from tests.support.upstreams import bedrock
from tests.support.upstreams.checks import KEY_ENV

PRICE = {"input": 1.0, "output": 4.0, "cached_input": 0.5, "cache_write": 1.25,
         "cache_write_1h": 2.0, "reasoning": 8.0}  # fmt: skip
# A short read timeout keeps fault tests fast; connecting on loopback is quick unless a
# loaded machine stalls the loop (seen past 3 s), so its bound is generous (no test waits
# on it; tests of the bound set their own).
FAST = {"connect_timeout_s": 10.0, "read_timeout_s": 0.5}
UPSTREAM_MODEL = {"openai": "gpt-fake", "anthropic": "claude-fake", "tgi": "tgi-fake",
                  "azure_openai": "gpt-fake", "gemini": "gemini-fake", "vertex": "gemini-fake",
                  "bedrock": bedrock.MODEL}  # fmt: skip
BASE_PATH = {"openai": "/v1", "anthropic": "", "tgi": "", "azure_openai": "", "gemini": "/v1beta",
             "vertex": "/v1", "bedrock": ""}  # fmt: skip
# Params an adapter's entries need against its fake: Bedrock signs with the fake's AWS
# credentials (SigV4) rather than a key.
ADAPTER_PARAMS: dict[str, dict[str, Any]] = {"bedrock": {
    "region": bedrock.REGION, "api_key_env": None,
    "access_key_id_env": bedrock.ACCESS_KEY_ENV, "secret_access_key_env": bedrock.SECRET_ENV,
}}  # fmt: skip


def provider(
    provider_id: str, adapter: str, url: str, kind: str = "primary", **params: Any
) -> dict[str, Any]:
    """A provider entry for `adapter` at the fake upstream `url`; the `breaker`,
    `enabled` and `weight` keywords go to the entry itself, every other one to its
    params. The key is the one the fakes expect (`api_key_env=None`: no key)."""
    entry: dict[str, Any] = {
        k: params.pop(k) for k in ("breaker", "enabled", "weight") if k in params
    }
    params = {**ADAPTER_PARAMS.get(adapter, {}), **params}
    params.setdefault("api_key_env", KEY_ENV)
    if params["api_key_env"] is None:
        del params["api_key_env"]
    return {
        "id": provider_id,
        "type": kind,
        "adapter": adapter,
        "params": {
            "base_url": url + BASE_PATH[adapter],
            "model": UPSTREAM_MODEL[adapter],
            **FAST,
            **params,
        },
        **entry,
    }


def with_models(*models: dict[str, Any], request_timeout_s: float = 5) -> dict[str, Any]:
    """The default test config plus `models`, and a short request timeout."""
    data = default_config_dict()
    data["server"]["request_timeout_s"] = request_timeout_s
    data["models"].extend(models)
    return data


def model(model_id: str, *providers: dict[str, Any], price: Any = PRICE) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "id": model_id,
        "owned_by": "test",
        "created": 1767225600,
        "providers": list(providers),
    }
    if price is not None:
        entry["price"] = price
    return entry
