"""Glob patterns over workspace-relative POSIX paths, shared by workspace ``ignore`` and the file evaluators.

A pattern matches a whole relative path (``src/app.py``), never a part of it: ``*`` and ``?`` stay within one
path segment, ``**`` as a whole segment matches any number of segments (none included), ``[abc]`` is a character
class and ``{a,b}`` alternatives. Names starting with a dot are matched like any other. So ``*.py`` matches
top-level Python files only and ``**/*.py`` Python files at any depth. Matching is done by wcmatch, on strings:
the filesystem is never read.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from wcmatch import glob

__all__ = ["matches_any", "matching"]

_FLAGS = glob.GLOBSTAR | glob.DOTGLOB | glob.BRACE


def matches_any(path: str, patterns: Sequence[str]) -> bool:
    """Return whether the relative POSIX ``path`` matches at least one of ``patterns``."""
    return bool(patterns) and glob.globmatch(path, list(patterns), flags=_FLAGS)


def matching(paths: Iterable[str], pattern: str) -> list[str]:
    """Return the ``paths`` that ``pattern`` matches, in their order."""
    return [path for path in paths if glob.globmatch(path, pattern, flags=_FLAGS)]
