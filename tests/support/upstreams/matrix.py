"""The fault matrix shared by the gRPC and REST failover tests.

Per wire format, a model `<fmt>-failover` (that format's fake as primary, an OpenAI
fake as backup) and `<fmt>-alone` (the same primary, no backup); plus
`refused-failover` and `refused-alone` whose primary refuses connections.
"""

from __future__ import annotations

from typing import Any

from tests.support.upstreams.base import TEXT, FakeUpstream, Fault, Usage, refused_url
from tests.support.upstreams.config import model, provider, with_models

WHOLE = "".join(TEXT)
BACKUP_TEXT = ("Backup", " answer", ".")
# The matrix never opens a circuit; breaker behaviour has its own tests.
NO_TRIP = {"failure_threshold": 1000, "cooldown_s": 1}
READ_TIMEOUT = 0.15


class Env:
    """The fakes (openai, anthropic, tgi, backup) and a client of the gateway."""

    def __init__(self, fakes: dict[str, FakeUpstream], client: Any, running: Any) -> None:
        self.fakes = fakes
        self.client = client
        self.running = running

    def reset(self) -> None:
        for name, fake in self.fakes.items():
            fake.faults, fake.default, fake.usage = [], Fault(), Usage()
            fake.text = BACKUP_TEXT if name == "backup" else TEXT
            fake.seen.clear()
            fake.disconnects.clear()


def matrix_config(fakes: dict[str, FakeUpstream]) -> dict[str, Any]:
    backup = fakes["backup"].url
    # A primary's short read timeout turns its hangs into failovers at once. The backup
    # never fails in the matrix: a short timeout there would only measure the machine's
    # load (on a busy one, a healthy backup's first byte can take longer).
    fast: dict[str, Any] = {"read_timeout_s": READ_TIMEOUT, "breaker": NO_TRIP}
    steady: dict[str, Any] = {"breaker": NO_TRIP}
    models = []
    for fmt in ("openai", "anthropic", "tgi"):
        primary = provider(f"{fmt}-primary", fmt, fakes[fmt].url, **fast)
        models.append(
            model(
                f"{fmt}-failover",
                primary,
                provider(f"{fmt}-backup", "openai", backup, "backup", **steady),
            )
        )
        models.append(
            model(f"{fmt}-alone", provider(f"{fmt}-alone-primary", fmt, fakes[fmt].url, **fast))
        )
    models.append(
        model(
            "refused-failover",
            provider("refused-primary", "openai", refused_url(), **fast),
            provider("refused-backup", "openai", backup, "backup", **steady),
        )
    )
    models.append(
        model("refused-alone", provider("refused-alone-primary", "openai", refused_url()))
    )
    return with_models(*models)


# Faults that strike before the first token, each failing over.
BEFORE_FIRST_TOKEN: list[tuple[str, Fault, str]] = [
    ("500", Fault("status", 500), "HTTP 500"),
    ("503", Fault("status", 503), "HTTP 503"),
    ("429", Fault("status", 429, retry_after="7"), "HTTP 429"),
    ("401", Fault("status", 401), "HTTP 401"),
    ("slow-headers", Fault("slow_headers", delay_s=1), "timed out"),
    ("hang", Fault("hang"), "timed out"),
    ("malformed", Fault("malformed", after_tokens=0), "malformed"),
    ("cut-at-0", Fault("cut", after_tokens=0), "without"),
    ("abort-at-0", Fault("abort", after_tokens=0), "closed the connection"),
]
