"""The built-in detectors of ``configure(redact=True)``: secrets, addresses and personal data in free text.

A detector finds spans of text of one kind (``API_KEY``, ``IP_ADDRESS``, ...). Where a shape alone matches too
much, a candidate regex is confirmed by a validator: ``ipaddress`` for IPv4/IPv6 (so ``1.2.3`` or
``999.1.1.1`` stay), libphonenumber (``phonenumbers``) for phone numbers and ``python-stdnum`` for IBANs. The
last two are the optional ``pii`` extra; without them phones fall back to a plain regex and IBANs are not
detected (see docs/reliability.md).

Order matters: whole secrets (PEM blocks, JWTs, vendor keys) go first so that a generic pattern (a phone, a
card number) never masks half of one and leaves the rest readable. Card numbers are confirmed by their Luhn
check digit and a card's grouping, so a dotted version or a random 16-digit reference stays.

Redaction runs on every exported string, so a detector whose shape needs a rare substring (``://``, ``@``,
``hooks.slack.com``) first checks for it with ``in``, which costs far less than a regex scan of the text.
"""

from __future__ import annotations

import base64
import binascii
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


def regex_finder(
    pattern: re.Pattern[str],
    valid: Callable[[str], bool] | None = None,
    *,
    group: str | int = 0,
    needles: tuple[str, ...] = (),
) -> Finder:
    """Return a finder yielding the matches of ``pattern`` (those ``valid`` accepts, when given).

    Args:
        pattern: The candidate shape.
        valid: Confirms a candidate (the text of ``group``).
        group: The part of a match that is masked (a secret after its name: ``AccountKey=<masked>``).
        needles: When given, a text holding none of them cannot match, and is not scanned.
    """

    def find(text: str) -> Iterator[tuple[int, int]]:
        if needles and not any(needle in text for needle in needles):
            return
        for match in pattern.finditer(text):
            value = match.group(group)
            if value and (valid is None or valid(value)):
                yield match.span(group)

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
# HTTP Basic credentials: base64 of "user:password" (confirmed by decoding), so "basic understanding" stays.
# After an ``Authorization`` header name any such token counts; elsewhere only one of a real credential's length
# with a user ("Basic Only plan": "Only" decodes to ":yr", no user; "YTpi" to "a:b"; both too short).
_BASIC = re.compile(
    r"(?i)(?P<header>\bauthorization[\"']?\s*[:=]\s*[\"']?)?\bbasic\s+(?P<token>[A-Za-z0-9+/]{4,}={0,2})(?![A-Za-z0-9+/=])"
)
_BASIC_MIN_TOKEN = 8  # base64 of "ab:cd"
# An AWS secret access key is 40 base64 characters with nothing of its own to recognise it by: it is masked
# after its name (aws_secret_access_key, SecretAccessKey) or within a short distance after its key id.
_AWS_SECRET_VALUE = r"(?<![A-Za-z0-9/+])(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"
_AWS_SECRET_BY_NAME = re.compile(
    r"(?i:(?:\baws[_\s.-]?|\b)secret[_\s-]?access[_\s-]?key)[\"']?\s*(?::|=>?)\s*[\"']?" + _AWS_SECRET_VALUE
)
_AWS_SECRET_BY_ID = re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b[^\n]{1,40}?" + _AWS_SECRET_VALUE)
# Azure storage / Service Bus connection strings: the key after its name (the name and the rest stay readable).
_AZURE_KEY = re.compile(r"(?i)\b(?:Account|SharedAccess)Key\s*=\s*(?P<secret>[A-Za-z0-9+/]{20,}={0,2})")
_AZURE_NEEDLES = ("accountkey", "accesskey")  # looked for in the case-folded text, as the pattern ignores case
_SLACK_WEBHOOK = re.compile(r"\bhttps://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/\-]{16,}")
# Credentials in a URL's query string (absolute, or a path as in a request line): only the value is masked.
_URL_SECRET_PARAM = re.compile(
    r"(?i)[?&](?:api[_-]?key|key|token|access[_-]?token|refresh[_-]?token|id[_-]?token|client[_-]?secret"
    r"|password|secret)=(?P<secret>[^&#\s\"'<>]+)"
)
_URL_STOPS = (" ", "\t", "\n", '"', "'", "<", ">")
# E-mail addresses in any script (jürgen.müller@exämple.de, 用户@例子.广告): the domain needs a dot and a
# top-level label of letters.
_EMAIL = re.compile(r"(?<![\w.%+\-])[\w.%+\-]+@(?:[\w\-]+\.)+[^\W\d_]{2,}\b")

