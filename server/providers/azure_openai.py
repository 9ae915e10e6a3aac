"""Azure OpenAI adapter: OpenAI's wire format (openai.py) at Azure's URLs, signed in
Azure's ways.

URLs, from `base_url` (the resource's endpoint, `https://NAME.openai.azure.com`):
- with `deployment`: `/openai/deployments/{deployment}/chat/completions` (and
  `/completions`, `/embeddings`, `/audio/*`, `/images/*`) with `?api-version={api_version}`,
  the classic API;
- without: Azure's v1 API, `/openai/v1/chat/completions` (and `/responses`), the model
  named in the body, no api-version.

Sign-in, one of: `api_key_env` (the key goes in the `api-key` header, as Azure wants
it, never `Authorization`); `token_env`, an environment variable holding a Microsoft
Entra ID access token; or `token_file`, a file holding one, read again for every
request, so a workload-identity agent or a cron job that refreshes it is followed
without a restart. Tokens go as `Authorization: Bearer`. Neither is ever in the
config; both are redacted from anything quoted to callers.

Azure's content filter: a prompt it refuses is a 400 with code `content_filter`, which
reaches the caller as a 400 naming the filter (http.check_status); a completion it cuts
ends with finish_reason `content_filter`, passed through as OpenAI's adapter passes
every finish reason: never an empty success. Everything else (fields, streaming,
usage with cached and reasoning tokens, capabilities, retries, audio and images at the
deployment's `/audio/*` and `/images/*`) is OpenAI's format's. Azure serves no
moderations and no rerank, so this adapter is neither a Moderator nor a Reranker.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote

from pydantic import Field, model_validator

from server.base.config import ConfigError
from server.base.errors import UpstreamError
from server.providers.http import read_api_key, remember_secret
from server.providers.openai import OpenAIFormat, OpenAIParams

# The newest generally available data-plane version when this adapter was written.
DEFAULT_API_VERSION = "2024-10-21"


class AzureOpenAIParams(OpenAIParams):
    # The deployment's name; absent: Azure's v1 API, with `model` in the body.
    deployment: str | None = Field(default=None, min_length=1)
    api_version: str = Field(default=DEFAULT_API_VERSION, min_length=1)
    # A Microsoft Entra ID access token, by environment variable or file.
    token_env: str | None = Field(default=None, min_length=1)
    token_file: str | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _one_sign_in(self) -> AzureOpenAIParams:
        given = [n for n in ("api_key_env", "token_env", "token_file") if getattr(self, n)]
        if len(given) > 1:
            raise ValueError(f"give one of api_key_env, token_env and token_file, not {given}")
        return self


class AzureOpenAIProvider(OpenAIFormat):
    params: AzureOpenAIParams

    def __init__(self, provider_id: str, params: AzureOpenAIParams, where: str) -> None:
        self._token_file = Path(params.token_file) if params.token_file else None
        if self._token_file is not None and not self._token_file.is_file():
            raise ConfigError(f"{where}.params.token_file: {params.token_file} is not a file")
        if params.deployment is None:
            self._prefix, self._query = "/openai/v1", ""
        else:
            self._prefix = f"/openai/deployments/{quote(params.deployment, safe='')}"
            self._query = f"?api-version={quote(params.api_version, safe='')}"
        super().__init__(provider_id, params, where)

    def credentials(self, params: OpenAIParams, where: str) -> dict[str, str]:
        assert isinstance(params, AzureOpenAIParams)
        if params.token_env is not None:
            token = os.environ.get(params.token_env, "")
            if not token:
                raise ConfigError(
                    f"{where}.params.token_env: environment variable {params.token_env} is not set"
                )
            remember_secret(token)
            return {"Authorization": f"Bearer {token}"}
        key = read_api_key(params, where)
        return {"api-key": key} if key else {}

    def path(self, endpoint: str) -> str:
        return f"{self._prefix}{endpoint}{self._query}"

    def serves_realtime(self) -> bool:
        return self.params.realtime_api is not False  # every resource serves it

    def realtime_path(self) -> str:
        """Azure's Realtime path: the deployment's, with its api-version; on the v1
        API, the model named in the query."""
        p = self.params
        if p.deployment is None:
            return f"/openai/v1/realtime?model={quote(p.model, safe='')}"
        return (
            f"/openai/realtime?api-version={quote(p.api_version, safe='')}"
            f"&deployment={quote(p.deployment, safe='')}"
        )

    def request_headers(self) -> tuple[tuple[str, str], ...]:
        if self._token_file is None:
            return ()
        try:
            token = self._token_file.read_text().strip()
        except OSError as exc:
            raise UpstreamError(
                f"{self.id}: cannot read its token_file ({type(exc).__name__})",
                {"provider": self.id},
            ) from None
        remember_secret(token)
        return (("Authorization", f"Bearer {token}"),)
