"""Evaluation ids for the live pipeline: ``"eval_"`` and a version-4 UUID, without a system call per id.

``uuid.uuid4()`` reads 16 bytes from ``os.urandom`` per id (a system call and a UUID object): a visible share of
a cheap evaluation's cost. Here the 128 bits come from a private generator seeded from ``os.urandom``
(never the ``random`` module's, which user code may seed to a fixed value) and reseeded in a forked child,
so parent and child never repeat each other's ids. Ids need uniqueness, not secrecy.
"""

from __future__ import annotations

import os
import random

_VERSION_4 = (4 << 76) | (0b10 << 62)  # the version nibble and the RFC 4122 variant bits
_CLEAR = ~((0xF << 76) | (0b11 << 62))
_rng = random.Random(os.urandom(32))


def _reseed() -> None:
    _rng.seed(os.urandom(32))


os.register_at_fork(after_in_child=_reseed)


def evaluation_id() -> str:
    """Return a fresh evaluation id: ``"eval_"`` followed by a version-4 UUID in its usual text form."""
    h = f"{(_rng.getrandbits(128) & _CLEAR) | _VERSION_4:032x}"
    return f"eval_{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