# Addresses: candidates confirmed by ``ipaddress``. Not inside a longer dotted or colon-separated run, so a
# version "1.2.3.4.5" or a clock "12:30:45" is not an address.
_IPV6 = re.compile(
    r"(?<![\w:.])(?:[0-9A-Fa-f]{0,4}:){2,7}(?:[0-9A-Fa-f]{1,4}|\d{1,3}(?:\.\d{1,3}){3})?(?:%[\w.]+)?(?![\w:.])"
)
_IPV4 = re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?!\w|\.\d)")

# A run of groups of 3 or more digits separated by one space, dot, dash or no-break space; cards are then looked
# for in it (a card's groups are never shorter, and "1 2 3" costs nothing).
_DIGIT_RUN = re.compile(r"(?<![\w.\-])\d{3,}(?:[ .\-\u00a0\u2009\u202f]\d{3,})*(?!\w)")
_DIGITS = re.compile(r"\d+")
_CARD_DIGITS = range(13, 20)
# First digits of the card networks (Mastercard 2 and 5, Amex/Diners/JCB 3, Visa 4, Discover/UnionPay 6): an
# ungrouped block must start with one, so ids and timestamps that pass Luhn (a snowflake id, nanoseconds since
# 1970, both starting with 1) are not cards.
_CARD_NETWORKS = frozenset("23456")
_SSN = re.compile(r"\b\d{3}-\d{2}-\d{4}\b")
_PHONE_FALLBACK = re.compile(r"(?<!\w)\+?\d{1,3}[ .\-]?\(?\d{2,4}\)?[ .\-]?\d{3,4}[ .\-]?\d{3,4}(?!\w)")
_IBAN_CANDIDATE = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}\b")

# Region assumed for phone numbers written without a +country prefix.
PHONE_DEFAULT_REGION = "US"


def _luhn(digits: str) -> bool:
    total = 0
    for position, char in enumerate(reversed(digits)):
        value = int(char)
        if position % 2:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def _find_cards(text: str) -> Iterator[tuple[int, int]]:
    """Card numbers written as one block or grouped by spaces, dots or dashes, confirmed by the Luhn check.

    One block must also start with a card network's digit (2 to 6).

    Grouped, a card starts with a group of 4 digits and has groups of 3 to 7 (4-4-4-4, 4-6-5). A run of digit
    groups may hold more than the card ("4111 1111 1111 1111 12/27"): from each group, the longest run of
    following groups that is card-shaped and passes the check is the card.
    """
    for run in _DIGIT_RUN.finditer(text):
        groups = [(m.start(), m.group()) for m in _DIGITS.finditer(run.group())]
        start = 0
        while start < len(groups):
            found = _card_end(groups, start)
            if not found:
                start += 1
                continue
            last_offset, last_group = groups[found - 1]
            yield run.start() + groups[start][0], run.start() + last_offset + len(last_group)
            start = found


def _card_end(groups: list[tuple[int, str]], start: int) -> int:
    """One past the last group of the longest card starting at ``groups[start]``, or 0."""
    first = groups[start][1]
    if len(first) in _CARD_DIGITS:  # one block of digits
        return start + 1 if first[0] in _CARD_NETWORKS and _luhn(first) else 0
    if len(first) != 4:
        return 0
    found = 0
    digits = first
    for end in range(start + 1, len(groups)):
        group = groups[end][1]
        if not 3 <= len(group) <= 7 or len(digits) + len(group) > _CARD_DIGITS[-1]:
            break
        digits += group
        if len(digits) in _CARD_DIGITS and _luhn(digits):
            found = end + 1
    return found


