"""Text helpers shared by the evaluators: sentences, words, normalisation and number parsing."""

from __future__ import annotations

import re
import string
import unicodedata

_SENTENCE_END = re.compile(r"(?<=[.!?\u3002\uff01\uff1f])\s+|\n+")
_WORD = re.compile(r"\w+(?:[-'’]\w+)*", re.UNICODE)
_SPACES = re.compile(r"\s+")
_PUNCT_TABLE = str.maketrans("", "", string.punctuation + "“”‘’«»…–—")

# A number with optional thousands separators, decimals and a magnitude suffix ("1,200,000", "1.2M", "3 billion").
_NUMBER = re.compile(
    r"(?<![\w.])(?P<sign>[-+−]?)(?P<num>\d{1,3}(?:[,\u00a0 _]\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)"
    r"(?:\s?(?P<suffix>thousand|million|billion|trillion|bn|mn|[kKmMbBtT])(?![a-zA-Z]))?"
    r"(?P<pct>\s?%)?",
)
_SUFFIX = {
    "k": 1e3,
    "thousand": 1e3,
    "m": 1e6,
    "mn": 1e6,
    "million": 1e6,
    "b": 1e9,
    "bn": 1e9,
    "billion": 1e9,
    "t": 1e12,
    "trillion": 1e12,
}


def split_sentences(text: str) -> list[str]:
    """Split ``text`` into stripped, non-empty sentences (on ., !, ? and CJK stops followed by space, and newlines)."""
    return [part.strip() for part in _SENTENCE_END.split(text) if part and part.strip()]


def words(text: str) -> list[str]:
    """Return the words of ``text`` (Unicode word characters, keeping inner hyphens and apostrophes)."""
    return _WORD.findall(text)


def normalise(text: str, *, case_sensitive: bool = False, punctuation: bool = True) -> str:
    """Return ``text`` NFKC-normalised with whitespace collapsed, case-folded and without punctuation by default."""
    result = unicodedata.normalize("NFKC", text)
    if not punctuation:
        result = result.translate(_PUNCT_TABLE)
    if not case_sensitive:
        result = result.casefold()
    return _SPACES.sub(" ", result).strip()


def parse_numbers(text: str) -> list[float]:
    """Return every number in ``text`` as a float, with separators removed and magnitude suffixes applied.

    ``"1200000"``, ``"1,200,000"``, ``"1.2M"`` and ``"1.2 million"`` all give ``1200000.0``; ``"15%"`` gives 15.0.
    """
    values: list[float] = []
    for match in _NUMBER.finditer(text):
        raw = re.sub(r"[,\u00a0 _]", "", match.group("num"))
        value = float(raw)
        suffix = (match.group("suffix") or "").lower()
        value *= _SUFFIX.get(suffix, 1.0)
        if match.group("sign") in ("-", "−"):
            value = -value
        values.append(value)
    return values


def parse_number(value: object) -> float | None:
    """Return ``value`` as a number when it is one (or a string that is exactly one number), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        found = parse_numbers(value)
        stripped = _NUMBER.sub("", value).strip(" $€£¥")
        if len(found) == 1 and not stripped:
            return found[0]
    return None


def numbers_equal(a: float, b: float) -> bool:
    """Return whether two parsed numbers are the same value (relative tolerance 1e-9)."""
    return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))
