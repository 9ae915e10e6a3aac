"""The simulated reply in the field markers a prompt prescribes: which markers are asked
(those inside the instruction, not the inputs opening a line), and each field valued as
its note in the system message says."""

from __future__ import annotations

import json

from server.providers.field_markers import asked_fields, reply

SYSTEM = """All interactions will be structured in the following way.

[[ ## question ## ]]
{question}

[[ ## answer ## ]]
{answer}

[[ ## score ## ]]
{score}        # note: the value you produce must be a single float value

[[ ## count ## ]]
{count}        # note: the value you produce must be a single int value

[[ ## sure ## ]]
{sure}        # note: the value you produce must be True or False

[[ ## mood ## ]]
{mood}        # note: the value you produce must exactly match (no extra characters) one of: calm; wild

[[ ## items ## ]]
{items}        # note: the value you produce must adhere to the JSON schema: {"type": "array", "items": {"type": "integer", "minimum": 5, "maximum": 6}, "minItems": 3}

[[ ## completed ## ]]"""
FIELDS = ["answer", "score", "count", "sure", "mood", "items"]
USER = (
    "[[ ## question ## ]]\nWhat now?\n\nRespond with the corresponding output fields, starting "
    + ", then ".join(f"`[[ ## {f} ## ]]`" for f in FIELDS)
    + ", and then ending with the marker for `[[ ## completed ## ]]`."
)
WORDS = ("alpha", "beta")


def test_the_asked_fields_are_those_inside_the_instruction() -> None:
    assert asked_fields(USER) == [*FIELDS, "completed"]
    assert asked_fields("[[ ## question ## ]]\nWhat now?") == []


def test_each_field_is_written_under_its_marker_as_its_note_says() -> None:
    text = reply(SYSTEM, USER, 7, WORDS)
    assert text is not None and text.endswith("[[ ## completed ## ]]")
    values = dict(
        part.split(" ## ]]\n", 1)
        for part in text.removeprefix("[[ ## ").split("\n\n[[ ## ")
        if "\n" in part
    )
    assert list(values) == FIELDS
    assert values["answer"].startswith("(simulated)")
    assert isinstance(json.loads(values["score"]), int | float)
    assert isinstance(json.loads(values["count"]), int)
    assert json.loads(values["sure"]) in (True, False)
    assert values["mood"] == "calm"
    items = json.loads(values["items"])
    assert len(items) >= 3 and all(5 <= i <= 6 for i in items)
    assert reply(SYSTEM, USER, 7, WORDS) == text  # deterministic


def test_no_markers_asked_no_marked_reply() -> None:
    assert reply(SYSTEM, "Just answer.", 1, WORDS) is None
    # A broken schema note: the field is written in words.
    broken = SYSTEM.replace('{"type": "array"', '{"type": ')
    assert "[[ ## items ## ]]\n(simulated)" in (reply(broken, USER, 1, WORDS) or "")
