"""generationConfig values a text model answers anyway, whatever its provider.

Google's SDKs and the frameworks on them send some of Gemini's own keys with every call
(pydantic-ai writes `responseModalities: ["TEXT"]` each time): asking for text, turning a
feature off, or leaving a setting unspecified changes nothing about a text answer, so
such a value does not tie the request to a Gemini upstream. Any other value of these
keys (images or audio asked for, log probabilities turned on...) still does.
"""

from __future__ import annotations

from typing import Any

TEXT_MODALITIES = frozenset({"TEXT", "MODALITY_UNSPECIFIED"})
# Switches whose `false` is every model's behaviour.
OFF_SWITCHES = frozenset(
    {"responseLogprobs", "audioTimestamp", "enableAffectiveDialog", "enableEnhancedCivicAnswers"}
)
UNSPECIFIED = {"mediaResolution": "MEDIA_RESOLUTION_UNSPECIFIED"}


def answered_anyway(key: str, value: Any) -> bool:
    """Whether `generationConfig.<key>: value` leaves a text model's answer as it is."""
    if value is None:
        return True
    if key == "responseModalities":
        return isinstance(value, list) and all(
            isinstance(v, str) and v.upper() in TEXT_MODALITIES for v in value
        )
    if key in OFF_SWITCHES:
        return value is False
    return key in UNSPECIFIED and value == UNSPECIFIED[key]
