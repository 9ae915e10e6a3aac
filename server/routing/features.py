"""Hand-made prompt features and a scorer built on them that needs no training.

The features are the ones that carry across domains: how long the prompt is, whether it
holds code or arithmetic, whether it asks for reasoning, how many parts it has, how much
output it requests and how much of it is in a non-Latin script. `FeatureScorer` weighs them
with fixed, hand-set weights into a difficulty in [0, 1]: the estimated probability that the
cheaper model falls short on the prompt.
"""

from __future__ import annotations

import math
import re
from collections import Counter

from server.routing import text

_WORD = re.compile(r"[^\W\d_]+")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_MATH_SYMBOL = re.compile(r"[=+*/^%<>×÷√∑∫π]|\\frac|\\sqrt|\$\s*\d")
_CODE_MARKS = ("```", "#include", "=>", "()", ";\n", "{\n", "}\n", "</")
_NUMBERED_PART = re.compile(r"^[ \t]*(?:\d+[.)]|[ivx]+[.)]|[-*•])[ \t]+", re.MULTILINE)
_CHOICE_LINE = re.compile(r"^[ \t]*\(?[A-Ha-h][.)][ \t]+.{0,300}$", re.MULTILINE)
_DIGIT = re.compile(r"\d")
# Latin letters, accented ones included, end at U+024F.
_NON_LATIN_LETTERS = re.compile(r"[^\W\d_\u0000-\u024F]+")

# Single words are counted from the word list; phrases by substring search of the lowered text.
_MATH_WORDS = frozenset(
    [
        "calculate",
        "compute",
        "total",
        "percent",
        "percentage",
        "probability",
        "integral",
        "derivative",
        "equation",
        "solve",
        "sum",
        "product",
        "ratio",
        "average",
        "remainder",
        "twice",
        "half",
        "each",
        "per",
        "times",
        "minus",
        "plus",
        "divided",
        "multiplied",
        "fraction",
        "find",
    ]
)
_MATH_PHRASES = ("how many", "how much", "value of")
_CODE_WORDS = frozenset(
    [
        "def",
        "class",
        "return",
        "import",
        "function",
        "console",
        "printf",
        "println",
        "select",
        "const",
        "var",
        "let",
        "lambda",
        "struct",
        "void",
        "int",
    ]
)
_REASONING_WORDS = frozenset(
    [
        "prove",
        "proof",
        "why",
        "explain",
        "derive",
        "justify",
        "reason",
        "demonstrate",
        "analyze",
        "analyse",
        "compare",
        "evaluate",
        "implies",
        "therefore",
        "except",
    ]
)
_REASONING_PHRASES = (
    "step by step",
    "show that",
    "must be true",
    "which of the following",
    "not true",
    "least likely",
    "best explains",
)
_NEGATION_WORDS = frozenset(["not", "except", "never", "false", "incorrect", "least"])
_STATEMENT_PHRASES = ("statement 1", "statement 2", "scenario 1", "scenario 2")

FEATURE_NAMES: tuple[str, ...] = (
    "log_chars",
    "log_words",
    "numbers",
    "digit_share",
    "math_symbols",
    "math_words",
    "code",
    "reasoning",
    "negation",
    "question_marks",
    "sentences",
    "numbered_parts",
    "choices",
    "paired_statements",
    "choice_digit_share",
    "max_tokens",
    "non_latin_share",
)


def extract(prompt: str, max_tokens: int | None = None) -> list[float]:
    """The prompt's features, in the order of `FEATURE_NAMES`.

    Length is measured on the whole prompt, everything else on its clipped head and tail.
    """
    clipped = text.clip(prompt)
    lowered = clipped.lower()
    words = _WORD.findall(lowered)
    # Counting in C (Counter, set intersection) keeps long prompts inside the latency budget.
    counts = Counter(words)
    present = counts.keys()
    math_words = sum(counts[w] for w in present & _MATH_WORDS)
    math_words += sum(lowered.count(p) for p in _MATH_PHRASES)
    code_words = sum(counts[w] for w in present & _CODE_WORDS)
    code_words += sum(clipped.count(m) for m in _CODE_MARKS)
    reasoning_words = sum(counts[w] for w in present & _REASONING_WORDS)
    reasoning_words += sum(lowered.count(p) for p in _REASONING_PHRASES)
    negations = sum(counts[w] for w in present & _NEGATION_WORDS)
    chars = len(clipped) or 1
    choices = _CHOICE_LINE.findall(clipped)
    choice_text = "".join(choices)
    return [
        math.log1p(len(prompt)),
        math.log1p(len(words)),
        math.log1p(len(_NUMBER.findall(clipped))),
        len(_DIGIT.findall(clipped)) / chars,
        math.log1p(len(_MATH_SYMBOL.findall(clipped))),
        math.log1p(math_words),
        math.log1p(code_words),
        math.log1p(reasoning_words),
        math.log1p(negations),
        math.log1p(clipped.count("?")),
        math.log1p(clipped.count(". ") + clipped.count(".\n") + clipped.count("?")),
        math.log1p(len(_NUMBERED_PART.findall(clipped))),
        math.log1p(len(choices)),
        math.log1p(sum(lowered.count(p) for p in _STATEMENT_PHRASES)),
        len(_DIGIT.findall(choice_text)) / (len(choice_text) or 1),
        math.log1p(max_tokens or 0) / math.log(4096),
        sum(map(len, _NON_LATIN_LETTERS.findall(clipped))) / chars,
    ]


# Hand-set log-odds per feature unit; each says which way a feature pushes and how hard.
# Set by judgement and sanity-checked against the routing-eval data, not fitted to it.
_WEIGHTS: dict[str, float] = {
    "log_chars": 0.6,
    "log_words": 0.0,
    "numbers": 0.35,
    "digit_share": 2.0,
    "math_symbols": 0.25,
    "math_words": 0.3,
    "code": 0.35,
    "reasoning": 0.3,
    "negation": 0.15,
    "question_marks": 0.1,
    "sentences": 0.1,
    "numbered_parts": 0.2,
    "choices": 0.0,
    "paired_statements": 0.6,
    "choice_digit_share": 1.0,
    "max_tokens": 0.8,
    "non_latin_share": 1.0,
}
# Puts a one-line factual question near 0.05 and a long multi-step problem near 0.6.
_BIAS = -5.2


def sigmoid(z: float) -> float:
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


class FeatureScorer:
    """Difficulty from hand-made features alone: no training, no model file."""

    def __init__(self, weights: dict[str, float] | None = None, bias: float = _BIAS) -> None:
        chosen = _WEIGHTS if weights is None else weights
        self._weights = [chosen.get(name, 0.0) for name in FEATURE_NAMES]
        self._bias = bias

    def logit(self, values: list[float]) -> float:
        """The log-odds of already extracted feature values."""
        return self._bias + sum(w * v for w, v in zip(self._weights, values, strict=True))

    def difficulty(self, prompt: str, max_tokens: int | None = None) -> float:
        """The estimated probability in [0, 1] that the cheaper model falls short."""
        return sigmoid(self.logit(extract(prompt, max_tokens)))
