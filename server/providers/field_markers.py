"""A reply written in the field markers a prompt prescribes, for the simulated provider.

Some frameworks (dspy's chat adapter) describe the answer in the system message, each
field under a marker `[[ ## name ## ]]` with a note on its type, and end the user message
with the order to write them in: "Respond with the corresponding output fields, starting
with the field `[[ ## answer ## ]]`, then `[[ ## score ## ]]`, and then ending with the
marker for `[[ ## completed ## ]]`". Markers inside that sentence are the output fields
(markers opening a line are the inputs); the reply writes each under its marker, valued
as its note says (a float, an int, a bool, one of the listed values, a value valid
against a JSON schema), else in simulated words, and ends with the last marker.
"""

from __future__ import annotations

import json
import random
import re
from typing import Any

from server.providers.schema_instance import instance

MARKER = re.compile(r"\[\[ ## (\w{1,64}) ## \]\]")
# How every marker starts: a prompt without it asks for none (a cheap first look).
OPENING = "[[ ## "
# What a field's note says about its type, read from its line in the system message.
NOTES: tuple[tuple[re.Pattern[str], dict[str, Any]], ...] = (
    (re.compile(r"single float value"), {"type": "number"}),
    (re.compile(r"single int value"), {"type": "integer"}),
    (re.compile(r"must be True or False"), {"type": "boolean"}),
)
ONE_OF = re.compile(r"must exactly match \(no extra characters\) one of: (.+)$")
SCHEMA = re.compile(r"must adhere to the JSON schema: (\{.*)$")
MAX_FIELDS = 32


def asked_fields(user: str) -> list[str]:
    """The markers the user message asks the reply in, in order, the closing one last:
    those inside a line of text (a marker opening a line holds an input)."""
    fields: list[str] = []
    for line in user.splitlines():
        if MARKER.match(line.strip()):
            continue
        fields.extend(MARKER.findall(line))
    return list(dict.fromkeys(fields))[:MAX_FIELDS]


def reply(system: str, user: str, seed: int, words: tuple[str, ...]) -> str | None:
    """The reply in the asked markers, None when the user message asks for none."""
    fields = asked_fields(user)
    if len(fields) < 2:  # at least one field and the closing marker
        return None
    *outputs, closing = fields
    rng = random.Random(seed)
    parts = []
    for name in outputs:
        value = _value(_note(system, name), rng, words)
        parts.append(f"[[ ## {name} ## ]]\n{value}")
    parts.append(f"[[ ## {closing} ## ]]")
    return "\n\n".join(parts)


def _note(system: str, name: str) -> str:
    """The note on a field's line of the system message's template (`{name}  # note: ...`)."""
    found = re.search(r"^\{" + re.escape(name) + r"\}\s*#\s*note:(.*)$", system, re.MULTILINE)
    return found.group(1).strip() if found else ""


def _value(note: str, rng: random.Random, words: tuple[str, ...]) -> str:
    for pattern, typed in NOTES:
        if pattern.search(note):
            return json.dumps(instance(typed, rng.randrange(1 << 30), words))
    if options := ONE_OF.search(note):
        return options.group(1).split("; ")[0].strip()
    if (schema := _schema(note)) is not None:
        return json.dumps(instance(schema, rng.randrange(1 << 30), words))
    return "(simulated) " + " ".join(rng.choice(words) for _ in range(rng.randint(3, 12)))


def _schema(note: str) -> dict[str, Any] | None:
    found = SCHEMA.search(note)
    if found is None:
        return None
    try:
        schema, _ = json.JSONDecoder().raw_decode(found.group(1))
    except ValueError:
        return None
    return schema if isinstance(schema, dict) else None
