"""Where a Google Cloud upstream is (project, location) and how the gateway signs in
to it: an access token given by environment variable or file (read again for every
request, so whatever refreshes it outside is followed), or service-account
credentials (a key file's path, or the file GOOGLE_APPLICATION_CREDENTIALS names),
whose tokens google-auth mints and refreshes before they expire. Nothing secret is
ever in the config; tokens are redacted from anything quoted to callers.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from server.base.config import ConfigError
from server.base.errors import UpstreamError
from server.providers.http import remember_secret

SCOPE = "https://www.googleapis.com/auth/cloud-platform"


class VertexPlace(BaseModel):
    """The Vertex AI params every publisher's adapter shares."""

    project: str = Field(min_length=1)
    location: str = Field(default="us-central1", min_length=1)
    # Whose model: `google` (Gemini's format) or `anthropic` (Messages, by rawPredict).
    # Absent: `anthropic` for a claude-* model, else `google`.
    publisher: Literal["google", "anthropic"] | None = None
    # Sign-in, one of: a service-account key file; an access token by environment
    # variable or file; none of them: the file GOOGLE_APPLICATION_CREDENTIALS names.
    credentials_file: str | None = Field(default=None, min_length=1)
    token_env: str | None = Field(default=None, min_length=1)
    token_file: str | None = Field(default=None, min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _endpoint(cls, data: Any) -> Any:
        """base_url defaults to the location's endpoint (the global one for `global`)."""
        if isinstance(data, dict) and "base_url" not in data:
            location = data.get("location") or "us-central1"
            host = "aiplatform.googleapis.com"
            data = {
                **data,
                "base_url": f"https://{host if location == 'global' else f'{location}-{host}'}/v1",
            }  # noqa: E501
        return data

    @model_validator(mode="after")
    def _one_sign_in(self) -> VertexPlace:
        given = [n for n in ("credentials_file", "token_env", "token_file") if getattr(self, n)]
        if len(given) > 1:
            raise ValueError(f"give one of credentials_file, token_env and token_file, not {given}")
        return self

    def prefix(self, publisher: str) -> str:
        return f"/projects/{self.project}/locations/{self.location}/publishers/{publisher}/models"


class GoogleSignIn:
    """Bearer tokens for one provider (see the module doc)."""

    def __init__(self, provider_id: str, place: VertexPlace, where: str) -> None:
        self._id = provider_id
        self._token_file = Path(place.token_file) if place.token_file else None
        self._token: str | None = None
        self._credentials: Any = None
        self._lock = asyncio.Lock()
        if place.token_env is not None:
            self._token = os.environ.get(place.token_env, "")
            if not self._token:
                raise ConfigError(
                    f"{where}.params.token_env: environment variable {place.token_env} is not set"
                )
            remember_secret(self._token)
        elif self._token_file is not None:
            if not self._token_file.is_file():
                raise ConfigError(f"{where}.params.token_file: {place.token_file} is not a file")
        else:
            self._credentials = _service_account(place, where)

    async def headers(self) -> tuple[tuple[str, str], ...]:
        return (("Authorization", f"Bearer {await self._current()}"),)

    async def _current(self) -> str:
        if self._token is not None:
            return self._token
        if self._token_file is not None:
            try:
                token = self._token_file.read_text().strip()
            except OSError as exc:
                raise self._failure(f"cannot read its token_file ({type(exc).__name__})") from None
            remember_secret(token)
            return token
        credentials = self._credentials
        if not credentials.valid:  # none yet, or expiring within google-auth's margin
            async with self._lock:  # one refresh for the requests that wait on it
                if not credentials.valid:
                    await asyncio.to_thread(self._refresh)
        token = str(credentials.token)
        remember_secret(token)
        return token

    def _refresh(self) -> None:
        from google.auth import exceptions
        from google.auth.transport.requests import Request

        try:
            self._credentials.refresh(Request())
        except exceptions.GoogleAuthError as exc:
            raise self._failure(f"cannot get an access token ({type(exc).__name__})") from None

    def _failure(self, what: str) -> UpstreamError:
        return UpstreamError(f"{self._id}: {what}", {"provider": self._id})


def _service_account(place: VertexPlace, where: str) -> Any:
    from google.oauth2 import service_account

    path = place.credentials_file or os.environ.get("GOOGLE_APPLICATION_CREDENTIALS")
    if not path:
        raise ConfigError(
            f"{where}.params.credentials_file: give a service-account key file, token_env or "
            "token_file (or set GOOGLE_APPLICATION_CREDENTIALS)"
        )
    try:
        return service_account.Credentials.from_service_account_file(path, scopes=[SCOPE])
    except (OSError, ValueError) as exc:
        field = "credentials_file" if place.credentials_file else "GOOGLE_APPLICATION_CREDENTIALS"
        raise ConfigError(
            f"{where}.params.{field}: not a service-account key file ({type(exc).__name__})"
        ) from None
