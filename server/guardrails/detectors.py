"""What a guardrail looks for: the built-in detectors and the operator's own patterns,
compiled with RE2 into one pattern per guardrail, so a text is scanned once, in time
linear in its length, whatever the patterns.

A text is scanned as its ASCII look-alike: any script's decimal digits as 0-9, the
full-width forms as ASCII, every space separator (a no-break space, a thin space) as a
space, every dash as a hyphen, and invisible format characters (a zero-width space, a
soft hyphen) left out; a finding covers the original characters. So `４１１１ １１１１…`
or a card number spaced with no-break spaces is the card it reads as.

A built-in match is then checked where its kind has a checksum or a grammar (Luhn for
cards, mod-97 for IBANs, the address parsers for IPs, the SSA's rules for SSNs): a
string of digits that only looks like a card is left alone.

    email        local@domain.tld
    phone        international (+country) or grouped national numbers, 7-15 digits
    credit_card  13-19 digits, spaced or dashed, passing Luhn
    iban         country, check digits and account, passing mod-97
    us_ssn       AAA-GG-SSSS (or spaced), not 000, 666 or 9xx areas, no zero group or serial
    ipv4, ipv6   addresses the standard library parses
    api_key      OpenAI, Anthropic, AWS, GitHub, GitLab, Slack, Google, Hugging Face, Stripe
    jwt          three base64url segments, the first two JSON objects
    private_key  a PEM private key block (an unterminated one to the end of the text)
"""

from __future__ import annotations

import ipaddress
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import re2

from server.base.config import CustomDetectorConfig


@dataclass(frozen=True, slots=True)
class Finding:
    start: int
    end: int
    entity: str  # upper case: EMAIL, CREDIT_CARD...


@dataclass(frozen=True, slots=True)
class Builtin:
    pattern: str
    # The longest match, where the match may hold spaces (a stream holds back that
    # much); None for a token without spaces, which a stream holds back whole anyway.
    spaced_max: int | None = None
    check: Callable[[str], bool] | None = None


def _digits(text: str) -> str:
    return "".join(c for c in text if c.isdigit())


def luhn(text: str) -> bool:
    digits = _digits(text)
    if not 13 <= len(digits) <= 19:
        return False
    total = 0
    for i, c in enumerate(reversed(digits)):
        d = int(c)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def iban(text: str) -> bool:
    compact = text.replace(" ", "")
    if not 15 <= len(compact) <= 34:
        return False
    moved = compact[4:] + compact[:4]
    number = "".join(str(int(c, 36)) for c in moved)
    return int(number) % 97 == 1


def us_ssn(text: str) -> bool:
    area, group, serial = re.split("[- ]", text)
    return area not in ("000", "666") and area[0] != "9" and group != "00" and serial != "0000"


def phone(text: str) -> bool:
    return 7 <= len(_digits(text)) <= 15


def ipv4(text: str) -> bool:
    try:
        ipaddress.IPv4Address(text)
    except ValueError:
        return False
    return True


def ipv6(text: str) -> bool:
    # At least three groups: `d::` in `std::vector` is an address, but not one.
    if sum(1 for group in text.split(":") if group) < 3:
        return False
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return True


_HEX = "[0-9A-Fa-f]"
_KEY_SHAPES = (
    r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}",  # OpenAI
    r"sk-ant-(?:api|admin)\d{2}-[A-Za-z0-9_-]{20,}",  # Anthropic
    r"(?:AKIA|ASIA)[0-9A-Z]{16}",  # AWS access key ids
    r"gh[pousr]_[A-Za-z0-9]{36,255}",
    r"github_pat_[A-Za-z0-9_]{22,255}",
    r"glpat-[A-Za-z0-9_-]{20,64}",
    r"xox[abpors]-[A-Za-z0-9-]{10,200}",  # Slack
    r"AIza[0-9A-Za-z_-]{35}",  # Google
    r"hf_[A-Za-z0-9]{30,64}",
    r"(?:sk|rk)_live_[0-9A-Za-z]{20,200}",  # Stripe
)
BUILTINS: dict[str, Builtin] = {
    # Ordered as the alternation tries them at one position: the longer shapes first.
    "private_key": Builtin(
        r"-----BEGIN[A-Z ]{0,40}PRIVATE KEY-----(?s:.)*?"
        r"(?:-----END[A-Z ]{0,40}PRIVATE KEY-----|\z)"
    ),
    "jwt": Builtin(r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{10,}"),
    "api_key": Builtin(r"\b(?:" + "|".join(_KEY_SHAPES) + r")\b"),
    "email": Builtin(
        r"\b[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
        r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?){0,8}\.[A-Za-z]{2,24}\b"
    ),
    "iban": Builtin(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}\b", 42, iban),
    "credit_card": Builtin(r"\b\d(?:[ -]?\d){12,18}\b", 40, luhn),
    "us_ssn": Builtin(r"\b\d{3}-\d{2}-\d{4}\b|\b\d{3} \d{2} \d{4}\b", 11, us_ssn),
    "ipv6": Builtin(rf"(?:{_HEX}{{0,4}}:){{2,7}}{_HEX}{{0,4}}", None, ipv6),
    # Dotted runs longer than four (a version, 1.2.3.4.5) fail the check whole.
    "ipv4": Builtin(r"\b(?:\d{1,3}\.){3}\d{1,3}(?:\.\d+)*\b", None, ipv4),
    "phone": Builtin(
        r"(?:\+\d{1,3}[ .-]?)?(?:\(\d{1,4}\)[ .-]?|\b\d{2,4}[ .-])\d{2,4}[ .-]\d{3,4}\b"
        r"|\+\d{7,15}\b",
        25,
        phone,
    ),
}


