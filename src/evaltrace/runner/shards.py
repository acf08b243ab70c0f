"""``--shard i/N``: which (case, variant) cells one shard of a run executes.

The cells are sorted by (case id, variant name) and dealt round-robin: shard ``i`` (1-based) takes every N-th
cell starting at the ``i``-th. Sorting by the ids alone (no ``hash()``, no dataset order) makes the slice the same
on every machine and under any ``PYTHONHASHSEED``, so N independent jobs of a CI matrix or a batch scheduler cover
every cell exactly once, and dealing keeps the shards within one cell of each other in size.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, Field

from evaltrace.exceptions import EvaltraceError

__all__ = ["ShardError", "ShardSpec", "parse_shard", "shard_cells"]


class ShardError(EvaltraceError, ValueError):
    """A malformed ``--shard``, or shards that cannot be merged (missing, duplicated, of another config)."""


class ShardSpec(BaseModel):
    """One shard of a run.

    Attributes:
        index: Which shard, 1-based.
        count: How many shards the run is split into.
    """

    index: int = Field(ge=1)
    count: int = Field(ge=1)

    def label(self) -> str:
        """``i/N``, as given on the command line."""
        return f"{self.index}/{self.count}"


def parse_shard(text: str) -> ShardSpec:
    """Parse ``i/N`` (1 <= i <= N).

    Raises:
        ShardError: It is not two whole numbers ``i/N`` with 1 <= i <= N.
    """
    index, sep, count = text.partition("/")
    if not sep or not index.strip().isdigit() or not count.strip().isdigit():
        raise ShardError(f"--shard expects i/N (e.g. 2/4), got {text!r}")
    i, n = int(index), int(count)
    if n < 1 or not 1 <= i <= n:
        raise ShardError(f"--shard {text}: i must be between 1 and N (N >= 1)")
    return ShardSpec(index=i, count=n)


def shard_cells(cells: Iterable[tuple[str, str]], shard: ShardSpec) -> set[tuple[str, str]]:
    """The (case id, variant name) cells of ``cells`` that belong to ``shard``."""
    ordered = sorted(set(cells))
    return set(ordered[shard.index - 1 :: shard.count])
