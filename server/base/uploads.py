"""The methods whose request carries an uploaded file (a transcription's audio, an
edit's images), each bounded by its documented upload bound rather than by
`server.max_body_bytes`: the facade's form readers and the gRPC transport (which
carries the file from an edge tier to its core in one message) read the bounds here.
"""

from __future__ import annotations

from dataclasses import dataclass

from server.base.audio import MAX_AUDIO_BYTES
from server.base.images import MAX_IMAGE_BYTES

# What a form's other fields and boundaries (or a message's other fields) may add to
# its files' bytes.
FORM_SLACK = 64 * 1024


@dataclass(frozen=True, slots=True)
class Upload:
    """A method's upload: the field a refusal names, and the files' bound in bytes."""

    field: str
    max_bytes: int


_AUDIO = Upload("file", MAX_AUDIO_BYTES)
UPLOADS = {
    "gateway.v1.AudioService.CreateTranscription": _AUDIO,
    "gateway.v1.AudioService.StreamTranscription": _AUDIO,
    "gateway.v1.AudioService.CreateTranslation": _AUDIO,
    "gateway.v1.ImageService.EditImage": Upload("image", MAX_IMAGE_BYTES),
}


def message_bound(method: str, max_body_bytes: int) -> int:
    """The largest request message `method` (its full name) takes: its upload's bound
    and the form's slack, or `max_body_bytes` (whichever is larger)."""
    upload = UPLOADS.get(method)
    if upload is None:
        return max_body_bytes
    return max(max_body_bytes, upload.max_bytes + FORM_SLACK)


def json_body_bound(method: str, max_body_bytes: int) -> int:
    """The largest JSON body `method` takes over REST: an upload's files come in base64
    there (4 characters for every 3 bytes), with the form's slack; else `max_body_bytes`."""
    upload = UPLOADS.get(method)
    if upload is None:
        return max_body_bytes
    return max(max_body_bytes, -(-upload.max_bytes // 3) * 4 + FORM_SLACK)


def largest_message(max_body_bytes: int) -> int:
    """The largest request message any method takes (a transport's own bound)."""
    return max(message_bound(method, max_body_bytes) for method in [*UPLOADS, ""])
