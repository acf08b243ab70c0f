"""Encoding guardrail: replacement and control characters, mixed-script words and mojibake in the answer."""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from typing import Any

from evaltrace.evaluators._base import PASS_RATE, DeterministicEvaluator, Verdict, answer_text, checked_threshold
from evaltrace.schema import EvalCase, Trace

# Scripts that look alike (homoglyph attacks, broken transliteration); mixing them inside one word is suspect.
_CONFUSABLE_SCRIPTS = frozenset({"LATIN", "CYRILLIC", "GREEK", "ARMENIAN"})
_ALLOWED_CONTROLS = frozenset("\t\n\r")
_WORD = re.compile(r"\w+", re.UNICODE)
# UTF-8 bytes decoded as cp1252/latin-1: "Ã©" (é), "â€™" (’), "Â " (nbsp)...
_MOJIBAKE = re.compile(
    r"(?:[ÂÃ][\u0080-\u00bf]|â€[\u0080-\u00bf\u2018-\u201e\u2020-\u2030\u0152\u0153\u0160\u0161\u0178\u017d\u017e™œ]|Ã[ƒ‚]|ï»¿)"
)


def _script(char: str) -> str | None:
    if not char.isalpha():
        return None
    name = unicodedata.name(char, "")
    return name.split(" ", 1)[0] if name else None


def _char_findings(text: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for index, char in enumerate(text):
        category = unicodedata.category(char)
        if char == "\ufffd":
            found.append({"type": "replacement_character", "start": index, "end": index + 1})
        elif category == "Cc" and char not in _ALLOWED_CONTROLS:
            found.append(
                {"type": "control_character", "start": index, "end": index + 1, "codepoint": f"U+{ord(char):04X}"}
            )
        elif category in ("Cs", "Co", "Cn"):
            found.append(
                {"type": "invalid_character", "start": index, "end": index + 1, "codepoint": f"U+{ord(char):04X}"}
            )
    return found


def _mixed_script_findings(text: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for match in _WORD.finditer(text):
        scripts = {s for ch in match.group(0) if (s := _script(ch)) in _CONFUSABLE_SCRIPTS}
        if len(scripts) > 1:
            found.append(
                {"type": "mixed_script", "start": match.start(), "end": match.end(), "scripts": sorted(scripts)}
            )
    return found


def _mojibake_findings(text: str) -> list[dict[str, Any]]:
    return [{"type": "mojibake", "start": m.start(), "end": m.end()} for m in _MOJIBAKE.finditer(text)]


def encoding_findings(text: str) -> list[dict[str, Any]]:
    """Return every encoding problem in ``text`` with its type and span, ordered by position."""
    findings = _char_findings(text) + _mixed_script_findings(text) + _mojibake_findings(text)
    return sorted(findings, key=lambda f: (f["start"], f["type"]))


class EncodingGuardrail(DeterministicEvaluator):
    """The answer is clean text, free of encoding damage.

    No U+FFFD, no control characters (other than tab/newline), no surrogates, private-use or unassigned code points, no word mixing Latin/Cyrillic/Greek/Armenian letters, no mojibake
    (UTF-8 read as cp1252, e.g. ``Ã©``). Score 1.0 without findings else 0.0; passes with no finding.
    ``threshold`` is the share of cases that must be clean over a run (default 1.0).
    """

    name = "encoding_guardrail"
    threshold_of = PASS_RATE

    def __init__(
        self, *, field: str = "output.final_answer", allow: tuple[str, ...] = (), threshold: float = 1.0
    ) -> None:
        """Configure the check.

        Args:
            field: Dotted path of the Trace to check.
            allow: Finding types to ignore (``replacement_character``, ``control_character``,
                ``invalid_character``, ``mixed_script``, ``mojibake``).
            threshold: Share of cases that must be clean (the run's pass rate), in [0, 1].

        Raises:
            ValueError: A threshold outside [0, 1].
        """
        self.field = field
        self.allow = frozenset(allow)
        self.threshold = checked_threshold(threshold)

    def check(self, trace: Trace, case: EvalCase | None) -> Verdict:
        """Scan the field."""
        text = answer_text(trace, self.field)
        findings = [f for f in encoding_findings(text) if f["type"] not in self.allow]
        counts = Counter(f["type"] for f in findings)
        reason = "clean text" if not findings else "found " + ", ".join(f"{n} {t}" for t, n in sorted(counts.items()))
        return Verdict(
            not findings, 0.0 if findings else 1.0, reason, {"findings": findings[:100], "counts": dict(counts)}
        )
