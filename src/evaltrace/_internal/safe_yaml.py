"""Loading YAML someone else wrote: bounded nesting, bounded alias expansion, no recursive data, libyaml speed.

``yaml.safe_load`` builds no arbitrary objects, but it still trusts the shape of the document: ten nested aliases
(the "billion laughs") turn 655 bytes into a graph that everything downstream (validation, hashing, JSON) walks
as a tree of a billion nodes; ``&a [*a]`` loads as a list containing itself; ten thousand nested ``[`` end in a
``RecursionError``. The loader here tracks, for every node, how many nodes it stands for once aliases are expanded,
and refuses the document when

- nesting is deeper than :data:`MAX_DEPTH`,
- an alias refers to a node that is still open (recursive data),
- the nodes reached through aliases outnumber both :data:`ALIAS_NODE_ALLOWANCE` and the nodes written out,
  i.e. aliases may at most double the document (memory stays proportional to the file).

The events come from libyaml when PyYAML was built with it (``yaml.__with_libyaml__``): scanning and parsing are
then C code. Objects are built from the events in one pass (:class:`_EventBuilder`, with the same guards), not
through PyYAML's node graph and constructor, which took most of the rest of the 82 s a 58 MiB file needed;
documents with merge keys, tagged collections or collections as keys go through the guarded composer instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import yaml
from yaml.composer import Composer, ComposerError
from yaml.constructor import SafeConstructor
from yaml.events import (
    AliasEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceStartEvent,
    StreamEndEvent,
)
from yaml.nodes import Node, ScalarNode
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import Resolver
from yaml.scanner import Scanner

__all__ = ["ALIAS_NODE_ALLOWANCE", "MAX_DEPTH", "WITH_LIBYAML", "YamlLimitError", "load"]

MAX_DEPTH = 100
"""Deepest nesting of sequences and mappings accepted (authored files need a handful of levels)."""
ALIAS_NODE_ALLOWANCE = 100_000
"""Nodes reachable through aliases that are always accepted, however small the document."""
WITH_LIBYAML: bool = bool(getattr(yaml, "__with_libyaml__", False))


class YamlLimitError(yaml.YAMLError):
    """The document is refused: too deep, recursive, or expanding into too many nodes through aliases.

    A :class:`yaml.YAMLError`, so code that already reports malformed YAML reports these the same way.
    """

    def __init__(self, problem: str, mark: Any = None, *, written: int = 0, expanded: int = 0) -> None:
        self.problem = problem
        self.mark = mark  # a yaml.Mark, or libyaml's own
        self.written = written  # for an alias bomb: the nodes the document writes out...
        self.expanded = expanded  # ...and those its aliases stand for
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        super().__init__(f"{problem}{where}")

    def __str__(self) -> str:
        return str(self.args[0])


def _check_expansion(written: int, expanded: int) -> None:
    if expanded > max(ALIAS_NODE_ALLOWANCE, written):
        raise YamlLimitError(
            f"aliases expand to {expanded} nodes, over the limit of {max(ALIAS_NODE_ALLOWANCE, written)} (aliases "
            f"may add {ALIAS_NODE_ALLOWANCE} nodes, or as many as the document writes out)",
            written=written,
            expanded=expanded,
        )


class _Unusual(Exception):
    """Met by the event builder: a shape it leaves to the composer (merge keys, tagged collections, complex keys)."""


class _Frame:
    """An open collection of the event builder."""

    __slots__ = ("anchor", "items", "key", "mapping", "start", "wants_key")

    def __init__(self, items: list[Any] | dict[Any, Any], anchor: str | None, start: int) -> None:
        self.items = items
        self.mapping = isinstance(items, dict)
        self.anchor = anchor
        self.start = start  # nodes counted (aliases expanded) when it opened
        self.key: Any = None
        self.wants_key = True


class _Document:
    """The event builder's state for one document: open collections, anchors, and the node counts of the guards."""

    def __init__(self) -> None:
        self.anchors: dict[str, tuple[Any, int]] = {}  # anchor -> (object, nodes it stands for, aliases expanded)
        self.opened: set[str] = set()  # anchors of the open collections
        self.stack: list[_Frame] = []
        self.written = 0  # nodes written out (an alias counts as one)
        self.total = 0  # nodes so far, aliases expanded
        self.expanded = 0  # nodes reached through aliases
        self.root: Any = None

    def node(self, value: Any, anchor: str | None, size: int = 1) -> None:
        """A node is complete: count it, remember it under its anchor, put it in its collection."""
        self.written += 1
        self.total += size
        if anchor is not None:
            if anchor in self.anchors or anchor in self.opened:
                raise _Unusual  # a duplicate anchor: the composer's error
            self.anchors[anchor] = (value, size)
        self.attach(value)

    def alias(self, event: Any) -> None:
        anchor = event.anchor
        if anchor in self.opened:
            raise YamlLimitError(f"recursive alias *{anchor} (data containing itself)", event.start_mark)
        if anchor not in self.anchors:
            raise ComposerError(None, None, f"found undefined alias {anchor!r}", event.start_mark)
        value, size = self.anchors[anchor]
        self.written += 1
        self.total += size
        self.expanded += size
        self.attach(value)

    def open(self, event: Any, items: list[Any] | dict[Any, Any]) -> None:
        if event.tag not in _DEFAULT_COLLECTION_TAGS:
            raise _Unusual
        if len(self.stack) >= MAX_DEPTH:
            raise YamlLimitError(f"nested more than {MAX_DEPTH} levels deep", event.start_mark)
        if event.anchor is not None:
            if event.anchor in self.anchors or event.anchor in self.opened:
                raise _Unusual  # a duplicate anchor: the composer's error
            self.opened.add(event.anchor)
        self.stack.append(_Frame(items, event.anchor, self.total))

    def close(self) -> None:
        frame = self.stack.pop()
        if frame.anchor is not None:
            self.opened.discard(frame.anchor)
        self.node(frame.items, frame.anchor, self.total + 1 - frame.start)

    def attach(self, value: Any) -> None:
        if not self.stack:
            self.root = value
            return
        parent = self.stack[-1]
        if not parent.mapping:
            parent.items.append(value)  # type: ignore[union-attr]  # a list: not parent.mapping
        elif parent.wants_key:
            if isinstance(value, list | dict):
                raise _Unusual  # an unhashable key: the constructor's error
            parent.key = value
            parent.wants_key = False
        else:
            parent.items[parent.key] = value
            parent.wants_key = True


