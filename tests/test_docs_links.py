"""Every relative link in the project's Markdown points at a file of the repository (and an existing heading).

README.md, CONTRIBUTING.md, docs/*.md and the other READMEs are read as a user reads them on GitHub: a link
``[text](path#anchor)`` is relative to the file it sits in; ``#anchor`` must be a heading's GitHub slug there.
A Markdown file named in prose (``DESIGN.md``, in backticks or not) must exist too: a reader looks for it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted(
    [
        ROOT / "README.md",
        ROOT / "CONTRIBUTING.md",
        ROOT / "collector" / "README.md",
        ROOT / "benchmarks" / "README.md",
        ROOT / "examples" / "recordings" / "README.md",
        *(ROOT / "docs").glob("*.md"),
    ]
)
_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
# A Markdown file named in prose, in backticks or not (`DESIGN.md`, data-model.md), outside any link and URL.
_NAMED_MD = re.compile(r"(?<![\w/.#-])((?:\.\./|\./)*[\w-]+(?:/[\w.-]+)*\.md)\b")
_LINK_OR_URL = re.compile(r"\[[^\]]*\]\([^)]*\)|<[a-z]+://[^>]*>|[a-z]+://\S+")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)


def _prose(path: Path) -> str:
    """The file without its fenced code blocks (``[i](x)`` in code is not a link)."""
    return _FENCE.sub("", path.read_text(encoding="utf-8"))


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, markup and punctuation dropped, spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading: its text
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    slugs: set[str] = set()
    counts: dict[str, int] = {}
    for heading in _HEADING.findall(_prose(path)):
        slug = github_slug(heading)
        seen = counts.get(slug, 0)
        counts[slug] = seen + 1
        slugs.add(slug if seen == 0 else f"{slug}-{seen}")
    return slugs


def _problems(path: Path, root: Path = ROOT) -> list[str]:
    problems: list[str] = []
    prose = _prose(path)
    for target in [*_LINK.findall(prose), *_IMAGE.findall(prose)]:
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("<"):
            continue  # http(s), mailto: not checked here (no network)
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.exists() or root not in (linked, *linked.parents):
            problems.append(f"{target}: no such file in the repository")
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
            problems.append(f"{target}: no heading #{anchor} in {linked.relative_to(root)}")
    for named in _NAMED_MD.findall(_LINK_OR_URL.sub("", prose)):
        candidates = (path.parent / named, root / named, root / "docs" / named)
        if not any(c.resolve().is_file() and root in c.resolve().parents for c in candidates):
            problems.append(f"`{named}`: names a Markdown file that is not in the repository")
    return problems


@pytest.mark.parametrize("path", DOCS, ids=[str(p.relative_to(ROOT)) for p in DOCS])
def test_every_relative_link_resolves(path: Path) -> None:
    assert path.is_file()
    assert _problems(path) == []


def test_the_checker_catches_a_dangling_link_and_anchor(tmp_path: Path) -> None:
    """The checker itself: a missing file, a missing heading and an unknown backticked .md are each reported."""
    doc = tmp_path / "doc.md"
    doc.write_text(
        "# Title\n\n## A `code` heading, with: punctuation\n\n"
        "[ok](#title) [ok2](#a-code-heading-with-punctuation) [bad](missing.md) [bad2](#nowhere)\n"
        "```\n[in code](ignored.md)\n```\nsee `DESIGN.md`\n"
    )
    problems = _problems(doc, tmp_path)
    assert any(p.startswith("missing.md:") for p in problems)
    assert any(p.startswith("#nowhere:") for p in problems)
    assert any("`DESIGN.md`" in p for p in problems)
    assert not any("ignored.md" in p or "#title" in p or "punctuation" in p for p in problems)
