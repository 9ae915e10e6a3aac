"""Labelled outcomes to train a scorer on: CSV files of per-model correctness, or feedback.

The CSV format is RouteLLM's (one row per prompt, a `prompt` column, then one column per
model holding True/False or a score in [0, 1]). A prompt's training target says how much it
needed the stronger model: 1 when the cheaper model fell short and the stronger one did not.
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

WEAK_MODEL = "mistralai/Mixtral-8x7B-Instruct-v0.1"
STRONG_MODEL = "gpt-4-1106-preview"

Label = Literal["strong-only", "weak-fails"]
# What a training target of 1 means, per label; both are reported by bench/routing_eval.
LABELS: dict[str, str] = {
    "strong-only": "1 when the cheaper model fell short and the stronger one did not",
    "weak-fails": "1 when the cheaper model fell short",
}

# Prompts in the published data run to a few thousand characters; responses are longer.
csv.field_size_limit(min(sys.maxsize, 2**31 - 1))


@dataclass(frozen=True)
class Outcome:
    """How the cheaper and the stronger model did on one prompt, each in [0, 1]."""

    prompt: str
    weak: float
    strong: float
    weak_response: str = ""
    strong_response: str = ""


@dataclass(frozen=True)
class Example:
    """One training example: a prompt and how much it needed the stronger model, in [0, 1]."""

    prompt: str
    target: float
    max_tokens: int | None = None


def score(cell: str) -> float:
    """A CSV cell as a score in [0, 1]: True/False, or a number already in that range."""
    text = cell.strip().lower()
    if text in ("true", "yes", "correct"):
        return 1.0
    if text in ("false", "no", "incorrect", ""):
        return 0.0
    return min(1.0, max(0.0, float(text)))


def read_contaminated(paths: Iterable[Path]) -> set[str]:
    """The `eval_prompt` of every line of the given JSONL files: prompts to leave out."""
    prompts: set[str] = set()
    for path in paths:
        with open(path, encoding="utf-8") as lines:
            for line in lines:
                if line.strip():
                    prompts.add(json.loads(line)["eval_prompt"])
    return prompts


def read_outcomes(
    paths: Iterable[Path],
    *,
    weak: str = WEAK_MODEL,
    strong: str = STRONG_MODEL,
    exclude: set[str] | frozenset[str] = frozenset(),
) -> list[Outcome]:
    """Every row of the CSV files whose prompt is not in `exclude`, in file order."""
    outcomes = []
    for path in paths:
        with open(path, encoding="utf-8", newline="") as rows:
            for row in csv.DictReader(rows):
                if row["prompt"] in exclude:
                    continue
                outcomes.append(
                    Outcome(
                        prompt=row["prompt"],
                        weak=score(row[weak]),
                        strong=score(row[strong]),
                        weak_response=row.get(f"{weak}_response") or "",
                        strong_response=row.get(f"{strong}_response") or "",
                    )
                )
    return outcomes


def target(outcome: Outcome, label: Label = "strong-only") -> float:
    """The training target in [0, 1]. `strong-only`: how far the stronger model's result
    exceeds the cheaper one's (with True/False outcomes, 1 exactly when the cheaper model
    was wrong and the stronger one right); `weak-fails`: how far the cheaper one fell short.
    """
    if label == "weak-fails":
        return 1.0 - outcome.weak
    return max(0.0, outcome.strong - outcome.weak)


def examples_from_outcomes(
    outcomes: Iterable[Outcome], label: Label = "strong-only"
) -> Iterator[Example]:
    """Training examples from per-model outcomes."""
    for outcome in outcomes:
        yield Example(outcome.prompt, target(outcome, label))


def success_rates(
    paths: Iterable[Path], *, exclude: set[str] | frozenset[str] = frozenset()
) -> dict[str, float]:
    """Every model column's mean score over the CSV files: each model's quality prior.
    A model's column holds a score in every row (True/False or 0 to 1); other columns
    (`prompt`, response texts, categories) are left out."""
    totals: dict[str, list[float]] = {}
    other: set[str] = {"prompt"}
    for path in paths:
        with open(path, encoding="utf-8", newline="") as rows:
            for row in csv.DictReader(rows):
                if row["prompt"] in exclude:
                    continue
                for column, cell in row.items():
                    if column in other:
                        continue
                    try:
                        totals.setdefault(column, []).append(score(cell or ""))
                    except ValueError:
                        other.add(column)
    return {m: round(sum(v) / len(v), 4) for m, v in totals.items() if v and m not in other}


def examples_from_feedback(rows: Iterable[tuple[str, float]]) -> Iterator[Example]:
    """Training examples from (prompt, score) feedback on answers of the cheaper model.

    A score of 1 means the cheaper model's answer was right, so the prompt did not need the
    stronger one; 0 means it fell short.
    """
    for prompt, answer_score in rows:
        yield Example(prompt, 1.0 - min(1.0, max(0.0, float(answer_score))))
