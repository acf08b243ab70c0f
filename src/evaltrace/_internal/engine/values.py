"""Small readers of provider values that every codec needs: token counts and server addresses.

Kept in one place so the providers agree (a ``True`` is never a count; a bad port never fails a call).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any


def count(value: Any) -> int | None:
    """``value`` when it is an int (a token count), else None; a bool is not a count."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@lru_cache(maxsize=256)  # bounded: a process talks to a handful of base URLs
def host_port(url: str) -> tuple[str | None, int | None]:
    """(host, port) of a URL; the port defaults from the scheme (443 for https, 80 for http).

    A port that is not a number (``http://host:abc``) is read as absent, never raised: the call goes ahead.
    """
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    return parts.hostname, port or {"https": 443, "http": 80}.get(parts.scheme)