# What every built-in match holds at least one of: a text without any is scanned no
# further (most prose), at a fraction of an RE2 call's cost.
_HINT = re.compile(
    r"[0-9@:]|eyJ|-----BEGIN|sk-|AKIA|ASIA|gh[pousr]_|glpat-|xox|AIza|hf_|github_pat_"
)


class _Folding(dict[int, str | None]):
    """str.translate's table for the ASCII look-alike of a text, filled as characters
    are met (most texts meet few), to a bound: past it, characters are folded uncached."""

    BOUND = 1 << 16

    def __missing__(self, code: int) -> str | None:
        char = chr(code)
        kind = unicodedata.category(char)
        folded: str | None = char
        if kind == "Nd":
            folded = str(unicodedata.digit(char))
        elif kind == "Zs":
            folded = " "
        elif kind == "Pd" or code == 0x2212:  # dashes, and the minus sign
            folded = "-"
        elif kind == "Cf":
            folded = None
        elif 0xFF01 <= code <= 0xFF5E:  # full-width ASCII
            folded = chr(code - 0xFEE0)
        if len(self) < self.BOUND:
            self[code] = folded
        return folded


_FOLDING = _Folding()


def folded(text: str) -> tuple[str, list[int] | None]:
    """`text` as scanned, and where each of its characters was in `text` (None when
    they are where they were: nothing was left out)."""
    if text.isascii():
        return text, None
    out = text.translate(_FOLDING)
    if len(out) == len(text):
        return out, None
    return out, [i for i, char in enumerate(text) if _FOLDING[ord(char)] is not None]


class Scanner:
    """One guardrail's detectors as one RE2 pattern."""

    def __init__(self, detectors: Sequence[str], custom: Sequence[CustomDetectorConfig]) -> None:
        chosen = [name for name in BUILTINS if name in detectors]
        alternatives = [f"(?P<{name}>{BUILTINS[name].pattern})" for name in chosen]
        # Custom groups are named after their index: an operator's name may be a
        # built-in's.
        alternatives += [f"(?P<custom_{i}>{c.regex})" for i, c in enumerate(custom)]
        self._entities = {name: name.upper() for name in chosen}
        self._entities |= {f"custom_{i}": c.name.upper() for i, c in enumerate(custom)}
        self._checks = {name: BUILTINS[name].check for name in chosen}
        self._pattern = re2.compile("|".join(alternatives)) if alternatives else None
        spaced = [BUILTINS[n].spaced_max or 0 for n in chosen] + [c.max_len for c in custom]
        # The longest match a stream must hold back whole, beyond trailing tokens.
        self.longest = max(spaced, default=0)
        self.private_keys = "private_key" in chosen
        self._hint = None if custom else _HINT

    def find(self, text: str) -> list[Finding]:
        if self._pattern is None or not text:
            return []
        scanned, places = folded(text)
        if self._hint is not None and self._hint.search(scanned) is None:
            return []
        found = []
        for match in self._pattern.finditer(scanned):
            group = match.lastgroup
            start, end = match.span()
            if group is None or end == start:
                continue
            check = self._checks.get(group)
            if check is not None and not check(match.group()):
                continue
            if places is not None:
                start, end = places[start], places[end - 1] + 1
            found.append(Finding(start, end, self._entities[group]))
        return found
