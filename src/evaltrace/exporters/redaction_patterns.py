"""The built-in detectors of ``configure(redact=True)``: secrets, addresses and personal data in free text.

A detector finds spans of text of one kind (``API_KEY``, ``IP_ADDRESS``, ...). Where a shape alone matches too
much, a candidate regex is confirmed by a validator: ``ipaddress`` for IPv4/IPv6 (so ``1.2.3`` or
``999.1.1.1`` stay), libphonenumber (``phonenumbers``) for phone numbers and ``python-stdnum`` for IBANs. The
last two are the optional ``pii`` extra; without them phones fall back to a plain regex and IBANs are not
detected (see docs/reliability.md).

Order matters: whole secrets (PEM blocks, JWTs, vendor keys) go first so that a generic pattern (a phone, a
card number) never masks half of one and leaves the rest readable.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

Finder = Callable[[str], Iterator[tuple[int, int]]]


@dataclass(frozen=True)
class Detector:
    """Finds the spans of one kind of sensitive text.

    Attributes:
        label: Shown in the mask, ``[REDACTED:<label>]``.
        find: Yields ``(start, end)`` of each occurrence in a text.
    """

    label: str
    find: Finder


def regex_finder(pattern: re.Pattern[str], valid: Callable[[str], bool] | None = None) -> Finder:
    """Return a finder yielding the matches of ``pattern`` (those ``valid`` accepts, when given)."""

    def find(text: str) -> Iterator[tuple[int, int]]:
        for match in pattern.finditer(text):
            if valid is None or valid(match.group()):
                yield match.span()

    return find


def _valid_ip(candidate: str) -> bool:
    try:
        ipaddress.ip_address(candidate)
    except ValueError:
        return False
    return True


# Secrets. Lengths are minimums of the real formats, so a bare prefix in prose ("the sk- prefix") stays.
_PRIVATE_KEY = re.compile(
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----.*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----", re.DOTALL
)
_JWT = re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")
_API_KEYS = re.compile(
    "|".join(
        (
            r"\bsk-ant-[A-Za-z0-9_\-]{20,}",  # Anthropic
            r"\b(?:sk|pk|rk)-(?:proj-|svcacct-|admin-|live-|test-|lf-)?[A-Za-z0-9_\-]{16,}",  # OpenAI, Langfuse
            r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}",  # Stripe secret and restricted keys
            r"\bAIza[0-9A-Za-z_\-]{35}(?![0-9A-Za-z_\-])",  # Google API keys
            r"\bxox[baprs]-[A-Za-z0-9\-]{10,}",  # Slack
            r"\bhf_[A-Za-z0-9]{30,}\b",  # Hugging Face
            r"\bglpat-[A-Za-z0-9_\-]{20,}",  # GitLab personal access tokens
        )
    )
)
_AWS_KEY = re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")
_GITHUB_TOKEN = re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})\b")
_BEARER = re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._\-~+/]{16,}=*")
_EMAIL = re.compile(r"\b[A-Za-z0-9._%+\-]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}\b")

# Addresses: candidates confirmed by ``ipaddress``. Not inside a longer dotted or colon-separated run, so a
# version "1.2.3.4.5" or a clock "12:30:45" is not an address.
_IPV6 = re.compile(
    r"(?<![\w:.])(?:[0-9A-Fa-f]{0,4}:){2,7}(?:[0-9A-Fa-f]{1,4}|\d{1,3}(?:\.\d{1,3}){3})?(?:%[\w.]+)?(?![\w:.])"
)
_IPV4 = re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?!\w|\.\d)")

_CREDIT_CARD = re.compile(r"\b(?:\d[ \-]?){13,16}\b")
_SSN = re.compile(r"\b\d{3}-\d{2}-\d{4}\b")
_PHONE_FALLBACK = re.compile(r"(?<!\w)\+?\d{1,3}[ .\-]?\(?\d{2,4}\)?[ .\-]?\d{3,4}[ .\-]?\d{3,4}(?!\w)")
_IBAN_CANDIDATE = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}\b")

# Region assumed for phone numbers written without a +country prefix.
PHONE_DEFAULT_REGION = "US"


def _phone_finder() -> Finder:
    """Phones via libphonenumber (valid numbers only) when installed; otherwise the plain regex."""
    try:
        import phonenumbers
    except ImportError:
        return regex_finder(_PHONE_FALLBACK)

    def find(text: str) -> Iterator[tuple[int, int]]:
        matcher = phonenumbers.PhoneNumberMatcher(text, PHONE_DEFAULT_REGION, leniency=phonenumbers.Leniency.VALID)
        for match in matcher:
            yield match.start, match.end

    return find


def _iban_detectors() -> list[Detector]:
    """IBANs, checksum-validated by python-stdnum; none without it (a bare shape matches too many codes)."""
    try:
        from stdnum import iban
    except ImportError:
        return []

    def find(text: str) -> Iterator[tuple[int, int]]:
        for match in _IBAN_CANDIDATE.finditer(text):
            # The grouped form may run on into a following code ("... 0130 00 BIC"): drop trailing groups
            # until the checksum holds.
            candidate = match.group()
            while len(candidate.replace(" ", "")) >= 15:
                if iban.is_valid(candidate):
                    yield match.start(), match.start() + len(candidate)
                    break
                if " " not in candidate:
                    break
                candidate = candidate.rsplit(" ", 1)[0]

    return [Detector("IBAN", find)]


def builtin_detectors() -> list[Detector]:
    """Return the built-in detectors, in the order they are applied."""
    return [
        Detector("PRIVATE_KEY", regex_finder(_PRIVATE_KEY)),
        Detector("JWT", regex_finder(_JWT)),
        Detector("API_KEY", regex_finder(_API_KEYS)),
        Detector("AWS_KEY", regex_finder(_AWS_KEY)),
        Detector("GITHUB_TOKEN", regex_finder(_GITHUB_TOKEN)),
        Detector("BEARER_TOKEN", regex_finder(_BEARER)),
        Detector("EMAIL", regex_finder(_EMAIL)),
        *_iban_detectors(),
        Detector("IP_ADDRESS", regex_finder(_IPV6, _valid_ip)),
        Detector("IP_ADDRESS", regex_finder(_IPV4, _valid_ip)),
        Detector("CREDIT_CARD", regex_finder(_CREDIT_CARD)),
        Detector("SSN", regex_finder(_SSN)),
        Detector("PHONE", _phone_finder()),
    ]
