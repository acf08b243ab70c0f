"""Owner-only files and folders for what evaltrace writes: prompts, outputs, scores and reports.

Every file evaltrace creates is ``0600`` and every folder it creates ``0700``, whatever the process umask, so a
shared machine's other users cannot read recorded prompts. Files are created with that mode (``os.open``), never
created world-readable and tightened afterwards, so there is no window in which they are readable. Folders that
already exist (the working directory, a ``runs_dir`` the user made) are left as they are: their modes are the
user's choice.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = [
    "PRIVATE_DIR_MODE",
    "PRIVATE_FILE_MODE",
    "make_private_dirs",
    "private_opener",
    "write_private_text",
]

PRIVATE_FILE_MODE = 0o600
PRIVATE_DIR_MODE = 0o700


def private_opener(path: str | os.PathLike[str], flags: int) -> int:
    """``opener`` for :func:`open` (or a direct ``os.open``) that creates missing files owner-only (``0600``).

    The umask can only take bits away from ``0600``, so the file is never more open than that; an existing file
    keeps its mode.
    """
    return os.open(path, flags, PRIVATE_FILE_MODE)


def make_private_dirs(path: Path) -> None:
    """Create ``path`` and its missing parents as ``0700`` folders; existing folders are left alone."""
    missing: list[Path] = []
    current = path
    while not current.is_dir():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=PRIVATE_DIR_MODE)
        except FileExistsError:
            if not folder.is_dir():
                raise
            continue  # another writer made it first: its creator chose the mode
        os.chmod(folder, PRIVATE_DIR_MODE)  # mkdir's mode is ANDed with the umask


def write_private_text(path: Path, text: str) -> None:
    """Replace ``path`` atomically with ``text`` (UTF-8) in a new ``0600`` file."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE_MODE)
    os.fchmod(fd, PRIVATE_FILE_MODE)  # a .tmp a killed writer left keeps its old mode through O_TRUNC
    with open(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(tmp, path)
