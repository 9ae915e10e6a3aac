"""The learned difficulty scorer: logistic regression over hashed word n-grams plus the
hand-made features, loaded from a JSON model file that `server.routing.training` writes.

A model may be an ensemble (its "ensemble" entry): the fitted log-odds, weighted, added to
the hand-set feature scorer's log-odds. The hand-set prior carries across domains; the
fitted part adds what the training data showed (see docs/routing-transfer.md for the weights
chosen on leave-one-benchmark-out transfer).

A refitted model (`training.refit`, from the ledger's ratings) holds the model it was
refitted from as its "prior", weighed by its "prior_weight", and per-tag offsets under
"tags" (see `server.routing.tags`): the prompt's tags add their log-odds to the sum. Its
"weights" say how much the prompt's log-odds weigh beside the tags', as the refit chose
on its ratings.

Serving is pure Python: a few regex passes and a few hundred array lookups per prompt.

The shipped default_scorer.json, next to this module, was trained on all of RouteLLM's
evaluation outcomes (lm-sys/RouteLLM, commit 0b64fda, routellm/evals, Apache-2.0: whether
Mixtral-8x7B-Instruct-v0.1 and gpt-4-1106-preview answered each MMLU and GSM8K question
correctly; the questions are MIT-licensed), contaminated prompts dropped. Regenerate it from
the repository root, with the data in ../shared/routing-eval, by running the command stored
in its "command" field:

    python -m server.routing.training --data ../shared/routing-eval \
        --source 'RouteLLM (...)' --out server/routing/default_scorer.json
"""

from __future__ import annotations

import base64
import json
import math
import struct
from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from server.routing import features, tags, text
from server.routing.calibration import Calibration
from server.routing.features import sigmoid

MODEL_FORMAT = "gateway-router-scorer/1"
DEFAULT_MODEL_PATH = Path(__file__).with_name("default_scorer.json")
# A model without an "ensemble" entry: the fitted log-odds alone.
NO_ENSEMBLE = {"learned_weight": 1.0, "feature_weight": 0.0}


class DifficultyScorer(Protocol):
    """Anything that estimates how likely the cheaper model falls short on a prompt."""

    def difficulty(self, prompt: str, max_tokens: int | None = None) -> float:
        """The estimated probability in [0, 1]; the same for the same arguments."""
        ...


def pack_weights(weights: list[float]) -> str:
    """Bucket weights as base64 of little-endian float16: a quarter of the JSON text size."""
    return base64.b64encode(struct.pack(f"<{len(weights)}e", *weights)).decode("ascii")


def unpack_weights(packed: str) -> array:
    raw = base64.b64decode(packed)
    return array("d", struct.unpack(f"<{len(raw) // 2}e", raw))


class LearnedScorer:
    """Difficulty from a trained model file; see `server.routing.training`."""

    def __init__(self, document: dict[str, Any]) -> None:
        if document.get("format") != MODEL_FORMAT:
            raise ValueError(f"not a {MODEL_FORMAT} model: {document.get('format')!r}")
        model = document["model"]
        self.document = document
        self.bits = int(model["hash_bits"])
        self.bucket_weights = unpack_weights(model["bucket_weights_f16"])
        if len(self.bucket_weights) != 1 << self.bits:
            raise ValueError("bucket weight count does not match hash_bits")
        # Standardisation folds into the weights and the intercept once, here.
        intercept = float(model["intercept"])
        self._feature_weights = []
        for name in features.FEATURE_NAMES:
            spec = model["features"].get(name, {"weight": 0.0, "mean": 0.0, "scale": 1.0})
            weight = float(spec["weight"]) / float(spec["scale"])
            self._feature_weights.append(weight)
            intercept -= weight * float(spec["mean"])
        self._intercept = intercept
        ensemble = model.get("ensemble") or NO_ENSEMBLE
        self._learned_weight = float(ensemble["learned_weight"])
        self._feature_weight = float(ensemble["feature_weight"])
        self._scale = float(ensemble.get("scale", 1.0))
        self._shift = float(ensemble.get("shift", 0.0))
        self._prior = features.FeatureScorer()
        # A refitted model (`training.refit`) weighs the model it was refitted from and
        # adds what its traffic's tags say.
        self._base = LearnedScorer(document["prior"]) if "prior" in document else None
        self._base_weight = float(model.get("prior_weight", 0.0))
        self.prompt_weight = float(document.get("weights", {}).get("prompt", 1.0))
        self.tag_offsets: dict[str, tuple[float, float]] = {
            str(tag): (float(fail), float(success))
            for tag, (fail, success) in document.get("tags", {}).get("offsets", {}).items()
        }
        self.calibration = Calibration.from_json(document["calibration"])
        # Each model's share of prompts answered well enough, from outcome files.
        self.quality_priors: dict[str, float] = {
            name: float(value) for name, value in document.get("models", {}).items()
        }

    @classmethod
    def load(cls, path: str | Path = DEFAULT_MODEL_PATH) -> LearnedScorer:
        """Reads a model file; the default is the one shipped next to this module."""
        with open(path, encoding="utf-8") as model_file:
            return cls(json.load(model_file))

    def logit(
        self, prompt: str, max_tokens: int | None = None, tagged: Sequence[str] = ()
    ) -> float:
        """The log-odds behind `difficulty`."""
        found, values = text.buckets(prompt, self.bits), features.extract(prompt, max_tokens)
        return self.logit_of(found, values, tagged)

    def logit_of(self, found: list[int], values: list[float], tagged: Sequence[str] = ()) -> float:
        """The log-odds of an already encoded prompt: its buckets, feature values and tags."""
        prior = self._prior.logit(values) if self._feature_weight else 0.0
        return self._combined(found, values, prior, tagged)

    def _combined(
        self, found: list[int], values: list[float], prior: float, tagged: Sequence[str]
    ) -> float:
        z = self.fitted_logit(found, values) * self._learned_weight + prior * self._feature_weight
        z = z * self._scale + self._shift
        if self._base is not None:
            z += self._base_weight * self._base.logit_of(found, values)
        z *= self.prompt_weight
        return z + tags.offset(self.tag_offsets, tagged) if tagged else z

    def fitted_logit(self, found: list[int], values: list[float]) -> float:
        """The fitted model's own log-odds, without the hand-set prior."""
        weights = self.bucket_weights
        z = sum(weights[i] for i in found) / math.sqrt(len(found)) if found else 0.0
        return (
            self._intercept
            + z
            + sum(w * v for w, v in zip(self._feature_weights, values, strict=True))
        )

    def difficulty(
        self, prompt: str, max_tokens: int | None = None, tagged: Sequence[str] = ()
    ) -> float:
        """The estimated probability in [0, 1] that the cheaper model falls short."""
        return sigmoid(self.logit(prompt, max_tokens, tagged))

    def difficulties(
        self, prompt: str, max_tokens: int | None = None, tagged: Sequence[str] = ()
    ) -> tuple[float, float]:
        """This model's difficulty and the hand-set feature scorer's, from one encoding."""
        values = features.extract(prompt, max_tokens)
        prior = self._prior.logit(values)
        found = text.buckets(prompt, self.bits)
        return sigmoid(self._combined(found, values, prior, tagged)), sigmoid(prior)
