"""Detectors of personal data and secrets: each finding has a type and a span, never the matched value.

Patterns are deliberately conservative: card numbers must pass the Luhn check, IBANs the ISO 7064 mod-97 check,
IPv4 octets must be <= 255, phone numbers need 8-15 digits. Findings that overlap a longer finding of another
type are dropped (a card number is not also reported as a phone number).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

CONTACT_TYPES = frozenset({"email", "phone"})
SENSITIVE_TYPES = frozenset({"credit_card", "ssn", "iban", "ip_address", "api_key", "private_key", "jwt"})
ALL_TYPES = CONTACT_TYPES | SENSITIVE_TYPES


@dataclass(frozen=True)
class Finding:
    """One detected item: its type and character span in the scanned text (the value is never kept)."""

    type: str
    start: int
    end: int


_EMAIL = re.compile(r"(?<![\w.+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b")
_PHONE = re.compile(r"(?<![\w+])(?:\+\d{1,3}[\s.-]?)?(?:\(\d{1,4}\)[\s.-]?)?\d[\d\s.-]{6,}\d(?![\w])")
_CARD = re.compile(r"(?<!\d)(?:\d[ -]?){12,18}\d(?!\d)")
_SSN = re.compile(r"(?<!\d)(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}(?!\d)")
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,4})?\b")
_IPV4 = re.compile(r"(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}(?![\d.])")
_IPV6 = re.compile(
    r"(?<![\w:])(?:[0-9A-Fa-f]{1,4}:){2,7}[0-9A-Fa-f]{1,4}(?![\w:])|(?<![\w:])(?:[0-9A-Fa-f]{1,4}:)+:(?:[0-9A-Fa-f]{1,4}:?)*(?![\w:])"
)
_PRIVATE_KEY = re.compile(r"-----BEGIN (?:[A-Z]+ )*PRIVATE KEY-----")
_JWT = re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")
_API_KEY = re.compile(
    r"\b(?:sk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}"  # OpenAI / Anthropic
    r"|AKIA[0-9A-Z]{16}"  # AWS access key id
    r"|gh[pousr]_[A-Za-z0-9]{36,}"  # GitHub tokens
    r"|github_pat_[A-Za-z0-9_]{40,}"
    r"|xox[abposr]-[A-Za-z0-9-]{10,}"  # Slack
    r"|AIza[0-9A-Za-z_-]{35}"  # Google API key
    r"|(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"  # Stripe
    r"|glpat-[A-Za-z0-9_-]{20,}"  # GitLab
    r"|hf_[A-Za-z0-9]{30,})"  # Hugging Face
    r"|(?i:bearer)\s+[A-Za-z0-9._~+/-]{20,}=*"
)


def luhn_valid(digits: str) -> bool:
    """Return whether a digit string passes the Luhn checksum."""
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = int(char)
        if index % 2 == 1:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def iban_valid(text: str) -> bool:
    """Return whether ``text`` (spaces allowed) is an IBAN with a valid mod-97 check."""
    compact = text.replace(" ", "")
    if not 15 <= len(compact) <= 34:
        return False
    rearranged = compact[4:] + compact[:4]
    return int("".join(str(int(ch, 36)) for ch in rearranged)) % 97 == 1


def _card_ok(value: str) -> bool:
    digits = re.sub(r"\D", "", value)
    return 13 <= len(digits) <= 19 and luhn_valid(digits)


_DATE_LIKE = re.compile(r"\d{4}[-./]\d{1,2}[-./]\d{1,2}|\d{1,2}[-./]\d{1,2}[-./]\d{2,4}")


def _isbn13(digits: str) -> bool:
    return (
        len(digits) == 13
        and digits[:3] in ("978", "979")
        and sum(int(d) * (1 if i % 2 == 0 else 3) for i, d in enumerate(digits)) % 10 == 0
    )


def _phone_ok(value: str) -> bool:
    digits = re.sub(r"\D", "", value)
    if not 8 <= len(digits) <= 15 or _DATE_LIKE.fullmatch(value) or _isbn13(digits):
        return False
    # Dates, versions and plain long integers are not phone numbers; require a separator or a leading "+".
    return value.startswith("+") or value.startswith("(") or bool(re.search(r"[\s.-]", value))


def _ipv4_ok(value: str) -> bool:
    try:
        ipaddress.IPv4Address(value)
    except ValueError:
        return False
    return True


def _ipv6_ok(value: str) -> bool:
    try:
        ipaddress.IPv6Address(value)
    except ValueError:
        return False
    return True


_DETECTORS: tuple[tuple[str, re.Pattern[str], Callable[[str], bool] | None], ...] = (
    ("private_key", _PRIVATE_KEY, None),
    ("jwt", _JWT, None),
    ("api_key", _API_KEY, None),
    ("email", _EMAIL, None),
    ("iban", _IBAN, iban_valid),
    ("credit_card", _CARD, _card_ok),
    ("ssn", _SSN, None),
    ("ip_address", _IPV4, _ipv4_ok),
    ("ip_address", _IPV6, _ipv6_ok),
    ("phone", _PHONE, _phone_ok),
)


def _without_overlaps(findings: Iterable[Finding]) -> list[Finding]:
    kept: list[Finding] = []
    # Earlier detectors win ties; among overlaps the longest span wins.
    for finding in sorted(findings, key=lambda f: -(f.end - f.start)):
        if all(finding.end <= k.start or finding.start >= k.end for k in kept):
            kept.append(finding)
    return sorted(kept, key=lambda f: (f.start, f.type))


def detect(text: str, types: Iterable[str] = ALL_TYPES) -> list[Finding]:
    """Return the findings of the given ``types`` in ``text``, ordered by position.

    Args:
        text: Text to scan.
        types: Finding types to report (see ``ALL_TYPES``).

    Returns:
        Non-overlapping findings; values are never included.
    """
    wanted = set(types)
    found: list[Finding] = []
    for kind, pattern, validate in _DETECTORS:
        for match in pattern.finditer(text):
            if validate is None or validate(match.group(0)):
                found.append(Finding(kind, match.start(), match.end()))
    return [f for f in _without_overlaps(found) if f.type in wanted]