def _valid_basic(token: str, *, header: bool) -> bool:
    """Whether ``token`` is base64 of ``user:password`` (printable text with a colon).

    Out of an ``Authorization`` header, only a token of at least 8 characters whose user is not empty.
    """
    if not header and len(token) < _BASIC_MIN_TOKEN:
        return False
    try:
        decoded = base64.b64decode(token + "=" * (-len(token) % 4), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return False
    colon = decoded.find(":")
    return (colon > 0 or (header and colon == 0)) and decoded.isprintable()


def _find_basic(text: str) -> Iterator[tuple[int, int]]:
    """HTTP Basic credentials (the token after ``Basic``), confirmed by :func:`_valid_basic`."""
    if "asic" not in text and "ASIC" not in text:
        return
    for match in _BASIC.finditer(text):
        if _valid_basic(match.group("token"), header=match.group("header") is not None):
            yield match.span("token")


def _mixed_case(secret: str) -> bool:
    # Random base64 has both cases; a hex digest or a word run of one case is not an AWS secret.
    return any(c.islower() for c in secret) and any(c.isupper() for c in secret)


def _find_url_secrets(text: str) -> Iterator[tuple[int, int]]:
    """The values of credential parameters (``api_key=``, ``key=``, ``token=`` ...) in URL query strings.

    The parameter is found first (its ``?``/``&`` and ``=`` make the scan cheap), then the text before it, back to
    a space or quote, must be a URL (``scheme://`` or a path from ``/``) with the query started. That text is
    read once, left to right: for each parameter only what follows the previous one is searched, so a text of
    many parameters ("&key=1" repeated) costs time linear in its length, not in its length times the parameters.
    """
    if "=" not in text:
        return
    word = 0  # where the text before the current parameter starts (after the last space or quote)
    scanned = 0  # that text is known up to here: whether it holds a "?" and a "://"
    query = scheme = False
    for param in _URL_SECRET_PARAM.finditer(text):
        start = param.start()
        stop = max(text.rfind(char, scanned, start) for char in _URL_STOPS)
        if stop >= 0:  # a new word since the previous parameter
            word = scanned = stop + 1
            query = scheme = False
        end = start + 1  # the parameter's own "?" counts
        query = query or text.find("?", scanned, end) >= 0
        scheme = scheme or text.find("://", max(word, scanned - 2), end) >= 0  # one may straddle ``scanned``
        scanned = end
        if param.group("secret").startswith("[REDACTED:"):  # already masked by a more specific detector
            continue
        if query and (scheme or text.startswith("/", word)):
            yield param.span("secret")


def _find_azure_keys(text: str) -> Iterator[tuple[int, int]]:
    """Azure connection-string keys, in any case (``Accountkey=`` too): the text is case-folded for the check.

    Only a text with an ``=`` is folded (one fast scan rules out most), then two searches in the folded copy,
    which cost less than one per casing of each name.
    """
    if "=" not in text:
        return
    folded = text.casefold()
    if not any(needle in folded for needle in _AZURE_NEEDLES):
        return
    for match in _AZURE_KEY.finditer(text):
        yield match.span("secret")


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
        Detector("SLACK_WEBHOOK", regex_finder(_SLACK_WEBHOOK, needles=("hooks.slack.com",))),
        Detector("API_KEY", regex_finder(_API_KEYS)),
        # Before the key id's own detector: the secret is found by its distance from the unmasked id.
        Detector(
            "AWS_SECRET_KEY", regex_finder(_AWS_SECRET_BY_NAME, _mixed_case, group="secret", needles=("ecret", "ECRET"))
        ),
        Detector(
            "AWS_SECRET_KEY", regex_finder(_AWS_SECRET_BY_ID, _mixed_case, group="secret", needles=("AKIA", "ASIA"))
        ),
        Detector("AWS_KEY", regex_finder(_AWS_KEY)),
        Detector("GITHUB_TOKEN", regex_finder(_GITHUB_TOKEN)),
        Detector("BEARER_TOKEN", regex_finder(_BEARER)),
        Detector("BASIC_AUTH", _find_basic),
        Detector("AZURE_KEY", _find_azure_keys),
        Detector("URL_SECRET", _find_url_secrets),
        Detector("EMAIL", regex_finder(_EMAIL, needles=("@",))),
        *_iban_detectors(),
        Detector("IP_ADDRESS", regex_finder(_IPV6, _valid_ip)),
        Detector("IP_ADDRESS", regex_finder(_IPV4, _valid_ip)),
        Detector("CREDIT_CARD", _find_cards),
        Detector("SSN", regex_finder(_SSN)),
        Detector("PHONE", _phone_finder()),
    ]
