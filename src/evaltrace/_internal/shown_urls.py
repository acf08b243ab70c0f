"""A URL as evaltrace may show it in a log line or an error: without the parts that carry credentials.

A base URL or endpoint may hold a secret in its userinfo (``https://user:token@proxy/v1``) or its query string
(``?api-key=...``, an Azure-style proxy); a fragment may too (``#access_token=``). Those parts are replaced by
``***``, so the line still says where the call went and that something was there.
"""

from __future__ import annotations

_HIDDEN = "***"


def shown_url(url: str) -> str:
    """Return ``url`` without its userinfo, query string and fragment (each replaced by ``***``).

    Works on text that is not a valid URL too (a ``user:token@host:port`` without a scheme, as a wrong setting
    may be): whatever comes before the last ``@`` ahead of the query is taken for userinfo.
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    cut = min((i for i in (rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
    location, tail = rest[:cut], rest[cut:]
    if "@" in location:
        location = _HIDDEN + "@" + location.rpartition("@")[2]
    if tail:
        tail = tail[0] + _HIDDEN
    return f"{scheme}{sep}{location}{tail}"