_STR = "tag:yaml.org,2002:str"
_DEFAULT_COLLECTION_TAGS = frozenset({None, "!", "tag:yaml.org,2002:seq", "tag:yaml.org,2002:map"})
_NOT_FAST_TAGS = frozenset({"tag:yaml.org,2002:merge", "tag:yaml.org,2002:value"})


class _EventBuilder:
    """Python objects straight from the parser's events: what ``safe_load`` builds, without its node graph.

    Composing nodes, then constructing objects from them, is most of the time ``safe_load`` takes; building
    from events in one iterative pass (no recursion, so no depth limit but ours) is several times faster. The
    guards are the composer's; a shape whose construction has more to it (``<<`` merge keys, tags on
    collections, collections as keys, duplicate anchors) raises :class:`_Unusual`, and :func:`load` starts again
    with the composer, whose result or error is then exactly ``safe_load``'s.
    """

    get_event: Callable[[], Any]
    check_event: Callable[..., bool]
    resolve: Callable[..., str]
    yaml_constructors: dict[Any, Callable[..., Any]]

    def build_single(self) -> Any:
        """The one document of the stream (None when empty)."""
        self.get_event()  # stream start
        if self.check_event(StreamEndEvent):
            return None
        start = self.get_event()  # document start
        data = self._build_document()
        self.get_event()  # document end
        if not self.check_event(StreamEndEvent):
            raise ComposerError(
                "expected a single document in the stream",
                start.start_mark,
                "but found another document",
                self.get_event().start_mark,
            )
        return data

    def _build_document(self) -> Any:
        document = _Document()
        while True:
            event = self.get_event()
            kind = event.__class__
            if kind is ScalarEvent:
                document.node(self._scalar(event), event.anchor)
            elif kind is AliasEvent:
                document.alias(event)
            elif kind is SequenceStartEvent:
                document.open(event, [])
            elif kind is MappingStartEvent:
                document.open(event, {})
            else:  # the end of a collection
                document.close()
            if not document.stack:
                _check_expansion(document.written, document.expanded)
                return document.root

    def _scalar(self, event: Any) -> Any:
        tag = event.tag
        if tag is None or tag == "!":
            tag = self.resolve(ScalarNode, event.value, event.implicit)
        if tag == _STR:
            return event.value
        constructor = self.yaml_constructors.get(tag)
        if constructor is None or tag in _NOT_FAST_TAGS:
            raise _Unusual  # the constructor's error, or a merge key
        return constructor(self, ScalarNode(tag, event.value, event.start_mark, event.end_mark, style=event.style))


