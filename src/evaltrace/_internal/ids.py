"""Evaluation ids for the live pipeline: ``"eval_"`` and a version-4 UUID, without a system call per id.

``uuid.uuid4()`` reads 16 bytes from ``os.urandom`` per id (a system call and a UUID object): a visible share of
a cheap evaluation's cost. Here the random bits come from a private generator seeded from ``os.urandom``
(never the ``random`` module's, which user code may seed to a fixed value) and reseeded in a forked child,
so parent and child never repeat each other's ids. Ids need uniqueness, not secrecy.

Formatting one 128-bit number into the 8-4-4-4-12 text took ~9k instructions per id (a hex conversion, five slices
and a join), more than the rest of a result's construction. Ids are therefore made :data:`_BATCH` at a time, as
the text itself: random bytes become hex digits through one ``bytes.translate`` (a byte's low four bits pick the
digit: 256 is a multiple of 16, so each digit is uniform), strided slice assignments write the prefix, the dashes,
the version digit ``4`` and the variant digit (``8``, ``9``, ``a`` or ``b``, uniform, from a random digit), and one
``split`` cuts the ids apart. Each id has the 122 random bits of a version-4 UUID.
"""

from __future__ import annotations

import os
import random

_BATCH = 256
_PREFIX = b"eval_"
_TEXT = len(_PREFIX) + 36  # "eval_" and the UUID's text
_STRIDE = _TEXT + 1  # and a space, for split()
_HEX_DIGIT = bytes(b"0123456789abcdef"[b & 0xF] for b in range(256))
_VARIANT_DIGIT = bytes.maketrans(b"0123456789abcdef", b"89ab89ab89ab89ab")  # 10xx: RFC 4122's variant bits
_rng = random.Random(os.urandom(32))
_ready: list[str] = []  # ids made and not handed out yet (list.pop and list.extend are atomic: no lock)


def _reseed() -> None:
    _ready.clear()  # made from the parent's state: the parent hands them out too
    _rng.seed(os.urandom(32))


os.register_at_fork(after_in_child=_reseed)


def _make_batch() -> list[str]:
    """``_BATCH`` fresh ids (see the module's docstring)."""
    text = bytearray(_rng.randbytes(_STRIDE * _BATCH).translate(_HEX_DIGIT))
    for at, byte in enumerate(_PREFIX):
        text[at::_STRIDE] = bytes((byte,)) * _BATCH
    uuid_at = len(_PREFIX)
    for at in (8, 13, 18, 23):  # the dashes of 8-4-4-4-12
        text[uuid_at + at :: _STRIDE] = b"-" * _BATCH
    text[uuid_at + 14 :: _STRIDE] = b"4" * _BATCH  # the version
    variant = uuid_at + 19
    text[variant::_STRIDE] = text[variant::_STRIDE].translate(_VARIANT_DIGIT)
    text[_TEXT::_STRIDE] = b" " * _BATCH
    return text.decode("ascii").split()


def evaluation_id() -> str:
    """Return a fresh evaluation id: ``"eval_"`` followed by a version-4 UUID in its usual text form."""
    while True:
        try:
            return _ready.pop()
        except IndexError:  # used up (or another thread took the last ones meanwhile): a new batch
            _ready.extend(_make_batch())