class _GuardedComposer(Composer):
    """PyYAML's composer with the depth, recursion and expansion checks; it reads events from any parser."""

    peek_event: Callable[[], Any]  # from the parser it is mixed with (yaml.parser.Parser or libyaml's CParser)

    def __init__(self) -> None:
        super().__init__()
        self._depth = 0
        self._written = 0  # nodes written out in the document (an alias counts as one)
        self._expanded = 0  # nodes reached through aliases
        self._total = 0  # nodes composed so far, aliases expanded: an anchored node's size is a difference of it
        self._sizes: dict[str, int] = {}  # anchor -> nodes its node stands for, aliases expanded
        self._open: set[str] = set()  # anchors of the collections being composed

    def compose_document(self) -> Node | None:
        node: Node | None = super().compose_document()
        _check_expansion(self._written, self._expanded)
        self._sizes.clear()
        return node

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        event = self.peek_event()
        anchor = event.anchor
        if event.__class__ is AliasEvent:
            if anchor in self._open:
                raise YamlLimitError(f"recursive alias *{anchor} (data containing itself)", event.start_mark)
            node = super().compose_node(parent, index)  # raises on an undefined alias
            size = self._sizes[anchor]
            self._written += 1
            self._expanded += size
            self._total += size
            return node
        start = self._total
        if event.__class__ is SequenceStartEvent or event.__class__ is MappingStartEvent:
            if self._depth >= MAX_DEPTH:
                raise YamlLimitError(f"nested more than {MAX_DEPTH} levels deep", event.start_mark)
            self._depth += 1
            if anchor is not None:
                self._open.add(anchor)
            try:
                node = super().compose_node(parent, index)
            finally:
                self._depth -= 1
                self._open.discard(anchor)
        else:
            node = super().compose_node(parent, index)
        self._written += 1
        self._total += 1
        if anchor is not None:
            self._sizes[anchor] = self._total - start
        return node


class _PyLoader(Reader, Scanner, Parser, _EventBuilder, _GuardedComposer, SafeConstructor, Resolver):
    """The pure-Python safe loader, guarded (used when PyYAML has no libyaml)."""

    def __init__(self, stream: str) -> None:
        Reader.__init__(self, stream)
        Scanner.__init__(self)
        Parser.__init__(self)
        _GuardedComposer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)


def _loader_class() -> type:
    if not WITH_LIBYAML:
        return _PyLoader
    from yaml._yaml import CParser  # present exactly when WITH_LIBYAML

    class _CLoader(_EventBuilder, _GuardedComposer, CParser, SafeConstructor, Resolver):
        """libyaml's scanner and parser; the guarded composer first in the MRO, so it replaces libyaml's."""

        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            _GuardedComposer.__init__(self)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)

    return _CLoader


_LOADER = _loader_class()


def load(text: str) -> Any:
    """Parse one YAML document like ``yaml.safe_load``, refusing hostile shapes.

    Args:
        text: The document (already decoded: callers report undecodable bytes with the file's name).

    Returns:
        The data (None for an empty document).

    Raises:
        YamlLimitError: Nesting deeper than :data:`MAX_DEPTH`, a recursive alias, or aliases expanding beyond
            their allowance.
        yaml.YAMLError: The text is not valid YAML.
    """
    loader = _LOADER(text)
    try:
        return loader.build_single()
    except _Unusual:
        pass
    finally:
        loader.dispose()
    loader = _LOADER(text)  # from the start, through nodes and PyYAML's constructor
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()
